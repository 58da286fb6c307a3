"""Verdicts: of a case over its samples, of a run over its cases, and the exit code a run leaves."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.records import CaseSummary, RunRecord, SampleSummary

# Verdicts of a case, and which of them keep a run from passing (with the exit code they give).
VERDICTS: tuple[str, ...] = ("pass", "fail", "blocked", "error", "skipped")
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_BLOCKED, EXIT_INCOMPLETE, EXIT_DIED = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
# A sample in one of these statuses is not a measurement of the subject: left out of a verdict.
NOT_MEASURED: frozenset[str] = frozenset(
    {"skipped", "harness-error", "infra-error", "blocked", "stopped", "not-attempted"}
)
EXIT_MEANINGS: dict[int, str] = {
    EXIT_PASSED: "every selected case ran and passed",
    EXIT_FAILED: "a case failed (a wrong or missing answer, a timeout, a resource limit, a subject error, tampering)",
    EXIT_USAGE: "a usage error: bad arguments, nothing was run",
    EXIT_BLOCKED: "no case failed, but a case was blocked (its scoring contract is missing or ineligible, or no channel of the harness's observed a trigger case)",
    EXIT_INCOMPLETE: "no case failed or was blocked, but a case was skipped or ended by a harness or infrastructure error",
    EXIT_DIED: "the run ended without finishing (its process was ended from inside, e.g. by a subject)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGINT): the run folder and the command that resumes it are printed on stderr",
}


def status_counts(samples: Iterable[SampleSummary]) -> dict[str, int]:
    """Each status's count, in the order they first come (a case's stored samples from their
    columns, none read: :mod:`imagebench.runs.columns`)."""
    from imagebench.runs.columns import statuses_of

    counts: dict[str, int] = {}
    for status in statuses_of(samples):
        counts[status] = counts.get(status, 0) + 1
    return counts


def case_verdict(samples: Sequence[SampleSummary]) -> str:
    """A case's verdict over its samples, most telling first.

    ``fail`` when any measured sample is not ``ok`` (a timeout, a subject error, a missing or wrong
    answer, tampering: all count against the subject); else ``blocked`` when a sample's scoring
    contract was missing (reported apart, never a zero); else ``error`` when the harness failed a
    sample or a sample was skipped beside ones that ran (incomplete); ``skipped`` when every sample
    was; ``pass`` when every sample is ``ok``.
    """
    from imagebench.runs.columns import statuses_of

    return _verdict_of(statuses_of(samples))


def _verdict_of(statuses: Sequence[str]) -> str:
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


def tallied_verdict(counts: Mapping[str, int], summary: CaseSummary | None) -> str:
    """:func:`checked_verdict` from the checked samples' status counts (a reader's ``Tally``), none held."""
    verdict = _verdict_of([status for status, n in counts.items() if n > 0])
    return _consistent(verdict, summary)


def checked_verdict(samples: Sequence[SampleSummary], summary: CaseSummary | None) -> str:
    """A case's verdict from its checked samples, never its summary's say-so: only the summary's
    check across samples (a bundle's rerun class) can turn a pass into a fail. ``summary`` is one
    the reader checked against its journal line (:func:`imagebench.runs.reader.read_run`)."""
    return _consistent(case_verdict(samples), summary)


def _consistent(verdict: str, summary: CaseSummary | None) -> str:
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
    # a list per case; a resumed case's stored samples (runs.columns.StoredSamples: those an earlier
    # pass left are read back from the folder when looked at)
    samples: dict[str, Sequence[SampleSummary]] = field(default_factory=dict)
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
