"""Two runs side by side in a real viewer (run under xvfb-run): the Compare tab picks two run
folders, a case and a sample, lays both samples' artifacts and A − B out in napari's grid under
one contrast range, and shows ``imagebench compare``'s tables beside them; a forged run is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case
from suite_runs import Shifted, pin, suite_run

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from qtpy.QtWidgets import QComboBox, QLabel, QPushButton, QTableWidget, QWidget  # noqa: E402

from imagebench.subjects import NopSubject, ReferenceSubject  # noqa: E402
from napari_imagebench._artifacts import contrast_ranges, viewer_grid  # noqa: E402
from napari_imagebench._compare_model import COMPARE_KEY, DIFFERENCE  # noqa: E402
from napari_imagebench._model import INTERACTIVE, BenchModel  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

SHOT = os.environ.get("IMAGEBENCH_COMPARE_SHOT")  # also save the screenshot there (e.g. /tmp/sidebyside-grid.png)


@pytest.fixture
def toys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    cases = [make_toy_case("alpha"), make_toy_case("beta", seed=1)]
    suites = tmp_path / "suites"
    suites.mkdir()
    monkeypatch.setenv("IMAGEBENCH_SUITES", str(suites))  # where compare looks the recorded suite up
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))
    return {"cases": cases, "suite": pin(cases, suites), "out": tmp_path / "out"}


def make_panel(make_napari_viewer: Any, tmp_path: Path, cases: list[Any], **kw: Any) -> tuple[Any, BenchPanel]:
    viewer = make_napari_viewer(**kw)
    panel = BenchPanel(viewer, BenchModel(cases=lambda: cases, outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench")
    return viewer, panel


def find(panel: BenchPanel, kind: type, name: str) -> Any:
    widget = panel.findChild(kind, name)
    assert widget is not None, f"no {kind.__name__} named {name}"
    return widget


def cells(table: QTableWidget) -> list[list[str]]:
    return [[table.item(r, c).text() for c in range(table.columnCount())] for r in range(table.rowCount())]


def test_two_runs_side_by_side_in_the_grid_with_the_compare_table(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, toys: dict[str, Any]
) -> None:
    run_a = suite_run(toys["out"], toys["suite"], toys["cases"], ReferenceSubject())
    run_b = suite_run(toys["out"], toys["suite"], toys["cases"], Shifted())
    viewer, panel = make_panel(make_napari_viewer, tmp_path, toys["cases"], show=True)
    viewer.window._qt_window.resize(1500, 950)
    own = viewer.add_image(np.zeros((5, 5)), name="my own image")  # a person's layer: hidden, then restored
    tab = panel.compare_tab
    qtbot.wait(200)
    folded = panel.splitter.sizes()
    panel.tabs.setCurrentWidget(tab)  # folded, the tab takes no room from the results
    qtbot.wait(100)
    assert panel.tabs.folded and panel.splitter.sizes() == folded
    panel.tabs.set_folded(False)  # unfolded, it takes the most of the panel's height the rest leaves it
    qtbot.wait(100)
    top, rest = panel.splitter.sizes()
    assert top > max(rest, folded[0]), (folded, top, rest)
    show = find(panel, QPushButton, "compare_show")
    back = find(panel, QPushButton, "compare_back")
    assert not show.isEnabled() and "pick run folder A, B first" in show.toolTip()
    for name in ("compare_run_a", "compare_run_b", "compare_folder_a", "compare_folder_b", "compare_case"):
        assert find(panel, QWidget, name).toolTip()

    assert tab.pick_folder("A", run_a) and tab.pick_folder("B", run_b)  # what Folder… does, without its dialog
    status = find(panel, QLabel, "compare_status").text()
    assert f"A: reference ({run_a.name})" in status and f"B: shifted ({run_b.name})" in status
    case_box = find(panel, QComboBox, "compare_case")
    assert [case_box.itemText(i) for i in range(case_box.count())] == ["toy/alpha", "toy/beta"]
    case_box.setCurrentText("toy/beta")
    sample_box = find(panel, QComboBox, "compare_sample")
    assert [sample_box.itemText(i) for i in range(sample_box.count())] == ["s1", "s2"]
    assert show.isEnabled() and not back.isEnabled()
    show.click()

    grid = viewer_grid(viewer)
    assert grid.enabled and tab.comparing and back.isEnabled()
    panes = [layer for layer in viewer.layers if COMPARE_KEY in layer.metadata]
    assert [layer.name for layer in panes] == [
        "A reference s1: mask", "B shifted s1: mask", "A − B s1: mask",
        "A reference s1: truth", "B shifted s1: truth", "A − B s1: truth (identical)",
    ]  # fmt: skip
    assert tuple(grid.shape) == (2, 3)
    assert [grid.position(viewer.layers.index(p), viewer.layers) for p in panes] == [
        (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)
    ]  # fmt: skip
    sides = [p.metadata[COMPARE_KEY]["side"] for p in panes]
    grey = [p for p, side in zip(panes, sides, strict=True) if side != DIFFERENCE]
    assert len(contrast_ranges(grey)) == 1  # one range for both runs' panes
    grey[0].contrast_limits = (0.1, 0.9)
    assert contrast_ranges(grey) == {(0.1, 0.9)}  # and linked: moving one moves them all
    diff = panes[2]
    assert diff.colorbar.visible and diff.colormap.name == "imagebench A-B"
    assert set(np.unique(diff.data)) == {-1.0, 0.0, 1.0}
    assert not own.visible  # everything but the compare panes is hidden meanwhile
    legend = find(panel, QLabel, "compare_legend").text()
    assert "A higher" in legend and "B higher" in legend and "truth: identical in A and B" in legend

    conditions = find(panel, QTableWidget, "compare_conditions")
    assert [row[:3] for row in cells(conditions)] == [
        ["C1", "same cohort (suite and sampling policy)", "yes"],
        ["C2", "matched assignments (seed and tasks)", "yes"],
        ["C3", "same scoring rules and units", "yes"],
        ["C4", "the same execution conditions", "yes"],
    ]
    outcomes = cells(find(panel, QTableWidget, "compare_cases"))
    assert [row[:8] for row in outcomes] == [
        ["toy/alpha", "2", "1", "2/2", "1/2", "-0.5", "1", "0"],
        ["toy/beta", "2", "1", "2/2", "1/2", "-0.5", "1", "0"],
        ["overall", "4", "2", "4/4", "2/4", "-0.5", "2", "0"],
    ]
    assert "McNemar exact p = 0.5 over 2 distinct fixtures" in find(panel, QLabel, "compare_summary").text()

    qtbot.wait(500)  # the resized window laid out, then the panes fitted to its canvas
    viewer.reset_view()
    qtbot.wait(200)
    shot = viewer.screenshot(canvas_only=False, flash=False)
    assert shot.ndim == 3 and shot.std() > 5
    for path in [tmp_path / "sidebyside-grid.png", *([Path(SHOT)] if SHOT else [])]:
        import imageio.v3 as iio

        iio.imwrite(path, shot)

    # another sample replaces the panes; Back restores the viewer as it was
    sample_box.setCurrentIndex(1)
    show.click()
    assert [p.name for p in viewer.layers if COMPARE_KEY in p.metadata][0] == "A reference s2: mask"
    assert len([p for p in viewer.layers if COMPARE_KEY in p.metadata]) == 6
    back.click()
    assert not [p for p in viewer.layers if COMPARE_KEY in p.metadata]
    assert not grid.enabled and tuple(grid.shape) == (-1, -1) and own.visible and not back.isEnabled()


def test_a_forged_run_is_refused_with_its_reason(
    make_napari_viewer: Any, tmp_path: Path, toys: dict[str, Any]
) -> None:
    run_a = suite_run(toys["out"], toys["suite"], toys["cases"], ReferenceSubject())
    run_b = suite_run(toys["out"], toys["suite"], toys["cases"], NopSubject())
    summary = run_b / "nop" / "toy" / "alpha" / "sample-1" / "summary.json"
    raw = json.loads(summary.read_text())
    raw.update(status="ok", passed=True, reason="")
    summary.write_text(json.dumps(raw))
    _, panel = make_panel(make_napari_viewer, tmp_path, toys["cases"])
    tab = panel.compare_tab
    assert tab.pick_folder("A", run_a)
    assert not tab.pick_folder("B", run_b)
    status = find(panel, QLabel, "compare_status")
    assert "run B is forged: toy/alpha#1" in status.text() and "digest mismatch" in status.text()
    assert "never shown" in status.text()
    assert "run B is forged" in panel.model.messages[-1].text  # a notice too, in the results pane
    assert find(panel, QComboBox, "compare_case").count() == 0
    assert not find(panel, QPushButton, "compare_show").isEnabled()
    assert find(panel, QTableWidget, "compare_conditions").rowCount() == 0


def test_two_runs_of_the_sitting_and_the_panel_s_own_views(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, toys: dict[str, Any]
) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path, [make_toy_case()])
    assert panel.load("toy/rectangle")
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.score() is not None
    image = panel.model.loaded.session.namespace["image"]
    viewer.add_image(np.roll(image > 0.5, 1, axis=0).astype(np.uint8), name="mask")  # a person's hurried answer
    panel.subject_combo.setCurrentText(INTERACTIVE)
    panel.model.loaded.session.namespace["area"] = 99.0
    assert panel.score() is not None
    combo_a = find(panel, QComboBox, "compare_run_a")
    texts = [combo_a.itemText(i) for i in range(combo_a.count())]
    assert texts[0] == "pick a run folder…" and [t.split(" · ")[0] for t in texts[1:]] == ["reference", "interactive"]
    combo_a.activated.emit(1)
    find(panel, QComboBox, "compare_run_b").activated.emit(2)
    assert panel.compare_tab.model.ready
    find(panel, QPushButton, "compare_show").click()
    assert panel.compare_tab.comparing and "saw-artifacts" in panel.model.loaded.seen
    # the panel's runs record no cohort: compare refuses each condition, and says why
    rows = cells(find(panel, QTableWidget, "compare_conditions"))
    assert [r[2] for r in rows] == ["no"] * 4 and "records no cohort" in rows[0][3]
    assert find(panel, QTableWidget, "compare_cases").rowCount() == 0
    # a sample more in run A: it is read again (and checked again) where it is picked
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.score() is not None
    assert sorted(panel.compare_tab.model.runs["A"].samples("toy/rectangle")) == [0, 1]
    assert panel.compare_tab.model.samples("toy/rectangle") == [0]  # B holds sample 0 alone
    # View artifacts takes over: the compare panes go first, the case's layers are kept for its Back
    panel.results.setCurrentItem(panel.results.topLevelItem(0))
    panel.artifacts_button.click()
    assert not panel.compare_tab.comparing and panel.artifact_buttons.reviewing
    assert not [p for p in viewer.layers if COMPARE_KEY in p.metadata]
    panel.back_button.click()
    assert viewer.layers["image"].visible and not viewer_grid(viewer).enabled
    # and Side by side again, then a Load ends it
    find(panel, QPushButton, "compare_show").click()
    assert panel.compare_tab.comparing
    assert panel.load("toy/rectangle")
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert not panel.compare_tab.comparing and not [p for p in viewer.layers if COMPARE_KEY in p.metadata]
    assert viewer.layers["image"].visible
