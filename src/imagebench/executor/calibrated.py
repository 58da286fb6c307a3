"""What calibration remembers: each case's latest verdict, keyed by its label and calibration fingerprint.

The store is one file in the user's state folder (:mod:`imagebench.state`),
``<state>/calibration/calibrations.json`` (:class:`CalibrationStore`): outside every run folder,
masked from subjects, so nothing a subject does can mark a case calibrated. ``imagebench
calibrate`` writes it; ``imagebench list``, ``reindex`` and the panel's case detail read it
(:func:`calibration_notes`, :func:`calibration_line`).

A verdict stands for a case only while the case is the one calibrated: the **calibration
fingerprint** (:func:`calibration_fingerprint`) is taken over everything of the case's identity
that nothing needs building to know (:func:`imagebench.runs.fingerprint.collect_parts` with
``built=False``: prompt, layers, verifier, scoring closure, limits, fixture builder, seed and
params or the curated manifest's digests, ...) and the code closure of its reference and its
baseline (:func:`imagebench.runs.closure.code_closure`). Change a limit, the verifier, the seed,
the reference or the baseline, and the case reads as never calibrated again.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from imagebench.records import Record, RecordError, read_record, write_record

if TYPE_CHECKING:
    from imagebench.case.model import Case

STORE_DIR = "calibration"
STORE_FILE = "calibrations.json"
STORE_SCHEMA_VERSION = 1
#: How many fingerprints of one label are kept (the newest).
KEEP_PER_LABEL = 8
COMMAND = "imagebench calibrate"
#: What no run can calibrate: the case declares no reference, or no baseline (re-exported by
#: imagebench.executor.calibration with the other verdict words).
NO_BASELINE = "no baseline"
NO_REFERENCE = "no reference"


class _CaseVerdict(Protocol):
    """What the store keeps of one case of a calibration (``calibration.CaseCalibration``)."""

    label: str
    fingerprint: str | None
    verdict: Literal["ok", "warning", "not-run"]
    problems: list[str]
    not_run: str


class _Calibrated(Protocol):
    """What the store reads of a calibration (``calibration.CalibrationRecord``): the store sits
    below the running of a calibration, which imports it, and never imports it back."""

    created: str

    @property
    def cases(self) -> Sequence[_CaseVerdict]: ...


class StoredCalibration(Record):
    """One case's latest calibration verdict for one fingerprint."""

    verdict: Literal["ok", "warning", "not-run"]
    problems: list[str] = []
    not_run: str = ""
    at: str  # when the calibration started (UTC)
    folder: str  # the calibration folder it was written to


class CalibrationStore(Record):
    """``<state>/calibration/calibrations.json``: label -> calibration fingerprint -> the latest verdict."""

    schema_version: Literal[1] = STORE_SCHEMA_VERSION
    cases: dict[str, dict[str, StoredCalibration]] = {}


def calibration_fingerprint(case: Case) -> str:
    """``"sha256:<hex>"`` over the case's unbuilt identity and its reference's and baseline's code.

    Raises :class:`imagebench.fixtures.digest.FingerprintError` naming every part that cannot be taken.
    """
    from imagebench.fixtures.digest import FingerprintError, digest_json
    from imagebench.runs.closure import code_closure
    from imagebench.runs.fingerprint import collect_parts, fingerprint_from_parts

    parts, problems = collect_parts(case, built=False)
    subjects: dict[str, object] = {}
    for name, func in (("reference", case.reference), ("baseline", case.baseline)):
        try:
            subjects[name] = None if func is None else code_closure([func], what=f"{name} of {case.label}")
        except Exception as exc:
            problems.append(f"{name} of {case.label}: {type(exc).__name__}: {exc}")
    if problems:
        raise FingerprintError("; ".join(problems))
    return digest_json({"case": fingerprint_from_parts(case.label, case.revision, parts), "subjects": subjects})


def store_path() -> Path:
    from imagebench.state import state_dir

    return state_dir(STORE_DIR) / STORE_FILE


def read_store(path: Path | None = None) -> CalibrationStore:
    """The store (empty when it does not exist yet); RecordError naming the file and the field."""
    path = path or store_path()
    if not path.exists():
        return CalibrationStore()
    return read_record(path, CalibrationStore)


def remember_calibration(record: _Calibrated, folder: Path) -> Path:
    """Keep every case's verdict of ``record`` (a case without a fingerprint is not kept)."""
    path = store_path()
    lock = path.with_name(f".{STORE_FILE}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            store = read_store(path)
        except RecordError:  # an unreadable store is replaced, never a reason to lose this calibration
            store = CalibrationStore()
        for case in record.cases:
            if case.fingerprint is None:
                continue
            kept = dict(store.cases.get(case.label, {}))
            kept.pop(case.fingerprint, None)  # re-inserted last: the newest
            kept[case.fingerprint] = StoredCalibration(
                verdict=case.verdict,
                problems=case.problems,
                not_run=case.not_run,
                at=record.created,
                folder=str(folder),
            )
            store.cases[case.label] = dict(list(kept.items())[-KEEP_PER_LABEL:])
        write_record(path, store)
    finally:
        os.close(fd)
    return path


@dataclass(frozen=True)
class Remembered:
    """What the store says of one case as it is now."""

    label: str
    state: Literal["ok", "warning", "not-run", "never", "unknown"]
    problems: tuple[str, ...] = ()
    at: str = ""
    folder: str = ""
    why: str = ""  # unknown: why its fingerprint cannot be taken (or the store read)


def recall(cases: Iterable[Case], store: CalibrationStore | None = None) -> list[Remembered]:
    """The latest stored calibration of each case's current fingerprint (``never`` when there is none)."""
    out: list[Remembered] = []
    try:
        store = store if store is not None else read_store()
    except (RecordError, OSError) as exc:
        return [Remembered(c.label, "unknown", why=str(exc)) for c in cases]
    for case in cases:
        try:
            fingerprint = calibration_fingerprint(case)
        except Exception as exc:
            out.append(Remembered(case.label, "unknown", why=f"{type(exc).__name__}: {exc}"))
            continue
        found = store.cases.get(case.label, {}).get(fingerprint)
        if found is None:
            out.append(Remembered(case.label, "never"))
        else:
            out.append(
                Remembered(case.label, found.verdict, tuple(found.problems), found.at, found.folder, found.not_run)
            )
    return out


def _static_problems(case: Case) -> list[str]:
    return [
        p for p, missing in ((NO_REFERENCE, case.reference is None), (NO_BASELINE, case.baseline is None)) if missing
    ]


def calibration_notes(cases: Sequence[Case], *, store: CalibrationStore | None = None) -> tuple[list[str], str]:
    """``(warnings, summary line)`` for ``list`` and ``reindex``.

    Warnings: one line naming the cases without a baseline (static: no run can calibrate them), and
    one per case whose latest calibration, for its current fingerprint, says what does not hold.
    The summary line counts the cases calibrated ok, never calibrated here and not checkable.
    """
    warnings: list[str] = []
    for missing, attr, why in (
        ("baseline", "baseline", "nothing shows their limits tell a naive answer from a good one"),
        ("reference", "reference", "nothing shows their limits let a good answer through"),
    ):
        without = [c.label for c in cases if getattr(c, attr) is None]
        if without:
            warnings.append(f"{len(without)} case(s) declare no {missing}, so {why}: {', '.join(without)}")
    counts = {"ok": 0, "warning": 0, "never": 0, "unknown": 0, "not-run": 0}
    for seen in recall(cases, store):
        counts[seen.state] += 1
        shown = [p for p in seen.problems if p not in (NO_BASELINE, NO_REFERENCE)]  # said once above, for every case
        if seen.state == "warning" and shown:
            warnings.append(f"{seen.label}: its latest calibration ({seen.at}, {seen.folder}) says {'; '.join(shown)}")
    total = len(cases)
    parts = [f"{counts['ok']} of {total} calibrated ok"]
    if counts["warning"]:
        parts.append(f"{counts['warning']} with a calibration that does not hold")
    if counts["never"]:
        parts.append(f"{counts['never']} never calibrated here as they are now")
    if counts["not-run"]:
        parts.append(f"{counts['not-run']} could not run when last calibrated")
    if counts["unknown"]:
        parts.append(f"{counts['unknown']} cannot be fingerprinted")
    summary = f"calibration: {', '.join(parts)} ({COMMAND}; docs/cases.md)"
    return warnings, summary


def calibration_line(case: Case) -> str:
    """One line for a case's detail: what its latest calibration says, or that it has none."""
    (seen,) = recall([case])
    static = _static_problems(case)
    if seen.state == "ok":
        return f"calibration: ok on {seen.at} (the reference passes, the baseline and nop fail)"
    if seen.state == "warning":
        return f"calibration: warning on {seen.at}: {'; '.join(seen.problems)}"
    if seen.state == "not-run":
        return f"calibration: not run on {seen.at}: {seen.why}"
    head = f"calibration: {'; '.join(static)}; " if static else "calibration: "
    if seen.state == "unknown":
        return f"{head}cannot be looked up ({seen.why})"
    return f"{head}never calibrated here as it is now ({COMMAND} -k {case.label})"


__all__ = [
    "CalibrationStore",
    "Remembered",
    "StoredCalibration",
    "calibration_fingerprint",
    "calibration_line",
    "calibration_notes",
    "read_store",
    "recall",
    "remember_calibration",
    "store_path",
]
