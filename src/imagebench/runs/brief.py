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
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.records import SampleSummary
    from imagebench.runs.reader import SampleEntry

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

    def __init__(self, window: range | None = None, only: str | None = None) -> None:
        self.window, self.only = window, only
        self.cases: dict[str, CaseBriefs] = {}

    def case(self, label: str) -> CaseBriefs:
        return self.cases.setdefault(label, CaseBriefs())

    def take(self, entry: SampleEntry) -> bool:
        """Gather one checked sample; False: the reader need not keep it (a sample left out is
        kept by the reader whatever this says, with why)."""
        summary = entry.summary
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
    )
