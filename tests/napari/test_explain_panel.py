"""A score that explains itself, in the real panel (run under xvfb-run): a wrong structured answer
shows which field is off and by how much, a landmark case each probe's error, the whole note
word-wrapped below the rows; the truth (the provenance) is nowhere in the panel before Score and
only on request after it; opening the run folder flags the next sample as viewing artifacts does.
Controls are found by objectName; ``IMAGEBENCH_SCORE_SHOTS`` names a folder for screenshots."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from qtpy.QtCore import Qt  # noqa: E402
from qtpy.QtWidgets import (  # noqa: E402
    QAbstractButton,
    QApplication,
    QComboBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTextEdit,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from imagebench import cases as builtin  # noqa: E402
from imagebench.records import SampleSummary, read_record  # noqa: E402
from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

DRIFT = "drift-correction/drift-vector"
LANDMARKS = "align-channels-from-landmarks/synthetic-warp"
BLOBS = "segment-nuclei/synthetic-blobs"
TOY = "toy/rectangle"
SHOTS = os.environ.get("IMAGEBENCH_SCORE_SHOTS")


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def _panel(make_napari_viewer: Any, tmp_path: Path, *labels: str) -> tuple[Any, BenchPanel]:
    cases = [make_toy_case(), *(builtin.get_case(label) for label in labels)]
    viewer = make_napari_viewer(show=True)
    panel = BenchPanel(viewer, BenchModel(cases=lambda: cases, outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench", area="right")
    window = viewer.window._qt_window
    window.showNormal()
    window.resize(1366, 768)  # a laptop screen
    QApplication.processEvents()
    return viewer, panel


def _load(qtbot: Any, panel: BenchPanel, label: str) -> None:
    panel.select_case(label)
    qtbot.mouseClick(panel.findChild(QPushButton, "load_button"), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.running and panel.model.loaded is not None, timeout=60_000)
    assert panel.model.loaded.case.label == label  # type: ignore[union-attr]


def _score(qtbot: Any, panel: BenchPanel) -> None:
    count = len(panel.model.results)
    panel._update_buttons()
    score = panel.findChild(QPushButton, "score_button")
    assert score.isEnabled(), score.toolTip()
    qtbot.mouseClick(score, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(panel.model.results) == count + 1, timeout=30_000)
    QApplication.processEvents()


def _items(tree: QTreeWidget) -> list[QTreeWidgetItem]:
    out: list[QTreeWidgetItem] = []
    stack = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    while stack:
        item = stack.pop()
        out.append(item)
        stack += [item.child(i) for i in range(item.childCount())]
    return out


def panel_texts(panel: QWidget) -> list[str]:
    """Every text the panel's widgets hold: labels, buttons, fields, text areas, list and tree
    cells, their tooltips and every widget's tooltip, shown or not."""
    texts: list[str] = []
    for w in [panel, *panel.findChildren(QWidget)]:
        texts.append(w.toolTip())
        if isinstance(w, QLabel | QAbstractButton | QLineEdit):
            texts.append(w.text())
        if isinstance(w, QPlainTextEdit | QTextEdit):
            texts.append(w.toPlainText())
        if isinstance(w, QComboBox):
            texts += [w.itemText(i) for i in range(w.count())]
        if isinstance(w, QTreeWidget):
            for item in _items(w):
                texts += [item.text(c) for c in range(w.columnCount())] + [item.toolTip(c) for c in range(w.columnCount())]
    return texts


def _row_of(tree: QTreeWidget, parent: QTreeWidgetItem, name: str) -> QTreeWidgetItem:
    for i in range(parent.childCount()):
        if parent.child(i).text(0) == name:
            return parent.child(i)
    raise AssertionError(f"no row {name!r} under {parent.text(0)!r}")


def _shoot(widget: QWidget, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        assert widget.grab().save(str(Path(SHOTS) / name))


def test_a_wrong_structured_answer_says_why_and_the_truth_waits_for_score_and_a_click(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = _panel(make_napari_viewer, tmp_path, DRIFT)
    _load(qtbot, panel, DRIFT)
    provenance = panel.model.loaded.fixture.provenance  # type: ignore[union-attr]
    assert "Fourier-shifted by (1.668, -4.719) px" in provenance
    form = panel.answer_panel.forms["answer"]
    form["field_answer_shift"].value = "0, 0"
    qtbot.mouseClick(panel.findChild(QPushButton, "set_answer"), Qt.MouseButton.LeftButton)
    panel.tabs.set_folded(False)
    for tab in range(panel.tabs.count()):  # every tab drawn, the Detail tab on the case
        panel.tabs.setCurrentIndex(tab)
        QApplication.processEvents()
    panel.tabs.setCurrentWidget(panel.detail)
    panel.tabs.set_folded(True)
    # the dishonest look: before Score, no widget of the panel holds the truth, not even hidden
    texts = panel_texts(panel)
    assert len(texts) > 100
    assert not [t for t in texts if "Fourier-shifted" in t or provenance in t]

    _score(qtbot, panel)
    tree = panel.findChild(QTreeWidget, "results")
    (row,) = [item for item in _items(tree) if item.parent() is None and item.text(0).startswith("interactive")]
    assert row.text(0) == f"interactive #1: {DRIFT}" and row.text(1) == "wrong-answer"  # from 1, as a person counts
    assert row.text(4) == "answer_mismatch = 1 > limit 0"
    metric = _row_of(tree, row, "answer_mismatch")
    assert "shift: [0] off by 1.668 (tolerance 0.1)" in metric.text(4)  # the reason in the note column
    field = _row_of(tree, metric, "shift")
    assert field.text(3) == "fail" and field.text(4).startswith("[0] off by 1.668 (tolerance 0.1)")
    assert metric.isExpanded() and not field.isHidden()  # shown, not behind a click

    text = panel.findChild(QPlainTextEdit, "result_explanation")
    toggle = panel.findChild(QToolButton, "explain_toggle")
    assert text.isVisible() and toggle.isChecked()  # a failed sample unfolds its explanation by itself
    assert text.lineWrapMode() == QPlainTextEdit.LineWrapMode.WidgetWidth
    assert "[0] off by 1.668 (tolerance 0.1)" in text.toPlainText() and "green the truth" in text.toPlainText()
    lines = text.viewport().height() / text.fontMetrics().lineSpacing()
    rows = tree.viewport().height() / max(tree.visualItemRect(row).height(), 1)
    print(f"dock {panel.width()}x{panel.height()}: the explanation shows {lines:.1f} lines beside {rows:.1f} result rows")
    assert lines >= 7.5 and rows >= 3.5  # readable, not one cut-off line, and the rows still in sight
    # scored, and still no truth anywhere until asked for
    assert not [t for t in panel_texts(panel) if "Fourier-shifted" in t]
    _shoot(panel, "score-results-wrong.png")

    truth = panel.findChild(QToolButton, "truth_button")
    assert truth.isEnabled() and not truth.isChecked()
    qtbot.mouseClick(truth, Qt.MouseButton.LeftButton)
    assert provenance in text.toPlainText() and truth.text() == "Hide the truth"
    assert panel.model.loaded.seen == {"saw-truth"}  # type: ignore[union-attr]
    _shoot(panel, "score-results-truth.png")
    qtbot.mouseClick(toggle, Qt.MouseButton.LeftButton)  # folded to its bar: the rows take the room
    assert not text.isVisible()

    _score(qtbot, panel)  # the next sample says what the person had seen
    latest = panel.model.results[-1]
    assert read_record(latest.sample_dir / "summary.json", SampleSummary).flags == ["saw-truth"]
    assert f"interactive #2: {DRIFT}" in [item.text(0) for item in _items(tree)]
    assert not truth.isChecked()  # shown for one sample at a time: the new one's truth waits for a click


def test_a_landmark_case_lists_each_probes_error(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    viewer, panel = _panel(make_napari_viewer, tmp_path, LANDMARKS)
    _load(qtbot, panel, LANDMARKS)
    qtbot.mouseClick(panel.findChild(QPushButton, "create_probes_fixed"), Qt.MouseButton.LeftButton)
    moving = np.asarray(viewer.layers["probes_moving"].data, dtype=float)
    viewer.layers["probes_fixed"].data = moving  # clicked where the probes sit in the other channel: wrong
    _score(qtbot, panel)
    result = panel.model.results[-1]
    assert result.status == "wrong-answer"
    detail = read_record(result.sample_dir / "summary.json", SampleSummary).detail
    errors = detail["probe_errors_px"]

    tree = panel.findChild(QTreeWidget, "results")
    row = tree.topLevelItem(tree.topLevelItemCount() - 1)
    worst = _row_of(tree, row, "worst_probe_error")
    assert worst.text(4).startswith("worst [") and "of 25 probes over 2.5 px" in worst.text(4)
    assert worst.childCount() == 25 and not worst.isExpanded()  # 25 rows wait for a click
    for i, error in enumerate(errors):
        probe = worst.child(i)
        assert (probe.text(0), probe.text(1), probe.text(2)) == (f"[{i}]", f"{error:g}", "2.5 px")
        assert probe.text(3) == ("pass" if error <= 2.5 else "fail")
    text = panel.findChild(QPlainTextEdit, "result_explanation").toPlainText()
    assert all(f"[{i}] {error:g} px" in text for i, error in enumerate(errors))
    worst.setExpanded(True)
    tree.scrollToItem(worst)
    QApplication.processEvents()
    _shoot(panel, "score-results-landmarks.png")


def test_open_run_folder_flags_the_next_sample_as_viewing_artifacts_does(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qtpy.QtGui import QDesktopServices

    from napari_imagebench import _folder_widget

    opened: list[str] = []
    monkeypatch.setattr(_folder_widget, "open_command", lambda path: None)  # ask Qt, not xdg-open
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url.toLocalFile()) or False)
    viewer, panel = _panel(make_napari_viewer, tmp_path, BLOBS)

    def score_toy() -> list[str]:
        image = np.asarray(viewer.layers["image"].data)
        panel.model.loaded.session.namespace.update(mask=image > 0.5, area=1.0)  # type: ignore[union-attr]
        _score(qtbot, panel)
        return read_record(panel.model.results[-1].sample_dir / "summary.json", SampleSummary).flags

    _load(qtbot, panel, TOY)
    assert score_toy() == []
    _load(qtbot, panel, TOY)  # a fresh load: nothing seen yet
    qtbot.mouseClick(panel.findChild(QPushButton, "folder_button"), Qt.MouseButton.LeftButton)
    # the desktop could not open it (False): the path was told all the same, so it is flagged all the same
    assert opened == [str(panel.model.results[-1].run_dir.parent)]
    by_folder = score_toy()
    _load(qtbot, panel, TOY)
    qtbot.mouseClick(panel.findChild(QPushButton, "artifacts_button"), Qt.MouseButton.LeftButton)
    assert all(" s2: " in layer.name for layer in viewer.layers if layer.visible)  # pane titles count from 1
    qtbot.mouseClick(panel.findChild(QPushButton, "back_button"), Qt.MouseButton.LeftButton)
    by_artifacts = score_toy()
    assert by_folder == by_artifacts == ["saw-artifacts"]


def test_a_segmentations_overlay_pane_shows_truth_and_answer_in_two_colours(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = _panel(make_napari_viewer, tmp_path, BLOBS)
    _load(qtbot, panel, BLOBS)
    truth = np.asarray(panel.model.loaded.fixture.truth["labels"])  # type: ignore[union-attr]
    viewer.add_labels(np.where(truth % 3 == 0, 0, truth).astype(np.int32), name="labels")  # a third missed
    _score(qtbot, panel)
    assert "green" in panel.findChild(QPlainTextEdit, "result_explanation").toPlainText()
    qtbot.mouseClick(panel.findChild(QPushButton, "artifacts_button"), Qt.MouseButton.LeftButton)
    QApplication.processEvents()
    (overlay,) = [layer for layer in viewer.layers if layer.visible and layer.name.endswith(": overlay")]
    assert overlay.name == "interactive s1: overlay" and overlay.rgb
    rgb = np.asarray(overlay.data)
    assert rgb.shape[0] > truth.shape[0]  # the legend strip under the image
    green = (rgb[..., 1].astype(int) > rgb[..., 0] + 100) & (rgb[..., 1].astype(int) > rgb[..., 2] + 100)
    assert green[: truth.shape[0]].any() and green[truth.shape[0] :].any()
    if SHOTS:
        viewer.layers.selection.active = overlay
        viewer.grid.enabled = False
        for layer in viewer.layers:
            layer.visible = layer is overlay
        viewer.reset_view()
        QApplication.processEvents()
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        viewer.screenshot(str(Path(SHOTS) / "score-overlay-viewer.png"), canvas_only=False)
