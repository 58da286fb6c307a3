"""The run folder's one checked reader: :func:`read_run` gives a :class:`RunContents`.
Long because its checks (the journal, each sample read whole or vouched for by its line, each case summary) are one pass over one folder.

The reader trusts nothing it did not check. A sample summary counts only when it parses as a
record of its own label, subject and sample and its bytes match the digest the journal took when
it was written; anything else is named in :attr:`SampleEntry.problem` and left out, so a summary
edited by hand (a ``nop`` forged to ``ok``) is caught, not believed. The journal itself is checked
against its key (:func:`imagebench.runs.journal.check_journal`): a summary rewritten together with
its journal line is named forged (:attr:`RunContents.forged`). A sample summary records the digest
of every file beside it (its artifacts: the PNGs, their ``.npy`` values, stdout and stderr), so a
changed, removed or added artifact leaves that sample out too. Each case's summary is held to its
own journal line (its check across samples can turn a pass into a fail) and to the samples it
summarises. The report, ``compare``,
``--resume``, the napari reader, the panel's run list and the bundle coverage all read runs here.
"""

from __future__ import annotations

import json
import math
import os
import sys
from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

from imagebench.runs.layout import RECEIPT, RUN_RECORD, SUMMARY, RunFolderError, label_dir, sample_index

if TYPE_CHECKING:
    from imagebench.records import CaseSummary, RunRecord, SampleSummary
    from imagebench.runs.journal import JournalCheck, JournalEntry, UnitBrief
    from imagebench.runs.vouched import LineBrief


@dataclass
class SampleEntry:
    """One sample summary as found on disk; ``problem`` says why it cannot be used ('' when it can)."""

    label: str
    sample: int
    where: Path | str  # the summary's path (a vouched sample's as text, made a Path when asked: :attr:`path`)
    summary: SampleSummary | None = None
    data: bytes | None = None
    problem: str = ""
    journaled: bool = False
    # a sample not read whole (read_run's ``wants``): what its signed journal line says of it
    status: str | None = None
    brief: UnitBrief | LineBrief | None = None
    subject: str = ""

    @property
    def path(self) -> Path:
        """Where the sample's ``summary.json`` lies."""
        if not isinstance(self.where, Path):
            self.where = Path(self.where)
        return self.where

    @property
    def usable(self) -> bool:
        return self.summary is not None and not self.problem

    @property
    def vouched(self) -> bool:
        """Counted from its verified journal line alone (its summary's size checked, not its bytes)."""
        return self.summary is None and self.brief is not None and not self.problem


@dataclass
class RunContents:
    """Everything a run folder holds, each record checked: see :func:`read_run`."""

    run_dir: Path
    record: RunRecord
    # the journal's lines other than ``unit`` lines (start, resume, case, end: a few per pass and
    # per case), read from a journal streamed one line at a time; ``journal_units`` counts the rest
    journal: list[JournalEntry] = field(default_factory=list)
    journal_first: JournalEntry | None = None
    journal_last: JournalEntry | None = None
    journal_units: int = 0
    units: dict[tuple[str, int], SampleEntry] = field(default_factory=dict)
    case_summaries: dict[str, CaseSummary] = field(default_factory=dict)
    case_problems: dict[str, list[str]] = field(default_factory=dict)
    receipt: dict[str, Any] | None = None
    receipt_problem: str = ""
    journal_check: JournalCheck | None = None
    # What makes the run folder untrustworthy as a whole: a forged journal, a case summary that
    # disagrees with its samples, a journal that cannot be verified here (each in words)
    integrity: list[str] = field(default_factory=list)

    # the problems of :attr:`integrity` that only say the folder cannot be checked here (a key this
    # state folder does not hold, a journal never signed, an anchor not yet written): not forged
    unverifiable: list[str] = field(default_factory=list)
    # units a resume ran again after their journaled summary was lost or changed (visible, not hidden)
    reruns: list[str] = field(default_factory=list)
    # the cases whose journaled summary.json is gone or changed, and why (named in :attr:`integrity`
    # too; left out of :attr:`case_summaries`): a resume writes them again and its line says so
    case_forged: dict[str, str] = field(default_factory=dict)
    # per case, what a read with ``on_sample`` counted of every sample it handed over (and did not keep)
    tallies: dict[str, Tally] = field(default_factory=dict)
    # how the samples were checked: read whole (against their digest and the files beside them), or
    # (a read with ``wants``) vouched for by their verified journal line, their summary's size checked
    read_whole: int = 0
    vouched: int = 0

    @property
    def forged(self) -> bool:
        """Whether anything the harness signed contradicts the folder: a journal line that does not
        verify, a journal cut short of its anchors, a journaled summary gone or changed, ``run.json``
        changed since its start line, a case summary that disagrees with its samples."""
        return any(p not in self.unverifiable for p in self.integrity)

    @property
    def verified(self) -> bool:
        """Whether the whole run folder checked out: the journal verifies and is anchored by its receipt."""
        return not self.integrity

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
        return [*self.integrity, *out]


class _UnitIndex:
    """Each unit's last journal line as ``(line number, digest, status)``, in about 50 bytes a
    unit: per label, arrays indexed by sample number (line numbers, the digests' 32 bytes, the
    statuses' shared strings); an odd unit (a sample number out of range, a digest that is not 64
    hex digits) in a dict beside them."""

    _LIMIT = 1 << 20  # a forged sample number costs at most this many slots

    def __init__(self) -> None:
        self._arrays: dict[str, tuple[array[int], bytearray, list[str | None]]] = {}
        self._odd: dict[tuple[str, int], tuple[int, str | None, str | None]] = {}

    def get(self, label: str, n: int) -> tuple[int, str | None, str | None]:
        odd = self._odd.get((label, n))
        if odd is not None:
            return odd
        arrays = self._arrays.get(label)
        if arrays is None or not 0 <= n < len(arrays[0]) or not arrays[0][n]:
            return 0, None, None
        numbers, digests, statuses = arrays
        return numbers[n], digests[32 * n : 32 * n + 32].hex(), statuses[n]

    def line_of(self, label: str, n: int) -> tuple[int, str | None]:
        """``(line number, status)`` of the unit's last line (``(0, None)`` when it has none), its digest not made."""
        odd = self._odd
        if odd and (label, n) in odd:
            number, _, status = odd[(label, n)]
            return number, status
        arrays = self._arrays.get(label)
        if arrays is None or not 0 <= n < len(arrays[0]):
            return 0, None
        return arrays[0][n], arrays[2][n]

    def set(self, label: str, n: int, number: int, sha256: str | None, status: str | None) -> None:
        raw = _hex32(sha256)
        if raw is None or not 0 <= n < self._LIMIT:
            self._odd[(label, n)] = (number, sha256, status)
            return
        self._odd.pop((label, n), None)
        numbers, digests, statuses = self._arrays.setdefault(label, (array("q"), bytearray(), []))
        if n >= len(numbers):
            grow = n + 1 - len(numbers)
            numbers.extend([0] * grow)
            digests.extend(bytes(32 * grow))
            statuses.extend([None] * grow)
        numbers[n] = number
        digests[32 * n : 32 * n + 32] = raw
        statuses[n] = sys.intern(status) if isinstance(status, str) else None

    def keys(self) -> Iterator[tuple[str, int]]:
        for label, (numbers, _, _) in self._arrays.items():
            for n, number in enumerate(numbers):
                if number and (label, n) not in self._odd:
                    yield label, n
        yield from self._odd

    def labels(self) -> set[str]:
        return {label for label, _ in self.keys()}


def _hex32(text: str | None) -> bytes | None:
    if not isinstance(text, str) or len(text) != 64:
        return None
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return None
    return raw if raw.hex() == text else None  # upper-case hex is kept as written, in the dict


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
    from imagebench.records import SampleSummary, parse_record

    return parse_record(path, data, SampleSummary)


@dataclass
class Tally:
    """What a case's usable samples say, counted as they stream past (:func:`read_run`'s
    ``on_sample``): what its summary is held to, without keeping a sample."""

    entries: int = 0
    unusable: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    sums: dict[str, tuple[float, int]] = field(default_factory=dict)  # metric -> (sum of values, how many)
    limits: dict[str, float] = field(default_factory=dict)

    def add(self, entry: SampleEntry) -> None:
        self.entries += 1
        summary = entry.summary
        brief = entry.brief
        if summary is None and brief is not None and entry.status is not None and not entry.problem:  # vouched
            self.counts[entry.status] = self.counts.get(entry.status, 0) + 1
            for name, value, limit, _ in brief.metrics:
                self._metric(name, value, limit)
            return
        if not entry.usable or summary is None:
            self.unusable += 1
            return
        self.counts[summary.status] = self.counts.get(summary.status, 0) + 1
        for m in summary.metrics:
            self._metric(m.name, m.value, m.limit)

    def _metric(self, name: str, value: float | None, limit: float | None) -> None:
        self.limits[name] = limit  # type: ignore[assignment]
        if value is not None:
            total, count = self.sums.get(name, (0.0, 0))
            self.sums[name] = (total + value, count + 1)
        elif name not in self.sums:
            self.sums[name] = (0.0, 0)

    def disagreement(self, summary: CaseSummary) -> str:
        """:func:`_disagreement` from the counts (every sample must have been usable, as there)."""
        if not self.entries or self.unusable:
            return ""
        said = {k: v for k, v in summary.counts.items() if v}
        found = {k: v for k, v in self.counts.items() if v}
        if said != found:
            return f"it counts {said}, its samples {found}"
        passed = self.counts.get("ok", 0)
        if summary.passed != passed:
            return f"it says {summary.passed} passed, its samples {passed}"
        means = {k: (t / c if c else None) for k, (t, c) in self.sums.items()}
        return _means_disagree(summary, means, self.limits)


def _read_sample(path: Path, label: str, subject: str, n: int, sha256: str | None, journaled: bool) -> SampleEntry:
    from imagebench.records import ARTIFACT_DIGESTS_SINCE, RecordError
    from imagebench.runs.journal import digest
    from imagebench.runs.layout import artifacts_problem

    entry = SampleEntry(label=label, sample=n, where=path, journaled=journaled)
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
    elif journaled and sha256 != digest(entry.data):
        entry.problem = "summary.json changed after it was journaled (digest mismatch)"
    elif entry.summary.artifact_digests is not None:  # the files beside it, as the summary recorded them
        entry.problem = artifacts_problem(path.parent, entry.summary.artifact_digests)
    elif entry.summary.schema_version >= ARTIFACT_DIGESTS_SINCE:
        entry.problem = (
            f"summary.json records no artifact digests (every summary of version {ARTIFACT_DIGESTS_SINCE} on does)"
        )
    return entry


def _vouched_sample(
    path: str, label: str, n: int, status: str | None, brief: UnitBrief | LineBrief, subject: str
) -> SampleEntry:
    """A sample counted from its verified journal line: its summary must be a regular file of the
    size the line records (its bytes and the files beside it are not read)."""
    entry = SampleEntry(label=label, sample=n, where=path, journaled=True, status=status, brief=brief, subject=subject)
    try:
        found = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        entry.problem = "missing"
        return entry
    except OSError as exc:
        entry.problem = f"summary.json could not be read ({exc.strerror or exc})"
        return entry
    if not S_ISREG(found.st_mode):
        entry.problem = "summary.json is not a regular file"
    elif found.st_size != brief.bytes:
        entry.problem = (
            f"summary.json changed after it was journaled (it is {found.st_size} bytes, its line says {brief.bytes})"
        )
    return entry


def read_run(
    run_dir: str | os.PathLike[str],
    *,
    expected: Mapping[str, int] | Callable[[RunRecord], Mapping[str, int]] | None = None,
    require_journal: bool = True,
    on_sample: Callable[[SampleEntry], bool | None] | None = None,
    wants: Callable[[str, int, str | None], bool] | None = None,
) -> RunContents:
    """Read a run folder, checking every record.

    ``expected`` maps each label to its number of samples (default: ``run.json``'s cases with its
    ``samples``, plus whatever sample folders are on disk). A sample is usable only when its summary
    parses, belongs where it lies, and matches its journal line. ``expected`` may be a function
    of ``run.json``'s record (a report counts each known case's samples, ``compare`` a suite's
    assignment). With ``require_journal`` (the
    default) a summary the journal never recorded is left out too (``not in the journal``); a
    resume passes False, since a kill can fall between a summary and its line.

    The journal is streamed (one line held at a time) and each sample is read, checked and let go
    in turn. With ``on_sample``, each checked sample is handed to it (its bytes dropped), and a
    usable one for which it returns False is not kept in :attr:`RunContents.units` (those left
    out always are, with why): a run of any size is then read in bounded memory, and each case's
    summary is held to its samples by what :class:`Tally` counted of them
    (:attr:`RunContents.tallies`), with the same result.

    With ``wants`` (``(label, sample, its line's status) -> read it whole?``, asked in sample order)
    and a journal that verifies as a whole, a sample whose last unit line carries a brief (journal
    version 3) and that ``wants`` declines is not read: it is handed to ``on_sample`` vouched for
    by its signed line (:attr:`SampleEntry.vouched`: its status and brief, its summary checked to be
    a regular file of the size the line records), and counted in :attr:`RunContents.vouched`. A
    sample read whole is held to its line's brief too (a disagreement is named forged). Without
    ``wants``, or when the journal does not verify, every sample is read whole.
    Raises RunFolderError only for a missing or unreadable ``run.json`` or journal.
    """
    from imagebench.runs.journal import JOURNAL_NAME, JournalError, check_journal, iter_journal_lines

    run_dir = Path(run_dir)
    record = read_record_of_run(run_dir)
    contents = RunContents(run_dir=run_dir, record=record)
    _read_receipt(contents)
    anchor = contents.receipt.get("journal") if contents.receipt is not None else None
    # One pass over the journal, a line at a time: the chain checked as it goes, each unit's last
    # line kept as (line, digest, status), the other lines kept whole (a few per pass and case).
    from imagebench.runs.vouched import LineBriefs, brief_disagreement

    lines = _UnitIndex()
    line_briefs = LineBriefs() if wants is not None else None
    case_lines: dict[str, tuple[int, JournalEntry]] = {}
    firsts: dict[tuple[str, int], str | None] = {}  # the first status journaled of a unit run again

    def indexed() -> Iterator[tuple[bytes, JournalEntry]]:
        for number, (raw, entry) in enumerate(iter_journal_lines(run_dir / JOURNAL_NAME), start=1):
            if contents.journal_first is None:
                contents.journal_first = entry
            contents.journal_last = entry
            if entry.event == "unit":
                contents.journal_units += 1
                if entry.label is not None and entry.sample is not None:
                    key = (entry.label, entry.sample)
                    before = lines.line_of(*key)
                    if before[0]:
                        first = firsts.setdefault(key, before[1])
                        contents.reruns.append(
                            f"{entry.label}#{entry.sample}: run again ({entry.status}) after its journaled {first} "
                            "summary was lost or changed"
                        )
                    lines.set(*key, number, entry.sha256, entry.status)  # the last line for a unit wins
                    if line_briefs is not None:
                        line_briefs.set(*key, entry.brief)
            else:
                contents.journal.append(entry)
                if entry.event == "case" and entry.label is not None:
                    case_lines[entry.label] = (number, entry)  # and the last line for a case
            yield raw, entry

    try:
        check = contents.journal_check = check_journal(
            indexed(), record.run_id, anchor if isinstance(anchor, dict) else None
        )
    except JournalError as exc:
        raise RunFolderError(str(exc)) from None
    unit_labels = lines.labels()
    vouching = line_briefs is not None and wants is not None and check.verified
    contents.integrity.extend(check.problems)
    if not check.forged:
        contents.unverifiable.extend(check.problems)
    if check.verified and check.lines and anchor is None and record.complete:
        why = "receipt.json does not anchor the journal: lines cut off its end would go unseen"
        contents.integrity.append(why)
        contents.unverifiable.append(why)
    if check.key_id is not None:  # a signed journal: what it signed holds the rest of the folder to it
        contents.integrity.extend(_against_journal(record, contents, contents.receipt is not None))
    if callable(expected):
        expected = expected(record)
    wanted = dict(expected) if expected is not None else {label: record.samples for label in record.cases}
    for label, count in wanted.items():
        folder = label_dir(run_dir, record.subject, label)
        base = str(folder)  # one Path per sample below, not two joins (a run of 100,000 samples pays each)
        indices = set(range(count))
        if expected is None and folder.is_dir():
            indices |= {i for p in folder.glob("sample-*") if (i := sample_index(p)) is not None}
        tally = Tally() if on_sample is not None else None
        for n in sorted(indices):
            number, status = lines.line_of(label, n)
            line = number != 0
            path = f"{base}/sample-{n}/{SUMMARY}"
            brief = line_briefs.get(label, n) if vouching and line and line_briefs is not None else None
            if brief is not None and wants is not None and not wants(label, n, status):
                entry = _vouched_sample(path, label, n, status, brief, record.subject)
                contents.vouched += 1
            else:
                _, sha256, _ = lines.get(label, n)
                entry = _read_sample(Path(path), label, record.subject, n, sha256, line)
                contents.read_whole += 1
                if brief is not None and not entry.problem and entry.summary is not None and entry.data is not None:
                    why = brief_disagreement(brief, entry.summary, entry.data, status)
                    if why:
                        entry.problem = f"summary.json disagrees with its journal line's brief ({why})"
            if number in check.forged_lines and not entry.problem:
                entry.problem = f"its journal line ({number}) does not verify under the journal key (forged)"
            elif line and entry.problem and number not in check.forged_lines and check.key_id:
                # the harness journaled this sample's summary; it is gone or not what was journaled
                contents.integrity.append(
                    f"{label}#{n}: the journal (line {number}) vouches for a {status} summary, but {entry.problem}"
                )
            if require_journal and not entry.problem and not entry.journaled:
                entry.problem = "summary.json is not in the journal (written outside the run)"
            if tally is not None and on_sample is not None:
                tally.add(entry)
                if on_sample(entry) is False and (entry.usable or entry.vouched):
                    continue  # handed over and let go: a run of any size is read in bounded memory
            contents.units[(label, n)] = entry
        if tally is not None:
            contents.tallies[label] = tally
        _read_case(contents, label, folder / SUMMARY, case_lines.get(label), label in unit_labels)
    outside = sorted(key for key in lines.keys() if not (key[0] in wanted and 0 <= key[1] < wanted[key[0]]))
    if outside and check.key_id:
        shown = ", ".join(f"{lab}#{n}" for lab, n in outside[:5]) + (" ..." if len(outside) > 5 else "")
        contents.integrity.append(
            f"the journal holds {len(outside)} unit(s) run.json does not expect ({shown}): run.json's cases or "
            "samples were cut"
        )
    if len(set(record.cases)) != len(record.cases):
        contents.integrity.append("run.json names a case more than once")
    for label, summary in contents.case_summaries.items():
        if label in contents.tallies:
            disagreement = contents.tallies[label].disagreement(summary)
        else:
            entries = contents.entries(label)
            if not entries or any(not e.usable for e in entries):
                continue  # each sample left out is named already; the rest cannot be held to the summary
            disagreement = _disagreement(summary, contents.samples(label))
        if disagreement:
            contents.integrity.append(f"{label}: its summary.json disagrees with its samples ({disagreement})")
    return contents


def _read_case(
    contents: RunContents, label: str, path: Path, journaled: tuple[int, JournalEntry] | None, has_units: bool
) -> None:
    """A case's ``summary.json`` into :attr:`RunContents.case_summaries` when it can be trusted.

    In a signed journal the case's last ``case`` line vouches for it: gone or changed since, it is
    forged (its check across samples alone can turn a pass into a fail). A journal begun at version
    2 or later journals every case summary it writes, so there a case whose samples are journaled
    but whose summary is not is left out (a kill between the summary and its line), and forged in a
    run whose last pass ended complete. An older journal, or one that cannot be verified here, is
    read as before: the summary as it lies, held to its samples only."""
    from imagebench.records import CaseSummary, RecordError, parse_record
    from imagebench.runs.journal import CASE_LINES_SINCE, digest

    check, first, last = contents.journal_check, contents.journal_first, contents.journal_last
    signed = check is not None and check.key_id is not None
    data: bytes | None = None
    why = ""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        pass
    except OSError as exc:
        why = f"summary.json could not be read ({exc.strerror or exc})"

    def forged(text: str) -> None:
        contents.case_forged[label] = text
        contents.integrity.append(f"{label}: {text}")

    def left_out(text: str) -> None:
        contents.case_problems.setdefault(label, []).append(text)

    if signed and journaled is not None:
        number, line = journaled
        vouches = f"the journal (line {number}) vouches for its case summary ({(line.detail or {}).get('verdict')})"
        if check is not None and number in check.forged_lines:
            return left_out(
                f"its case summary's journal line ({number}) does not verify under the journal key (forged)"
            )
        if data is None:
            return forged(f"{vouches}, but {why or 'summary.json is missing'}")
        if line.sha256 != digest(data):
            return forged(f"{vouches}, but summary.json changed after it was journaled (digest mismatch)")
    elif signed and has_units and first is not None and last is not None and first.schema_version >= CASE_LINES_SINCE:
        ended = last.event == "end" and bool((last.detail or {}).get("complete"))
        if data is not None or ended:
            what = "summary.json is not in the journal" if data is not None else "summary.json is missing"
            text = f"its samples are journaled, but {what}: its case summary was never journaled"
            if ended:
                return forged(f"{text} (the run ended complete)")
            return left_out(f"{text} (written outside the run, or the run was cut off)")
    if data is None:
        if why:
            left_out(why)
        return
    try:
        contents.case_summaries[label] = parse_record(path, data, CaseSummary)
    except RecordError as exc:
        left_out(str(exc).split(": ", 1)[-1])


def _against_journal(record: RunRecord, contents: RunContents, has_receipt: bool) -> list[str]:
    """What a signed journal says that ``run.json`` (or the folder) contradicts: a fixed field
    changed since the run's start line signed it, a run called complete whose last pass never
    ended, a receipt gone."""
    from imagebench.runs.journal import record_fields

    problems: list[str] = []
    journal, last = contents.journal, contents.journal_last  # the lines other than unit lines, and the last
    start = next((e for e in journal if e.event == "start"), None)
    signed = (start.detail or {}).get("record") if start is not None else None
    if start is None:
        problems.append("the journal has no start line: its beginning was cut off")
    elif isinstance(signed, dict):
        # every extra key a pass does not rewrite, those added since the start included
        now = record_fields(record, tuple(k for k in signed if "." not in k), True)
        changed = sorted(k for k in set(signed) | set(now) if signed.get(k) != now.get(k))
        if changed:
            problems.append(f"run.json's {', '.join(changed)} changed after the run's start line signed them")
    ends = [e for e in journal if e.event == "end"]
    panel = start is not None and (start.detail or {}).get("mode") == "napari-imagebench panel"
    ended = last is not None and last.event == "end"
    if record.complete and not panel and (not ends or not ended or not (ends[-1].detail or {}).get("complete")):
        problems.append("run.json says the run is complete, but its journal's last pass did not end complete")
    if not has_receipt and contents.journal_units:
        problems.append("receipt.json is gone or unreadable (a run writes it before its first sample)")
    return problems


def _disagreement(summary: CaseSummary, samples: list[SampleSummary]) -> str:
    """How a case's summary differs from what its usable samples say ('' when it does not)."""
    from imagebench.runs.verdict import status_counts
    from imagebench.runs.writer import metric_means

    said = {k: v for k, v in summary.counts.items() if v}
    found = {k: v for k, v in status_counts(samples).items() if v}
    if said != found:
        return f"it counts {said}, its samples {found}"
    passed = sum(1 for s in samples if s.status == "ok")
    if summary.passed != passed:
        return f"it says {summary.passed} passed, its samples {passed}"
    means, limits = metric_means(samples)
    return _means_disagree(summary, means, limits)


def _means_disagree(summary: CaseSummary, means: Mapping[str, float | None], limits: Mapping[str, float]) -> str:
    for name in sorted(set(means) | set(summary.metric_means)):
        mean, said = means.get(name), summary.metric_means.get(name)
        if (mean is None) != (said is None) or (
            mean is not None and not math.isclose(mean, said, rel_tol=1e-9, abs_tol=1e-12)
        ):
            return f"it gives {name} a mean of {said}, its samples {mean}"
    said_limits = summary.extra.get("limits", {}) if isinstance(summary.extra, dict) else {}
    for name, limit in limits.items():
        if name in said_limits and said_limits[name] != limit:
            return f"it gives {name} a limit of {said_limits[name]}, its samples {limit}"
    return ""


def _read_receipt(contents: RunContents) -> None:
    receipt = contents.run_dir / RECEIPT
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
