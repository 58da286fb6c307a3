"""The run folder: its layout, its names, the verdict of a case, and the one reader of it all.

A run folder is ``run-<UTC timestamp>/`` holding ``run.json`` (:class:`~imagebench.records.RunRecord`),
``receipt.json``, ``journal.jsonl`` (:mod:`imagebench.runs.journal`), ``report.html`` and, per subject
and case, ``<subject>/<namespace>/<case_id>/summary.json`` over ``sample-<n>/summary.json`` with the
sample's artifacts beside it. Everything that writes or reads one goes through here: the runner
writes samples into :func:`sample_dir`, the executor and the panel close a run with
:func:`closing_record`, and the report, ``compare``, ``--resume``, the napari reader and the panel
read it with :func:`read_run`.

The reader trusts nothing it did not check. A sample summary counts only when it parses as a
record of its own label, subject and sample and its bytes match the digest the journal took when
it was written; anything else is named in :attr:`SampleEntry.problem` and left out, so a summary
edited by hand (a ``nop`` forged to ``ok``) is caught, not believed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from imagebench.records import CaseSummary, RunRecord, SampleSummary
    from imagebench.runs.journal import JournalEntry

RUN_RECORD = "run.json"
RECEIPT = "receipt.json"
REPORT = "report.html"
SUMMARY = "summary.json"

# Verdicts of a case, and which of them keep a run from passing (with the exit code they give).
VERDICTS: tuple[str, ...] = ("pass", "fail", "blocked", "error", "skipped")
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_BLOCKED, EXIT_INCOMPLETE, EXIT_DIED = 0, 1, 2, 3, 4, 5
# A sample in one of these statuses is not a measurement of the subject: left out of a verdict.
NOT_MEASURED: frozenset[str] = frozenset({"skipped", "harness-error", "blocked", "stopped"})
EXIT_MEANINGS: dict[int, str] = {
    EXIT_PASSED: "every selected case ran and passed",
    EXIT_FAILED: "a case failed (a wrong or missing answer, a timeout, a resource limit, a subject error, tampering)",
    EXIT_USAGE: "a usage error: bad arguments, nothing was run",
    EXIT_BLOCKED: "no case failed, but a case was blocked (its scoring contract is missing or ineligible)",
    EXIT_INCOMPLETE: "no case failed or was blocked, but a case was skipped or ended by a harness error",
    EXIT_DIED: "the run ended without finishing (its process was ended from inside, e.g. by a subject)",
}


class RunFolderError(ValueError):
    """A run folder cannot be read (names the file, the field and what was expected)."""


class _Labelled(Protocol):
    namespace: str
    case_id: str


# --------------------------------------------------------------------------- layout and names


def sample_dir(run_dir: str | os.PathLike[str], subject_name: str, case: _Labelled, sample: int) -> Path:
    """``<run>/<subject>/<namespace>/<case_id>/sample-<n>`` (the folder ``write_report`` uses)."""
    from imagebench.runs.artifacts import report_dir

    return report_dir(run_dir, subject_name, case.namespace, case.case_id, sample)


def case_dir(run_dir: str | os.PathLike[str], subject_name: str, case: _Labelled) -> Path:
    from imagebench.runs.artifacts import report_dir

    return report_dir(run_dir, subject_name, case.namespace, case.case_id)


def label_dir(run_dir: str | os.PathLike[str], subject_name: str, label: str) -> Path:
    """:func:`case_dir` for a case known only by its label ``<namespace>/<case_id>``."""
    from imagebench.runs.artifacts import report_dir

    namespace, _, case_id = label.partition("/")
    return report_dir(run_dir, subject_name, namespace, case_id)


def utc_stamp() -> tuple[str, str]:
    """``(folder stamp, ISO time)`` of now."""
    now = datetime.now(UTC)
    return now.strftime("%Y%m%dT%H%M%SZ"), now.isoformat(timespec="seconds")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_run_dir(root: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """A fresh ``run-<UTC timestamp>`` folder under ``root`` (default ``artifact_root()``) and its start time."""
    if root is None:
        from imagebench.runs.artifacts import artifact_root

        root = artifact_root()
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    stamp, started = utc_stamp()
    for n in range(1000):
        path = root / (f"run-{stamp}" if n == 0 else f"run-{stamp}-{n}")
        try:
            path.mkdir()
            return path, started
        except FileExistsError:
            continue
    raise RunFolderError(f"{root}: could not create a run folder (1000 run-{stamp}* folders exist)")


def _sample_index(path: Path) -> int | None:
    try:
        return int(path.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return None


# --------------------------------------------------------------------------- verdicts and summaries


def status_counts(samples: Iterable[SampleSummary]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.status] = counts.get(s.status, 0) + 1
    return counts


def case_verdict(samples: Sequence[SampleSummary]) -> str:
    """A case's verdict over its samples, most telling first.

    ``fail`` when any measured sample is not ``ok`` (a timeout, a subject error, a missing or wrong
    answer, tampering: all count against the subject); else ``blocked`` when a sample's scoring
    contract was missing (reported apart, never a zero); else ``error`` when the harness failed a
    sample or a sample was skipped beside ones that ran (incomplete); ``skipped`` when every sample
    was; ``pass`` when every sample is ``ok``.
    """
    statuses = [s.status for s in samples]
    if not statuses or all(st == "skipped" for st in statuses):
        return "skipped"
    if any(st not in NOT_MEASURED and st != "ok" for st in statuses):
        return "fail"
    if "blocked" in statuses:
        return "blocked"
    if any(st in NOT_MEASURED for st in statuses):
        return "error"
    return "pass"


def samples_for(case: Any, samples: int) -> int:
    """How many samples ``case`` runs: ``samples``, or more when the case asks for more
    (``case.meta["min_samples"]``, as a bundle's rerun case does)."""
    return max(samples, int(case.meta.get("min_samples", 1)))


def summarize_case(case: Any, subject_name: str, samples: Sequence[SampleSummary], build_s: float) -> CaseSummary:
    """The case's ``summary.json``: counts, metric means, the first reasons and its verdict (which a
    check across samples, as a bundle's rerun class has, may turn to ``fail``)."""
    from imagebench.records import CaseSummary

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
    checks = [str(c) for c in (getattr(case, "meta", {}) or {}).get("checks") or []]
    if checks:  # a bundle case's grading checklist, for a person grading (report, panel)
        extra["checks"] = checks
    across = getattr(case.verify, "across_samples", None)
    if callable(across) and verdict != "skipped":  # a case judged over all its samples (a bundle's rerun class)
        try:
            consistency = dict(across(samples))
        except Exception as exc:
            consistency = {
                "consistent": False,
                "reason": f"the check across samples raised {type(exc).__name__}: {exc}",
            }
        extra["consistency"] = consistency
        if not consistency.get("consistent"):
            verdict = "fail"
            reasons.insert(0, f"inconsistent across samples: {consistency.get('reason', '')}")
    kinds = {s.sandbox for s in samples if s.sandbox is not None}
    return CaseSummary(
        label=case.label,
        subject=subject_name,
        kind=case.kind,
        case_class=case.case_class,
        samples=len(samples),
        sandbox=kinds.pop() if len(kinds) == 1 else None,
        counts=status_counts(samples),
        passed=sum(1 for s in samples if s.status == "ok"),
        scored=sum(1 for s in samples if s.status in ("ok", "wrong-answer")),
        metric_means=means,
        extra={"verdict": verdict, "limits": limits, "reasons": reasons[:5], "build_s": build_s, **extra},
    )


def write_case_summary(
    run_dir: Path, case: Any, subject_name: str, samples: Sequence[SampleSummary], build_s: float
) -> CaseSummary:
    from imagebench.records import write_record

    summary = summarize_case(case, subject_name, samples, build_s)
    write_record(case_dir(run_dir, subject_name, case) / SUMMARY, summary)
    return summary


def checked_verdict(samples: Sequence[SampleSummary], summary: CaseSummary | None) -> str:
    """A case's verdict from its checked samples, never its summary's say-so: only the summary's
    check across samples (a bundle's rerun class) can turn a pass into a fail."""
    verdict = case_verdict(samples)
    consistency = summary.extra.get("consistency") if summary is not None else None
    if verdict == "pass" and isinstance(consistency, dict) and not consistency.get("consistent"):
        return "fail"
    return verdict


def verdicts_of(samples: Mapping[str, Sequence[SampleSummary]], summaries: Mapping[str, CaseSummary]) -> dict[str, str]:
    """Each case's verdict: its summary's (which a check across samples may turn to fail), else its samples'."""
    out: dict[str, str] = {}
    for label, got in samples.items():
        summary = summaries.get(label)
        verdict = summary.extra.get("verdict") if summary is not None else None
        out[label] = verdict if isinstance(verdict, str) else case_verdict(got)
    return out


def run_passed(verdicts: Mapping[str, str]) -> bool:
    """Every selected case ran and passed (a skipped, blocked or errored case is not a pass)."""
    return bool(verdicts) and all(v == "pass" for v in verdicts.values())


def run_exit_code(verdicts: Mapping[str, str]) -> int:
    """0 only when every case passed; else 1 for any failure, 3 for a blocked case, 4 for an
    incomplete run (a case skipped or ended by a harness error). 2 is a usage error, 5 a run that died."""
    values = set(verdicts.values())
    if not values:
        return EXIT_INCOMPLETE
    if "fail" in values:
        return EXIT_FAILED
    if "blocked" in values:
        return EXIT_BLOCKED
    if values - {"pass"}:
        return EXIT_INCOMPLETE
    return EXIT_PASSED


@dataclass
class RunResult:
    """What a run left: its folder, its record, every sample summary and every case summary."""

    run_dir: Path
    record: RunRecord
    samples: dict[str, list[SampleSummary]] = field(default_factory=dict)
    summaries: dict[str, CaseSummary] = field(default_factory=dict)

    @property
    def verdicts(self) -> dict[str, str]:
        return verdicts_of(self.samples, self.summaries)

    @property
    def passed(self) -> bool:
        return run_passed(self.verdicts)

    @property
    def exit_code(self) -> int:
        return run_exit_code(self.verdicts)


def closing_record(
    record: RunRecord,
    samples: Mapping[str, Sequence[SampleSummary]],
    summaries: Mapping[str, CaseSummary],
    *,
    complete: bool,
    extra: Mapping[str, Any] | None = None,
    update: Mapping[str, Any] | None = None,
) -> RunRecord:
    """``record`` as a pass over the run leaves it: finished now, its counts, verdicts and whether it passed."""
    counts = status_counts(s for got in samples.values() for s in got)
    verdicts = verdicts_of(samples, summaries)
    fields: dict[str, Any] = {
        "finished": now_iso(),
        "counts": counts,
        "complete": complete,
        "extra": {
            **(extra if extra is not None else record.extra),
            "verdicts": verdicts,
            "passed": run_passed(verdicts),
        },
        **(update or {}),
    }
    return record.model_copy(update=fields)


# --------------------------------------------------------------------------- the reader


@dataclass
class SampleEntry:
    """One sample summary as found on disk; ``problem`` says why it cannot be used ('' when it can)."""

    label: str
    sample: int
    path: Path
    summary: SampleSummary | None = None
    data: bytes | None = None
    problem: str = ""
    journaled: bool = False

    @property
    def usable(self) -> bool:
        return self.summary is not None and not self.problem


@dataclass
class RunContents:
    """Everything a run folder holds, each record checked: see :func:`read_run`."""

    run_dir: Path
    record: RunRecord
    journal: list[JournalEntry] = field(default_factory=list)
    units: dict[tuple[str, int], SampleEntry] = field(default_factory=dict)
    case_summaries: dict[str, CaseSummary] = field(default_factory=dict)
    case_problems: dict[str, list[str]] = field(default_factory=dict)
    receipt: dict[str, Any] | None = None
    receipt_problem: str = ""

    def entries(self, label: str) -> list[SampleEntry]:
        return sorted((e for (lab, _), e in self.units.items() if lab == label), key=lambda e: e.sample)

    def samples(self, label: str) -> list[SampleSummary]:
        """The usable sample summaries of ``label``, in sample order."""
        return [e.summary for e in self.entries(label) if e.usable and e.summary is not None]

    @property
    def labels(self) -> list[str]:
        seen = dict.fromkeys(self.record.cases)
        seen.update(dict.fromkeys(label for label, _ in self.units))
        return list(seen)

    @property
    def problems(self) -> list[str]:
        """Every sample that was left out and why, one line each (``label#n: why``)."""
        out = [
            f"{e.label}#{e.sample}: {e.problem}"
            for e in sorted(self.units.values(), key=lambda e: (e.label, e.sample))
            if e.problem
        ]
        for label, problems in self.case_problems.items():
            out.extend(f"{label}: {p}" for p in problems)
        return out


def read_record_of_run(run_dir: str | os.PathLike[str]) -> RunRecord:
    """``run.json`` of a run folder; RunFolderError naming the file when it is not there or not valid."""
    from imagebench.records import RecordError, RunRecord, read_record

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir}: not a folder; expected a run folder (run-<UTC timestamp>) holding run.json")
    try:
        return read_record(run_dir / RUN_RECORD, RunRecord)
    except RecordError as exc:
        raise RunFolderError(str(exc)) from None


def parse_summary(path: Path, data: bytes) -> SampleSummary:
    """A sample summary from its bytes; RecordError naming the file and the field."""
    from pydantic import ValidationError

    from imagebench.records import READABLE_VERSIONS, RecordError, SampleSummary

    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise RecordError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    version = raw.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise RecordError(f"{path}: field 'schema_version' is {version!r}, expected one of {list(READABLE_VERSIONS)}")
    try:
        return SampleSummary.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise RecordError(f"{path}: field {where!r}: {first['msg']}") from None


def _read_sample(path: Path, label: str, subject: str, n: int, line: JournalEntry | None) -> SampleEntry:
    from imagebench.records import RecordError
    from imagebench.runs.journal import digest

    entry = SampleEntry(label=label, sample=n, path=path, journaled=line is not None)
    try:
        entry.data = path.read_bytes()
    except FileNotFoundError:
        entry.problem = "missing"
        return entry
    except OSError as exc:
        entry.problem = f"summary.json could not be read ({exc})"
        return entry
    try:
        entry.summary = parse_summary(path, entry.data)
    except RecordError as exc:
        entry.problem = f"summary.json is not a valid record ({str(exc).split(': ', 1)[-1]})"
        return entry
    wrong = [
        f"{name} is {got!r}, expected {want!r}"
        for name, got, want in (
            ("label", entry.summary.label, label),
            ("subject", entry.summary.subject, subject),
            ("sample", entry.summary.sample, n),
        )
        if got != want
    ]
    if wrong:
        entry.problem = f"summary.json belongs elsewhere: {'; '.join(wrong)}"
    elif line is not None and line.sha256 != digest(entry.data):
        entry.problem = "summary.json changed after it was journaled (digest mismatch)"
    return entry


def read_run(
    run_dir: str | os.PathLike[str],
    *,
    expected: Mapping[str, int] | None = None,
    require_journal: bool = True,
) -> RunContents:
    """Read a run folder, checking every record.

    ``expected`` maps each label to its number of samples (default: ``run.json``'s cases with its
    ``samples``, plus whatever sample folders are on disk). A sample is usable only when its summary
    parses, belongs where it lies, and matches its journal line. With ``require_journal`` (the
    default) a summary the journal never recorded is left out too (``not in the journal``); a
    resume passes False, since a kill can fall between a summary and its line.
    Raises RunFolderError only for a missing or unreadable ``run.json`` or journal.
    """
    from imagebench.records import CaseSummary, RecordError, read_record
    from imagebench.runs.journal import JOURNAL_NAME, JournalError, read_journal

    run_dir = Path(run_dir)
    record = read_record_of_run(run_dir)
    try:
        journal = read_journal(run_dir / JOURNAL_NAME)
    except JournalError as exc:
        raise RunFolderError(str(exc)) from None
    lines: dict[tuple[str, int], JournalEntry] = {}
    for entry in journal:
        if entry.event == "unit" and entry.label is not None and entry.sample is not None:
            lines[(entry.label, entry.sample)] = entry  # the last line for a unit wins
    contents = RunContents(run_dir=run_dir, record=record, journal=journal)
    wanted = dict(expected) if expected is not None else {label: record.samples for label in record.cases}
    for label, count in wanted.items():
        folder = label_dir(run_dir, record.subject, label)
        indices = set(range(count))
        if expected is None and folder.is_dir():
            indices |= {i for p in folder.glob("sample-*") if (i := _sample_index(p)) is not None}
        for n in sorted(indices):
            entry = _read_sample(folder / f"sample-{n}" / SUMMARY, label, record.subject, n, lines.get((label, n)))
            if require_journal and not entry.problem and not entry.journaled:
                entry.problem = "summary.json is not in the journal (written outside the run)"
            contents.units[(label, n)] = entry
        path = folder / SUMMARY
        if path.is_file():
            try:
                contents.case_summaries[label] = read_record(path, CaseSummary)
            except RecordError as exc:
                contents.case_problems.setdefault(label, []).append(str(exc).split(": ", 1)[-1])
    receipt = run_dir / RECEIPT
    if receipt.is_file():
        try:
            raw = json.loads(receipt.read_text(encoding="utf-8"))
            if isinstance(raw, dict):
                contents.receipt = raw
            else:
                contents.receipt_problem = f"receipt.json holds a {type(raw).__name__}, expected an object"
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            contents.receipt_problem = f"receipt.json is not readable ({type(exc).__name__})"
    else:
        contents.receipt_problem = "no receipt.json"
    return contents


def remove_stale_temporaries(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporary files an interrupted atomic write leaves (``.<name>.<random>.tmp``,
    ``.<name>.tmp.png``, ``.<name>.tmp.npy``); return what was removed."""
    from imagebench.runs.journal import LOCK_NAME

    removed: list[Path] = []
    for path in Path(run_dir).rglob(".*"):
        name = path.name
        if path.is_file() and name.endswith((".tmp", ".tmp.png", ".tmp.npy")) and name != LOCK_NAME:
            try:
                path.unlink()
                removed.append(path)
            except OSError:
                pass
    return removed
