"""A run's samples as a page needs them, gathered in bounded memory while the reader streams them.

:func:`imagebench.runs.reader.read_run` hands each checked sample to :meth:`Briefs.take` (its
``on_sample``) and keeps none of them. Per case this keeps:

- a :class:`SampleBrief` of every usable sample: its label, subject, sample, status and fixture
  digest (what the verdict and the aggregate figures are computed from; a few dozen bytes each,
  its strings shared);
- the whole summary of the samples a page shows (:attr:`CaseBriefs.shown`): the first
  :data:`SHOWN_FIRST` (so a case of up to that many samples shows them all) and, after those, the
  first :data:`SHOWN_NOT_OK` that did not pass, so a case's section on the page is bounded
  whatever its samples;
- what the case's row says of them all: the worst verdict each metric got and the first distinct
  reasons.

``window`` (a range of sample numbers) shows every usable sample in it instead: the page of one
case, written on demand, page by page (:func:`imagebench.report.write_case_report`).

:meth:`Briefs.wants` is the reader's ``wants``: it asks for the whole summary of exactly the
samples a page shows; every other sample is counted from its verified journal line
(:attr:`~imagebench.runs.reader.SampleEntry.vouched`: its status and the line's brief), unless
``check_all`` asks for every summary whole (``imagebench report --check-all``).
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.records import SampleSummary
    from imagebench.runs.reader import SampleEntry
    from imagebench.usage import Usage

#: Samples of a case shown whole on the run's page: the first ones, then the next that did not pass.
SHOWN_FIRST = 20
SHOWN_NOT_OK = 10
#: Distinct reasons kept per case (its row shows the first; the count of the rest is shown).
REASONS_KEPT = 20


@dataclass(frozen=True, slots=True)
class SampleBrief:
    """What the verdict and the aggregate figures read of a sample (``SampleSummary``'s names)."""

    label: str
    subject: str
    sample: int | None
    status: str
    fixture_digest: str | None


@dataclass
class CaseBriefs:
    """One case's samples as gathered (see the module)."""

    briefs: list[SampleBrief] = field(default_factory=list)
    shown: list[SampleSummary] = field(default_factory=list)
    not_ok_shown: int = 0  # shown beyond the first SHOWN_FIRST
    metric_verdicts: dict[str, set[str]] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.briefs)

    @property
    def hidden(self) -> int:
        """Usable samples counted but not shown whole."""
        return len(self.briefs) - len(self.shown)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for b in self.briefs:
            out[b.status] = out.get(b.status, 0) + 1
        return out


class Briefs:
    """The collector :func:`~imagebench.runs.reader.read_run` streams samples into (``on_sample=briefs.take``)."""

    def __init__(self, window: range | None = None, only: str | None = None, *, check_all: bool = False) -> None:
        self.window, self.only, self.check_all = window, only, check_all
        self.cases: dict[str, CaseBriefs] = {}

    def wants(self, label: str, sample: int, status: str | None) -> bool:
        """Whether the reader reads ``sample`` whole (it would be shown, or ``check_all``), asked in
        sample order before it is handed to :meth:`take`: the rule :meth:`take` shows by."""
        if self.check_all:
            return True
        if self.only is not None and label != self.only:
            return False
        if self.window is not None:
            return sample in self.window
        into = self.cases.get(label)
        if into is None or len(into.briefs) < SHOWN_FIRST:
            return True
        return status != "ok" and into.not_ok_shown < SHOWN_NOT_OK

    def case(self, label: str) -> CaseBriefs:
        into = self.cases.get(label)
        if into is None:
            into = self.cases[label] = CaseBriefs()
        return into

    def take(self, entry: SampleEntry) -> bool:
        """Gather one checked sample; False: the reader need not keep it (a sample left out is
        kept by the reader whatever this says, with why)."""
        summary = entry.summary
        if entry.vouched and entry.brief is not None and entry.status is not None:
            return self._vouched(entry)
        if not entry.usable or summary is None:
            return True
        if self.only is not None and entry.label != self.only:
            return False
        into = self.case(entry.label)
        intern = sys.intern
        digest = summary.fixture_digest
        into.briefs.append(
            SampleBrief(
                intern(summary.label),
                intern(summary.subject),
                summary.sample,
                intern(summary.status),
                intern(digest) if isinstance(digest, str) else None,
            )
        )
        for m in summary.metrics:
            into.metric_verdicts.setdefault(m.name, set()).add(m.verdict)
        if summary.reason and len(into.reasons) < REASONS_KEPT and summary.reason not in into.reasons:
            into.reasons.append(summary.reason)
        if self.window is not None:
            if summary.sample in self.window:
                into.shown.append(summary)
        elif len(into.briefs) <= SHOWN_FIRST:
            into.shown.append(summary)
        elif summary.status != "ok" and into.not_ok_shown < SHOWN_NOT_OK:
            into.not_ok_shown += 1
            into.shown.append(summary)
        return False

    def _vouched(self, entry: SampleEntry) -> bool:
        """A sample counted from its signed journal line (not shown: :meth:`wants` declined it)."""
        if self.only is not None and entry.label != self.only:
            return False
        assert entry.brief is not None and entry.status is not None
        into = self.case(entry.label)
        intern = sys.intern
        digest = entry.brief.fixture
        # the reader's strings: its label and subject one for the run, its status one of a few
        into.briefs.append(
            SampleBrief(
                intern(entry.label),
                entry.subject,
                entry.sample,
                intern(entry.status),
                intern(digest) if isinstance(digest, str) else None,
            )
        )
        verdicts = into.metric_verdicts
        for name, _, _, verdict in entry.brief.metrics:
            seen = verdicts.get(name)
            if seen is None:
                seen = verdicts[name] = set()
            seen.add(verdict)
        return False


@dataclass(frozen=True, slots=True)
class MetricBrief:
    """A metric of a sample as a comparison pairs it (``Metric``'s names)."""

    name: str
    unit: str
    value: float | None
    verdict: str


@dataclass(frozen=True, slots=True)
class ScoredBrief:
    """What ``compare`` pairs of a sample (``SampleSummary``'s names): its status, the fixture it
    saw and its metrics; a few hundred bytes where its summary takes kilobytes."""

    label: str
    sample: int | None
    status: str
    fixture_digest: str | None
    metrics: tuple[MetricBrief, ...]
    passed: bool = False
    usage: Usage | None = None  # what its subject spent (``compare``'s usage and cost columns)


def scored_brief(summary: SampleSummary) -> ScoredBrief:
    """The :class:`ScoredBrief` of a checked summary (its strings shared)."""
    intern = sys.intern
    digest = summary.fixture_digest
    return ScoredBrief(
        intern(summary.label),
        summary.sample,
        intern(summary.status),
        intern(digest) if isinstance(digest, str) else None,
        tuple(MetricBrief(intern(m.name), intern(m.unit), m.value, intern(m.verdict)) for m in summary.metrics),
        bool(summary.passed),
        summary.usage,
    )


class ScoredColumns(Mapping[int, ScoredBrief]):
    """One case's :class:`ScoredBrief` by sample number, kept as columns (about 60 bytes a sample
    where a brief object and its strings take several hundred): each brief is made again when it
    is looked up. Samples are added in increasing order (as the reader streams them)."""

    _DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

    def __init__(self, label: str) -> None:
        self.label = sys.intern(label)
        self._samples = array("q")
        self._words: list[str] = []  # the few distinct statuses, units and verdicts; rows hold their index
        self._word_of: dict[str, int] = {}
        self._statuses = array("H")
        self._passed = bytearray()
        # each row's usage as its JSON without the unknown figures, one after the other (about 60 bytes where
        # the object takes kilobytes, and no object a sample: small objects kept between a summary's pieces
        # keep the allocator's arenas from being given back); the object when that does not give it back
        self._usage_json = bytearray()
        self._usage_at = array("q")  # row -> where its JSON starts (-1: none)
        self._usage_len = array("l")  # row -> its JSON's length
        self._odd_usage: dict[int, Usage] = {}
        self._digests = bytearray()  # 32 bytes a sample: the digest after ``sha256:``
        self._odd_digests: dict[int, str | None] = {}  # row -> a digest of another form, or None
        self._names: list[str] = []  # every metric name seen, in the order first seen
        # rows whose metrics repeat a name or come in another order than the columns': kept whole
        self._odd_metrics: dict[int, tuple[MetricBrief, ...]] = {}
        self._columns: dict[str, tuple[bytearray, array[float], array[int], array[int]]] = {}

    def add(self, summary: SampleSummary) -> None:
        sample = summary.sample if summary.sample is not None else -1
        if self._samples and sample <= self._samples[-1]:
            raise ValueError(f"{self.label}: sample {sample} added after sample {self._samples[-1]}")
        row = len(self._samples)
        self._samples.append(sample)
        self._statuses.append(self._word(summary.status))
        self._passed.append(1 if summary.passed else 0)
        if summary.usage is not None:
            packed = _packed(summary.usage)
            if isinstance(packed, bytes):
                self._usage_at.append(len(self._usage_json))
                self._usage_len.append(len(packed))
                self._usage_json += packed
            else:
                self._usage_at.append(-1)
                self._usage_len.append(0)
                self._odd_usage[row] = packed
        else:
            self._usage_at.append(-1)
            self._usage_len.append(0)
        digest = summary.fixture_digest
        if isinstance(digest, str) and self._DIGEST.fullmatch(digest):
            self._digests += bytes.fromhex(digest[7:])
        else:
            self._digests += bytes(32)
            self._odd_digests[row] = digest
        order = tuple(m.name for m in summary.metrics)
        for m in summary.metrics:
            if m.name not in self._columns:
                self._names.append(sys.intern(m.name))
                self._columns[m.name] = (
                    bytearray(row),
                    array("d", [0.0] * row),
                    array("H", [0] * row),
                    array("H", [0] * row),
                )
        for present, values, units, verdicts in self._columns.values():
            present.append(0)
            values.append(0.0)
            units.append(0)
            verdicts.append(0)
        for m in summary.metrics:
            present, values, units, verdicts = self._columns[m.name]
            present[row] = 1 if m.value is None else 2
            values[row] = m.value if m.value is not None else 0.0
            units[row], verdicts[row] = self._word(m.unit), self._word(m.verdict)
        if len(set(order)) != len(order) or order != tuple(n for n in self._names if n in order):
            self._odd_metrics[row] = scored_brief(summary).metrics

    def _word(self, text: str) -> int:
        at = self._word_of.get(text)
        if at is None:
            if len(self._words) >= 1 << 16:
                raise ValueError(f"{self.label}: more than 65536 distinct statuses, units and verdicts")
            at = self._word_of[text] = len(self._words)
            self._words.append(sys.intern(text))
        return at

    def _row(self, sample: int) -> int | None:
        from bisect import bisect_left

        i = bisect_left(self._samples, sample)
        return i if i < len(self._samples) and self._samples[i] == sample else None

    def _brief(self, row: int) -> ScoredBrief:
        if row in self._odd_digests:
            digest = self._odd_digests[row]
        else:
            digest = "sha256:" + self._digests[32 * row : 32 * row + 32].hex()
        words = self._words
        if row in self._odd_metrics:
            metrics = self._odd_metrics[row]
        else:
            metrics = tuple(
                MetricBrief(name, words[units[row]], values[row] if present[row] == 2 else None, words[verdicts[row]])
                for name in self._names
                for present, values, units, verdicts in (self._columns[name],)
                if present[row]
            )
        sample = self._samples[row]
        return ScoredBrief(
            self.label,
            sample if sample >= 0 else None,
            words[self._statuses[row]],
            digest,
            metrics,
            bool(self._passed[row]),
            self._usage_of(row),
        )

    def _usage_of(self, row: int) -> Usage | None:
        start = self._usage_at[row]
        if start < 0:
            return self._odd_usage.get(row)
        return _unpacked(bytes(self._usage_json[start : start + self._usage_len[row]]))

    def __getitem__(self, sample: int) -> ScoredBrief:
        row = self._row(sample)
        if row is None:
            raise KeyError(sample)
        return self._brief(row)

    def __iter__(self) -> Iterator[int]:
        return (s for s in self._samples)

    def __len__(self) -> int:
        return len(self._samples)


def _packed(usage: Usage) -> bytes | Usage:
    """A sample's usage kept small: its JSON without the figures nobody measured or reported."""
    raw = usage.model_dump_json(exclude_none=True).encode("utf-8")
    return raw if type(usage).model_validate_json(raw) == usage else usage


def _unpacked(kept: bytes | Usage | None) -> Usage | None:
    if not isinstance(kept, bytes):
        return kept
    from imagebench.usage import Usage

    return Usage.model_validate_json(kept)
