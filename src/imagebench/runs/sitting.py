"""A sitting: one folder holding a run folder for each subject of one session at the bench panel.

A run folder holds one subject (``run.json`` names it, its journal keys every sample by label and
sample, ``compare`` and ``--resume`` take it whole). A person at the panel works several subjects
in one sitting (themselves, the reference, a ``python:`` solver, a ``command:``, an agent), so the
panel writes one *sitting* folder, and in it one ordinary run folder per subject::

    <outcome root>/sitting-<UTC timestamp>/
      sitting.json          SittingRecord: the sitting and its runs, one per subject, in the order they joined
      journal.jsonl         the sitting's journal: a signed ``start`` line as each subject's run joins
      report.html           one page over every subject (imagebench.report)
      run-<UTC timestamp>/  one run folder per subject, like any other (run.json, journal, receipt, samples)

Each run folder of a sitting is a run folder like any other: it is read, checked, reported and
compared on its own (``imagebench compare SITTING/run-A SITTING/run-B``), and its ``run.json``
records the sitting's id under ``extra["sitting"]``, which its journal's start line signs. The
sitting's own journal is signed and chained with the same key (:mod:`imagebench.runs.journal`),
so a run dropped from ``sitting.json`` (with its folder, or without) or one moved in from another
sitting is named by :func:`read_sitting`, which reads every run through the one checked reader
(:func:`imagebench.runs.reader.read_run`), so the integrity of every sample is checked.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from imagebench.records import Record
from imagebench.runs.layout import RUN_RECORD, RunFolderError, is_run_folder_name, new_stamped_dir

if TYPE_CHECKING:
    from imagebench.records import RunRecord
    from imagebench.runs.reader import RunContents
    from imagebench.runs.writer import RunWriter

SITTING_RECORD = "sitting.json"
SITTING_SCHEMA_VERSION = 1
#: ``run.json`` ``extra`` key of a run that belongs to a sitting: the sitting's id (its folder's name).
SITTING_KEY = "sitting"
#: the name :meth:`Sitting.create` gives a sitting's folder: ``sitting-<UTC stamp>``, ``-<n>`` when taken
SITTING_FOLDER_NAME = re.compile(r"sitting-\d{8}T\d{6}Z(?:-\d+)?")
#: what the sitting's journal's lines say they are (each a ``start`` line: a subject's run begins)
JOINED = "a subject's run joined the sitting"


class SittingRun(Record):
    """One subject's run of a sitting: the subject's name and its run folder's name in the sitting."""

    subject: str
    run: str
    joined: str


class SittingRecord(Record):
    """``sitting-<UTC timestamp>/sitting.json``: one session of work over several subjects."""

    schema_version: Literal[1] = SITTING_SCHEMA_VERSION
    sitting_id: str
    started: str
    source: str
    runs: list[SittingRun] = []
    # the sitting's journal as it stood when this record was written (journal.signed_anchor)
    journal: dict[str, Any] | None = None


def is_sitting(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a sitting's folder (it holds ``sitting.json``)."""
    return (Path(path) / SITTING_RECORD).is_file()


def sitting_of(run_dir: str | os.PathLike[str]) -> Path | None:
    """The sitting a run folder lies in (its parent, when that is a sitting), else None."""
    parent = Path(run_dir).resolve().parent
    return parent if is_sitting(parent) else None


def run_folders_under(root: str | os.PathLike[str]) -> list[Path]:
    """Every run folder holding a ``run.json`` under an outcome root: ``run-*`` beside each other,
    and the runs of each ``sitting-*`` there, in name order."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in sorted(root.glob("run-*")) if (p / RUN_RECORD).is_file()]
    for sitting in sorted(root.glob("sitting-*")):
        found += [p for p in sorted(sitting.glob("run-*")) if (p / RUN_RECORD).is_file()]
    return found


def expand_sittings(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """``paths`` with each sitting's folder replaced by every run folder in it (those its
    ``sitting.json`` lists or not: a run dropped from the record still counts where it lies)."""
    out: list[Path] = []
    for path in map(Path, paths):
        if is_sitting(path):
            out += [p for p in sorted(path.glob("run-*")) if (p / RUN_RECORD).is_file()]
        else:
            out.append(path)
    return out


def read_sitting_record(path: str | os.PathLike[str]) -> SittingRecord:
    """``sitting.json`` of a sitting; RunFolderError naming the file when it is not there or not valid."""
    from imagebench.records import RecordError, read_record

    try:
        return read_record(Path(path) / SITTING_RECORD, SittingRecord)
    except RecordError as exc:
        raise RunFolderError(str(exc)) from None


class Sitting:
    """Writes one sitting: its folder, ``sitting.json`` and its journal; :meth:`new_run` makes
    each subject's run folder in it (through :class:`~imagebench.runs.writer.RunWriter`)."""

    def __init__(self, path: Path, record: SittingRecord) -> None:
        self.path, self.record = Path(path), record

    @classmethod
    def create(cls, root: str | os.PathLike[str], source: str) -> Sitting:
        """A fresh ``sitting-<UTC timestamp>`` folder under ``root``, its ``sitting.json`` and the
        journal's first line."""
        from imagebench.records import write_record

        path, started = new_stamped_dir(root, "sitting", "sitting folder")
        # the folder's name and a random part: two sittings begun in the same second (under two
        # roots) are two sittings, so a run moved from one to the other is named
        record = SittingRecord(sitting_id=f"{path.name}.{secrets.token_hex(6)}", started=started, source=source)
        write_record(path / SITTING_RECORD, record)
        sitting = cls(path, record)
        sitting._sign({"mode": source, "sitting_id": record.sitting_id, "started": started})
        return sitting

    def _sign(self, detail: dict[str, Any]) -> None:
        from imagebench.records import write_record
        from imagebench.runs.journal import Journal

        with Journal.open(self.path) as journal:
            journal.append("start", detail=detail)
            self.record = self.record.model_copy(update={"journal": journal.anchor()})
        write_record(self.path / SITTING_RECORD, self.record)

    def new_run(self, subject_name: str, **fields: Any) -> tuple[RunWriter, RunRecord]:
        """A new run folder in the sitting for ``subject_name`` (``fields`` as for
        :meth:`RunWriter.create`; its ``extra`` gains the sitting's id), listed in ``sitting.json``
        and signed in the sitting's journal."""
        from imagebench.runs.layout import now_iso
        from imagebench.runs.writer import RunWriter

        extra = {**dict(fields.pop("extra", None) or {}), SITTING_KEY: self.record.sitting_id}
        writer, record = RunWriter.create(self.path, subject_name, extra=extra, **fields)
        joined = SittingRun(subject=subject_name, run=writer.run_dir.name, joined=now_iso())
        self.record = self.record.model_copy(update={"runs": [*self.record.runs, joined]})
        run = writer.run_dir.name
        # the join line signs who joined, in which run folder, and when (sitting.json's ``joined``)
        self._sign({"joined": JOINED, "subject": subject_name, "run": run, "run_id": record.run_id, "at": joined.joined})
        return writer, record


@dataclass
class SittingContents:
    """A sitting as read: its record and, per subject, its run as the one reader read it."""

    path: Path
    record: SittingRecord
    runs: dict[str, RunContents] = field(default_factory=dict)  # subject -> its run, in the order they joined
    # what makes the sitting untrustworthy as a whole, each in words (every run's own problems too,
    # named after its subject), and those of them that only say it cannot be checked here
    integrity: list[str] = field(default_factory=list)
    unverifiable: list[str] = field(default_factory=list)

    @property
    def forged(self) -> bool:
        return any(p not in self.unverifiable for p in self.integrity)

    @property
    def verified(self) -> bool:
        return not self.integrity


def read_sitting(path: str | os.PathLike[str], **read_options: Any) -> SittingContents:
    """Read a sitting: ``sitting.json``, its journal (checked under the journal key), and every
    run in it through :func:`imagebench.runs.reader.read_run` (``read_options`` are passed on).

    Named in :attr:`SittingContents.integrity`: a run the journal signed but ``sitting.json`` does
    not list or the folder does not hold, a run folder in it that the journal never signed, a run
    whose ``run.json`` names another subject, run id or sitting than the journal signed, a run or a
    subject listed twice, what ``sitting.json`` says of the sitting (its id, ``started``,
    ``source``, each run's ``joined`` and the order they joined in) that the journal's first line
    and join lines contradict, and every problem of each run's own.
    Raises RunFolderError only for a missing or unreadable ``sitting.json`` or journal."""
    from imagebench.runs.journal import JOURNAL_NAME, JournalError, check_journal, read_journal_lines
    from imagebench.runs.reader import read_run

    path = Path(path)
    record = read_sitting_record(path)
    try:
        lines = read_journal_lines(path / JOURNAL_NAME)
    except JournalError as exc:
        raise RunFolderError(str(exc)) from None
    contents = SittingContents(path=path, record=record)
    check = check_journal(
        lines, path.name, record.journal, where=f"the sitting's {JOURNAL_NAME}", anchored_by=SITTING_RECORD
    )
    contents.integrity.extend(check.problems)
    if not check.forged:
        contents.unverifiable.extend(check.problems)
    if record.sitting_id.rpartition(".")[0] != path.name:
        contents.integrity.append(f"sitting.json names sitting {record.sitting_id!r}, its folder is {path.name!r}")
    joins = [e.detail for _, e in lines if e.event == "start" and e.detail and e.detail.get("joined") == JOINED]
    signed = {str(d.get("run")): str(d.get("subject")) for d in joins}
    listed = {r.run: r.subject for r in record.runs}
    on_disk = {p.name for p in path.iterdir() if p.is_dir() and is_run_folder_name(p.name)}
    for run in sorted({r.run for r in record.runs if [x.run for x in record.runs].count(r.run) > 1}):
        contents.integrity.append(f"sitting.json lists run {run} more than once")
    for subject in sorted({r.subject for r in record.runs if [x.subject for x in record.runs].count(r.subject) > 1}):
        contents.integrity.append(
            f"sitting.json lists subject {subject} more than once (a sitting holds one run per subject)"
        )
    if check.key_id is not None:  # a signed journal: what it signed holds the folder to it
        contents.integrity.extend(_against_signed(record, lines[0][1] if lines else None, joins))
        for run, subject in signed.items():
            if run not in listed:
                contents.integrity.append(f"the sitting's journal signed {subject}'s run {run}, which sitting.json does not list")
            elif listed[run] != subject:
                contents.integrity.append(f"sitting.json gives run {run} to {listed[run]}, its journal to {subject}")
        for run in sorted(on_disk - set(signed)):
            contents.integrity.append(f"run folder {run} lies in the sitting, but its journal never signed it")
        for run in sorted(set(listed) - set(signed)):
            contents.integrity.append(f"sitting.json lists run {run}, which the sitting's journal never signed")
    for entry in record.runs:
        where = path / entry.run
        if not is_run_folder_name(entry.run) or not (where / RUN_RECORD).is_file():
            contents.integrity.append(f"{entry.subject}: its run {entry.run} is gone from the sitting")
            continue
        try:
            run = read_run(where, **read_options)
        except RunFolderError as exc:
            contents.integrity.append(f"{entry.subject}: {exc}")
            continue
        if entry.subject in contents.runs:
            continue  # a subject listed twice (named above): its first run stands
        contents.runs[entry.subject] = run
        signed_id = next((d.get("run_id") for d in joins if d.get("run") == entry.run), None)
        if check.key_id is not None and signed_id is not None and signed_id != run.record.run_id:
            contents.integrity.append(
                f"{entry.run}: its run.json names run {run.record.run_id!r}, the sitting's journal signed {signed_id!r}"
            )
        if run.record.subject != entry.subject:
            contents.integrity.append(f"{entry.run}: its run.json names subject {run.record.subject!r}, sitting.json {entry.subject!r}")
        if run.record.extra.get(SITTING_KEY) != record.sitting_id:
            contents.integrity.append(
                f"{entry.subject}: its run.json belongs to sitting {run.record.extra.get(SITTING_KEY)!r}, not this one"
            )
        contents.integrity.extend(f"{entry.subject}: {p}" for p in run.integrity)
        contents.unverifiable.extend(f"{entry.subject}: {p}" for p in run.unverifiable)
    return contents


def _against_signed(record: SittingRecord, first: Any, joins: list[dict[str, Any]]) -> list[str]:
    """What ``sitting.json`` says of the sitting that its signed journal contradicts: its id, start
    and source against the journal's first line; each run's joining time (where its join line signs
    it) and the order the runs joined in against the join lines."""
    problems: list[str] = []
    detail = (first.detail or {}) if first is not None and first.event == "start" else None
    if detail is None or "sitting_id" not in detail:
        problems.append("the sitting's journal has no first line signing the sitting: its beginning was cut off")
    else:
        for name, said, signed in (
            ("sitting_id", record.sitting_id, detail.get("sitting_id")),
            ("started", record.started, detail.get("started")),
            ("source", record.source, detail.get("mode")),
        ):
            if said != signed:
                problems.append(f"sitting.json's {name} is {said!r}, the sitting's journal signed {signed!r}")
    at = {str(d.get("run")): d.get("at") for d in joins if "at" in d}  # sittings before it signed no time
    for entry in record.runs:
        if entry.run in at and at[entry.run] != entry.joined:
            problems.append(
                f"sitting.json says run {entry.run} joined at {entry.joined}, the sitting's journal signed {at[entry.run]}"
            )
    signed_order = [str(d.get("run")) for d in joins]
    listed_order = [r.run for r in record.runs if r.run in signed_order]
    unique = listed_order == list(dict.fromkeys(listed_order))  # a run listed twice is named on its own
    if unique and listed_order != [r for r in signed_order if r in listed_order]:
        problems.append("sitting.json lists its runs in another order than they joined (as its journal signed them)")
    return problems


__all__ = [
    "SITTING_KEY",
    "SITTING_RECORD",
    "Sitting",
    "SittingContents",
    "SittingRecord",
    "SittingRun",
    "is_sitting",
    "read_sitting",
    "run_folders_under",
    "sitting_of",
]
