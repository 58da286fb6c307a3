"""align-channels-from-landmarks/synthetic-warp: the reference passes, identity and affine-only answers fail,
the warp's inverse is checked (and the check catches a wrong inverse), bad leavings are unavailable,
and truth stays out of the session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import build_case, solve_case, truth_leaks

import imagebench.cases.landmarks as lm
from imagebench.case.model import Case
from imagebench.case.session import Session, open_session
from imagebench.cases import all_cases, builders, skills
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError, Outcome

CASE = lm.CASES[0]


def build(seed: int | None = None, **params: Any) -> Fixture:
    return build_case(CASE, seed, **params)


def solve(fixture: Fixture, solver: Callable[[Session], None], case: Case = CASE) -> Outcome:
    return solve_case(case, fixture, solver)


def verdicts(outcome: Outcome) -> dict[str, str]:
    return {m.name: m.verdict for m in outcome.metrics}


def identity(session: Session) -> None:
    session.namespace["probes_fixed"] = np.array(session.namespace["probes_moving"], copy=True)


def affine_only(session: Session) -> None:
    coef = lm.fit_affine(session.namespace["landmarks_moving"], session.namespace["landmarks_fixed"])
    p = session.namespace["probes_moving"]
    session.namespace["probes_fixed"] = np.hstack([p, np.ones((len(p), 1))]) @ coef


# --------------------------------------------------------------------------- registration


def test_case_and_builder_are_registered() -> None:
    assert CASE.label in {c.label for c in all_cases()}
    assert CASE.namespace == lm.SKILL_ID == "align-channels-from-landmarks" and CASE.case_id == "synthetic-warp"
    assert lm.SKILL_ID in skills()
    assert builders()["landmarks-affine-sinusoid"] is lm.build_landmarks
    kinds = {layer.name: layer.kind for layer in CASE.layers}
    assert kinds == {
        "fixed": "image",
        "moving": "image",
        "landmarks_fixed": "points",
        "landmarks_moving": "points",
        "probes_moving": "points",
    }


# --------------------------------------------------------------------------- reference and naive answers


@pytest.mark.parametrize("seed", [0, 2, None])
def test_reference_passes(seed: int | None) -> None:
    outcome = solve(build(seed), lm.reference_landmarks)
    assert outcome.passed, outcome.detail
    assert set(outcome.artifacts) == {"fixed", "moving", "probes"}


def test_the_probes_artifact_shows_the_subjects_answer_beside_the_truth(tmp_path) -> None:
    from imagebench.runs.artifacts import write_report

    fx = build()
    right = solve(fx, lm.reference_landmarks).artifacts["probes"]
    wrong_outcome = solve(fx, identity)
    wrong = wrong_outcome.artifacts["probes"]
    nothing = CASE.verify(fx, Attempt(subject="nop")).artifacts["probes"]
    height, width = fx.data["fixed"].shape
    assert right.shape == wrong.shape == nothing.shape and right.shape[1:] == (width, 3)
    assert right.shape[0] > height  # the legend strip under the image
    coloured = [int(np.count_nonzero(np.ptp(a, axis=-1))) for a in (nothing, right, wrong)]
    assert 0 < coloured[0] < coloured[1] < coloured[2]  # the truth alone; plus crosses; plus long error lines
    assert not np.array_equal(right, wrong) and not np.array_equal(right, nothing)
    # drawn in the fixed channel's units: the three PNGs share one contrast range that suits them all
    summary = write_report(wrong_outcome, tmp_path)
    assert {p.name for p in summary.parent.glob("*.png")} == {"fixed.png", "moving.png", "probes.png"}


def test_nop_is_no_result() -> None:
    outcome = CASE.verify(build(), Attempt(subject="nop"))
    assert outcome.status == "no-result" and not outcome.passed


@pytest.mark.parametrize("seed", [0, 1, None])
def test_identity_and_affine_only_fail(seed: int | None) -> None:
    fx = build(seed)
    assert verdicts(solve(fx, identity)) == {"median_probe_error": "fail", "worst_probe_error": "fail"}
    # The sinusoid is what an affine map cannot follow: affine-only misses on the median.
    assert verdicts(solve(fx, affine_only))["median_probe_error"] == "fail"


def test_swapped_columns_fail_with_a_hint() -> None:
    def swapped(session: Session) -> None:
        lm.reference_landmarks(session)
        session.namespace["probes_fixed"] = session.namespace["probes_fixed"][:, ::-1]

    outcome = solve(build(), swapped)
    assert not outcome.passed
    assert "swapped" in outcome.detail["hint"]


def test_wrong_shape_is_unavailable() -> None:
    fx = build()
    outcome = CASE.verify(fx, Attempt(subject="t", arrays={"probes_fixed": np.zeros((3, 2))}))
    assert [m.verdict for m in outcome.metrics] == ["unavailable", "unavailable"]
    assert outcome.status == "unscorable-result"
    outcome = CASE.verify(fx, Attempt(subject="t", arrays={"probes_fixed": np.full((lm.N_PROBES, 2), np.nan)}))
    assert "NaN" in (outcome.metrics[0].unavailable or "")


# --------------------------------------------------------------------------- the warp and its inverse


@pytest.mark.parametrize("seed", range(5))
def test_warp_inverse_is_exact(seed: int) -> None:
    warp = lm._random_warp(np.random.default_rng(seed), lm.SIZE, 4.0, (1.0, 1.5))
    assert warp.contraction() < 0.5
    q = np.random.default_rng(100 + seed).uniform(0, lm.SIZE, (500, 2))
    p = warp.inverse(q)
    assert lm.check_inverse(warp, q, p) < 1e-9
    np.testing.assert_allclose(warp.inverse(warp.forward(p)), p, atol=1e-9)


def test_check_inverse_catches_a_wrong_inverse() -> None:
    warp = lm._random_warp(np.random.default_rng(0), lm.SIZE, 4.0, (1.0, 1.5))
    q = np.random.default_rng(1).uniform(0, lm.SIZE, (20, 2))
    p = warp.inverse(q)
    p[7] += 1e-3
    with pytest.raises(FixtureError, match="forward\\(inverse"):
        lm.check_inverse(warp, q, p)
    # The affine part alone is not the inverse of the whole warp.
    affine_inverse = (q - warp.offset) @ np.linalg.inv(warp.matrix).T
    with pytest.raises(FixtureError):
        lm.check_inverse(warp, q, affine_inverse)


def test_too_strong_a_warp_is_refused() -> None:
    with pytest.raises(FixtureError, match="invertible"):
        lm.build_landmarks(seed=0, wobble_px=40.0)


# --------------------------------------------------------------------------- the builder


def test_builder_is_deterministic_and_shaped() -> None:
    a, b = lm.build_landmarks(seed=9), lm.build_landmarks(seed=9)
    for key in a.data:
        np.testing.assert_array_equal(a.data[key], b.data[key])
    assert a.data["fixed"].shape == a.data["moving"].shape == (lm.SIZE, lm.SIZE)
    assert a.data["landmarks_fixed"].shape == a.data["landmarks_moving"].shape == (lm.N_LANDMARKS, 2)
    assert a.data["probes_moving"].shape == a.truth["probes_fixed_true"].shape == (lm.N_PROBES, 2)


def test_landmarks_sit_on_the_same_objects_in_both_channels() -> None:
    """Each landmark pair marks a bright object in both channels (the channels agree with the warp)."""
    fx = lm.build_landmarks(seed=4)
    for image, points in (("fixed", "landmarks_fixed"), ("moving", "landmarks_moving")):
        img = np.asarray(fx.data[image])
        rc = np.rint(fx.data[points]).astype(int)
        at_landmarks = img[rc[:, 0], rc[:, 1]]
        # Background is about 20 with noise sigma 3; the dimmest object peaks above 50.
        assert np.all(at_landmarks > np.median(img) + 20.0), (image, at_landmarks.min())


def test_noise_free_landmarks_make_the_reference_better() -> None:
    noisy = solve(build(0), lm.reference_landmarks)
    clean = solve(build(0, localisation_px=0.0), lm.reference_landmarks)
    assert clean.metrics[0].value < noisy.metrics[0].value


def test_truth_never_reaches_the_session() -> None:
    fx = build()
    session = open_session(CASE, fx)
    for value in session.namespace.values():
        if isinstance(value, np.ndarray):
            assert truth_leaks(dict(fx.truth), array=value) == []
            assert truth_leaks(dict(fx.truth), blob=value.tobytes()) == []
