"""The bench panel on a 1366x768 laptop screen (run under xvfb-run): the viewer's window at that
size with the panel docked shows enough case rows and result rows, every control has a tooltip,
the case filter narrows the tree as one types, and the panel's shortcuts do what the buttons do."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from qtpy.QtCore import Qt  # noqa: E402
from qtpy.QtWidgets import (  # noqa: E402
    QAbstractButton,
    QAbstractItemView,
    QApplication,
    QComboBox,
    QLineEdit,
    QWidget,
)

from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

BLOBS = "segment-nuclei/synthetic-blobs"
SHOT = os.environ.get("IMAGEBENCH_LAPTOP_SHOT")  # where to save the screenshot (docs/images/panel-laptop.png)


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def laptop_panel(make_napari_viewer: Any, tmp_path: Path) -> tuple[Any, BenchPanel]:
    viewer = make_napari_viewer(show=True)
    panel = BenchPanel(viewer, BenchModel(outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench", area="right")
    window = viewer.window._qt_window
    window.showNormal()
    window.resize(1366, 768)
    QApplication.processEvents()
    return viewer, panel


def visible_rows(view: QAbstractItemView) -> float:
    """How many rows the view shows at once: its viewport's height over one row's height."""
    items = QAbstractItemView.model(view)  # the results pane's .model is the bench model
    index = items.index(0, 0)
    child = items.index(0, 0, index)
    height = view.visualRect(child if child.isValid() else index).height() or view.sizeHintForRow(0)
    return view.viewport().height() / max(height, 1)


def test_the_panel_fits_a_1366x768_laptop_screen(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    viewer, panel = laptop_panel(make_napari_viewer, tmp_path)
    window = viewer.window._qt_window
    panel.select_case(BLOBS)
    assert panel.load_selected()
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)
    assert panel.score() is not None
    QApplication.processEvents()
    cases, results = visible_rows(panel.case_tree), visible_rows(panel.results)
    print(f"window {window.width()}x{window.height()}, dock {panel.width()}x{panel.height()}: "
          f"{cases:.1f} case rows, {results:.1f} result rows")
    if SHOT:
        Path(SHOT).parent.mkdir(parents=True, exist_ok=True)
        assert window.grab().save(SHOT)
    assert (window.width(), window.height()) == (1366, 768)
    assert cases >= 8, cases
    assert results >= 6, results


def test_every_control_of_the_panel_has_a_tooltip(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    _, panel = laptop_panel(make_napari_viewer, tmp_path)
    panel.select_case(BLOBS)
    assert panel.load_selected()
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)  # the Answer tab has its pickers now
    panel.tabs.set_folded(False)
    panel.tabs.setCurrentWidget(panel.answer_panel)
    QApplication.processEvents()
    controls = [w for kind in (QAbstractButton, QLineEdit, QComboBox) for w in panel.findChildren(kind)]
    assert len(controls) > 15
    bare = [f"{type(w).__name__} {w.objectName()!r} {getattr(w, 'text', lambda: '')()!r}" for w in controls if not w.toolTip()]
    assert not bare, bare
    for name in ("case_filter", "load_button", "detail_toggle", "score_button", "artifacts_button", "back_button"):
        assert panel.findChild(QWidget, name) is not None, name


def test_the_case_filter_narrows_the_tree_as_one_types(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    _, panel = laptop_panel(make_napari_viewer, tmp_path)
    shown = lambda: [label for label, item in panel.case_items().items() if not item.isHidden()]  # noqa: E731
    every = shown()
    panel.select_case("drift-correction/beads-subpixel")
    qtbot.keyClicks(panel.case_filter, "nuclei/ blob")
    assert shown() == [BLOBS]
    assert panel.selected_label() is None and not panel.load_button.isEnabled()  # a hidden row is not selected
    qtbot.keyClick(panel.case_filter, Qt.Key_Return)  # Enter selects the first row shown
    assert panel.selected_label() == BLOBS and panel.load_button.isEnabled()
    panel.case_filter.setText("hard-case")
    assert shown() and all(panel.model.row(label).case_class == "hard-case" for label in shown())
    panel.refresh()  # a refresh keeps the filter
    assert all(panel.model.row(label).case_class == "hard-case" for label in shown())
    panel.case_filter.clear()
    assert shown() == every


def test_the_detail_folds_and_the_shortcuts_press_the_buttons(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    viewer, panel = laptop_panel(make_napari_viewer, tmp_path)
    folded = panel.tabs.height()
    assert panel.tabs.folded and folded < 50
    panel.detail_toggle.click()
    QApplication.processEvents()
    assert not panel.tabs.folded and panel.tabs.height() > 3 * folded
    panel.detail_toggle.click()
    QApplication.processEvents()
    assert panel.tabs.folded and panel.tabs.height() == folded
    assert "Ctrl+L" in panel.load_button.toolTip() or not panel.load_button.isEnabled()

    window = viewer.window._qt_window
    window.activateWindow()  # a shortcut fires in the active window only
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)
    panel.case_tree.setFocus()
    qtbot.keyClick(panel.case_tree, Qt.Key_L, Qt.ControlModifier)  # nothing selected: Load is greyed
    assert panel.model.loaded is None and not panel.running
    panel.select_case(BLOBS)
    assert "(Ctrl+L)" in panel.load_button.toolTip()
    qtbot.keyClick(panel.case_tree, Qt.Key_L, Qt.ControlModifier)
    qtbot.waitUntil(lambda: panel.model.loaded is not None and not panel.running, timeout=60_000)
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)
    assert "(Ctrl+Return)" in panel.score_button.toolTip()
    qtbot.keyClick(panel.case_tree, Qt.Key_Return, Qt.ControlModifier)
    assert len(panel.model.results) == 1 and panel.model.results[0].status == "ok"
    case_layers = [layer.name for layer in viewer.layers]
    qtbot.keyClick(panel.case_tree, Qt.Key_A, Qt.ControlModifier | Qt.ShiftModifier)
    assert panel.artifact_buttons.reviewing
    qtbot.keyClick(panel.case_tree, Qt.Key_A, Qt.ControlModifier | Qt.ShiftModifier)
    assert not panel.artifact_buttons.reviewing
    assert [layer.name for layer in viewer.layers if layer.visible] == case_layers


def test_the_selected_case_stays_in_view_when_the_tree_shrinks(make_napari_viewer: Any, tmp_path: Path) -> None:
    _, panel = laptop_panel(make_napari_viewer, tmp_path)
    tree = panel.case_tree
    last = list(panel.browser.case_items())[-1]  # the bottom row of the tree: scrolled away at first

    def shown() -> bool:
        item = panel.browser.case_items()[last]
        return tree.viewport().rect().contains(tree.visualItemRect(item))

    panel.select_case(last)
    QApplication.processEvents()
    assert shown()
    tree.scrollToTop()
    tree.setMaximumHeight(120)  # as when the case's detail unfolds beneath the tree
    QApplication.processEvents()
    assert shown()
