"""The bench panel's model: a façade composing one Qt-free model per concern of the panel.

The widget (:mod:`napari_imagebench._widget`) and its small widgets draw these models and call
their methods; tests drive the same methods directly. Each concern has its own model, and
:class:`BenchModel` holds them, wires them to one another and keeps the panel's API in one place:

============  =========================================  ==============================
attribute     model                                      concern
============  =========================================  ==============================
``browser``   :class:`~._browser_model.BrowserModel`     the fixture tree, bundles, case rows, Detail
``claims``    :class:`~._coverage.CoverageModel`         the Coverage tab
``workbench`` :class:`~._workbench_model.WorkbenchModel` the loaded case and its layers on the viewer
``subjects``  :class:`~._subjects_model.SubjectsModel`   the subject list
``runs``      :class:`~._subjects_model.RunModel`        a Run of a subject on a fresh session
``answering`` :class:`~._answer_model.AnswerModel`       the Answer tab; where a person's leavings are found
``scoring``   :class:`~._score_model.ScoreModel`         Score: a sample, as ``imagebench run`` writes it
``ledger``    :class:`~._results_model.ResultsModel`     the sitting and its run folders, the results, their CSV
``folders``   :class:`~._folder_model.FolderModel`       the sitting's folder and report, as the panel opens them
``serving``   :class:`~._agent_model.AgentModel`         the loaded case served to an agent over MCP
============  =========================================  ==============================

:meth:`BenchModel.controls` says which buttons are enabled and why (:mod:`._controls`).
What crosses concerns happens here: loading another case (or closing) stops a served agent first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_imagebench._agent_model import AgentModel, AgentServe, ServedAgent
from napari_imagebench._answer_model import AnswerModel
from napari_imagebench._base import (
    AGENT_PREFIX,
    BUILTIN_SUBJECTS,
    INTERACTIVE,
    INTERACTIVE_NAME,
    Level,
    Message,
    Notices,
    PanelError,
    PanelEvents,
)
from napari_imagebench._browser_model import BrowserModel, builtin_cases
from napari_imagebench._controls import Controls, PanelState, controls
from napari_imagebench._coverage import CoverageModel, CoverageView
from napari_imagebench._folder_model import FolderModel
from napari_imagebench._results_model import RESULT_COLUMNS, ResultsModel
from napari_imagebench._score_model import ScoreModel
from napari_imagebench._subjects_model import RunJob, RunModel, SubjectsModel
from napari_imagebench._workbench_model import Loaded, WorkbenchModel

if TYPE_CHECKING:
    from imagebench.bundle.load import Bundle
    from imagebench.case.model import Case
    from imagebench.subjects import Subject, SubjectRun
    from napari_imagebench._answers import AnswerSlot
    from napari_imagebench._cases import CaseDetail, CaseRow
    from napari_imagebench._explain import Explanation
    from napari_imagebench._runs import ResultRow, RunFolder

__all__ = [
    "AGENT_PREFIX", "BUILTIN_SUBJECTS", "INTERACTIVE", "INTERACTIVE_NAME", "RESULT_COLUMNS", "AgentServe",
    "BenchModel", "Level", "Loaded", "Message", "PanelError", "PanelEvents", "RunJob", "ServedAgent", "builtin_cases",
]  # fmt: skip


class BenchModel:
    """State and callbacks of the bench panel, one concern model each."""

    def __init__(
        self,
        *,
        cases: Callable[[], Iterable[Case]] | None = None,  # None: the catalog (imagebench.catalog)
        fixtures_root: str | os.PathLike[str] | None = None,
        outcome_root: str | os.PathLike[str] | None = None,
        plane_provider: Callable[[], Any] | None = None,
    ) -> None:
        self.notices = Notices()
        self.events: PanelEvents = self.notices.events
        self.messages: list[Message] = self.notices.messages
        self.browser = BrowserModel(self.notices, cases=cases, fixtures_root=fixtures_root, plane_provider=plane_provider)
        self.ledger = ResultsModel(self.notices, outcome_root)
        self.claims = CoverageModel(self.browser, self.ledger)
        self.workbench = WorkbenchModel(self.notices, self.browser, plane_provider=plane_provider)
        self.subjects = SubjectsModel(self.notices)
        self.answering = AnswerModel(self.notices, self.workbench)
        self.scoring = ScoreModel(self.notices, self.workbench, self.subjects, self.answering, self.ledger)
        self.runs = RunModel(self.notices, self.workbench, self.subjects, self.ledger, self.scoring.score)
        self.serving = AgentModel(self.notices, self.workbench, self.ledger)
        self.folders = FolderModel(self.notices, self.ledger, self.workbench)

    # ---------------------------------------------------------------- state, as the panel reads it

    @property
    def loaded(self) -> Loaded | None:
        return self.workbench.loaded

    @property
    def agent(self) -> AgentServe | None:
        return self.serving.agent

    @property
    def results(self) -> list[ResultRow]:
        return self.ledger.results

    @property
    def run_folders(self) -> dict[str, RunFolder]:
        return self.ledger.run_folders

    @property
    def outcome_root(self) -> Path:
        return self.ledger.outcome_root

    @property
    def fixtures_root(self) -> Path | None:
        return self.browser.fixtures_root

    @property
    def bundles(self) -> dict[str, Bundle]:
        return self.browser.bundles

    @property
    def subject_specs(self) -> list[str]:
        return self.subjects.specs

    @property
    def coverage_all_runs(self) -> bool:
        """The coverage view also counts every run folder under the outcome root, not only this panel's."""
        return self.claims.all_runs

    @coverage_all_runs.setter
    def coverage_all_runs(self, value: bool) -> None:
        self.claims.all_runs = bool(value)

    def notify(self, level: Level, text: str) -> Message:
        return self.notices.notify(level, text)

    def controls(self, state: PanelState) -> Controls:
        """Which buttons are enabled now, and why (:func:`napari_imagebench._controls.controls`)."""
        return controls(self, state)

    # ---------------------------------------------------------------- the case browser and coverage

    def set_fixtures_root(self, path: str | os.PathLike[str]) -> bool:
        return self.browser.set_fixtures_root(path)

    def refresh(self) -> list[CaseRow]:
        return self.browser.refresh()

    def rows(self) -> list[CaseRow]:
        return self.browser.rows()

    def filtered(self, text: str) -> list[CaseRow]:
        """The rows the case filter ``text`` keeps (:func:`._browser_model.row_matches`)."""
        return self.browser.filtered(text)

    def row(self, label: str) -> CaseRow:
        return self.browser.row(label)

    def detail(self, label: str) -> CaseDetail:
        return self.browser.detail(label)

    def open_bundle(self, path: str | os.PathLike[str]) -> Bundle:
        return self.browser.open_bundle(path)

    def coverage_runs(self) -> list[Path]:
        return self.claims.coverage_runs()

    def coverage(self, skill: str) -> CoverageView:
        return self.claims.coverage(skill)

    # ---------------------------------------------------------------- the loaded case

    def loadable(self, label: str) -> Case:
        return self.workbench.loadable(label)

    def build(self, case: Case) -> Loaded:
        return self.workbench.build(case)

    def adopt(self, loaded: Loaded) -> Loaded:
        """Make ``loaded`` the loaded case; an agent served the previous one is stopped first."""
        if self.workbench.loaded is not loaded:
            self.serving.stop()  # an agent works the case that was loaded when it was served
        return self.workbench.adopt(loaded)

    def load(self, label: str) -> Loaded:
        """:meth:`loadable`, :meth:`build` and :meth:`adopt` in one call (a failure is also a notice)."""
        case = self.loadable(label)
        try:
            loaded = self.build(case)
        except PanelError as exc:
            raise self.notices.fail(str(exc)) from None
        return self.adopt(loaded)

    def layer_shown(self, name: str) -> None:
        self.workbench.layer_shown(name)

    def layer_removed(self, name: str) -> None:
        self.workbench.layer_removed(name)

    def layer_added(self, name: str) -> None:
        self.workbench.layer_added(name)

    def layer_arrived(self, metadata: Mapping[str, Any]) -> None:
        """A layer arrived on the viewer: a pane of a run folder or a case folder's data (the
        reader) may show the loaded case's truth, and flags its next samples."""
        flag = self.workbench.layer_arrived(metadata)
        if flag is not None:
            label = self.workbench.need_loaded().case.label
            self.notify("warning", f"the reader showed what may be {label}'s truth: your next samples of it are flagged {flag}")

    def artifacts_shown(self, result: ResultRow) -> None:
        self.workbench.artifacts_shown(result)

    def close(self) -> None:
        """Forget the loaded case (and its fixture, and its copy of a bundle case's files)."""
        self.serving.stop()
        self.workbench.close()

    # ---------------------------------------------------------------- subjects and Run

    def add_subject(self, spec: str) -> str:
        return self.subjects.add_subject(spec)

    def subject(self, spec: str) -> Subject:
        return self.subjects.subject(spec)

    def subject_name(self, spec: str) -> str:
        return self.subjects.subject_name(spec)

    def subject_problem(self, spec: str, case: Case | None) -> str:
        return self.subjects.subject_problem(spec, case)

    def prepare_run(self, spec: str) -> RunJob:
        return self.runs.prepare_run(spec)

    def finish_run(self, job: RunJob, run: SubjectRun | None) -> dict[str, Any]:
        return self.runs.finish_run(job, run)

    # ---------------------------------------------------------------- answers and Score

    def answer_slots(self) -> list[AnswerSlot]:
        return self.answering.answer_slots()

    def set_answer(self, name: str, values: Mapping[str, Any]) -> Any:
        return self.answering.set_answer(name, values)

    def answer_layer(self, name: str) -> tuple[Any, dict[str, Any], str]:
        return self.answering.answer_layer(name)

    def interactive_lookup(self, layers: Mapping[str, Any], console: Mapping[str, Any] | None) -> Callable[[str], Any]:
        return self.answering.interactive_lookup(layers, console)

    def missing_answers(self, layers: Mapping[str, Any], console: Mapping[str, Any] | None) -> dict[str, str]:
        return self.answering.missing_answers(layers, console)

    def score(
        self, spec: str, *, layers: Mapping[str, Any] | None = None, console: Mapping[str, Any] | None = None
    ) -> ResultRow:
        return self.scoring.score(spec, layers=layers, console=console)

    # ---------------------------------------------------------------- results

    def export_results(self, path: Path) -> Path:
        return self.ledger.export_results(path)

    def explanation(self, result: ResultRow) -> Explanation:
        return self.ledger.explanation(result)

    def truth_shown(self, result: ResultRow) -> str:
        return self.scoring.truth_shown(result)

    # ---------------------------------------------------------------- an agent over MCP

    def serve_agent(
        self,
        *,
        on_layer: Callable[[Any], None] | None = None,
        on_call: Callable[[Any], None] | None = None,
        display: Any = None,
    ) -> AgentServe:
        return self.serving.serve(on_layer=on_layer, on_call=on_call, display=display)

    def stop_agent(self) -> None:
        self.serving.stop()

    def score_agent(self) -> ResultRow:
        return self.serving.score()
