"""The subjects' and Run's model: who can work the loaded case (you, ``reference``, a ``python:``
solver or a ``command:`` added here) and a Run of one of them on a fresh session. Qt-free.

Each Run of a non-interactive subject works a fresh session of the loaded fixture, as each
sample of a run does; :meth:`RunModel.prepare_run` opens it and ``job.work()`` (in a worker
thread) is its turn (:func:`imagebench.runs.runner.work_unit`).

A ``command:`` is confined as ``imagebench run --subject command:...`` confines it, because it is
run by the same phases: bound by :func:`imagebench.runs.runner.work_unit`, it runs in the
bubblewrap sandbox with the default policy (no network, the default limits, its run's and
sitting's folders hidden), and where bubblewrap cannot start it is refused with the command
line's own message, never run unconfined. An untrusted subject is sealed as ``imagebench run``
seals it by default (:func:`imagebench.runs.sealed.default_seal`): each of its samples of a
procedural case is built, in the worker, from a seed derived from a secret kept in the state
folder, so it works a fixture of its own, never the one on the viewer, whose seed is public.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from napari_imagebench._base import BUILTIN_SUBJECTS, INTERACTIVE, INTERACTIVE_NAME, Notices, PanelError

COMMAND_PREFIX = "command:"
#: the subject list's entry that asks for a command line (not a subject itself)
COMMAND_ENTRY = "Command…"

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.case.session import Session
    from imagebench.runs.runner import Unit
    from imagebench.subjects import Subject, SubjectRun
    from napari_imagebench._results_model import ResultsModel
    from napari_imagebench._workbench_model import WorkbenchModel


class SubjectsModel:
    """The subject list: the built-in subjects, then each solver added."""

    def __init__(self, notices: Notices) -> None:
        self.notices = notices
        self.specs: list[str] = list(BUILTIN_SUBJECTS)
        self._subjects: dict[str, Subject] = {}

    def add_subject(self, spec: str) -> str:
        """Add a subject (``python:package.module:function``, ``command:<command line>``, or any
        registered kind) to the subject list; returns its spec. A ``command:`` is parsed as the
        command line parses it (the default sandbox policy): where bubblewrap cannot start it is
        refused with that message."""
        from imagebench.subjects import SubjectError, confinement_of, is_trusted, parse_subject

        spec = spec.strip()
        if spec in self.specs:
            return spec
        try:
            subject = parse_subject(spec)
        except SubjectError as exc:
            raise self.notices.fail(str(exc)) from None
        self._subjects[spec] = subject
        self.specs.append(spec)
        held = {"bubblewrap": "in the bubblewrap sandbox", "in-process": "in this process"}.get(
            confinement_of(subject), "unconfined"
        )
        sealed = "" if is_trusted(subject) else ", on sealed fixtures of its own, as imagebench run runs it"
        self.notices.notify("info", f"subject added: {spec} (results under {subject.name}/; it runs {held}{sealed})")
        return spec

    def add_command(self, line: str) -> str:
        """Add ``command:<line>`` (see :meth:`add_subject`); a line that already names its kind is taken as it is."""
        line = line.strip()
        if not line:
            raise self.notices.fail("type a command line first (it runs as imagebench run --subject command:… runs it)", "warning")
        return self.add_subject(line if line.startswith(COMMAND_PREFIX) else COMMAND_PREFIX + line)

    def subject(self, spec: str) -> Subject:
        from imagebench.subjects import parse_subject

        if spec == INTERACTIVE:
            raise PanelError("the interactive subject is you: work on the viewer, then Score")
        if spec not in self.specs:
            raise self.notices.fail(f"unknown subject {spec!r}")
        if spec not in self._subjects:
            self._subjects[spec] = parse_subject(spec)
        return self._subjects[spec]

    def subject_name(self, spec: str) -> str:
        return INTERACTIVE_NAME if spec == INTERACTIVE else self.subject(spec).name

    def subject_problem(self, spec: str, case: Case | None) -> str:
        """Why ``spec`` cannot work ``case`` ('' when it can): a case without a reference solution
        (every bundle case) has nothing for the ``reference`` subject to run."""
        if case is None or spec == INTERACTIVE or spec not in self.specs:
            return ""
        why = self.subject(spec).cannot_work(case)
        if why is None:
            return ""
        what = "a bundle case" if case.meta.get("bundle") is not None else "this case"
        return f"{why} ({what}): work it yourself as {INTERACTIVE} or run a python: solver"


@dataclass
class RunJob:
    """A prepared Run: ``work()`` runs the subject (in a worker thread) and returns its SubjectRun;
    setting ``stop`` (the panel's Stop) ends it, and the sample is recorded ``stopped``.
    ``sealed``: the subject works a sealed fixture of its own, opened by ``work()`` (``unit`` is
    None until then), so nothing it leaves belongs on the viewer's fixture."""

    subject_name: str
    unit: Unit | None
    work: Callable[[], SubjectRun | None]
    spec: str = ""
    stop: threading.Event = field(default_factory=threading.Event)
    sealed: bool = False

    @property
    def session(self) -> Session:
        assert self.unit is not None and self.unit.session is not None
        return self.unit.session


class RunModel:
    """Runs of the non-interactive subjects on the loaded case; ``score(spec)`` records a stopped one."""

    def __init__(
        self,
        notices: Notices,
        workbench: WorkbenchModel,
        subjects: SubjectsModel,
        ledger: ResultsModel,
        score: Callable[[str], Any],
    ) -> None:
        self.notices, self.workbench, self.subjects, self.ledger = notices, workbench, subjects, ledger
        self.score = score

    def prepare_run(self, spec: str) -> RunJob:
        """Open a unit of ``spec`` on the loaded fixture (:func:`imagebench.runs.runner.open_unit`);
        ``work()`` is its turn (:func:`imagebench.runs.runner.work_unit`). An untrusted subject's
        unit is opened by ``work()`` on a sealed fixture of its own (see the module)."""
        from imagebench.runs.runner import open_unit, work_unit
        from imagebench.subjects import is_trusted

        loaded = self.workbench.need_loaded()
        if spec == INTERACTIVE:
            raise self.notices.fail("you are the interactive subject: work on the viewer, then press Score", "warning")
        problem = self.subjects.subject_problem(spec, loaded.case)
        if problem:
            raise self.notices.fail(problem, "warning")
        subject = self.subjects.subject(spec)
        case = loaded.case
        stop = threading.Event()
        if not is_trusted(subject):
            return self._sealed_job(spec, subject, stop)
        folder = self.ledger.run_folder(subject.name, subject)
        unit = open_unit(
            case, subject, folder.next_sample(case.label), folder.path, fixture=loaded.unit.prepared, plane=loaded.plane
        )
        if unit.failure is not None:
            unit.release()
            raise self.notices.fail(f"{case.label}: {unit.failure[1]}")
        return RunJob(subject.name, unit, lambda: work_unit(unit, subject, stop=stop), spec=spec, stop=stop)

    def _sealed_job(self, spec: str, subject: Subject, stop: threading.Event) -> RunJob:
        """A Run of an untrusted subject, sealed by default as ``imagebench run`` seals it: the seed
        of this sample is derived from its run's secret, and ``work()`` builds its fixture from it
        (a curated fixture, which has no seed, is the loaded one)."""
        from imagebench.runs.runner import open_unit, work_unit
        from imagebench.runs.sealed import SealedError, default_seal, sealable

        loaded = self.workbench.need_loaded()
        case = loaded.case
        try:
            folder = self.ledger.run_folders.get(subject.name) or self.ledger.run_folder(
                subject.name, subject, seal=default_seal()
            )
            sample = folder.next_sample(case.label)
            sealed = folder.seal is not None and sealable(case)
            seed = folder.seal.seeds([case], sample + 1)[case.label][sample] if sealed else None
        except SealedError as exc:
            raise self.notices.fail(f"{case.label}: {exc}") from None
        job = RunJob(subject.name, None, lambda: None, spec=spec, stop=stop, sealed=seed is not None)

        def work() -> SubjectRun | None:
            job.unit = open_unit(
                case,
                subject,
                sample,
                folder.path,
                fixture=None if seed is not None else loaded.unit.prepared,
                plane=loaded.plane,
                seed=seed,
            )
            return work_unit(job.unit, subject, stop=stop)

        job.work = work
        return job

    def finish_run(self, job: RunJob, run: SubjectRun | None) -> dict[str, Any]:
        """Record how ``job`` ended; return what the subject bound of the case's leavings that
        belongs on the viewer (nothing of a sealed fixture of its own)."""
        loaded = self.workbench.need_loaded()
        if job.unit is None:  # its work never opened the unit (it raised first)
            self.notices.notify("error", f"{job.subject_name}: the unit could not be opened")
            return {}
        loaded.runs[job.subject_name] = (job.unit, run)
        if run is None:
            why = job.unit.failure[1] if job.unit.failure is not None else "the unit could not be opened"
            self.notices.notify("error", f"{job.subject_name}: {why}")
            return {}
        if run.stopped:  # no result to look at: the sample is recorded as stopped at once
            self.notices.notify("warning", f"{job.subject_name}: stopped after {run.seconds:.1f} s")
            self.score(job.spec)
            return {}
        if run.harness_error:
            self.notices.notify("error", f"{job.subject_name}: the harness failed: {run.harness_error}")
        elif run.timed_out:
            self.notices.notify("warning", f"{job.subject_name}: {run.timeout_reason}")
        elif run.error:
            self.notices.notify("warning", f"{job.subject_name} raised {run.error}")
        left = {c.name: job.session.namespace[c.name] for c in loaded.case.collect if c.name in job.session.namespace}
        missing = [c.name for c in loaded.case.collect if c.name not in left and not c.recorded]
        tail = f"; left nothing for {', '.join(missing)}" if missing else ""
        self.notices.notify("info", f"{job.subject_name} ran in {run.seconds:.2f} s; left {', '.join(left) or 'nothing'}{tail}")
        if job.sealed:
            self.notices.notify(
                "info",
                f"{job.subject_name} worked a sealed fixture of its own (as imagebench run seals it), not the one on the "
                "viewer: what it left is not drawn over this case; Score, then View artifacts shows it beside its truth",
            )
            return {}
        if left:
            loaded.seen.add(f"saw-results-{job.subject_name}")
        return left
