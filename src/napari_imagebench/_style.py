"""What the panel's small widgets share of Qt: the item role holding a label or an index, the
verdict colours, and column sizing."""

from __future__ import annotations

from typing import Any

from qtpy.QtCore import Qt
from qtpy.QtGui import QBrush, QColor, QPainter
from qtpy.QtWidgets import QHeaderView, QLabel, QSizePolicy, QTreeWidget, QWidget

LABEL_ROLE = Qt.UserRole  # a case item's label, a result item's index into model.results
GREY = QBrush(QColor(128, 128, 128))
VERDICT_COLORS = {"pass": QColor(60, 170, 90), "fail": QColor(220, 70, 70), "unavailable": QColor(200, 150, 40)}
STATUS_COLORS = {"ok": VERDICT_COLORS["pass"]}
COVERAGE_COLORS = {"covered": VERDICT_COLORS["pass"], "partial": VERDICT_COLORS["unavailable"], "gap": VERDICT_COLORS["fail"]}
VALIDATION_COLORS = {
    "validated": VERDICT_COLORS["pass"],
    "partial": VERDICT_COLORS["unavailable"],
    "failed": VERDICT_COLORS["fail"],
}


def fit_columns(tree: QTreeWidget, stretch: int, first_width: int | None = None) -> None:
    """Size every column to its contents except ``stretch``, which takes the remaining width
    (and the first column, when ``first_width`` fixes its starting width instead)."""
    header = tree.header()
    header.setStretchLastSection(False)
    for col in range(tree.columnCount()):
        if col == stretch:
            header.setSectionResizeMode(col, QHeaderView.Stretch)
        elif col == 0 and first_width is not None:
            header.setSectionResizeMode(col, QHeaderView.Interactive)
            tree.setColumnWidth(col, first_width)
        else:
            header.setSectionResizeMode(col, QHeaderView.ResizeToContents)


def name_children(widget: Any) -> None:
    """Give each widget attribute of ``widget`` without an objectName its attribute's name:
    tests and people's scripts find controls by name."""
    for attr, child in vars(widget).items():
        if isinstance(child, QWidget) and not child.objectName():
            child.setObjectName(attr)


class ElidedLabel(QLabel):
    """A one-line label that keeps its whole text (``text()``; the tooltip, unless one is given)
    but draws only what fits, with an ellipsis (``elide``: at the start by default, so that a long
    folder path keeps its last folders in sight) and never widens the dock."""

    def __init__(self, text: str = "") -> None:
        super().__init__(text)
        self.tip = ""
        self.elide = Qt.ElideLeft
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.setMinimumWidth(40)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        super().setText(text)
        self.setToolTip(f"{text}\n{self.tip}" if self.tip else text)

    def paintEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        painter = QPainter(self)
        shown = self.fontMetrics().elidedText(self.text(), self.elide, self.width())
        painter.drawText(self.rect(), int(self.alignment()), shown)
