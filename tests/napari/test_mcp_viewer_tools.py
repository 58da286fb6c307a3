"""The viewer tools of an agent served from the panel (issue 31, part 3), in a real napari viewer
under xvfb-run: they step the live viewer's time axis and set its layers' display, they read back
what the person changes, and none of them reaches a truth layer put on the viewer; an agent that
called no tool before Score is ``not-attempted``."""

from __future__ import annotations

import asyncio
import base64
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("napari")
pytest.importorskip("mcp")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from helpers import truth_leaks  # noqa: E402

from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

TRACKING = "tracking/moving-nuclei"


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def _served(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> tuple[Any, BenchPanel]:
    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench")
    assert panel.load(TRACKING)
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.serve_agent()
    return viewer, panel


def _client(qtbot: Any, config: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The calls from an SDK client in a thread of its own (through mcp.json's bridge, as an agent
    connects), while this thread serves the viewer's events."""
    import json

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import Implementation

    server = json.loads(config.read_text())["mcpServers"]["imagebench"]
    params = StdioServerParameters(command=server["command"], args=server["args"])
    out: dict[str, Any] = {}

    async def go() -> list[Any]:
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w, client_info=Implementation(name="viewer-test", version="0")) as c:
                await c.initialize()
                return [await c.call_tool(tool, args) for tool, args in calls]

    def run() -> None:
        try:
            out["results"] = asyncio.run(go())
        except BaseException as exc:  # noqa: BLE001 - reported below
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=60_000)
    if "error" in out:
        raise out["error"]
    return out["results"]


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_the_viewer_tools_drive_the_live_viewer_and_never_reach_its_truth(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = _served(make_napari_viewer, qtbot, tmp_path)
    movie = viewer.layers["movie"]
    frames = movie.data.shape[0]
    truth = dict(panel.model.loaded.unit.fixture.truth)  # what a dishonest agent wants
    key, value = next((k, np.asarray(v)) for k, v in truth.items() if np.asarray(v).ndim >= 2)
    viewer.add_labels(value.astype(np.int32), name="truth")  # a person opened the truth on the viewer
    config = panel.model.agent.config

    results = _client(
        qtbot,
        config,
        [
            ("set_dims", {"axis": "t", "step": 3}),
            ("set_layer_display", {"name": "movie", "colormap": "magma", "contrast_limits": [0.0, 0.5]}),
            ("view_state", {}),
            ("snapshot", {}),
            ("set_layer_display", {"name": "truth", "visible": True}),
            ("snapshot", {"layer": "truth"}),
            ("snapshot_frames", {"layer": key}),
            ("set_dims", {"axis": 0, "step": None}),
        ],
    )
    assert [r.isError for r in results] == [False] * 4 + [True] * 4, [_text(r) for r in results]
    assert viewer.dims.current_step[0] == 3  # the live viewer moved
    assert movie.colormap.name == "magma" and list(movie.contrast_limits) == [0.0, 0.5]
    view = results[2].structuredContent
    assert view["bound"] == "viewer" and view["dims"][0]["step"] == 3 and view["dims"][0]["size"] == frames
    assert {x["name"] for x in view["layers"]} == {"movie"}  # the session's layers: never the truth
    assert next(x for x in view["layers"] if x["name"] == "movie")["colormap"] == "magma"
    assert results[3].structuredContent["layers"] == ["movie"]
    png = base64.b64decode(results[3].content[0].data)
    assert truth_leaks(truth, blob=png) == []
    assert all("no layer named" in _text(r) for r in results[4:7])
    assert "one step of every axis" in _text(results[7])

    # the person moves the viewer: the agent's view is the viewer's; the truth layer changes no picture
    viewer.dims.set_current_step(0, frames - 1)
    viewer.layers["truth"].visible = False
    again = _client(qtbot, config, [("view_state", {}), ("snapshot", {"frame": 3})])
    assert again[0].structuredContent["dims"][0]["step"] == frames - 1
    viewer.layers.remove("truth")
    same = _client(qtbot, config, [("snapshot", {"frame": 3})])
    assert base64.b64decode(same[0].content[0].data) == base64.b64decode(again[1].content[0].data)
    calls = panel.model.agent.agent.transcript.calls
    assert [c.tool for c in calls][:3] == ["set_dims", "set_layer_display", "view_state"]


def test_an_agent_that_called_no_tool_is_not_attempted(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    viewer, panel = _served(make_napari_viewer, qtbot, tmp_path)
    result = panel.model.score_agent()
    assert result.status == "not-attempted", result.reason
    assert "called no tool of the case" in result.reason
