"""The results pane: one row per scored sample with a child row per metric (under a metric, the
reasons behind it: each field of a structured answer, each probe of a landmark case), the bundle's
grading checks, and a line per notice; every notice is also a napari notification.

Under the rows, the selected sample's explanation (:mod:`._explain`) in full, word-wrapped, in a
text area that folds to its bar (``explain_toggle``) and unfolds by itself when a sample fails.
What states the truth (the case's provenance) is shown there only after scoring, and only when
asked (``truth_button``), which flags the person's later samples of the loaded case."""

from __future__ import annotations

from typing import Any

from qtpy.QtCore import Qt
from qtpy.QtGui import QBrush
from qtpy.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QPlainTextEdit,
    QSplitter,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from napari_imagebench._explain import FOLD_OVER, Explanation, Reason, sample_number
from napari_imagebench._model import BenchModel, Message
from napari_imagebench._runs import ResultRow
from napari_imagebench._style import LABEL_ROLE, STATUS_COLORS, VERDICT_COLORS, ElidedLabel, fit_columns, name_children

RESULT_HEADERS = ("result", "value", "limit", "verdict", "note")
UNFOLD, FOLD = "▸ why", "▾ why"
SHOW_TRUTH, HIDE_TRUTH = "Show the truth", "Hide the truth"
MIN_LINES = 8  # of an unfolded explanation
TREE_ROWS = 6  # result rows kept in sight beside an unfolded explanation


def _reason_item(parent: QTreeWidgetItem, reason: Reason) -> QTreeWidgetItem:
    item = QTreeWidgetItem(parent, [reason.name, reason.value, reason.limit, reason.verdict, reason.note])
    if reason.verdict in VERDICT_COLORS:
        item.setForeground(3, QBrush(VERDICT_COLORS[reason.verdict]))
    if reason.note:
        item.setToolTip(4, reason.note)
    return item


class ResultExplanation(QWidget):
    """The selected sample's explanation: a bar (fold, title, Show the truth) over a read-only,
    word-wrapped text area."""

    def __init__(self, model: BenchModel) -> None:
        super().__init__()
        self.model = model
        self.result: ResultRow | None = None
        self.explained: Explanation | None = None
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(2)
        bar = QHBoxLayout()
        self.explain_toggle = QToolButton()
        self.explain_toggle.setCheckable(True)
        self.explain_toggle.setAutoRaise(True)
        self.explain_toggle.setToolTip("show or fold the selected sample's explanation: every reason and note in full")
        self.explain_toggle.toggled.connect(lambda shown: self.set_folded(not shown))
        self.explain_title = ElidedLabel("")
        self.explain_title.elide = Qt.TextElideMode.ElideRight
        self.explain_title.tip = "the sample explained below"
        self.truth_button = QToolButton()
        self.truth_button.setText(SHOW_TRUTH)
        self.truth_button.setCheckable(True)
        self.truth_button.setEnabled(False)
        self.truth_button.setToolTip(
            "show how the selected sample's case was made (its provenance), which states the truth; "
            "for the loaded case, your later samples of it are flagged saw-truth"
        )
        self.truth_button.toggled.connect(self._truth_toggled)
        bar.addWidget(self.explain_toggle)
        bar.addWidget(self.explain_title, 1)
        bar.addWidget(self.truth_button)
        col.addLayout(bar)
        self.result_explanation = QPlainTextEdit()
        self.result_explanation.setReadOnly(True)
        self.result_explanation.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.result_explanation.setPlaceholderText("score a sample: why it passed or failed is explained here")
        self.result_explanation.setToolTip("the selected sample's explanation, from the summary.json its verifier wrote")
        col.addWidget(self.result_explanation, 1)
        # unfolded, it shows at least this many lines: the panel's splitter gives it the room
        self.result_explanation.setMinimumHeight(MIN_LINES * self.result_explanation.fontMetrics().lineSpacing() + 12)
        self.folded = False
        self.set_folded(True)
        name_children(self)
        self.setObjectName("explanation")

    def set_folded(self, folded: bool) -> None:
        """Fold the explanation to its bar (the rows take the room) or unfold it."""
        self.folded = folded
        self.result_explanation.setVisible(not folded)
        self.explain_toggle.blockSignals(True)
        self.explain_toggle.setChecked(not folded)
        self.explain_toggle.blockSignals(False)
        self.explain_toggle.setText(UNFOLD if folded else FOLD)
        bar = self.explain_toggle.sizeHint().height() + 4
        self.setMaximumHeight(bar if folded else (1 << 24) - 1)

    def show_result(self, result: ResultRow | None) -> None:
        """Explain ``result`` (None: nothing). The truth is folded away again for every sample shown."""
        self.result = result
        self.explained = None if result is None else self.model.explanation(result)
        self.truth_button.blockSignals(True)
        self.truth_button.setChecked(False)
        self.truth_button.blockSignals(False)
        self.truth_button.setText(SHOW_TRUTH)
        self.truth_button.setEnabled(bool(self.explained and self.explained.truth))
        self.explain_title.setText(self.explained.title if self.explained else "")
        self.result_explanation.setPlainText(self.explained.text if self.explained else "")

    def _truth_toggled(self, shown: bool) -> None:
        if self.result is None or self.explained is None:
            return
        if shown:
            self.model.truth_shown(self.result)
        self.truth_button.setText(HIDE_TRUTH if shown else SHOW_TRUTH)
        self.result_explanation.setPlainText(self.explained.with_truth() if shown else self.explained.text)
        if shown:  # where the truth was added, at the end
            bar = self.result_explanation.verticalScrollBar()
            bar.setValue(bar.maximum())

    def text(self) -> str:
        return self.result_explanation.toPlainText()


#: The result column's least width, and the note column's share of any width beyond it.
FIRST_MIN = 170
NOTE_MIN = 90


class ResultsPane(QTreeWidget):
    """The newest result at the top of the pane, its metric rows below it; earlier ones fold away.
    ``area`` holds the pane and, under it, the selected sample's :class:`ResultExplanation`."""

    def __init__(self, model: BenchModel) -> None:
        super().__init__()
        self.model = model
        self.setHeaderLabels(list(RESULT_HEADERS))
        fit_columns(self, stretch=4, first_width=FIRST_MIN)  # the verdicts stay in sight in a 373 px dock
        # a long "<subject> #n: <skill>/<case>" keeps both ends in sight (the whole in its tooltip)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.explanation = ResultExplanation(model)
        self.area = QSplitter(Qt.Orientation.Vertical)  # drag it to give the explanation more room
        self.area.setObjectName("results_area")
        self.area.addWidget(self)
        self.area.addWidget(self.explanation)
        self.area.setChildrenCollapsible(False)
        self.area.setStretchFactor(0, 3)
        self.area.setStretchFactor(1, 2)
        self.itemSelectionChanged.connect(self._selection_changed)
        self.explanation.explain_toggle.toggled.connect(self._make_room)

    def resizeEvent(self, event: Any) -> None:
        """The result column takes the width the note column can spare (the note keeps
        :data:`NOTE_MIN` pixels, its whole text in its tooltip), never less than its 170 px."""
        super().resizeEvent(event)
        fixed = sum(self.columnWidth(col) for col in range(1, self.columnCount() - 1))
        self.setColumnWidth(0, max(FIRST_MIN, self.viewport().width() - fixed - NOTE_MIN))

    def _make_room(self, shown: bool) -> None:
        """An unfolded explanation takes the larger part of the area (drag the handle to change it),
        and the area asks the splitter it sits in for the room of :data:`TREE_ROWS` result rows
        beside it, taken from the other side (the case browser) down to that side's minimum."""
        if not shown:
            return
        row = self.sizeHintForRow(0) if self.topLevelItemCount() else self.fontMetrics().height() + 6
        tree = TREE_ROWS * max(row, 1) + self.header().height() + 2 * self.frameWidth()
        explanation = self.explanation.minimumSizeHint().height()
        self._borrow(tree + explanation + self.area.handleWidth() - self.area.height())
        total = sum(self.area.sizes())
        rows = total - max(explanation, total * 11 // 20)
        if rows < tree:  # the rows' share, as far as the explanation's minimum leaves it
            rows = max(rows, min(tree, total - explanation))
        self.area.setSizes([rows, total - rows])
        current = self.currentItem()
        if current is not None:  # the sample's rows stay in sight
            self.scrollToItem(current, QAbstractItemView.ScrollHint.PositionAtTop)

    def _borrow(self, px: int) -> None:
        """``px`` more height for the area from the enclosing splitter's other panes, as far as they can give."""
        inner: QWidget = self.area
        outer = inner.parentWidget()
        while outer is not None and not isinstance(outer, QSplitter):
            inner, outer = outer, outer.parentWidget()
        if px <= 0 or outer is None:
            return
        mine = outer.indexOf(inner)
        sizes = outer.sizes()
        for i in range(len(sizes)):
            if i == mine or px <= 0:
                continue
            spare = sizes[i] - max(outer.widget(i).minimumSizeHint().height(), 0)
            give = max(0, min(px, spare))
            sizes[i] -= give
            sizes[mine] += give
            px -= give
        outer.setSizes(sizes)

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
        explained = self.model.explanation(result)
        title = f"{result.subject} #{sample_number(result.sample)}: {result.label}"
        item = QTreeWidgetItem(self, [title, result.status, "", "", result.reason])
        item.setData(0, LABEL_ROLE, len(self.model.results) - 1)
        item.setToolTip(0, f"{title} (sample {sample_number(result.sample)}; its folder {result.sample_dir})")
        item.setToolTip(4, result.reason)
        color = STATUS_COLORS.get(result.status, VERDICT_COLORS["fail"])
        item.setForeground(1, QBrush(color))
        for name, value, limit, verdict, why in result.metric_cells():
            note = explained.notes.get(name, why)
            child = QTreeWidgetItem(item, [name, value, limit, verdict, note])
            child.setForeground(3, QBrush(VERDICT_COLORS[verdict]))
            if note:
                child.setToolTip(4, note)
            rows = explained.reasons.get(name, ())
            for reason in rows:
                _reason_item(child, reason)
            # a failing metric shows its reasons; a long list (25 probes) waits for a click
            child.setExpanded(bool(rows) and len(rows) <= FOLD_OVER and any(r.verdict == "fail" for r in rows))
        for reason in explained.reasons.get("", ()):  # the sample's own: a hint, why nothing was read
            _reason_item(item, reason)
        for check in result.checks:  # the bundle's grading checklist, shown once the sample is scored
            child = QTreeWidgetItem(item, ["grading check", "", "", "", check])
            child.setToolTip(4, check)
        for i in range(self.topLevelItemCount() - 1):  # earlier results fold away (a click opens them)
            self.topLevelItem(i).setExpanded(False)
        item.setExpanded(True)
        self.setCurrentItem(item)
        self.scrollToItem(item, QAbstractItemView.ScrollHint.PositionAtTop)
        self.explanation.show_result(result)
        if result.status != "ok" and self.explanation.folded:  # why it failed, in full
            self.explanation.set_folded(False)
            self._make_room(True)

    def _selection_changed(self) -> None:
        result = self.selected_result()
        if result is not None and result is not self.explanation.result:
            self.explanation.show_result(result)

    def selected_result(self) -> ResultRow | None:
        """The result row selected in the pane (a metric row counts as its sample), else the latest."""
        for item in self.selectedItems():
            while item.parent() is not None:
                item = item.parent()
            index = item.data(0, LABEL_ROLE)
            if isinstance(index, int):
                return self.model.results[index]
        return self.model.results[-1] if self.model.results else None
