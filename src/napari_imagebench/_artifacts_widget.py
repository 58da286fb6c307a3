"""What to do with a scored sample: View artifacts (its images side by side, one contrast range
for all, :mod:`napari_imagebench._artifacts`), Back to the case, Export CSV. The sitting's folder
and report are :mod:`napari_imagebench._folder_widget`'s."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qtpy.QtCore import Signal
from qtpy.QtWidgets import QFileDialog, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from napari_imagebench._artifacts import (
    ARTIFACT_KEY,
    back_to_the_case,
    hide_others,
    sample_pngs,
    show_artifacts,
    viewer_grid,
)
from napari_imagebench._explain import sample_number
from napari_imagebench._layers import case_colormaps
from napari_imagebench._model import BenchModel, PanelError
from napari_imagebench._owners import owner
from napari_imagebench._runs import ResultRow
from napari_imagebench._style import name_children
from napari_imagebench._tracks import summary_tracks

if TYPE_CHECKING:
    import napari

    from napari_imagebench._controls import Controls


class ArtifactButtons(QWidget):
    """One row of three buttons (the dock fits a 1366x768 screen); ``selected()`` names the sample
    they act on. ``changed`` fires when the artifact panes come or go."""

    changed = Signal()

    def __init__(self, viewer: napari.Viewer, model: BenchModel, selected: Callable[[], ResultRow | None]) -> None:
        super().__init__()
        self.viewer, self.model, self.selected = viewer, model, selected
        self.case_visibility: dict[str, bool] | None = None  # the case as it was, while the panes are up
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        self.artifacts_button = QPushButton("View artifacts")
        self.artifacts_button.setToolTip("the selected sample's images side by side, one contrast range for all")
        self.artifacts_button.clicked.connect(self.view_artifacts)
        self.back_button = QPushButton("Back to the case")
        self.back_button.setToolTip("remove the artifact panes and show the case's layers as they were")
        self.back_button.clicked.connect(self.back_to_the_case)
        self.export_button = QPushButton("Export CSV…")
        self.export_button.setToolTip("every result of this session, one row per metric, as CSV")
        self.export_button.clicked.connect(lambda: self.export_results())
        row = QHBoxLayout()
        for button in (self.artifacts_button, self.back_button, self.export_button):
            row.addWidget(button)
        col.addLayout(row)
        self.setObjectName("artifact_buttons")
        name_children(self)

    @property
    def reviewing(self) -> bool:
        """The artifact panes are up."""
        return self.case_visibility is not None

    def show_controls(self, controls: Controls) -> None:
        self.artifacts_button.setEnabled(controls.artifacts.enabled)
        self.back_button.setEnabled(controls.back.enabled)

    def view_artifacts(self) -> list[Any]:
        result = self.selected()
        if result is None:
            self.model.notify("warning", "score a sample first: its artifacts are what this shows")
            return []
        pngs = sample_pngs(result.sample_dir)
        if not pngs:
            self.model.notify("info", f"{result.label} sample {sample_number(result.sample)} wrote no images")
            return []
        prefix = f"{result.subject} s{sample_number(result.sample)}: "
        if self.case_visibility is None:  # the case as it was, for Back to the case
            self.case_visibility = hide_others(self.viewer)
        case = next((row.case for row in self.model.rows() if row.label == result.label), None)
        colormaps = case_colormaps(case) if case is not None else {}  # a channel's pane keeps its colour
        like = next((c.like for c in case.collect if c.layer == "tracks"), None) if case is not None else None
        grid = next((layer for layer in case.layers if layer.name == like), None) if case is not None else None
        tracks = summary_tracks(result.sample_dir, key=ARTIFACT_KEY, prefix=prefix, like=grid)  # a tracking sample's
        layers = show_artifacts(
            self.viewer, pngs, relative_to=result.sample_dir, prefix=prefix, colormaps=colormaps, extra=tracks
        )
        self.model.artifacts_shown(result)
        self.changed.emit()
        return layers

    def back_to_the_case(self) -> bool:
        """Leave the artifact panes: hide them and show the case's layers as they were."""
        if self.case_visibility is None:
            return False
        back_to_the_case(self.viewer, self.case_visibility)
        self.case_visibility = None
        self.changed.emit()
        return True

    def leave(self) -> None:
        """Leave review mode: another case is loading, and the layers it replaces (the panes, shown
        or hidden, among them: see :meth:`PanelLayers.show_case`) go with one removal."""
        if self.case_visibility is not None:
            viewer_grid(self.viewer).enabled = False
            for layer in self.viewer.layers:  # the person's layers, hidden for the panes, as they were
                if layer.name in self.case_visibility and not owner(layer.metadata).panel:
                    layer.visible = self.case_visibility[layer.name]
            self.case_visibility = None

    def export_results(self, path: str | Path | None = None) -> Path | None:
        """Write every result of this session as CSV to ``path`` (asked for when not given)."""
        if path is None:
            chosen, _ = QFileDialog.getSaveFileName(self, "Export results", "imagebench-results.csv", "CSV (*.csv)")
            if not chosen:
                return None
            path = chosen
        try:
            written = self.model.export_results(Path(path))
        except PanelError as exc:
            self.model.notify("error", str(exc))
            return None
        self.model.notify("info", f"results written to {written}")
        return written
