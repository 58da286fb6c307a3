"""The bench panel: a thin Qt shell over :class:`napari_imagebench._model.BenchModel`.
Long until the panel is split into small widgets (issue 26).

From top to bottom: the fixture tree in use (a folder picker changes it) and the skill bundles
(another picker opens one), the tree of cases by namespace (kind, class, availability, source; an
unavailable case is greyed with its reason as a tooltip and cannot run), the selected case's
detail (prompt, persona, layers, leavings, limits; never truth) and, on a second tab, the
coverage table of its skill, Load, the subject (you, ``reference``, or a ``python:`` solver you add), Run,
Score and a busy bar (loading and the subject's work happen in a worker thread, so the viewer
never freezes), the results (one row per sample with a child row per metric, plus a line per
notice), and the artifact buttons (side-by-side view with one shared contrast range, and the
run folder).

Every action goes through the model; every notice the model raises is shown both as a napari
notification and as a line in the results pane.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from qtpy.QtCore import QObject, Qt, QTimer, QUrl, Signal
from qtpy.QtGui import QBrush, QColor, QDesktopServices
from qtpy.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from napari_imagebench._answer_panel import AnswerPanel
from napari_imagebench._artifacts import (
    ARTIFACT_KEY,
    back_to_the_case,
    hide_others,
    sample_pngs,
    show_artifacts,
)
from napari_imagebench._canvas import remove_layers
from napari_imagebench._coverage import CoverageView
from napari_imagebench._layers import (
    PresentationError,
    add_layer_data,
    layer_value,
    point_size,
    result_kind,
    result_layer_data,
    session_layer_data,
)
from napari_imagebench._model import (
    INTERACTIVE,
    BenchModel,
    Loaded,
    Message,
    PanelError,
)
from napari_imagebench._runs import ResultRow

if TYPE_CHECKING:
    import napari

    from napari_imagebench._model import RunJob

T = TypeVar("T")
AGENT_LAYER_WAIT_S = 5.0  # how long an agent's add_layer waits for the viewer to show the layer
_LABEL_ROLE = Qt.UserRole
_GREY = QBrush(QColor(128, 128, 128))
_VERDICT_COLORS = {"pass": QColor(60, 170, 90), "fail": QColor(220, 70, 70), "unavailable": QColor(200, 150, 40)}
_STATUS_COLORS = {"ok": _VERDICT_COLORS["pass"]}
_COVERAGE_COLORS = {
    "covered": _VERDICT_COLORS["pass"],
    "partial": _VERDICT_COLORS["unavailable"],
    "gap": _VERDICT_COLORS["fail"],
}
_VALIDATION_COLORS = {
    "validated": _VERDICT_COLORS["pass"],
    "partial": _VERDICT_COLORS["unavailable"],
    "failed": _VERDICT_COLORS["fail"],
}
CASE_COLUMNS = ("case", "kind", "class", "available", "source")
COVERAGE_COLUMNS = ("claim", "band", "coverage", "validation", "cases", "samples")


def console_namespace(viewer: napari.Viewer) -> dict[str, Any] | None:
    """The napari console's user namespace when the console has been opened, else None.

    Never opens the console (that would start a kernel): only an existing one is read. napari
    has no public route to the console's namespace; the private one is read under a guard, so a
    napari that hides it reads as "no console" rather than an error.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # napari's notice about private attributes
        try:
            console = viewer.window._qt_viewer._console
        except AttributeError:
            return None
    if console is None:
        return None
    for path in (("shell",), ("kernel_manager", "kernel", "shell"), ("kernel", "shell")):
        obj: Any = console
        for attr in path:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        ns = getattr(obj, "user_ns", None) if obj is not None else None
        if isinstance(ns, dict):
            return ns
    return None


def closing_connections(work: Callable[[], T]) -> Callable[[], T]:
    """``work`` wrapped to close, on its own thread, the data-plane connections it opened there.

    Loading a tensor case opens data-plane (Arrow Flight) connections, which the client keeps per
    thread. A Qt pool thread (where napari's workers run) tears its Python state down in a way
    that crashes the process if such a connection is still open then, so every piece of worker
    work closes its thread's connections before it returns
    (:func:`imagebench.plane.client.close_thread_connections`). When the client was never
    imported no connection can exist, and nothing is imported here.
    """

    def run() -> T:
        try:
            return work()
        finally:
            client = sys.modules.get("imagebench.plane.client")
            if client is not None:
                client.close_thread_connections()

    return run


_CLOSING: list[Any] = []  # data planes whose close() runs when the application quits


def _close_on_quit(plane: Any) -> None:
    """Stop ``plane`` (its server process and temporary data) when the Qt application quits."""

    app = QApplication.instance()
    if app is None or any(p is plane for p in _CLOSING):
        return
    _CLOSING.append(plane)
    app.aboutToQuit.connect(plane.close)


def _fit_columns(tree: QTreeWidget, stretch: int, first_width: int | None = None) -> None:
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


class _AgentSignals(QObject):
    """Tool calls and layers of an agent served over MCP: emitted from the server's thread,
    handled on the GUI thread (a queued connection)."""

    call = Signal(object)
    layer = Signal(object)


class BenchPanel(QWidget):
    """The Imagebench dock widget."""

    def __init__(self, napari_viewer: napari.Viewer, model: BenchModel | None = None) -> None:
        super().__init__()
        self.viewer = napari_viewer
        self.model = model if model is not None else BenchModel()
        self.worker: Any = None
        self._panel_layers: list[Any] = []  # data layers this panel added for the loaded case
        self._result_layers: dict[str, Any] = {}  # "<subject>:<leaving>" -> layer
        self._console_results: dict[str, dict[str, Any]] = {}  # the console's imagebench_results

        self.model.events.message.connect(self._show_message)
        self.model.events.result.connect(self._add_result)
        self.viewer.layers.events.removed.connect(self._on_layer_removed)
        self.viewer.layers.events.inserted.connect(self._on_layer_inserted)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)

        tree_row = QHBoxLayout()
        self.tree_label = QLabel()
        self.tree_label.setWordWrap(True)
        self.tree_label.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Preferred)
        self.choose_button = QPushButton("Fixture tree…")
        self.choose_button.setToolTip("choose the folder holding manifest.json ($IMAGEBENCH_FIXTURES)")
        self.choose_button.clicked.connect(self._choose_tree)
        self.bundle_button = QPushButton("Bundle…")
        self.bundle_button.setToolTip("open a skill bundle (evals.json, evals/fixtures/): its cases join the tree")
        self.bundle_button.clicked.connect(self._choose_bundle)
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        tree_row.addWidget(self.tree_label)
        tree_row.addWidget(self.choose_button)
        tree_row.addWidget(self.bundle_button)
        tree_row.addWidget(self.refresh_button)
        layout.addLayout(tree_row)

        self.case_tree = QTreeWidget()
        self.case_tree.setHeaderLabels(list(CASE_COLUMNS))
        _fit_columns(self.case_tree, stretch=0)
        self.case_tree.itemSelectionChanged.connect(self._selection_changed)
        self.detail = QPlainTextEdit()
        self.detail.setReadOnly(True)
        self.detail.setPlaceholderText("select a case")
        self.tabs = QTabWidget()
        self.tabs.addTab(self.detail, "Detail")
        self.answer_panel = AnswerPanel(self.viewer, self.model)
        self.answer_panel.changed.connect(self._update_buttons)
        self.tabs.addTab(self.answer_panel, "Answer")
        self.tabs.addTab(self._coverage_tab(), "Coverage")
        top = QSplitter(Qt.Vertical)
        top.addWidget(self.case_tree)
        top.addWidget(self.tabs)

        controls = QWidget()
        cl = QVBoxLayout(controls)
        cl.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.load_button = QPushButton("Load")
        self.load_button.setToolTip("add the case's data layers to the viewer")
        self.load_button.clicked.connect(self.load_selected)
        self.subject_combo = QComboBox()
        self.subject_combo.addItems(self.model.subject_specs)
        self.subject_combo.currentTextChanged.connect(lambda _: self._update_buttons())
        row.addWidget(self.load_button)
        row.addWidget(QLabel("subject"))
        row.addWidget(self.subject_combo, 1)
        cl.addLayout(row)
        row = QHBoxLayout()
        self.solver_edit = QLineEdit()
        self.solver_edit.setPlaceholderText("python:package.module:function")
        self.solver_edit.returnPressed.connect(self.add_solver)
        self.add_solver_button = QPushButton("Add solver")
        self.add_solver_button.clicked.connect(self.add_solver)
        row.addWidget(self.solver_edit, 1)
        row.addWidget(self.add_solver_button)
        cl.addLayout(row)
        row = QHBoxLayout()
        self.run_button = QPushButton("Run")
        self.run_button.clicked.connect(self.run)
        self.score_button = QPushButton("Score")
        self.score_button.clicked.connect(self.score)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("end the running subject now (its processes too); the sample is recorded as stopped")
        self.stop_button.clicked.connect(self.stop)
        self._job: RunJob | None = None
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)
        row.addWidget(self.run_button)
        row.addWidget(self.score_button)
        row.addWidget(self.stop_button)
        cl.addLayout(row)
        cl.addWidget(self.progress)  # its own row: the busy text is readable
        row = QHBoxLayout()
        self.serve_button = QPushButton("Serve to an agent")
        self.serve_button.setCheckable(True)
        self.serve_button.setToolTip(
            "serve the loaded case to an agent over MCP (the folder's mcp.json says how to reach it); its layers "
            "appear as it works, and Score scores what it left as subject mcp:<client name>"
        )
        self.serve_button.clicked.connect(self._serve_clicked)
        row.addWidget(self.serve_button)
        cl.addLayout(row)
        self.agent_label = QLabel("")
        self.agent_label.setWordWrap(True)
        self.agent_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.agent_label.setVisible(False)  # shown while an agent is served (the dock fits 1366x768)
        self.agent_log = QPlainTextEdit()
        self.agent_log.setReadOnly(True)
        self.agent_log.setMaximumHeight(110)
        self.agent_log.setPlaceholderText("the agent's tool calls appear here")
        self.agent_log.setVisible(False)
        cl.addWidget(self.agent_label)
        cl.addWidget(self.agent_log)
        self._agent_signals = _AgentSignals()
        self._agent_signals.call.connect(self._agent_call)
        self._agent_signals.layer.connect(self._agent_layer)

        self.results = QTreeWidget()
        self.results.setHeaderLabels(["result", "value", "limit", "verdict", "note"])
        _fit_columns(self.results, stretch=4, first_width=250)
        self.results.itemSelectionChanged.connect(self._update_buttons)
        cl.addWidget(self.results, 1)
        row = QHBoxLayout()
        self.artifacts_button = QPushButton("View artifacts")
        self.artifacts_button.setToolTip("the selected sample's images side by side, one contrast range for all")
        self.artifacts_button.clicked.connect(self.view_artifacts)
        self.folder_button = QPushButton("Open run folder")
        self.folder_button.clicked.connect(self.open_run_folder)
        self.back_button = QPushButton("Back to the case")
        self.back_button.setToolTip("remove the artifact panes and show the case's layers as they were")
        self.back_button.clicked.connect(self.back_to_the_case)
        self._case_visibility: dict[str, bool] | None = None
        self.export_button = QPushButton("Export CSV…")
        self.export_button.setToolTip("every result of this session, one row per metric, as CSV")
        self.export_button.clicked.connect(lambda: self.export_results())
        row.addWidget(self.artifacts_button)
        row.addWidget(self.back_button)
        cl.addLayout(row)
        row = QHBoxLayout()  # two rows of two: the dock fits a 1366x768 screen
        row.addWidget(self.folder_button)
        row.addWidget(self.export_button)
        cl.addLayout(row)

        split = QSplitter(Qt.Vertical)
        split.addWidget(top)
        split.addWidget(controls)
        layout.addWidget(split, 1)

        # napari's console says nothing when a name is bound there: look again now and then
        self._answer_timer = QTimer(self)
        self._answer_timer.setInterval(1000)
        self._answer_timer.timeout.connect(self._poll_answers)
        self._answer_timer.start()
        self.setObjectName("bench_panel")
        for attr, widget in vars(self).items():  # tests and people's scripts find controls by name
            if isinstance(widget, QWidget) and not widget.objectName():
                widget.setObjectName(attr)
        self.refresh()

    def _coverage_tab(self) -> QWidget:
        tab = QWidget()
        col = QVBoxLayout(tab)
        col.setContentsMargins(2, 2, 2, 2)
        self.coverage_title = QLabel("select a case to see its skill's coverage")
        self.coverage_title.setWordWrap(True)
        col.addWidget(self.coverage_title)
        self.coverage_table = QTreeWidget()
        self.coverage_table.setHeaderLabels(list(COVERAGE_COLUMNS))
        self.coverage_table.setRootIsDecorated(False)
        _fit_columns(self.coverage_table, stretch=4)
        col.addWidget(self.coverage_table, 1)
        self.coverage_warnings = QLabel()
        self.coverage_warnings.setWordWrap(True)
        self.coverage_warnings.setTextInteractionFlags(Qt.TextSelectableByMouse)
        col.addWidget(self.coverage_warnings)
        self.coverage_all_runs = QCheckBox("also count earlier runs under the outcome root")
        self.coverage_all_runs.setChecked(self.model.coverage_all_runs)
        self.coverage_all_runs.toggled.connect(self._coverage_runs_toggled)
        col.addWidget(self.coverage_all_runs)
        self.coverage_view: CoverageView | None = None
        return tab

    # ---------------------------------------------------------------- case tree

    def refresh(self) -> None:
        root = self.model.fixtures_root
        self.tree_label.setText(
            f"fixture tree: {root}" if root else "fixture tree: none (curated cases read the data shipped in the package)"
        )
        selected = self.selected_label()
        self.case_tree.clear()
        groups: dict[str, QTreeWidgetItem] = {}
        for r in self.model.refresh():
            group = groups.get(r.namespace)
            if group is None:
                group = groups[r.namespace] = QTreeWidgetItem(self.case_tree, [r.namespace])
                group.setFlags(group.flags() & ~Qt.ItemIsSelectable)
                group.setExpanded(True)
            available = "yes" if r.available else "no"
            item = QTreeWidgetItem(group, [r.case_id, r.kind, r.case_class, available, r.source])
            item.setData(0, _LABEL_ROLE, r.label)
            tip = r.label if r.available else f"{r.label}: cannot run here: {r.reason}"
            if r.bundle is not None:
                tip += f"\n(from the bundle {r.bundle})"
            for col in range(len(CASE_COLUMNS)):
                item.setToolTip(col, tip)
                if not r.available:
                    item.setForeground(col, _GREY)
            if r.source == "bundle":
                font = item.font(0)
                font.setItalic(True)
                item.setFont(0, font)
            if r.label == selected:
                item.setSelected(True)
        self._update_buttons()
        self.refresh_coverage()

    def case_items(self) -> dict[str, QTreeWidgetItem]:
        out = {}
        for i in range(self.case_tree.topLevelItemCount()):
            group = self.case_tree.topLevelItem(i)
            for j in range(group.childCount()):
                item = group.child(j)
                out[item.data(0, _LABEL_ROLE)] = item
        return out

    def select_case(self, label: str) -> None:
        item = self.case_items().get(label)
        if item is None:
            raise KeyError(label)
        self.case_tree.setCurrentItem(item)

    def selected_label(self) -> str | None:
        items = self.case_tree.selectedItems()
        return items[0].data(0, _LABEL_ROLE) if items else None

    def _selection_changed(self) -> None:
        label = self.selected_label()
        if label is None:
            self.detail.clear()
        else:
            try:
                self.detail.setPlainText(self.model.detail(label).text())
            except PanelError as exc:
                self.detail.setPlainText(f"{label}\n\n{exc}")
        self._update_buttons()
        self.refresh_coverage()

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

    # ---------------------------------------------------------------- skill bundles

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

    # ---------------------------------------------------------------- coverage

    def coverage_skill(self) -> str | None:
        """The skill the coverage tab shows: the selected case's namespace, else the loaded case's."""
        label = self.selected_label()
        if label is not None:
            return label.split("/", 1)[0]
        loaded = self.model.loaded
        return loaded.case.namespace if loaded is not None else None

    def refresh_coverage(self) -> CoverageView | None:
        """Re-read the coverage table of :meth:`coverage_skill` (after a selection, a bundle, a score)."""
        skill = self.coverage_skill()
        self.coverage_table.clear()
        if skill is None:
            self.coverage_view = None
            self.coverage_title.setText("select a case to see its skill's coverage")
            self.coverage_warnings.clear()
            return None
        view = self.model.coverage(skill)
        self.coverage_view = view
        self.coverage_title.setText(view.title())
        for row in view.rows:
            cells = view.cells(row)
            item = QTreeWidgetItem(self.coverage_table, list(cells))
            item.setToolTip(0, row.description)
            item.setForeground(2, QBrush(_COVERAGE_COLORS[row.coverage]))
            if row.validation in _VALIDATION_COLORS:
                item.setForeground(3, QBrush(_VALIDATION_COLORS[row.validation]))
            samples = [f"passed: {s}" for s in row.passed_samples] + [f"failed: {s}" for s in row.failed_samples]
            item.setToolTip(5, "\n".join(samples) or "no graded sample in these runs")
            item.setToolTip(4, cells[4])
        self.coverage_warnings.setText("\n".join(f"warning: {w}" for w in view.warnings))
        return view

    def coverage_cells(self) -> list[list[str]]:
        """The coverage table as shown: one list of cell texts per row."""
        out = []
        for i in range(self.coverage_table.topLevelItemCount()):
            item = self.coverage_table.topLevelItem(i)
            out.append([item.text(c) for c in range(len(COVERAGE_COLUMNS))])
        return out

    def _coverage_runs_toggled(self, checked: bool) -> None:
        self.model.coverage_all_runs = bool(checked)
        self.refresh_coverage()

    # ---------------------------------------------------------------- load

    def load_selected(self) -> bool:
        """Start loading the case selected in the tree (see :meth:`load`)."""
        label = self.selected_label()
        if label is None:
            self.model.notify("warning", "select a case to load")
            return False
        return self.load(label)

    def load(self, label: str) -> bool:
        """Start loading ``label`` in a worker (building a fixture or uploading to the data plane
        can take seconds); the layers appear when it is done. False when it cannot start."""
        if self.running:
            self.model.notify("warning", "wait for the current work to finish before loading a case")
            return False
        try:
            case = self.model.loadable(label)
        except PanelError:
            return False

        def build() -> tuple[Loaded, list[Any]]:
            loaded = self.model.build(case)
            try:
                return loaded, session_layer_data(loaded.session)  # a tensor pyramid is described here
            except PresentationError as exc:
                raise PanelError(f"{label}: {exc}") from None

        self._start(build, f"loading {label}…", self._loaded, label)
        return True

    def _loaded(self, built: tuple[Loaded, list[Any]]) -> None:
        loaded, tuples = built
        self.model.adopt(loaded)
        if self._case_visibility is not None:  # leave the previous case's artifact panes first
            back_to_the_case(self.viewer, {})
            self._case_visibility = None
        remove_layers(self.viewer, self._panel_layers + list(self._result_layers.values()))
        self._panel_layers = []
        self._result_layers = {}
        self._console_results = {}
        for data in tuples:
            layer = add_layer_data(self.viewer, data)
            self._panel_layers.append(layer)
            self.model.layer_shown(layer.name)
        if loaded.plane is not None:
            _close_on_quit(loaded.plane)
        self.viewer.reset_view()
        self.viewer.update_console(
            {**loaded.session.namespace, "session": loaded.session, "imagebench_results": self._console_results}
        )
        self.model.notify("info", f"loaded {loaded.case.label}: {', '.join(loaded.session.layers)}")
        if loaded.session.workspace is not None:
            where = loaded.session.workspace / "files"
            self.model.notify("info", f"{loaded.case.label}: its files are under session.workspace ({where}), read-only")
        problem = self.model.subject_problem(self.subject_combo.currentText(), loaded.case)
        if problem:
            self.subject_combo.setCurrentText(INTERACTIVE)
            self.model.notify("info", f"{problem}; the subject is now {INTERACTIVE}")
        self.answer_panel.rebuild()
        self._update_buttons()

    # ---------------------------------------------------------------- subjects

    def add_solver(self) -> bool:
        spec = self.solver_edit.text().strip()
        try:
            spec = self.model.add_subject(spec)
        except PanelError:
            return False
        if self.subject_combo.findText(spec) < 0:
            self.subject_combo.addItem(spec)
        self.subject_combo.setCurrentText(spec)
        self.solver_edit.clear()
        return True

    # ---------------------------------------------------------------- run

    @property
    def running(self) -> bool:
        return self.worker is not None

    def run(self) -> bool:
        """Start the selected subject on a fresh session in a worker; False when it cannot start."""
        if self.running:
            self.model.notify("warning", "wait for the current work to finish before running")
            return False
        spec = self.subject_combo.currentText()
        try:
            job = self.model.prepare_run(spec)
        except PanelError:
            return False
        self._job = job
        self._start(job.work, f"{spec} working…", lambda run, job=job: self._run_done(job, run), job.subject_name)
        return True

    def stop(self) -> bool:
        """Stop the running subject (False when no subject is running)."""
        if self._job is None or not self.running:
            return False
        self._job.stop.set()
        self.progress.setFormat("stopping…")
        self.stop_button.setEnabled(False)
        return True

    def _start(self, work: Any, busy_text: str, done: Any, what: str) -> None:
        """Run ``work()`` in a worker thread with the bar busy; ``done(result)`` runs back on the GUI thread."""
        from napari.qt.threading import create_worker

        def failed(exc: BaseException) -> None:
            text = str(exc) if isinstance(exc, PanelError) else f"{what}: {type(exc).__name__}: {exc}"
            self.model.notify("error", text)

        worker = create_worker(closing_connections(work), _start_thread=False)
        worker.returned.connect(done)
        worker.errored.connect(failed)
        worker.finished.connect(self._work_finished)
        self.worker = worker
        self.progress.setRange(0, 0)  # busy: neither a builder nor a subject reports progress of its own
        self.progress.setFormat(busy_text)
        self.progress.setTextVisible(True)
        self._update_buttons()
        worker.start()

    def _run_done(self, job: RunJob, run: Any) -> None:
        left = self.model.finish_run(job, run)
        case = job.unit.case
        declared = {c.name: c for c in case.collect}
        layers = {layer.name: layer for layer in case.layers}
        shapes = {n: tuple(sl.data.shape) for n, sl in job.session.layers.items() if hasattr(sl.data, "shape")}
        size = point_size(next(iter(shapes.values()))) if shapes else None
        for name, value in left.items():
            collect = declared.get(name)
            kind = collect.layer if collect is not None and collect.layer is not None else result_kind(value, shapes)
            if kind is None:
                continue
            like = layers.get(collect.like) if collect is not None and collect.like else None
            ordered = bool(collect is not None and collect.ordered)
            layer_name = f"{job.subject_name}:{name}"
            old = self._result_layers.pop(layer_name, None)
            if old is not None:
                remove_layers(self.viewer, [old])
            try:
                data = result_layer_data(layer_name, value, kind, like=like, ordered=ordered, size=size)
                layer = add_layer_data(self.viewer, data)
            except Exception as exc:  # what a subject left may not be showable as the case says
                self.model.notify("warning", f"{layer_name} cannot be shown as {kind}: {type(exc).__name__}: {exc}")
                continue
            self._result_layers[layer_name] = layer
            self.model.layer_shown(layer.name)
        self._console_results[job.subject_name] = dict(left)
        self.viewer.update_console({"imagebench_results": self._console_results})

    def _work_finished(self) -> None:
        self.worker = None
        self._job = None
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.progress.setTextVisible(False)
        self._update_buttons()

    # ---------------------------------------------------------------- score

    def viewer_leavings(self) -> dict[str, Any]:
        """``{layer name: data}`` of the viewer's layers, artifact panes aside; a layer picked in the
        Answer tab stands for its leaving."""
        found = {layer.name: layer_value(layer) for layer in self.viewer.layers if ARTIFACT_KEY not in layer.metadata}
        for name, layer_name in self.answer_panel.picked_names().items():
            found[name] = found[layer_name]
        return found

    def score(self) -> ResultRow | None:
        if self.running:
            self.model.notify("warning", "wait for the run to finish before scoring")
            return None
        if self.model.agent is not None:  # an agent is served: Score scores what it left
            try:
                return self.model.score_agent()
            except PanelError:
                return None
            finally:
                self._agent_stopped()
        spec = self.subject_combo.currentText()
        try:
            if spec == INTERACTIVE:
                return self.model.score(spec, layers=self.viewer_leavings(), console=console_namespace(self.viewer))
            return self.model.score(spec)
        except PanelError:
            return None
        finally:
            self._update_buttons()

    # ---------------------------------------------------------------- an agent over MCP

    def serve_agent(self) -> bool:
        """Serve the loaded case to an agent over MCP; False when it cannot start."""
        import numpy as np

        signals = self._agent_signals

        def on_layer(layer: Any) -> None:  # the server's thread: show it, and wait until it is shown
            import threading

            shown = threading.Event()
            signals.layer.emit((layer.name, layer.kind, np.array(layer.data, copy=True), layer.like, shown))
            shown.wait(AGENT_LAYER_WAIT_S)

        try:
            serve = self.model.serve_agent(on_layer=on_layer, on_call=signals.call.emit)
        except PanelError:
            self.serve_button.setChecked(False)
            return False
        self.agent_log.clear()
        self.agent_log.setVisible(True)
        self.agent_label.setVisible(True)
        self.agent_label.setText(f"mcp.json: {serve.config}")
        self.agent_label.setToolTip(f"e.g. claude -p '<task>' --mcp-config {serve.config}")
        self.serve_button.setChecked(True)
        self.serve_button.setText("Stop serving")
        self._update_buttons()
        return True

    def stop_agent(self) -> None:
        """Stop serving the agent without scoring it."""
        self.model.stop_agent()
        self._agent_stopped()

    def _serve_clicked(self, checked: bool) -> None:
        if checked:
            self.serve_agent()
        else:
            self.stop_agent()

    def _agent_stopped(self) -> None:
        self.serve_button.setChecked(False)
        self.serve_button.setText("Serve to an agent")
        self.agent_label.setText("")
        self.agent_label.setVisible(False)  # the log stays until the next agent: the person reads it
        self._update_buttons()

    def _agent_call(self, call: Any) -> None:
        outcome = "ok" if call.ok else f"error: {call.error}"
        args = ", ".join(f"{k}={v}" for k, v in call.arguments.items())
        self.agent_log.appendPlainText(f"#{call.seq} {call.tool}({args[:120]}) {outcome} [{call.seconds * 1000:.1f} ms]")

    def _agent_layer(self, payload: Any) -> None:
        name, kind, data, like, shown = payload
        try:
            serve = self.model.agent
            loaded = self.model.loaded
            if serve is None or loaded is None:
                return
            layer_name = f"{serve.subject_name}:{name}"
            old = self._result_layers.get(layer_name)
            if old is not None and old in self.viewer.layers:
                old.data = data
                return
            declared = {layer.name: layer for layer in loaded.case.layers}
            shapes = {n: tuple(sl.data.shape) for n, sl in loaded.session.layers.items() if hasattr(sl.data, "shape")}
            size = point_size(next(iter(shapes.values()))) if shapes else None
            try:
                layer = add_layer_data(
                    self.viewer,
                    result_layer_data(layer_name, data, kind, like=declared.get(like) if like else None, size=size),
                )
            except Exception as exc:
                self.model.notify("warning", f"{layer_name} cannot be shown as {kind}: {type(exc).__name__}: {exc}")
                return
            self._result_layers[layer_name] = layer
            self.model.layer_shown(layer.name)
        finally:
            shown.set()

    # ---------------------------------------------------------------- results

    def _show_message(self, msg: Message) -> None:
        from napari.utils.notifications import show_error, show_info, show_warning

        {"info": show_info, "warning": show_warning, "error": show_error}[msg.level](msg.text)
        item = QTreeWidgetItem(self.results, [f"{msg.level}: {msg.text}"])
        item.setFirstColumnSpanned(True)
        item.setToolTip(0, msg.text)
        if msg.level != "info":
            item.setForeground(0, QBrush(_VERDICT_COLORS["fail" if msg.level == "error" else "unavailable"]))
        self.results.scrollToItem(item)

    def _add_result(self, result: ResultRow) -> None:
        title = f"{result.subject} #{result.sample}: {result.label}"
        item = QTreeWidgetItem(self.results, [title, result.status, "", "", result.reason])
        item.setData(0, _LABEL_ROLE, len(self.model.results) - 1)
        item.setToolTip(0, f"{title}\n{result.sample_dir}")
        item.setToolTip(4, result.reason)
        color = _STATUS_COLORS.get(result.status, _VERDICT_COLORS["fail"])
        item.setForeground(1, QBrush(color))
        for name, value, limit, verdict, why in result.metric_cells():
            child = QTreeWidgetItem(item, [name, value, limit, verdict, why])
            child.setForeground(3, QBrush(_VERDICT_COLORS[verdict]))
            if why:
                child.setToolTip(4, why)
        for check in result.checks:  # the bundle's grading checklist, shown once the sample is scored
            child = QTreeWidgetItem(item, ["grading check", "", "", "", check])
            child.setToolTip(4, check)
        for i in range(self.results.topLevelItemCount() - 1):  # earlier results fold away (a click opens them)
            self.results.topLevelItem(i).setExpanded(False)
        item.setExpanded(True)
        self.results.setCurrentItem(item)
        # the newest result at the top of the pane, its metric rows below it
        self.results.scrollToItem(item, QAbstractItemView.ScrollHint.PositionAtTop)
        self._update_buttons()
        self.refresh_coverage()  # validation is read from the run folders, which now hold this sample

    def selected_result(self) -> ResultRow | None:
        """The result row selected in the pane (a metric row counts as its sample), else the latest."""
        for item in self.results.selectedItems():
            while item.parent() is not None:
                item = item.parent()
            index = item.data(0, _LABEL_ROLE)
            if isinstance(index, int):
                return self.model.results[index]
        return self.model.results[-1] if self.model.results else None

    def view_artifacts(self) -> list[Any]:
        result = self.selected_result()
        if result is None:
            self.model.notify("warning", "score a sample first: its artifacts are what this shows")
            return []
        pngs = sample_pngs(result.sample_dir)
        if not pngs:
            self.model.notify("info", f"{result.label} sample {result.sample} wrote no images")
            return []
        prefix = f"{result.subject} s{result.sample}: "
        if self._case_visibility is None:  # the case as it was, for Back to the case
            self._case_visibility = hide_others(self.viewer)
        layers = show_artifacts(self.viewer, pngs, relative_to=result.sample_dir, prefix=prefix)
        self.model.artifacts_shown(result)
        self._update_buttons()
        return layers

    def back_to_the_case(self) -> bool:
        """Leave the artifact panes: remove them and show the case's layers as they were."""
        if self._case_visibility is None:
            return False
        back_to_the_case(self.viewer, self._case_visibility)
        self._case_visibility = None
        self._update_buttons()
        return True

    def run_folder_path(self) -> Path | None:
        result = self.selected_result()
        return result.run_dir if result is not None else None

    def open_run_folder(self) -> Path | None:
        path = self.run_folder_path()
        if path is None:
            self.model.notify("warning", "no run folder yet: score a sample first")
            return None
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))):
            self.model.notify("info", f"no file browser could open it; the run folder is {path}")
        return path

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

    # ---------------------------------------------------------------- layers and buttons

    def _on_layer_removed(self, event: Any) -> None:
        layer = event.value
        if layer in self._panel_layers:
            self._panel_layers.remove(layer)
        for key, value in list(self._result_layers.items()):
            if value is layer:
                del self._result_layers[key]
        self.model.layer_removed(layer.name)

    def _on_layer_inserted(self, event: Any) -> None:
        self.model.layer_added(event.value.name)

    def _update_buttons(self) -> None:
        label = self.selected_label()
        runnable = False
        row = None
        if label is not None:
            row = next((r for r in self.model.rows() if r.label == label), None)
            runnable = row is not None and row.available
        loaded = self.model.loaded is not None
        interactive = self.subject_combo.currentText() == INTERACTIVE
        # a subject that cannot work the case (reference on a case without one) is greyed in the list
        target = self.model.loaded.case if self.model.loaded is not None else (row.case if row is not None else None)
        problem = self._mark_subjects(target)
        serving = self.model.agent is not None
        self.serve_button.setEnabled((loaded or serving) and not self.running)
        self.load_button.setEnabled(runnable and not self.running and not serving)
        self.run_button.setEnabled(loaded and not interactive and not problem and not self.running)
        self.run_button.setToolTip(problem or "run the subject on a fresh session of the loaded case")
        missing: list[str] = self._missing_answers() if loaded and interactive and not serving else []
        self.score_button.setEnabled(loaded and not self.running and not missing)
        self.score_button.setToolTip(
            "score what the agent left (and stop serving it)"
            if serving
            else f"leave {', '.join(missing)} first (the Answer tab says how)"
            if missing
            else "score the leavings as a sample"
        )
        self.stop_button.setEnabled(self._job is not None and self.running and not self._job.stop.is_set())
        has_result = bool(self.model.results)
        self.artifacts_button.setEnabled(has_result)
        self.back_button.setEnabled(self._case_visibility is not None)
        self.folder_button.setEnabled(has_result)

    def _poll_answers(self) -> None:
        if self.model.loaded is not None and not self.running and self.subject_combo.currentText() == INTERACTIVE:
            self._update_buttons()

    def _missing_answers(self) -> list[str]:
        try:
            return list(self.model.missing_answers(self.viewer_leavings(), console_namespace(self.viewer)))
        except PanelError:
            return []

    def _mark_subjects(self, case: Any) -> str:
        """Grey each subject that cannot work ``case`` (its reason as tooltip); return the current one's reason."""
        items = self.subject_combo.model()
        current = ""
        for i in range(self.subject_combo.count()):
            spec = self.subject_combo.itemText(i)
            problem = self.model.subject_problem(spec, case)
            item = items.item(i) if hasattr(items, "item") else None
            if item is not None:
                item.setEnabled(not problem)
                item.setToolTip(problem)
            if i == self.subject_combo.currentIndex():
                current = problem
        return current

    def subject_enabled(self, spec: str) -> bool:
        """Whether ``spec`` is selectable in the subject list now."""
        i = self.subject_combo.findText(spec)
        items = self.subject_combo.model()
        item = items.item(i) if i >= 0 and hasattr(items, "item") else None
        return bool(item is not None and item.isEnabled())

    def closeEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        self.model.stop_agent()
        self._disconnect()
        super().closeEvent(event)

    def _disconnect(self) -> None:
        for signal, slot in (
            (self.viewer.layers.events.removed, self._on_layer_removed),
            (self.viewer.layers.events.inserted, self._on_layer_inserted),
        ):
            try:
                signal.disconnect(slot)
            except (TypeError, RuntimeError, ValueError):
                pass
