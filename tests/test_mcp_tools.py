"""The MCP tools as a model reads them (issue 31, part 3): the strict schema check the MCP
Inspector makes (an outputSchema on every tool, a description on every parameter, valid JSON
Schema, no parameter that accepts anything, clean descriptions), serverInfo, structured results,
add_layer's shape check whatever the name, and the viewer tools over the session's own view,
none of which can reach a truth layer or a file."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case, truth_leaks

import imagebench
from imagebench import cases as builtin
from imagebench.case.session import open_session
from imagebench.runs.runner import prepare_fixture

pytest.importorskip("mcp")

from imagebench.subjects.mcp.tools import AgentSession, CaseView  # noqa: E402
from imagebench.subjects.mcp.toolset import tool_names  # noqa: E402

TRACKING = "tracking/moving-nuclei"


def _agent(case: Any, workspace: Path | None = None) -> tuple[AgentSession, Any]:
    fixture = prepare_fixture(case).fixture
    return AgentSession(CaseView.of(case), open_session(case, fixture), workspace=workspace), fixture


async def _session(agent: AgentSession, script: Any) -> Any:
    from mcp.shared.memory import create_connected_server_and_client_session
    from mcp.types import Implementation

    from imagebench.subjects.mcp.server import build_server

    async with create_connected_server_and_client_session(
        build_server(agent), client_info=Implementation(name="schema-test", version="0")
    ) as client:
        return await script(client)


def _calls(agent: AgentSession, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def script(client: Any) -> list[Any]:
        return [await client.call_tool(tool, args) for tool, args in calls]

    return asyncio.run(_session(agent, script))


def _tools(agent: AgentSession) -> list[Any]:
    async def script(client: Any) -> Any:
        return (await client.list_tools()).tools

    return asyncio.run(_session(agent, script))


# --------------------------------------------------------------------------- the strict schema check


# The MCP Inspector's schema lint (v2.12, clients/web: ``x6``), ported rule for rule: it walks the
# input and output schema of each tool and reports a bare boolean schema (an error), a ``type``
# given as an array (``type-union``), a ``$ref`` outside the document (``remote-ref``) and a
# schema with no validation keyword, which accepts anything (``untyped-schema``).
_KEYWORDS = set(
    "type enum const multipleOf maximum exclusiveMaximum minimum exclusiveMinimum maxLength minLength pattern "
    "format contentMediaType contentEncoding contentSchema maxItems minItems uniqueItems maxContains minContains "
    "maxProperties minProperties required dependentRequired allOf anyOf oneOf not items prefixItems contains "
    "additionalItems unevaluatedItems properties patternProperties additionalProperties unevaluatedProperties "
    "propertyNames dependentSchemas dependencies $ref $dynamicRef $recursiveRef".split()
)
_TYPES = {"null", "boolean", "object", "array", "number", "string", "integer"}
_MAPS = ("properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions")
_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_ONES = (
    "items", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties",
    "unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema",
)  # fmt: skip
_BOOLEAN_OK = {"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}


def inspector_lint(schema: Any, where: str, parent: str | None = None, depth: int = 0) -> list[str]:
    if depth > 64:
        return []
    if isinstance(schema, bool):
        return [] if parent in _BOOLEAN_OK else [f"error boolean-schema at {where}"]
    if not isinstance(schema, dict):
        return []
    out: list[str] = []
    kinds = schema.get("type")
    if isinstance(kinds, list) and kinds and all(k in _TYPES for k in kinds) and len(set(kinds)) == len(kinds):
        out.append(f"warning type-union at {where}")
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref and not ref.startswith("#"):
        out.append(f"warning remote-ref at {where}")
    typed = any(k in _KEYWORDS for k in schema) or ("if" in schema and ("then" in schema or "else" in schema))
    if not typed and parent != "not":
        out.append(f"warning untyped-schema at {where}")
    for key in _MAPS:
        if isinstance(schema.get(key), dict):
            for name, sub in schema[key].items():
                out += inspector_lint(sub, f"{where}.{key}.{name}", key, depth + 1)
    for key in _LISTS:
        if isinstance(schema.get(key), list):
            for n, sub in enumerate(schema[key]):
                out += inspector_lint(sub, f"{where}.{key}[{n}]", key, depth + 1)
    for key in _ONES:
        if key in schema:
            subs = schema[key] if key == "items" and isinstance(schema[key], list) else [schema[key]]
            for sub in subs:
                out += inspector_lint(sub, f"{where}.{key}", key, depth + 1)
    return out


def strict_warnings(tool: Any) -> list[str]:
    """What a strict check of one tool's listing finds wrong (empty: nothing): the Inspector's
    lint of both schemas, and what a model reads besides (an outputSchema, a description on the
    tool and on every parameter, no docstring indentation, valid draft-07 and 2020-12 schemas)."""
    from jsonschema import Draft7Validator, Draft202012Validator

    name = tool.name
    out = [
        f"{name}: {w}" for kind in ("inputSchema", "outputSchema") for w in inspector_lint(getattr(tool, kind), kind)
    ]
    if not tool.description or tool.description != tool.description.strip():
        out.append(f"{name}: no description, or one with surrounding blanks")
    if any(line.startswith((" ", "\t")) for line in (tool.description or "").splitlines()):
        out.append(f"{name}: its description keeps the docstring's indentation")
    for kind, schema in (("input", tool.inputSchema), ("output", tool.outputSchema)):
        if schema is None:
            out.append(f"{name}: no {kind}Schema")
            continue
        if schema.get("type") != "object":
            out.append(f"{name}: its {kind}Schema is not an object")
        for validator in (Draft7Validator, Draft202012Validator):
            try:
                validator.check_schema(schema)
            except Exception as exc:
                out.append(f"{name}: {kind}Schema is not valid {validator.__name__}: {exc}")
        if kind == "input":
            out += [
                f"{name}.{p}: no description"
                for p, sub in (schema.get("properties") or {}).items()
                if not sub.get("description")
            ]
    return out


def test_every_tool_passes_the_strict_schema_check() -> None:
    agent, _ = _agent(make_toy_case())
    tools = _tools(agent)
    assert [t.name for t in tools] == tool_names()
    assert [w for t in tools for w in strict_warnings(t)] == []
    by_name = {t.name: t for t in tools}
    props = by_name["read_layer"].inputSchema["properties"]
    assert props["encoding"]["enum"] == ["list", "base64", "npy"]
    assert by_name["add_layer"].inputSchema["properties"]["kind"]["enum"] == [
        "labels", "image", "points", "shapes", "tracks",
    ]  # fmt: skip
    assert by_name["get_prompt"].annotations.readOnlyHint and not by_name["submit"].annotations.readOnlyHint


def test_the_strict_check_finds_what_the_old_tools_had() -> None:
    """The check is not one that cannot fail: served with the old signatures (``data: list[Any]``,
    ``value: Any``, free-string ``kind``, indented docstrings, no result type), the same SDK gives
    exactly the 3 warnings the Inspector reported, and the rest of the check finds the others."""
    from mcp.server.fastmcp import FastMCP

    old = FastMCP("old")

    @old.tool(structured_output=False)
    def add_layer(name: str, kind: str, data: list[Any] | None = None) -> str:
        """Add an answer layer: kind 'labels', ...
        from numbers (data)."""
        return ""

    @old.tool(structured_output=False)
    def update_layer(name: str, data: list[Any] | None = None) -> str:
        """Replace the data of a layer you added."""
        return ""

    @old.tool(structured_output=False)
    def set_answer(value: Any, name: str = "answer") -> str:
        """Set a structured answer."""
        return ""

    tools = asyncio.run(old.list_tools())
    lint = [
        w for t in tools for kind in ("inputSchema", "outputSchema") for w in inspector_lint(getattr(t, kind), kind)
    ]
    assert sorted(lint) == [
        "warning untyped-schema at inputSchema.properties.data.anyOf[0].items",
        "warning untyped-schema at inputSchema.properties.data.anyOf[0].items",
        "warning untyped-schema at inputSchema.properties.value",
    ]
    found = [w for t in tools for w in strict_warnings(t)]
    assert "add_layer: no outputSchema" in found and "set_answer: no outputSchema" in found
    assert "add_layer: its description keeps the docstring's indentation" in found
    assert "add_layer.kind: no description" in found and "set_answer.value: no description" in found
    assert inspector_lint({"type": ["array", "number"]}, "x") == ["warning type-union at x"]
    assert inspector_lint({"properties": {"a": True}}, "x") == ["error boolean-schema at x.properties.a"]


def test_server_info_names_imagebench_and_its_version() -> None:
    from imagebench.subjects.mcp.server import build_server

    agent, _ = _agent(make_toy_case())
    options = build_server(agent)._mcp_server.create_initialization_options()
    assert options.server_name == "imagebench" and options.server_version == imagebench.__version__
    from importlib.metadata import version

    assert options.server_version != version("mcp") or imagebench.__version__ == version("mcp")


def test_every_result_is_structured_and_matches_its_text(tmp_path: Path) -> None:
    case = make_toy_case()
    agent, _ = _agent(case, tmp_path)
    mask = np.zeros((24, 24), np.uint8)
    mask[3:8, 3:9] = 1
    calls = [
        ("get_prompt", {}),
        ("list_layers", {}),
        ("read_layer", {"name": "image", "region": [[0, 2], [0, 3]]}),
        ("add_layer", {"name": "mask", "kind": "labels", "data": mask.tolist()}),
        ("set_answer", {"name": "area", "value": 30}),
        ("view_state", {}),
        ("set_layer_display", {"name": "image", "colormap": "magma", "contrast_limits": [0, 10], "opacity": 0.5}),
        ("snapshot", {}),
        ("submit", {}),
    ]
    results = _calls(agent, calls)
    for (tool, _), r in zip(calls, results, strict=True):
        assert not r.isError, (tool, r.content)
        assert isinstance(r.structuredContent, dict), tool
        texts = [c.text for c in r.content if c.type == "text"]
        assert json.loads(texts[-1]) == r.structuredContent, tool
    assert results[2].structuredContent["data"] == np.asarray(agent.layers["image"].data)[0:2, 0:3].tolist()
    assert results[3].structuredContent["added"]["like"] == "image"  # the case's grid, named by default
    assert results[6].structuredContent == {
        "name": "image", "visible": True, "opacity": 0.5, "colormap": "magma", "contrast_limits": [0.0, 10.0],
    }  # fmt: skip
    snap = results[7]
    assert snap.content[0].type == "image" and snap.structuredContent["layers"] == ["image", "mask"]
    assert [c.tool for c in agent.transcript.calls] == [t for t, _ in calls]
    assert all(c.ok and c.result for c in agent.transcript.calls)  # each call's one-line summary is kept
    assert agent.transcript.calls[4].result == "set: area"


def test_a_refused_argument_is_named_and_recorded_and_the_session_goes_on() -> None:
    agent, _ = _agent(make_toy_case())
    results = _calls(
        agent,
        [
            ("read_layer", {"name": "image", "encoding": "hex"}),
            ("add_layer", {"name": "x", "kind": "labels", "data": [["a", "b"]]}),
            ("set_answer", {"name": "area", "value": {"x": object.__name__}}),
            ("no_such_tool", {}),
            ("list_layers", {}),
        ],
    )
    errors = ["".join(c.text for c in r.content) for r in results]
    assert [r.isError for r in results] == [True, True, True, True, False], errors
    assert "read_layer: argument 'encoding': Input should be 'list', 'base64' or 'npy', got 'hex'" in errors[0]
    assert "argument 'data." in errors[1]
    assert "must be a finite number" in errors[2]
    assert "no_such_tool" in errors[3]
    assert [(c.tool, c.ok) for c in agent.transcript.calls] == [
        ("read_layer", False), ("add_layer", False), ("set_answer", False), ("no_such_tool", False), ("list_layers", True),
    ]  # fmt: skip


# --------------------------------------------------------------------------- add_layer's shape check


@pytest.mark.parametrize("name", ["labels", "scratch", "my-answer"])
def test_a_labels_layer_not_on_the_cases_grid_is_refused_whatever_its_name(name: str) -> None:
    from imagebench.subjects.mcp.tools import ToolError

    case = builtin.get_case("segment-nuclei/synthetic-blobs")
    agent, fixture = _agent(case)
    shape = list(fixture.data["image"].shape)  # the layer nuclei
    expected = f"layer '{name}': shape [2, 2] differs from its input 'nuclei', shape {shape}"
    with pytest.raises(ToolError, match=re.escape(expected)):
        agent.add_layer(name, "labels", data=[[0, 1], [1, 0]])
    if name != "labels":  # the case's own leaving must be a labels layer anyway
        with pytest.raises(ToolError, match="differs from its input"):
            agent.add_layer(name, "image", data=[[0.5, 1.0], [1.0, 0.0]])
    agent.add_layer(name, "labels", data=np.zeros(shape, np.int32).tolist())  # on the grid: taken
    assert agent.layers[name].like == "nuclei"


# --------------------------------------------------------------------------- the viewer tools


def test_the_viewer_tools_step_a_time_lapse_and_draw_its_frames(tmp_path: Path) -> None:
    case = builtin.get_case(TRACKING)
    agent, fixture = _agent(case, tmp_path)
    movie = np.asarray(fixture.data["movie"])
    t = movie.shape[0]
    results = _calls(
        agent,
        [
            ("view_state", {}),
            ("set_dims", {"axis": 0, "step": 2}),
            ("step_dims", {"axis": 0, "by": 100}),
            ("snapshot", {}),
            ("set_dims", {"axis": 0, "step": None}),
            ("snapshot", {}),
            ("snapshot_frames", {"axis": 0, "start": 0, "stop": t, "every": 1}),
            ("set_layer_display", {"name": "movie", "visible": False}),
            ("snapshot", {}),
            ("set_dims", {"axis": 0, "step": t}),
            ("set_dims", {"axis": 3, "step": 0}),
            ("snapshot_frames", {"axis": 0, "start": 5, "stop": 2}),
            ("set_layer_display", {"name": "movie", "opacity": 2}),
        ],
    )
    ok = [not r.isError for r in results]
    assert ok == [True] * 9 + [False] * 4, [r.content for r in results]
    view = results[0].structuredContent
    assert view["bound"] == "session" and view["dims"] == [
        {"axis": 0, "label": view["dims"][0]["label"], "size": t, "step": None}
    ]
    assert results[1].structuredContent["dims"][0]["step"] == 2
    assert results[2].structuredContent["dims"][0]["step"] == t - 1  # held at the end
    assert results[3].structuredContent["position"] == {"0": t - 1}
    last = base64.b64decode(results[3].content[0].data)
    projected = base64.b64decode(results[5].content[0].data)
    assert results[5].structuredContent["position"] == {} and last != projected
    frames = results[6]
    images = [c for c in frames.content if c.type == "image"]
    listed = frames.structuredContent["frames"]
    assert len(images) == len(listed) == min(t, 16) and frames.structuredContent["truncated"] == (t > 16)
    assert [f["step"] for f in listed] == list(range(min(t, 16)))
    assert len({c.data for c in images}) > 1  # the frames differ
    assert base64.b64decode(images[-1].data) != projected
    assert results[8].structuredContent["layers"] == []  # the movie hidden: nothing drawn
    errors = ["".join(c.text for c in r.content) for r in results[9:]]
    assert f"from 0 to {t - 1}" in errors[0] and "leading axis" in errors[1]
    assert "start < stop" in errors[2] and "opacity" in errors[3]


def test_a_z_stack_is_stepped_and_drawn_plane_by_plane() -> None:
    agent, _ = _agent(builtin.get_case("segment-nuclei/synthetic-blobs"))
    stack = np.zeros((5, 32, 32), np.float32)
    for z in range(5):
        stack[z, 4 * z : 4 * z + 4, :] = 1.0  # a band that moves down plane by plane
    agent.layers["nuclei"].data = stack
    view = agent.view_state()
    assert view["dims"] == [{"axis": 0, "label": None, "size": 5, "step": None}] and view["displayed"] == 2
    pngs, info = agent.snapshot_frames(axis=0)
    assert [f["step"] for f in info["frames"]] == [0, 1, 2, 3, 4] and len(set(pngs)) == 5
    agent.set_dims(0, 2)
    assert agent.snapshot() == pngs[2]
    agent.step_dims(0, -5)
    assert agent.view_state()["dims"][0]["step"] == 0 and agent.snapshot() == pngs[0]


def test_a_frame_of_a_multi_frame_snapshot_is_the_snapshot_at_that_step(tmp_path: Path) -> None:
    agent, _ = _agent(builtin.get_case(TRACKING), tmp_path)
    pngs, info = agent.snapshot_frames(axis=0, start=3, stop=4)
    assert info["frames"][0]["step"] == 3 and info["downsampled"] == 1  # a small movie: drawn whole
    agent.set_dims(0, 3)
    assert pngs == [agent.snapshot()] and agent.snapshot(frame=3) == pngs[0]
    assert agent.snapshot(frame=4) != pngs[0]


def test_a_multi_frame_snapshot_is_size_capped(tmp_path: Path) -> None:
    from imagebench.subjects.mcp.render import FRAME_MAX_SIDE
    from imagebench.subjects.mcp.view import MAX_FRAMES

    agent, _ = _agent(builtin.get_case(TRACKING), tmp_path)
    agent.layers["movie"].data = np.random.default_rng(0).random((40, 1500, 900)).astype(np.float32)
    pngs, info = agent.snapshot_frames(axis=0)
    assert len(pngs) == MAX_FRAMES and info["truncated"]
    assert all(max(f["width"], f["height"]) <= FRAME_MAX_SIDE for f in info["frames"])
    assert info["downsampled"] == 3


def test_no_viewer_tool_reaches_a_truth_layer_or_a_file(tmp_path: Path) -> None:
    """A dishonest agent names the truth's keys, a held-out file, a path: every viewer tool refuses,
    and nothing any of them returns holds the truth."""
    case = builtin.get_case(TRACKING)
    agent, fixture = _agent(case, tmp_path)
    (tmp_path / "held-out.npy").write_bytes(b"")
    truth = dict(fixture.truth)
    names = [*truth, "truth", "../inputs/movie.npy", str(tmp_path / "held-out.npy"), "/etc/passwd"]
    calls: list[tuple[str, dict[str, Any]]] = []
    for name in names:
        calls += [
            ("set_layer_display", {"name": name, "visible": True}),
            ("snapshot_frames", {"layer": name}),
            ("snapshot", {"layer": name}),
        ]
    refused = _calls(agent, calls)
    assert all(r.isError for r in refused), [r.content for r in refused if not r.isError]
    for r in refused:
        assert "no layer named" in "".join(c.text for c in r.content)
    honest = _calls(
        agent, [("view_state", {}), ("snapshot_frames", {}), ("snapshot", {}), ("set_dims", {"axis": 0, "step": 1})]
    )
    for r in honest:
        assert not r.isError
        for c in r.content:
            blob = base64.b64decode(c.data) if c.type == "image" else c.text.encode()
            assert truth_leaks(truth, blob=blob) == []
        assert not set(truth) & {
            x["name"] for x in (r.structuredContent or {}).get("layers", []) if isinstance(x, dict)
        }
    assert {x["name"] for x in honest[0].structuredContent["layers"]} == set(agent.layers)


# --------------------------------------------------------------------------- mcp serve: the report and not-attempted


def _serve(tmp_path: Path, script: Any, name: str) -> tuple[Any, Path]:
    import os
    import sys

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import Implementation

    env = {**os.environ, "PYTHONPATH": str(Path(imagebench.__file__).resolve().parents[1])}
    out = tmp_path / name
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "imagebench", "mcp", "serve", "segment-nuclei/count-nuclei", "--out", str(out)],
        env=env,
    )

    async def go() -> Any:
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w, client_info=Implementation(name=name, version="0")) as c:
                init = await c.initialize()
                return init, await script(c)

    got = asyncio.run(go())
    (run_dir,) = out.glob("run-*")
    return got, run_dir


def test_a_bare_tools_list_probe_is_not_attempted_and_mcp_serve_writes_the_report(tmp_path: Path) -> None:
    from imagebench.report import read_page
    from imagebench.runs.reader import read_run
    from imagebench.scoring.aggregates import aggregate

    async def probe(c: Any) -> Any:
        return (await c.list_tools()).tools

    (init, tools), run_dir = _serve(tmp_path, probe, "probe")
    assert init.serverInfo.name == "imagebench" and init.serverInfo.version == imagebench.__version__
    assert [t.name for t in tools] == tool_names() and all(t.outputSchema for t in tools)
    (sample,) = run_dir.glob("mcp-stdio/segment-nuclei/count-nuclei/sample-0")
    summary = json.loads((sample / "summary.json").read_text())
    assert summary["status"] == "not-attempted", summary
    assert "'probe' called no tool of the case" in summary["reason"]
    case = json.loads((sample.parent / "summary.json").read_text())
    assert case["counts"] == {"not-attempted": 1} and case["scored"] == 0
    assert (run_dir / "report.html").is_file() and "not-attempted" in (run_dir / "report.html").read_text()
    contents = read_run(run_dir)
    samples = [s for label in contents.labels for s in contents.samples(label)]
    agg = aggregate(samples, 1, expected=["segment-nuclei/count-nuclei"])
    assert agg.coverage["not-attempted"] == 1 and agg.coverage["unscored"] == 1  # excluded, counted apart
    assert read_page(run_dir) is not None

    # an honest session of the same case is scored (it tried and left nothing: a failure)
    async def work(c: Any) -> Any:
        await c.call_tool("get_prompt", {})
        return await c.call_tool("submit", {})

    _, scored_dir = _serve(tmp_path, work, "worker")
    (scored,) = scored_dir.glob("mcp-stdio/segment-nuclei/count-nuclei/sample-0")
    assert json.loads((scored / "summary.json").read_text())["status"] == "no-result"
    from imagebench.suite.compare import FAIL, PASS

    assert "not-attempted" not in PASS | FAIL and "no-result" in FAIL  # compare leaves such a pair out, counted


def _held_open(tmp_path: Path, lines: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """``mcp serve`` under a client that sends ``lines`` and then holds stdin open, silent, past
    the limit: the exit code and the sample's summary."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(imagebench.__file__).resolve().parents[1])}
    out = tmp_path / "held"
    args = ["-m", "imagebench", "mcp", "serve", "segment-nuclei/count-nuclei", "--out", str(out), "--timeout", "4"]
    proc = subprocess.Popen(
        [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None
    for line in lines:
        proc.stdin.write((json.dumps(line) + "\n").encode())
        proc.stdin.flush()
    try:
        proc.wait(timeout=60)  # stdin stays open: the session has to end on its own
    finally:
        proc.kill()
        proc.stdin.close()
    (sample,) = out.glob("run-*/mcp-stdio/segment-nuclei/count-nuclei/sample-0")
    return proc.returncode, json.loads((sample / "summary.json").read_text())


_INIT = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "idle", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]  # fmt: skip


def test_a_client_that_connects_and_says_nothing_is_not_attempted_not_a_timeout(tmp_path: Path) -> None:
    code, summary = _held_open(tmp_path, _INIT)
    assert summary["status"] == "not-attempted", summary
    assert code == 4  # incomplete: nothing measured, as a run with only excluded samples ends


def test_a_client_that_called_a_tool_and_stayed_past_the_limit_is_a_timeout(tmp_path: Path) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_prompt", "arguments": {}}}
    code, summary = _held_open(tmp_path, [*_INIT, call])
    assert summary["status"] == "timeout" and "still connected" in summary["reason"], summary
    assert code == 1
