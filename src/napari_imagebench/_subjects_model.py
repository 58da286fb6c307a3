"""The subjects' and Run's model: who can work the loaded case (you, ``reference``, a ``python:``
solver added here) and a Run of one of them on a fresh session. Qt-free.

Each Run of a non-interactive subject works a fresh session of the loaded fixture, as each
sample of a run does; :meth:`RunModel.prepare_run` opens it and ``job.work()`` (in a worker
thread) is its turn (:func:`imagebench.runs.runner.work_unit`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from napari_imagebench._base import BUILTIN_SUBJECTS, INTERACTIVE, INTERACTIVE_NAME, Notices, PanelError

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
        """Add a solver that works in this process (``python:package.module:function``, or any
        registered kind that does) to the subject list; returns its spec. A subject that works in
        a child process (a ``command:``) is refused: ``imagebench run`` confines it."""
        from imagebench.subjects import SubjectError, parse_subject, runs_out_of_process

        spec = spec.strip()
        if spec in self.specs:
            return spec
        try:
            subject = parse_subject(spec)
        except SubjectError as exc:
            raise self.notices.fail(str(exc)) from None
        if runs_out_of_process(subject):
            raise self.notices.fail(
                f"the panel runs in-process solvers only (python:package.module:function), got {spec!r}; "
                "run it with imagebench run, which confines it"
            )
        self._subjects[spec] = subject
        self.specs.append(spec)
        self.notices.notify("info", f"subject added: {spec} (results under {subject.name}/)")
        return spec

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
        ``work()`` is its turn (:func:`imagebench.runs.runner.work_unit`)."""
        from imagebench.runs.runner import open_unit, work_unit

        loaded = self.workbench.need_loaded()
        if spec == INTERACTIVE:
            raise self.notices.fail("you are the interactive subject: work on the viewer, then press Score", "warning")
        problem = self.subjects.subject_problem(spec, loaded.case)
        if problem:
            raise self.notices.fail(problem, "warning")
        subject = self.subjects.subject(spec)
        case = loaded.case
        folder = self.ledger.run_folder(subject.name, subject)
        unit = open_unit(
            case, subject, folder.next_sample(case.label), folder.path, fixture=loaded.unit.prepared, plane=loaded.plane
        )
        if unit.failure is not None:
            unit.release()
            raise self.notices.fail(f"{case.label}: {unit.failure[1]}")
        stop = threading.Event()
        return RunJob(subject.name, unit, lambda: work_unit(unit, subject, stop=stop), spec=spec, stop=stop)

    def finish_run(self, job: RunJob, run: SubjectRun | None) -> dict[str, Any]:
        """Record how ``job`` ended; return what the subject bound of the case's leavings."""
        loaded = self.workbench.need_loaded()
        loaded.runs[job.subject_name] = (job.unit, run)
        if run is None:
            self.notices.notify("error", f"{job.subject_name}: the unit could not be opened")
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
        if left:
            loaded.seen.add(f"saw-results-{job.subject_name}")
        missing = [c.name for c in loaded.case.collect if c.name not in left and not c.recorded]
        tail = f"; left nothing for {', '.join(missing)}" if missing else ""
        self.notices.notify("info", f"{job.subject_name} ran in {run.seconds:.2f} s; left {', '.join(left) or 'nothing'}{tail}")
        return left
