"""The bench panel in a real napari viewer (run under xvfb-run).

Most tests use the small toy case from ``tests/helpers.py`` (a bright rectangle: leave its
``mask`` and ``area``) next to the built-in suite, so that each one stays quick.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from helpers import UnavailableSpec, make_toy_case, toy_fixture, truth_leaks

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from napari.utils.notifications import notification_manager  # noqa: E402

from imagebench import cases as builtin  # noqa: E402
from imagebench.records import RunRecord, SampleSummary, read_record  # noqa: E402
from imagebench.runs.artifacts import shared_range  # noqa: E402
from napari_imagebench._artifacts import artifact_layers, contrast_ranges, viewer_grid  # noqa: E402
from napari_imagebench._model import INTERACTIVE, BenchModel  # noqa: E402
from napari_imagebench._widget import BenchPanel, console_namespace  # noqa: E402

TOY = "toy/rectangle"
QC = "segmentation-qc-metrics/annotation-vs-model"


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a panel built with the default model writes under artifact_root(): keep that out of the checkout
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def _cases() -> list[Any]:
    return [make_toy_case(), make_toy_case("offline", spec=UnavailableSpec()), *builtin.all_cases()]


def make_panel(make_napari_viewer: Any, tmp_path: Path, **kw: Any) -> tuple[Any, BenchPanel]:
    viewer = make_napari_viewer(**kw)
    model = BenchModel(cases=_cases, outcome_root=tmp_path / "panel-out")
    panel = BenchPanel(viewer, model)
    viewer.window.add_dock_widget(panel, name="Imagebench")
    return viewer, panel


def load_and_wait(qtbot: Any, panel: BenchPanel, label: str | None = None) -> None:
    """Load ``label`` (or the selected case) and wait for the worker to put the layers up."""
    assert panel.load(label) if label is not None else panel.load_selected()
    assert not panel.load_button.isEnabled()  # one piece of work at a time
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.model.loaded is not None and panel.model.loaded.case.label == (label or panel.selected_label())


def run_and_wait(qtbot: Any, panel: BenchPanel, subject: str = "reference") -> None:
    panel.subject_combo.setCurrentText(subject)
    assert panel.run_button.isEnabled()
    assert panel.run()
    assert not panel.run_button.isEnabled()  # one run at a time
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)


def result_lines(panel: BenchPanel) -> list[str]:
    return [panel.results.topLevelItem(i).text(0) for i in range(panel.results.topLevelItemCount())]


def test_panes_are_kept_for_the_same_sample_replaced_for_another_and_go_with_the_case(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, TOY)
    run_and_wait(qtbot, panel)
    assert panel.score() is not None
    first = panel.view_artifacts()
    assert first and panel.back_to_the_case()
    run_and_wait(qtbot, panel)
    second_result = panel.score()  # the newest result is selected: View shows its panes, not the first's
    assert second_result is not None
    second = panel.view_artifacts()
    assert second and all(layer not in viewer.layers for layer in first)
    assert {layer.metadata["imagebench_artifact"] for layer in artifact_layers(viewer)} >= {
        str(second_result.sample_dir / name) for name in second_result.artifacts
    }
    assert panel.back_to_the_case()
    load_and_wait(qtbot, panel, TOY)  # Load: the hidden panes go with the old case's layers
    assert artifact_layers(viewer) == [] and not viewer_grid(viewer).enabled


def test_panel_docks_from_the_plugin_and_lists_the_builtin_cases(make_napari_viewer: Any) -> None:
    viewer = make_napari_viewer()
    dock, panel = viewer.window.add_plugin_dock_widget("napari-imagebench", "Imagebench")
    assert isinstance(panel, BenchPanel)
    items = panel.case_items()
    expected = {c.label for c in builtin.all_cases()}
    assert expected and expected <= set(items)
    for case in builtin.all_cases():
        row = panel.model.row(case.label)
        assert items[case.label].text(3) == ("yes" if row.available else "no")
    assert panel.run_button.isEnabled() is False and panel.score_button.isEnabled() is False


def test_unavailable_case_is_greyed_with_its_reason_and_cannot_load(make_napari_viewer: Any, tmp_path: Path) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    item = panel.case_items()["toy/offline"]
    assert item.text(3) == "no"
    assert "the toy tree is not on this machine" in item.toolTip(0)
    assert item.foreground(0).color().getRgb()[:3] == (128, 128, 128)
    panel.select_case("toy/offline")
    assert not panel.load_button.isEnabled()
    assert "unavailable: the toy tree is not on this machine" in panel.detail.toPlainText()
    assert not panel.load("toy/offline")
    assert len(viewer.layers) == 0
    assert any("cannot run here" in line for line in result_lines(panel))


def test_fixture_tree_picker_reroots_curated_cases_and_lists_unused_fixtures(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imagebench.fixtures.specs import OnDisk
    from imagebench.fixtures.tree import write_case_layout, write_manifest_entry
    from napari_imagebench._reader import napari_get_reader

    monkeypatch.delenv("IMAGEBENCH_FIXTURES", raising=False)
    tree = tmp_path / "tree"
    fx = toy_fixture(3)
    for namespace, case_id in (("toy", "curated"), ("other", "orphan")):
        folder = tree / namespace / case_id
        folder.mkdir(parents=True)
        np.save(folder / "image.npy", fx.data["image"])
        np.save(folder / "mask.npy", fx.truth["mask"])
        write_case_layout(tree, namespace, case_id, about="a toy", data={"image": "image.npy"}, truth={"mask": "mask.npy"})
        write_manifest_entry(tree, namespace, case_id, provenance="the toy rectangle, seed 3", citation="nobody's")
    curated = make_toy_case("curated", spec=OnDisk(tolerance={"mask_error": 0.05, "area_error": 0.05}))
    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(cases=lambda: [curated], outcome_root=tmp_path / "out"))
    assert panel.case_items()["toy/curated"].text(3) == "no"
    assert "IMAGEBENCH_FIXTURES is not set" in panel.case_items()["toy/curated"].toolTip(0)

    assert panel.set_fixtures_root(tree)
    assert str(tree) in panel.tree_label.text()
    items = panel.case_items()
    assert items["toy/curated"].text(3) == "yes"
    assert items["other/orphan"].text(3) == "no" and "no case in this suite uses it" in items["other/orphan"].toolTip(0)
    load_and_wait(qtbot, panel, "toy/curated")
    np.testing.assert_array_equal(viewer.layers["image"].data, fx.data["image"])
    assert not panel.load("other/orphan")
    # the reader shows a tree case no suite case knows as its data keys, as images, and never truth
    layers = napari_get_reader(str(tree / "other" / "orphan"))(str(tree / "other" / "orphan"))  # type: ignore[misc]
    assert [(kw["name"], kind) for _, kw, kind in layers] == [("image", "image")]
    assert f"pixels: the fixture tree {tree.resolve()}" in panel.model.detail("toy/curated").text()

    # a tree that drifted from its manifest (a truth file deleted) is refused; the valid one is kept
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tree, broken)
    (broken / "toy" / "curated" / "mask.npy").unlink()
    assert not panel.set_fixtures_root(broken)
    assert panel.model.fixtures_root == tree and str(tree) in panel.tree_label.text()
    assert "differs from its manifest" in result_lines(panel)[-1] and "mask.npy" in result_lines(panel)[-1]


def test_detail_shows_what_a_subject_is_told_and_never_truth(make_napari_viewer: Any, tmp_path: Path) -> None:
    _, panel = make_panel(make_napari_viewer, tmp_path)
    panel.select_case(TOY)
    text = panel.detail.toPlainText()
    for part in ("Find the bright rectangle", "careful image analyst", "image: image, presented as array",
                 "mask (array)", "area (scalar)", "mask_error <= 0.05", "area_error <= 0.05"):
        assert part in text
    assert "secret" not in text  # a truth-only key


def test_load_adds_the_data_layers_with_their_kinds_and_no_truth(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    panel.select_case(QC)
    load_and_wait(qtbot, panel)
    case = builtin.get_case(QC)
    assert [layer.name for layer in viewer.layers] == [layer.name for layer in case.layers]
    for spec in case.layers:
        assert type(viewer.layers[spec.name]).__name__.lower() == spec.kind
    fixture = case.build()
    for layer in viewer.layers:
        assert not truth_leaks(dict(fixture.truth), array=np.asarray(layer.data))
    # loading another case replaces the panel's layers
    load_and_wait(qtbot, panel, TOY)
    assert [(layer.name, type(layer).__name__) for layer in viewer.layers] == [("image", "Image")]
    np.testing.assert_array_equal(viewer.layers["image"].data, toy_fixture(0).data["image"])
    backlog = viewer.window._qt_viewer.console_backlog[-1]
    assert {"image", "prompt", "session"} <= set(backlog) and not {"mask", "secret"} & set(backlog)


def test_run_reference_then_score_shows_ok_and_each_metric(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    panel.select_case(TOY)
    load_and_wait(qtbot, panel)
    run_and_wait(qtbot, panel)
    # what the reference bound is on the viewer, attributed to it, as a copy: painting on it
    # changes nothing the reference left
    shown = viewer.layers["reference:mask"]
    assert type(shown).__name__ == "Labels"
    shown.data[...] = 0
    result = panel.score()
    assert result is not None and result.status == "ok"
    row = panel.results.topLevelItem(panel.results.topLevelItemCount() - 1)
    assert row.text(1) == "ok" and row.text(0) == "reference #1: toy/rectangle"  # sample-0, counted from 1
    metrics = {row.child(i).text(0): [row.child(i).text(c) for c in range(1, 4)] for i in range(row.childCount())}
    assert metrics == {"mask_error": ["0", "0.05", "pass"], "area_error": ["0", "0.05 rel", "pass"]}
    on_disk = read_record(result.sample_dir / "summary.json", SampleSummary)
    assert on_disk.status == "ok" and on_disk.subject == "reference" and on_disk.sample == 0
    record = read_record(result.run_dir / "run.json", RunRecord)
    assert record.subject == "reference" and record.cases == [TOY] and record.counts == {"ok": 1} and record.complete
    # the run folder of the sitting: every subject's run in it, one report over them
    sitting = panel.run_folder_path()
    assert sitting is not None and result.run_dir.parent == sitting and sitting.parent == tmp_path / "panel-out"
    # a second sample needs a second run; the two accumulate as rows in one run folder
    assert panel.score() is None
    assert "run reference on toy/rectangle first" in result_lines(panel)[-1]
    run_and_wait(qtbot, panel)
    second = panel.score()
    assert second is not None and second.sample == 1 and second.run_dir == result.run_dir
    assert [r.sample for r in panel.model.results] == [0, 1]
    # a panel run folder is a full run folder: the receipt and the report, as a headless run writes
    import json

    receipt = json.loads((result.run_dir / "receipt.json").read_text())
    assert receipt["subject"]["form"] == "reference" and receipt["subject"]["sandbox"] == "in-process"
    assert not (result.run_dir / "report.html").exists()  # one page, the sitting's
    page = (sitting / "report.html").read_text()
    assert "toy/rectangle" in page and "sample 1" in page and 'data-subject="reference"' in page


def _paint(labels: Any, where: np.ndarray) -> None:
    labels.brush_size = 1
    for r, c in zip(*np.nonzero(where), strict=True):
        labels.paint((r, c), 1, refresh=False)
    labels.refresh()


class _FakeConsole:
    """What napari_console's QtConsole exposes of itself that the panel reads (``shell.user_ns``)."""

    def __init__(self, user_ns: dict[str, Any]) -> None:
        self.shell = SimpleNamespace(user_ns=user_ns)

    def close(self) -> None:
        pass


def test_interactive_subject_paints_labels_binds_a_value_and_scores(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, TOY)
    assert panel.subject_combo.currentText() == INTERACTIVE and not panel.run_button.isEnabled()
    assert console_namespace(viewer) is None  # the console was never opened
    # nothing left yet: Score waits, and no sample is written for an empty answer
    assert not panel.score_button.isEnabled() and "leave mask, area first" in panel.score_button.toolTip()
    assert panel.score() is None and panel.model.results == []
    assert "leave mask, area first" in result_lines(panel)[-1]
    # a person looks at the image, paints the rectangle and types its area into the console
    bright = viewer.layers["image"].data > 0.5
    labels = viewer.add_labels(np.zeros(bright.shape, np.uint8), name="mask")
    _paint(labels, bright)
    user_ns: dict[str, Any] = {"area": int(bright.sum())}
    viewer.window._qt_viewer._console = _FakeConsole(user_ns)
    assert console_namespace(viewer) is user_ns
    panel._update_buttons()
    assert panel.score_button.isEnabled()
    result = panel.score()
    assert result is not None and result.status == "ok", result.reason
    assert result.subject == "interactive" and result.sample == 0
    # a sloppy area bound in the panel's own session counts when the console holds none
    del user_ns["area"]
    panel.model.loaded.session.namespace["area"] = int(bright.sum()) * 2
    wrong = panel.score()
    assert wrong is not None and wrong.status == "wrong-answer"
    assert {m.name: m.verdict for m in wrong.metrics} == {"mask_error": "pass", "area_error": "fail"}
    viewer.window._qt_viewer._console = None


def test_layer_deleted_before_scoring_is_reported_and_the_panel_stays_usable(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, TOY)
    bright = viewer.layers["image"].data > 0.5
    labels = viewer.add_labels(bright.astype(np.uint8), name="mask")
    panel.model.loaded.session.namespace["area"] = int(bright.sum())
    viewer.layers.remove(labels)
    before = len(notification_manager.records)
    # the answer is incomplete again: Score waits and names the layer that was deleted
    assert panel.score() is None and panel.model.results == []
    assert "leave mask first (mask: the layer 'mask' was deleted before scoring" in result_lines(panel)[-1]
    assert any("deleted before scoring" in str(n.message) for n in notification_manager.records[before:])
    # a deleted data layer does not stop a reference run from scoring
    viewer.layers.remove(viewer.layers["image"])
    run_and_wait(qtbot, panel)
    panel.subject_combo.setCurrentText("reference")
    again = panel.score()
    assert again is not None and again.status == "ok"
    assert any("layer 'image' was deleted before scoring" in line for line in result_lines(panel))


def test_bad_fixture_folder_and_bad_solver_are_reported(make_napari_viewer: Any, tmp_path: Path) -> None:
    _, panel = make_panel(make_napari_viewer, tmp_path)
    before_root = panel.model.fixtures_root
    empty = tmp_path / "not-a-tree"
    empty.mkdir()
    n = len(notification_manager.records)
    assert not panel.set_fixtures_root(empty)
    assert panel.model.fixtures_root == before_root
    assert any("not a fixture tree" in line and "manifest.json" in line for line in result_lines(panel))
    panel.solver_edit.setText("python:no_such_module_xyz:solve")
    assert not panel.add_solver()
    assert "cannot import module 'no_such_module_xyz'" in result_lines(panel)[-1]
    assert panel.subject_combo.findText("python:no_such_module_xyz:solve") < 0
    assert len(notification_manager.records) >= n + 2


def test_a_python_solver_added_in_the_panel_runs_and_scores(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "panel_solver_mod.py").write_text(
        "import numpy as np\n\n"
        "def solve(session):\n"
        "    mask = np.asarray(session.namespace['image']) > 0.5\n"
        "    session.namespace['mask'] = mask\n"
        "    session.namespace['area'] = float(mask.sum()) * 1.5\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, TOY)
    panel.solver_edit.setText("python:panel_solver_mod:solve")
    assert panel.add_solver()
    assert panel.subject_combo.currentText() == "python:panel_solver_mod:solve"
    run_and_wait(qtbot, panel, "python:panel_solver_mod:solve")
    result = panel.score()
    assert result is not None and result.status == "wrong-answer" and result.subject == "python-panel_solver_mod.solve"
    assert "area_error" in result.reason


def test_artifacts_share_one_contrast_range_and_a_screenshot_is_not_blank(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    import imageio.v3 as iio

    viewer, panel = make_panel(make_napari_viewer, tmp_path, show=True)
    viewer.window._qt_window.resize(1400, 900)
    panel.select_case(TOY)
    load_and_wait(qtbot, panel)
    run_and_wait(qtbot, panel)
    result = panel.score()
    assert result is not None and result.artifacts
    panes = panel.view_artifacts()
    assert len(panes) == len(result.artifacts) >= 2
    assert panes == artifact_layers(viewer) and viewer_grid(viewer).enabled
    # the real values kept beside each PNG, under one range computed from them (not 0..255)
    values = [np.load((result.sample_dir / name).with_suffix(".npy")) for name in result.artifacts]
    assert contrast_ranges(panes) == {shared_range(*values)} != {(0.0, 255.0)}
    assert all(pane.data.dtype == np.float32 for pane in panes)
    assert all(pane.name_overlay.visible for pane in panes)  # each pane titled
    assert [layer.name for layer in viewer.layers if layer.visible] == [pane.name for pane in panes]  # only them
    panes[0].contrast_limits = (0.1, 0.5)  # linked: every pane follows
    assert contrast_ranges(panes) == {(0.1, 0.5)}
    # viewing again replaces the panes rather than stacking them
    assert len(panel.view_artifacts()) == len(panes) and len(artifact_layers(viewer)) == len(panes)
    # Back to the case: the panes hide (kept for the next View), the case's layers show as they were
    before = {"image": True, "reference:mask": True}
    assert panel.back_button.isEnabled() and panel.back_to_the_case()
    assert not any(pane.visible for pane in artifact_layers(viewer)) and not viewer_grid(viewer).enabled
    assert {layer.name: layer.visible for layer in viewer.layers if layer.name in before} == before
    assert not panel.back_button.isEnabled()
    again = panel.view_artifacts()  # the same sample again: the same panes, shown, nothing uploaded twice
    assert again == panes and all(pane.visible for pane in again) and viewer_grid(viewer).enabled
    assert [layer.name for layer in viewer.layers if layer.visible] == [pane.name for pane in panes]
    assert contrast_ranges(panes) == {(0.1, 0.5)}  # still linked, as the person left them
    panes = again
    # the panes are no leaving, and a person who has seen them (truth among them) is flagged
    panel.subject_combo.setCurrentText(INTERACTIVE)
    assert panel.score() is None  # the panes are no answer: nothing is left yet
    viewer.add_labels(np.zeros(viewer.layers["image"].data.shape, np.uint8), name="mask")
    panel.model.loaded.session.namespace["area"] = 1
    seen = panel.score()
    assert seen is not None and seen.status == "wrong-answer"
    flags = read_record(seen.sample_dir / "summary.json", SampleSummary).flags
    assert flags == ["saw-artifacts", "saw-results-reference"]

    qtbot.wait(50)
    shot = viewer.screenshot(canvas_only=False, flash=False)
    out = tmp_path / "screenshots" / "panel-after-score.png"
    out.parent.mkdir()
    iio.imwrite(out, shot)
    assert out.stat().st_size > 10_000
    assert np.asarray(shot)[..., :3].std() > 10
    assert _qimage_array(panel.grab().toImage())[..., :3].std() > 10  # the docked panel itself is drawn


def _qimage_array(image: Any) -> np.ndarray:
    from qtpy.QtGui import QImage

    image = image.convertToFormat(QImage.Format_RGBA8888)
    ptr = image.constBits()
    ptr.setsize(image.height() * image.bytesPerLine())
    rows = np.frombuffer(ptr, np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, : image.width() * 4].reshape(image.height(), image.width(), 4).copy()


def test_every_control_has_an_object_name_and_a_session_is_worked_by_clicking_them(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    """Load, Run, Score and Export CSV found by objectName and clicked; the results are a CSV."""
    import csv

    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QPushButton, QWidget

    _, panel = make_panel(make_napari_viewer, tmp_path)
    named = {w.objectName() for w in panel.findChildren(QWidget)}
    controls = [w for w in vars(panel).values() if isinstance(w, QWidget)]
    assert controls and all(w.objectName() for w in controls)
    assert {"load_button", "run_button", "score_button", "export_button", "case_tree", "results"} <= named
    assert panel.objectName() == "bench_panel"

    def click(name: str) -> None:
        button = panel.findChild(QPushButton, name)
        assert button is not None and button.isEnabled(), name
        qtbot.mouseClick(button, Qt.LeftButton)

    panel.select_case(TOY)
    click("load_button")
    qtbot.waitUntil(lambda: not panel.running and panel.model.loaded is not None, timeout=30_000)
    panel.subject_combo.setCurrentText("reference")
    click("run_button")
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    click("score_button")
    assert [r.status for r in panel.model.results] == ["ok"]
    newest = panel.results.topLevelItem(panel.results.topLevelItemCount() - 1)
    assert panel.results.currentItem() is newest

    path = panel.export_results(tmp_path / "results.csv")
    assert path is not None
    rows = list(csv.DictReader(path.open()))
    assert [(r["case"], r["status"], r["metric"], r["verdict"]) for r in rows] == [
        (TOY, "ok", "mask_error", "pass"),
        (TOY, "ok", "area_error", "pass"),
    ]
    assert panel.export_results(path / "x.csv") is None  # under a file: named, the panel goes on
    assert "could not be written" in panel.model.messages[-1].text


def test_stop_ends_a_sleeping_solver_within_2_s_and_records_the_sample_stopped(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QPushButton

    (tmp_path / "sleepy_solver.py").write_text("import time\n\ndef solve(session):\n    time.sleep(60)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = "python:sleepy_solver:solve"
    _, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, TOY)
    panel.solver_edit.setText(spec)
    assert panel.add_solver()
    stop = panel.findChild(QPushButton, "stop_button")
    assert stop is not None and not stop.isEnabled()  # nothing to stop yet
    assert panel.run() and stop.isEnabled()
    time.sleep(0.3)
    started = time.perf_counter()
    qtbot.mouseClick(stop, Qt.LeftButton)
    qtbot.waitUntil(lambda: not panel.running, timeout=5_000)
    assert time.perf_counter() - started < 2.0
    (result,) = panel.model.results
    assert result.status == "stopped" and "stopped by the person" in result.reason
    on_disk = read_record(result.sample_dir / "summary.json", SampleSummary)
    assert on_disk.status == "stopped"
    assert not stop.isEnabled() and panel.run_button.isEnabled()  # the panel goes on


def test_cases_are_shown_in_physical_units_with_channels_and_ordered_points(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, "calibrated-measurements/anisotropic-volumes")
    labels = viewer.layers["labels"]
    assert tuple(labels.scale) == (2.0, 0.5, 0.5) and [str(u) for u in labels.units] == ["micrometer"] * 3
    assert tuple(labels.axis_labels) == ("z", "y", "x")

    load_and_wait(qtbot, panel, "pick-a-nucleus/synthetic-volume")
    assert tuple(viewer.layers["volume"].axis_labels) == ("z", "y", "x")

    load_and_wait(qtbot, panel, "align-channels-from-landmarks/synthetic-warp")
    fixed, moving = viewer.layers["fixed"], viewer.layers["moving"]
    assert (fixed.colormap.name, moving.colormap.name) == ("green", "magenta")
    assert fixed.blending == moving.blending == "additive"  # neither hides the other
    points = viewer.layers["landmarks_fixed"]
    assert list(points.features["index"]) == list(range(len(points.data)))
    assert points.text.string.format == "{index}"
    side = min(fixed.data.shape[-2:])
    assert 2.0 <= float(points.size[0]) <= side / 25  # sized to the image, not a fixed 10 px


# --------------------------------------------------------------------------- answering by picking


def _reference_answer(case: Any, name: str) -> Any:
    """What the case's reference leaves for ``name``, on a session of its own (the test's stand-in
    for a person who worked it out by eye)."""
    from imagebench.case.session import open_session

    session = open_session(case, case.build())
    case.reference(session)
    return session.namespace[name]


def test_painting_into_a_created_labels_layer_scores_ok(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QPushButton

    label = "segment-nuclei/synthetic-blobs"
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, label)
    assert not panel.score_button.isEnabled()  # nothing painted yet
    create = panel.findChild(QPushButton, "create_labels")
    assert create is not None
    qtbot.mouseClick(create, Qt.LeftButton)
    created = viewer.layers["labels"]
    assert type(created).__name__ == "Labels" and created.data.shape == viewer.layers["nuclei"].data.shape
    assert panel.answer_panel.picked_names() == {"labels": "labels"}
    created.data = np.asarray(_reference_answer(builtin.get_case(label), "labels"), np.int32)  # the painting
    panel._update_buttons()
    assert panel.score_button.isEnabled()
    qtbot.mouseClick(panel.score_button, Qt.LeftButton)
    (result,) = panel.model.results
    assert result.status == "ok", result.reason
    # a layer of another name, picked for the leaving, stands for it
    renamed = viewer.add_labels(np.zeros_like(created.data), name="my painting")
    panel.answer_panel.pickers["labels"].value = renamed.name
    assert panel.answer_panel.picked_names() == {"labels": "my painting"}


def test_count_nuclei_and_pick_a_nucleus_are_answered_through_the_generated_form(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QPushButton

    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, "segment-nuclei/count-nuclei")
    form = panel.answer_panel.forms["answer"]
    count = int(_reference_answer(builtin.get_case("segment-nuclei/count-nuclei"), "answer")["count"])
    form["field_answer_count"].value = count
    assert not panel.score_button.isEnabled()  # filled, not yet set
    qtbot.mouseClick(panel.answer_panel.findChild(QPushButton, "set_answer"), Qt.LeftButton)
    panel._update_buttons()
    assert panel.score_button.isEnabled()
    assert panel.score().status == "ok"  # type: ignore[union-attr]

    load_and_wait(qtbot, panel, "pick-a-nucleus/synthetic-volume")
    voxel = _reference_answer(builtin.get_case("pick-a-nucleus/synthetic-volume"), "answer")["voxel"]
    viewer.add_points([voxel], name="my click", ndim=3)  # the person clicks inside the largest nucleus
    qtbot.mouseClick(panel.answer_panel.findChild(QPushButton, "point_answer"), Qt.LeftButton)
    field = panel.answer_panel.forms["answer"]["voxel_answer"][0]
    assert field.value == ", ".join(str(v) for v in voxel)
    qtbot.mouseClick(panel.answer_panel.findChild(QPushButton, "set_answer"), Qt.LeftButton)
    assert panel.score().status == "ok"  # type: ignore[union-attr]
    # a bad value is named and nothing is set
    field.value = "1, two, 3"
    assert panel.answer_panel.set_answer("answer") is None
    assert "field 'voxel' is" in result_lines(panel)[-1] and "3 integer voxel indices" in result_lines(panel)[-1]


def test_a_reference_landmark_answer_arrives_as_points_with_their_index(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, "align-channels-from-landmarks/synthetic-warp")
    run_and_wait(qtbot, panel)
    shown = viewer.layers["reference:probes_fixed"]
    assert type(shown).__name__ == "Points"
    assert list(shown.features["index"]) == list(range(len(shown.data))) and shown.text.string.format == "{index}"


def test_the_dock_fits_a_1366x768_screen_and_the_busy_text_is_readable(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    _, panel = make_panel(make_napari_viewer, tmp_path)
    hint = panel.minimumSizeHint()
    assert hint.width() <= 400 and hint.height() <= 600, (hint.width(), hint.height())  # beside a canvas
    from qtpy.QtCore import Qt

    # a result's "<subject> #n: <skill>/<case>" keeps its case's name in sight in that width
    assert panel.results.textElideMode() == Qt.TextElideMode.ElideMiddle
    load_and_wait(qtbot, panel, TOY)
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    assert panel.progress.isTextVisible() and "reference working" in panel.progress.format()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)


def test_the_verifiers_difference_pane_keeps_its_sign_and_its_own_range(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    from imagebench.runs.artifacts import difference_range
    from napari_imagebench._artifacts import SIGNED_KEY

    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, "flatfield/vignetted-field")
    run_and_wait(qtbot, panel)
    result = panel.score()
    assert result is not None and "difference.png" in result.artifacts
    panes = {pane.name.rsplit("/", 1)[-1].rsplit(": ", 1)[-1]: pane for pane in panel.view_artifacts()}
    assert "difference" in panes, list(panes)
    diff = panes.pop("difference")
    assert diff.metadata.get(SIGNED_KEY) and diff.colormap.name == "imagebench difference"
    values = {n: np.load(result.sample_dir / f"{n}.npy") for n in panes}
    lo, hi = shared_range(*values.values())  # the images' range, the difference left out
    assert contrast_ranges(list(panes.values())) == {(lo, hi)}
    assert tuple(diff.contrast_limits) == pytest.approx(difference_range(lo, hi))
    assert float(np.min(diff.data)) < 0 < float(np.max(diff.data))  # both signs, shown as such
    first = next(iter(panes.values()))
    first.contrast_limits = (lo, lo + (hi - lo) / 2)  # the others move with it; the difference does not
    assert tuple(diff.contrast_limits) == pytest.approx(difference_range(lo, hi))


def test_a_compared_pair_gets_a_difference_pane_with_a_range_symmetric_about_zero(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    from napari_imagebench._artifacts import compared_pairs

    assert compared_pairs(["image", "truth_outlines", "labels_outlines"]) == [("truth_outlines", "labels_outlines")]
    assert compared_pairs(["raw_mean", "corrected_mean"]) == [("raw_mean", "corrected_mean")]
    assert compared_pairs(["raw_mean", "corrected_mean", "difference"]) == []  # the verifier drew one
    assert compared_pairs(["fixed", "moving", "probes"]) == []
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load_and_wait(qtbot, panel, "drift-correction/large-field-tensor")
    run_and_wait(qtbot, panel)
    result = panel.score()
    assert result is not None and result.artifacts == ("raw_mean.png", "corrected_mean.png")
    panes = panel.view_artifacts()
    assert len(panes) == 3
    diff = panes[-1]
    assert diff.name.endswith(": corrected - raw") and diff.colormap.name == "PiYG"
    lo, hi = diff.contrast_limits
    assert lo == -hi > -np.inf and hi > 0
    raw, corrected = (np.load((result.sample_dir / n).with_suffix(".npy")) for n in ("raw_mean.png", "corrected_mean.png"))
    np.testing.assert_allclose(diff.data, corrected - raw, atol=1e-6)
    assert contrast_ranges(panes[:2]) == {shared_range(raw, corrected)}  # the pair keeps its linked range
