"""The Compare tab: two runs side by side. Pick run folder A and B (one of this sitting's, or a
folder), a case both hold and a sample; **Side by side** lays both samples' artifacts out in the
viewer's grid, one row per artifact (A, B, A − B), every grey pane under one linked contrast range
and the difference pane with its colour bar and legend. The tables beside it are ``imagebench
compare``'s: the conditions C1-C4, and the paired outcomes with their discordant replicates.
Its model is :class:`napari_imagebench._compare_model.CompareModel`."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qtpy.QtCore import Qt, Signal
from qtpy.QtGui import QBrush
from qtpy.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from napari_imagebench._artifacts import arrange_panes, viewer_grid
from napari_imagebench._canvas import settle_canvas
from napari_imagebench._compare_model import (
    CASE_COLUMNS,
    COMPARE_KEY,
    CONDITION_COLUMNS,
    DIFFERENCE,
    DIFFERENCE_COLORS,
    SIDES,
    CompareModel,
    SideBySide,
)
from napari_imagebench._explain import sample_number
from napari_imagebench._layers import add_layer_data
from napari_imagebench._style import VERDICT_COLORS, name_children

if TYPE_CHECKING:
    import napari

    from napari_imagebench._model import BenchModel

PICK = "pick a run folder…"
ROOMY = 60  # pixels: a page at least this high is unfolded (folded, the tabs show their bar alone)


def _swatch(rgba: Sequence[float]) -> str:
    r, g, b = (int(255 * c) for c in rgba[:3])
    return f'<span style="background-color: rgb({r},{g},{b})">&nbsp;&nbsp;&nbsp;</span>'


LEGEND_HTML = (
    f"A − B: {_swatch(DIFFERENCE_COLORS[2])} A higher &nbsp; {_swatch(DIFFERENCE_COLORS[0])} B higher &nbsp; "
    f"{_swatch(DIFFERENCE_COLORS[1])} equal"
)


class CompareTab(QWidget):
    """The two run pickers, the case and sample, Side by side and Back, the legend and the two tables.
    ``changed`` fires when the compare panes come or go."""

    changed = Signal()

    def __init__(
        self, viewer: napari.Viewer, model: CompareModel, *, before_show: Callable[[], Any] | None = None
    ) -> None:
        super().__init__()
        self.viewer, self.model, self.before_show = viewer, model, before_show
        self.panes: list[Any] = []  # the compare panes on the viewer
        self.visibility: dict[str, bool] | None = None  # the other layers as they were, while the panes are up
        self.view: SideBySide | None = None
        col = QVBoxLayout(self)
        col.setContentsMargins(2, 2, 2, 2)
        pickers = QGridLayout()
        self.combos: dict[str, QComboBox] = {}
        for row, side in enumerate(SIDES):
            combo = QComboBox()
            combo.setToolTip(f"run {side}: one of this sitting's run folders, or one picked with Folder…")
            combo.activated.connect(lambda index, side=side: self._picked(side, index))
            button = QPushButton("Folder…")
            button.setToolTip(f"choose run folder {side} (a run-<UTC timestamp> folder) from disk")
            button.clicked.connect(lambda _=False, side=side: self.pick_folder(side))
            pickers.addWidget(QLabel(f"{side}:"), row, 0)
            pickers.addWidget(combo, row, 1)
            pickers.addWidget(button, row, 2)
            pickers.setColumnStretch(1, 1)
            self.combos[side] = combo
            setattr(self, f"compare_run_{side.lower()}", combo)
            setattr(self, f"compare_folder_{side.lower()}", button)
        col.addLayout(pickers)
        self.compare_status = QLabel()
        self.compare_status.setWordWrap(True)
        self.compare_status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.compare_status.setToolTip("the two runs, or why one was refused")
        col.addWidget(self.compare_status)
        row_layout = QHBoxLayout()
        self.compare_case = QComboBox()
        self.compare_case.setToolTip("a case both runs hold")
        self.compare_case.currentIndexChanged.connect(self._case_changed)
        self.compare_sample = QComboBox()
        self.compare_sample.setToolTip("a sample index both runs hold (compare pairs samples by index)")
        self.compare_sample.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.compare_show = QPushButton("Side by side")
        self.compare_show.clicked.connect(self.show_side_by_side)
        self.compare_back = QPushButton("Back")
        self.compare_back.clicked.connect(self.back)
        row_layout.addWidget(self.compare_case, 1)
        row_layout.addWidget(self.compare_sample)
        row_layout.addWidget(self.compare_show)
        row_layout.addWidget(self.compare_back)
        col.addLayout(row_layout)
        self.compare_legend = QLabel(LEGEND_HTML)
        self.compare_legend.setTextFormat(Qt.TextFormat.RichText)
        self.compare_legend.setWordWrap(True)
        self.compare_legend.setToolTip("the difference pane's colours: A − B, with B as the reference")
        col.addWidget(self.compare_legend)
        self.compare_conditions = _table(
            CONDITION_COLUMNS, "imagebench compare's conditions: C1-C4 must all hold", wrap={1: 120}, stretch=3
        )
        self.compare_cases = _table(
            CASE_COLUMNS, "paired outcomes by case (B − A) and their discordant replicates, when C1-C4 hold"
        )
        col.addWidget(self.compare_conditions, 1)
        col.addWidget(self.compare_cases, 1)
        self.compare_summary = QLabel()
        self.compare_summary.setWordWrap(True)
        self.compare_summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.compare_summary.setToolTip("what imagebench compare says around its tables")
        col.addWidget(self.compare_summary)
        self.setObjectName("compare_tab")
        name_children(self)
        self.refresh()

    @classmethod
    def of_panel(cls, viewer: napari.Viewer, bench: BenchModel, before_show: Callable[[], Any] | None = None) -> CompareTab:
        """The tab over the panel's model: its sitting's run folders on offer, its notices, and the
        samples shown told to it (``saw-artifacts`` for the case a person works)."""
        model = CompareModel(
            sitting=lambda: [f.path for f in bench.run_folders.values()],
            notify=bench.notify,
            shown=bench.artifacts_shown,
        )
        tab = cls(viewer, model, before_show=before_show)
        bench.events.result.connect(lambda row: tab.reload(row.run_dir))
        return tab

    def reload(self, folder: Path) -> None:
        """A sample was written into ``folder``: offer it, and read it again where it is picked."""
        for side, run in list(self.model.runs.items()):
            if run.folder == Path(folder):
                self.model.set_run(side, folder)
        self.refresh()

    def showEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if self.height() >= ROOMY:
            self.make_room()

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        if event.oldSize().height() < ROOMY <= event.size().height():  # the tabs were just unfolded
            self.make_room()

    def _in_sight(self) -> bool:
        """This page is the one shown, in tabs that are not folded to their bar."""
        part: Any = self
        while part is not None:
            if getattr(part, "folded", False):
                return False
            part = part.parentWidget()
        return self.isVisible()

    def make_room(self, share: float = 0.75) -> None:
        """Give the part of the panel this tab sits in ``share`` of the panel's splitter (the pickers
        and both tables need the height; drag the handle back at will)."""
        if not self._in_sight():
            return
        part: Any = self
        while part.parentWidget() is not None and not isinstance(part.parentWidget(), QSplitter):
            part = part.parentWidget()
        split = part.parentWidget()
        if not isinstance(split, QSplitter) or split.orientation() != Qt.Orientation.Vertical:
            return
        sizes = split.sizes()
        index, total = split.indexOf(part), sum(sizes)
        if index < 0 or len(sizes) != 2 or sizes[index] >= share * total:
            return
        want = int(share * total)
        split.setSizes([want, total - want] if index == 0 else [total - want, want])

    @property
    def comparing(self) -> bool:
        """The compare panes are up."""
        return self.visibility is not None

    # ---------------------------------------------------------------- picking

    def refresh_choices(self) -> None:
        """Offer this sitting's run folders (and those picked) in both pickers, keeping each choice."""
        choices = self.model.choices()
        for side, combo in self.combos.items():
            current = self.model.runs.get(side)
            combo.blockSignals(True)
            combo.clear()
            combo.addItem(PICK, None)
            for text, folder in choices:
                combo.addItem(text, str(folder))
                combo.setItemData(combo.count() - 1, str(folder), Qt.ItemDataRole.ToolTipRole)
            index = combo.findData(str(current.folder)) if current is not None else 0
            combo.setCurrentIndex(max(index, 0))
            combo.blockSignals(False)

    def _picked(self, side: str, index: int) -> None:
        folder = self.combos[side].itemData(index)
        if folder is None:
            self.model.clear(side)
            self.refresh()
        else:
            self.set_run(side, folder)

    def pick_folder(self, side: str, path: str | Path | None = None) -> bool:
        """Choose run folder ``side`` (asked for when ``path`` is not given); False when refused."""
        if path is None:
            chosen = QFileDialog.getExistingDirectory(self, f"Run folder {side}")
            if not chosen:
                return False
            path = chosen
        return self.set_run(side, path)

    def set_run(self, side: str, path: str | Path) -> bool:
        ok = self.model.set_run(side, path) is not None
        self.refresh()
        return ok

    # ---------------------------------------------------------------- drawing

    def refresh(self) -> None:
        """Redraw the pickers, the status, the case list and the tables from the model."""
        self.refresh_choices()
        refused = any(side in self.model.refused for side in SIDES)
        reasons = {line for lines in self.model.refused.values() for line in lines}
        self.compare_status.setText(
            "<br>".join(
                f'<span style="color: rgb(220, 70, 70)">{html.escape(line)}</span>' if line in reasons else html.escape(line)
                for line in self.model.status()
            )
        )
        self.compare_status.setVisible(refused or not self.model.ready)  # else the pickers say it
        for side, combo in self.combos.items():
            run = self.model.runs.get(side)
            combo.setToolTip(run.title if run is not None else f"run {side}: one of this sitting's run folders, or Folder…")
        label = self.compare_case.currentText() or None
        self.compare_case.blockSignals(True)
        self.compare_case.clear()
        cases = self.model.cases()
        self.compare_case.addItems(cases)
        if label in cases:
            self.compare_case.setCurrentText(label)
        self.compare_case.blockSignals(False)
        self._case_changed()
        _fill(self.compare_conditions, self.model.condition_rows(), holds_column=2)
        _fill(self.compare_cases, self.model.case_rows())
        self.compare_summary.setText("\n".join(self.model.summary_lines()))

    def _case_changed(self, *_: Any) -> None:
        label = self.compare_case.currentText() or None
        self.compare_sample.clear()
        for n in self.model.samples(label) if label else []:
            self.compare_sample.addItem(f"s{sample_number(n)}", n)
        self._update_buttons()

    def _update_buttons(self) -> None:
        states = self.model.controls(self.comparing, self.compare_case.currentText() or None)
        for button, state in ((self.compare_show, states["show"]), (self.compare_back, states["back"])):
            button.setEnabled(state.enabled)
            button.setToolTip(state.why)

    # ---------------------------------------------------------------- the panes

    def show_side_by_side(self, label: str | None = None, sample: int | None = None) -> list[Any]:
        """Lay out ``label``'s sample ``sample`` (default: the chosen ones) of both runs in the grid."""
        label = label or self.compare_case.currentText() or None
        if sample is None:
            sample = self.compare_sample.currentData()
        if label is None or sample is None or not self.model.ready:
            return []
        view = self.model.side_by_side(label, int(sample))
        if self.before_show is not None and not self.comparing:
            self.before_show()  # the panel's own artifact panes go first (Back to the case)
        self._remove_panes()
        if self.visibility is None:  # the viewer's layers as they were, for Back
            self.visibility = {}
            for layer in self.viewer.layers:
                if COMPARE_KEY not in layer.metadata:
                    self.visibility[layer.name] = bool(layer.visible)
                    layer.visible = False
        # added hidden, then shown at once: each pane added in sight would be drawn (a second a pane on Mesa)
        self.panes = [add_layer_data(self.viewer, (d[0], {**d[1], "visible": False}, d[2])) for d in view.layers]
        for layer in self.panes:
            layer.visible = True
        grey = [
            layer
            for layer, pane in zip(self.panes, view.panes, strict=True)
            if pane.present and pane.side != DIFFERENCE and not layer.rgb
        ]
        viewer_grid(self.viewer).shape = (view.rows, view.columns)  # rows of A, B, A − B
        arrange_panes(self.viewer, self.panes, linked=grey)
        for layer, pane in zip(self.panes, view.panes, strict=True):
            if pane.side == DIFFERENCE and pane.present:
                layer.colorbar.visible = True
        self.view = view
        self.compare_legend.setText(LEGEND_HTML + "<br>" + "<br>".join(view.notes))
        self._update_buttons()
        self.changed.emit()
        return self.panes

    def back(self) -> bool:
        """Remove the compare panes and show the viewer's layers as they were."""
        if self.visibility is None:
            return False
        self._remove_panes()
        viewer_grid(self.viewer).shape = (-1, -1)
        for layer in self.viewer.layers:
            if layer.name in self.visibility:
                layer.visible = self.visibility[layer.name]
        self.visibility, self.view = None, None
        self.compare_legend.setText(LEGEND_HTML)
        self.viewer.reset_view()
        self._update_buttons()
        self.changed.emit()
        return True

    def _remove_panes(self) -> None:
        """Remove the compare panes: out of grid mode and out of sight first (removing a layer in
        grid mode re-places every pane, and each removal draws the canvas)."""
        if not self.panes:
            return
        viewer_grid(self.viewer).enabled = False
        for layer in self.panes:
            layer.visible = False
        going = [layer for layer in self.panes if layer in self.viewer.layers]
        # one scene-graph update (and one garbage collection) for them all, not one per pane; no
        # Labels among them, so no pane needs the slow road of napari_imagebench._canvas
        with self.viewer.layers.batched_update():
            for layer in sorted(going, key=self.viewer.layers.index, reverse=True):
                self.viewer.layers.remove(layer)
        settle_canvas()
        self.panes = []


def _table(
    columns: Sequence[str], tip: str, *, wrap: dict[int, int] | None = None, stretch: int | None = None
) -> QTableWidget:
    """A read-only table: each column sized to its contents, but those in ``wrap`` ({column:
    width}, their text wrapped) and ``stretch`` (the rest of the width; else a horizontal scroll)."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.setToolTip(tip)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setWordWrap(True)
    table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
    table.verticalHeader().setVisible(False)
    for corner in table.findChildren(QAbstractButton):  # the corner button: it selects the whole table
        corner.setToolTip("select the whole table")
    header = table.horizontalHeader()
    header.setStretchLastSection(False)
    for c in range(len(columns)):
        header.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
    for c, width in (wrap or {}).items():
        header.setSectionResizeMode(c, QHeaderView.ResizeMode.Interactive)
        table.setColumnWidth(c, width)
    if stretch is not None:
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    return table


def _fill(table: QTableWidget, rows: Sequence[Sequence[str]], holds_column: int | None = None) -> None:
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            item = QTableWidgetItem(text)
            item.setToolTip(text)
            if c == holds_column:
                item.setForeground(QBrush(VERDICT_COLORS["pass" if text == "yes" else "fail"]))
            table.setItem(r, c, item)
    table.resizeRowsToContents()
