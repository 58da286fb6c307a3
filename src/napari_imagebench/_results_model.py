"""The results' model: the panel's sitting (one folder, a run folder in it per subject, one report
over them: :mod:`imagebench.runs.sitting`), the scored samples, what each sample's summary
explains (:mod:`._explain`) and their CSV export. Qt-free."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_imagebench._base import Notices, PanelError
from napari_imagebench._explain import Explanation, explain
from napari_imagebench._runs import PANEL_SOURCE, ResultRow, RunFolder

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.records import SampleSummary
    from imagebench.runs.sitting import Sitting

#: The columns of :meth:`ResultsModel.export_results`.
RESULT_COLUMNS = (
    "subject", "case", "sample", "status", "reason", "metric", "value", "limit", "verdict", "note", "run folder",
)  # fmt: skip


class ResultsModel:
    """Every subject's samples go into one run folder per subject, all in one sitting under
    :func:`imagebench.runs.layout.artifact_root` (or the outcome root the model is given), made
    at the session's first sample; ``report.html`` there is one page over every subject."""

    def __init__(self, notices: Notices, outcome_root: str | os.PathLike[str] | None = None) -> None:
        self.notices = notices
        self._outcome_root = Path(outcome_root) if outcome_root is not None else None
        self.results: list[ResultRow] = []
        self.run_folders: dict[str, RunFolder] = {}
        self._explained: dict[Path, Explanation] = {}  # by sample folder: a summary is written once
        self.sitting: Sitting | None = None

    @property
    def outcome_root(self) -> Path:
        if self._outcome_root is not None:
            return self._outcome_root
        from imagebench.runs.layout import artifact_root

        return Path(artifact_root())

    @property
    def sitting_dir(self) -> Path | None:
        """The sitting's folder (None before the first sample)."""
        return self.sitting.path if self.sitting is not None else None

    def run_folder(self, subject_name: str, subject: Any = None, *, seal: Any = None) -> RunFolder:
        """The run folder of ``subject_name`` in the sitting, made at its first sample (the sitting
        at the session's first); ``seal`` seals its procedural fixtures (:mod:`imagebench.runs.sealed`)."""
        folder = self.run_folders.get(subject_name)
        if folder is None:
            from imagebench.runs.sitting import Sitting

            if self.sitting is None:
                self.sitting = Sitting.create(self.outcome_root, PANEL_SOURCE)
            folder = RunFolder.create(self.sitting, subject_name, subject, seal=seal)
            self.run_folders[subject_name] = folder
        return folder

    def add(self, folder: RunFolder, case: Case, summary: SampleSummary) -> list[SampleSummary]:
        """Write ``summary`` into ``folder`` and the sitting's page again (each problem found is a
        warning); the subject's samples of ``case`` so far."""
        done = folder.add(case, summary)
        for problem in folder.problems:
            self.notices.notify("warning", f"{folder.path.name}: {problem}")
        try:
            self.write_report()
        except PanelError:
            pass  # told as a warning: the sample stands
        return done

    def write_report(self) -> Path:
        """``report.html`` of the sitting, one page over every subject
        (:func:`imagebench.report.write_html_report`), written again now; PanelError (and a
        warning) when there is no sitting yet or the page cannot be written."""
        if self.sitting is None:
            raise self.notices.fail("no report yet: score a sample first", "warning")
        from imagebench.report import ReportError, write_html_report

        try:
            return write_html_report(self.sitting.path, progress=False)
        except (ReportError, OSError) as exc:
            raise self.notices.fail(f"{self.sitting.path.name}: report.html not written: {exc}", "warning") from None

    def record(self, result: ResultRow) -> ResultRow:
        """A scored sample: kept, and told to the results pane."""
        self.results.append(result)
        self.notices.events.result.emit(result)
        return result

    def explanation(self, result: ResultRow) -> Explanation:
        """What ``result``'s summary says beyond its metric table (:func:`._explain.explain`): read
        from the ``summary.json`` in its sample folder; a summary that cannot be read is explained
        from the row alone, and says so."""
        known = self._explained.get(result.sample_dir)
        if known is not None:
            return known
        from imagebench.records import SampleSummary, read_record

        try:
            summary = read_record(result.sample_dir / "summary.json", SampleSummary)
        except Exception as exc:  # an explanation never fails the pane
            namespace, _, case_id = result.label.partition("/")
            summary = SampleSummary(
                label=result.label, namespace=namespace, case_id=case_id, subject=result.subject,
                sample=result.sample, status=result.status,  # type: ignore[arg-type]
                reason=result.reason, metrics=list(result.metrics),
                detail={"why": f"its summary.json could not be read ({type(exc).__name__}: {exc})"},
            )  # fmt: skip
            return explain(summary, result.sample_dir)
        known = self._explained[result.sample_dir] = explain(summary, result.sample_dir)
        return known

    def export_results(self, path: Path) -> Path:
        """Every result of this session as CSV (one row per metric; a sample without metrics gets
        one row), written atomically; PanelError naming the file when it cannot be written."""
        import csv
        import io

        from imagebench.records import atomic_write_text

        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(RESULT_COLUMNS)
        for r in self.results:
            base = [r.subject, r.label, "" if r.sample is None else r.sample, r.status, r.reason]
            cells = r.metric_cells() or [("", "", "", "", "")]
            for name, value, limit, verdict, why in cells:
                writer.writerow([*base, name, value, limit, verdict, why, str(r.run_dir)])
        try:
            atomic_write_text(path, out.getvalue())
        except OSError as exc:
            raise PanelError(f"{path}: the results could not be written ({exc.strerror or exc})") from None
        return path
