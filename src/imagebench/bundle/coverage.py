"""Coverage and validation of a bundle's claims, joined at read time.

*Coverage* is authored intent checked against the folder: a claim's proof specs name cases, and
the claim is ``covered`` when every named case exists as a case folder, ``partial`` when some do,
and a ``gap`` when none do or it names none.

*Validation* is a measured fact: which of the claim's cases were graded in the given run folders,
and whether their graded samples passed. It is read from the ``SampleSummary`` files a run leaves
(``<run>/<subject>/<skill>/<case>/sample-<n>/summary.json``) and, for a rerun case, the consistency
its ``CaseSummary`` records. A trigger case's sample counts only when its grade rests on what the
harness observed (``detail.observed``: the MCP transcript or the harness's skill tool); one graded
from a trace the subject wrote itself is named in the warnings and not counted. Nothing is stored
back: the join happens on every read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from imagebench.bundle.claims import Claim
from imagebench.bundle.load import Bundle, load_bundle

Coverage = Literal["covered", "partial", "gap"]
Validation = Literal["validated", "partial", "failed", "unvalidated"]

# Statuses that grade the subject. skipped, harness-error and blocked say nothing about it.
GRADED_STATUSES: frozenset[str] = frozenset(
    {"ok", "wrong-answer", "no-result", "unscorable-result", "timeout", "resource-limit", "budget-exceeded"}
)

# Graded statuses the harness gives a turn by itself, not through the verifier: both failures.
TURN_ENDED: frozenset[str] = frozenset({"timeout", "resource-limit", "budget-exceeded"})


@dataclass(frozen=True)
class SampleEvidence:
    """One sample of one case in one run."""

    run: str
    subject: str
    case_id: str
    sample: int | None
    status: str
    passed: bool
    # the grade rests on what the harness observed (a trigger case: detail.observed; any other: True)
    observed: bool = True

    @property
    def graded(self) -> bool:
        return self.status in GRADED_STATUSES and self.observed


@dataclass
class CaseEvidence:
    """What the runs say about one case: its samples, and (rerun) whether they agreed."""

    case_id: str
    samples: list[SampleEvidence] = field(default_factory=list)
    inconsistent_in: list[str] = field(default_factory=list)  # "<run>/<subject>" whose CaseSummary says inconsistent

    @property
    def graded(self) -> int:
        return sum(1 for s in self.samples if s.graded)

    @property
    def passed(self) -> int:
        return sum(1 for s in self.samples if s.graded and s.passed)

    @property
    def verdict(self) -> Literal["pass", "fail", "ungraded"]:
        if self.graded == 0:
            return "ungraded"
        if self.passed < self.graded or self.inconsistent_in:
            return "fail"
        return "pass"


@dataclass
class Row:
    """One claim: its coverage (from the folder) and its validation (from the runs)."""

    claim_id: str
    band: str | None
    description: str
    source: str
    coverage: Coverage
    proof_specs: list[str]
    realized: list[str]
    missing: list[str]
    cases: list[str]  # every case bearing on the claim: realized proof specs and cases listing it in risks
    validation: Validation
    case_verdicts: dict[str, str] = field(default_factory=dict)
    passed_samples: list[str] = field(default_factory=list)  # "<run>/<subject>/<case>/sample-<n>"
    failed_samples: list[str] = field(default_factory=list)
    authored_coverage: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def derive_coverage(claim: Claim, case_ids: set[str]) -> tuple[Coverage, list[str], list[str]]:
    """``(coverage, realized, missing)`` for one claim against the bundle's case folder names."""
    names = [spec.name for spec in claim.proof_specs]
    realized = [n for n in names if n in case_ids]
    missing = [n for n in names if n not in case_ids]
    if not names or not realized:
        return "gap", realized, missing
    return ("covered" if not missing else "partial"), realized, missing


def read_evidence(
    runs: Iterable[str | Path],
    skill_id: str,
    *,
    subject: str | None = None,
    warnings: list[str] | None = None,
    triggers: Iterable[str] = (),
) -> dict[str, CaseEvidence]:
    """Every sample of ``skill_id``'s cases in ``runs`` (run folders), by case id.

    Run folders are read through their one checked reader (:func:`imagebench.runs.reader.read_run`):
    a sample whose summary is missing, unreadable, or not the one the run's journal recorded (a
    summary edited after its run) is not counted and is named in ``warnings``; so is a folder
    that is not a run. Never raises for what is on disk. ``subject`` keeps only that subject's runs.
    A sample of a trigger case (its summary's class, or a case id in ``triggers``: the bundle's
    trigger cases now) is graded only when the harness observed it
    (:func:`imagebench.bundle.grading.graded_from_observation`); otherwise it is named in ``warnings``.
    """
    from imagebench.bundle.grading import graded_from_observation
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.reader import read_run

    trigger_ids = set(triggers)

    out: dict[str, CaseEvidence] = {}
    notes = warnings if warnings is not None else []
    prefix = f"{skill_id}/"
    for run in runs:
        run_dir = Path(run)
        try:
            contents = read_run(run_dir)
        except RunFolderError as exc:
            notes.append(f"{exc}; it is ignored")
            continue
        who = contents.record.subject
        if subject is not None and who != subject:
            continue
        for label in contents.labels:
            if not label.startswith(prefix):
                continue
            case_id = label[len(prefix) :]
            ev = out.setdefault(case_id, CaseEvidence(case_id))
            for entry in contents.entries(label):
                if not entry.usable or entry.summary is None:
                    if entry.problem != "missing":
                        notes.append(f"{run_dir.name}/{who}/{label} sample {entry.sample}: {entry.problem}; not counted")
                    continue
                s = entry.summary
                cls = "trigger" if case_id in trigger_ids else s.case_class
                # a timeout or a resource limit is the harness's own finding (and never a pass)
                observed = s.status in TURN_ENDED or graded_from_observation(cls, s.detail)
                if not observed and s.status in GRADED_STATUSES:
                    notes.append(
                        f"{run_dir.name}/{who}/{label} sample {entry.sample}: a trigger case graded from a trace the "
                        "subject wrote, not from what the harness observed (no MCP transcript, no skill tool); not counted"
                    )
                ev.samples.append(SampleEvidence(run_dir.name, who, case_id, s.sample, s.status, s.passed, observed))
            for problem in contents.case_problems.get(label, []):
                notes.append(f"{run_dir.name}/{who}/{label}: {problem}; its consistency is not known")
            summary = contents.case_summaries.get(label)
            consistency = summary.extra.get("consistency") if summary is not None else None
            if isinstance(consistency, dict) and consistency.get("consistent") is False:
                ev.inconsistent_in.append(f"{run_dir.name}/{who}")
    return out


def _validation(cases: Sequence[str], evidence: dict[str, CaseEvidence]) -> tuple[Validation, dict[str, str]]:
    verdicts = {c: (evidence[c].verdict if c in evidence else "ungraded") for c in cases}
    values = list(verdicts.values())
    if not values or all(v == "ungraded" for v in values):
        return "unvalidated", verdicts
    if "fail" in values:
        return "failed", verdicts
    if all(v == "pass" for v in values):
        return "validated", verdicts
    return "partial", verdicts


def _label(s: SampleEvidence) -> str:
    return f"{s.run}/{s.subject}/{s.case_id}/sample-{s.sample if s.sample is not None else '?'}"


def rows_for(bundle: Bundle, evidence: dict[str, CaseEvidence]) -> list[Row]:
    """One row per claim of ``bundle``, joined with ``evidence``."""
    case_ids = bundle.case_ids
    rows: list[Row] = []
    for claim in bundle.claims.claims:
        coverage, realized, missing = derive_coverage(claim, case_ids)
        listing = [f.case_id for f in bundle.folders if claim.id in f.risks]
        cases = list(dict.fromkeys([*realized, *listing]))
        validation, verdicts = _validation(cases, evidence)
        passed: list[str] = []
        failed: list[str] = []
        for c in cases:
            for s in evidence.get(c, CaseEvidence(c)).samples:
                if s.graded:
                    (passed if s.passed else failed).append(_label(s))
        rows.append(
            Row(
                claim_id=claim.id,
                band=claim.band,
                description=claim.description,
                source=claim.source,
                coverage=coverage,
                proof_specs=[spec.name for spec in claim.proof_specs],
                realized=realized,
                missing=missing,
                cases=cases,
                validation=validation,
                case_verdicts=verdicts,
                passed_samples=passed,
                failed_samples=failed,
                authored_coverage=claim.authored_coverage,
            )
        )
    return rows


def authored_coverage_warnings(bundle: Bundle, rows: Sequence[Row]) -> list[str]:
    """A legacy risk map's Coverage cell that disagrees with what the folders show."""
    marks = {"covered": "covered", "partial": "partial", "gap": "gap"}
    out: list[str] = []
    for row in rows:
        cell = (row.authored_coverage or "").lower()
        said = next((v for k, v in marks.items() if k in cell), None)
        if said is not None and said != row.coverage:
            out.append(
                f"{bundle.claims.path}: {row.claim_id} is marked {said!r}, but its fixtures make it {row.coverage!r}"
                + (f" (no case folder for {', '.join(row.missing)})" if row.missing else "")
            )
    return out


def presentation_warnings_for(bundle: Bundle) -> list[str]:
    """The presentation coverage warning for the bundle's skill (its built-in checklist against its cases)."""
    from imagebench.case.model import presentation_warnings

    try:
        from imagebench import cases as builtin

        skills = builtin.skills()
    except Exception as exc:  # a broken built-in registry must not hide the table
        return [f"the built-in skills could not be read ({type(exc).__name__}: {exc}); no presentation check"]
    return presentation_warnings(skills, bundle.cases)


@dataclass
class CoverageReport:
    bundle: Bundle
    rows: list[Row]
    warnings: list[str]
    runs: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "skill": self.bundle.skill_id,
            "claims_source": self.bundle.claims.source,
            "runs": self.runs,
            "rows": [r.to_json() for r in self.rows],
            "warnings": self.warnings,
        }


def coverage_report(
    bundle_dir: str | Path, runs: Iterable[str | Path] = (), *, subject: str | None = None
) -> CoverageReport:
    """Load the bundle, read the runs and join them: rows plus every warning met on the way."""
    from imagebench.runs.sitting import expand_sittings

    bundle = load_bundle(bundle_dir)
    run_list = [str(r) for r in expand_sittings(runs)]  # a panel's sitting: each of its run folders
    warnings: list[str] = []
    triggers = {f.case_id for f in bundle.folders if f.spec is not None and f.spec.case_class == "trigger"}
    evidence = read_evidence(run_list, bundle.skill_id, subject=subject, warnings=warnings, triggers=triggers)
    rows = rows_for(bundle, evidence)
    warnings.extend(authored_coverage_warnings(bundle, rows))
    warnings.extend(presentation_warnings_for(bundle))
    return CoverageReport(bundle=bundle, rows=rows, warnings=warnings, runs=run_list)


def coverage_table(bundle_dir: str | Path, runs: Iterable[str | Path] = ()) -> list[Row]:
    """One :class:`Row` per claim of the bundle at ``bundle_dir``, validated against ``runs`` (run folders)."""
    return coverage_report(bundle_dir, runs).rows
