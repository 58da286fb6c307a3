"""The bench panel's "Serve to an agent" (issue 16), in a real napari viewer under xvfb-run:
the example MCP agent works the loaded case, its labels layer appears in the viewer before
Score, the panel logs its tool calls, and Score records it as subject ``mcp:<client name>``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("napari")
pytest.importorskip("mcp")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from qtpy.QtCore import Qt  # noqa: E402
from qtpy.QtWidgets import QPlainTextEdit, QPushButton  # noqa: E402

import imagebench  # noqa: E402
from imagebench.records import read_record  # noqa: E402
from imagebench.subjects.mcp.transcript import TRANSCRIPT, Transcript  # noqa: E402
from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

AGENT = Path(imagebench.__file__).resolve().parents[2] / "examples" / "agents" / "classical_agent.py"


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def _panel(make_napari_viewer: Any, tmp_path: Path) -> tuple[Any, BenchPanel]:
    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench")
    return viewer, panel


def _load(qtbot: Any, panel: BenchPanel, label: str) -> None:
    assert panel.load(label)
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.model.loaded is not None and panel.model.loaded.case.label == label


@pytest.mark.parametrize("label", ["segment-nuclei/synthetic-blobs", "segment-nuclei/count-nuclei"])
def test_an_agent_served_from_the_panel_works_the_viewer_and_is_scored(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, label: str
) -> None:
    viewer, panel = _panel(make_napari_viewer, tmp_path)
    _load(qtbot, panel, label)
    serve = panel.findChild(QPushButton, "serve_button")
    assert serve is not None and serve.isEnabled() and serve.text() == "Serve to an agent"
    qtbot.mouseClick(serve, Qt.LeftButton)
    served = panel.model.agent
    assert served is not None and served.config.is_file()
    config = json.loads(served.config.read_text())
    assert config["mcpServers"]["imagebench"]["command"] == "python3"

    # the agent is a program of its own: it reaches the panel's server through mcp.json
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    agent = subprocess.Popen(
        [sys.executable, str(AGENT), "--config", str(served.config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        qtbot.waitUntil(lambda: agent.poll() is not None, timeout=90_000)
    finally:
        if agent.poll() is None:
            agent.kill()
    out, err = agent.communicate()
    assert agent.returncode == 0, err.decode()

    log = panel.findChild(QPlainTextEdit, "agent_log").toPlainText()
    assert "get_prompt" in log and "submit" in log
    name = "mcp:classical-agent"
    if label.endswith("synthetic-blobs"):  # its labels layer is on the viewer before Score
        assert f"{name}:labels" in [layer.name for layer in viewer.layers]
        assert "add_layer" in log
        assert viewer.layers[f"{name}:labels"].data.max() > 5

    score = panel.findChild(QPushButton, "score_button")
    assert score.isEnabled()
    qtbot.mouseClick(score, Qt.LeftButton)
    result = panel.model.results[-1]
    assert result.subject == name and result.status == "ok", result.reason
    record = read_record(result.sample_dir / TRANSCRIPT, Transcript)
    assert record.client == "classical-agent" and record.route == "viewer" and record.submitted
    summary = json.loads((result.sample_dir / "summary.json").read_text())
    assert summary["subject"] == name and summary["sandbox"] == "none"
    # an agent is untrusted: it saw the case's public fixture, and its run says so (and checks out)
    run = json.loads((result.sample_dir.parents[3] / "run.json").read_text())
    assert run["extra"]["unsealed"] is True and run["extra"]["execution"]["sealing"] == "unsealed"
    assert run["extra"]["execution"]["sandbox"] == "none"
    from imagebench.runs.reader import read_run

    assert read_run(result.sample_dir.parents[3]).verified
    assert panel.model.agent is None and serve.text() == "Serve to an agent"
    assert not served.folder.exists()


def test_serving_needs_a_loaded_case_and_stops_cleanly(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    viewer, panel = _panel(make_napari_viewer, tmp_path)
    assert not panel.serve_button.isEnabled()
    _load(qtbot, panel, "segment-nuclei/count-nuclei")
    assert panel.serve_agent()
    folder = panel.model.agent.folder
    assert not panel.load_button.isEnabled()  # another case cannot be loaded under a served agent
    panel.stop_agent()
    assert panel.model.agent is None and not folder.exists() and panel.model.results == []
