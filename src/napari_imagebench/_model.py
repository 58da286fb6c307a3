"""The bench panel's model: every state and action of the panel, without Qt.
Long until the panel is split into small widgets and models (issue 26).

The widget (:mod:`napari_imagebench._widget`) is a thin shell that draws this model and calls
its methods; tests drive the same methods directly. Nothing here scores: a sample is verified
and written by :func:`imagebench.runs.runner.finish_unit`, the phase the headless runner ends a unit with,
so a panel run and ``imagebench run`` leave identical ``summary.json`` files.

One panel holds at most one loaded case. Loading builds the fixture once (as a run does) and
opens a session on its data; the fixture stays private to this model and is used only to
verify. Each Run of a non-interactive subject works a fresh session, as each sample of a run
does; the interactive subject (a person at the viewer) works the session opened at Load and
may score it as often as they like, each score a new sample. Every subject's samples go into
one run folder per subject under :func:`imagebench.runs.layout.artifact_root` (or the outcome
root the model is given).

Skill bundles (:mod:`imagebench.bundle`) opened with :meth:`BenchModel.open_bundle` add their
cases to the tree under their skill's namespace; they load, run and score exactly like built-in
cases. :meth:`BenchModel.coverage` is the coverage table ``imagebench coverage`` prints for a
skill, joined with the run folders this panel has written; the model only asks
:func:`imagebench.bundle.coverage.coverage_report` for it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from psygnal import Signal, SignalGroup

from imagebench.case.model import Case
from imagebench.fixtures.fixture import FIXTURES_ENV, Fixture, FixtureError
from napari_imagebench._answers import (
    AnswerError,
    AnswerSlot,
    answer_layer_data,
    answer_slots,
    form_value,
)
from napari_imagebench._cases import (
    CaseDetail,
    CaseRow,
    files_listing,
    pixels_from,
    rooted,
    workspace_files,
)
from napari_imagebench._coverage import CoverageView
from napari_imagebench._runs import ResultRow, RunFolder

if TYPE_CHECKING:
    from imagebench.bundle.load import Bundle
    from imagebench.case.session import Session
    from imagebench.runs.runner import Unit
    from imagebench.subjects import Subject, SubjectRun

INTERACTIVE = "You (interactive)"
#: the subject name (and run-folder name) of a person scoring their own work at the viewer
INTERACTIVE_NAME = "interactive"
AGENT_PREFIX = "mcp:"  # an agent served over MCP is recorded as subject mcp:<its client name>
BUILTIN_SUBJECTS: tuple[str, ...] = (INTERACTIVE, "reference")

Level = Literal["info", "warning", "error"]


class PanelError(Exception):
    """An action of the panel cannot go ahead; the message says why (shown as a notification)."""


@dataclass(frozen=True)
class Message:
    level: Level
    text: str


#: The columns of :meth:`BenchModel.export_results`.
RESULT_COLUMNS = (
    "subject", "case", "sample", "status", "reason", "metric", "value", "limit", "verdict", "note", "run folder",
)  # fmt: skip


def builtin_cases() -> list[Case]:
    from imagebench.cases import all_cases

    return all_cases()


@dataclass
class Loaded:
    """The case on the viewer: the person's unit, opened at Load (its fixture is private: only the
    verifier reads it), and the units other subjects ran on the same fixture until they are scored."""

    case: Case
    unit: Unit  # the interactive unit: its session is what the viewer shows
    # the last unit and SubjectRun of each non-interactive subject, until it is scored
    runs: dict[str, tuple[Unit, SubjectRun | None]] = field(default_factory=dict)
    # what this load has shown a person beyond the data: flags on their later samples
    seen: set[str] = field(default_factory=set)
    # the answers a person set in the Answer tab's forms, by leaving name
    answers: dict[str, Any] = field(default_factory=dict)

    @property
    def fixture(self) -> Fixture:
        assert self.unit.fixture is not None
        return self.unit.fixture

    @property
    def session(self) -> Session:
        assert self.unit.session is not None
        return self.unit.session

    @property
    def build_s(self) -> float:
        return self.unit.prepared.build_s

    @property
    def plane(self) -> Any:
        return self.unit.plane

    @property
    def tensors(self) -> Mapping[str, str] | None:
        return self.unit.tensors

    def release(self) -> None:
        """Remove what this load holds on disk (the read-only files copy); idempotent."""
        self.unit.release()


@dataclass
class AgentServe:
    """The loaded case served to an agent over MCP: its own unit (a fresh session on the loaded
    fixture), the tools' session, the server on a Unix socket in ``folder``, and ``folder/mcp.json``."""

    unit: Unit
    agent: Any  # imagebench.subjects.mcp.tools.AgentSession
    server: Any  # imagebench.subjects.mcp.server.SocketServer
    folder: Path
    config: Path

    @property
    def subject_name(self) -> str:
        return AGENT_PREFIX + (self.agent.client_name or "agent")


@dataclass(frozen=True)
class ServedAgent:
    """What a run folder records of an agent served from the panel: untrusted, and unconfined (it
    runs wherever its client runs), so its run says ``sandbox: none`` and ``unsealed``."""

    name: str
    sandbox_kind: str = "none"


@dataclass
class RunJob:
    """A prepared Run: ``work()`` runs the subject (in a worker thread) and returns its SubjectRun;
    setting ``stop`` (the panel's Stop) ends it, and the sample is recorded ``stopped``."""

    subject_name: str
    unit: Unit
    work: Callable[[], SubjectRun | None]
    spec: str = ""
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def session(self) -> Session:
        assert self.unit.session is not None
        return self.unit.session


# --------------------------------------------------------------------------- the model


class PanelEvents(SignalGroup):
    """What the panel's views listen to: a notice for the person, a scored sample for the results pane."""

    message = Signal(Message)
    result = Signal(ResultRow)



class BenchModel:
    """State and callbacks of the bench panel."""

    def __init__(
        self,
        *,
        cases: Callable[[], Iterable[Case]] = builtin_cases,
        fixtures_root: str | os.PathLike[str] | None = None,
        outcome_root: str | os.PathLike[str] | None = None,
        plane_provider: Callable[[], Any] | None = None,
    ) -> None:
        self._cases = cases
        env = os.environ.get(FIXTURES_ENV)
        root = fixtures_root if fixtures_root is not None else env
        self.fixtures_root: Path | None = Path(root) if root else None
        self._outcome_root = Path(outcome_root) if outcome_root is not None else None
        self._plane_provider = plane_provider
        self.subject_specs: list[str] = list(BUILTIN_SUBJECTS)
        self._subjects: dict[str, Subject] = {}
        self.loaded: Loaded | None = None
        self.results: list[ResultRow] = []
        self.messages: list[Message] = []
        self.run_folders: dict[str, RunFolder] = {}
        self._rows: list[CaseRow] | None = None
        self._shown: set[str] = set()  # layer names this panel put on the viewer for the loaded case
        self._deleted: list[str] = []  # of those (and of leaving names), deleted since Load
        self.events = PanelEvents()
        self.bundles: dict[str, Bundle] = {}  # open skill bundles by skill id
        #: the coverage view also counts every run folder under the outcome root, not only this panel's
        self.coverage_all_runs = False
        self.agent: AgentServe | None = None  # the loaded case served to an agent ("Serve to an agent")

    # ---------------------------------------------------------------- messages

    def notify(self, level: Level, text: str) -> Message:
        msg = Message(level, text)
        self.messages.append(msg)
        self.events.message.emit(msg)
        return msg

    def _fail(self, text: str, level: Level = "error") -> PanelError:
        self.notify(level, text)
        return PanelError(text)

    # ---------------------------------------------------------------- the case tree

    @property
    def outcome_root(self) -> Path:
        if self._outcome_root is not None:
            return self._outcome_root
        from imagebench.runs.layout import artifact_root

        return Path(artifact_root())

    def set_fixtures_root(self, path: str | os.PathLike[str]) -> bool:
        """Use the fixture tree at ``path`` once every file its manifest lists is there with its
        size and sha256 (:func:`imagebench.fixtures.tree.verify_tree`); a folder that is not a tree, or a
        tree that drifted from its manifest, is refused with the reasons and the previous one kept."""
        from imagebench.fixtures.tree import verify_tree

        folder = Path(path)
        keeping = f"keeping {self.fixtures_root or 'no tree'}"
        try:
            findings = verify_tree(folder)
        except FixtureError as exc:
            self.notify("error", f"not a fixture tree, {keeping}: {exc}")
            return False
        drift = [f for f in findings if f.problem != "unlisted"]
        for extra in (f for f in findings if f.problem == "unlisted"):
            self.notify("warning", f"{folder}: {extra}")
        if drift:
            listed = "; ".join(str(f) for f in drift[:3]) + (f"; and {len(drift) - 3} more" if len(drift) > 3 else "")
            self.notify("error", f"the fixture tree {folder} differs from its manifest, {keeping}: {listed}")
            return False
        self.fixtures_root = folder
        self._rows = None
        self.notify("info", f"fixture tree: {folder}")
        return True

    def refresh(self) -> list[CaseRow]:
        self._rows = None
        return self.rows()

    def rows(self) -> list[CaseRow]:
        """Every built-in case, then each fixture of the tree that no case uses (never runnable)."""
        if self._rows is not None:
            return self._rows
        from imagebench.runs.runner import TENSOR_SKIP_REASON, presents_tensor

        rows: list[CaseRow] = []
        try:
            cases = [rooted(c, self.fixtures_root) for c in self._cases()]
        except Exception as exc:
            self.notify("error", f"the case list could not be read: {type(exc).__name__}: {exc}")
            cases = []
        for case in cases:
            ok, why = case.available()
            if ok and presents_tensor(case):
                reason = self._plane_reason()
                if reason:
                    ok, why = False, f"{TENSOR_SKIP_REASON}: {reason}"
            rows.append(
                CaseRow(case.namespace, case.case_id, case.kind, case.case_class, ok, why, "built-in", case)
            )
        known = {(c.namespace, c.case_id) for c in cases}
        bundle_rows = self._bundle_rows({r.label for r in rows})
        if bundle_rows:
            from imagebench.bundle.cases import CuratedRef

            # a tree fixture a bundle case reads as its pixels is in use
            known |= {
                (r.case.fixture.skill, r.case.fixture.case_id)
                for r in bundle_rows
                if r.case is not None and isinstance(r.case.fixture, CuratedRef)
            }
        rows.extend(bundle_rows)
        rows.extend(self._tree_rows(known))
        self._rows = rows
        return rows

    def _bundle_rows(self, taken: set[str]) -> list[CaseRow]:
        """Each open bundle's cases (runnable or not), under the bundle's skill as namespace."""
        from imagebench.runs.runner import TENSOR_SKIP_REASON, presents_tensor

        out: list[CaseRow] = []
        for bundle in self.bundles.values():
            skipped = dict(bundle.skipped)
            built = {c.case_id: rooted(c, self.fixtures_root) for c in bundle.cases}

            def row(folder_id: str, kind: str, cls: str, ok: bool, why: str, case: Case | None) -> CaseRow:
                return CaseRow(bundle.skill_id, folder_id, kind, cls, ok, why, "bundle", case, bundle.path)

            for folder in bundle.folders:
                label = f"{bundle.skill_id}/{folder.case_id}"
                case = built.get(folder.case_id)
                cls = folder.spec.case_class if folder.spec is not None else "-"
                if case is None:
                    why = skipped.get(folder.case_id) or folder.problem or "it could not be built"
                    pixels = folder.spec.pixels if folder.spec is not None else None
                    kind = "-" if pixels is None else "curated" if pixels.curated is not None else "synthetic"
                    out.append(row(folder.case_id, kind, cls, False, why, None))
                    continue
                if label in taken:
                    why = f"a built-in case is also labelled {label}; rename the bundle's case folder"
                    out.append(row(folder.case_id, case.kind, cls, False, why, None))
                    continue
                try:
                    ok, why = case.available()
                except Exception as exc:  # a broken spec is a reason, not a crash of the tree
                    ok, why = False, f"checking availability failed: {type(exc).__name__}: {exc}"
                if ok and presents_tensor(case):
                    reason = self._plane_reason()
                    if reason:
                        ok, why = False, f"{TENSOR_SKIP_REASON}: {reason}"
                out.append(row(folder.case_id, case.kind, case.case_class, ok, why, case))
        return out

    def _tree_rows(self, known: set[tuple[str, str]]) -> list[CaseRow]:
        if self.fixtures_root is None:
            return []
        from imagebench.fixtures.tree import load_manifest

        try:
            manifest = load_manifest(self.fixtures_root)
        except FixtureError as exc:
            self.notify("warning", f"the fixture tree cannot be listed: {exc}")
            return []
        return [
            CaseRow(
                e.skill,
                e.case_id,
                "curated",
                "-",
                False,
                "the tree has this fixture, but no case in this suite uses it: nothing could verify a run",
                "tree",
            )
            for e in manifest.fixtures
            if (e.skill, e.case_id) not in known
        ]

    def _plane_reason(self) -> str:
        """Why no data plane can serve tensor layers here ('' when one can)."""
        if self._plane_provider is not None:
            return ""
        from imagebench.plane import flight_missing

        return flight_missing() or ""

    def row(self, label: str) -> CaseRow:
        for r in self.rows():
            if r.label == label:
                return r
        raise self._fail(f"no case labelled {label!r}")

    # ---------------------------------------------------------------- skill bundles

    def open_bundle(self, path: str | os.PathLike[str]) -> Bundle:
        """Read the skill bundle at ``path`` and add its cases to the tree.

        Its runnable cases join the tree under the skill's namespace; a case that cannot run is
        listed with the reason. Every warning :func:`imagebench.bundle.load_bundle` raises becomes
        a warning notice (never a failure). A folder that is not a bundle is refused with a notice
        and PanelError, and the panel keeps what it had. Opening a bundle of a skill that already
        has one open replaces it (re-opening the same folder re-reads it).
        """
        from imagebench.bundle.load import BundleError, load_bundle

        folder = Path(path)
        try:
            bundle = load_bundle(folder)
        except BundleError as exc:
            raise self._fail(f"not a skill bundle: {exc}") from None
        except Exception as exc:  # an unreadable folder: said, never a crash of the panel
            raise self._fail(f"the bundle {folder} could not be read: {type(exc).__name__}: {exc}") from None
        if not bundle.folders and bundle.claims.source == "none":
            raise self._fail(
                f"not a skill bundle: {folder} holds neither evals.json, evals/risk-map.md nor evals/fixtures/"
            )
        previous = self.bundles.get(bundle.skill_id)
        if previous is not None and previous.path.resolve() != folder.resolve():
            self.notify("warning", f"bundle {bundle.skill_id}: {folder} replaces the bundle at {previous.path}")
        self.bundles[bundle.skill_id] = bundle
        self._rows = None
        for warning in bundle.warnings:
            self.notify("warning", f"bundle {bundle.skill_id}: {warning}")
        self.notify(
            "info",
            f"bundle {bundle.skill_id} from {folder}: {len(bundle.cases)} runnable case(s), "
            f"{len(bundle.skipped)} cannot run, {len(bundle.warnings)} warning(s)",
        )
        return bundle

    def coverage_runs(self) -> list[Path]:
        """The run folders the coverage view reads: this panel's, then (when ``coverage_all_runs``)
        every other ``run-*`` folder holding a run.json under the outcome root."""
        runs = [f.path for f in self.run_folders.values()]
        if self.coverage_all_runs:
            root = self.outcome_root
            if root.is_dir():
                runs += [p for p in sorted(root.glob("run-*")) if (p / "run.json").is_file() and p not in runs]
        return runs

    def coverage(self, skill: str) -> CoverageView:
        """The coverage table of ``skill`` (a namespace) against :meth:`coverage_runs`.

        With a bundle open for the skill, the rows and warnings are exactly what
        ``imagebench coverage BUNDLE --runs RUN...`` prints. Without one there are no claims:
        the view says so and carries the presentation-coverage warning of the skill's cases.
        Never raises: a bundle that can no longer be read is a note.
        """
        runs = tuple(self.coverage_runs())
        bundle = self.bundles.get(skill)
        if bundle is None:
            note = f"no bundle is open for {skill}: its claims come from a skill bundle (open one with Bundle…)"
            return CoverageView(skill, None, "none", (), tuple(self._presentation_warnings(skill)), runs, note)
        from imagebench.bundle.coverage import coverage_report

        try:
            report = coverage_report(bundle.path, runs)
        except Exception as exc:
            note = f"the bundle {bundle.path} cannot be read now: {type(exc).__name__}: {exc}"
            return CoverageView(skill, None, bundle.claims.source, (), (), runs, note)
        return CoverageView(
            skill, bundle.path, report.bundle.claims.source, tuple(report.rows), tuple(report.warnings), runs
        )

    def _presentation_warnings(self, skill: str) -> list[str]:
        """The presentation-coverage warning of ``skill`` over the panel's cases of that namespace."""
        from imagebench.case.model import presentation_warnings

        try:
            from imagebench import cases as builtin

            skills = builtin.skills()
        except Exception as exc:
            return [f"the built-in skills could not be read ({type(exc).__name__}: {exc}); no presentation check"]
        cases = [r.case for r in self.rows() if r.namespace == skill and r.case is not None]
        return presentation_warnings(skills, cases)

    def detail(self, label: str) -> CaseDetail:
        r = self.row(label)
        if r.case is None:
            raise PanelError(f"{label}: {r.reason}")
        from imagebench.case.session import case_prompt

        case = r.case
        return CaseDetail(
            label=case.label,
            about=case.about,
            kind=case.kind,
            case_class=case.case_class,
            available=r.available,
            reason=r.reason,
            prompt=case_prompt(case),
            persona=case.persona,
            layers=tuple(case.layers),
            collect=tuple(case.collect),
            limits=dict(case.tolerances),
            timeout_s=case.timeout_s,
            bundle=r.bundle,
            files=files_listing(workspace_files(case)),
            has_reference=case.reference is not None,
            at_viewer=tuple(f"{slot.name}: {slot.how()}" for slot in answer_slots(case)),
            pixels_from=pixels_from(case),
            citation=getattr(case.source(), "citation", None) or "",
        )

    # ---------------------------------------------------------------- loading

    def _plane(self) -> Any:
        if self._plane_provider is not None:
            return self._plane_provider()
        from imagebench.plane import PlaneUnavailable, shared_plane

        try:
            return shared_plane()
        except PlaneUnavailable as exc:
            raise PanelError(f"no data plane can run here, so tensor layers cannot load: {exc.reason}") from None

    def loadable(self, label: str) -> Case:
        """The case ``label`` when it can be loaded here; else a notice and PanelError."""
        r = self.row(label)
        if r.case is None or not r.available:
            raise self._fail(f"{label} cannot run here: {r.reason}")
        return r.case

    def build(self, case: Case) -> Loaded:
        """Build ``case``'s fixture and open the person's unit on its data (:func:`imagebench.runs.runner.open_unit`).

        The slow half of loading (a builder, a curated read, the data plane's start and upload),
        safe to call from a worker thread: it changes no state and raises no notice; a failure is
        a PanelError whose message says why. :meth:`adopt` makes the result the loaded case.
        """
        from imagebench.runs.runner import open_unit, presents_tensor

        plane = self._plane() if presents_tensor(case) else None
        unit = open_unit(case, INTERACTIVE_NAME, plane=plane)
        if unit.failure is not None:
            unit.release()
            status, reason = unit.failure
            raise PanelError(f"{case.label}: {status}: {reason}" if unit.fixture is None else f"{case.label}: {reason}")
        return Loaded(case=case, unit=unit)

    def adopt(self, loaded: Loaded) -> Loaded:
        """Make ``loaded`` (from :meth:`build`) the loaded case, forgetting the previous one."""
        if self.loaded is not loaded:
            self.stop_agent()  # an agent works the case that was loaded when it was served
        if self.loaded is not None and self.loaded is not loaded:
            self.loaded.release()
        self.loaded = loaded
        loaded.unit.started = time.perf_counter()  # the person's turn starts when the layers are shown
        self._shown = set()
        self._deleted = []
        return loaded

    def load(self, label: str) -> Loaded:
        """:meth:`loadable`, :meth:`build` and :meth:`adopt` in one call (a failure is also a notice)."""
        case = self.loadable(label)
        try:
            loaded = self.build(case)
        except PanelError as exc:
            raise self._fail(str(exc)) from None
        return self.adopt(loaded)

    def _need_loaded(self) -> Loaded:
        if self.loaded is None:
            raise self._fail("load a case first", "warning")
        return self.loaded

    # ---------------------------------------------------------------- layers on the viewer

    def layer_shown(self, name: str) -> None:
        """The panel put a layer named ``name`` on the viewer for the loaded case."""
        self._shown.add(name)
        if name in self._deleted:
            self._deleted.remove(name)

    def layer_removed(self, name: str) -> None:
        """A layer left the viewer: remembered when the panel showed it or a leaving has its name."""
        if self.loaded is None:
            return
        leaving = name in {c.name for c in self.loaded.case.collect}
        if (name in self._shown or leaving) and name not in self._deleted:
            self._deleted.append(name)

    def layer_added(self, name: str) -> None:
        if name in self._deleted:
            self._deleted.remove(name)

    # ---------------------------------------------------------------- subjects

    def add_subject(self, spec: str) -> str:
        """Add a solver that works in this process (``python:package.module:function``, or any
        registered kind that does) to the subject list; returns its spec. A subject that works in
        a child process (a ``command:``) is refused: ``imagebench run`` confines it."""
        from imagebench.subjects import SubjectError, parse_subject, runs_out_of_process

        spec = spec.strip()
        if spec in self.subject_specs:
            return spec
        try:
            subject = parse_subject(spec)
        except SubjectError as exc:
            raise self._fail(str(exc)) from None
        if runs_out_of_process(subject):
            raise self._fail(
                f"the panel runs in-process solvers only (python:package.module:function), got {spec!r}; "
                "run it with imagebench run, which confines it"
            )
        self._subjects[spec] = subject
        self.subject_specs.append(spec)
        self.notify("info", f"subject added: {spec} (results under {subject.name}/)")
        return spec

    def subject(self, spec: str) -> Subject:
        from imagebench.subjects import parse_subject

        if spec == INTERACTIVE:
            raise PanelError("the interactive subject is you: work on the viewer, then Score")
        if spec not in self.subject_specs:
            raise self._fail(f"unknown subject {spec!r}")
        if spec not in self._subjects:
            self._subjects[spec] = parse_subject(spec)
        return self._subjects[spec]

    def subject_name(self, spec: str) -> str:
        return INTERACTIVE_NAME if spec == INTERACTIVE else self.subject(spec).name

    def subject_problem(self, spec: str, case: Case | None) -> str:
        """Why ``spec`` cannot work ``case`` ('' when it can): a case without a reference solution
        (every bundle case) has nothing for the ``reference`` subject to run."""
        if case is None or spec == INTERACTIVE or spec not in self.subject_specs:
            return ""
        why = self.subject(spec).cannot_work(case)
        if why is None:
            return ""
        what = "a bundle case" if case.meta.get("bundle") is not None else "this case"
        return f"{why} ({what}): work it yourself as {INTERACTIVE} or run a python: solver"

    # ---------------------------------------------------------------- run folders

    def export_results(self, path: Path) -> Path:
        """Every result of this session as CSV (one row per metric; a sample without metrics gets
        one row), written atomically; PanelError naming the file when it cannot be written."""
        import csv
        import io

        from imagebench.records import atomic_write_text

        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(RESULT_COLUMNS)
        for r in self.results:
            base = [r.subject, r.label, "" if r.sample is None else r.sample, r.status, r.reason]
            cells = r.metric_cells() or [("", "", "", "", "")]
            for name, value, limit, verdict, why in cells:
                writer.writerow([*base, name, value, limit, verdict, why, str(r.run_dir)])
        try:
            atomic_write_text(path, out.getvalue())
        except OSError as exc:
            raise PanelError(f"{path}: the results could not be written ({exc.strerror or exc})") from None
        return path

    def _run_folder(self, subject_name: str, subject: Any = None) -> RunFolder:
        folder = self.run_folders.get(subject_name)
        if folder is None:
            folder = self.run_folders[subject_name] = RunFolder.create(self.outcome_root, subject_name, subject)
        return folder

    # ---------------------------------------------------------------- run

    def prepare_run(self, spec: str) -> RunJob:
        """Open a unit of ``spec`` on the loaded fixture (:func:`imagebench.runs.runner.open_unit`);
        ``work()`` is its turn (:func:`imagebench.runs.runner.work_unit`)."""
        from imagebench.runs.runner import open_unit, work_unit

        loaded = self._need_loaded()
        if spec == INTERACTIVE:
            raise self._fail("you are the interactive subject: work on the viewer, then press Score", "warning")
        problem = self.subject_problem(spec, loaded.case)
        if problem:
            raise self._fail(problem, "warning")
        subject = self.subject(spec)
        case = loaded.case
        folder = self._run_folder(subject.name, subject)
        unit = open_unit(
            case, subject, folder.next_sample(case.label), folder.path, fixture=loaded.unit.prepared, plane=loaded.plane
        )
        if unit.failure is not None:
            unit.release()
            raise self._fail(f"{case.label}: {unit.failure[1]}")
        stop = threading.Event()
        return RunJob(subject.name, unit, lambda: work_unit(unit, subject, stop=stop), spec=spec, stop=stop)

    def finish_run(self, job: RunJob, run: SubjectRun | None) -> dict[str, Any]:
        """Record how ``job`` ended; return what the subject bound of the case's leavings."""
        loaded = self._need_loaded()
        loaded.runs[job.subject_name] = (job.unit, run)
        if run is None:
            self.notify("error", f"{job.subject_name}: the unit could not be opened")
            return {}
        if run.stopped:  # no result to look at: the sample is recorded as stopped at once
            self.notify("warning", f"{job.subject_name}: stopped after {run.seconds:.1f} s")
            self.score(job.spec)
            return {}
        if run.harness_error:
            self.notify("error", f"{job.subject_name}: the harness failed: {run.harness_error}")
        elif run.timed_out:
            self.notify("warning", f"{job.subject_name}: {run.timeout_reason}")
        elif run.error:
            self.notify("warning", f"{job.subject_name} raised {run.error}")
        left = {c.name: job.session.namespace[c.name] for c in loaded.case.collect if c.name in job.session.namespace}
        if left:
            loaded.seen.add(f"saw-results-{job.subject_name}")
        missing = [c.name for c in loaded.case.collect if c.name not in left and not c.recorded]
        tail = f"; left nothing for {', '.join(missing)}" if missing else ""
        self.notify("info", f"{job.subject_name} ran in {run.seconds:.2f} s; left {', '.join(left) or 'nothing'}{tail}")
        return left

    def artifacts_shown(self, result: ResultRow) -> None:
        """A sample's artifacts were put on the viewer; for the loaded case they may show its truth."""
        if self.loaded is not None and result.label == self.loaded.case.label:
            self.loaded.seen.add("saw-artifacts")

    # ---------------------------------------------------------------- score

    def interactive_lookup(
        self, layers: Mapping[str, Any], console: Mapping[str, Any] | None
    ) -> Callable[[str], Any]:
        """Where a person's leavings are found: an answer set in the Answer tab's form, a viewer
        layer of that name (or the one picked for it), then the console namespace, then the
        panel's own session namespace."""
        loaded = self._need_loaded()
        deleted = set(self._deleted)

        def lookup(name: str) -> Any:
            if name in loaded.answers:
                return loaded.answers[name]
            if name in layers:
                return layers[name]
            if console is not None and name in console:
                return console[name]
            try:
                return loaded.session.lookup(name)
            except KeyError:
                if name in deleted:
                    raise KeyError(f"the layer {name!r} was deleted before scoring") from None
                where = "no layer, no console name and no panel binding" if console is not None else (
                    "no layer and no panel binding (the console is not open)"
                )
                raise KeyError(f"you left nothing named {name!r}: {where}") from None

        return lookup

    # ---------------------------------------------------------------- answers (the Answer tab)

    def answer_slots(self) -> list[AnswerSlot]:
        """How a person gives each leaving of the loaded case (:mod:`napari_imagebench._answers`)."""
        return answer_slots(self._need_loaded().case)

    def _slot(self, name: str) -> AnswerSlot:
        slot = next((s for s in self.answer_slots() if s.name == name), None)
        if slot is None:
            raise self._fail(f"{self._need_loaded().case.label} asks for no leaving named {name!r}")
        return slot

    def set_answer(self, name: str, values: Mapping[str, Any]) -> Any:
        """Set the form answer ``name`` from ``values`` ({field: value}); PanelError names a bad field."""
        slot = self._slot(name)
        try:
            value = form_value(slot, values)
        except AnswerError as exc:
            raise self._fail(str(exc), "warning") from None
        self._need_loaded().answers[name] = value
        self.notify("info", f"answer set: {name} = {value}")
        return value

    def answer_layer(self, name: str) -> tuple[Any, dict[str, Any], str]:
        """An empty layer for the layer slot ``name``, shaped, typed and scaled like its data layer."""
        loaded = self._need_loaded()
        data = {n: sl.data for n, sl in loaded.session.layers.items()}
        try:
            return answer_layer_data(self._slot(name), loaded.case.layers, data)
        except AnswerError as exc:
            raise self._fail(str(exc)) from None

    def missing_answers(self, layers: Mapping[str, Any], console: Mapping[str, Any] | None) -> dict[str, str]:
        """``{leaving: why it is missing}`` for each leaving a person has not given yet (Score waits
        for every one), in the case's order."""
        loaded = self._need_loaded()
        lookup = self.interactive_lookup(layers, console)
        missing: dict[str, str] = {}
        for c in loaded.case.collect:
            if c.recorded:  # the harness keeps it (a trigger case's trace): nobody gives it
                continue
            try:
                lookup(c.name)
            except KeyError as exc:
                missing[c.name] = str(exc.args[0]) if exc.args else "not given"
        return missing

    def score(
        self,
        spec: str,
        *,
        layers: Mapping[str, Any] | None = None,
        console: Mapping[str, Any] | None = None,
    ) -> ResultRow:
        """Finish the unit of ``spec`` (:func:`imagebench.runs.runner.finish_unit`): collect its leavings,
        verify them and write the sample, as a headless run does.

        For the interactive subject, ``layers`` (``{name: data}`` of the viewer's layers) and
        ``console`` (the console's namespace, None when it is not open) are searched first.
        """
        from imagebench.runs.runner import finish_unit

        loaded = self._need_loaded()
        case = loaded.case
        flags: list[str] = []
        lookup: Callable[[str], Any] | None = None
        run: SubjectRun | None = None
        if spec == INTERACTIVE:
            name = INTERACTIVE_NAME
            unit = loaded.unit
            missing = self.missing_answers(layers or {}, console)
            if missing:  # a sample is written only for a complete answer
                how = {s.name: s.how() for s in self.answer_slots()}
                todo = "; ".join(f"{n}: {why}; {how.get(n, 'bind it in the console')}" for n, why in missing.items())
                raise self._fail(f"leave {', '.join(missing)} first ({todo})", "warning")
            lookup = self.interactive_lookup(layers or {}, console)
            # A person who has seen another subject's answer or the artifacts (which can show the
            # truth) is no longer working blind: the sample says so.
            flags = sorted(loaded.seen)
            if flags:
                self.notify("warning", f"this sample is flagged {', '.join(flags)}: since Load you have seen more than the data")
        else:
            name = self.subject_name(spec)
            pending = loaded.runs.pop(name, None)
            if pending is None:
                raise self._fail(f"run {spec} on {case.label} first: each Run is one sample to score", "warning")
            unit, run = pending
        leavings = {c.name for c in case.collect}
        for deleted in self._deleted:
            if spec != INTERACTIVE:
                effect = f"; {name} is scored from its session, so the score does not depend on it"
            elif deleted in leavings:
                effect = "; unless the console or the panel holds that name, the leaving is missing"
            else:
                effect = ""
            self.notify("warning", f"layer {deleted!r} was deleted before scoring{effect}")
        folder = self._run_folder(name)
        if spec == INTERACTIVE:  # each Score of the person's work is a new sample
            unit.run_dir, unit.sample = folder.path, folder.next_sample(case.label)
        summary = finish_unit(unit, run, lookup=lookup, flags=flags)
        done = folder.add(case, summary)
        for problem in folder.problems:
            self.notify("warning", f"{folder.path.name}: {problem}")
        need = int(case.meta.get("min_samples", 1))
        if len(done) < need:  # a bundle's rerun case: judged over several samples of one subject
            self.notify(
                "info",
                f"{case.label} is judged over at least {need} samples of one subject; {len(done)} scored so far "
                "(until then the case fails its consistency check): Run and Score it again",
            )
        checks = tuple(str(c) for c in case.meta.get("checks") or ())
        result = ResultRow.of(summary, folder.path, unit.sample_dir, checks=checks)
        self.results.append(result)
        self.events.result.emit(result)
        self._deleted = []  # each deletion is reported with the sample it affected, once
        return result

    # ---------------------------------------------------------------- an agent over MCP

    def serve_agent(
        self, *, on_layer: Callable[[Any], None] | None = None, on_call: Callable[[Any], None] | None = None
    ) -> AgentServe:
        """Serve the loaded case to an agent: the same tools as ``imagebench mcp serve`` and
        ``run --subject-mcp`` (:mod:`imagebench.subjects.mcp`), on a fresh session of the loaded fixture,
        on a Unix socket in a new folder that also holds ``mcp.json`` (how a client reaches it).
        ``on_layer`` hears of each layer the agent adds or updates, ``on_call`` of each tool call
        (both from the server's thread). :meth:`score_agent` scores what it left."""
        import tempfile

        from imagebench.runs.runner import open_unit
        from imagebench.sandbox.process import remove_tree
        from imagebench.subjects.mcp.server import CONFIG_NAME, McpFolder, SocketServer, config_text
        from imagebench.subjects.mcp.tools import AgentSession, CaseView

        loaded = self._need_loaded()
        if self.agent is not None:
            raise self._fail(f"already serving {loaded.case.label} to an agent: Score or stop it first", "warning")
        unit = open_unit(loaded.case, AGENT_PREFIX + "agent", fixture=loaded.unit.prepared, plane=loaded.plane)
        if unit.failure is not None or unit.session is None:
            unit.release()
            raise self._fail(f"{loaded.case.label}: {unit.failure[1] if unit.failure else 'no session'}")
        unit.confinement = "none"  # the agent is a program of its own, outside any sandbox
        folder = Path(tempfile.mkdtemp(prefix="imagebench-agent-"))
        try:
            mcp = McpFolder(folder)  # the socket, the bridge and npy reads: the harness's, beside the agent's files
            agent = AgentSession(
                CaseView.of(loaded.case), unit.session, workspace=folder, reads=mcp, route="viewer",
                on_layer=on_layer, on_call=on_call,
            )  # fmt: skip
            server = SocketServer(agent, mcp.socket_path)
            (folder / CONFIG_NAME).write_text(config_text(str(mcp.path)), encoding="utf-8")
        except Exception as exc:
            unit.release()
            remove_tree(folder)
            raise self._fail(f"the MCP server could not start: {type(exc).__name__}: {exc}") from None
        self.agent = AgentServe(unit, agent, server, folder, folder / "mcp.json")
        self.notify("info", f"serving {loaded.case.label} to an agent: point its MCP client at {self.agent.config}")
        return self.agent

    def stop_agent(self) -> None:
        """Stop serving (nothing is scored); the agent's folder goes."""
        from imagebench.sandbox.process import remove_tree

        serve, self.agent = self.agent, None
        if serve is None:
            return
        serve.server.close()
        serve.agent.reads.remove()
        serve.unit.release()
        remove_tree(serve.folder)

    def score_agent(self) -> ResultRow:
        """Stop serving and score what the agent left through the tools (:func:`imagebench.runs.runner.finish_unit`),
        recorded as subject ``mcp:<client name>``; its transcript goes into the sample folder."""
        from imagebench.runs.runner import finish_unit
        from imagebench.sandbox.process import remove_tree
        from imagebench.subjects import SubjectRun
        from imagebench.subjects.mcp.host import transcript_note, write_transcript

        serve = self.agent
        if serve is None:
            raise self._fail("no agent is being served", "warning")
        loaded = self._need_loaded()
        self.agent = None
        serve.server.close()
        unit, agent, case = serve.unit, serve.agent, loaded.case
        name = serve.subject_name
        unit.subject_name = name
        folder = self._run_folder(name, ServedAgent(name))
        unit.run_dir, unit.sample = folder.path, folder.next_sample(case.label)
        assert unit.session is not None
        agent.apply_to(unit.session)
        unit.session.notes["mcp"] = transcript_note(agent)
        try:
            write_transcript(agent, unit.sample_dir)
        except OSError as exc:
            self.notify("warning", f"the transcript could not be written: {exc}")
        summary = finish_unit(unit, SubjectRun(seconds=time.perf_counter() - unit.started))
        agent.reads.remove()
        remove_tree(serve.folder)
        folder.add(case, summary)
        for problem in folder.problems:
            self.notify("warning", f"{folder.path.name}: {problem}")
        result = ResultRow.of(summary, folder.path, unit.sample_dir, checks=tuple(str(c) for c in case.meta.get("checks") or ()))
        self.results.append(result)
        self.events.result.emit(result)
        return result

    # ---------------------------------------------------------------- teardown

    def close(self) -> None:
        """Forget the loaded case (and its fixture, and its copy of a bundle case's files)."""
        self.stop_agent()
        if self.loaded is not None:
            self.loaded.release()
        self.loaded = None
        self._shown = set()
        self._deleted = []
