"""drift-correction cases: the reference passes, naive trackers fail, bad leavings are unavailable,
the builder's trajectory is exact and in the stated sign convention, and truth stays out of the session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np
import pytest
from helpers import truth_leaks
from scipy import ndimage

import imagebench.cases.drift as drift
from imagebench.case.model import Case
from imagebench.case.session import Session, collect_attempt, open_session
from imagebench.cases import all_cases, builders, skills
from imagebench.fixtures.fixture import Attempt, Fixture, Outcome
from imagebench.fixtures.specs import Procedural

CASES = {c.case_id: c for c in drift.CASES}
GOLDEN = CASES["beads-subpixel"]
HARD = CASES["low-snr-distractor"]


def build(case: Case, seed: int | None = None) -> Fixture:
    """The case's fixture (at ``seed`` when given); built once per test module (sessions copy the data)."""
    return _build(case.case_id, seed)


@cache
def _build(case_id: str, seed: int | None) -> Fixture:
    case = CASES[case_id]
    spec = case.fixture
    assert isinstance(spec, Procedural)
    if seed is not None:
        spec = replace(spec, seed=seed)
    return spec.build(case.namespace, case.case_id)


def solve(case: Case, fixture: Fixture, solver: Callable[[Session], None]) -> Outcome:
    session = open_session(case, fixture)
    solver(session)
    return case.verify(fixture, collect_attempt(case, "test", session.lookup))


def values(outcome: Outcome) -> dict[str, Any]:
    return {m.name: m.value for m in outcome.metrics}


def no_correction(session: Session) -> None:
    movie = session.namespace["movie"]
    session.namespace["shifts"] = np.zeros((movie.shape[0], 2))
    session.namespace["corrected"] = movie.copy()


def centroid_tracker(session: Session) -> None:
    """The naive tracker: follow the intensity centroid of each frame."""
    movie = np.asarray(session.namespace["movie"], dtype=np.float64)
    yy, xx = np.mgrid[: movie.shape[1], : movie.shape[2]]
    c = np.array([[(f * yy).sum() / f.sum(), (f * xx).sum() / f.sum()] for f in movie])
    shifts = c - c[0]
    session.namespace["shifts"] = shifts
    session.namespace["corrected"] = np.stack([ndimage.shift(f, -s, order=1) for f, s in zip(movie, shifts)])


def max_tracker(session: Session) -> None:
    """Follow the brightest (lightly smoothed) pixel."""
    movie = np.asarray(session.namespace["movie"], dtype=np.float64)
    peaks = np.array([np.unravel_index(np.argmax(ndimage.gaussian_filter(f, 2.0)), f.shape) for f in movie], float)
    shifts = peaks - peaks[0]
    session.namespace["shifts"] = shifts
    session.namespace["corrected"] = np.stack([ndimage.shift(f, -s, order=1) for f, s in zip(movie, shifts)])


# --------------------------------------------------------------------------- registration


def test_cases_skill_and_builder_are_registered() -> None:
    labels = {c.label for c in all_cases()}
    assert {"drift-correction/beads-subpixel", "drift-correction/low-snr-distractor"} <= labels
    assert skills()["drift-correction"].checklist == ("dask", "tensor")
    assert builders()["drift-beads"] is drift.build_drift
    assert GOLDEN.case_class == "golden" and HARD.case_class == "hard-case"
    for case in drift.CASES:
        assert set(case.tolerances) == {"trajectory_rms_error", "trajectory_max_error", "residual_ratio"}
        assert [c.name for c in case.collect] == ["shifts", "corrected"]


# --------------------------------------------------------------------------- reference passes


@pytest.mark.parametrize("case", [GOLDEN, HARD], ids=lambda c: c.case_id)
@pytest.mark.parametrize("seed", [0, 4, None])
def test_reference_passes(case: Case, seed: int | None) -> None:
    fx = build(case, seed)
    assert case.reference is not None
    outcome = solve(case, fx, case.reference)
    assert outcome.passed, values(outcome)
    assert outcome.status == "ok"
    assert set(outcome.artifacts) == {"raw_mean", "corrected_mean", "difference"}
    shape = fx.data["movie"].shape[1:]
    assert all(np.shape(a) == shape for a in outcome.artifacts.values())
    np.testing.assert_allclose(
        outcome.artifacts["difference"], outcome.artifacts["corrected_mean"] - outcome.artifacts["raw_mean"]
    )


# --------------------------------------------------------------------------- naive answers fail


def test_nop_is_no_result() -> None:
    fx = build(GOLDEN)
    outcome = GOLDEN.verify(fx, Attempt(subject="nop"))
    assert outcome.status == "no-result" and not outcome.passed
    assert all(m.value is None for m in outcome.metrics)


@pytest.mark.parametrize("case", [GOLDEN, HARD], ids=lambda c: c.case_id)
def test_no_correction_fails_every_metric(case: Case) -> None:
    outcome = solve(case, build(case), no_correction)
    v = values(outcome)
    assert v["residual_ratio"] == pytest.approx(1.0)
    assert all(m.verdict == "fail" for m in outcome.metrics), v
    assert outcome.status == "wrong-answer"


def test_negated_sign_convention_fails_with_a_hint() -> None:
    fx = build(GOLDEN)

    def negated(session: Session) -> None:
        drift.reference_drift(session)
        session.namespace["shifts"] = -session.namespace["shifts"]

    outcome = solve(GOLDEN, fx, negated)
    verdicts = {m.name: m.verdict for m in outcome.metrics}
    assert verdicts["trajectory_rms_error"] == "fail" and verdicts["trajectory_max_error"] == "fail"
    assert verdicts["residual_ratio"] == "pass"  # the stack itself was registered correctly
    assert "negated" in outcome.detail["hint"]


@pytest.mark.parametrize("tracker", [centroid_tracker, max_tracker], ids=["centroid", "max"])
def test_naive_trackers_fail_the_hard_case(tracker: Callable[[Session], None]) -> None:
    for seed in (None, 0):
        outcome = solve(HARD, build(HARD, seed), tracker)
        assert not outcome.passed, values(outcome)
        assert {m.name: m.verdict for m in outcome.metrics}["trajectory_rms_error"] == "fail"


def test_the_plain_reference_is_fooled_by_the_distractor() -> None:
    """What makes the hard case hard: whole-frame correlation locks onto the bright moving object."""
    outcome = solve(HARD, build(HARD), drift.reference_drift)
    assert not outcome.passed
    assert values(outcome)["trajectory_max_error"] > 5.0


def test_good_shifts_with_an_unregistered_stack_fail_residual() -> None:
    def shifts_only(session: Session) -> None:
        drift.reference_drift(session)
        session.namespace["corrected"] = session.namespace["movie"].copy()

    outcome = solve(GOLDEN, build(GOLDEN), shifts_only)
    verdicts = {m.name: m.verdict for m in outcome.metrics}
    assert verdicts == {"trajectory_rms_error": "pass", "trajectory_max_error": "pass", "residual_ratio": "fail"}


def test_a_zero_stack_fails_residual() -> None:
    def zeros(session: Session) -> None:
        drift.reference_drift(session)
        session.namespace["corrected"] = np.zeros_like(session.namespace["movie"])

    outcome = solve(GOLDEN, build(GOLDEN), zeros)
    assert values(outcome)["residual_ratio"] > 1.0


# --------------------------------------------------------------------------- unreadable leavings


def test_wrong_shapes_are_unavailable_not_errors() -> None:
    fx = build(GOLDEN)
    frames = fx.data["movie"].shape[0]
    attempt = Attempt(
        subject="test",
        arrays={"shifts": np.zeros((frames - 1, 2)), "corrected": np.zeros((frames, 8, 8))},
    )
    outcome = GOLDEN.verify(fx, attempt)
    assert all(m.value is None for m in outcome.metrics)
    assert "shape" in (outcome.metrics[0].unavailable or "")
    assert outcome.status == "unscorable-result"
    assert set(outcome.artifacts) == {"raw_mean"}


def test_one_bad_leaving_leaves_the_other_scored() -> None:
    fx = build(GOLDEN)
    session = open_session(GOLDEN, fx)
    drift.reference_drift(session)
    attempt = Attempt(subject="test", arrays={"shifts": session.namespace["shifts"], "corrected": "a string"})
    outcome = GOLDEN.verify(fx, attempt)
    verdicts = {m.name: m.verdict for m in outcome.metrics}
    assert verdicts == {"trajectory_rms_error": "pass", "trajectory_max_error": "pass", "residual_ratio": "unavailable"}


# --------------------------------------------------------------------------- the builder


def test_builder_is_deterministic_per_seed() -> None:
    a, b, c = drift.build_drift(seed=3), drift.build_drift(seed=3), drift.build_drift(seed=4)
    np.testing.assert_array_equal(a.data["movie"], b.data["movie"])
    np.testing.assert_array_equal(a.truth["trajectory"], b.truth["trajectory"])
    assert not np.array_equal(a.data["movie"], c.data["movie"])


@pytest.mark.parametrize("distractor", [0.0, 900.0])
def test_trajectory_is_the_content_displacement(distractor: float) -> None:
    """Without noise, moving frame t by -trajectory[t] reproduces frame 0 (away from the border and the
    distractor): the truth is exact and in the prompt's sign convention."""
    fx = drift.build_drift(seed=2, noise=0.0, distractor_amplitude=distractor)
    movie = np.asarray(fx.data["movie"], dtype=np.float64)
    traj = fx.truth["trajectory"]
    assert np.all(traj[0] == 0.0) and np.abs(traj).max() > 1.0
    m = drift._crop_margin(traj)
    for t in range(1, movie.shape[0]):
        right = np.abs(ndimage.shift(movie[t], -traj[t], order=3, mode="nearest") - movie[0])[m:-m, m:-m]
        wrong = np.abs(ndimage.shift(movie[t], traj[t], order=3, mode="nearest") - movie[0])[m:-m, m:-m]
        # Leave out the worst fifth of the pixels: where the distractor moved between frame 0 and frame t.
        keep = np.sort(right.ravel())[: int(0.8 * right.size)] if distractor else right.ravel()
        assert keep.max() < 2.0, (t, keep.max())  # spline interpolation error only; beads peak at 40-120
        assert np.median(wrong) > 3 * np.median(right)


def test_truth_never_reaches_the_session() -> None:
    for case in drift.CASES:
        fx = build(case)
        session = open_session(case, fx)
        for value in session.namespace.values():
            if isinstance(value, np.ndarray):
                assert truth_leaks(dict(fx.truth), array=value) == []
                assert truth_leaks(dict(fx.truth), blob=value.tobytes()) == []
