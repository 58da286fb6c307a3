"""The person's layers respected, and each case presented as it declares itself, in a real viewer
(run under xvfb-run), driven through controls found by objectName.

- a Labels layer painted on dsb2018 is no answer to dsb2018-dim: the Load asks (a message box,
  Keep aside / Remove), the picker never offers it, Score waits; it comes back on dsb2018;
- a layer of the person's own that holds a case layer's name is renamed, never the case's;
- the landmark case's three points layers are three colours and symbols, a created answer is
  sized like them, starts in add mode and counts "k of 25 clicked"; a created Labels starts in
  paint mode;
- StarDist's stack shows at full resolution (no pyramid) on its voxels, with the scale bar, in 3D;
- the drift-vector's time axis is named ``t``; artifact panes keep the channels' colours.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from qtpy.QtCore import Qt  # noqa: E402
from qtpy.QtWidgets import QLabel, QMessageBox, QPushButton  # noqa: E402

from imagebench import cases as builtin  # noqa: E402
from napari_imagebench._artifacts import artifact_layers  # noqa: E402
from napari_imagebench._model import INTERACTIVE, BenchModel  # noqa: E402
from napari_imagebench._owners import owner  # noqa: E402
from napari_imagebench._viewer import scale_bar  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

LANDMARKS = "align-channels-from-landmarks/synthetic-warp"


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def make_panel(make_napari_viewer: Any, tmp_path: Path, **kw: Any) -> tuple[Any, BenchPanel]:
    viewer = make_napari_viewer(**kw)
    panel = BenchPanel(viewer, BenchModel(cases=builtin.all_cases, outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench")
    return viewer, panel


def load(qtbot: Any, panel: BenchPanel, label: str) -> None:
    panel.select_case(label)
    qtbot.mouseClick(panel.load_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)
    assert panel.model.loaded is not None and panel.model.loaded.case.label == label, panel.model.messages[-1].text


def click(qtbot: Any, parent: Any, name: str) -> None:
    button = parent.findChild(QPushButton, name)
    assert button is not None, name
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def answer_the_question_with(qtbot: Any, panel: BenchPanel, button_name: str) -> str:
    """Click ``button_name`` in the leftovers message box the last Load put up (found by objectName);
    the box's text."""
    box = panel.findChild(QMessageBox, "leftovers_question")
    assert box is not None and box.isVisible() and not box.isModal()  # the Load did not wait for it
    text = box.text()
    qtbot.mouseClick(box.findChild(QPushButton, button_name), Qt.MouseButton.LeftButton)
    return text


@pytest.mark.leftovers_box
def test_a_labels_layer_painted_on_one_case_is_no_answer_to_the_next_and_comes_back_on_its_own(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load(qtbot, panel, "segment-nuclei/dsb2018")
    click(qtbot, panel.answer_panel, "create_labels")
    painted = viewer.layers["labels"]
    assert painted.mode == "paint" and viewer.layers.selection.active is painted  # ready to paint
    painted.paint((100, 100), 7)
    painted.paint((300, 300), 8)
    panel._update_buttons()
    assert panel.answer_panel.picked_names() == {"labels": "labels"} and panel.score_button.isEnabled()
    load(qtbot, panel, "segment-nuclei/dsb2018-dim")
    assert painted not in viewer.layers  # kept aside as the Load went on
    text = answer_the_question_with(qtbot, panel, "leftovers_keep")
    assert "`labels` (made on segment-nuclei/dsb2018)" in text
    assert panel.model.workbench.kept_aside == {"segment-nuclei/dsb2018": [painted]}
    # measured before: the picker was set to the old painting and Score recorded it for dsb2018-dim
    assert panel.answer_panel.pickers["labels"].choices == ("(none)",)
    panel._update_buttons()
    assert not panel.score_button.isEnabled() and "labels" not in panel.viewer_leavings()
    assert panel.score() is None and panel.model.results == []
    # a layer the person makes now is this case's
    mine = viewer.add_labels(np.zeros_like(painted.data), name="my dim labels")
    assert owner(mine.metadata).of_load("segment-nuclei/dsb2018-dim", panel.model.loaded.number)  # type: ignore[union-attr]
    assert "my dim labels" in panel.answer_panel.pickers["labels"].choices
    # back on dsb2018: the painting is back and picked; the dim one is removed, as the person says
    load(qtbot, panel, "segment-nuclei/dsb2018")
    text = answer_the_question_with(qtbot, panel, "leftovers_remove")
    assert "`my dim labels` (made on segment-nuclei/dsb2018-dim)" in text
    assert mine not in viewer.layers and painted in viewer.layers
    assert panel.model.workbench.kept_aside == {}  # removed, not kept
    assert panel.answer_panel.picked_names() == {"labels": "labels"} and int(painted.data.max()) == 8
    assert [layer.name for layer in viewer.layers] == ["nuclei", "labels"]  # the case's layer keeps its name
    lines = [m.text for m in panel.model.messages]
    assert any(line.startswith("your layers labels are back") for line in lines)
    assert any(line.startswith("removed your layers of earlier cases: my dim labels") for line in lines)
    panel._update_buttons()
    assert panel.score_button.isEnabled()
    # loaded again, the case keeps the person's layers of it on the viewer, and asks nothing
    before = len(panel.model.messages)
    load(qtbot, panel, "segment-nuclei/dsb2018")
    assert painted in viewer.layers and owner(painted.metadata).of_load("segment-nuclei/dsb2018", panel.model.loaded.number)  # type: ignore[union-attr]
    assert not any("leftover" in m.text or "kept aside" in m.text for m in panel.model.messages[before:])
    load(qtbot, panel, "segment-nuclei/dsb2018-dim")  # the removed layer does not come back
    assert "my dim labels" not in viewer.layers and panel.model.workbench.kept_aside == {"segment-nuclei/dsb2018": [painted]}


def test_a_person_s_own_layer_named_like_a_case_layer_is_renamed_never_the_case_s(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    own = viewer.add_labels(np.zeros((32, 32), np.int32), name="labels")  # before any case
    load(qtbot, panel, "calibrated-measurements/anisotropic-volumes")
    case_layer = next(layer for layer in viewer.layers if owner(layer.metadata).role == "case")
    assert case_layer.name == "labels" and case_layer.ndim == 3 and own.name == "labels [1]"
    assert own in viewer.layers and viewer.dims.ndim == 3  # the person's layer stays where it was
    assert "labels [1]" not in panel.answer_panel.pickers.get("labels", _NoPicker()).choices
    assert any("your layer `labels` is now `labels [1]`" in m.text for m in panel.model.messages)
    # the case is in physical units: the scale bar is on, the axes are named
    assert tuple(case_layer.scale) == (2.0, 0.5, 0.5) and scale_bar(viewer).visible
    assert tuple(viewer.dims.axis_labels) == ("z", "y", "x")
    load(qtbot, panel, "segment-nuclei/dsb2018")
    assert not scale_bar(viewer).visible  # the panel turned it on, and off again for a case without units


class _NoPicker:
    choices: tuple[str, ...] = ()


def test_the_landmark_case_s_points_are_distinct_and_an_answer_is_added_in_add_mode_and_counted(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    import imageio.v3 as iio

    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    own = viewer.add_points(np.array([[3.0, 3.0]]), name="my own points")  # the person's, before any case
    load(qtbot, panel, LANDMARKS)
    points = [viewer.layers[n] for n in ("landmarks_fixed", "landmarks_moving", "probes_moving")]
    looks = {(tuple(np.round(p.face_color[0], 3)), p.symbol[0].value) for p in points}
    assert len(looks) == 3  # three colours, three symbols (they were three identical yellow discs)
    counter = panel.answer_panel.findChild(QLabel, "count_probes_fixed")
    assert counter is not None and counter.text() == "0 of 25 clicked (no layer picked)"
    click(qtbot, panel.answer_panel, "create_probes_fixed")
    answer = viewer.layers["probes_fixed"]
    assert answer.mode == "add" and viewer.layers.selection.active is answer
    assert answer.current_size == points[0].size[0]  # sized like the case's points (was 2.6x)
    assert answer.current_symbol.value not in {symbol for _, symbol in looks}  # a look of its own
    assert counter.text() == "0 of 25 clicked"
    probes = np.asarray(viewer.layers["probes_moving"].data)
    for row in probes[:12]:  # the person clicks twelve of them
        answer.add(row)
    assert counter.text() == "12 of 25 clicked"
    clicked = {(tuple(np.round(answer.face_color[0], 3)), answer.symbol[0].value)}
    assert not clicked & looks  # in a colour and symbol none of the case's points layers has
    assert list(answer.features["index"]) == list(range(12))  # each point's index beside it
    answer.add(probes[12:])
    assert counter.text() == "25 of 25 clicked"
    shot = viewer.screenshot(canvas_only=False, flash=False)
    iio.imwrite(tmp_path / "landmarks.png", shot)
    assert np.asarray(shot)[..., :3].std() > 10
    # a subject's points are never the person's answer
    panel.subject_combo.setCurrentText("reference")
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)
    assert "reference:probes_fixed" in viewer.layers
    assert viewer.layers["reference:probes_fixed"].symbol[0].value == "cross"
    assert "reference:probes_fixed" not in panel.answer_panel.pickers["probes_fixed"].choices
    # its artifact panes keep the channels' colours
    qtbot.mouseClick(panel.score_button, Qt.MouseButton.LeftButton)
    assert panel.model.results and panel.model.results[-1].status == "ok"
    click(qtbot, panel, "artifacts_button")
    panes = {layer.name.rsplit(": ", 1)[-1]: layer for layer in artifact_layers(viewer)}
    assert panes["fixed"].colormap.name == "green" and panes["moving"].colormap.name == "magenta"
    assert not own.visible and not answer.visible  # only the panes show
    # another case loads from the panes: the person's layers are as they were, kept aside or not
    panel.subject_combo.setCurrentText(INTERACTIVE)
    panel.model.workbench.ask_leftovers = lambda _question: "keep"  # as a script answers (no message box)
    load(qtbot, panel, "segment-nuclei/dsb2018")
    assert own in viewer.layers and own.visible and answer not in viewer.layers
    load(qtbot, panel, LANDMARKS)
    assert answer in viewer.layers and answer.visible and len(answer.data) == 25
    assert panel.answer_panel.picked_names() == {"probes_fixed": "probes_fixed"}
    assert panel.answer_panel.counters["probes_fixed"].text() == "25 of 25 clicked"


def test_stardist_3d_shows_at_full_resolution_on_its_voxels_with_a_scale_bar_in_3d(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    pytest.importorskip("pyarrow.flight")
    viewer, panel = make_panel(make_napari_viewer, tmp_path, show=True)  # drawn: its canvas is looked at
    try:
        load(qtbot, panel, "segment-nuclei-3d/stardist-3d")
        nuclei = viewer.layers["nuclei"]
        assert not nuclei.multiscale and nuclei.data.shape == (31, 61, 57)  # no 8 x 16 x 15 blur
        assert type(nuclei.data).__module__.startswith("dask")  # still lazy, from the data plane
        assert tuple(nuclei.scale) == (1.0, 0.5, 0.5) and scale_bar(viewer).visible
        assert tuple(viewer.dims.axis_labels) == ("z", "y", "x")
        click(qtbot, panel.answer_panel, "create_labels")
        assert tuple(viewer.layers["labels"].scale) == (1.0, 0.5, 0.5) and viewer.layers["labels"].mode == "paint"
        viewer.dims.ndisplay = 3  # the whole stack drawn as a volume (napari drew a pyramid's coarsest level)
        qtbot.waitUntil(lambda: np.asarray(viewer.screenshot(canvas_only=True, flash=False))[..., :3].std() > 5)
    finally:
        panel.model.close()


def test_a_voxel_is_read_in_the_stack_s_voxels_whatever_the_clicked_layer_s_scale(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load(qtbot, panel, "pick-a-nucleus/stardist-3d")
    assert tuple(viewer.layers["volume"].scale) == (1.0, 0.5, 0.5)
    viewer.add_points([[21.0, 11.5, 18.5]], name="my click", ndim=3)  # world (um) coordinates, unit scale
    click(qtbot, panel.answer_panel, "point_answer")
    assert panel.answer_panel.forms["answer"]["voxel_answer"][0].value == "21, 23, 37"


def test_the_drift_vector_s_time_axis_is_named(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    load(qtbot, panel, "drift-correction/drift-vector")
    assert tuple(viewer.dims.axis_labels) == ("t", "y", "x")  # it was -3
