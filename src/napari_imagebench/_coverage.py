"""The Coverage tab's model: one skill's claims, joined with the runs this panel wrote. Qt-free.

:meth:`CoverageModel.coverage` is the coverage table ``imagebench coverage`` prints for a skill,
joined with the run folders this panel has written; it only asks
:func:`imagebench.bundle.coverage.coverage_report` for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.bundle.coverage import Row
    from napari_imagebench._browser_model import BrowserModel
    from napari_imagebench._results_model import ResultsModel


@dataclass(frozen=True)
class CoverageView:
    """The coverage table of one skill, as ``imagebench coverage BUNDLE --runs ...`` prints it.

    ``rows`` come from :func:`imagebench.bundle.coverage.coverage_report` unchanged; ``warnings``
    are the ones it prints after the table (the skill's presentation coverage among them).
    ``bundle`` is None when no bundle is open for the skill; ``note`` then says so.
    """

    skill: str
    bundle: Path | None
    claims_source: str
    rows: tuple[Row, ...]
    warnings: tuple[str, ...]
    runs: tuple[Path, ...]
    note: str = ""

    def title(self) -> str:
        if self.bundle is None:
            return self.note
        text = f"{self.skill}: {len(self.rows)} claim(s) from {self.claims_source}"
        if self.runs:
            return text + f", validated against {len(self.runs)} run(s)"
        return text + ", no run scored yet"

    def cells(self, row: Row) -> tuple[str, str, str, str, str, str]:
        """``(claim, band, coverage, validation, cases, samples)`` for one row, as plain text.

        The cases cell names each case with its verdict over the runs (``pass``, ``fail``,
        ``ungraded``), a proof spec with no folder as ``(missing)`` and a case that only lists the
        claim in its risks as ``(lists it)``; the samples cell counts the graded samples.
        """

        def shown(case_id: str) -> str:
            verdict = row.case_verdicts.get(case_id)
            return f"{case_id} ({verdict})" if self.runs and verdict else case_id

        # in the command's order: realized proof specs, missing ones, then cases that list the claim
        lines = ["(no proof specs)"] if not row.proof_specs else []
        lines += [shown(c) for c in row.realized]
        lines += [f"{m} (missing)" for m in row.missing]
        lines += [f"{shown(c)} (lists it)" for c in row.cases if c not in row.realized]
        passed, failed = len(row.passed_samples), len(row.failed_samples)
        samples = f"{passed} passed, {failed} failed" if passed + failed else "-"
        return (row.claim_id, row.band or "?", row.coverage, row.validation, "\n".join(lines), samples)


class CoverageModel:
    """Which runs the coverage view counts, and the view of one skill."""

    def __init__(self, browser: BrowserModel, ledger: ResultsModel) -> None:
        self.browser, self.ledger = browser, ledger
        #: the coverage view also counts every run folder under the outcome root, not only this panel's
        self.all_runs = False

    def coverage_runs(self) -> list[Path]:
        """The run folders the coverage view reads: this panel's, then (when ``all_runs``)
        every other run folder under the outcome root (``run-*``, and each sitting's runs)."""
        from imagebench.runs.sitting import run_folders_under

        runs = [f.path for f in self.ledger.run_folders.values()]
        if self.all_runs:
            runs += [p for p in run_folders_under(self.ledger.outcome_root) if p not in runs]
        return runs

    def coverage(self, skill: str) -> CoverageView:
        """The coverage table of ``skill`` (a namespace) against :meth:`coverage_runs`.

        With a bundle open for the skill, the rows and warnings are exactly what
        ``imagebench coverage BUNDLE --runs RUN...`` prints. Without one there are no claims:
        the view says so and carries the presentation-coverage warning of the skill's cases.
        Never raises: a bundle that can no longer be read is a note.
        """
        runs = tuple(self.coverage_runs())
        bundle = self.browser.bundles.get(skill)
        if bundle is None:
            note = f"no bundle is open for {skill}: its claims come from a skill bundle (open one with Bundle…)"
            return CoverageView(skill, None, "none", (), tuple(self._presentation_warnings(skill)), runs, note)
        from imagebench.bundle.coverage import coverage_report

        try:
            report = coverage_report(bundle.path, runs)
        except Exception as exc:
            note = f"the bundle {bundle.path} cannot be read now: {type(exc).__name__}: {exc}"
            return CoverageView(skill, None, bundle.claims.source, (), (), runs, note)
        return CoverageView(
            skill, bundle.path, report.bundle.claims.source, tuple(report.rows), tuple(report.warnings), runs
        )

    def _presentation_warnings(self, skill: str) -> list[str]:
        """The presentation-coverage warning of ``skill`` over the panel's cases of that namespace."""
        from imagebench.case.model import presentation_warnings

        try:
            from imagebench import cases as builtin

            skills = builtin.skills()
        except Exception as exc:
            return [f"the built-in skills could not be read ({type(exc).__name__}: {exc}); no presentation check"]
        cases = [r.case for r in self.browser.rows() if r.namespace == skill and r.case is not None]
        return presentation_warnings(skills, cases)
