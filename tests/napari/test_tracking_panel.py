"""A tracking case in the real panel (run under xvfb-run): the movie with a time slider, the
reference's tracks as a napari Tracks layer over it, Score, and View artifacts showing the truth
and the answer as Tracks panes beside the drawn frames; a person's Tracks layer over their Labels
over time scored as a CTC answer. ``IMAGEBENCH_TRACKING_SHOTS`` names a folder for screenshots."""

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
from qtpy.QtWidgets import QApplication, QPushButton  # noqa: E402

from imagebench import cases as builtin  # noqa: E402
from imagebench.cases.tracking import track_nuclei, truth_of  # noqa: E402
from imagebench.tracking.points import track_points  # noqa: E402
from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

LABEL = "tracking/moving-nuclei"
SHOTS = os.environ.get("IMAGEBENCH_TRACKING_SHOTS")


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def _panel(make_napari_viewer: Any, tmp_path: Path) -> tuple[Any, BenchPanel]:
    cases = [builtin.get_case(LABEL)]
    viewer = make_napari_viewer(show=True)
    panel = BenchPanel(viewer, BenchModel(cases=lambda: cases, outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench", area="right")
    window = viewer.window._qt_window
    window.showNormal()
    window.resize(1600, 900)
    QApplication.processEvents()
    return viewer, panel


def _load(qtbot: Any, panel: BenchPanel) -> None:
    panel.select_case(LABEL)
    qtbot.mouseClick(panel.findChild(QPushButton, "load_button"), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.running and panel.model.loaded is not None, timeout=60_000)


def _shoot(viewer: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        QApplication.processEvents()
        viewer.screenshot(str(Path(SHOTS) / name), canvas_only=False)


def test_a_tracking_case_shows_the_movie_the_reference_tracks_and_both_tracks_after_scoring(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = _panel(make_napari_viewer, tmp_path)
    _load(qtbot, panel)
    movie = viewer.layers["movie"]
    assert movie.data.shape == (30, 128, 128)
    assert viewer.dims.ndim == 3 and viewer.dims.nsteps[0] == 30  # a time slider over the 30 frames
    assert tuple(viewer.dims.axis_labels) == ("t", "y", "x")
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)
    tracks = viewer.layers["reference:tracks"]
    assert type(tracks).__name__ == "Tracks"
    assert tracks.graph, "the divisions are the Tracks layer's graph"
    assert type(viewer.layers["reference:masks"]).__name__ == "Labels"
    viewer.dims.set_current_step(0, 15)
    _shoot(viewer, "tracking-reference-run.png")
    result = panel.score()
    assert result is not None and result.status == "ok", result.reason if result else None
    panel._update_buttons()
    qtbot.mouseClick(panel.findChild(QPushButton, "artifacts_button"), Qt.MouseButton.LeftButton)
    QApplication.processEvents()
    shown = {layer.name: layer for layer in viewer.layers if layer.visible}
    truth_pane, answer_pane = shown["reference s1: truth tracks"], shown["reference s1: answer tracks"]
    assert type(truth_pane).__name__ == "Tracks" and type(answer_pane).__name__ == "Tracks"
    fixture = panel.model.loaded.fixture  # type: ignore[union-attr]
    rows, graph = track_points(truth_of(fixture).tra)
    assert np.allclose(truth_pane.data, np.round(rows, 2)) and truth_pane.graph == graph
    assert shown["reference s1: tracks"].rgb  # the drawn frames with the errors marked
    assert viewer.grid.enabled
    viewer.dims.set_current_step(0, 20)
    _shoot(viewer, "tracking-artifacts.png")
    assert panel.back_to_the_case()
    assert viewer.layers["movie"].visible and not truth_pane.visible


def test_a_persons_tracks_layer_over_their_labels_is_scored_as_a_ctc_answer(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    viewer, panel = _panel(make_napari_viewer, tmp_path)
    _load(qtbot, panel)
    result = track_nuclei(viewer.layers["movie"].data)
    shuffled = np.where(result.labels > 0, result.labels + 100, 0).astype(np.int32)  # the Labels' own numbers
    viewer.add_labels(shuffled, name="masks")
    rows, graph = track_points(result)
    viewer.add_tracks(rows, graph=graph, name="tracks")
    scored = panel.score()
    assert scored is not None and scored.status == "ok", scored.reason if scored else None
    # a point on background is refused with its reason, and Score waits
    bad = rows.copy()
    bad[0, 2:] = 0.0
    viewer.layers.remove(viewer.layers["tracks"])
    viewer.add_tracks(bad, graph=graph, name="tracks")
    assert panel.score() is None
    missing = panel.model.missing_answers(panel.layers.leavings(panel.answer_panel.picked_names()), None)
    assert "lies on background" in missing["tracks"]
