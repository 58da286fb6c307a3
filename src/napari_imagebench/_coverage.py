"""The Coverage tab's table: one skill's claims, joined with the runs this panel wrote."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.bundle.coverage import Row


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
