"""The panel's results: one sitting, a run folder in it per subject, and one row per scored sample.

A panel session is one *sitting* (:mod:`imagebench.runs.sitting`): a ``sitting-<UTC stamp>``
folder made at its first sample, holding one run folder per subject the person ran (you, the
reference, a solver, a command, an agent) and one ``report.html`` over all of them. Each of those
run folders is a run folder like any other (the run folder (:mod:`imagebench.runs.layout`, written
by :mod:`imagebench.runs.writer`)): every sample is journaled as it is written; the case's summary,
``run.json`` and ``receipt.json`` are rewritten after each sample with the functions a headless run
closes with, so ``imagebench report``, ``compare`` and the napari reader read it as they read
``imagebench run``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.records import CaseSummary, MetricRecord, RunRecord, SampleSummary
    from imagebench.runs.sitting import Sitting

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
    """The run folder one subject's panel samples go into, in the panel's sitting."""

    path: Path
    record: RunRecord
    samples: dict[str, list[SampleSummary]] = field(default_factory=dict)
    summaries: dict[str, CaseSummary] = field(default_factory=dict)
    subject: Any = None  # the subject object (or the person's name) the receipt describes
    cases: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # why a receipt could not be written
    writer: Any = None  # the run folder's one writer (imagebench.runs.writer.RunWriter)
    seal: Any = None  # imagebench.runs.sealed.Seal of an untrusted subject's run (a command's), as imagebench run seals it

    @classmethod
    def create(cls, sitting: Sitting, subject_name: str, subject: Any = None, *, seal: Any = None) -> RunFolder:
        """A run folder for ``subject_name`` in ``sitting``, its ``run.json`` recording what
        ``imagebench run`` records of the subject: how it was confined and its limits, how its
        fixtures were seeded (``seal``: sealed as by default, else an untrusted subject ran
        unsealed on the viewer's fixture and says so), its spec and identity, its conditions."""
        from imagebench.runs.conditions import EXECUTION_KEY, execution_record
        from imagebench.runs.sealed import RECORD_KEY as SEALED_KEY
        from imagebench.runs.sealed import UNSEALED_KEY
        from imagebench.subjects import SubjectKind, confinement_of, identity_of, is_trusted, limits_of

        who = subject if subject is not None else subject_name
        extra: dict[str, Any] = {}
        if seal is not None:
            extra[SEALED_KEY] = seal.record()
        elif not is_trusted(who):  # an agent served the viewer's fixture, built from the case's public seed
            extra[UNSEALED_KEY] = True
        if isinstance(who, SubjectKind):  # a program: how imagebench run records it
            from imagebench.executor.run import IDENTITY_KEY, subject_record

            extra.update(subject_record(who))
            extra[IDENTITY_KEY] = identity_of(who)
        # what compare checks of a run: the conditions its subject ran under (a person: in-process)
        extra[EXECUTION_KEY] = execution_record(who, extra)
        writer, record = sitting.new_run(
            subject_name,
            # how the subject was confined (a person at the viewer is no program: the report says so)
            sandbox=None if isinstance(who, str) else confinement_of(who),
            limits=limits_of(who),
            samples=0,
            selection={"source": PANEL_SOURCE},
            complete=False,
            extra=extra,
        )
        from imagebench.runs.journal import record_fields

        # a sitting's cases, samples and selection grow as the person works: the start line signs the rest
        fixed = record_fields(record, ("run_id", "started", "subject", "sandbox", "limits"), tuple(record.extra))
        writer.event("start", {"run_id": record.run_id, "mode": PANEL_SOURCE, "record": fixed})
        folder = cls(writer.run_dir, record, subject=who, seal=seal)
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
        self._write_receipt()
        return done

    def _write_receipt(self) -> None:
        """``receipt.json``, rewritten after each sample as a headless run writes it at its end
        (its journal's anchor included); a failure is kept in ``problems`` (the sample stands).
        The page is the sitting's, one over every subject (:meth:`ResultsModel.write_report`)."""
        from imagebench.runs.receipt import anchor_from_journal, build_receipt, write_receipt
        from imagebench.runs.sealed import recorded_commitment

        self.problems.clear()
        try:
            seeds = {s.label: s.seed for got in self.samples.values() for s in got if s.seed is not None}
            receipt = build_receipt(
                subject=self.subject,
                samples=self.record.samples,
                seeds=seeds,
                selection=self.record.selection,
                cases=list(self.cases.values()),
                sealed=recorded_commitment(self.record.extra),
                identity=self.record.extra.get("subject_identity"),
            )
            # the journal as it stands after this sample (imagebench.runs.journal: its anchor)
            write_receipt(self.path, receipt.model_copy(update={"journal": anchor_from_journal(self.path)}))
        except Exception as exc:
            self.problems.append(f"receipt.json not written: {type(exc).__name__}: {exc}")
