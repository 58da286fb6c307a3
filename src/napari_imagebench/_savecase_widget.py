"""The Save as case tab: the viewer's layers written into a fixture tree as a new curated case.

Pick the data layers (Image, checked in a list) and the truth layer (Labels, Points or Shapes),
name the skill and the case, edit the prompt (written from the picks until the person changes
it), give the citation and the provenance, choose the tree (the browser's by default), and Save.
Save is enabled only when :meth:`SaveCaseModel.problem` finds nothing missing; its tooltip and
the line under it say what is. After a save the line lists the files written and ``saved``
fires (the tree, the case's label): the panel lists the case at once. The rules and the writing
live in :mod:`._savecase_model`; this widget only draws them. Every control has an objectName
(``savecase_<what>``) and a tooltip.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from qtpy.QtCore import Qt, Signal
from qtpy.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from napari_imagebench._base import PanelError
from napari_imagebench._savecase_model import SaveCaseModel, SaveForm

if TYPE_CHECKING:
    import napari

    from napari_imagebench._model import BenchModel

_NONE = "(none)"


def _control(widget: Any, name: str, tip: str) -> Any:
    widget.setObjectName(name)
    widget.setToolTip(tip)
    return widget


class SaveCaseTab(QWidget):
    """The Save as case tab; ``saved(tree, label)`` fires after a case is written."""

    saved = Signal(str, str)

    def __init__(self, viewer: napari.Viewer, model: BenchModel, rules: SaveCaseModel | None = None) -> None:
        super().__init__()
        self.viewer, self.model = viewer, model
        self.rules = rules if rules is not None else SaveCaseModel()
        self.setObjectName("savecase_tab")
        self._default_prompt = ""  # the prompt last written from the picks; replaced while unedited
        self._saved: tuple[SaveForm, str] | None = None  # the form last saved and what was written
        body = QWidget()
        form = QFormLayout(body)
        form.setContentsMargins(2, 2, 2, 2)
        self.data_list = _control(
            QListWidget(), "savecase_data", "the Image layers the subject is shown: check one or more"
        )
        self.data_list.setMaximumHeight(60)
        self.truth_combo = _control(
            QComboBox(), "savecase_truth", "the layer that is the truth: Labels, Points or Shapes (rasterized)"
        )
        self.skill_edit = _control(QLineEdit(), "savecase_skill", "the skill id, the case's namespace (lowercase)")
        self.case_edit = _control(QLineEdit(), "savecase_case", "the case's id (lowercase; its folder's name)")
        self.tree_edit = _control(QLineEdit(), "savecase_tree", "the fixture tree the case is written into")
        self.tree_button = _control(QPushButton("…"), "savecase_tree_browse", "choose the fixture tree folder")
        self.prompt_edit = _control(
            QPlainTextEdit(), "savecase_prompt", "the task as a subject reads it; it must name what to leave"
        )
        self.prompt_edit.setMaximumHeight(80)
        self.citation_edit = _control(QLineEdit(), "savecase_citation", "whose data this is (copied into every report)")
        self.provenance_edit = _control(
            QLineEdit(), "savecase_provenance", "how the data and its truth came to be: acquisition, who annotated it"
        )
        self.save_button = _control(QPushButton("Save as case"), "savecase_button", "")
        self.why_label = _control(QLabel(), "savecase_why", "what Save is waiting for, or what was written")
        self.why_label.setWordWrap(True)
        self.why_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        tree_row = QHBoxLayout()
        tree_row.addWidget(self.tree_edit, 1)
        tree_row.addWidget(self.tree_button)
        form.addRow("Data", self.data_list)
        form.addRow("Truth", self.truth_combo)
        form.addRow("Skill", self.skill_edit)
        form.addRow("Case", self.case_edit)
        form.addRow("Tree", tree_row)
        form.addRow("Prompt", self.prompt_edit)
        form.addRow("Citation", self.citation_edit)
        form.addRow("Provenance", self.provenance_edit)
        self.scroll = QScrollArea()  # the form scrolls; Save and its line stay in sight under it
        self.scroll.setObjectName("savecase_form")
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(body)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.scroll, 1)
        column.addWidget(self.save_button)
        column.addWidget(self.why_label)

        root = model.browser.fixtures_root
        if root is not None and not self.rules.is_packaged(root):
            self.tree_edit.setText(str(root))
        self.data_list.itemChanged.connect(self._picks_changed)
        self.truth_combo.currentIndexChanged.connect(self._picks_changed)
        for edit in (self.skill_edit, self.case_edit, self.tree_edit, self.citation_edit, self.provenance_edit):
            edit.textChanged.connect(self.update_button)
        self.prompt_edit.textChanged.connect(self.update_button)
        self.tree_button.clicked.connect(self._choose_tree)
        self.save_button.clicked.connect(self.save)
        viewer.layers.events.inserted.connect(self.refresh_layers)
        viewer.layers.events.removed.connect(self.refresh_layers)
        self.refresh_layers()

    # ------------------------------------------------------------------ the form

    def layers(self) -> dict[str, Any]:
        return {layer.name: layer for layer in self.viewer.layers}

    def form(self) -> SaveForm:
        checked = [
            self.data_list.item(i).text()
            for i in range(self.data_list.count())
            if self.data_list.item(i).checkState() == Qt.CheckState.Checked
        ]
        truth = self.truth_combo.currentText()
        return SaveForm(
            data=checked,
            truth=None if truth in ("", _NONE) else truth,
            skill=self.skill_edit.text().strip(),
            case_id=self.case_edit.text().strip(),
            prompt=self.prompt_edit.toPlainText(),
            citation=self.citation_edit.text(),
            provenance=self.provenance_edit.text(),
            tree=self.tree_edit.text().strip(),
        )

    def refresh_layers(self, *_: Any) -> None:
        """List the viewer's layers again, keeping what was picked."""
        before = self.form()
        data, truth = self.rules.offered(self.viewer.layers)
        self.data_list.blockSignals(True)
        self.truth_combo.blockSignals(True)
        self.data_list.clear()
        for name in data:
            item = QListWidgetItem(name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            picked = name in before.data or (not before.data and len(data) == 1)
            item.setCheckState(Qt.CheckState.Checked if picked else Qt.CheckState.Unchecked)
            self.data_list.addItem(item)
        self.truth_combo.clear()
        self.truth_combo.addItems([_NONE, *truth])
        if before.truth in truth:
            self.truth_combo.setCurrentText(before.truth)
        elif len(truth) == 1:
            self.truth_combo.setCurrentText(truth[0])
        self.data_list.blockSignals(False)
        self.truth_combo.blockSignals(False)
        self._picks_changed()

    def _picks_changed(self, *_: Any) -> None:
        """Write the prompt from the picks, unless the person has written their own."""
        written = self.rules.default_prompt(self.form(), self.layers())
        current = self.prompt_edit.toPlainText()
        if current in ("", self._default_prompt) and written != current:
            self.prompt_edit.setPlainText(written)
        self._default_prompt = written
        self.update_button()

    def update_button(self, *_: Any) -> None:
        why = self.rules.problem(self.form(), self.layers())
        self.save_button.setEnabled(why is None)
        self.save_button.setToolTip(
            why or "write the case into the tree: arrays, case.json, manifest entry, bench-case.json"
        )
        form = self.form()
        if self._saved is not None and self._saved[0] == form:
            self.why_label.setText(self._saved[1])
        else:
            self.why_label.setText(why or "ready to save")

    def _choose_tree(self) -> None:
        start = self.tree_edit.text() or str(Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Fixture tree to save the case into", start)
        if folder:
            self.tree_edit.setText(folder)

    # ------------------------------------------------------------------ the action

    def save(self) -> Any:
        """Write the case; the line lists the files, or says why nothing was written."""
        form = self.form()
        try:
            saved = self.rules.save(form, self.layers())
        except PanelError as exc:
            self.why_label.setText(f"not saved: {exc}")
            self.model.notify("error", f"Save as case: {exc}")
            return None
        folder, written = saved.written.folder, saved.paths()
        names = ", ".join(p.name for p in written if p.parent == folder)
        where = f"{folder}/ ({names}) and {written[-1]}"
        self._saved = (form, f"saved {saved.label} into {form.tree}: {where}")
        self.why_label.setText(self._saved[1])
        self.model.notify("info", f"saved case {saved.label}: {where}")
        self.saved.emit(form.tree, saved.label)
        return saved
