"""A run: a new run folder and one pass over its units, or a pass that takes an interrupted run up again.
Long because a new run, a resumed one and a suite's share one pass (its lock, journal, receipt and interrupt) and split apart would repeat it.

:func:`run_cases` and :func:`resume_run` are the entry points. :func:`execute` is one pass: it
holds ``<run>/.lock``, writes ``journal.jsonl`` (:mod:`imagebench.runs.journal`) and the receipt
first, hands the units to the serial loop or the dask workers, and closes ``run.json`` however
the pass ends. A resume keeps every unit whose summary the run folder's reader
(:func:`imagebench.runs.reader.read_run`) accepts and runs the rest.

A sealed run (:mod:`imagebench.runs.sealed`) is given a :class:`~imagebench.runs.sealed.Seal`: its seeds are
derived here, before the run folder exists, and handed to the loops; ``run.json`` records the
seal's commitment, and a resume must be given the same secret.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.executor.cluster import (
    Cluster,
    ExecutorError,
    Parallel,
    cluster_for,
    paying,
    subject_spec,
    unit_pools,
)
from imagebench.executor.planes import PlaneStarter
from imagebench.executor.prefetch import Prefetcher, start_prefetch
from imagebench.executor.serial import run_serial, serial_builds
from imagebench.executor.sink import Kept, Sink
from imagebench.executor.threads import run_threaded
from imagebench.executor.workers import run_dask
from imagebench.runs.closure import memoized_closures
from imagebench.runs.conditions import EXECUTION_KEY, execution_record
from imagebench.runs.layout import RunFolderError
from imagebench.runs.sealed import RECORD_KEY as SEALED_KEY
from imagebench.runs.sealed import SealedError, recorded_commitment
from imagebench.runs.verdict import RunResult

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.catalog import Catalog
    from imagebench.records import CaseSourceRecord, RunRecord, SampleSummary
    from imagebench.runs.reader import RunContents
    from imagebench.runs.runner import Plane
    from imagebench.runs.sealed import Seal
    from imagebench.runs.writer import RunWriter
    from imagebench.subjects import Subject
    from imagebench.usage import Budget

# record.extra keys a run rewrites at its end (a resume drops the stale ones first)
_END_KEYS = ("verdicts", "passed", "interrupted")


class ResumeError(ValueError):
    """A run folder cannot be resumed (names the file, the field and what was expected)."""


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by an interrupt (Ctrl-C, SIGINT) after its folder was written: the folder
    (``run_dir``) holds every unit that finished, and ``imagebench run --resume`` takes it up."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(f"the run was interrupted; its folder {run_dir} can be taken up with imagebench run --resume")
        self.run_dir = run_dir


def _write_receipt(run_dir: Path, record: RunRecord, subject: Subject, cases: Sequence[Case]) -> str:
    """Write ``receipt.json``; return why not (empty when written)."""
    try:
        from imagebench.runs.receipt import build_receipt, write_receipt

        seeds = {c.label: getattr(c.fixture, "seed", None) for c in cases}
        receipt = build_receipt(
            subject=subject,
            samples=record.samples,
            seeds={k: v for k, v in seeds.items() if isinstance(v, int)},
            selection=record.selection,
            cases=cases,
            sealed=recorded_commitment(record.extra),
            identity=record.extra.get(IDENTITY_KEY),
        )
        write_receipt(run_dir, receipt)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _anchor(run_dir: Path, journal: Any) -> None:
    """The journal's anchor in ``receipt.json`` once a pass has written its last line."""
    from imagebench.runs.receipt import anchor_receipt

    try:
        anchor_receipt(run_dir, journal.anchor())
    except Exception as exc:  # the run stands; its reader then names the missing anchor
        print(f"imagebench run: receipt.json not anchored: {type(exc).__name__}: {exc}", file=sys.stderr)


def _begin(
    run_dir: Path,
    record: RunRecord,
    cases: Sequence[Case],
    units: Mapping[str, int],
    writer: RunWriter,
    parallel: Parallel,
    resume: bool,
) -> tuple[RunRecord, RunContents | None, dict[str, Any], Kept | None]:
    """The journal's first line of a pass; for a resume, what the folder holds (what it keeps as
    columns, :class:`~imagebench.executor.sink.Kept`) and the clearing of what it cannot keep."""
    from imagebench.runs.layout import now_iso, remove_stale_temporaries

    scan: RunContents | None = None
    kept: Kept | None = None
    base_extra = {k: v for k, v in record.extra.items() if k not in _END_KEYS}
    if resume:
        scan, kept = resume_check(run_dir, writer.subject_name, units)
        # a journaled sample whose summary is gone or changed is run again, a journaled case summary
        # gone or changed is written again, and the resume line says so
        mended = {f"{label}: {why}" for label, why in scan.case_forged.items()}
        untrusted = [
            p for p in scan.integrity if "does not anchor" not in p and "the journal (line" not in p and p not in mended
        ]
        if untrusted:
            what = "is forged" if scan.forged else "cannot be verified here"
            raise ResumeError(f"{run_dir}: the run folder {what}: {'; '.join(untrusted[:5])}")
        remove_stale_temporaries(run_dir)
        redo = [e for e in scan.units.values() if not e.usable]
        for entry in redo:
            if entry.path.parent.exists():
                shutil.rmtree(entry.path.parent)  # what an interrupted attempt left
        note = {
            "time": now_iso(),
            "kept": kept.count + sum(1 for e in scan.units.values() if e.usable),
            "run": len(redo),
            "discarded": {f"{e.label}#{e.sample}": e.problem for e in redo if e.problem != "missing" or e.journaled},
            **({"case_summaries": dict(scan.case_forged)} if scan.case_forged else {}),
            "mode": parallel.describe(),
        }
        base_extra["resumes"] = [*base_extra.get("resumes", []), note]
        writer.event("resume", {k: v for k, v in note.items() if k != "time"})
    else:
        from imagebench.runs.journal import record_fields

        # the start line signs run.json's fixed fields: a sandbox or a suite copied in later is named
        writer.event("start", {"run_id": record.run_id, "mode": parallel.describe(), "record": record_fields(record)})
    return record.model_copy(update={"extra": base_extra}), scan, base_extra, kept


def resume_check(run_dir: Path, subject_name: str, units: Mapping[str, int]) -> tuple[RunContents, Kept]:
    """The check a resume makes of its folder: every record read and checked (the journal streamed a
    line at a time); each sample the journal vouches for kept as its case's columns and let go
    (:class:`~imagebench.executor.sink.Kept`), in bounded memory; the others stay with the reader
    (a summary the journal never vouched for, a kill between the two or one planted there, is run again)."""
    from imagebench.runs.reader import read_run

    kept = Kept(run_dir, subject_name, units)
    try:
        scan = read_run(run_dir, expected=units, require_journal=True, on_sample=kept.take)
    except RunFolderError as exc:
        raise ResumeError(str(exc)) from None
    return scan, kept


def execute(
    run_dir: Path,
    record: RunRecord,
    cases: Sequence[Case],
    subject: Subject,
    *,
    timeout: float | None = None,
    plane: Plane | None = None,
    progress: bool = True,
    on_sample: Callable[[SampleSummary], None] | None = None,
    parallel: Parallel = Parallel(),
    cluster: Cluster | None = None,
    resume: bool = False,
    seeds: Mapping[str, Sequence[int]] | None = None,
    budget: Budget | None = None,
) -> RunResult:
    """One pass over the units of ``record`` in ``run_dir``: run those not done, write each case's
    summary, ``run.json`` and (when missing) ``receipt.json``. With ``resume`` the folder is first
    scanned: units with a complete, valid summary are kept, the others' folders are cleared.
    ``seeds`` is a sealed run's ``{label: [seed of each sample]}`` (:meth:`imagebench.runs.sealed.Seal.seeds`)."""
    from imagebench.runs.journal import Journal, RunLock
    from imagebench.runs.keep import mode_of
    from imagebench.runs.layout import RECEIPT
    from imagebench.runs.progress import Bar
    from imagebench.runs.runner import presents_tensor
    from imagebench.runs.verdict import samples_for
    from imagebench.runs.writer import RunWriter

    cases = list(cases)
    units = {c.label: samples_for(c, record.samples) for c in cases}
    result = RunResult(run_dir=run_dir, record=record)
    lock = RunLock(run_dir).acquire()
    try:
        journal = Journal.open(run_dir)
    except BaseException:
        lock.release()
        raise
    writer = RunWriter(run_dir, subject.name, journal, artifacts=mode_of(record.extra))
    try:
        record, scan, base_extra, kept = _begin(run_dir, record, cases, units, writer, parallel, resume)
    except BaseException:
        journal.close()
        lock.release()
        raise
    done = {key for key, e in scan.units.items() if e.usable} if scan is not None else set()
    kept_count = kept.count if kept is not None else 0  # kept as columns, not as keys (runs.columns)
    todo = {
        c.label: [
            n for n in range(units[c.label]) if (c.label, n) not in done and (kept is None or not kept.has(c.label, n))
        ]
        for c in cases
    }
    order = [c for c in cases if todo[c.label]]
    builds = serial_builds(order, todo, seeds)
    result.record = record

    total = sum(units.values())
    helper: Prefetcher | None = None
    starter: PlaneStarter | None = None
    bar: Bar | None = None
    sink = Sink(writer, cases, units, on_sample, kept=kept)
    receipt_problem = ""
    finished = False
    try:
        # Serial: the helper that builds fixtures ahead starts first, so its start-up overlaps the receipt.
        helper = start_prefetch([(c, seed) for c, seed, _ in builds], parallel.prefetch) if cluster is None else None
        # The receipt is written before any unit (a killed run has one too), on this thread: its
        # imports must not race a subject's (see Prefetcher).
        if not (run_dir / RECEIPT).exists():
            receipt_problem = _write_receipt(run_dir, record, subject, cases)
        starter = PlaneStarter(plane, any(presents_tensor(c) for c in order))
        bar = sink.bar = Bar(total, done=len(done) + kept_count, enabled=progress)
        if scan is not None:
            for entry in scan.units.values():
                if not entry.usable or entry.summary is None:
                    continue
                sink.keep(entry.label, entry.sample, entry.summary)
                if not entry.journaled:  # a complete summary whose line a kill cut off
                    writer.journal_line(entry.path, entry.summary, entry.data)
            for case in cases:
                sink.maybe_finish(case)
        with unit_pools():
            if cluster is not None:
                try:
                    run_dask(
                        cluster,
                        order,
                        todo,
                        subject,
                        run_dir,
                        timeout,
                        starter,
                        sink,
                        parallel.fixture_mode,
                        seeds,
                        budget=budget,
                        ship=parallel.ships,
                    )
                except ExecutorError as exc:
                    exc.run_dir = run_dir
                    raise
            elif parallel.threads_for(subject) is not None:
                threads = parallel.threads_for(subject)
                run_threaded(builds, subject, run_dir, timeout, starter, sink, helper, threads, budget=budget)
            else:
                run_serial(builds, subject, run_dir, timeout, starter, sink, helper, budget=budget)
        finished = True
    except KeyboardInterrupt as exc:
        if isinstance(exc, RunInterrupted):
            raise
        raise RunInterrupted(run_dir) from None
    finally:
        if bar is not None:
            bar.stop()
        try:
            for case in cases:
                if sink.complete(case.label) and case.label in sink.summaries:
                    result.samples[case.label] = sink.samples_of(case.label)
                    result.summaries[case.label] = sink.summaries[case.label]
            extra = dict(base_extra)
            if receipt_problem:
                extra["receipt_error"] = receipt_problem
            if not finished:
                extra["interrupted"] = True
            result.record = writer.close(record, result.samples, result.summaries, complete=finished, extra=extra)
            _anchor(run_dir, journal)
            # an interrupt is reported by whoever catches RunInterrupted (the command prints the
            # exact resume command, --quiet or not); an ExecutorError's message says it
            if not finished and progress and sys.exc_info()[0] not in (ExecutorError, RunInterrupted):
                print(
                    f"the run stopped early; take it up again with: imagebench run --resume {run_dir}", file=sys.stderr
                )
        finally:
            try:
                if helper is not None:
                    helper.close()
                if starter is not None:
                    starter.close()  # the plane, its process and its temporary data go with the run
            finally:
                journal.close()
                lock.release()
    return result


def run_cases(
    cases: Iterable[Case],
    subject: Subject,
    *,
    samples: int = 1,
    out: str | Path | None = None,
    progress: bool = True,
    timeout: float | None = None,
    plane: Plane | None = None,
    selection: Mapping[str, Any] | None = None,
    on_sample: Callable[[SampleSummary], None] | None = None,
    record_extra: Mapping[str, Any] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    parallel: Parallel | None = None,
    sealed: Seal | None = None,
    unsealed: bool = False,
    sources: Sequence[CaseSourceRecord] | None = None,
    budget: Budget | None = None,
    artifacts: str | None = None,
) -> RunResult:
    """Run every ``(case, sample)`` unit in a new run folder and return what it left.

    ``budget`` (``--max-tokens``, ``--max-cost``) is what each sample may spend: past it the sample
    ends ``budget-exceeded``; ``run.json``'s ``extra["budget"]`` records it, and a resume keeps it.
    ``artifacts`` (``auto``, ``all``, ``failures``, ``none``; :mod:`imagebench.runs.keep`) says
    which samples keep their images; ``run.json``'s ``extra["artifacts"]`` records the mode chosen.

    ``sources`` (:meth:`imagebench.catalog.Catalog.records`) is kept in ``run.json`` as where each
    case came from, so that ``--resume`` opens those sources again; without it a resume finds
    only built-in cases (or is handed the cases).

    ``record_extra`` is kept in ``run.json``'s ``extra`` from the first write to the last (a suite
    run records its cohort, assignment and conditions there: ``imagebench.suite``).

    The folder is ``<out or artifact_root()>/run-<UTC timestamp>/``. ``run.json`` is written
    first with ``complete: false`` and again at the end. Each case's fixture is built once and
    shared by its samples (each sample still gets a private copy of the data). ``progress``
    shows a progress bar on stderr. ``workers``/``scheduler`` (or ``parallel``) say where the
    units run (:class:`Parallel`); the results are the same.

    With ``parallel`` set a subject that cannot travel is refused and an existing cluster reached
    before the run folder is created; a local cluster starts in the background while the run's
    records are written, unless it cannot pay (fewer than two usable cores, or too few units:
    :func:`~imagebench.executor.cluster.cannot_pay`): then the units run serially, said on stderr
    and in ``run.json``'s ``extra["executor"]``. ``run.json``'s ``extra`` records ``subject_spec`` whenever
    the subject has one, so that ``--resume`` can rebuild it.

    ``run.json``'s ``extra["subject_identity"]`` records the subject's identity (its name and the
    digest of its code: :func:`imagebench.subjects.identity_of`), taken before the run folder is
    created; a subject whose code cannot be digested raises :class:`~imagebench.subjects.SubjectError`.

    ``sealed`` seals the run (:mod:`imagebench.runs.sealed`): every sample of a procedural case is built
    from its own seed derived from the seal's secret, and ``run.json``'s ``extra["sealed"]``
    records the seal's commitment (never the secret). A case that cannot be sealed raises
    :class:`~imagebench.runs.sealed.SealedError` before the run folder is created. An untrusted
    subject (:func:`imagebench.subjects.is_trusted`) given no seal is sealed by default with a
    fresh secret kept in the state folder (:func:`imagebench.runs.sealed.default_seal`), unless
    ``unsealed``: then its public seeds are used and ``run.json`` says so (``extra["unsealed"]``).

    ``run.json``'s ``extra["execution"]`` records the conditions the subject ran under
    (:func:`execution_record`), which ``compare`` checks.
    """
    from imagebench.runs import keep
    from imagebench.runs.sealed import UNSEALED_KEY, default_seal
    from imagebench.runs.verdict import samples_for
    from imagebench.runs.writer import RunWriter
    from imagebench.subjects import confinement_of, identity_of, is_trusted, limits_of

    cases = list(cases)
    kept = keep.choose(artifacts, sum(samples_for(c, samples) for c in cases))  # ValueError naming the flag
    if parallel is None:
        parallel = Parallel(workers=workers, scheduler=scheduler)
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    if sealed is not None and unsealed:
        raise SealedError("a run cannot be both sealed and unsealed")
    if sealed is None and not unsealed and not is_trusted(subject):
        sealed = default_seal()
    seeds = sealed.seeds(cases, samples) if sealed is not None else None
    identity = identity_of(subject)  # what it runs, digested before anything starts
    asked = parallel
    parallel, serially = paying(parallel, subject, sum(samples_for(c, samples) for c in cases))
    if serially:
        print(f"imagebench run: running serially, not on the {asked.describe()} asked: {serially}", file=sys.stderr)
    with cluster_for(parallel, cases, subject, progress=progress) as cluster, memoized_closures():
        extra = dict(record_extra or {})
        extra.pop(SEALED_KEY, None)  # only a seal given here makes a run sealed
        extra.pop(UNSEALED_KEY, None)
        if sealed is not None:
            extra[SEALED_KEY] = sealed.record()
        elif unsealed and not is_trusted(subject):
            extra[UNSEALED_KEY] = True
        extra.update(subject_record(subject))
        extra[EXECUTION_KEY] = execution_record(subject, extra)
        extra[IDENTITY_KEY] = identity
        if budget is not None and not budget.empty:
            extra[BUDGET_KEY] = budget.model_dump(mode="json")
        extra[keep.KEY] = kept
        if parallel.distributed:
            extra["executor"] = parallel.describe_for(subject)
        elif serially:
            extra["executor"] = f"serial, not the {asked.describe()} asked: {serially}"
        writer, record = RunWriter.create(
            out,
            subject.name,
            sandbox=confinement_of(subject),
            limits=limits_of(subject),
            samples=samples,
            selection=dict(selection or {}),
            cases=[c.label for c in cases],
            complete=False,
            sources=list(sources) if sources is not None else None,
            extra=extra,
        )
        return execute(
            writer.run_dir,
            record,
            cases,
            subject,
            timeout=timeout,
            plane=plane,
            progress=progress,
            on_sample=on_sample,
            parallel=parallel,
            cluster=cluster,
            seeds=seeds,
            budget=budget if budget is not None and not budget.empty else None,
        )


SUBJECT_DIGEST_KEY = "subject_sha256"
BUDGET_KEY = "budget"


def recorded_budget(where: Path, record: RunRecord) -> Budget | None:
    """The budget ``run.json`` records (``extra["budget"]``), None when it records none;
    ResumeError naming the field when it is not one."""
    from pydantic import ValidationError

    from imagebench.usage import Budget

    raw = record.extra.get(BUDGET_KEY)
    if raw is None:
        return None
    try:
        return Budget.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        raise ResumeError(f"{where}: field 'extra.budget{'.' + at if at else ''}': {first['msg']}") from None


IDENTITY_KEY = "subject_identity"


def _full_subject(subject: Subject) -> dict[str, Any] | None:
    from imagebench.subjects import options_record

    try:
        spec = subject_spec(subject)
    except ExecutorError:
        return None
    return {"spec": spec, "options": options_record(subject)}


def subject_record(subject: Subject) -> dict[str, Any]:
    """What ``run.json``'s ``extra`` keeps of the subject: its spec (``subject_spec``) and
    confinement (``subject_options``) with every machine path replaced by its last name, and,
    when anything was replaced, ``subject_sha256``: the digest of the full form, which a resume
    given the same subject again checks."""
    from imagebench.fixtures.digest import digest_json, names_for_paths

    full = _full_subject(subject)
    if full is None:
        return {}
    form, colon, rest = full["spec"].partition(":")
    shown_spec = f"{form}:{names_for_paths(rest.strip())}" if colon else full["spec"]
    out: dict[str, Any] = {"subject_spec": shown_spec}
    options = full["options"]
    if options:
        shown = json.loads(names_for_paths(json.dumps(options)))
        out["subject_options"] = shown
    if out["subject_spec"] != full["spec"] or (options and out["subject_options"] != options):
        out[SUBJECT_DIGEST_KEY] = digest_json(full)
    return out


def _check_subject(where: Path, record: RunRecord, subject: Subject) -> None:
    """A subject given to a resume must be the run's own (spec and confinement, by digest when
    ``run.json`` keeps them without paths)."""
    from imagebench.fixtures.digest import digest_json

    full = _full_subject(subject)
    recorded = record.extra.get(SUBJECT_DIGEST_KEY)
    if recorded is not None:
        if full is None or digest_json(full) != recorded:
            raise ResumeError(
                f"{where}: field 'extra.{SUBJECT_DIGEST_KEY}' does not match the subject given: give the run's own "
                f"subject {record.extra.get('subject_spec')!r} (with its full paths) and the same sandbox flags (and --subject-name)"
            )
    elif full is not None and isinstance(record.extra.get("subject_spec"), str):
        if full["spec"] != record.extra["subject_spec"] or (full["options"] or {}) != (
            record.extra.get("subject_options") or {}
        ):
            raise ResumeError(
                f"{where}: the subject given ({full['spec']!r}, {full['options'] or 'no sandbox options'}) is not the "
                f"run's ({record.extra['subject_spec']!r}, {record.extra.get('subject_options') or 'no sandbox options'})"
            )


def _check_identity(where: Path, record: RunRecord, subject: Subject) -> None:
    """A resume runs only the code the run started with: a subject whose identity (the digest of
    its code) differs from ``extra.subject_identity`` is refused, naming what changed. A run from
    before identities were recorded has none to check."""
    from imagebench.subjects import SubjectError, identity_change, identity_of

    recorded = record.extra.get(IDENTITY_KEY)
    if recorded is None:
        return
    if not isinstance(recorded, dict) or not isinstance(recorded.get("code"), str):
        raise ResumeError(
            f"{where}: field 'extra.{IDENTITY_KEY}' is {recorded!r}, expected an object with 'name', 'code' and 'parts'"
        )
    try:
        current = identity_of(subject)
    except SubjectError as exc:
        raise ResumeError(f"{where}: the subject's code cannot be digested to check it is the run's: {exc}") from None
    change = identity_change(recorded, current)
    if change is not None:
        raise ResumeError(
            f"{where}: the subject's code changed since the run started (field 'extra.{IDENTITY_KEY}.code' is "
            f"{recorded['code']}, the code given is {current['code']}; changed: {change}); a resume runs only the "
            "code the run started with: restore that code, or start a new run"
        )


def resolve_cases(
    run_dir: Path, record: RunRecord, bundle: str | Path | None = None, catalog: Catalog | None = None
) -> list[Case]:
    """The cases ``run.json`` names, found again (:func:`imagebench.catalog.cases_of_run`: the
    sources it recorded, ``catalog``, or for an older run the built-in suite and its bundle)."""
    from imagebench.catalog import CatalogError, cases_of_run

    try:
        return cases_of_run(record, catalog, bundle=bundle)
    except CatalogError as exc:
        raise ResumeError(f"{run_dir / 'run.json'}: {exc}") from None


def resume_run(
    run_dir: str | Path,
    *,
    cases: Sequence[Case] | None = None,
    subject: Subject | None = None,
    bundle: str | Path | None = None,
    catalog: Catalog | None = None,
    progress: bool = True,
    parallel: Parallel = Parallel(),
    plane: Plane | None = None,
    on_sample: Callable[[SampleSummary], None] | None = None,
    sealed: Seal | None = None,
) -> RunResult:
    """Take up a run again: run every unit of ``run.json`` that has no complete, valid summary.

    The subject comes from ``run.json`` (``extra.subject_spec``) unless given; a subject given
    must be the run's own, and must be given when ``run.json`` keeps it without its machine
    paths (:func:`subject_record`). The cases are
    resolved by label (:func:`resolve_cases`: the sources ``run.json`` recorded, opened again, and
    ``catalog``) unless given; samples and the time limit
    are the run's. A sealed run must be given the same secret (``sealed``, checked against the
    commitment it recorded), and a run that was not sealed none. Raises :class:`ResumeError` for
    a folder that cannot be resumed and :class:`imagebench.runs.journal.RunLocked` while another
    process writes it.
    """
    from imagebench.runs.reader import read_record_of_run
    from imagebench.subjects import SubjectError, options_from_record, parse_subject

    run_dir = Path(run_dir)
    try:
        record = read_record_of_run(run_dir)
    except RunFolderError as exc:
        raise ResumeError(str(exc)) from None
    where = run_dir / "run.json"
    sealed = _check_seal(where, record, sealed)
    if subject is not None:
        _check_subject(where, record, subject)
    elif record.extra.get(SUBJECT_DIGEST_KEY) is not None:
        raise ResumeError(
            f"{where}: run.json keeps the subject without its machine paths ({record.extra.get('subject_spec')!r}); "
            "give the same subject again (imagebench run --resume RUN_DIR --subject SPEC with the run's sandbox "
            "flags): its digest is checked"
        )
    if subject is None:
        spec = record.extra.get("subject_spec")
        if not isinstance(spec, str) or not spec:
            raise ResumeError(
                f"{where}: field 'extra.subject_spec' is missing (the run's subject {record.subject!r} has no spec "
                "string); resume it from Python with resume_run(..., subject=...)"
            )
        try:
            options = options_from_record(record.extra.get("subject_options"))
        except ValueError as exc:
            raise ResumeError(f"{where}: field 'extra.subject_options' is not as expected: {exc}") from None
        try:
            subject = parse_subject(spec, **options)
        except SubjectError as exc:
            raise ResumeError(f"{where}: field 'extra.subject_spec' cannot be used: {exc}") from None
    if subject.name != record.subject:
        raise ResumeError(f"{where}: field 'subject' is {record.subject!r}, but the subject given is {subject.name!r}")
    _check_identity(where, record, subject)
    if cases is None:
        cases = resolve_cases(run_dir, record, bundle, catalog)
    else:
        by_label = {c.label: c for c in cases}
        missing = [label for label in record.cases if label not in by_label]
        if missing:
            raise ResumeError(f"{where}: field 'cases' names {missing}, which the cases given do not hold")
        cases = [by_label[label] for label in record.cases]
    timeout = record.selection.get("timeout")
    if timeout is not None and not isinstance(timeout, (int, float)):
        raise ResumeError(f"{where}: field 'selection.timeout' is {timeout!r}, expected a number of seconds or null")
    try:
        seeds = sealed.seeds(cases, record.samples) if sealed is not None else None
    except SealedError as exc:
        raise ResumeError(f"{where}: {exc}") from None
    with cluster_for(parallel, cases, subject, progress=progress) as cluster, memoized_closures():
        return execute(
            run_dir,
            record,
            cases,
            subject,
            timeout=timeout,
            plane=plane,
            progress=progress,
            on_sample=on_sample,
            parallel=parallel,
            cluster=cluster,
            resume=True,
            seeds=seeds,
            budget=recorded_budget(where, record),
        )


def _check_seal(where: Path, record: RunRecord, sealed: Seal | None) -> Seal | None:
    """A resume needs exactly the secret the run was sealed with, and none for a run that was not;
    a run sealed by default finds its secret in the state folder. Returns the seal to resume with."""
    from imagebench.runs.sealed import stored_seal

    recorded = recorded_commitment(record.extra)
    if SEALED_KEY in record.extra and recorded is None:
        raise ResumeError(f"{where}: field 'extra.sealed' records no commitment; the run cannot be resumed sealed")
    if recorded is None and sealed is not None:
        raise ResumeError(f"{where}: the run was not sealed; resume it without --sealed/--sealed-file")
    entry = record.extra.get(SEALED_KEY)
    if recorded is not None and sealed is None and isinstance(entry, Mapping) and entry.get("origin") == "default":
        try:
            sealed = stored_seal(recorded)
        except SealedError as exc:
            raise ResumeError(f"{where}: {exc}") from None
        if sealed is None:
            raise ResumeError(
                f"{where}: the run was sealed by default (commitment {recorded[:19]}...) and its secret is not in "
                "this state folder ($IMAGEBENCH_STATE or ~/.local/state/imagebench): resume it where it ran"
            )
    if recorded is not None and sealed is None:
        raise ResumeError(
            f"{where}: the run was sealed (commitment {recorded[:19]}...); resume it with the same secret "
            "(--sealed-file PATH or --sealed SECRET)"
        )
    if recorded is not None and sealed is not None and sealed.commitment != recorded:
        raise ResumeError(
            f"{where}: the secret given is not the one the run was sealed with (commitment {sealed.commitment[:19]}..., "
            f"the run recorded {recorded[:19]}...)"
        )
    return sealed
