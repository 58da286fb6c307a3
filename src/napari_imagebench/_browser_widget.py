"""The case browser: the fixture tree in use (a folder picker changes it), the skill bundles
(another picker opens one) and the tree of cases by namespace (kind, class, availability,
source), the case filter under it (the rows whose label, kind or class hold every word typed)
and Load beside it. An unavailable case is greyed with its reason as a tooltip; a bundle's case is
italic. Its model is :class:`napari_imagebench._browser_model.BrowserModel` (through the panel's façade)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from qtpy.QtCore import QEvent, QObject, Qt, Signal
from qtpy.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from napari_imagebench._model import BenchModel, PanelError
from napari_imagebench._style import GREY, LABEL_ROLE, ElidedLabel, fit_columns, name_children

if TYPE_CHECKING:
    from napari_imagebench._controls import Controls

CASE_COLUMNS = ("case", "kind", "class", "available", "source")


class CaseBrowser(QWidget):
    """The fixture tree's row and the case tree; ``refreshed`` fires after the tree is redrawn."""

    refreshed = Signal()

    def __init__(self, model: BenchModel) -> None:
        super().__init__()
        self.model = model
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.tree_label = ElidedLabel()  # one line (the dock fits 1366x768); the whole text is its tooltip
        self.choose_button = QPushButton("Fixture tree…")
        self.choose_button.setToolTip("choose the folder holding manifest.json ($IMAGEBENCH_FIXTURES)")
        self.choose_button.clicked.connect(self._choose_tree)
        self.bundle_button = QPushButton("Bundle…")
        self.bundle_button.setToolTip("open a skill bundle (evals.json, evals/fixtures/): its cases join the tree")
        self.bundle_button.clicked.connect(self._choose_bundle)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("re-read the cases, the fixture tree and the open bundles")
        self.refresh_button.clicked.connect(self.refresh)
        for widget in (self.tree_label, self.choose_button, self.bundle_button, self.refresh_button):
            row.addWidget(widget)
        layout.addLayout(row)
        self.case_tree = QTreeWidget()
        self.case_tree.setHeaderLabels(list(CASE_COLUMNS))
        self.case_tree.setIndentation(12)  # the case ids keep a few more letters in a narrow dock
        fit_columns(self.case_tree, stretch=0)
        self.case_tree.viewport().installEventFilter(self)  # a resized tree keeps its selection in view
        layout.addWidget(self.case_tree, 1)
        row = QHBoxLayout()  # under the tree: what narrows it, and what loads the row picked in it
        self.case_filter = QLineEdit()
        self.case_filter.setPlaceholderText("filter cases: label, kind, class…")
        self.case_filter.setClearButtonEnabled(True)
        self.case_filter.setToolTip(
            "show only the cases whose label, kind or class holds every word typed here (Enter selects the first)"
        )
        for clear in self.case_filter.findChildren(QToolButton):  # the clear button inside the field
            clear.setToolTip("clear the filter: every case again")
        self.case_filter.textChanged.connect(self.apply_filter)
        self.case_filter.returnPressed.connect(self._select_first_shown)
        self.load_button = QPushButton("Load")
        self.load_button.setToolTip("add the case's data layers to the viewer")
        row.addWidget(self.case_filter, 1)
        row.addWidget(self.load_button)
        layout.addLayout(row)
        self.setObjectName("case_browser")
        name_children(self)

    def refresh(self) -> None:
        """Re-read the rows (the tree, the bundles) and redraw them, keeping the selection."""
        root = self.model.fixtures_root
        self.tree_label.tip = "" if root else "(the built-in curated cases read the data shipped in the package)"
        self.tree_label.elide = Qt.ElideLeft if root else Qt.ElideRight  # a path keeps its last folders
        self.tree_label.setText(f"fixture tree: {root}" if root else "fixture tree: none")
        selected = self.selected_label()
        self.case_tree.clear()
        groups: dict[str, QTreeWidgetItem] = {}
        rows = self.model.refresh()
        # the source column only when some row is not built-in: the case ids keep the width
        self.case_tree.setColumnHidden(CASE_COLUMNS.index("source"), all(r.source == "built-in" for r in rows))
        for r in rows:
            group = groups.get(r.namespace)
            if group is None:
                group = groups[r.namespace] = QTreeWidgetItem(self.case_tree, [r.namespace])
                group.setFlags(group.flags() & ~Qt.ItemIsSelectable)
                group.setFirstColumnSpanned(True)  # the namespace in full, across the columns
                group.setExpanded(True)
            available = "yes" if r.available else "no"
            item = QTreeWidgetItem(group, [r.case_id, r.kind, r.case_class, available, r.source])
            item.setData(0, LABEL_ROLE, r.label)
            tip = r.label if r.available else f"{r.label}: cannot run here: {r.reason}"
            if r.bundle is not None:
                tip += f"\n(from the bundle {r.bundle})"
            elif r.origin and r.source != "built-in":
                tip += f"\n(from {r.origin})"
            for col in range(len(CASE_COLUMNS)):
                item.setToolTip(col, tip)
                if not r.available:
                    item.setForeground(col, GREY)
            if r.source == "bundle":
                font = item.font(0)
                font.setItalic(True)
                item.setFont(0, font)
            if r.label == selected:
                item.setSelected(True)
        self.apply_filter()
        self.keep_selected_in_view()
        self.refreshed.emit()

    def keep_selected_in_view(self) -> None:
        """Scroll the tree so that the selected case's row shows (a filter, a refresh or a smaller
        tree, as when the case's detail unfolds beneath it, would otherwise hide it)."""
        items = self.case_tree.selectedItems()
        if items and not items[0].isHidden():
            self.case_tree.scrollToItem(items[0], QAbstractItemView.ScrollHint.EnsureVisible)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.case_tree.viewport() and event.type() == QEvent.Type.Resize:
            self.keep_selected_in_view()
        return super().eventFilter(watched, event)

    def apply_filter(self, text: str | None = None) -> list[str]:
        """Hide the rows the case filter does not keep (:meth:`BenchModel.filtered`), and a
        namespace with none left; a hidden row is no longer selected. The labels still shown."""
        text = self.case_filter.text() if text is None else text
        kept = {r.label for r in self.model.filtered(text)}
        shown = []
        for i in range(self.case_tree.topLevelItemCount()):
            group = self.case_tree.topLevelItem(i)
            any_shown = False
            for j in range(group.childCount()):
                item = group.child(j)
                label = item.data(0, LABEL_ROLE)
                hide = label not in kept
                item.setHidden(hide)
                if hide and item.isSelected():
                    item.setSelected(False)
                if not hide:
                    shown.append(label)
                    any_shown = True
            group.setHidden(not any_shown)
        return shown

    def _select_first_shown(self) -> None:
        rows = {r.label: r for r in self.model.rows()}
        shown = [label for label, item in self.case_items().items() if not item.isHidden()]
        first = next((label for label in shown if rows[label].available), shown[0] if shown else None)
        if first is not None:
            self.select_case(first)
            self.case_tree.setFocus()

    def show_controls(self, controls: Controls) -> None:
        self.load_button.setEnabled(controls.load.enabled)
        self.load_button.setToolTip(controls.load.why)

    def case_items(self) -> dict[str, QTreeWidgetItem]:
        out = {}
        for i in range(self.case_tree.topLevelItemCount()):
            group = self.case_tree.topLevelItem(i)
            for j in range(group.childCount()):
                item = group.child(j)
                out[item.data(0, LABEL_ROLE)] = item
        return out

    def take_case(self, tree: str, label: str) -> None:
        """A case just written into ``tree`` (Save as case): list that tree's cases, select it."""
        root = self.model.fixtures_root
        if root is None or Path(tree).resolve() != root.resolve():
            if not self.set_fixtures_root(tree):
                return
        else:
            self.refresh()
        if label in self.case_items():
            self.select_case(label)

    def select_case(self, label: str) -> None:
        item = self.case_items().get(label)
        if item is None:
            raise KeyError(label)
        self.case_tree.setCurrentItem(item)
        self.keep_selected_in_view()

    def selected_label(self) -> str | None:
        items = self.case_tree.selectedItems()
        return items[0].data(0, LABEL_ROLE) if items else None

    def _choose_tree(self) -> None:
        start = str(self.model.fixtures_root or Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Fixture tree (the folder holding manifest.json)", start)
        if folder:
            self.set_fixtures_root(folder)

    def set_fixtures_root(self, folder: str | Path) -> bool:
        ok = self.model.set_fixtures_root(folder)
        if ok:
            self.refresh()
        return ok

    def _choose_bundle(self) -> None:
        start = str(next(iter(self.model.bundles.values())).path.parent if self.model.bundles else Path.cwd())
        folder = QFileDialog.getExistingDirectory(self, "Skill bundle (the folder holding evals.json)", start)
        if folder:
            self.open_bundle(folder)

    def open_bundle(self, folder: str | Path) -> bool:
        """Open the skill bundle at ``folder``: its cases join the tree. False (with a notice) when
        the folder is not a bundle; the panel then keeps what it had."""
        try:
            self.model.open_bundle(folder)
        except PanelError:
            return False
        self.refresh()
        return True
