"""A case's samples as its summary reads them: bounded columns, not whole summaries.

A case's ``summary.json`` (:func:`imagebench.runs.writer.summarize_case`) reads of each sample only
its status, its metrics' values and limits, its reason, its fixture's digest, its sandbox and (of
the first) its build time. :class:`CaseColumns` keeps exactly that, by row (the sample's place in
the case), in tens of bytes a sample: so a resumed run summarises a case of any size without
holding its summaries, and a fresh run, the bench panel and a resume all take each case's summary
from the same columns (one derivation: a resumed run's case summaries equal an uninterrupted
run's). Rows may come in any order (dask workers finish out of order); every figure is taken in
row order, as a list of the summaries would give it.

:class:`StoredSamples` is a case's samples as a sequence: those of this pass held, those an
earlier pass left read back from the run folder when they are looked at, each checked against
the digest the resume's check took of it.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from imagebench.records import SampleSummary

#: Distinct reasons a case's columns keep (its summary keeps the first 5, one of them perhaps its
#: check across samples').
REASONS_KEPT = 5
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: Bytes of a sha256 the columns keep: 128 bits, so no two digests of any run share them by chance
#: (a collision is as likely as guessing a 128-bit key), at half the memory.
_HALF = 16


class CaseColumns:
    """What a case's summary reads of each of its ``rows`` samples (see the module)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self._filled = bytearray(rows)
        self._words: list[str] = []
        self._word_of: dict[str, int] = {}
        self._statuses = array("H", [0] * rows)
        self._fixtures = bytearray(_HALF * rows)  # the first 16 bytes of each sha256: distinct as the digests are
        self._fixture_kind = bytearray(rows)  # 0: none; 1: the sha256 form, in _fixtures; 2: another, in _odd_fixtures
        self._odd_fixtures: dict[int, str] = {}
        self._metrics: dict[str, tuple[bytearray, array[float]]] = {}  # flags (1 present, 2 a value), values
        self._first_row: dict[str, int] = {}
        self._limit: dict[str, tuple[int, float | None]] = {}  # the limit of the last row that has the metric
        self._twice: dict[int, list[tuple[str, float | None, float | None]]] = {}  # a metric named again in a row
        self._reasons: dict[str, int] = {}  # reason -> its first row, the REASONS_KEPT first kept
        self._sandboxes: set[str] = set()
        self._flags: set[str] = set()
        self.build_s = 0.0  # the first row's times["build_s"]

    @classmethod
    def of(cls, samples: Sequence[SampleSummary]) -> CaseColumns:
        """The columns of a list of summaries (its rows their places in it)."""
        columns = cls(len(samples))
        for row, summary in enumerate(samples):
            columns.add(row, summary)
        return columns

    @property
    def filled(self) -> int:
        """How many rows hold a sample."""
        return self.rows - self._filled.count(0)

    def has(self, row: int) -> bool:
        return 0 <= row < self.rows and bool(self._filled[row])

    def _word(self, text: str) -> int:
        at = self._word_of.get(text)
        if at is None:
            at = self._word_of[text] = len(self._words)
            self._words.append(sys.intern(text))
        return at

    def add(self, row: int, summary: SampleSummary) -> None:
        """The sample in ``row`` (once; a row given again is an error)."""
        if not 0 <= row < self.rows:
            raise ValueError(f"{summary.label}: sample row {row} outside the case's {self.rows}")
        if self._filled[row]:
            raise ValueError(f"{summary.label}: sample row {row} given twice")
        self._filled[row] = 1
        self._statuses[row] = self._word(summary.status)
        digest = summary.fixture_digest
        if isinstance(digest, str) and _DIGEST.fullmatch(digest):
            self._fixture_kind[row] = 1
            self._fixtures[_HALF * row : _HALF * row + _HALF] = bytes.fromhex(digest[7:])[:_HALF]
        elif digest is not None:
            self._fixture_kind[row] = 2
            self._odd_fixtures[row] = digest
        seen: set[str] = set()
        for m in summary.metrics:
            if m.name in seen:
                self._twice.setdefault(row, []).append((m.name, m.value, m.limit))
                continue
            seen.add(m.name)
            if m.name not in self._metrics:
                self._metrics[sys.intern(m.name)] = (bytearray(self.rows), array("d", [0.0] * self.rows))
            flags, values = self._metrics[m.name]
            flags[row] = 1 if m.value is None else 2
            values[row] = m.value if m.value is not None else 0.0
            if row < self._first_row.get(m.name, self.rows):
                self._first_row[m.name] = row
        for m in summary.metrics:  # the last limit of the last row with the metric, as a list's loop leaves it
            if row >= self._limit.get(m.name, (-1, None))[0]:
                self._limit[m.name] = (row, m.limit)
        if summary.reason:
            self._reason(summary.reason, row)
        if summary.sandbox is not None:
            self._sandboxes.add(summary.sandbox)
        self._flags.update(summary.flags)
        if row == 0:
            self.build_s = float(summary.times.get("build_s", 0.0))

    def _reason(self, reason: str, row: int) -> None:
        """Keep the REASONS_KEPT reasons that come first in row order: a reason pushed out had
        REASONS_KEPT others before it, which only move earlier, so it can never come back among them."""
        first = self._reasons.get(reason)
        if first is not None:
            if row < first:
                self._reasons[reason] = row
            return
        self._reasons[reason] = row
        if len(self._reasons) > REASONS_KEPT:
            last = max(self._reasons, key=self._reasons.__getitem__)
            del self._reasons[last]

    # ------------------------------------------------------------------ what a summary reads

    def statuses(self) -> list[str]:
        """Every filled row's status, in row order."""
        words = self._words
        return [words[self._statuses[r]] for r in range(self.rows) if self._filled[r]]

    def counts(self) -> dict[str, int]:
        """Each status's count, in the order they first come in row order (as ``status_counts``)."""
        out: dict[str, int] = {}
        for status in self.statuses():
            out[status] = out.get(status, 0) + 1
        return out

    def first_not_ok(self) -> int | None:
        """The first filled row whose status is not ``ok`` (the first filled row when all are)."""
        first = None
        ok = self._word_of.get("ok")
        for r in range(self.rows):
            if self._filled[r]:
                if self._statuses[r] != ok:
                    return r
                if first is None:
                    first = r
        return first

    def metric_means(self) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """``({metric: mean of its values, or None}, {metric: its limit})`` as
        :func:`imagebench.runs.writer.metric_means` gives them for the rows in order."""
        means: dict[str, float | None] = {}
        limits: dict[str, float | None] = {}
        for name in sorted(self._metrics, key=lambda n: self._first_row[n]):
            flags, values = self._metrics[name]
            got: list[float] = []
            for r in range(self.rows):
                if flags[r] == 2:
                    got.append(values[r])
                for again, value, _ in self._twice.get(r, ()):
                    if again == name and value is not None:
                        got.append(value)
            means[name] = sum(got) / len(got) if got else None
            limits[name] = self._limit[name][1]
        return means, limits

    def reasons(self) -> list[str]:
        """The first distinct reasons in row order (at most :data:`REASONS_KEPT`)."""
        return sorted(self._reasons, key=self._reasons.__getitem__)

    def distinct_fixtures(self) -> int | None:
        """How many distinct fixtures the rows that were not skipped saw (None when one does not say)."""
        skipped = self._word_of.get("skipped")
        seen: set[bytes | str] = set()
        for r in range(self.rows):
            if not self._filled[r] or self._statuses[r] == skipped:
                continue
            kind = self._fixture_kind[r]
            if kind == 0:
                return None
            seen.add(
                bytes(self._fixtures[_HALF * r : _HALF * r + _HALF]) if kind == 1 else "odd:" + self._odd_fixtures[r]
            )
        return len(seen)

    def sandboxes(self) -> set[str]:
        return set(self._sandboxes)

    def flags(self) -> set[str]:
        """Every flag any row carries."""
        return set(self._flags)


def columns_of(samples: Iterable[SampleSummary]) -> CaseColumns:
    """The columns of ``samples``: a :class:`StoredSamples`'s own, else taken from the list."""
    if isinstance(samples, StoredSamples):
        return samples.columns
    return CaseColumns.of(list(samples))


class StoredSamples(Sequence["SampleSummary"]):
    """A case's samples in row order (see the module): :meth:`hold` those of this pass, :meth:`on_disk`
    those an earlier pass left (read back, digest-checked, when looked at)."""

    def __init__(self, folder: Path, rows: int) -> None:
        self.folder = Path(folder)  # the case's folder in the run: sample-<n>/summary.json below it
        self.columns = CaseColumns(rows)
        self._held: dict[int, SampleSummary] = {}
        self._digests = bytearray(_HALF * rows)  # the first 16 bytes of each summary's sha256

    def hold(self, row: int, summary: SampleSummary) -> None:
        self.columns.add(row, summary)
        self._held[row] = summary

    def on_disk(self, row: int, summary: SampleSummary, sha256: str) -> None:
        """A sample kept on disk: its columns taken, its summary let go, its digest kept."""
        self.columns.add(row, summary)
        self._digests[_HALF * row : _HALF * row + _HALF] = bytes.fromhex(sha256)[:_HALF]

    @property
    def complete(self) -> bool:
        return self.columns.filled == self.columns.rows

    @property
    def in_memory(self) -> bool:
        return len(self._held) == self.columns.filled

    def held(self) -> list[SampleSummary]:
        """The samples of this pass alone, in row order."""
        return [self._held[r] for r in sorted(self._held)]

    def _load(self, row: int) -> SampleSummary:
        from imagebench.records import SampleSummary, parse_record
        from imagebench.runs.journal import digest
        from imagebench.runs.layout import SUMMARY, RunFolderError

        path = self.folder / f"sample-{row}" / SUMMARY
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise RunFolderError(f"{path}: kept by the resume, it cannot be read now ({exc})") from None
        if bytes.fromhex(digest(data))[:_HALF] != self._digests[_HALF * row : _HALF * row + _HALF]:
            raise RunFolderError(f"{path}: changed since the resume checked it (digest mismatch)")
        return parse_record(path, data, SampleSummary)

    def at(self, row: int) -> SampleSummary:
        """The sample in ``row``."""
        return self._held[row] if row in self._held else self._load(row)

    def _rows(self) -> list[int]:
        return [r for r in range(self.columns.rows) if self.columns.has(r)]

    @overload
    def __getitem__(self, index: int) -> SampleSummary: ...
    @overload
    def __getitem__(self, index: slice) -> list[SampleSummary]: ...
    def __getitem__(self, index: int | slice) -> SampleSummary | list[SampleSummary]:
        rows = self._rows()
        if isinstance(index, slice):
            return [self.at(r) for r in rows[index]]
        row = rows[index]
        return self.at(row)

    def __len__(self) -> int:
        return self.columns.filled

    def __iter__(self) -> Iterator[SampleSummary]:
        for r in self._rows():
            yield self.at(r)


def statuses_of(samples: Iterable[SampleSummary]) -> list[str]:
    """The samples' statuses in order (a :class:`StoredSamples`'s from its columns, reading none)."""
    if isinstance(samples, StoredSamples):
        return samples.columns.statuses()
    return [s.status for s in samples]


def flags_of(samples: Iterable[SampleSummary]) -> set[str]:
    """Every flag the samples carry."""
    if isinstance(samples, StoredSamples):
        return samples.columns.flags()
    return {flag for s in samples for flag in s.flags}


def first_not_ok(samples: Sequence[SampleSummary]) -> SampleSummary | None:
    """The first sample that did not pass, else the first (None when there is none)."""
    if isinstance(samples, StoredSamples):
        row = samples.columns.first_not_ok()
        return samples.at(row) if row is not None else None
    return next((s for s in samples if s.status != "ok"), samples[0] if samples else None)
