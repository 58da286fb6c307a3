"""The Coverage tab: the claims of the selected case's skill (or the loaded case's), each with
its band, coverage, validation against the runs, its cases and samples; a checkbox also counts
earlier runs under the outcome root. Its model is :class:`napari_imagebench._coverage.CoverageModel`."""

from __future__ import annotations

from qtpy.QtCore import Qt
from qtpy.QtGui import QBrush
from qtpy.QtWidgets import QCheckBox, QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from napari_imagebench._coverage import CoverageView
from napari_imagebench._model import BenchModel
from napari_imagebench._style import COVERAGE_COLORS, VALIDATION_COLORS, fit_columns, name_children

COVERAGE_COLUMNS = ("claim", "band", "coverage", "validation", "cases", "samples")
NO_SKILL = "select a case to see its skill's coverage"


class CoverageTab(QWidget):
    """One skill's coverage table; :meth:`show_skill` redraws it."""

    def __init__(self, model: BenchModel) -> None:
        super().__init__()
        self.model = model
        self.skill: str | None = None
        col = QVBoxLayout(self)
        col.setContentsMargins(2, 2, 2, 2)
        self.coverage_title = QLabel(NO_SKILL)
        self.coverage_title.setWordWrap(True)
        col.addWidget(self.coverage_title)
        self.coverage_table = QTreeWidget()
        self.coverage_table.setHeaderLabels(list(COVERAGE_COLUMNS))
        self.coverage_table.setRootIsDecorated(False)
        fit_columns(self.coverage_table, stretch=4)
        col.addWidget(self.coverage_table, 1)
        self.coverage_warnings = QLabel()
        self.coverage_warnings.setWordWrap(True)
        self.coverage_warnings.setTextInteractionFlags(Qt.TextSelectableByMouse)
        col.addWidget(self.coverage_warnings)
        self.coverage_all_runs = QCheckBox("also count earlier runs under the outcome root")
        self.coverage_all_runs.setToolTip("count the samples of every run under the outcome root, not only this session's")
        self.coverage_all_runs.setChecked(self.model.coverage_all_runs)
        self.coverage_all_runs.toggled.connect(self._all_runs_toggled)
        col.addWidget(self.coverage_all_runs)
        self.coverage_view: CoverageView | None = None
        self.setObjectName("coverage_tab")
        name_children(self)

    def show_skill(self, skill: str | None) -> CoverageView | None:
        """Re-read the coverage table of ``skill`` (after a selection, a bundle, a score)."""
        self.skill = skill
        self.coverage_table.clear()
        if skill is None:
            self.coverage_view = None
            self.coverage_title.setText(NO_SKILL)
            self.coverage_warnings.clear()
            return None
        view = self.model.coverage(skill)
        self.coverage_view = view
        self.coverage_title.setText(view.title())
        for row in view.rows:
            cells = view.cells(row)
            item = QTreeWidgetItem(self.coverage_table, list(cells))
            item.setToolTip(0, row.description)
            item.setForeground(2, QBrush(COVERAGE_COLORS[row.coverage]))
            if row.validation in VALIDATION_COLORS:
                item.setForeground(3, QBrush(VALIDATION_COLORS[row.validation]))
            samples = [f"passed: {s}" for s in row.passed_samples] + [f"failed: {s}" for s in row.failed_samples]
            item.setToolTip(5, "\n".join(samples) or "no graded sample in these runs")
            item.setToolTip(4, cells[4])
        self.coverage_warnings.setText("\n".join(f"warning: {w}" for w in view.warnings))
        return view

    def cells(self) -> list[list[str]]:
        """The coverage table as shown: one list of cell texts per row."""
        out = []
        for i in range(self.coverage_table.topLevelItemCount()):
            item = self.coverage_table.topLevelItem(i)
            out.append([item.text(c) for c in range(len(COVERAGE_COLUMNS))])
        return out

    def _all_runs_toggled(self, checked: bool) -> None:
        self.model.coverage_all_runs = bool(checked)
        self.show_skill(self.skill)
