"""Bundle claims: evals.json wins, a malformed one falls back to the risk map, the two never merge;
coverage is derived from proof specs against case folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imagebench.bundle.claims import read_claims, risk_band
from imagebench.bundle.coverage import derive_coverage

RISK_MAP = """\
---
bundle: my-skill
---
# Risks

| Risk | Description | Coverage | Fixture |
|---|---|---|---|
| IN-7 | Empty/thin input | ● covered | refusal-thin-input |
| RE-7 | Invents metrics | ◐ partial | golden-basic, golden-two |
| ADV-7 | Prompt injection via pasted doc | ○ gap | — |
"""


def _hyp(hid: str, *specs: str, **extra: object) -> dict[str, object]:
    return {"id": hid, "failure": f"failure {hid}", "proofSpecs": [{"name": s} for s in specs], **extra}


def _bundle(tmp_path: Path, evals: object | None = None, risk_map: str | None = None, raw: str | None = None) -> Path:
    root = tmp_path / "my-skill"
    (root / "evals" / "fixtures").mkdir(parents=True)
    if raw is not None:
        (root / "evals.json").write_text(raw, encoding="utf-8")
    elif evals is not None:
        (root / "evals.json").write_text(json.dumps(evals), encoding="utf-8")
    if risk_map is not None:
        (root / "evals" / "risk-map.md").write_text(risk_map, encoding="utf-8")
    return root


def test_evals_json_wins_over_the_risk_map_and_nothing_is_merged(tmp_path: Path) -> None:
    root = _bundle(tmp_path, {"failureHypotheses": [_hyp("IN-1", "a"), _hyp("OUT-2")]}, RISK_MAP)
    claims = read_claims(root)
    assert claims.source == "evals.json"
    assert claims.path == root / "evals.json"
    assert [c.id for c in claims.claims] == ["IN-1", "OUT-2"]
    assert not claims.ids() & {"IN-7", "RE-7", "ADV-7"}
    assert claims.warnings == []


def test_an_empty_but_valid_evals_json_still_wins(tmp_path: Path) -> None:
    claims = read_claims(_bundle(tmp_path, {"failureHypotheses": []}, RISK_MAP))
    assert claims.source == "evals.json" and claims.claims == [] and claims.warnings == []


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"failureHypotheses": {"id": "IN-1"}}', "'failureHypotheses' must be an array"),
        ('{"other": []}', "'failureHypotheses' must be an array, got nothing"),
    ],
)
def test_a_malformed_evals_json_warns_and_falls_back_to_the_risk_map(tmp_path: Path, raw: str, says: str) -> None:
    root = _bundle(tmp_path, raw=raw, risk_map=RISK_MAP)
    claims = read_claims(root)
    assert claims.source == "risk-map"
    assert [c.id for c in claims.claims] == ["IN-7", "RE-7", "ADV-7"]
    assert len(claims.warnings) == 1
    assert str(root / "evals.json") in claims.warnings[0] and says in claims.warnings[0]
    assert "risk-map.md instead" in claims.warnings[0]


def test_non_utf8_evals_json_falls_back(tmp_path: Path) -> None:
    root = _bundle(tmp_path, risk_map=RISK_MAP)
    (root / "evals.json").write_bytes(b'{"failureHypotheses": ["\xff"]}')
    claims = read_claims(root)
    assert claims.source == "risk-map" and "not UTF-8" in claims.warnings[0]


def test_malformed_evals_json_without_a_risk_map_leaves_no_claims(tmp_path: Path) -> None:
    claims = read_claims(_bundle(tmp_path, raw="nope"))
    assert claims.source == "none" and claims.claims == [] and len(claims.warnings) == 1


def test_no_claims_source_at_all_is_silent(tmp_path: Path) -> None:
    claims = read_claims(_bundle(tmp_path))
    assert claims.source == "none" and claims.warnings == []


def test_defective_hypotheses_are_skipped_one_by_one_with_a_warning(tmp_path: Path) -> None:
    hyps = [
        _hyp("IN-1", "a"),
        {"failure": "no id at all"},
        "a string",
        _hyp("RE-1", probability="Sometimes"),
        {"id": "RE-2", "failure": "specs not a list", "proofSpecs": "golden"},
        {"id": "RE-3"},
        _hyp("IN-1", "b"),  # duplicate
        _hyp("OUT-1", "x", impact="High", mustNever="never do it"),
    ]
    root = _bundle(tmp_path, {"failureHypotheses": hyps})
    claims = read_claims(root)
    assert claims.source == "evals.json"
    assert [c.id for c in claims.claims] == ["IN-1", "OUT-1"]
    text = "\n".join(claims.warnings)
    assert len(claims.warnings) == 6
    assert all(w.startswith(str(root / "evals.json")) for w in claims.warnings)
    for needle in (
        "failureHypotheses[1]: field 'id' is missing",
        "failureHypotheses[2]: expected an object",
        "field 'probability' is 'Sometimes'",
        "field 'proofSpecs' must be an array",
        "failureHypotheses[5] (RE-3): field 'failure' is missing",
        "failureHypotheses[6]: duplicate id 'IN-1'",
    ):
        assert needle in text
    out = claims.claims[1]
    assert out.impact == "High" and out.must_never == "never do it" and out.probability is None


def test_a_bad_proof_spec_is_skipped_but_its_hypothesis_kept(tmp_path: Path) -> None:
    hyp = {"id": "IN-1", "failure": "f", "proofSpecs": [{"name": "good"}, {"setup": "no name"}, 3]}
    claims = read_claims(_bundle(tmp_path, {"failureHypotheses": [hyp]}))
    assert [s.name for s in claims.claims[0].proof_specs] == ["good"]
    assert sum("this proof spec is skipped" in w for w in claims.warnings) == 2


def test_unbanded_ids_warn_but_stay(tmp_path: Path) -> None:
    root = _bundle(tmp_path, {"failureHypotheses": [_hyp("SEC-1"), _hyp("in-2"), _hyp("CHN-3")]})
    claims = read_claims(root)
    assert [c.id for c in claims.claims] == ["SEC-1", "in-2", "CHN-3"]
    assert [c.band for c in claims.claims] == [None, None, "CHN"]
    assert len(claims.warnings) == 2
    assert all("does not band into a risk family" in w for w in claims.warnings)


def test_unknown_fields_in_evals_json_are_warnings(tmp_path: Path) -> None:
    hyp = {**_hyp("IN-1", "a"), "severity": 3}
    claims = read_claims(_bundle(tmp_path, {"failureHypotheses": [hyp], "notes": "x"}))
    assert [c.id for c in claims.claims] == ["IN-1"]
    assert any("unknown top-level field 'notes'" in w for w in claims.warnings)
    assert any("unknown field 'severity'" in w for w in claims.warnings)


def test_risk_map_rows_frontmatter_and_fixture_column(tmp_path: Path) -> None:
    claims = read_claims(_bundle(tmp_path, risk_map=RISK_MAP))
    assert claims.source == "risk-map" and claims.warnings == []
    assert claims.frontmatter == {"bundle": "my-skill"}
    by_id = {c.id: c for c in claims.claims}
    assert [s.name for s in by_id["IN-7"].proof_specs] == ["refusal-thin-input"]
    assert [s.name for s in by_id["RE-7"].proof_specs] == ["golden-basic", "golden-two"]
    assert by_id["ADV-7"].proof_specs == ()
    assert by_id["RE-7"].authored_coverage == "◐ partial"
    assert by_id["ADV-7"].description == "Prompt injection via pasted doc"


def test_risk_map_defects_are_warnings(tmp_path: Path) -> None:
    text = RISK_MAP.replace("bundle: my-skill", "bundle: another").replace(
        "| ADV-7 |", "|  | no id |  |  |\n| XX-1 | odd | ○ gap | — |\n| ADV-7 |"
    )
    root = _bundle(tmp_path, risk_map=text)
    claims = read_claims(root)
    assert [c.id for c in claims.claims] == ["IN-7", "RE-7", "XX-1", "ADV-7"]
    text = "\n".join(claims.warnings)
    assert "row has no risk id" in text
    assert "'XX-1' does not band" in text
    assert "frontmatter names bundle 'another'" in text
    assert all(str(root / "evals" / "risk-map.md") in w for w in claims.warnings)


def test_risk_map_without_a_table_or_risk_column(tmp_path: Path) -> None:
    claims = read_claims(_bundle(tmp_path, risk_map="just prose\n"))
    assert claims.claims == [] and "no markdown table" in claims.warnings[0]
    claims = read_claims(_bundle(tmp_path / "b", risk_map="| Id | Text |\n|---|---|\n| IN-1 | x |\n"))
    assert claims.claims == [] and "no 'Risk' column" in claims.warnings[0]


def test_risk_bands() -> None:
    assert [risk_band(x) for x in ("IN-1", "RE-22", "OUT-3", "ADV-4", "CHN-5")] == ["IN", "RE", "OUT", "ADV", "CHN"]
    assert [risk_band(x) for x in ("IN1", "IN-", "in-1", "IN-1a", "SEC-1", "")] == [None] * 6


def test_coverage_is_derived_from_proof_specs_against_case_folders(tmp_path: Path) -> None:
    hyps = [_hyp("IN-1", "a", "b"), _hyp("IN-2", "a", "zzz"), _hyp("IN-3", "zzz"), _hyp("IN-4")]
    claims = read_claims(_bundle(tmp_path, {"failureHypotheses": hyps})).claims
    folders = {"a", "b", "c"}
    assert derive_coverage(claims[0], folders) == ("covered", ["a", "b"], [])
    assert derive_coverage(claims[1], folders) == ("partial", ["a"], ["zzz"])
    assert derive_coverage(claims[2], folders) == ("gap", [], ["zzz"])
    assert derive_coverage(claims[3], folders) == ("gap", [], [])
