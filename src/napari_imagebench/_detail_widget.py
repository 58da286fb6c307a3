"""The Detail tab (the selected case's prompt, persona, layers, leavings and limits, never its
truth, as :meth:`napari_imagebench._model.BenchModel.detail` writes them) and the tabs that hold
it beside Answer and Coverage. The tabs fold to their bar (the ``detail_toggle`` at their corner,
or a click on the current tab) so that on a laptop screen the case tree and the results have the
room; a click on another tab unfolds them."""

from __future__ import annotations

from typing import Any

from qtpy.QtWidgets import QPlainTextEdit, QSizePolicy, QTabWidget, QToolButton, QWidget

from napari_imagebench._model import BenchModel, PanelError

UNFOLD, FOLD = "▸ show", "▾ hide"
QWIDGETSIZE_MAX = (1 << 24) - 1


class CaseDetailView(QPlainTextEdit):
    """Read-only text of one case."""

    def __init__(self, model: BenchModel) -> None:
        super().__init__()
        self.model = model
        self.setReadOnly(True)
        self.setPlaceholderText("select a case")

    def show_case(self, label: str | None) -> None:
        if label is None:
            self.clear()
            return
        try:
            self.setPlainText(self.model.detail(label).text())
        except PanelError as exc:
            self.setPlainText(f"{label}\n\n{exc}")


class CaseTabs(QTabWidget):
    """Detail, Answer and Coverage; folded to the tab bar until asked (:meth:`set_folded`)."""

    def __init__(self, pages: list[tuple[QWidget, str]], folded: bool = True) -> None:
        super().__init__()
        for page, title in pages:
            self.addTab(page, title)
        self.detail_toggle = QToolButton()
        self.detail_toggle.setObjectName("detail_toggle")
        self.detail_toggle.setCheckable(True)
        self.detail_toggle.setAutoRaise(True)
        self.detail_toggle.toggled.connect(lambda shown: self.set_folded(not shown))
        self.setCornerWidget(self.detail_toggle)
        self.tabBar().tabBarClicked.connect(self._tab_clicked)
        for arrow in self.tabBar().findChildren(QToolButton):  # shown when the dock is too narrow for the tabs
            arrow.setToolTip("scroll the tabs")
        self.folded = not folded  # set_folded draws the state
        self.set_folded(folded)

    def set_folded(self, folded: bool) -> None:
        """Fold the tabs to their bar (the tree and the results take the room) or unfold them."""
        if folded == self.folded:
            return
        self.folded = folded
        self.detail_toggle.setChecked(not folded)
        self.detail_toggle.setText(UNFOLD if folded else FOLD)
        self.detail_toggle.setToolTip(
            "show the selected case's detail, the Answer form and the coverage table"
            if folded
            else "fold the tabs to their bar: the case tree and the results get the room"
        )
        self._fit()

    def _fit(self) -> None:
        bar = self.tabBar().sizeHint().height()
        self.setMaximumHeight(bar + 2 if self.folded else QWIDGETSIZE_MAX)
        vertical = QSizePolicy.Fixed if self.folded else QSizePolicy.Expanding
        self.setSizePolicy(QSizePolicy.Preferred, vertical)

    def showEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        self._fit()  # the tab bar's height is known once napari's style sheet applies
        super().showEvent(event)

    def _tab_clicked(self, index: int) -> None:
        if self.folded:
            self.set_folded(False)
        elif index == self.currentIndex():
            self.set_folded(True)
