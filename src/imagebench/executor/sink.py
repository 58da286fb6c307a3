"""Where finished units go: the run folder's writer (a journal line after each summary is on disk,
each case's summary as soon as all of its samples are in), the caller's ``on_sample``, the progress bar.

Each case's samples are kept as :class:`imagebench.runs.columns.StoredSamples`: the summaries of
this pass held, those a resume kept (:class:`Kept`, filled while the resume's check streams the
folder) as columns and a digest only, read back when looked at. So a resumed run's memory grows
with the units it runs, not with those it keeps, and its case summaries come from the same columns
as an uninterrupted run's."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.runs.columns import StoredSamples

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.records import CaseSummary, SampleSummary
    from imagebench.runs.progress import Bar
    from imagebench.runs.writer import RunWriter


class Kept:
    """What a resume keeps of the units an earlier pass finished: :meth:`take` is the resume
    check's ``on_sample`` (:func:`imagebench.runs.reader.read_run`): a sample the journal vouches for
    goes into its case's columns and is let go (the reader keeps it not); any other stays with the reader."""

    def __init__(self, run_dir: Path, subject_name: str, units: Mapping[str, int]) -> None:
        from imagebench.runs.layout import label_dir

        self.units = dict(units)
        self.samples = {label: StoredSamples(label_dir(run_dir, subject_name, label), n) for label, n in units.items()}
        self.count = 0

    def take(self, entry: Any) -> bool:
        from imagebench.runs.journal import digest

        stored = self.samples.get(entry.label)
        if not entry.usable or entry.summary is None or not entry.journaled or entry.data is None or stored is None:
            return True  # left out (run again), or a summary whose line a kill cut off: the reader keeps it
        stored.on_disk(entry.sample, entry.summary, digest(entry.data))
        self.count += 1
        return False

    def has(self, label: str, n: int) -> bool:
        """Whether the unit ``(label, n)`` is kept."""
        got = self.samples.get(label)
        return got is not None and got.columns.has(n)


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
        kept: Kept | None = None,
    ) -> None:
        from imagebench.runs.layout import label_dir

        self.writer = writer
        self.run_dir = writer.run_dir
        self.subject_name = writer.subject_name
        self.cases = {c.label: c for c in cases}
        self.units = units
        self.on_sample = on_sample
        self.bar = bar
        self.collected: dict[str, StoredSamples] = {
            c.label: kept.samples[c.label]
            if kept is not None and c.label in kept.samples
            else StoredSamples(label_dir(self.run_dir, self.subject_name, c.label), units[c.label])
            for c in cases
        }
        self.build_s: dict[str, float] = {}
        self.summaries: dict[str, CaseSummary] = {}

    def keep(self, label: str, sample: int, summary: SampleSummary) -> None:
        """A unit done by an earlier pass (resume) that the reader kept whole: counted, not announced."""
        self.collected[label].hold(sample, summary)

    def add(self, case: Case, sample: int, summary: SampleSummary, data: bytes | None = None) -> None:
        self.writer.sample(case, sample, summary, data)
        self.collected[case.label].hold(sample, summary)
        if self.on_sample is not None:
            self.on_sample(summary)
        if self.bar is not None:
            self.bar.advance(description=f"{case.label} #{sample}")
        self.maybe_finish(case)

    def complete(self, label: str) -> bool:
        return self.collected[label].complete

    def samples_of(self, label: str) -> Sequence[SampleSummary]:
        """The case's samples in sample order: a list when this pass holds them all, else the stored samples."""
        got = self.collected[label]
        return got.held() if got.in_memory else got

    def maybe_finish(self, case: Case) -> None:
        if case.label in self.summaries or not self.complete(case.label):
            return
        samples = self.samples_of(case.label)
        build_s = self.build_s.get(case.label)
        if build_s is None:  # every unit came from an earlier pass: its recorded build time
            build_s = self.collected[case.label].columns.build_s if samples else 0.0
        self.summaries[case.label] = self.writer.case(case, samples, build_s)
