"""A bundle's claims: the failure modes it says it guards against, and the cases meant to prove each.

Claims come from exactly one source, decided per read:

1. ``evals.json`` at the bundle root, when it exists and is the expected envelope (a JSON object
   whose ``failureHypotheses`` is an array). Each hypothesis is a claim; its ``proofSpecs`` name the
   fixture cases meant to prove it.
2. Otherwise the legacy ``evals/risk-map.md``: optional ``---`` frontmatter, then a markdown table
   with the columns Risk, Description, Coverage and Fixture.

The two are never merged. A missing ``evals.json`` is silent; one that exists but cannot be used is
a warning and the read falls back to the risk map. A defective hypothesis or row is a warning that
skips that entry only. Nothing here raises on bad input: authoring is never blocked by a typo.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

EVALS_JSON = "evals.json"
RISK_MAP = "evals/risk-map.md"

RISK_BANDS: dict[str, str] = {
    "IN": "input",
    "RE": "reasoning",
    "OUT": "output",
    "ADV": "adversarial",
    "CHN": "chain",
}
RISK_ID = re.compile(r"^(IN|RE|OUT|ADV|CHN)-\d+$")
LEVELS: tuple[str, ...] = ("High", "Medium", "Low")
# Cells of a risk map's Fixture column that mean "no fixture yet".
_NO_FIXTURE = {"", "-", "—", "–", "none", "n/a"}
_HYPOTHESIS_FIELDS = {"id", "failure", "probability", "impact", "mustNever", "proofSpecs"}
_PROOF_SPEC_FIELDS = {"name", "setup", "expectedBehavior"}

ClaimsSource = Literal["evals.json", "risk-map", "none"]


def risk_band(risk_id: str) -> str | None:
    """The family a risk id belongs to (``IN``, ``RE``, ``OUT``, ``ADV``, ``CHN``), or None when it bands into none."""
    m = RISK_ID.match(risk_id)
    return m.group(1) if m else None


def unbanded_warning(where: str, risk_id: str) -> str:
    return (
        f"{where}: risk id {risk_id!r} does not band into a risk family; expected <FAMILY>-<number> "
        f"with FAMILY one of {', '.join(RISK_BANDS)} (e.g. IN-1)"
    )


@dataclass(frozen=True)
class ProofSpec:
    """A case meant to prove a claim: an intention until a case folder of that name exists."""

    name: str
    setup: str = ""
    expected_behavior: str = ""


@dataclass(frozen=True)
class Claim:
    """One authored failure mode (an evals.json hypothesis or a risk-map row)."""

    id: str
    description: str
    source: Literal["evals.json", "risk-map"]
    proof_specs: tuple[ProofSpec, ...] = ()
    probability: str | None = None
    impact: str | None = None
    must_never: str | None = None
    authored_coverage: str | None = None  # a risk map's Coverage cell, as written

    @property
    def band(self) -> str | None:
        return risk_band(self.id)


@dataclass
class Claims:
    """The claims of one bundle and where they came from; ``warnings`` name the file they are about."""

    source: ClaimsSource
    path: Path | None
    claims: list[Claim] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    frontmatter: dict[str, str] = field(default_factory=dict)

    def ids(self) -> set[str]:
        return {c.id for c in self.claims}


# --------------------------------------------------------------------------- evals.json


def _read_evals_json(path: Path, warnings: list[str]) -> list[Claim] | None:
    """The claims in ``path``, or None when the file is not a usable envelope (with a warning)."""
    fallback = f"claims are read from {RISK_MAP} instead"
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        warnings.append(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start}); {fallback}")
        return None
    except json.JSONDecodeError as exc:
        warnings.append(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); {fallback}")
        return None
    except OSError as exc:
        warnings.append(f"{path}: cannot be read ({exc.strerror or exc}); {fallback}")
        return None
    if not isinstance(raw, dict):
        warnings.append(f"{path}: expected a JSON object with a 'failureHypotheses' array, got {type(raw).__name__}; {fallback}")
        return None
    hypotheses = raw.get("failureHypotheses")
    if not isinstance(hypotheses, list):
        got = "nothing" if hypotheses is None else type(hypotheses).__name__
        warnings.append(f"{path}: field 'failureHypotheses' must be an array, got {got}; {fallback}")
        return None
    for key in sorted(set(raw) - {"failureHypotheses", "$schema", "schemaVersion"}):
        warnings.append(f"{path}: unknown top-level field {key!r} (ignored)")

    claims: list[Claim] = []
    seen: set[str] = set()
    for i, hyp in enumerate(hypotheses):
        where = f"{path}: failureHypotheses[{i}]"
        claim = _hypothesis(hyp, where, warnings)
        if claim is None:
            continue
        if claim.id in seen:
            warnings.append(f"{where}: duplicate id {claim.id!r}; this entry is skipped")
            continue
        seen.add(claim.id)
        if claim.band is None:
            warnings.append(unbanded_warning(where, claim.id))
        claims.append(claim)
    return claims


def _hypothesis(hyp: object, where: str, warnings: list[str]) -> Claim | None:
    if not isinstance(hyp, dict):
        warnings.append(f"{where}: expected an object, got {type(hyp).__name__}; this entry is skipped")
        return None
    hid = hyp.get("id")
    if not isinstance(hid, str) or not hid.strip():
        warnings.append(f"{where}: field 'id' is missing or not a non-empty string; this entry is skipped")
        return None
    hid = hid.strip()
    where = f"{where} ({hid})"
    failure = hyp.get("failure")
    if not isinstance(failure, str) or not failure.strip():
        warnings.append(f"{where}: field 'failure' is missing or not a non-empty string; this entry is skipped")
        return None
    levels: dict[str, str | None] = {}
    for key in ("probability", "impact"):
        value = hyp.get(key)
        if value is not None and value not in LEVELS:
            warnings.append(
                f"{where}: field {key!r} is {value!r}, expected one of {', '.join(LEVELS)}; this entry is skipped"
            )
            return None
        levels[key] = value
    must_never = hyp.get("mustNever")
    if must_never is not None and not isinstance(must_never, str):
        warnings.append(f"{where}: field 'mustNever' must be a string; this entry is skipped")
        return None
    raw_specs = hyp.get("proofSpecs", [])
    if not isinstance(raw_specs, list):
        warnings.append(f"{where}: field 'proofSpecs' must be an array; this entry is skipped")
        return None
    for key in sorted(set(hyp) - _HYPOTHESIS_FIELDS):
        warnings.append(f"{where}: unknown field {key!r} (ignored)")
    specs: list[ProofSpec] = []
    for j, spec in enumerate(raw_specs):
        swhere = f"{where}: proofSpecs[{j}]"
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"].strip():
            warnings.append(f"{swhere}: expected an object with a non-empty string 'name'; this proof spec is skipped")
            continue
        for key in sorted(set(spec) - _PROOF_SPEC_FIELDS):
            warnings.append(f"{swhere}: unknown field {key!r} (ignored)")
        specs.append(
            ProofSpec(
                name=spec["name"].strip(),
                setup=str(spec.get("setup") or ""),
                expected_behavior=str(spec.get("expectedBehavior") or ""),
            )
        )
    return Claim(
        id=hid,
        description=failure.strip(),
        source="evals.json",
        proof_specs=tuple(specs),
        probability=levels["probability"],
        impact=levels["impact"],
        must_never=must_never,
    )


# --------------------------------------------------------------------------- the legacy risk map


def _split_row(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return [cell.strip() for cell in body.split("|")]


def _is_rule(cells: list[str]) -> bool:
    return bool(cells) and all(re.fullmatch(r":?-{3,}:?", c.replace(" ", "")) for c in cells)


def _fixture_names(cell: str) -> tuple[ProofSpec, ...]:
    names = [n.strip().strip("`") for n in re.split(r"[,;]", cell)]
    return tuple(ProofSpec(name=n) for n in names if n.lower() not in _NO_FIXTURE)


def _read_risk_map(path: Path, warnings: list[str]) -> tuple[list[Claim], dict[str, str]]:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        warnings.append(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start}); the risk map is ignored")
        return [], {}
    except OSError as exc:
        warnings.append(f"{path}: cannot be read ({exc.strerror or exc}); the risk map is ignored")
        return [], {}
    lines = text.splitlines()
    front: dict[str, str] = {}
    start = 0
    if lines and lines[0].strip() == "---":
        for k in range(1, len(lines)):
            if lines[k].strip() == "---":
                for entry in lines[1:k]:
                    key, sep, value = entry.partition(":")
                    if sep and key.strip():
                        front[key.strip()] = value.strip()
                    elif entry.strip():
                        warnings.append(f"{path}: line {k}: frontmatter entry {entry.strip()!r} is not 'key: value'")
                start = k + 1
                break
        else:
            warnings.append(f"{path}: frontmatter opened with '---' on line 1 is never closed; it is read as text")

    header: list[str] | None = None
    columns: dict[str, int] = {}
    claims: list[Claim] = []
    seen: set[str] = set()
    for lineno in range(start, len(lines)):
        line = lines[lineno]
        if not line.strip().startswith("|"):
            if header is not None and claims:
                break  # the table ended
            continue
        cells = _split_row(line)
        where = f"{path}: line {lineno + 1}"
        if header is None:
            header = [c.lower() for c in cells]
            columns = {name: header.index(name) for name in ("risk", "description", "coverage", "fixture") if name in header}
            if "risk" not in columns:
                warnings.append(f"{where}: the table has no 'Risk' column (columns: {cells}); the risk map is ignored")
                return [], front
            for name in ("description", "coverage", "fixture"):
                if name not in columns:
                    warnings.append(f"{where}: the table has no {name.capitalize()!r} column")
            if "results" in header or "result" in header:
                warnings.append(
                    f"{where}: a risk map has no results column; validation is measured from graded runs "
                    "(imagebench coverage --runs), so that column is ignored"
                )
            continue
        if _is_rule(cells):
            continue

        def cell(name: str, cells: list[str] = cells) -> str:
            i = columns.get(name)
            return cells[i] if i is not None and i < len(cells) else ""

        rid = cell("risk").strip("`* ")
        if not rid:
            warnings.append(f"{where}: row has no risk id; this row is skipped")
            continue
        if rid in seen:
            warnings.append(f"{where}: duplicate risk id {rid!r}; this row is skipped")
            continue
        seen.add(rid)
        if risk_band(rid) is None:
            warnings.append(unbanded_warning(where, rid))
        claims.append(
            Claim(
                id=rid,
                description=cell("description"),
                source="risk-map",
                proof_specs=_fixture_names(cell("fixture")),
                authored_coverage=cell("coverage") or None,
            )
        )
    if header is None:
        warnings.append(f"{path}: no markdown table found; expected columns | Risk | Description | Coverage | Fixture |")
    return claims, front


# --------------------------------------------------------------------------- one source, never a merge


def read_claims(bundle_dir: str | Path) -> Claims:
    """Read a bundle's claims: ``evals.json`` when usable, else the legacy risk map, else none."""
    root = Path(bundle_dir)
    warnings: list[str] = []
    evals = root / EVALS_JSON
    if evals.is_file():
        claims = _read_evals_json(evals, warnings)
        if claims is not None:
            return Claims(source="evals.json", path=evals, claims=claims, warnings=warnings)
    elif evals.exists():
        warnings.append(f"{evals}: is not a regular file; claims are read from {RISK_MAP} instead")
    risk_map = root / RISK_MAP
    if risk_map.is_file():
        rows, front = _read_risk_map(risk_map, warnings)
        named = front.get("bundle")
        if named and named != root.name:
            warnings.append(f"{risk_map}: frontmatter names bundle {named!r}, but the bundle folder is {root.name!r}")
        return Claims(source="risk-map", path=risk_map, claims=rows, warnings=warnings, frontmatter=front)
    return Claims(source="none", path=None, claims=[], warnings=warnings)
