"""The Detail tab: the selected case's prompt, persona, layers, leavings and limits (never its truth),
as :meth:`napari_imagebench._model.BenchModel.detail` writes them."""

from __future__ import annotations

from qtpy.QtWidgets import QPlainTextEdit

from napari_imagebench._model import BenchModel, PanelError


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
