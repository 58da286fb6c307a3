"""Where finished units go: the run folder's writer (a journal line after each summary is on disk,
each case's summary as soon as all of its samples are in), the caller's ``on_sample``, the progress bar."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.records import CaseSummary, SampleSummary
    from imagebench.runs.progress import Bar
    from imagebench.runs.writer import RunWriter


class Sink:
    """Takes each finished unit: its journal line (after its summary is on disk), ``on_sample``, the
    progress bar, and each case's summary as soon as all of its samples are in."""

    def __init__(
        self,
        writer: RunWriter,
        cases: Sequence[Case],
        units: Mapping[str, int],
        on_sample: Callable[[SampleSummary], None] | None,
        bar: Bar | None = None,
    ) -> None:
        self.writer = writer
        self.run_dir = writer.run_dir
        self.subject_name = writer.subject_name
        self.cases = {c.label: c for c in cases}
        self.units = units
        self.on_sample = on_sample
        self.bar = bar
        self.collected: dict[str, dict[int, SampleSummary]] = {c.label: {} for c in cases}
        self.build_s: dict[str, float] = {}
        self.summaries: dict[str, CaseSummary] = {}

    def keep(self, label: str, sample: int, summary: SampleSummary) -> None:
        """A unit done by an earlier pass (resume): counted, not announced."""
        self.collected[label][sample] = summary

    def add(self, case: Case, sample: int, summary: SampleSummary, data: bytes | None = None) -> None:
        self.writer.sample(case, sample, summary, data)
        self.collected[case.label][sample] = summary
        if self.on_sample is not None:
            self.on_sample(summary)
        if self.bar is not None:
            self.bar.advance(description=f"{case.label} #{sample}")
        self.maybe_finish(case)

    def complete(self, label: str) -> bool:
        return len(self.collected[label]) == self.units[label]

    def samples_of(self, label: str) -> list[SampleSummary]:
        got = self.collected[label]
        return [got[n] for n in range(self.units[label])]

    def maybe_finish(self, case: Case) -> None:
        if case.label in self.summaries or not self.complete(case.label):
            return
        samples = self.samples_of(case.label)
        build_s = self.build_s.get(case.label)
        if build_s is None:  # every unit came from an earlier pass: its recorded build time
            build_s = float(samples[0].times.get("build_s", 0.0)) if samples else 0.0
        self.summaries[case.label] = self.writer.case(case, samples, build_s)
