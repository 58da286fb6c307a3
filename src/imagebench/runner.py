"""Running samples: one fresh session per (case, sample), one status per sample, one folder per run.

The unit of work is ``(case, sample)``: :func:`run_unit` opens a session on the fixture, lets the
subject work, collects the attempt, verifies it and writes the sample's summary. It is a
module-level function over plain arguments so that units can later run on other workers.
:func:`run_cases` runs a selection: it builds each case's fixture once, runs its samples, and
writes ``run.json`` plus one ``CaseSummary`` per case.

Every sample ends in exactly one :data:`imagebench.records.Status`:

- ``skipped``: the fixture is not available here, or the case presents a tensor and no data plane runs;
- ``harness-error``: building the fixture, the data plane, opening the session, binding the subject,
  the verifier or writing the report failed (never the subject's fault);
- ``timeout``: the subject ran past its limit;
- otherwise the verifier's outcome decides (``ok``, ``wrong-answer``, ``no-result``,
  ``unscorable-result``, ``blocked``).

This module also defines the ``list``, ``show`` and ``run`` commands. Heavy imports (numpy,
pydantic, rich) happen inside functions so that ``imagebench --help`` stays fast.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from imagebench.case import Case
    from imagebench.fixture import Attempt, Fixture, Outcome
    from imagebench.records import CaseSummary, RunRecord, SampleSummary
    from imagebench.session import Session
    from imagebench.subjects import Subject, SubjectRun

TENSOR_SKIP_REASON = "this case presents a layer as tensor and no data plane is running"
FIXTURE_CHOICES = ("all", "synthetic", "curated")


# --------------------------------------------------------------------------- the data-plane seam


@runtime_checkable
class Plane(Protocol):
    """What the runner needs from a running data plane (the tensor presentation).

    ``present`` uploads ``fixture.data`` for the case's tensor layers (never truth) and returns
    ``{layer name: array id}``; ``after_sample`` returns flags for the sample's summary (for
    instance ``fixture-overwritten`` when an uploaded fixture changed during the sample).
    """

    url: str
    client: Any

    def present(self, case: Case, fixture: Fixture) -> Mapping[str, str]: ...

    def after_sample(self, case: Case, fixture: Fixture) -> list[str]: ...


def presents_tensor(case: Case) -> bool:
    return any(layer.presentation == "tensor" for layer in case.layers)


# --------------------------------------------------------------------------- fixtures, once per run


@dataclass
class PreparedFixture:
    """A case's fixture built once for a run, or why it could not be: shared by all its samples."""

    fixture: Fixture | None
    status: str | None = None  # "skipped" or "harness-error" when there is no fixture
    reason: str = ""
    build_s: float = 0.0


def prepare_fixture(case: Case, *, plane: Plane | None = None) -> PreparedFixture:
    """Check availability and build the fixture; never raises (a failure is a status with a reason)."""
    if presents_tensor(case) and plane is None:
        return PreparedFixture(None, "skipped", TENSOR_SKIP_REASON)
    ok, why = case.available()
    if not ok:
        return PreparedFixture(None, "skipped", why or "the fixture is not available on this machine")
    start = time.perf_counter()
    try:
        fixture = case.build()
    except Exception as exc:
        return PreparedFixture(
            None,
            "harness-error",
            f"building the fixture failed: {type(exc).__name__}: {exc}",
            time.perf_counter() - start,
        )
    return PreparedFixture(fixture, build_s=time.perf_counter() - start)


# --------------------------------------------------------------------------- one unit


def sample_dir(run_dir: str | Path, subject_name: str, case: Case, sample: int) -> Path:
    """``<run>/<subject>/<namespace>/<case_id>/sample-<n>`` (the folder ``write_report`` uses)."""
    from imagebench.artifacts import report_dir

    return report_dir(run_dir, subject_name, case.namespace, case.case_id, sample)


def case_dir(run_dir: str | Path, subject_name: str, case: Case) -> Path:
    from imagebench.artifacts import report_dir

    return report_dir(run_dir, subject_name, case.namespace, case.case_id)


def _seed(case: Case) -> int | None:
    seed = getattr(case.fixture, "seed", None)  # a Procedural spec's seed; a curated one has none
    return seed if isinstance(seed, int) else None


def _base_fields(case: Case, subject_name: str, sample: int, fixture: Fixture | None) -> dict[str, Any]:
    return {
        "label": case.label,
        "namespace": case.namespace,
        "case_id": case.case_id,
        "subject": subject_name,
        "sample": sample,
        "kind": case.kind,
        "case_class": case.case_class,
        "provenance": fixture.provenance if fixture is not None else "",
        "citation": fixture.citation if fixture is not None else None,
        "seed": _seed(case),
    }


def _write_plain(
    case: Case,
    subject_name: str,
    sample: int,
    run_dir: Path,
    *,
    status: str,
    reason: str,
    fixture: Fixture | None,
    times: dict[str, float],
    detail: dict[str, Any] | None = None,
    flags: list[str] | None = None,
) -> SampleSummary:
    """A sample that ended without an Outcome (skipped, harness-error, timeout)."""
    from imagebench.records import SampleSummary, json_safe, write_record

    summary = SampleSummary(
        **_base_fields(case, subject_name, sample, fixture),
        status=status,  # type: ignore[arg-type]
        reason=reason,
        passed=False,
        detail=json_safe(detail or {}),
        flags=list(flags or []),
        times=times,
    )
    write_record(sample_dir(run_dir, subject_name, case, sample) / "summary.json", summary)
    return summary


def _reason(status: str, outcome: Outcome, attempt: Attempt, run: SubjectRun) -> str:
    """One line saying why a sample did not pass (empty when it did)."""
    if status == "ok":
        return ""
    parts: list[str] = []
    if run.error:
        parts.append(f"the subject raised {run.error}")
    if status == "blocked":
        blocked = outcome.detail.get("blocked")
        parts.append(blocked if isinstance(blocked, str) else "the scoring contract is missing or ineligible")
    said: set[str] = set()
    for name, why in attempt.notes.get("why_not", {}).items():
        said.add(why)
        parts.append(why if repr(name) in why or f"/{name}." in why else f"{name}: {why}")
    for m in outcome.metrics:
        if m.value is None:
            if m.unavailable not in said:  # not just the missing leaving again
                said.add(m.unavailable or "")
                parts.append(f"{m.name} unavailable: {m.unavailable}")
        elif not m.passed:
            parts.append(f"{m.name} = {m.value:.4g}{m.unit and ' ' + m.unit} > limit {m.limit:.4g}")
    if not parts:
        parts.append(f"the verifier scored nothing ({status})")
    return "; ".join(parts)


def run_unit(
    case: Case,
    subject: Subject,
    sample: int,
    run_dir: str | Path,
    *,
    fixture: Fixture | PreparedFixture | None = None,
    plane: Plane | None = None,
    timeout: float | None = None,
) -> SampleSummary:
    """Work one sample of ``case`` with ``subject`` and write its summary under ``run_dir``.

    ``fixture`` is the case's fixture when the caller built it already (a :class:`Fixture`, or the
    :class:`PreparedFixture` from :func:`prepare_fixture`, which also carries a failed build);
    otherwise it is built here. ``timeout`` overrides ``case.timeout_s``. Never raises for
    anything a case, fixture, subject or verifier does: each ends as a status.
    """
    from imagebench.fixture import Fixture
    from imagebench.session import collect_attempt, open_session
    from imagebench.subjects import (
        SubjectError,
        SubjectHarnessError,
        UnitContext,
        bind_subject,
        readonly_files,
        remove_readonly_files,
        run_subject,
    )

    start = time.perf_counter()
    run_dir = Path(run_dir)
    name = subject.name
    times: dict[str, float] = {}

    def plain(status: str, reason: str, fx: Fixture | None = None, **kw: Any) -> SampleSummary:
        times["total_s"] = time.perf_counter() - start
        return _write_plain(case, name, sample, run_dir, status=status, reason=reason, fixture=fx, times=times, **kw)

    # 1. the fixture (built once per run by run_cases, or here)
    if isinstance(fixture, Fixture):
        prepared = PreparedFixture(fixture)
    elif isinstance(fixture, PreparedFixture):
        prepared = fixture
    elif fixture is None:
        prepared = prepare_fixture(case, plane=plane)
    else:
        raise TypeError(f"run_unit: fixture must be a Fixture, a PreparedFixture or None, got {type(fixture).__name__}")
    times["build_s"] = prepared.build_s
    if presents_tensor(case) and plane is None:
        # run_cases passes the reason its plane could not start as a skipped PreparedFixture
        return plain("skipped", prepared.reason if prepared.status == "skipped" and prepared.reason else TENSOR_SKIP_REASON)
    if prepared.fixture is None:
        return plain(prepared.status or "harness-error", prepared.reason)
    fx = prepared.fixture

    # 2. a fresh session (and the data plane's ids when the case presents tensors)
    tensors: Mapping[str, str] | None = None
    client: Any = None
    tensor_url: str | None = None
    if plane is not None and presents_tensor(case):
        try:
            tensors = dict(plane.present(case, fx))
        except Exception as exc:
            return plain("harness-error", f"the data plane could not present the fixture: {type(exc).__name__}: {exc}", fx)
        client, tensor_url = plane.client, plane.url
    try:
        session = open_session(case, fx, client=client, tensors=tensors)
    except Exception as exc:
        return plain("harness-error", f"opening the session failed: {type(exc).__name__}: {exc}", fx)

    # 3. the subject's turn
    limit = float(timeout) if timeout is not None else float(case.timeout_s)
    sdir = sample_dir(run_dir, name, case, sample)
    files = case.meta.get("workspace_files")  # a bundle case's files/: copied, never the answer key
    context = UnitContext(
        sample_dir=sdir,
        timeout_s=limit,
        tensor_url=tensor_url,
        files=Path(files) if files else None,
        env={str(k): str(v) for k, v in (case.meta.get("env") or {}).items()},
    )
    try:
        work = bind_subject(subject, case, context)
    except Exception as exc:
        why = str(exc) if isinstance(exc, SubjectError) else f"binding the subject failed: {type(exc).__name__}: {exc}"
        return plain("harness-error", why, fx)
    shared: Path | None = None
    if context.files is not None:  # an in-process subject reads them here; a command gets its own copy
        try:
            shared = readonly_files(context.files)
        except SubjectHarnessError as exc:
            return plain("harness-error", str(exc), fx)
        session.workspace = shared
    try:
        run = run_subject(work, session, limit)
    finally:
        if shared is not None:
            remove_readonly_files(shared)
    times["subject_s"] = run.seconds
    flags: list[str] = []
    if plane is not None and tensors is not None:
        try:
            flags = list(plane.after_sample(case, fx))
        except Exception as exc:
            return plain("harness-error", f"the data plane check failed: {type(exc).__name__}: {exc}", fx)

    # 4. collect, verify and report (a timed-out or failed turn ends there, unverified)
    attempt = collect_attempt(case, name, session.lookup)
    attempt.notes.update(_subject_notes(session))
    return score_attempt(
        case, prepared, attempt, run_dir, sample=sample, run=run, times=times, flags=flags, started=start
    )


def _subject_notes(session: Session) -> dict[str, Any]:
    notes: dict[str, Any] = {}
    if "exit_code" in session.notes:
        notes["exit_code"] = session.notes["exit_code"]
    if session.notes.get("unreadable"):
        notes["unreadable"] = list(session.notes["unreadable"])
    if session.notes.get("final_message"):
        notes["final_message"] = session.notes["final_message"]
    return notes


def _json_notes(notes: Mapping[str, Any]) -> dict[str, Any]:
    from imagebench.records import json_safe

    return json_safe(dict(notes))


# --------------------------------------------------------------------------- many units


@dataclass
class RunResult:
    """What a run left: its folder, its record, every sample summary and every case summary."""

    run_dir: Path
    record: RunRecord
    samples: dict[str, list[SampleSummary]] = field(default_factory=dict)
    summaries: dict[str, CaseSummary] = field(default_factory=dict)

    @property
    def verdicts(self) -> dict[str, str]:
        """Each case's verdict: its summary's (which a check across samples may turn to fail), else its samples'."""
        out: dict[str, str] = {}
        for label, samples in self.samples.items():
            summary = self.summaries.get(label)
            verdict = summary.extra.get("verdict") if summary is not None else None
            out[label] = verdict if isinstance(verdict, str) else case_verdict(samples)
        return out

    @property
    def passed(self) -> bool:
        """Every case that ran passed (skipped ones aside), and at least one ran."""
        verdicts = self.verdicts.values()
        return any(v != "skipped" for v in verdicts) and all(v in ("pass", "skipped") for v in verdicts)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1


def case_verdict(samples: Sequence[SampleSummary]) -> str:
    """``skipped`` when every sample was skipped; ``pass`` when every other sample is ``ok``; else ``fail``."""
    ran = [s for s in samples if s.status != "skipped"]
    if not ran:
        return "skipped"
    return "pass" if all(s.status == "ok" for s in ran) else "fail"


def samples_for(case: Case, samples: int) -> int:
    """How many samples ``case`` runs: ``samples``, or more when the case asks for more
    (``case.meta["min_samples"]``, as a bundle's rerun case does)."""
    return max(samples, int(case.meta.get("min_samples", 1)))


def summarize_case(case: Case, subject_name: str, samples: Sequence[SampleSummary], build_s: float) -> CaseSummary:
    from imagebench.records import CaseSummary

    counts: dict[str, int] = {}
    for s in samples:
        counts[s.status] = counts.get(s.status, 0) + 1
    values: dict[str, list[float]] = {}
    limits: dict[str, float] = {}
    for s in samples:
        for m in s.metrics:
            limits[m.name] = m.limit
            values.setdefault(m.name, [])
            if m.value is not None:
                values[m.name].append(m.value)
    means = {k: (sum(v) / len(v) if v else None) for k, v in values.items()}
    reasons: list[str] = []
    for s in samples:
        if s.reason and s.reason not in reasons:
            reasons.append(s.reason)
    verdict = case_verdict(samples)
    extra: dict[str, Any] = {}
    across = getattr(case.verify, "across_samples", None)
    if callable(across) and verdict != "skipped":  # a case judged over all its samples (a bundle's rerun class)
        try:
            consistency = dict(across(samples))
        except Exception as exc:
            consistency = {"consistent": False, "reason": f"the check across samples raised {type(exc).__name__}: {exc}"}
        extra["consistency"] = consistency
        if not consistency.get("consistent"):
            verdict = "fail"
            reasons.insert(0, f"inconsistent across samples: {consistency.get('reason', '')}")
    return CaseSummary(
        label=case.label,
        subject=subject_name,
        kind=case.kind,
        case_class=case.case_class,
        samples=len(samples),
        counts=counts,
        passed=sum(1 for s in samples if s.status == "ok"),
        scored=sum(1 for s in samples if s.status in ("ok", "wrong-answer")),
        metric_means=means,
        extra={
            "verdict": verdict,
            "limits": limits,
            "reasons": reasons[:5],
            "build_s": build_s,
            **extra,
        },
    )


def _utc_stamp() -> tuple[str, str]:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ"), now.isoformat(timespec="seconds")


def _new_run_dir(root: Path, stamp: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        path = root / (f"run-{stamp}" if n == 0 else f"run-{stamp}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a run folder under {root}")


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
) -> RunResult:
    """Run every ``(case, sample)`` unit and write the run folder; return what it left.

    ``record_extra`` is kept in ``run.json``'s ``extra`` from the first write to the last (a suite
    run records its cohort, assignment and conditions there: ``imagebench.suite``).

    The folder is ``<out or artifact_root()>/run-<UTC timestamp>/``. ``run.json`` is written
    first with ``complete: false`` and again at the end. Each case's fixture is built once and
    shared by its samples (each sample still gets a private copy of the data). ``progress``
    shows a rich progress bar on stderr.

    The units are driven by :mod:`imagebench.executor`: serially here by default (the next case's
    fixture and the data plane are prepared in the background), on ``workers`` local dask
    processes, or on the cluster behind ``scheduler`` (``tcp://HOST:PORT``); the results are the
    same. Every run keeps ``journal.jsonl`` and can be taken up again with
    :func:`imagebench.executor.resume_run`.
    """
    from imagebench.executor import Parallel, run_new

    return run_new(
        cases,
        subject,
        samples=samples,
        out=out,
        progress=progress,
        timeout=timeout,
        plane=plane,
        selection=selection,
        on_sample=on_sample,
        record_extra=record_extra,
        parallel=Parallel(workers=workers, scheduler=scheduler),
    )


# --------------------------------------------------------------------------- selection


def select_cases(
    cases: Sequence[Case], patterns: Sequence[str] | None = None, fixtures: str = "all"
) -> tuple[list[Case], list[str]]:
    """Cases whose label matches any pattern, and whose fixture kind is ``fixtures`` (unless ``all``).

    A pattern without ``*?[`` is a substring of the label; with them it is an fnmatch glob that
    must match the whole label (``segmentation/*``) or the whole case id (``rect*``).

    Returns the selection and the patterns that matched no case at all.
    """
    if fixtures not in FIXTURE_CHOICES:
        raise ValueError(f"fixtures must be one of {FIXTURE_CHOICES}, got {fixtures!r}")
    patterns = [p for p in (patterns or []) if p]

    def matches(pattern: str, case: Case) -> bool:
        if any(ch in pattern for ch in "*?["):
            return fnmatch.fnmatchcase(case.label, pattern) or fnmatch.fnmatchcase(case.case_id, pattern)
        return pattern in case.label

    unmatched = [p for p in patterns if not any(matches(p, c) for c in cases)]
    chosen = [
        c
        for c in cases
        if (not patterns or any(matches(p, c) for p in patterns)) and (fixtures == "all" or c.kind == fixtures)
    ]
    return chosen, unmatched


# --------------------------------------------------------------------------- CLI


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list the built-in cases, their availability here and coverage warnings")
    p.add_argument("--bundle", metavar="DIR", help="list a skill bundle's cases instead of the built-in ones")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("show", help="show what a subject of one case sees (never its truth)")
    p.add_argument("label", help="case label, <namespace>/<case_id>")
    p.add_argument("--bundle", metavar="DIR", help="look the label up in a skill bundle instead of the built-in cases")
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("run", help="run cases with a subject and write a run folder")
    p.add_argument(
        "-k",
        dest="patterns",
        action="append",
        metavar="PATTERN",
        help="select cases whose label contains PATTERN (or matches it as a glob); repeatable",
    )
    p.add_argument(
        "--subject",
        default="reference",
        help="reference | nop | python:package.module:function | command:<shell command> (default: reference)",
    )
    p.add_argument("--samples", type=int, default=1, metavar="N", help="samples per case (default 1)")
    p.add_argument("--fixtures", choices=FIXTURE_CHOICES, default="all", help="run only synthetic or curated cases")
    p.add_argument("--out", metavar="DIR", help="outcome root (default: $IMAGEBENCH_OUTCOME_DIR or ./outcomes)")
    p.add_argument("--timeout", type=float, metavar="S", help="subject time limit in seconds (default: each case's)")
    p.add_argument("--quiet", action="store_true", help="no progress bar and no table; the tally and the run folder only")
    p.add_argument("--bundle", metavar="DIR", help="run a skill bundle's cases (imagebench.bundle) instead of the built-in ones")
    p.add_argument(
        "--suite",
        metavar="SUITE",
        help="run a pinned suite (a suite file, or NAME / NAME@REVISION in ./suites); verified first (imagebench.suite)",
    )
    p.add_argument("--sample", default="all", metavar="POLICY", help="with --suite: all | first:N | seeded:N (default all)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="with --suite: the replicate seed of the assignment (default 0)")
    p.add_argument("--suites-dir", metavar="DIR", help="with --suite: suite files and aliases.json (default: $IMAGEBENCH_SUITES or ./suites)")
    p.add_argument(
        "--workers", type=int, metavar="N", help="run the units on a local dask cluster of N processes (imagebench.executor)"
    )
    p.add_argument(
        "--scheduler", metavar="ADDR", help="run the units on the workers of an existing dask cluster, tcp://HOST:PORT"
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="take up an interrupted run: run only its units without a complete summary (subject, cases and samples from run.json)",
    )
    p.add_argument("--no-report", action="store_true", help="do not write report.html into the run folder at the end")
    p.set_defaults(func=_cmd_run)


def _console() -> Any:
    import os

    from rich.console import Console

    # In a log (not a terminal) rich would assume 80 columns and squeeze the labels; allow more.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120
    return Console(highlight=False, soft_wrap=False, width=width)


def _cmd_list(args: argparse.Namespace) -> int:
    from rich.table import Table

    from imagebench import cases as builtin
    from imagebench.case import presentation_warnings

    all_cases, where = _listed_cases(args)
    console = _console()
    if not all_cases:
        console.print(f"no {where} cases are registered")
        return 0
    table = Table(title=f"{len(all_cases)} {where} cases")
    for col in ("label", "kind", "class", "available"):
        table.add_column(col, overflow="fold")
    for case in all_cases:
        ok, why = case.available()
        if presents_tensor(case):
            why = f"{why}; needs a data plane" if why else "needs a data plane (tensor presentation)"
        table.add_row(case.label, case.kind, case.case_class, ("yes" + (f"; {why}" if why else "")) if ok else f"no: {why}")
    console.print(table)
    warnings = presentation_warnings(builtin.skills(), all_cases)
    for w in warnings:
        console.print(f"[yellow]coverage warning:[/yellow] {w}")
    return 0


def _listed_cases(args: argparse.Namespace) -> tuple[list[Case], str]:
    """The cases ``list``/``show`` look at: a bundle's (``--bundle DIR``) or the built-in ones."""
    from imagebench import cases as builtin
    from imagebench.bundle import cases_from_args

    bundle_cases = cases_from_args(args)  # None unless --bundle; warnings go to stderr
    if bundle_cases is not None:
        return bundle_cases, "bundle"
    return builtin.all_cases(), "built-in"


def _find_case(args: argparse.Namespace) -> Case:
    import difflib

    from imagebench.cli import UsageError

    label = args.label
    all_cases, _ = _listed_cases(args)
    labels = [c.label for c in all_cases]
    for case in all_cases:
        if case.label == label:
            return case
    close = difflib.get_close_matches(label, labels, n=5, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known labels: {', '.join(labels) or '(none)'}"
    raise UsageError(f"no case labelled {label!r}{hint}")


def _cmd_show(args: argparse.Namespace) -> int:
    from imagebench.session import case_prompt

    case = _find_case(args)
    ok, why = case.available()
    lines = [
        f"label:     {case.label}",
        f"class:     {case.case_class}",
        f"kind:      {case.kind}" + (f" ({_spec_about(case)})" if _spec_about(case) else ""),
        f"available: {'yes' if ok else 'no: ' + why}",
        f"timeout:   {case.timeout_s:g} s",
        f"revision:  {case.revision}",
        "",
        "persona:",
        *(f"  {line}" for line in (case.persona or "(none)").splitlines()),
        "",
        "prompt:",
        *(f"  {line}" for line in case_prompt(case).rstrip().splitlines()),
        "",
        "layers:",
    ]
    for layer in case.layers:
        extra = []
        if layer.chunks:
            extra.append(f"chunks={tuple(layer.chunks)}")
        if layer.dim_labels:
            extra.append(f"dims={tuple(layer.dim_labels)}")
        lines.append(
            f"  {layer.name}: {layer.kind}, presented as {layer.presentation}, data key {layer.key!r}"
            + (f", {', '.join(extra)}" if extra else "")
        )
    lines.append("")
    lines.append("collect:")
    for c in case.collect:
        lines.append(f"  {c.name} ({c.what})" + (f": {c.description}" if c.description else ""))
    lines.append("")
    lines.append("metrics (pass when value <= limit):")
    limits = dict(case.tolerances)
    if limits:
        for metric, limit in limits.items():
            lines.append(f"  {metric} <= {limit:g}")
    else:
        lines.append("  (no limits declared on the fixture spec)")
    print("\n".join(lines))
    return 0


def _spec_about(case: Case) -> str:
    spec = case.fixture
    name = getattr(spec, "builder_name", None)
    if name:
        return f"builder {name}, seed {getattr(spec, 'seed', '?')}"
    return ""


def checked_run_args(args: argparse.Namespace) -> Subject:
    """The checks every ``imagebench run`` makes of ``--samples``, ``--timeout`` and ``--subject``;
    returns the parsed subject. Bad values are a UsageError (exit 2)."""
    from imagebench.cli import UsageError
    from imagebench.subjects import SubjectError, parse_subject

    if args.samples < 1:
        raise UsageError(f"--samples must be at least 1, got {args.samples}")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    try:
        return parse_subject(args.subject)
    except SubjectError as exc:
        raise UsageError(str(exc)) from None


def _cmd_run(args: argparse.Namespace) -> int:
    from imagebench import cases as builtin
    from imagebench.cli import UsageError

    if getattr(args, "resume", None):
        from imagebench.executor import cmd_resume

        return cmd_resume(args)
    if getattr(args, "suite", None):
        from imagebench.suite.cli import run_suite

        return run_suite(args)
    if getattr(args, "sample", "all") != "all" or getattr(args, "seed", 0) != 0:
        raise UsageError("--sample and --seed choose cases from a pinned suite; give --suite too")

    subject = checked_run_args(args)
    from imagebench.bundle import cases_from_args

    bundle_cases = cases_from_args(args)  # None unless --bundle
    all_cases = bundle_cases if bundle_cases is not None else builtin.all_cases()
    chosen, unmatched = select_cases(all_cases, args.patterns, args.fixtures)
    if unmatched:
        labels = "\n".join(f"  {c.label}" for c in all_cases) or "  (none registered)"
        raise UsageError(f"-k {', '.join(map(repr, unmatched))} matched no case; valid labels:\n{labels}")
    if not chosen:
        raise UsageError(f"no case selected (-k {args.patterns or '-'}, --fixtures {args.fixtures})")
    selection = {"k": list(args.patterns or []), "fixtures": args.fixtures, "timeout": args.timeout}
    if args.bundle:
        selection["bundle"] = str(args.bundle)
    from imagebench.executor import ExecutorError, finish_cli, parallel_from_args

    parallel = parallel_from_args(args)
    try:
        result = run_cases(
            chosen,
            subject,
            samples=args.samples,
            out=args.out,
            progress=not args.quiet,
            timeout=args.timeout,
            selection=selection,
            workers=parallel.workers,
            scheduler=parallel.scheduler,
        )
    except ExecutorError as exc:
        if exc.usage:
            raise UsageError(str(exc)) from None
        print(f"imagebench run: {exc}", file=sys.stderr)
        return 1
    console = _console()
    if not args.quiet:
        console.print(results_table(result))
    console.print(tally_line(result))
    finish_cli(args, result, console)
    return result.exit_code


def tally_line(result: RunResult) -> str:
    verdicts = list(result.verdicts.values())
    counts = {v: verdicts.count(v) for v in ("pass", "fail", "skipped")}
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(result.record.counts.items()))
    if not any(v != "skipped" for v in verdicts):
        return f"nothing was scored: {counts['skipped']} case(s) skipped ({statuses})"
    return f"{counts['pass']} passed, {counts['fail']} failed, {counts['skipped']} skipped ({statuses})"


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4g}"


def results_table(result: RunResult) -> Any:
    """A rich table: one row per case with its status, each metric as value/limit, the first reason
    when it did not pass, and the verdict."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{result.record.subject}: {len(result.samples)} case(s) x {result.record.samples} sample(s)")
    table.add_column("case", overflow="fold")
    table.add_column("status")
    table.add_column("metrics (value / limit)", overflow="fold")
    table.add_column("pass")
    styles = {"pass": "green", "fail": "red", "skipped": "yellow"}
    verdicts = result.verdicts
    for label, samples in result.samples.items():
        verdict = verdicts[label]
        counts: dict[str, int] = {}
        for s in samples:
            counts[s.status] = counts.get(s.status, 0) + 1
        status = ", ".join(k if v == 1 and len(samples) == 1 else f"{k} x{v}" for k, v in counts.items())
        flagged = sorted({flag for s in samples for flag in s.flags})
        if flagged:
            status += "".join(f"\n[magenta]{flag}[/]" for flag in flagged)
        summary = result.summaries.get(label)
        metric_lines = []
        if summary is not None:
            limits = summary.extra.get("limits", {})
            for metric, mean in summary.metric_means.items():
                metric_lines.append(f"{metric} {_fmt(mean)} / {_fmt(limits.get(metric))}")
        reasons = summary.extra.get("reasons", []) if summary is not None else []
        if reasons and (verdict != "pass" or not metric_lines):
            reason = reasons[0] if len(reasons[0]) <= 160 else reasons[0][:157] + "..."
            metric_lines.append(f"[dim]{escape(reason)}[/dim]")
        if not metric_lines:
            metric_lines.append("-")
        passed = sum(1 for s in samples if s.status == "ok")
        mark = verdict if len(samples) == 1 or verdict == "skipped" else f"{verdict} ({passed}/{len(samples)})"
        table.add_row(label, status, "\n".join(metric_lines), f"[{styles[verdict]}]{mark}[/]")
    return table



# --------------------------------------------------------------------------- scoring an attempt a caller collected
# (the napari bench panel runs the subject itself, then scores through here: one code path, one summary.json)


def new_run_dir(root: str | Path | None = None) -> tuple[Path, str]:
    """A fresh ``run-<UTC timestamp>`` folder under ``root`` (default ``artifact_root()``) and its start time."""
    if root is None:
        from imagebench.artifacts import artifact_root

        root = artifact_root()
    stamp, started = _utc_stamp()
    return _new_run_dir(Path(root), stamp), started


def score_attempt(
    case: Case,
    fixture: Fixture | PreparedFixture,
    attempt: Attempt,
    root: str | Path,
    *,
    sample: int,
    run: SubjectRun | None = None,
    times: Mapping[str, float] | None = None,
    flags: Sequence[str] = (),
    started: float | None = None,
) -> SampleSummary:
    """Verify ``attempt`` and write sample ``sample``'s summary under ``root``, as :func:`run_unit` does
    after the subject's turn; for a caller that ran the subject and collected the attempt itself.

    ``run`` is how the subject's turn ended, when the harness ran it: a harness error or a timeout
    ends the sample with that status unverified, and an error it raised goes into the notes and the
    reason. ``attempt.notes["unreadable"]`` turns ``no-result`` into ``unscorable-result``. ``times``
    are carried into the summary with ``verify_s`` and ``total_s`` added (``total_s`` from ``started``,
    a ``time.perf_counter()`` value, else the sum of the parts). Never raises for what the fixture
    or the verifier does: each ends as a status (``harness-error`` for a verifier that crashes).
    """
    from imagebench.artifacts import write_report
    from imagebench.fixture import Outcome
    from imagebench.records import SampleSummary, read_record
    from imagebench.subjects import SubjectRun

    root = Path(root)
    name = attempt.subject
    times = dict(times or {})
    flags = sorted(set(flags))
    prepared = fixture if isinstance(fixture, PreparedFixture) else PreparedFixture(fixture)
    notes = {k: attempt.notes[k] for k in ("exit_code", "unreadable") if k in attempt.notes}

    def total() -> None:
        times["total_s"] = (time.perf_counter() - started) if started is not None else sum(
            v for k, v in times.items() if k != "total_s"
        )

    def plain(status: str, reason: str, fx: Fixture | None, **kw: Any) -> SampleSummary:
        total()
        return _write_plain(case, name, sample, root, status=status, reason=reason, fixture=fx, times=times, **kw)

    if prepared.fixture is None:
        return plain(prepared.status or "harness-error", prepared.reason, None)
    fx = prepared.fixture
    run = run if run is not None else SubjectRun(seconds=times.get("subject_s", 0.0))
    if run.harness_error:
        return plain("harness-error", run.harness_error, fx, flags=flags)
    if run.timed_out:
        return plain("timeout", run.timeout_reason, fx, flags=flags, detail=notes)
    if run.error:
        attempt.notes["subject_error"] = run.error

    vstart = time.perf_counter()
    try:
        outcome = case.verify(fx, attempt)
    except Exception as exc:
        times["verify_s"] = time.perf_counter() - vstart
        return plain("harness-error", f"the verifier raised {type(exc).__name__}: {exc}", fx, flags=flags)
    times["verify_s"] = time.perf_counter() - vstart
    if not isinstance(outcome, Outcome):
        return plain("harness-error", f"the verifier returned {type(outcome).__name__}, expected an Outcome", fx, flags=flags)

    status = outcome.status
    if status == "no-result" and notes.get("unreadable"):
        status = "unscorable-result"  # it left something; nobody could read it
    reason = _reason(status, outcome, attempt, run)
    json_notes = _json_notes(attempt.notes)
    if json_notes.get("why_not") or len(json_notes) > 2:  # more than the plain "left"/"why_not" bookkeeping
        outcome.detail.setdefault("attempt_notes", json_notes)
    total()
    extra: dict[str, Any] = {"times": dict(times), "case_class": case.case_class, "flags": flags}
    if _seed(case) is not None:
        extra["seed"] = _seed(case)
    try:
        _record_artifact_range(outcome)
        path = write_report(outcome, root, subject=name, sample=sample, status=status, reason=reason, extra=extra)
        return read_record(path, SampleSummary)
    except Exception as exc:
        return plain("harness-error", f"writing the report failed: {type(exc).__name__}: {exc}", fx, flags=flags)


def _record_artifact_range(outcome: Outcome) -> None:
    """Record in ``outcome.detail["artifact_range"]`` the one contrast range ``write_report`` gives
    all of the outcome's PNGs (for the HTML report). Each artifact is read here once and kept as
    an array, so ``write_report`` does not read a lazy one again."""
    if not outcome.artifacts or "artifact_range" in outcome.detail:
        return
    from imagebench.artifacts import _numeric, shared_range

    arrays = {}
    for key, image in outcome.artifacts.items():
        arr = _numeric(image)
        arrays[key] = image if arr is None else arr
    outcome.artifacts.update(arrays)
    if any(_numeric(a) is not None for a in arrays.values()):
        lo, hi = shared_range(*arrays.values())
        outcome.detail["artifact_range"] = [lo, hi]
