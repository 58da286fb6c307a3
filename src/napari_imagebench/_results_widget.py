"""The results pane: one row per scored sample with a child row per metric (and the bundle's
grading checks), plus a line per notice; every notice is also a napari notification."""

from __future__ import annotations

from qtpy.QtGui import QBrush
from qtpy.QtWidgets import QAbstractItemView, QTreeWidget, QTreeWidgetItem

from napari_imagebench._model import BenchModel, Message
from napari_imagebench._runs import ResultRow
from napari_imagebench._style import LABEL_ROLE, STATUS_COLORS, VERDICT_COLORS, fit_columns

RESULT_HEADERS = ("result", "value", "limit", "verdict", "note")


class ResultsPane(QTreeWidget):
    """The newest result at the top of the pane, its metric rows below it; earlier ones fold away."""

    def __init__(self, model: BenchModel) -> None:
        super().__init__()
        self.model = model
        self.setHeaderLabels(list(RESULT_HEADERS))
        fit_columns(self, stretch=4, first_width=170)  # the verdicts stay in sight in a 373 px dock

    def show_message(self, msg: Message) -> None:
        from napari.utils.notifications import show_error, show_info, show_warning

        {"info": show_info, "warning": show_warning, "error": show_error}[msg.level](msg.text)
        item = QTreeWidgetItem(self, [f"{msg.level}: {msg.text}"])
        item.setFirstColumnSpanned(True)
        item.setToolTip(0, msg.text)
        if msg.level != "info":
            item.setForeground(0, QBrush(VERDICT_COLORS["fail" if msg.level == "error" else "unavailable"]))
        self.scrollToItem(item)

    def add_result(self, result: ResultRow) -> None:
        title = f"{result.subject} #{result.sample}: {result.label}"
        item = QTreeWidgetItem(self, [title, result.status, "", "", result.reason])
        item.setData(0, LABEL_ROLE, len(self.model.results) - 1)
        item.setToolTip(0, f"{title}\n{result.sample_dir}")
        item.setToolTip(4, result.reason)
        color = STATUS_COLORS.get(result.status, VERDICT_COLORS["fail"])
        item.setForeground(1, QBrush(color))
        for name, value, limit, verdict, why in result.metric_cells():
            child = QTreeWidgetItem(item, [name, value, limit, verdict, why])
            child.setForeground(3, QBrush(VERDICT_COLORS[verdict]))
            if why:
                child.setToolTip(4, why)
        for check in result.checks:  # the bundle's grading checklist, shown once the sample is scored
            child = QTreeWidgetItem(item, ["grading check", "", "", "", check])
            child.setToolTip(4, check)
        for i in range(self.topLevelItemCount() - 1):  # earlier results fold away (a click opens them)
            self.topLevelItem(i).setExpanded(False)
        item.setExpanded(True)
        self.setCurrentItem(item)
        self.scrollToItem(item, QAbstractItemView.ScrollHint.PositionAtTop)

    def selected_result(self) -> ResultRow | None:
        """The result row selected in the pane (a metric row counts as its sample), else the latest."""
        for item in self.selectedItems():
            while item.parent() is not None:
                item = item.parent()
            index = item.data(0, LABEL_ROLE)
            if isinstance(index, int):
                return self.model.results[index]
        return self.model.results[-1] if self.model.results else None
