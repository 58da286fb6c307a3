"""Calibration: whether a case's limits tell a good answer from a naive one, run for real.

Every case of a set is run once with its reference solution, its naive baseline (the first thing a
person would try: an identity transform, a global threshold, "no correction") and ``nop``. The
calibration of a case *holds* when the reference passes and the baseline and ``nop`` fail; anything
else is a warning naming what does not hold (:data:`NO_BASELINE`, :data:`BASELINE_PASSES`,
:data:`REFERENCE_FAILS`, :data:`NOP_PASSES`, and :data:`NO_REFERENCE` for a case that declares
none). Whatever source a case comes from (the built-in suite, a bundle, a user's tree), only
what the :class:`~imagebench.case.model.Case` holds is read (``case.reference``, ``case.baseline``),
so every case is calibrated the same way.

:func:`calibrate` writes a calibration folder ``<out>/calibration-<UTC timestamp>/`` holding one
ordinary run folder per subject (``reference/run-*``, ``baseline/run-*``, ``nop/run-*``) and
``calibration.json`` (:class:`CalibrationRecord`), and remembers each case's verdict in the state
folder (:mod:`imagebench.executor.calibrated`). ``imagebench calibrate`` prints it;
``tools/calibration_table.py`` renders the same result into docs/cases.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from imagebench.executor.calibrated import NO_BASELINE, NO_REFERENCE
from imagebench.records import Record, RecordError, read_record, write_record

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.runs.verdict import RunResult

SUBJECTS: tuple[str, ...] = ("reference", "baseline", "nop")
CALIBRATION_RECORD = "calibration.json"
CALIBRATION_SCHEMA_VERSION = 1

BASELINE_PASSES = "baseline passes: the limits cannot tell the naive answer from a good one"
REFERENCE_FAILS = "reference fails"
NOP_PASSES = "nop passes"

#: ``imagebench calibrate``'s exit codes (docs/running.md).
EXIT_HOLDS, EXIT_DOES_NOT_HOLD, EXIT_NOT_RUN = 0, 1, 4
EXIT_MEANINGS: dict[int, str] = {
    EXIT_HOLDS: "every selected case's calibration holds: the reference passes, the baseline and nop fail",
    EXIT_DOES_NOT_HOLD: "a case's calibration does not hold (no baseline, the baseline or nop passes, the reference fails)",
    2: "a usage error: bad arguments, nothing was run",
    EXIT_NOT_RUN: "no calibration failed to hold, but a case could not be run here (its fixture is unavailable)",
    5: "the command ended without finishing (its process was ended from inside, e.g. by a baseline)",
}

Verdict = Literal["ok", "warning", "not-run"]


class SubjectScore(Record):
    """One subject's first sample of one case, and the case's verdict for it."""

    status: str  # the sample's status (records.Status)
    verdict: str  # the case's verdict for this subject (runs.verdict: pass, fail, blocked, error, skipped)
    values: dict[str, float | None] = {}  # each metric's value (None: unavailable)
    fields: dict[str, str] = {}  # a structured answer: each field's verdict in words
    reason: str = ""  # why it did not pass (the sample's first reason), in full

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


class CaseCalibration(Record):
    """One case's calibration: its limits, each subject's score, the verdict and what does not hold."""

    label: str
    skill: str
    kind: str
    case_class: str
    limits: dict[str, float]
    fingerprint: str | None = None  # imagebench.executor.calibrated.calibration_fingerprint; None: it cannot be taken
    fingerprint_problem: str = ""
    scores: dict[str, SubjectScore] = {}
    verdict: Verdict
    problems: list[str] = []  # what does not hold, one warning each (NO_BASELINE, BASELINE_PASSES, ...)
    not_run: str = ""  # why the case did not run here (unavailable)


class CalibrationRecord(Record):
    """``calibration-<UTC timestamp>/calibration.json``: a calibration of a set of cases."""

    schema_version: Literal[1] = CALIBRATION_SCHEMA_VERSION
    created: str
    runs: dict[str, str] = {}  # subject -> its run folder, relative to the calibration folder
    selection: dict[str, Any] = {}
    cases: list[CaseCalibration] = []

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.cases)


def exit_code_of(cases: Sequence[CaseCalibration]) -> int:
    verdicts = {c.verdict for c in cases}
    if "warning" in verdicts:
        return EXIT_DOES_NOT_HOLD
    if "not-run" in verdicts:
        return EXIT_NOT_RUN
    return EXIT_HOLDS


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` left: its folder and its record (also written as ``calibration.json``)."""

    folder: Path
    record: CalibrationRecord

    @property
    def exit_code(self) -> int:
        return self.record.exit_code

    @property
    def cases(self) -> list[CaseCalibration]:
        return self.record.cases


def judge(has_reference: bool, has_baseline: bool, scores: Mapping[str, SubjectScore]) -> list[str]:
    """What does not hold of one case's calibration ([] when it holds), in the order the rule reads."""
    problems: list[str] = []
    ref = scores.get("reference")
    if not has_reference:
        problems.append(NO_REFERENCE)
    elif ref is None or not ref.passed:
        how = f" ({ref.status}" + (f": {ref.reason}" if ref.reason else "") + ")" if ref is not None else ""
        problems.append(REFERENCE_FAILS + how)
    base = scores.get("baseline")
    if not has_baseline:
        problems.append(NO_BASELINE)
    elif base is not None and base.passed:
        problems.append(BASELINE_PASSES)
    elif base is None or base.verdict != "fail":
        how = f"{base.status}: {base.reason}" if base is not None else "it did not run"
        problems.append(f"baseline not scored ({how}): the limits were not tried against the naive answer")
    nop = scores.get("nop")
    if nop is not None and nop.passed:
        problems.append(NOP_PASSES)
    elif nop is None or nop.verdict not in ("fail", "blocked"):
        how = f"{nop.status}: {nop.reason}" if nop is not None else "it did not run"
        problems.append(f"nop not scored ({how})")
    return problems


def _value(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _scores(result: RunResult) -> dict[str, SubjectScore]:
    """``{label: SubjectScore}`` of one subject's run: its first sample's values, the case's verdict."""
    verdicts = result.verdicts
    out: dict[str, SubjectScore] = {}
    for label, samples in result.samples.items():
        if not samples:
            continue
        first = samples[0]
        worst = next((s for s in samples if s.status != "ok"), first)
        answer = (first.answer or {}).get("fields") or {}
        said = {k: str(v.get("reason", "")) for k, v in answer.items() if isinstance(v, dict)}
        summary = result.summaries.get(label)
        reasons = list(summary.extra.get("reasons", [])) if summary is not None else []
        out[label] = SubjectScore(
            status=worst.status,
            verdict=verdicts.get(label, "error"),
            values={m.name: _value(m.value) for m in first.metrics},
            fields=said,
            reason=(reasons[0] if reasons else worst.reason or "") if verdicts.get(label) != "pass" else "",
        )
    return out


def calibrate(
    cases: Iterable[Case],
    *,
    out: str | Path | None = None,
    subjects: Sequence[str] = SUBJECTS,
    progress: bool = False,
    selection: Mapping[str, Any] | None = None,
    remember: bool = True,
) -> Calibration:
    """Run each case once with each subject and judge its calibration.

    A case without a reference (or a baseline) is not run with it: it gets :data:`NO_REFERENCE`
    (:data:`NO_BASELINE`). A case not available here is ``not-run`` with the reason. The folder is
    ``<out or artifact_root()>/calibration-<UTC timestamp>/``; with ``remember`` every verdict is
    kept in the state folder under the case's label and calibration fingerprint.
    """
    from imagebench.executor.calibrated import calibration_fingerprint, remember_calibration
    from imagebench.executor.run import run_cases
    from imagebench.runs.layout import artifact_root, new_stamped_dir
    from imagebench.subjects import parse_subject

    cases = list(cases)
    folder, started = new_stamped_dir(out if out is not None else artifact_root(), "calibration", "calibration folder")
    runnable: list[Case] = []
    not_run: dict[str, str] = {}
    for case in cases:
        ok, why = case.available()
        if ok:
            runnable.append(case)
        else:
            not_run[case.label] = why or "not available here"
    scores: dict[str, dict[str, SubjectScore]] = {c.label: {} for c in cases}
    runs: dict[str, str] = {}
    for spec in subjects:
        chosen = [
            c
            for c in runnable
            if (spec != "baseline" or c.baseline is not None) and (spec != "reference" or c.reference is not None)
        ]
        if not chosen:
            continue
        result = run_cases(
            chosen,
            parse_subject(spec),
            samples=1,
            out=folder / spec,
            progress=progress,
            selection={**dict(selection or {}), "calibration": folder.name},
        )
        runs[spec] = result.run_dir.relative_to(folder).as_posix()
        for label, score in _scores(result).items():
            scores[label][spec] = score
    rows: list[CaseCalibration] = []
    for case in cases:
        try:
            fingerprint, fp_problem = calibration_fingerprint(case), ""
        except Exception as exc:  # the calibration still stands; it is only not remembered
            fingerprint, fp_problem = None, f"{type(exc).__name__}: {exc}"
        label = case.label
        if label in not_run:
            verdict: Verdict = "not-run"
            problems: list[str] = []
        else:
            problems = judge(case.reference is not None, case.baseline is not None, scores[label])
            verdict = "warning" if problems else "ok"
        rows.append(
            CaseCalibration(
                label=label,
                skill=case.namespace,
                kind=case.kind,
                case_class=case.case_class,
                limits={k: float(v) for k, v in case.tolerances.items()},
                fingerprint=fingerprint,
                fingerprint_problem=fp_problem,
                scores=scores[label],
                verdict=verdict,
                problems=problems,
                not_run=not_run.get(label, ""),
            )
        )
    record = CalibrationRecord(created=started, runs=runs, selection=dict(selection or {}), cases=rows)
    write_record(folder / CALIBRATION_RECORD, record)
    if remember:
        remember_calibration(record, folder)
    return Calibration(folder, record)


def read_calibration(folder: str | Path) -> CalibrationRecord:
    """The ``calibration.json`` of a calibration folder; RecordError naming the file and the field."""
    return read_record(Path(folder) / CALIBRATION_RECORD, CalibrationRecord)


def is_calibration(folder: str | Path) -> bool:
    return (Path(folder) / CALIBRATION_RECORD).is_file()


def borne_out(folder: str | Path) -> str:
    """Why a calibration folder does not bear out a reported exit 0 ('' when it does): its record
    must read and call every case ``ok`` from the scores it holds, and each subject's run folder
    must read complete, with each case's verdict, computed again from its checked samples, the
    one the rule needs (the reference passes, the baseline and nop do not)."""
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.reader import read_run
    from imagebench.runs.verdict import checked_verdict

    try:
        record = read_calibration(folder)
    except RecordError as exc:
        return f"its calibration record cannot be read ({exc})"
    if not record.cases:
        return f"{folder}/{CALIBRATION_RECORD} holds no case"
    for case in record.cases:
        if case.verdict != "ok" or judge(True, True, case.scores):
            return f"case {case.label}'s calibration is not ok in {folder}"
    for spec in SUBJECTS:
        if spec not in record.runs:
            return f"{folder}/{CALIBRATION_RECORD} names no {spec} run"
        try:
            contents = read_run(Path(folder) / record.runs[spec])
        except RunFolderError as exc:
            return f"its {spec} run cannot be read ({exc})"
        if not contents.record.complete or contents.problems:
            return f"its {spec} run is not complete, or not what it journaled"
        for case in record.cases:
            verdict = checked_verdict(contents.samples(case.label), contents.case_summaries.get(case.label))
            if (verdict == "pass") != (spec == "reference"):
                return f"case {case.label} is {verdict} in its {spec} run, which calibration.json does not say"
    return ""


__all__ = [
    "BASELINE_PASSES",
    "CALIBRATION_RECORD",
    "NOP_PASSES",
    "NO_BASELINE",
    "NO_REFERENCE",
    "REFERENCE_FAILS",
    "SUBJECTS",
    "Calibration",
    "CalibrationRecord",
    "CaseCalibration",
    "SubjectScore",
    "borne_out",
    "calibrate",
    "judge",
    "read_calibration",
]
