"""Task contracts, fail-closed scoring, the runner bridge (structured_verifier) and ``imagebench score``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from imagebench.fixtures.fixture import Attempt, Fixture
from imagebench.scoring import comparators as cmp
from imagebench.scoring import manifest as manifest_mod
from imagebench.scoring.answer import MARKER
from imagebench.scoring.contract import (
    AnswerScore,
    TaskContract,
    exemplar,
    load_contract,
    score_answer,
    score_pinned,
    structured_verifier,
)


def patch_comparator(monkeypatch, name: str, func) -> None:
    """Swap the function a registered comparator runs, for one test (its registry hash changes with it)."""
    monkeypatch.setitem(cmp.REGISTRY, name, dataclasses.replace(cmp.REGISTRY[name], compare=func))


def run_cli(argv: list[str]) -> int:
    """``imagebench <argv>`` with only the scoring commands registered (other modules may be mid-edit)."""
    import argparse

    from imagebench.cli import UsageError
    from imagebench.cli.scoring import add_cli

    parser = argparse.ArgumentParser(prog="imagebench")
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        import sys

        print(f"imagebench {args.command}: {exc}", file=sys.stderr)
        return 2


def contract(**over) -> dict:
    base = {
        "schema_version": 1,
        "task_id": "t",
        "answer_schema": {
            "count": {"comparator": "integer_equal"},
            "angle": {"comparator": "circular_tolerance", "config": {"tolerance": 2, "modulus": 180}},
        },
        "ground_truth": {"count": 4, "angle": 178.5},
        "scorer": {"contract": "deterministic_structured_v2_1"},
        "evaluation_eligible": True,
    }
    base.update(over)
    return base


def blocked(c, answer=None, truth=None) -> str:
    score = score_answer(c, answer if answer is not None else {"count": 4, "angle": 1.0}, truth)
    assert score.blocked, score
    assert score.answer_score is None and not score.fields
    return score.blocked


# --------------------------------------------------------------------------- scoring


def test_every_field_matched_scores_one() -> None:
    score = score_answer(contract(), {"count": 4, "angle": 0.5})
    assert score.answer_score == 1.0 and score.matched == 2 and score.scored
    assert all(r.matched for r in score.fields.values())


def test_one_mismatch_scores_zero_and_reports_each_field() -> None:
    score = score_answer(contract(), {"count": "4", "angle": 0.5})
    assert score.answer_score == 0.0
    assert not score.fields["count"].matched and "integer" in score.fields["count"].reason
    assert score.fields["angle"].matched
    data = score.to_json()
    assert data["matched"] == 1 and data["total"] == 2 and data["contract"] == "deterministic_structured_v2_1"


def test_missing_field_is_a_mismatch() -> None:
    score = score_answer(contract(), {"count": 4})
    assert score.answer_score == 0.0 and score.fields["angle"].reason == "missing from the answer"


def test_extra_fields_are_reported_and_ignored_by_default() -> None:
    score = score_answer(contract(), {"count": 4, "angle": 179.0, "confidence": 0.9, "notes": "x"})
    assert score.answer_score == 1.0 and score.extra_fields == ("confidence", "notes")


def test_extra_fields_can_be_mismatches() -> None:
    c = contract(scorer={"contract": "deterministic_structured_v2_1", "config": {"extra_fields": "mismatch"}})
    assert score_answer(c, {"count": 4, "angle": 179.0, "x": 1}).answer_score == 0.0
    assert score_answer(c, {"count": 4, "angle": 179.0}).answer_score == 1.0


def test_text_answers_are_parsed() -> None:
    assert score_answer(contract(), f'I think\n{MARKER} {{"count": 4, "angle": 177}}').answer_score == 1.0


def test_unreadable_answer_is_unscorable_not_blocked() -> None:
    score = score_answer(contract(), "the count is 4")
    assert score.unscorable and score.blocked is None and score.answer_score == 0.0 and not score.scored


def test_ground_truth_from_fixture_truth() -> None:
    c = contract(ground_truth={"count": {"from_truth": "n"}, "angle": {"from_truth": "angles", "path": [1]}})
    truth = {"n": np.int64(4), "angles": np.array([10.0, 90.0])}
    assert score_answer(c, {"count": 4, "angle": 91.0}, truth).answer_score == 1.0
    assert exemplar(c, truth) == {"count": 4, "angle": 90.0}


def test_public_fields_hold_no_gold() -> None:
    loaded, _ = load_contract(contract())
    assert loaded.public_fields() == {"count": "integer_equal", "angle": "circular_tolerance"}


# --------------------------------------------------------------------------- fail closed


@pytest.mark.parametrize("eligible", [False, None, "true", 1, "yes"])
def test_eligibility_must_be_exactly_true(eligible) -> None:
    assert "evaluation_eligible" in blocked(contract(evaluation_eligible=eligible))


def test_missing_eligibility_blocks() -> None:
    c = contract()
    del c["evaluation_eligible"]
    assert "evaluation_eligible" in blocked(c)


@pytest.mark.parametrize(
    "over, fragment",
    [
        ({"scorer": {"contract": "llm_judge"}}, "never grades"),
        ({"scorer": {"contract": "mask_dice"}}, "never grades"),
        ({"scorer": {"contract": "deterministic_structured_v9"}}, "unknown scoring contract"),
        ({"scorer": {"contract": "deterministic_structured_v2_1", "config": {"fuzzy": True}}}, "unknown"),
        ({"scorer": {"contract": "deterministic_structured_v2_1", "config": {"extra_fields": "x"}}}, "valid values"),
        ({"schema_version": 2}, "schema_version"),
        ({"surprise": 1}, "malformed"),
        ({"answer_schema": {}, "ground_truth": {}}, "declares no fields"),
        ({"answer_schema": {"count": {"comparator": "fuzzy"}}, "ground_truth": {"count": 4}}, "unknown comparator"),
        ({"answer_schema": {"count": {"comparator": ""}}, "ground_truth": {"count": 4}}, "names no comparator"),
        ({"answer_schema": {"count": {}}, "ground_truth": {"count": 4}}, "malformed"),
        ({"ground_truth": {"count": 4}}, "have no ground truth"),
        ({"ground_truth": {"count": 4, "angle": 1, "more": 2}}, "does not declare"),
        ({"ground_truth": {"count": 4.0, "angle": 1}}, "integer_equal: gold"),
        ({"ground_truth": {"count": 4, "angle": 1}, "answer_schema": {
            "count": {"comparator": "integer_equal"},
            "angle": {"comparator": "circular_tolerance", "config": {"tolerance": 100, "modulus": 180}}}},
         "half the modulus"),  # fmt: skip
        ({"ground_truth": {"count": {"from_truth": "n"}, "angle": 1}}, "no fixture truth"),
        ({"ground_truth": {"count": {"from_truth": "n", "x": 1}, "angle": 1}}, "mixes"),
        ({"answer_schema": {"v": {"comparator": "voxel_member_of_set"}},
          "ground_truth": {"v": cmp.pack_region(np.ones((2, 2), bool))}}, "only contract"),  # fmt: skip
        ({"scorer": {"contract": "extent_voxel_tolerance_v1"}}, "needs at least one field"),
    ],
)
def test_blocked_contracts(over: dict, fragment: str) -> None:
    assert fragment in blocked(contract(**over))


@pytest.mark.parametrize("raw", [None, "contract", 3, []])
def test_not_a_contract_blocks(raw) -> None:
    assert blocked(raw)


def test_blocked_regardless_of_the_answer() -> None:
    bad = contract(ground_truth={"count": "four", "angle": 1})
    for answer in ({}, {"count": "four"}, "prose", {"count": 4, "angle": 1}):
        assert score_answer(bad, answer).blocked


def test_truth_key_missing_blocks() -> None:
    c = contract(ground_truth={"count": {"from_truth": "n"}, "angle": 1})
    assert "does not have" in blocked(c, truth={"m": 4})


def test_a_comparator_that_crashes_blocks(monkeypatch) -> None:
    def broken(predicted, gold, config):
        raise RuntimeError("boom")

    patch_comparator(monkeypatch, "integer_equal", broken)
    score = score_answer(contract(), {"count": 4, "angle": 1})
    assert score.blocked and "boom" in score.blocked


# --------------------------------------------------------------------------- the runner bridge


def _fixture(tolerance=None) -> Fixture:
    return Fixture(
        provenance="test",
        data={"image": np.zeros((2, 2))},
        truth={"n": 4, "theta": 178.5},
        tolerance={"answer_mismatch": 0.0} if tolerance is None else tolerance,
    )


VERIFY_CONTRACT = TaskContract.model_validate(
    contract(ground_truth={"count": {"from_truth": "n"}, "angle": {"from_truth": "theta"}})
)


def test_verifier_scores_a_leaving() -> None:
    verify = structured_verifier(VERIFY_CONTRACT)
    outcome = verify(_fixture(), Attempt("s", arrays={"answer": {"count": 4, "angle": 0.0}}))
    assert outcome.status == "ok" and outcome.metrics[0].name == "answer_mismatch"
    assert outcome.metrics[0].value == 0.0 and outcome.metrics[0].limit == 0.0
    assert outcome.detail["answer"]["answer_score"] == 1.0 and outcome.detail["answer"]["source"] == "leaving"
    assert "blocked" not in outcome.detail


def test_verifier_wrong_answer() -> None:
    attempt = Attempt("s", arrays={"answer": {"count": 5, "angle": 0}})
    outcome = structured_verifier(VERIFY_CONTRACT)(_fixture(), attempt)
    assert outcome.status == "wrong-answer" and outcome.metrics[0].value == 1.0
    assert outcome.detail["answer"]["fields"]["count"]["matched"] is False


def test_verifier_reads_text_and_final_message() -> None:
    verify = structured_verifier(VERIFY_CONTRACT)
    text = f'{MARKER} {{"count": 4, "angle": 178}}'
    assert verify(_fixture(), Attempt("s", arrays={"answer": text})).status == "ok"
    outcome = verify(_fixture(), Attempt("s", notes={"final_message": "so:\n" + text}))
    assert outcome.status == "ok" and outcome.detail["answer"]["source"] == "final_message"


def test_verifier_unreadable_and_absent_answers() -> None:
    verify = structured_verifier(VERIFY_CONTRACT)
    outcome = verify(_fixture(), Attempt("s", arrays={"answer": "four nuclei"}))
    assert outcome.status == "unscorable-result" and outcome.metrics[0].value is None
    assert "prose" in outcome.metrics[0].unavailable
    outcome = verify(_fixture(), Attempt("s", notes={"why_not": {"answer": "the command exited with code 1"}}))
    assert outcome.status == "no-result" and "exited" in outcome.metrics[0].unavailable


def test_verifier_blocks_and_never_scores_a_blocked_task() -> None:
    ineligible = VERIFY_CONTRACT.model_copy(update={"evaluation_eligible": False})
    verify = structured_verifier(ineligible)
    for attempt in (Attempt("s", arrays={"answer": {"count": 4, "angle": 0}}), Attempt("s")):
        outcome = verify(_fixture(), attempt)
        assert outcome.status == "blocked" and "evaluation_eligible" in outcome.detail["blocked"]
        assert outcome.metrics[0].value is None and not outcome.passed


def test_verifier_refuses_a_loosened_limit() -> None:
    outcome = structured_verifier(VERIFY_CONTRACT)(
        _fixture({"answer_mismatch": 0.5}), Attempt("s", arrays={"answer": {"count": 4, "angle": 0}})
    )
    assert outcome.status == "blocked" and "fixed at 0" in outcome.detail["blocked"]


def test_verifier_blocks_when_the_manifest_does_not_pin_the_code(monkeypatch, tmp_path: Path) -> None:
    data = json.loads(manifest_mod.packaged_manifest_path().read_text())
    data["registry_hash"] = "0" * 64
    data["self_hash"] = manifest_mod.self_hash(data)  # a consistent manifest for some other scorer
    path = tmp_path / "scorer_manifest.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(manifest_mod, "packaged_manifest_path", lambda: path)
    attempt = Attempt("s", arrays={"answer": {"count": 4, "angle": 0}})
    outcome = structured_verifier(VERIFY_CONTRACT)(_fixture(), attempt)
    assert outcome.status == "blocked" and "registry hash" in outcome.detail["blocked"]


def test_answer_score_json_shapes() -> None:
    assert AnswerScore(contract="c", blocked="why").to_json()["blocked"] == "why"
    assert AnswerScore(contract="c", answer_score=0.0, unscorable="why").to_json()["unscorable"] == "why"


# --------------------------------------------------------------------------- imagebench score


def _run(capsys, tmp_path: Path, task, answer: str) -> tuple[int, dict | None, str]:
    task_path, answer_path = tmp_path / "task.json", tmp_path / "answer.txt"
    task_path.write_text(task if isinstance(task, str) else json.dumps(task))
    answer_path.write_text(answer)
    rc = run_cli(["score", "--task", str(task_path), "--answer", str(answer_path)])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else None), out.err


def test_cli_score_exit_codes(capsys, tmp_path: Path) -> None:
    rc, data, _ = _run(capsys, tmp_path, contract(), '{"count": 4, "angle": 179}')
    assert rc == 0 and data["answer_score"] == 1.0 and data["fields"]["count"]["matched"] is True
    rc, data, _ = _run(capsys, tmp_path, contract(), '{"count": 3, "angle": 179}')
    assert rc == 0 and data["answer_score"] == 0.0
    rc, data, err = _run(capsys, tmp_path, contract(evaluation_eligible=False), '{"count": 4}')
    assert rc == 3 and data["answer_score"] is None and "blocked" in err
    rc, data, err = _run(capsys, tmp_path, contract(), "four")
    assert rc == 1 and "unreadable" in err
    rc, _, err = _run(capsys, tmp_path, "{not json", '{"count": 4}')
    assert rc == 2 and "not valid JSON" in err


def test_cli_score_missing_file(capsys, tmp_path: Path) -> None:
    rc = run_cli(["score", "--task", str(tmp_path / "nope.json"), "--answer", str(tmp_path / "a")])
    assert rc == 2 and "missing" in capsys.readouterr().err


def test_cli_score_refuses_a_modified_comparator(capsys, tmp_path: Path, monkeypatch) -> None:
    def integer_equal(predicted, gold, config=None):
        """Accepts any integer."""
        return cmp.FieldResult(True, "matched")

    task = contract(answer_schema={"count": {"comparator": "integer_equal"}}, ground_truth={"count": 5})
    rc, data, _ = _run(capsys, tmp_path, task, '{"count": 999}')
    assert rc == 0 and data["answer_score"] == 0.0  # the pinned comparator: 999 is not 5
    patch_comparator(monkeypatch, "integer_equal", integer_equal)
    assert score_answer(task, {"count": 999}).answer_score == 1.0  # the unpinned scorer would say 1.0
    rc, data, err = _run(capsys, tmp_path, task, '{"count": 999}')
    assert rc == 3 and data["answer_score"] is None and data["blocked"]
    assert "integer_equal" in data["blocked"] and "registry hash" in data["blocked"]
    assert "blocked" in err and "integer_equal" in err


def test_cli_score_refuses_a_tampered_manifest(capsys, tmp_path: Path, monkeypatch) -> None:
    data = json.loads(manifest_mod.packaged_manifest_path().read_text())
    data["contracts"].append("llm_judge")  # edited without a new self-hash
    path = tmp_path / "scorer_manifest.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(manifest_mod, "packaged_manifest_path", lambda: path)
    rc, out, err = _run(capsys, tmp_path, contract(), '{"count": 4, "angle": 179}')
    assert rc == 3 and out["answer_score"] is None and "self-hash" in out["blocked"]


def test_score_pinned_takes_another_manifest(tmp_path: Path) -> None:
    path = tmp_path / "scorer_manifest.json"
    manifest_mod.write_scorer_manifest(path)
    assert score_pinned(contract(), {"count": 4, "angle": 179}, manifest=path).answer_score == 1.0
    assert "missing" in score_pinned(contract(), {"count": 4}, manifest=tmp_path / "none.json").blocked
