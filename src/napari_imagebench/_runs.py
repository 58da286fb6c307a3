"""The panel's results: one run folder per subject, and one row per scored sample.

A panel run folder is a run folder like any other (the run folder (:mod:`imagebench.runs.layout`, written by :mod:`imagebench.runs.writer`)): every sample is
journaled as it is written; the case's summary, ``run.json``, ``receipt.json`` and ``report.html``
are rewritten after each sample with the functions a headless run closes with, so ``imagebench
report``, ``compare`` and the napari reader read it as they read ``imagebench run``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.records import CaseSummary, MetricRecord, RunRecord, SampleSummary

PANEL_SOURCE = "napari-imagebench panel"


@dataclass(frozen=True)
class ResultRow:
    """One scored sample as the results pane shows it."""

    label: str
    subject: str
    sample: int | None
    status: str
    reason: str
    metrics: tuple[MetricRecord, ...]
    sample_dir: Path
    run_dir: Path
    artifacts: tuple[str, ...]
    checks: tuple[str, ...] = ()  # a bundle case's grading checklist, shown beside the scored result

    @classmethod
    def of(cls, summary: SampleSummary, run_dir: Path, sample_dir: Path, checks: tuple[str, ...] = ()) -> ResultRow:
        return cls(
            label=summary.label,
            subject=summary.subject,
            sample=summary.sample,
            status=summary.status,
            reason=summary.reason,
            metrics=tuple(summary.metrics),
            sample_dir=sample_dir,
            run_dir=run_dir,
            artifacts=tuple(summary.artifacts),
            checks=tuple(checks),
        )

    def metric_cells(self) -> list[tuple[str, str, str, str, str]]:
        """``(name, value, limit + unit, verdict, why)`` per metric."""
        cells = []
        for m in self.metrics:
            value = "n/a" if m.value is None else f"{m.value:.4g}"
            limit = f"{m.limit:g}" + (f" {m.unit}" if m.unit else "")
            cells.append((m.name, value, limit, m.verdict, m.unavailable or ""))
        return cells


@dataclass
class RunFolder:
    """The run folder one subject's panel samples go into."""

    path: Path
    record: RunRecord
    samples: dict[str, list[SampleSummary]] = field(default_factory=dict)
    summaries: dict[str, CaseSummary] = field(default_factory=dict)
    subject: Any = None  # the subject object (or the person's name) the receipt describes
    cases: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # why a receipt or report could not be written
    writer: Any = None  # the run folder's one writer (imagebench.runs.writer.RunWriter)

    @classmethod
    def create(cls, root: Path, subject_name: str, subject: Any = None) -> RunFolder:
        from imagebench.runs.conditions import EXECUTION_KEY, execution_record
        from imagebench.runs.sealed import UNSEALED_KEY
        from imagebench.runs.writer import RunWriter
        from imagebench.subjects import is_trusted

        who = subject if subject is not None else subject_name
        # the panel builds one fixture from the case's public seed for the person and the agents
        # served on it: an untrusted one (an agent) ran unsealed, and the run says so
        extra: dict[str, Any] = {} if is_trusted(who) else {UNSEALED_KEY: True}
        # what compare checks of a run: the conditions its subject ran under (a person: in-process)
        extra[EXECUTION_KEY] = execution_record(who, extra)
        from imagebench.subjects import confinement_of

        writer, record = RunWriter.create(
            root,
            subject_name,
            # how the subject was confined (a person at the viewer is no program: the report says so)
            sandbox=None if isinstance(who, str) else confinement_of(who),
            samples=0,
            selection={"source": PANEL_SOURCE},
            complete=False,
            extra=extra,
        )
        from imagebench.runs.journal import record_fields

        # a sitting's cases, samples and selection grow as the person works: the start line signs the rest
        fixed = record_fields(record, ("run_id", "started", "subject", "sandbox", "limits"), tuple(extra))
        writer.event("start", {"run_id": record.run_id, "mode": PANEL_SOURCE, "record": fixed})
        folder = cls(writer.run_dir, record, subject=subject if subject is not None else subject_name)
        folder.writer = writer
        return folder

    def next_sample(self, label: str) -> int:
        return len(self.samples.get(label, []))

    def add(self, case: Any, summary: SampleSummary) -> list[SampleSummary]:
        """Journal a sample just written, then rewrite its case's summary and ``run.json``, as a run
        does at its end (through the run folder's one writer); returns the case's samples so far."""
        from imagebench.runs.writer import RunWriter

        writer = self.writer or RunWriter(self.path, self.record.subject)
        writer.sample(case, summary.sample or 0, summary)
        done = self.samples.setdefault(case.label, [])
        done.append(summary)
        build_s = float(summary.times.get("build_s", 0.0))
        self.summaries[case.label] = writer.case(case, done, build_s)
        selection = dict(self.record.selection)
        bundle = case.meta.get("bundle")
        if bundle is not None:  # as `run --bundle` records which bundle ran
            selection["bundles"] = sorted({*selection.get("bundles", []), str(bundle)})
        self.record = writer.close(
            self.record,
            self.samples,
            self.summaries,
            complete=True,
            extra={k: v for k, v in self.record.extra.items() if k not in ("verdicts", "passed")},
            update={
                "selection": selection,
                "samples": max(len(got) for got in self.samples.values()),
                "cases": list(self.samples),
            },
            end=False,  # the folder stays open for the person's next sample
        )
        self.cases[case.label] = case
        self._write_receipt_and_report()
        return done

    def _write_receipt_and_report(self) -> None:
        """``receipt.json`` and ``report.html``, rewritten after each sample as a headless run
        writes them at its end; a failure is kept in ``problems`` (the sample stands)."""
        from imagebench.report import write_html_report
        from imagebench.runs.receipt import anchor_from_journal, build_receipt, write_receipt

        self.problems.clear()
        try:
            seeds = {s.label: s.seed for got in self.samples.values() for s in got if s.seed is not None}
            receipt = build_receipt(
                subject=self.subject,
                samples=self.record.samples,
                seeds=seeds,
                selection=self.record.selection,
                cases=list(self.cases.values()),
            )
            # the journal as it stands after this sample (imagebench.runs.journal: its anchor)
            write_receipt(self.path, receipt.model_copy(update={"journal": anchor_from_journal(self.path)}))
        except Exception as exc:
            self.problems.append(f"receipt.json not written: {type(exc).__name__}: {exc}")
        try:
            write_html_report(self.path, progress=False)
        except Exception as exc:
            self.problems.append(f"report.html not written: {type(exc).__name__}: {exc}")
