"""flatfield/vignetted-field: the reference passes, uncorrected and half-corrected answers fail, the
metrics forgive one overall scale and nothing else, bad leavings are unavailable, and truth stays out
of the session."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from helpers import build_case, solve_case, truth_leaks

import imagebench.cases.flatfield as ff
from imagebench.case.session import Session, open_session
from imagebench.cases import all_cases, builders, skills
from imagebench.fixtures.fixture import Attempt, Fixture, Outcome

CASE = ff.CASES[0]


def build(seed: int | None = None) -> Fixture:
    return build_case(CASE, seed)


def solve(fixture: Fixture, solver: Callable[[Session], None]) -> Outcome:
    return solve_case(CASE, fixture, solver)


def verdicts(outcome: Outcome) -> dict[str, str]:
    return {m.name: m.verdict for m in outcome.metrics}


def leave(array: np.ndarray) -> Attempt:
    return Attempt(subject="test", arrays={"corrected": array})


def test_case_skill_and_builder_are_registered() -> None:
    assert CASE.label in {c.label for c in all_cases()}
    assert "flatfield" in skills()
    assert builders()["flatfield-vignetting"] is ff.build_flatfield
    assert {layer.name for layer in CASE.layers} == {"fields", "dark"}


@pytest.mark.parametrize("seed", [0, 2, None])
def test_reference_passes(seed: int | None) -> None:
    outcome = solve(build(seed), ff.reference_flatfield)
    assert outcome.passed, {m.name: m.value for m in outcome.metrics}
    assert set(outcome.artifacts) == {"raw_mean", "corrected_mean", "difference"}


def test_nop_is_no_result() -> None:
    outcome = CASE.verify(build(), Attempt(subject="nop"))
    assert outcome.status == "no-result"
    assert [m.verdict for m in outcome.metrics] == ["unavailable", "unavailable"]


@pytest.mark.parametrize("seed", [None, 1])
def test_no_correction_and_dark_only_fail_both_metrics(seed: int | None) -> None:
    fx = build(seed)
    raw = np.asarray(fx.data["fields"])
    dark = np.asarray(fx.data["dark"])
    for answer in (raw, raw - dark):
        assert verdicts(CASE.verify(fx, leave(answer))) == {"profile_residual": "fail", "relative_error": "fail"}


def test_forgetting_the_dark_frame_fails() -> None:
    """A flatfield estimated and divided out without subtracting the dark offset leaves it in the result."""
    fx = build()

    def no_dark(session: Session) -> None:
        session.namespace["dark"] = np.zeros_like(session.namespace["dark"])
        ff.reference_flatfield(session)

    outcome = solve(fx, no_dark)
    assert verdicts(outcome)["relative_error"] == "fail"


def test_zeros_are_wrong_not_unscorable() -> None:
    fx = build()
    outcome = CASE.verify(fx, leave(np.zeros(fx.data["fields"].shape)))
    assert verdicts(outcome) == {"profile_residual": "unavailable", "relative_error": "fail"}
    assert outcome.metrics[1].value == pytest.approx(1.0)
    assert outcome.status == "wrong-answer"


def test_the_truth_scores_zero_at_any_scale() -> None:
    fx = build()
    specimen = np.asarray(fx.truth["specimen"])
    for scale in (1.0, 1e-3, 250.0):
        outcome = CASE.verify(fx, leave(specimen * scale))
        assert outcome.metrics[0].value == pytest.approx(0.0, abs=1e-9)
        assert outcome.metrics[1].value == pytest.approx(0.0, abs=1e-9)
        # Artifacts are brought back onto the specimen's scale, so they compare with the raw mean.
        np.testing.assert_allclose(outcome.artifacts["corrected_mean"], specimen.mean(axis=0), rtol=1e-9)


def test_a_leftover_smooth_shading_is_what_profile_residual_sees() -> None:
    fx = build()
    specimen = np.asarray(fx.truth["specimen"])
    y = np.linspace(-1.0, 1.0, specimen.shape[1])[:, None]
    tilted = specimen * (1.0 + 0.2 * y)  # a 20% top-to-bottom ramp left in
    outcome = CASE.verify(fx, leave(tilted))
    assert verdicts(outcome)["profile_residual"] == "fail"


def test_wrong_shapes_are_unavailable() -> None:
    fx = build()
    n, h, w = fx.data["fields"].shape
    for bad in (np.ones((n - 1, h, w)), np.ones((h, w)), None):
        outcome = CASE.verify(fx, leave(bad))  # type: ignore[arg-type]
        assert [m.verdict for m in outcome.metrics] == ["unavailable", "unavailable"]
        assert outcome.status == "unscorable-result"


def test_builder_is_deterministic_and_its_flatfield_is_normalised() -> None:
    a, b = ff.build_flatfield(seed=3), ff.build_flatfield(seed=3)
    np.testing.assert_array_equal(a.data["fields"], b.data["fields"])
    flat = a.truth["flatfield"]
    assert flat.mean() == pytest.approx(1.0)
    assert flat.min() / flat.max() < 0.5  # strong enough vignetting to matter
    assert a.data["fields"].shape == (ff.FIELDS, ff.SIZE, ff.SIZE)
    assert a.truth["specimen"].min() > 0
    # The raw fields are dark + flat * specimen + zero-mean noise.
    model = np.asarray(a.data["dark"], dtype=np.float64) + flat * a.truth["specimen"]
    residual = np.asarray(a.data["fields"], dtype=np.float64) - model
    assert abs(residual.mean()) < 1.0 and residual.std() < 4.0 * np.sqrt(model.mean())


def test_smooth_surface_recovers_a_smooth_profile() -> None:
    y, x = np.mgrid[0:64, 0:64] / 63.0
    profile = np.exp(-((y - 0.4) ** 2 + (x - 0.6) ** 2))
    noisy = profile * np.random.default_rng(0).lognormal(0.0, 0.3, profile.shape)
    fitted = ff.smooth_surface(noisy)
    ratio = fitted / profile
    assert ratio.std() / ratio.mean() < 0.02


def test_truth_never_reaches_the_session() -> None:
    fx = build()
    session = open_session(CASE, fx)
    for value in session.namespace.values():
        if isinstance(value, np.ndarray):
            assert truth_leaks(dict(fx.truth), array=value) == []
            assert truth_leaks(dict(fx.truth), blob=value.tobytes()) == []
