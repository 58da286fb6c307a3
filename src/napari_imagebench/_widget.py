"""The bench panel: the Imagebench dock widget, composed of small widgets over one headless model.

From top to bottom, in two parts a splitter divides: the case browser (the fixture tree in use,
the skill bundles, the tree of cases, the case filter and Load under it; :mod:`._browser_widget`)
and the tabs Detail (:mod:`._detail_widget`), Answer (:mod:`._answer_panel`), Coverage
(:mod:`._coverage_widget`), Compare (:mod:`._compare_widget`) and Save as case
(:mod:`._savecase_widget`), folded to their bar until asked; then the subject, Run, Score, Stop
and the busy bar (:mod:`._run_widget`), agent serving (:mod:`._agent_widget`), the results
(:mod:`._results_widget`), the artifact buttons (:mod:`._artifacts_widget`) and the sitting's
folder, report and path (:mod:`._folder_widget`). It fits a
1366x768 laptop screen (``tests/napari/test_laptop.py``). Ctrl+L loads, Ctrl+Enter scores and
Ctrl+Shift+A views the artifacts or goes back (:mod:`._keys`). What the panel put on the viewer
is :class:`._viewer.PanelLayers`.

Every action goes through the model (:class:`napari_imagebench._model.BenchModel`); which
buttons are enabled is the model's answer (:meth:`BenchModel.controls`), which this panel only
draws. Every notice the model raises is shown both as a napari notification and as a line in
the results pane. The panel keeps, as attributes, the controls people's scripts and tests reach
(``panel.load_button``, ``panel.subject_combo``, ``panel.results``, ...), each with its objectName.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from qtpy.QtCore import Qt, QTimer
from qtpy.QtWidgets import QSplitter, QTreeWidgetItem, QVBoxLayout, QWidget

from napari_imagebench import _keys
from napari_imagebench._agent_widget import AgentPane
from napari_imagebench._answer_panel import AnswerPanel
from napari_imagebench._artifacts_widget import ArtifactButtons
from napari_imagebench._browser_widget import CaseBrowser
from napari_imagebench._compare_widget import CompareTab
from napari_imagebench._controls import PanelState, with_key
from napari_imagebench._coverage import CoverageView
from napari_imagebench._coverage_widget import CoverageTab
from napari_imagebench._detail_widget import CaseDetailView, CaseTabs
from napari_imagebench._folder_widget import FolderButtons
from napari_imagebench._layers import PresentationError, session_layer_data
from napari_imagebench._model import INTERACTIVE, BenchModel, Loaded, PanelError
from napari_imagebench._results_widget import ResultsPane
from napari_imagebench._run_widget import RunControls, close_on_quit, closing_connections
from napari_imagebench._runs import ResultRow
from napari_imagebench._savecase_widget import SaveCaseTab
from napari_imagebench._style import name_children
from napari_imagebench._viewer import PanelLayers, console_namespace

if TYPE_CHECKING:
    import napari

    from napari_imagebench._model import RunJob

__all__ = ["BenchPanel", "closing_connections", "console_namespace"]


class BenchPanel(QWidget):
    """The Imagebench dock widget."""

    def __init__(self, napari_viewer: napari.Viewer, model: BenchModel | None = None) -> None:
        super().__init__()
        self.viewer = napari_viewer
        self.model = model if model is not None else BenchModel()
        self.layers = PanelLayers(self.viewer, self.model)

        self.browser = CaseBrowser(self.model)
        self.detail = CaseDetailView(self.model)
        self.answer_panel = AnswerPanel(self.viewer, self.model)
        self.coverage_tab = CoverageTab(self.model)
        self.run_controls = RunControls(self.model, status=self._status)
        self.agent_pane = AgentPane(self.model, self.layers)
        self.results = ResultsPane(self.model)
        self.artifact_buttons = ArtifactButtons(self.viewer, self.model, self.results.selected_result)
        self.folder_buttons = FolderButtons(self.model)
        # the controls people's scripts and tests reach, as the panel's own attributes
        parts = (self.browser, self.coverage_tab, self.run_controls, self.agent_pane, self.artifact_buttons, self.folder_buttons)
        for part in parts:
            for attr, widget in vars(part).items():
                if isinstance(widget, QWidget) and not attr.startswith("_"):
                    setattr(self, attr, widget)

        # two runs side by side; the panel's own artifact panes go first, and View artifacts or a Load ends it
        self.compare_tab = CompareTab.of_panel(self.viewer, self.model, self.artifact_buttons.back_to_the_case)
        self.artifacts_button.pressed.connect(self.compare_tab.back)
        self.savecase_tab = SaveCaseTab(self.viewer, self.model)  # the viewer's layers as a new case in a tree
        self.savecase_tab.saved.connect(self.browser.take_case)
        pages = [(self.detail, "Detail"), (self.answer_panel, "Answer"), (self.coverage_tab, "Coverage")]
        self.tabs = CaseTabs([*pages, (self.compare_tab, "Compare"), (self.savecase_tab, "Save as case")])
        self.detail_toggle = self.tabs.detail_toggle
        top = QWidget()  # the case browser and, folded to their bar until asked, the tabs
        col = QVBoxLayout(top)
        col.setContentsMargins(0, 0, 0, 0)
        col.addWidget(self.browser, 1)
        col.addWidget(self.tabs, 1)
        controls = QWidget()
        col = QVBoxLayout(controls)
        col.setContentsMargins(0, 0, 0, 0)
        col.addWidget(self.run_controls)
        col.addWidget(self.agent_pane)
        col.addWidget(self.results.area, 1)  # the results and, under them, the selected sample explained
        col.addWidget(self.artifact_buttons)
        col.addWidget(self.folder_buttons)
        self.splitter = split = QSplitter(Qt.Vertical)  # drag it to give the results or the cases more room
        split.addWidget(top)
        split.addWidget(controls)
        split.setChildrenCollapsible(False)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split, 1)

        self.model.events.message.connect(self.results.show_message)
        self.model.events.result.connect(self._add_result)
        self.viewer.layers.events.removed.connect(self._on_layer_removed)
        self.viewer.layers.events.inserted.connect(self._on_layer_inserted)
        self.browser.case_tree.itemSelectionChanged.connect(self._selection_changed)
        self.browser.refreshed.connect(self._refreshed)
        self.answer_panel.changed.connect(self._update_buttons)
        self.run_controls.changed.connect(self._update_buttons)
        self.browser.load_button.clicked.connect(self.load_selected)
        self.browser.case_tree.itemDoubleClicked.connect(lambda *_: _keys.press(self.load_button)())
        self.run_controls.score_button.clicked.connect(self.score)
        self.run_controls.ran.connect(self._run_done)
        self.agent_pane.changed.connect(self._update_buttons)
        self.artifact_buttons.changed.connect(self._update_buttons)
        self.results.itemSelectionChanged.connect(self._update_buttons)

        # napari's console says nothing when a name is bound there: look again now and then
        self._answer_timer = QTimer(self)
        self._answer_timer.setInterval(1000)
        self._answer_timer.timeout.connect(self._poll_answers)
        self._answer_timer.start()
        for button, action in ((self.artifacts_button, "artifacts"), (self.back_button, "artifacts")):
            button.setToolTip(with_key(button.toolTip(), action))
        self.shortcuts = _keys.install(
            self,
            {
                "load": _keys.press(self.load_button),
                "score": _keys.press(self.score_button),
                "artifacts": self._artifacts_key,
            },
        )
        self.setObjectName("bench_panel")
        name_children(self)
        self.refresh()

    # ---------------------------------------------------------------- the case browser, Detail, Coverage

    def refresh(self) -> None:
        self.browser.refresh()

    def _refreshed(self) -> None:
        self._update_buttons()
        self.refresh_coverage()

    def case_items(self) -> dict[str, QTreeWidgetItem]:
        return self.browser.case_items()

    def select_case(self, label: str) -> None:
        self.browser.select_case(label)

    def selected_label(self) -> str | None:
        return self.browser.selected_label()

    def set_fixtures_root(self, folder: str | Path) -> bool:
        return self.browser.set_fixtures_root(folder)

    def open_bundle(self, folder: str | Path) -> bool:
        return self.browser.open_bundle(folder)

    def _selection_changed(self) -> None:
        self.detail.show_case(self.selected_label())
        self._update_buttons()
        self.refresh_coverage()

    def coverage_skill(self) -> str | None:
        """The skill the coverage tab shows: the selected case's namespace, else the loaded case's."""
        label = self.selected_label()
        if label is not None:
            return label.split("/", 1)[0]
        loaded = self.model.loaded
        return loaded.case.namespace if loaded is not None else None

    def refresh_coverage(self) -> CoverageView | None:
        """Re-read the coverage table of :meth:`coverage_skill` (after a selection, a bundle, a score)."""
        return self.coverage_tab.show_skill(self.coverage_skill())

    @property
    def coverage_view(self) -> CoverageView | None:
        return self.coverage_tab.coverage_view

    def coverage_cells(self) -> list[list[str]]:
        return self.coverage_tab.cells()

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

        self.run_controls.start(build, f"loading {label}…", self._loaded, label)
        return True

    def _loaded(self, built: tuple[Loaded, list[Any]]) -> None:
        loaded, tuples = built
        self.model.adopt(loaded)
        self.artifact_buttons.leave()  # leave the previous case's artifact panes first
        self.compare_tab.back()
        self.layers.show_case(loaded, tuples)
        if loaded.plane is not None:
            close_on_quit(loaded.plane)
        self.model.notify("info", f"loaded {loaded.case.label}: {', '.join(loaded.session.layers)}")
        if loaded.session.workspace is not None:
            where = loaded.session.workspace / "files"
            self.model.notify("info", f"{loaded.case.label}: its files are under session.workspace ({where}), read-only")
        problem = self.model.subject_problem(self.run_controls.subject, loaded.case)
        if problem:
            self.run_controls.subject_combo.setCurrentText(INTERACTIVE)
            self.model.notify("info", f"{problem}; the subject is now {INTERACTIVE}")
        self.answer_panel.rebuild()
        self._update_buttons()

    # ---------------------------------------------------------------- subjects and Run

    @property
    def running(self) -> bool:
        return self.run_controls.running

    def add_solver(self) -> bool:
        return self.run_controls.add_solver()

    def run(self) -> bool:
        """Start the selected subject on a fresh session in a worker; False when it cannot start."""
        return self.run_controls.run()

    def stop(self) -> bool:
        """Stop the running subject (False when no subject is running)."""
        return self.run_controls.stop()

    def subject_enabled(self, spec: str) -> bool:
        """Whether ``spec`` is selectable in the subject list now."""
        return self.run_controls.subject_enabled(spec)

    def _run_done(self, job: RunJob, run: Any) -> None:
        left = self.model.finish_run(job, run)
        if left:
            self.layers.show_results(job, left)

    # ---------------------------------------------------------------- score

    def viewer_leavings(self) -> dict[str, Any]:
        """``{layer name: data}`` of the viewer's layers, artifact panes aside; a layer picked in the
        Answer tab stands for its leaving."""
        return self.layers.leavings(self.answer_panel.picked_names())

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
                self.agent_pane.agent_stopped()
        spec = self.run_controls.subject
        try:
            with self.run_controls.busy.during(f"scoring {spec}…", done=f"scored {spec}"):
                if spec == INTERACTIVE:
                    layers, console = self.viewer_leavings(), console_namespace(self.viewer)
                    return self.model.score(spec, layers=layers, console=console)
                return self.model.score(spec)
        except PanelError:
            return None
        finally:
            self._update_buttons()

    def _status(self, text: str) -> None:
        """napari's status bar says ``text`` (what the panel is doing, and for how long)."""
        self.viewer.status = text

    # ---------------------------------------------------------------- an agent over MCP

    def serve_agent(self) -> bool:
        """Serve the loaded case to an agent over MCP; False when it cannot start."""
        return self.agent_pane.serve_agent()

    def stop_agent(self) -> None:
        """Stop serving the agent without scoring it."""
        self.agent_pane.stop_agent()

    # ---------------------------------------------------------------- results and artifacts

    def _add_result(self, result: ResultRow) -> None:
        self.results.add_result(result)
        self._update_buttons()
        self.refresh_coverage()  # validation is read from the run folders, which now hold this sample

    def selected_result(self) -> ResultRow | None:
        return self.results.selected_result()

    def view_artifacts(self) -> list[Any]:
        self.compare_tab.back()
        return self.artifact_buttons.view_artifacts()

    def _artifacts_key(self) -> None:
        """Ctrl+Shift+A: Back to the case while the artifact panes are up, else View artifacts."""
        reviewing = self.artifact_buttons.reviewing
        _keys.press(self.back_button if reviewing else self.artifacts_button)()

    def back_to_the_case(self) -> bool:
        return self.artifact_buttons.back_to_the_case()

    def run_folder_path(self) -> Path | None:
        """The sitting's folder: a run folder per subject and the report (None before the first sample)."""
        return self.folder_buttons.run_folder_path()

    def open_run_folder(self) -> Path | None:
        return self.folder_buttons.open_run_folder()

    def open_report(self) -> Path | None:
        return self.folder_buttons.open_report()

    def export_results(self, path: str | Path | None = None) -> Path | None:
        return self.artifact_buttons.export_results(path)

    # ---------------------------------------------------------------- layers and buttons

    def _on_layer_removed(self, event: Any) -> None:
        self.layers.forget(event.value)
        self.model.layer_removed(event.value.name)

    def _on_layer_inserted(self, event: Any) -> None:
        self.model.layer_added(event.value.name)
        self.model.layer_arrived(event.value.metadata)

    def panel_state(self) -> PanelState:
        """What the enabling rules need to know of this widget (see :mod:`napari_imagebench._controls`)."""
        run = self.run_controls
        reads = self.model.loaded is not None and run.subject == INTERACTIVE and self.model.agent is None
        return PanelState(
            selected=self.selected_label(),
            subject=run.subject,
            busy=run.running,
            stoppable=run.stoppable,
            reviewing=self.artifact_buttons.reviewing,
            layers=self.viewer_leavings() if reads else {},
            console=console_namespace(self.viewer) if reads else None,
        )

    def _update_buttons(self) -> None:
        controls = self.model.controls(self.panel_state())
        self.browser.show_controls(controls)
        self.run_controls.show_controls(controls)
        self.load_button.setToolTip(with_key(controls.load.why, "load"))
        self.score_button.setToolTip(with_key(controls.score.why, "score"))
        self.agent_pane.show_controls(controls)
        self.artifact_buttons.show_controls(controls)
        self.folder_buttons.show_controls(controls)

    def _poll_answers(self) -> None:
        if self.model.loaded is not None and not self.running and self.run_controls.subject == INTERACTIVE:
            self._update_buttons()

    def closeEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        self.model.stop_agent()
        self._disconnect()
        super().closeEvent(event)

    def _disconnect(self) -> None:
        self.layers.close()
        for signal, slot in (
            (self.viewer.layers.events.removed, self._on_layer_removed),
            (self.viewer.layers.events.inserted, self._on_layer_inserted),
        ):
            try:
                signal.disconnect(slot)
            except (TypeError, RuntimeError, ValueError):
                pass
