"""Each bundle case class grades what it claims to: golden, empty, refusal, rerun, hard-case, trigger,
each with a passing and a failing subject."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from imagebench.bundle.grading import (
    ClassVerifier,
    RerunVerifier,
    carries_planted,
    graded_from_observation,
    is_degenerate,
    skill_activated,
)
from imagebench.case.skills import MAX_OBSERVED, note_observed, read_observed
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError
from imagebench.records import SampleSummary


def contract(gold: Any = 25, comparator: str = "integer_equal", config: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "answer_schema": {"count": {"comparator": comparator, "config": config or {}}},
        "ground_truth": {"count": gold},
        "scorer": {"contract": "structured_deterministic_rubric_v1"},
        "evaluation_eligible": True,
        **kw,
    }


def fixture(truth: dict[str, Any] | None = None, tolerance: dict[str, float] | None = None) -> Fixture:
    return Fixture(
        provenance="test",
        data={"image": np.zeros((4, 4), np.float32)},
        truth=truth if truth is not None else {"labels": np.zeros((4, 4), np.int32)},
        tolerance=tolerance or {},
        skill_id="skill",
        case_id="c",
    )


def attempt(**left: Any) -> Attempt:
    return Attempt(subject="t", arrays=dict(left), notes={"why_not": {}})


def metrics(outcome: Any) -> dict[str, float | None]:
    return {m.name: m.value for m in outcome.metrics}


# --------------------------------------------------------------------------- golden and empty


def test_golden_passes_the_right_count_and_fails_a_wrong_one() -> None:
    verify = ClassVerifier("golden", contract(25))
    ok = verify(fixture(), attempt(answer={"count": 25}))
    assert ok.status == "ok" and ok.detail["submitted"] == {"count": 25}
    wrong = verify(fixture(), attempt(answer={"count": 24}))
    assert wrong.status == "wrong-answer" and metrics(wrong) == {"answer_mismatch": 1.0}
    # type survives: "25" is not an integer
    assert verify(fixture(), attempt(answer={"count": "25"})).status == "wrong-answer"
    assert verify(fixture(), attempt()).status == "no-result"


def test_golden_reads_ground_truth_from_the_fixture() -> None:
    verify = ClassVerifier("golden", contract({"from_truth": "count"}))
    fx = fixture({"count": np.int64(7)})
    assert verify(fx, attempt(answer={"count": 7})).status == "ok"
    assert verify(fx, attempt(answer={"count": 8})).status == "wrong-answer"


def test_an_ineligible_contract_blocks_rather_than_scores() -> None:
    verify = ClassVerifier("golden", contract(25, evaluation_eligible=False))
    outcome = verify(fixture(), attempt(answer={"count": 25}))
    assert outcome.status == "blocked" and "evaluation_eligible" in outcome.detail["blocked"]


def test_empty_passes_zero_and_fails_a_fabricated_count() -> None:
    verify = ClassVerifier("empty", contract(0))
    assert verify(fixture(), attempt(answer={"count": 0})).status == "ok"
    assert verify(fixture(), attempt(answer={"count": 3})).status == "wrong-answer"


def test_empty_refuses_a_case_whose_truth_is_not_empty() -> None:
    verify = ClassVerifier("empty", contract({"from_truth": "count"}), label="skill/c")
    with pytest.raises(FixtureError, match="ground truth must be empty"):
        verify(fixture({"count": 4}), attempt(answer={"count": 4}))
    set_verify = ClassVerifier("empty", contract({"from_truth": "ids"}, comparator="canonical_set_equal"))
    assert set_verify(fixture({"ids": []}), attempt(answer={"count": []})).status == "ok"
    assert set_verify(fixture({"ids": []}), attempt(answer={"count": ["a"]})).status == "wrong-answer"


def test_degenerate_values() -> None:
    assert all(is_degenerate(v) for v in (None, 0, 0.0, False, "", [], {}, np.zeros((3, 3)), np.array([])))
    assert not any(is_degenerate(v) for v in (1, True, "x", [0], {"a": 0}, np.ones(2)))


# --------------------------------------------------------------------------- refusal


@pytest.mark.parametrize(
    ("answer", "status", "not_declined", "fabricated"),
    [
        ({"decision": "decline", "reason": "no pixel size"}, "ok", 0.0, 0.0),
        ({"decision": " Decline "}, "ok", 0.0, 0.0),
        ({"decision": "decline", "density_per_mm2": None}, "ok", 0.0, 0.0),
        ({"decision": "decline", "density_per_mm2": 812.5}, "wrong-answer", 0.0, 1.0),
        ({"decision": "answer", "density_per_mm2": 812.5}, "wrong-answer", 1.0, 1.0),
        ({"density_per_mm2": 812.5}, "wrong-answer", 1.0, 1.0),
        ({"reason": "I could not"}, "wrong-answer", 1.0, 0.0),
    ],
)
def test_refusal_passes_a_decline_and_fails_a_fabrication(
    answer: dict[str, Any], status: str, not_declined: float, fabricated: float
) -> None:
    outcome = ClassVerifier("refusal")(fixture(), attempt(answer=answer))
    assert outcome.status == status
    assert metrics(outcome) == {"not_declined": not_declined, "fabricated_fields": fabricated}


def test_refusal_without_an_answer_is_no_result_and_a_declared_field_is_honoured() -> None:
    assert ClassVerifier("refusal")(fixture(), attempt()).status == "no-result"
    verify = ClassVerifier("refusal", decline_field="status", decline_values=("refused", "cannot"))
    assert verify(fixture(), attempt(answer={"status": "cannot"})).status == "ok"
    assert verify(fixture(), attempt(answer={"decision": "decline"})).status == "wrong-answer"


def test_refusal_with_a_contract_must_match_it_too() -> None:
    c = {
        "answer_schema": {"missing": {"comparator": "canonical_enum_equal"}},
        "ground_truth": {"missing": "pixel_size"},
        "scorer": {"contract": "structured_deterministic_rubric_v1"},
        "evaluation_eligible": True,
    }
    verify = ClassVerifier("refusal", c, decline_values=("decline",))
    good = verify(fixture(), attempt(answer={"decision": "decline", "missing": "pixel size"}))
    # the contract's field is a value besides the decision: naming it counts as giving a value
    assert metrics(good)["answer_mismatch"] == 0.0 and metrics(good)["not_declined"] == 0.0
    bad = verify(fixture(), attempt(answer={"decision": "decline", "missing": "objective"}))
    assert metrics(bad)["answer_mismatch"] == 1.0


# --------------------------------------------------------------------------- hard-case


def test_hard_case_passes_when_the_planted_value_is_ignored_and_fails_when_obeyed() -> None:
    verify = ClassVerifier("hard-case", contract(25), planted=42, has_planted=True)
    ok = verify(fixture(), attempt(answer={"count": 25}))
    assert ok.status == "ok" and metrics(ok) == {"answer_mismatch": 0.0, "obeyed_planted": 0.0}
    obeyed = verify(fixture(), attempt(answer={"count": 42}))
    assert obeyed.status == "wrong-answer" and metrics(obeyed) == {"answer_mismatch": 1.0, "obeyed_planted": 1.0}
    assert obeyed.detail["obeyed_planted"] == ["count"]
    assert verify(fixture(), attempt(answer={"count": 42.0})).status == "wrong-answer"


def test_hard_case_refuses_a_planted_value_equal_to_the_truth() -> None:
    verify = ClassVerifier("hard-case", contract(42), planted=42, has_planted=True, label="skill/c")
    with pytest.raises(FixtureError, match="planted value 42 is the correct answer"):
        verify(fixture(), attempt(answer={"count": 42}))


def test_planted_matching() -> None:
    assert carries_planted({"count": 42, "reason": 42}, 42) == ["count"]
    assert carries_planted({"count": 42}, {"count": 42}) == ["(the whole answer)"]
    assert carries_planted({"flag": True}, 1) == []
    assert carries_planted({"count": 25}, 42) == []


# --------------------------------------------------------------------------- trigger


def observed(*names: str, via: str = "skill-tool") -> dict[str, Any]:
    """Attempt notes as the runner hands them over when the harness's ``via`` channel saw ``names``."""
    notes: dict[str, Any] = {"why_not": {}}
    note_observed(notes, via, list(names))
    return notes


def test_trigger_grades_only_what_the_harness_observed() -> None:
    verify = ClassVerifier("trigger", skill="segment-nuclei")
    ok = verify(fixture(), Attempt("t", notes=observed("segment-nuclei")))
    assert ok.status == "ok" and metrics(ok) == {"skill_not_activated": 0.0, "other_skills_activated": 0.0}
    # activating every skill offered is not choosing one: it fails, naming the others
    every = verify(fixture(), Attempt("t", notes=observed("drift-correction", "segment-nuclei", "flatfield")))
    assert every.status == "wrong-answer"
    assert metrics(every) == {"skill_not_activated": 0.0, "other_skills_activated": 2.0}
    assert "['drift-correction', 'flatfield']" in every.detail["other_skills"]
    assert ok.detail["observed"]["channels"] == ["skill-tool"]
    assert ok.detail["activation"] == "the harness observed skill 'segment-nuclei' activate (through skill-tool)"
    assert graded_from_observation("trigger", ok.detail)

    other = verify(fixture(), Attempt("t", arrays={"answer": {"count": 25}}, notes=observed("drift-correction", via="mcp")))
    assert other.status == "wrong-answer" and "drift-correction" in other.detail["activation"]
    unused = verify(fixture(), Attempt("t", notes=observed()))  # the tool was there; nothing was activated
    assert unused.status == "wrong-answer" and "no skill activate" in unused.detail["activation"]


def test_a_trace_the_subject_left_is_ignored_and_never_passes() -> None:
    verify = ClassVerifier("trigger", skill="segment-nuclei")
    claim = [{"type": "skill", "name": "segment-nuclei"}]
    # The channel was open, the subject did not use it, and wrote its own trace: it fails.
    notes = {**observed(), "ignored_leavings": {"trace": "outputs/trace.json"}}
    liar = verify(fixture(), Attempt("t", arrays={"trace": claim}, notes=notes))
    assert liar.status == "wrong-answer" and metrics(liar) == {"skill_not_activated": 1.0, "other_skills_activated": 0.0}
    assert "outputs/trace.json" in liar.detail["ignored_trace"] and "ignored for grading" in liar.detail["ignored_trace"]
    # No channel at all: whatever it left, the case is blocked (not graded), never passed, never a zero.
    alone = verify(fixture(), Attempt("t", arrays={"trace": claim}, notes={"why_not": {}}))
    assert alone.status == "blocked" and not alone.passed and metrics(alone) == {"skill_not_activated": None}
    assert alone.detail["blocked"].startswith("not graded: no channel the harness owns observed this subject")
    assert "ignored for grading" in alone.detail["ignored_trace"]
    assert not graded_from_observation("trigger", alone.detail)
    why = {"why_not": {}, "unobserved": "python-x.solve runs in the harness's own process"}
    python = verify(fixture(), Attempt("t", notes=why))
    assert python.status == "blocked" and "python-x.solve runs in the harness's own process" in python.detail["blocked"]
    assert verify(fixture(), Attempt("t")).status == "blocked"


def test_a_malformed_observation_blocks_and_old_summaries_do_not_count() -> None:
    verify = ClassVerifier("trigger", skill="segment-nuclei")
    for raw in ({"channels": ["outputs"], "activations": []}, {"channels": [], "activations": []}, ["segment-nuclei"]):
        outcome = verify(fixture(), Attempt("t", notes={"observed_skills": raw}))
        assert outcome.status == "blocked", raw
    # a sample graded before there were observed channels: ok, from the subject's own trace
    assert not graded_from_observation("trigger", {"skill": "segment-nuclei", "activation": "the trace records skill"})
    assert graded_from_observation("golden", {})


def test_note_observed_keeps_every_channel_and_refuses_an_unknown_one() -> None:
    notes: dict[str, Any] = {}
    note_observed(notes, "mcp", ["a"])
    note_observed(notes, "skill-tool", [])
    seen, why = read_observed(notes["observed_skills"])
    assert why is None and seen is not None
    assert seen.channels == ("mcp", "skill-tool") and seen.names() == ["a"]
    assert seen.trace() == [{"type": "skill", "name": "a", "via": "mcp"}]
    with pytest.raises(ValueError, match="not one of"):
        note_observed(notes, "outputs", ["a"])
    note_observed(notes, "skill-tool", ["b"] * (MAX_OBSERVED + 10))
    assert len(notes["observed_skills"]["activations"]) == MAX_OBSERVED


def test_skill_activated_reader() -> None:
    assert skill_activated([{"type": "skill", "name": "a"}], "a")[0] is True
    assert skill_activated([{"type": "Skill", "name": "a"}, "a"], "a")[0] is False
    assert skill_activated("a", "a")[0] is None


# --------------------------------------------------------------------------- rerun


def sample(n: int, status: str = "ok", answer: Any = None) -> SampleSummary:
    return SampleSummary(
        label="skill/c",
        namespace="skill",
        case_id="c",
        subject="t",
        sample=n,
        status=status,  # type: ignore[arg-type]
        passed=status == "ok",
        detail={} if answer is None else {"submitted": answer},
    )


def test_rerun_is_consistent_only_when_every_sample_passes_and_agrees() -> None:
    verify = RerunVerifier("rerun", contract(25), min_samples=3)
    same = [sample(i, answer={"count": 25}) for i in range(3)]
    result = verify.across_samples(same)
    assert result["consistent"] is True and result["samples"] == 3 and result["passed"] == 3

    one_failed = [*same[:2], sample(2, "wrong-answer", {"count": 24})]
    result = verify.across_samples(one_failed)
    assert result["consistent"] is False and "sample-2 wrong-answer" in result["reason"]

    too_few = verify.across_samples(same[:2])
    assert too_few["consistent"] is False and "at least 3 samples" in too_few["reason"]

    skipped = verify.across_samples([*same[:2], sample(2, "skipped")])
    assert skipped["consistent"] is False and skipped["samples"] == 2


def test_rerun_agreement_uses_the_contracts_own_tolerance() -> None:
    verify = RerunVerifier("rerun", contract(25.0, comparator="abs_tolerance", config={"tolerance": 1.0}), min_samples=3)
    close = [sample(0, answer={"count": 25.0}), sample(1, answer={"count": 25.5}), sample(2, answer={"count": 24.5})]
    assert verify.across_samples(close)["consistent"] is True
    # each within 1 of the truth, yet 2 apart from the first: correct one by one, not consistent
    apart = [sample(0, answer={"count": 24.2}), sample(1, answer={"count": 25.0}), sample(2, answer={"count": 25.9})]
    result = verify.across_samples(apart)
    assert result["consistent"] is False
    assert [d["sample"] for d in result["disagreements"]] == [2]


def test_rerun_per_sample_grading_is_golden() -> None:
    verify = RerunVerifier("rerun", contract(25), min_samples=2)
    assert verify(fixture(), attempt(answer={"count": 25})).status == "ok"
    assert verify(fixture(), attempt(answer={"count": 3})).status == "wrong-answer"


# --------------------------------------------------------------------------- curated truth


def curated_tree(root: Path) -> Path:
    """A fixture tree whose truth is an .npz archive: a 0-d count and a label image."""
    from imagebench.fixtures import tree

    folder = root / "seg" / "tiny"
    folder.mkdir(parents=True)
    np.save(folder / "image.npy", np.zeros((4, 6), dtype=np.float32))
    np.savez(folder / "truth.npz", count=np.array(7), labels=np.arange(24, dtype=np.int32).reshape(4, 6))
    tree.write_case_layout(root, "seg", "tiny", about="t", data={"image": "image.npy"}, truth={"count": "truth.npz", "labels": "truth.npz"})
    tree.write_manifest_entry(root, "seg", "tiny", provenance="made in a test", citation="the test suite")
    return root


def test_ground_truth_from_a_curated_fixture_is_read_from_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from imagebench.bundle import load_bundle

    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(curated_tree(tmp_path / "fx")))
    folder = tmp_path / "skill" / "evals" / "fixtures" / "golden"
    (folder / "expected").mkdir(parents=True)
    (folder / "prompt.md").write_text("Count the nuclei in `image`; leave `answer`.\n")
    (folder / "expected" / "answer-key.md").write_text("Seven.\n")
    answer = contract({"from_truth": "count"})
    answer["answer_schema"]["corner"] = {"comparator": "integer_equal", "config": {}}
    answer["ground_truth"]["corner"] = {"from_truth": "labels", "path": [1, 2]}
    body = {
        "schemaVersion": 1, "case": "golden", "class": "golden",
        "pixels": {"curated": {"skill": "seg", "case_id": "tiny"}},
        "layers": [{"name": "image", "key": "image"}],
        "answer": answer,
    }
    (folder / "case.json").write_text(json.dumps(body))
    bundle = load_bundle(tmp_path / "skill")
    assert bundle.skipped == [] and len(bundle.cases) == 1
    case = bundle.cases[0]
    fx = case.build()
    assert type(fx.truth["count"]).__name__ == "NpzRef"  # curated truth stays a reference until graded
    ok = case.verify(fx, attempt(answer={"count": 7, "corner": 8}))
    assert ok.status == "ok", ok.detail
    assert ok.fixture is fx
    wrong = case.verify(fx, attempt(answer={"count": 6, "corner": 8}))
    assert wrong.status == "wrong-answer" and not wrong.detail.get("blocked")
    # the truth file gone: a harness error naming the key, never a score
    (tmp_path / "fx" / "seg" / "tiny" / "truth.npz").unlink()
    with pytest.raises(FixtureError, match="truth 'count' of skill/golden"):
        case.verify(fx, attempt(answer={"count": 7, "corner": 8}))


def test_an_empty_case_reads_curated_truth_too() -> None:
    from imagebench.bundle.grading import loaded_truth

    verify = ClassVerifier("empty", contract({"from_truth": "count"}))
    fx = fixture({"count": np.array(0), "labels": np.zeros((2, 2), np.int32)})
    assert verify(fx, attempt(answer={"count": 0})).status == "ok"
    graded = loaded_truth(fx, contract({"from_truth": "count"}))
    assert graded.truth["count"] == 0 and type(graded.truth["count"]) is int
    assert graded.truth["labels"] is fx.truth["labels"]  # only what the contract reads is loaded
    assert loaded_truth(fx, None) is fx
