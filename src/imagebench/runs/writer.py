"""The run folder's one writer: a case's summary, the run's closing record, and :class:`RunWriter`,
which the executor's sink and the bench panel both write runs through."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.runs.columns import columns_of
from imagebench.runs.layout import SUMMARY, case_dir, now_iso
from imagebench.runs.verdict import case_verdict, run_passed, status_counts, verdicts_of

if TYPE_CHECKING:
    from imagebench.records import CaseSummary, RunRecord, SampleSummary
    from imagebench.runs.journal import Journal


def metric_means(samples: Sequence[SampleSummary]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """``({metric: mean of its values over samples, or None}, {metric: its limit})``: what a case's
    summary says of its metrics (and what the reader holds it to), from the samples' columns."""
    return columns_of(samples).metric_means()


def summarize_case(case: Any, subject_name: str, samples: Sequence[SampleSummary], build_s: float) -> CaseSummary:
    """The case's ``summary.json``: counts, metric means, the first reasons and its verdict (which a
    check across samples, as a bundle's rerun class has, may turn to ``fail``)."""
    from imagebench.records import CaseSummary

    columns = columns_of(samples)  # what the summary reads of each sample (runs.columns), in sample order
    means, limits = columns.metric_means()
    reasons = columns.reasons()
    verdict = case_verdict(samples)
    extra: dict[str, Any] = {}
    checks = [str(c) for c in (getattr(case, "meta", {}) or {}).get("checks") or []]
    if checks:  # a bundle case's grading checklist, for a person grading (report, panel)
        extra["checks"] = checks
    across = getattr(case.verify, "across_samples", None)
    if callable(across) and verdict != "skipped":  # a case judged over all its samples (a bundle's rerun class)
        try:
            consistency = dict(across(samples))
        except Exception as exc:
            consistency = {
                "consistent": False,
                "reason": f"the check across samples raised {type(exc).__name__}: {exc}",
            }
        extra["consistency"] = consistency
        if not consistency.get("consistent"):
            verdict = "fail"
            reasons.insert(0, f"inconsistent across samples: {consistency.get('reason', '')}")
    kinds = columns.sandboxes()
    counts = columns.counts()
    return CaseSummary(
        scoring=_scoring_of(case),
        fixtures=columns.distinct_fixtures(),
        label=case.label,
        subject=subject_name,
        kind=case.kind,
        case_class=case.case_class,
        samples=len(samples),
        sandbox=kinds.pop() if len(kinds) == 1 else None,
        counts=counts,
        passed=counts.get("ok", 0),
        scored=counts.get("ok", 0) + counts.get("wrong-answer", 0),
        metric_means=means,
        extra={"verdict": verdict, "limits": limits, "reasons": reasons[:5], "build_s": build_s, **extra},
    )


def _scoring_of(case: Any) -> str | None:
    from imagebench.runs.closure import scoring_digest

    try:
        return scoring_digest(case)
    except Exception:  # a case whose closure cannot be taken records none (C3 then fails closed)
        return None


def distinct_fixtures(samples: Sequence[SampleSummary]) -> int | None:
    """How many distinct fixtures ``samples`` saw (None when one of them does not say which)."""
    return columns_of(samples).distinct_fixtures()


def write_case_summary(
    run_dir: Path, case: Any, subject_name: str, samples: Sequence[SampleSummary], build_s: float
) -> tuple[CaseSummary, Path]:
    """The case's ``summary.json`` written (atomically); returns it and its path."""
    from imagebench.records import write_record

    summary = summarize_case(case, subject_name, samples, build_s)
    path = write_record(case_dir(run_dir, subject_name, case) / SUMMARY, summary)
    return summary, path


def closing_record(
    record: RunRecord,
    samples: Mapping[str, Sequence[SampleSummary]],
    summaries: Mapping[str, CaseSummary],
    *,
    complete: bool,
    extra: Mapping[str, Any] | None = None,
    update: Mapping[str, Any] | None = None,
) -> RunRecord:
    """``record`` as a pass over the run leaves it: finished now, its counts, verdicts and whether it passed."""
    counts: dict[str, int] = {}
    for got in samples.values():  # case by case: the order a flat pass over the samples gives
        for status, n in status_counts(got).items():
            counts[status] = counts.get(status, 0) + n
    verdicts = verdicts_of(samples, summaries)
    fields: dict[str, Any] = {
        "finished": now_iso(),
        "counts": counts,
        "complete": complete,
        "extra": {
            **(extra if extra is not None else record.extra),
            "verdicts": verdicts,
            "passed": run_passed(verdicts),
        },
        **(update or {}),
    }
    return record.model_copy(update=fields)


class RunWriter:
    """Writes one run folder: its ``run.json``, a journal line for each sample summary on disk, each
    case's summary (and its journal line) and the closing record. The executor (its sink) and the bench panel write runs
    through it, so a panel run folder is a run folder like any other.

    ``journal`` is an open :class:`~imagebench.runs.journal.Journal` held for the whole run (the
    executor's, under the run's lock); without one each write opens the journal for its line (the
    panel, whose run folder stays open between a person's samples)."""

    def __init__(
        self, run_dir: Path, subject_name: str, journal: Journal | None = None, *, artifacts: str = "all"
    ) -> None:
        self.run_dir, self.subject_name, self.journal = Path(run_dir), subject_name, journal
        self.artifacts = artifacts  # which samples keep their images (imagebench.runs.keep)

    @classmethod
    def create(cls, root: str | Path | None, subject_name: str, **fields: Any) -> tuple[RunWriter, RunRecord]:
        """A fresh ``run-<UTC timestamp>`` folder under ``root`` and its first ``run.json``
        (``complete: false``); ``fields`` are the rest of the :class:`~imagebench.records.RunRecord`."""
        from imagebench.records import RunRecord, write_record
        from imagebench.runs.layout import RUN_RECORD, new_run_dir

        run_dir, started = new_run_dir(root)
        record = RunRecord(run_id=run_dir.name, started=started, subject=subject_name, **fields)
        write_record(run_dir / RUN_RECORD, record)
        return cls(run_dir, subject_name), record

    def _append(self, write: Any) -> None:
        from imagebench.runs.journal import Journal

        if self.journal is not None:
            write(self.journal)
        else:
            with Journal.open(self.run_dir) as journal:
                write(journal)

    def event(self, event: str, detail: Mapping[str, Any]) -> None:
        """A journal line of the run's own (``start``, ``resume``, ``end``)."""
        self._append(lambda j: j.append(event, detail=dict(detail)))

    def sample(self, case: Any, sample: int, summary: SampleSummary, data: bytes | None = None) -> Path:
        """The journal line of a sample whose ``summary.json`` is on disk (``data``: its bytes, when
        the caller has them); returns its path. A sample that does not keep its images under the
        run's ``--artifacts`` loses them first, and its summary is written again without them."""
        from imagebench.runs.keep import drop_images, keeps_images
        from imagebench.runs.layout import sample_dir

        path = sample_dir(self.run_dir, self.subject_name, case, sample) / SUMMARY
        if summary.artifacts and not keeps_images(self.artifacts, summary.status, summary.sample):
            summary, data = drop_images(path, summary, self.artifacts)
        self.journal_line(path, summary, data)
        return path

    def journal_line(self, path: Path, summary: SampleSummary, data: bytes | None = None) -> None:
        """The journal line of the summary at ``path`` (a resume's, whose line a kill cut off)."""
        body = path.read_bytes() if data is None else data
        self._append(lambda j: j.unit(self.run_dir, path, summary, body))

    def case(self, case: Any, samples: Sequence[SampleSummary], build_s: float) -> CaseSummary:
        """The case's ``summary.json`` over its samples, then its journal line (its digest): the
        reader holds the summary to it, as it holds each sample's."""
        summary, path = write_case_summary(self.run_dir, case, self.subject_name, samples, build_s)
        data = path.read_bytes()
        self._append(lambda j: j.case(self.run_dir, path, summary, data))
        return summary

    def close(
        self,
        record: RunRecord,
        samples: Mapping[str, Sequence[SampleSummary]],
        summaries: Mapping[str, CaseSummary],
        *,
        complete: bool,
        extra: Mapping[str, Any],
        update: Mapping[str, Any] | None = None,
        end: bool = True,
    ) -> RunRecord:
        """``run.json`` with its counts and verdicts (:func:`closing_record`), and (``end``) the
        journal's ``end`` line; returns the record written."""
        from imagebench.records import write_record
        from imagebench.runs.layout import RUN_RECORD

        closed = closing_record(record, samples, summaries, complete=complete, extra=extra, update=update)
        write_record(self.run_dir / RUN_RECORD, closed)
        if end:
            self.event("end", {"complete": complete, "counts": closed.counts})
        return closed
