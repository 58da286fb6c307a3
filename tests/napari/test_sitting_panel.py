"""The sitting at the bench panel, clicked through in a real viewer under xvfb-run (issue 26, item 9):
one run folder for every subject of the session, Open report and Copy path beside Open run folder,
an error a person sees when the desktop cannot open either, a ``command:`` subject added through
*Command…* and run confined, and the Serve panel's example-agent command line and its submit."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from helpers import make_toy_case  # noqa: E402
from qtpy.QtCore import Qt  # noqa: E402
from qtpy.QtWidgets import QApplication, QComboBox, QLabel, QLineEdit, QPushButton  # noqa: E402

from imagebench import cases as builtin  # noqa: E402
from imagebench.records import SampleSummary, read_record  # noqa: E402
from imagebench.runs.sitting import read_sitting  # noqa: E402
from imagebench.sandbox.policy import unavailable_reason  # noqa: E402
from napari_imagebench import _folder_widget  # noqa: E402
from napari_imagebench._agent_model import SUBMITTED  # noqa: E402
from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._subjects_model import COMMAND_ENTRY  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

TOY = "toy/rectangle"
SHOTS = Path(os.environ.get("IMAGEBENCH_SITTING_SHOTS", "/tmp"))
HONEST = (
    f"{shlex.quote(sys.executable)} -c \"import numpy as np; m = np.load('inputs/image.npy') > 0.5; "
    "np.save('outputs/mask.npy', m); open('outputs/area.json', 'w').write(str(int(m.sum())))\""
)


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


@pytest.fixture
def notified(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The napari notifications the panel raised, as (level, text)."""
    import napari.utils.notifications as notifications

    seen: list[tuple[str, str]] = []
    for level in ("info", "warning", "error"):
        real = getattr(notifications, f"show_{level}")

        def show(text: str, _level: str = level, _real: Any = real) -> None:
            seen.append((_level, text))
            _real(text)

        monkeypatch.setattr(notifications, f"show_{level}", show)
    return seen


def _panel(make_napari_viewer: Any, tmp_path: Path, cases: Any = None) -> tuple[Any, BenchPanel]:
    viewer = make_napari_viewer(show=True)
    model = BenchModel(cases=cases, outcome_root=tmp_path / "panel-out") if cases else BenchModel(outcome_root=tmp_path / "panel-out")
    panel = BenchPanel(viewer, model)
    viewer.window.add_dock_widget(panel, name="Imagebench", area="right")
    return viewer, panel


def _button(panel: BenchPanel, name: str) -> QPushButton:
    button = panel.findChild(QPushButton, name)
    assert button is not None, name
    assert button.toolTip(), f"{name} has no tooltip"
    return button


def _click(qtbot: Any, panel: BenchPanel, name: str) -> None:
    button = _button(panel, name)
    assert button.isEnabled(), f"{name}: {button.toolTip()}"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def _lines(panel: BenchPanel) -> list[str]:
    return [panel.results.topLevelItem(i).text(0) for i in range(panel.results.topLevelItemCount())]


def _load(qtbot: Any, panel: BenchPanel, label: str) -> None:
    panel.select_case(label)
    _click(qtbot, panel, "load_button")
    qtbot.waitUntil(lambda: not panel.running and panel.model.loaded is not None, timeout=60_000)


def _run_and_score(qtbot: Any, panel: BenchPanel) -> Any:
    _click(qtbot, panel, "run_button")
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)
    before = len(panel.model.results)
    _click(qtbot, panel, "score_button")
    assert len(panel.model.results) == before + 1, _lines(panel)[-3:]
    return panel.model.results[-1]


def test_one_sitting_its_report_its_path_and_a_command_clicked_through(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, notified: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    viewer, panel = _panel(make_napari_viewer, tmp_path, cases=lambda: [make_toy_case(), *builtin.all_cases()])
    combo = panel.findChild(QComboBox, "subject_combo")
    assert combo is not None and combo.itemText(combo.count() - 1) == COMMAND_ENTRY
    for name in ("folder_button", "report_button", "copy_path_button"):
        assert not _button(panel, name).isEnabled()  # nothing scored: no sitting yet
    _load(qtbot, panel, TOY)
    combo.setCurrentText("reference")
    reference = _run_and_score(qtbot, panel)
    assert reference.status == "ok"

    # Command…: the field takes a command line, run as imagebench run runs it
    combo.setCurrentText(COMMAND_ENTRY)
    field = panel.findChild(QLineEdit, "solver_edit")
    assert field is not None and "command line" in field.placeholderText()
    assert _button(panel, "add_solver_button").text() == "Add command"
    assert not _button(panel, "run_button").isEnabled() and not _button(panel, "score_button").isEnabled()
    if unavailable_reason() is None:
        qtbot.keyClicks(field, HONEST)
        _click(qtbot, panel, "add_solver_button")
        assert combo.currentText() == "command:" + HONEST and combo.itemText(combo.count() - 1) == COMMAND_ENTRY
        command = _run_and_score(qtbot, panel)
        assert command.status == "ok", command.reason
        assert read_record(command.sample_dir / "summary.json", SampleSummary).sandbox == "bubblewrap"
        assert not any(layer.name.startswith(command.subject) for layer in viewer.layers)  # a sealed fixture of its own
        assert any("worked a sealed fixture of its own" in line for line in _lines(panel))
    SHOTS.mkdir(parents=True, exist_ok=True)
    QApplication.processEvents()
    assert panel.grab().save(str(SHOTS / "sitting-run.png"))

    # one sitting for the session: a run folder per subject, each checked, one report over them
    sitting = panel.run_folder_path()
    assert sitting is not None and sitting.parent == tmp_path / "panel-out"
    assert {r.run_dir.parent for r in panel.model.results} == {sitting}
    assert read_sitting(sitting).verified

    _click(qtbot, panel, "copy_path_button")
    assert QApplication.clipboard().text() == str(sitting)
    assert _lines(panel)[-1] == f"info: copied to the clipboard: {sitting}"

    # the desktop cannot open anything here (no file manager, no browser): the person is told
    _click(qtbot, panel, "report_button")
    page = sitting / "report.html"
    assert page.is_file() and 'data-subject="reference"' in page.read_text()
    if _folder_widget.open_command(page) is not None:  # xdg-open, whose exit status is heard
        qtbot.waitUntil(lambda: any("could not be opened" in line for line in _lines(panel)), timeout=30_000)
        line = next(line for line in _lines(panel) if "could not be opened" in line)
        assert line.startswith("error: the report could not be opened (xdg-open exited") and str(page) in line
        assert any(level == "error" and "the report could not be opened" in text for level, text in notified)
    # where Qt is asked and says no (no xdg-open), the same error, at once
    from qtpy.QtGui import QDesktopServices

    monkeypatch.setattr(_folder_widget, "open_command", lambda path: None)
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: False))
    _click(qtbot, panel, "folder_button")
    assert _lines(panel)[-1] == (
        f"error: the run folder could not be opened (no program to open it: no file manager or browser); it is {sitting} "
        "(Copy path puts it on the clipboard)"
    )
    assert notified[-1][0] == "error" and str(sitting) in notified[-1][1]
    # where it opens, the loaded case's next sample says the person may have seen its truth
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: True))
    _click(qtbot, panel, "folder_button")
    assert _lines(panel)[-1] == f"info: opened the run folder: {sitting}"
    assert panel.model.loaded is not None and "saw-artifacts" in panel.model.loaded.seen


def test_the_serve_panel_shows_how_to_connect_the_example_agent_and_when_it_submitted(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    pytest.importorskip("mcp")
    _viewer, panel = _panel(make_napari_viewer, tmp_path)
    _load(qtbot, panel, "segment-nuclei/count-nuclei")
    _click(qtbot, panel, "serve_button")
    served = panel.model.agent
    assert served is not None
    line = panel.findChild(QLineEdit, "connect_edit")
    assert line is not None and line.isVisible() and line.isReadOnly() and line.toolTip()
    assert line.text() == served.connect and str(served.config) in line.text()
    _click(qtbot, panel, "copy_connect_button")
    assert QApplication.clipboard().text() == served.connect
    submitted = panel.findChild(QLabel, "submitted_label")
    assert submitted is not None and not submitted.isVisible()

    QApplication.processEvents()
    assert panel.agent_pane.grab().save(str(SHOTS / "sitting-serve-waiting.png"))
    # the exact command line shown connects the example agent; it works the case and submits
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    agent = subprocess.Popen(shlex.split(line.text()), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        qtbot.waitUntil(lambda: agent.poll() is not None, timeout=120_000)
    finally:
        if agent.poll() is None:
            agent.kill()
    _out, err = agent.communicate()
    assert agent.returncode == 0, err.decode()
    qtbot.waitUntil(submitted.isVisible, timeout=10_000)
    assert submitted.text() == SUBMITTED
    assert f"info: {served.subject_name}: {SUBMITTED}" in _lines(panel)
    QApplication.processEvents()
    assert panel.agent_pane.grab().save(str(SHOTS / "sitting-serve.png"))
    assert panel.grab().save(str(SHOTS / "sitting-serve-panel.png"))
    _click(qtbot, panel, "score_button")
    result = panel.model.results[-1]
    assert result.subject == served.subject_name and result.status == "ok", result.reason
    assert not line.isVisible() and not submitted.isVisible()
    from imagebench.report import read_sitting_page, sitting_view

    sitting = panel.run_folder_path()
    assert sitting is not None
    [row] = sitting_view(read_sitting_page(sitting))["subjects"]
    assert row["sandbox"].startswith("none (an agent served from the panel")
