"""What a run's journal vouches for of each unit beyond its digest: the briefs of its ``unit`` lines
(journal version 3, :class:`imagebench.runs.journal.UnitBrief`), kept as columns while the reader
streams the journal.

:func:`imagebench.runs.reader.read_run` keeps each unit's last brief here when its caller counts
samples it does not read whole (a report: ``wants``), in about 60 bytes a unit with two metrics:
per label, arrays indexed by sample number (the summary's size, whether it passed, the fixture's
digest as 32 bytes, each metric's value, limit and verdict in a column of its own). A brief of
another shape (a metric named twice, a fixture digest not of the ``sha256:`` form, a sample
number out of range) is kept whole beside them. :meth:`LineBriefs.get` makes the brief again,
its metrics in the columns' order.
"""

from __future__ import annotations

import math
import sys
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.records import SampleSummary
    from imagebench.runs.journal import UnitBrief

_LIMIT = 1 << 20  # as the reader's unit index: a forged sample number costs at most this many slots
# a metric's flags in its column: present, a value, a limit
_HAS, _VALUE, _BOUND = 1, 2, 4


@dataclass
class _Label:
    """One label's briefs, by sample number."""

    sizes: array[int] = field(default_factory=lambda: array("q"))  # -1: no brief for that sample
    passed: bytearray = field(default_factory=bytearray)
    fixtures: bytearray = field(default_factory=bytearray)  # 32 bytes a sample; the digest after ``sha256:``
    no_fixture: bytearray = field(default_factory=bytearray)  # 1: the brief names no fixture
    columns: dict[str, tuple[bytearray, array[float], array[float], array[int]]] = field(default_factory=dict)

    def grow(self, n: int) -> None:
        more = n + 1 - len(self.sizes)
        if more <= 0:
            return
        self.sizes.extend([-1] * more)
        self.passed.extend(bytes(more))
        self.fixtures.extend(bytes(32 * more))
        self.no_fixture.extend(bytes(more))
        for flags, values, limits, verdicts in self.columns.values():
            flags.extend(bytes(more))
            values.extend([0.0] * more)
            limits.extend([0.0] * more)
            verdicts.extend([0] * more)


class LineBriefs:
    """Each unit's last :class:`~imagebench.runs.journal.UnitBrief` (see the module)."""

    def __init__(self) -> None:
        self._labels: dict[str, _Label] = {}
        self._odd: dict[tuple[str, int], UnitBrief | None] = {}
        self._words: list[str] = []
        self._word_of: dict[str, int] = {}

    def _word(self, text: str) -> int | None:
        at = self._word_of.get(text)
        if at is None:
            if len(self._words) >= 1 << 16:
                return None
            at = self._word_of[text] = len(self._words)
            self._words.append(sys.intern(text))
        return at

    def set(self, label: str, n: int, brief: UnitBrief | None) -> None:
        """The brief of the unit's latest line (``None``: that line has none, an older version's)."""
        columns = self._labels.get(label)
        if columns is not None and 0 <= n < len(columns.sizes) and columns.sizes[n] >= 0:
            columns.sizes[n] = -1  # whatever an earlier line said of this unit
            for flags, *_ in columns.columns.values():
                flags[n] = 0
        odd = self._odd
        if odd:
            odd.pop((label, n), None)
        if brief is None:
            return
        fixture, metrics = brief.fixture, brief.metrics
        raw = _fixture_bytes(fixture)
        if (
            not 0 <= n < _LIMIT
            or raw is None
            or (len(metrics) > 1 and len({m[0] for m in metrics}) != len(metrics))
            or any(m[3] not in self._word_of and self._word(m[3]) is None for m in metrics)
        ):
            odd[(label, n)] = brief
            return
        if columns is None:
            columns = self._labels[label] = _Label()
        if n >= len(columns.sizes):
            columns.grow(max(n, 2 * len(columns.sizes)))
        columns.sizes[n] = brief.bytes
        columns.passed[n] = 1 if brief.passed else 0
        columns.no_fixture[n] = 1 if fixture is None else 0
        columns.fixtures[32 * n : 32 * n + 32] = raw
        word_of = self._word_of
        for name, value, limit, verdict in metrics:
            column = columns.columns.get(name)
            if column is None:
                size = len(columns.sizes)
                column = columns.columns[sys.intern(name)] = (
                    bytearray(size),
                    array("d", bytes(8 * size)),
                    array("d", bytes(8 * size)),
                    array("H", bytes(2 * size)),
                )
            flags, values, limits, verdicts = column
            flags[n] = _HAS | (_VALUE if value is not None else 0) | (_BOUND if limit is not None else 0)
            if value is not None:
                values[n] = value
            if limit is not None:
                limits[n] = limit
            verdicts[n] = word_of[verdict]

    def get(self, label: str, n: int) -> UnitBrief | LineBrief | None:
        """The brief of the unit's last line, or None when it has none."""
        odd = self._odd
        if odd and (label, n) in odd:
            return odd[(label, n)]
        columns = self._labels.get(label)
        if columns is None or not 0 <= n < len(columns.sizes):
            return None
        size = columns.sizes[n]
        if size < 0:
            return None
        words = self._words
        metrics = []
        for name, (flags, values, limits, verdicts) in columns.columns.items():
            f = flags[n]
            if f:
                metrics.append(
                    (name, values[n] if f & _VALUE else None, limits[n] if f & _BOUND else None, words[verdicts[n]])
                )
        fixture = None if columns.no_fixture[n] else "sha256:" + columns.fixtures[32 * n : 32 * n + 32].hex()
        return LineBrief(size, fixture, bool(columns.passed[n]), metrics)


@dataclass(frozen=True, slots=True)
class LineBrief:
    """A :class:`~imagebench.runs.journal.UnitBrief` as :class:`LineBriefs` makes it again (its names)."""

    bytes: int
    fixture: str | None
    passed: bool
    metrics: list[tuple[str, float | None, float | None, str]]


def _fixture_bytes(fixture: str | None) -> bytes | None:
    """The 32 bytes of a ``sha256:`` digest in lower-case hex (``bytes(32)`` for none; None for another form)."""
    if fixture is None:
        return bytes(32)
    if len(fixture) != 71 or not fixture.startswith("sha256:"):
        return None
    try:
        raw = bytes.fromhex(fixture[7:])
    except ValueError:
        return None
    return raw if raw.hex() == fixture[7:] else None


def brief_disagreement(brief: UnitBrief | LineBrief, summary: SampleSummary, data: bytes, status: str | None) -> str:
    """How a summary read whole differs from what its journal line's brief (and status) say ('' when
    it does not): the harness took both from the same summary, so only a forger parts them."""
    if status is not None and summary.status != status:
        return f"its journal line says {status}, the summary {summary.status}"
    if len(data) != brief.bytes:
        return f"its journal line says {brief.bytes} bytes, the summary has {len(data)}"
    if brief.fixture != summary.fixture_digest:
        return f"its journal line names fixture {brief.fixture}, the summary {summary.fixture_digest}"
    if brief.passed != bool(summary.passed):
        return f"its journal line says passed {brief.passed}, the summary {summary.passed}"
    said = sorted(brief.metrics, key=lambda m: m[0])
    found = sorted(((m.name, m.value, m.limit, m.verdict) for m in summary.metrics), key=lambda m: m[0])
    if len(said) != len(found) or any(not _same(a, b) for a, b in zip(said, found, strict=True)):
        return f"its journal line gives the metrics {said}, the summary {found}"
    return ""


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    if a[0] != b[0] or a[3] != b[3]:
        return False
    for x, y in ((a[1], b[1]), (a[2], b[2])):
        if (x is None) != (y is None):
            return False
        if isinstance(x, float) and isinstance(y, float) and not (x == y or (math.isnan(x) and math.isnan(y))):
            return False
    return True
