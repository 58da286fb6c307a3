"""MCP at the protocol's floor (issue 29, part 1): the server hands back the result its own model
built without a third schema pass, so every tool's results are checked here against their
``outputSchema`` with ``jsonschema``; a whole input layer read as ``npy`` is written once and named
again, every ``.npy`` written straight from the array (the bytes ``np.save`` writes), in the
harness's folder only, never through a link, never another layer's pixels."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case

from imagebench.case.session import open_session
from imagebench.runs.runner import prepare_fixture

pytest.importorskip("mcp")

import mcp.types as types  # noqa: E402
from jsonschema import validators  # noqa: E402

from imagebench.subjects.mcp.errors import ToolError  # noqa: E402
from imagebench.subjects.mcp.folder import READS, McpFolder  # noqa: E402
from imagebench.subjects.mcp.server import build_server  # noqa: E402
from imagebench.subjects.mcp.tools import AgentSession, CaseView  # noqa: E402


def _agent(tmp_path: Path) -> tuple[AgentSession, McpFolder, Any]:
    case = make_toy_case()
    fixture = prepare_fixture(case).fixture
    folder = McpFolder(tmp_path)
    agent = AgentSession(CaseView.of(case), open_session(case, fixture), workspace=tmp_path, reads=folder)
    return agent, folder, fixture


def _served(agent: AgentSession, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], dict[str, Any]]:
    """Each call's result as the low-level server sends it (no client checks it on the way), and
    each tool's published definition."""
    server = build_server(agent)
    low = server._mcp_server

    async def go() -> tuple[list[Any], dict[str, Any]]:
        listed = await low.request_handlers[types.ListToolsRequest](types.ListToolsRequest(method="tools/list"))
        tools = {t.name: t for t in listed.root.tools}
        out = []
        for name, args in calls:
            req = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=args))
            out.append((await low.request_handlers[types.CallToolRequest](req)).root)
        return out, tools

    return asyncio.run(go())


def test_every_served_result_matches_its_output_schema(tmp_path: Path) -> None:
    agent, _, _ = _agent(tmp_path)
    mask = np.zeros((24, 24), np.uint8)
    mask[3:8, 3:9] = 1
    calls = [
        ("get_prompt", {}),
        ("list_layers", {}),
        ("read_layer", {"name": "image", "encoding": "npy"}),
        ("read_layer", {"name": "image", "encoding": "npy"}),
        ("read_layer", {"name": "image", "encoding": "npy", "region": [[0, 4]]}),
        ("read_layer", {"name": "image", "encoding": "base64"}),
        ("read_layer", {"name": "image", "region": [[0, 2], [0, 3]]}),
        ("add_layer", {"name": "mask", "kind": "labels", "data": mask.tolist()}),
        ("update_layer", {"name": "mask", "data": mask.tolist()}),
        ("set_answer", {"name": "area", "value": 30}),
        ("list_skills", {}),
        ("view_state", {}),
        ("set_layer_display", {"name": "image", "opacity": 0.5}),
        ("snapshot", {}),
        ("submit", {}),
    ]
    results, tools = _served(agent, calls)
    for (name, args), result in zip(calls, results, strict=True):
        assert isinstance(result, types.CallToolResult) and not result.isError, (name, args, result.content)
        schema = tools[name].outputSchema
        assert schema is not None, name
        cls = validators.validator_for(schema)
        cls.check_schema(schema)
        errors = [e.message for e in cls(schema).iter_errors(result.structuredContent)]
        assert errors == [], (name, args, errors)


def test_a_result_its_model_refuses_is_a_tool_error_not_a_result(tmp_path: Path) -> None:
    agent, _, _ = _agent(tmp_path)
    honest = agent.list_layers
    agent.list_layers = lambda: {**honest(), "truth": [1, 2, 3]}  # type: ignore[method-assign]
    agent.read_layer = lambda *a: {"name": "image", "shape": "wide"}  # type: ignore[method-assign]
    (listed, read), _ = _served(agent, [("list_layers", {}), ("read_layer", {"name": "image"})])
    assert listed.isError and "truth" in listed.content[0].text and listed.structuredContent is None
    assert read.isError and read.structuredContent is None
    assert [c.ok for c in agent.transcript.calls] == [False, False]


def test_a_whole_input_layer_is_written_once_and_is_the_same_pixels_as_base64(tmp_path: Path) -> None:
    agent, folder, fixture = _agent(tmp_path)
    first = agent.read_layer("image", None, "npy")
    again = agent.read_layer("image", None, "npy")
    assert again["path"] == first["path"]
    raw = agent.read_layer("image", None, "base64")
    b64 = np.frombuffer(__import__("base64").b64decode(raw["data"]), dtype=raw["dtype"]).reshape(raw["shape"])
    whole = np.load(first["path"])
    assert np.array_equal(whole, b64) and np.array_equal(whole, fixture.data["image"])
    part = agent.read_layer("image", [[2, 9]], "npy")
    assert part["path"] != first["path"] and np.array_equal(np.load(part["path"]), fixture.data["image"][2:9])
    assert agent.read_layer("image", [[2, 9]], "npy")["path"] != part["path"]  # a region: written each time
    st = os.lstat(first["path"])
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o644
    assert Path(first["path"]).parent == folder.path / READS


def test_many_reads_keep_the_whole_layer_file_and_evict_the_regions(tmp_path: Path) -> None:
    agent, folder, _ = _agent(tmp_path)
    whole = agent.read_layer("image", None, "npy")["path"]
    parts = [agent.read_layer("image", [[0, 1 + i % 20]], "npy")["path"] for i in range(folder.READS_KEPT + 5)]
    assert Path(whole).is_file() and agent.read_layer("image", None, "npy")["path"] == whole
    assert sum(Path(p).exists() for p in parts) == folder.READS_KEPT
    assert len(os.listdir(folder.path / READS)) == folder.READS_KEPT + 1


def test_the_whole_files_kept_are_capped(tmp_path: Path) -> None:
    folder = McpFolder(tmp_path)
    folder.KEPT_WHOLE, folder.READS_KEPT = 2, 3
    names = [folder.save_read(f"w{i}.npy", np.arange(4), keep=True) for i in range(6)]
    kept = sorted(os.listdir(folder.path / READS))
    assert kept == ["w0.npy", "w1.npy", "w3.npy", "w4.npy", "w5.npy"], (names, kept)


@pytest.mark.parametrize(
    "arr",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.arange(6, dtype=">i4").reshape(2, 3),
        np.array([[True, False]]),
        np.zeros((0, 5), np.uint16),
        np.full((), 2.5),
        np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        np.zeros((1,) * 40, np.uint8),  # a long shape
        np.arange(20, dtype=np.int64).reshape(4, 5)[:, 1:3],  # not contiguous
    ],
)
def test_a_read_is_the_bytes_np_save_writes(tmp_path: Path, arr: np.ndarray) -> None:
    import io

    folder = McpFolder(tmp_path)
    rel = folder.save_read("x.npy", arr)
    want = io.BytesIO()
    np.save(want, np.require(arr, requirements="C"), allow_pickle=False)
    assert (folder.path / rel).read_bytes() == want.getvalue()
    back = np.load(folder.path / rel)
    assert back.dtype == arr.dtype and np.array_equal(back, arr)


def test_a_read_refuses_objects_and_names_that_leave_the_folder(tmp_path: Path) -> None:
    folder = McpFolder(tmp_path)
    with pytest.raises(ValueError, match="numbers"):
        folder.save_read("o.npy", np.array([object()]))
    for name in ("../escape.npy", "a/b.npy", ".hidden", ""):
        with pytest.raises(ValueError, match="plain name"):
            folder.save_read(name, np.arange(3))
    assert not (tmp_path / "escape.npy").exists()


def test_a_layer_name_with_dots_and_slashes_writes_inside_the_folder_or_is_refused(tmp_path: Path) -> None:
    agent, folder, _ = _agent(tmp_path)
    with pytest.raises(ToolError):
        agent.read_layer("../image", None, "npy")
    with pytest.raises(ToolError):
        agent.read_layer("mask_truth", None, "npy")  # a truth key is no layer of the session
    agent.add_layer("../../up", "image", np.ones((24, 24)).tolist())
    got = agent.read_layer("../../up", None, "npy")
    assert Path(got["path"]).resolve().parent == (folder.path / READS).resolve()
    assert not list(tmp_path.glob("up*")) and np.array_equal(np.load(got["path"]), np.ones((24, 24)))


def test_a_link_planted_where_a_read_goes_is_never_followed(tmp_path: Path) -> None:
    agent, folder, _ = _agent(tmp_path)
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    # the name the next read takes (the subject cannot write this folder; were it able to)
    os.symlink(target, folder.path / READS / "image-1.npy")
    read = ("read_layer", {"name": "image", "encoding": "npy"})
    (refused, got), _ = _served(agent, [read, read])
    assert refused.isError and "FileExistsError" in refused.content[0].text
    assert target.read_text() == "keep me" and os.path.islink(folder.path / READS / "image-1.npy")
    path = got.structuredContent["path"]  # the session goes on: the next name, a regular file
    assert not got.isError and path.endswith("image-2.npy") and stat.S_ISREG(os.lstat(path).st_mode)


def test_a_layer_swapped_for_a_link_after_it_was_handed_out_is_not_read_back(tmp_path: Path) -> None:
    agent, folder, fixture = _agent(tmp_path)
    path = Path(agent.read_layer("image", None, "npy")["path"])
    secret = tmp_path / "elsewhere.npy"
    np.save(secret, np.full((24, 24), 7.0))
    path.unlink()
    os.symlink(secret, path)  # the harness never reads its reads back: nothing it scores changes
    assert agent.read_layer("image", None, "base64")["shape"] == [24, 24]
    assert np.array_equal(np.asarray(agent.layers["image"].data), fixture.data["image"])
    assert "elsewhere" not in str(agent.read_layer("image", None, "npy")["path"])


def test_an_answer_layer_is_read_afresh_after_each_update(tmp_path: Path) -> None:
    agent, _, _ = _agent(tmp_path)
    agent.add_layer("mask", "labels", np.zeros((24, 24), np.uint8).tolist())
    first = agent.read_layer("mask", None, "npy")["path"]
    ones = np.ones((24, 24), np.uint8)
    agent.update_layer("mask", ones.tolist())
    second = agent.read_layer("mask", None, "npy")["path"]
    assert second != first and np.array_equal(np.load(second), ones)
    assert not np.load(first).any()  # another layer's earlier pixels are never handed out as these
