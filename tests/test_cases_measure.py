"""calibrated-measurements/anisotropic-volumes: the reference passes, answers that ignore or misuse the
spacing fail, the builder's two cross-checks catch an injected inconsistency, bad leavings are
unavailable, and truth stays out of the session."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from helpers import build_case, solve_case, truth_leaks

import imagebench.cases.measure as measure
from imagebench.case.session import Session, open_session
from imagebench.cases import all_cases, builders, skills
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError, Outcome

CASE = measure.CASES[0]


def build(seed: int | None = None) -> Fixture:
    return build_case(CASE, seed)


def solve(fixture: Fixture, solver: Callable[[Session], None]) -> Outcome:
    return solve_case(CASE, fixture, solver)


def voxel_counts(session: Session) -> None:
    labels = session.namespace["labels"]
    session.namespace["volumes"] = np.bincount(labels.ravel())[1:].astype(float)


def isotropic_xy_spacing(session: Session) -> None:
    """Uses the in-plane spacing for all three axes (a common slip)."""
    voxel_counts(session)
    session.namespace["volumes"] = session.namespace["volumes"] * measure.SPACING[2] ** 3


def test_case_skill_and_builder_are_registered() -> None:
    assert CASE.label in {c.label for c in all_cases()}
    assert "calibrated-measurements" in skills()
    assert builders()["ellipsoids-anisotropic"] is measure.build_volumes
    assert [layer.kind for layer in CASE.layers] == ["labels"]
    # The subject can only know the spacing from the prompt: it must be there, exactly.
    for s in measure.SPACING:
        assert f"{s} um" in CASE.task


@pytest.mark.parametrize("seed", [0, 1, None])
def test_reference_passes_exactly(seed: int | None) -> None:
    outcome = solve(build(seed), measure.reference_volumes)
    assert outcome.passed
    assert outcome.metrics[0].value == pytest.approx(0.0, abs=1e-12)
    assert set(outcome.artifacts) == {"relative_error_map"}
    assert outcome.artifacts["relative_error_map"].shape == measure.SHAPE[1:]


def test_nop_is_no_result() -> None:
    outcome = CASE.verify(build(), Attempt(subject="nop"))
    assert outcome.status == "no-result" and outcome.metrics[0].value is None
    assert outcome.metrics[0].unavailable_because == "absent"
    objects = outcome.artifacts["objects"]  # still something to look at: what should have been measured
    assert objects.shape == measure.SHAPE[1:] and objects.max() == 1.0


def test_ignoring_the_spacing_fails_with_a_hint() -> None:
    outcome = solve(build(), voxel_counts)
    assert outcome.status == "wrong-answer"
    assert outcome.metrics[0].value == pytest.approx(1.0)  # 0.5 um^3 voxels: counts are twice the volume
    assert "spacing" in outcome.detail["hint"]


@pytest.mark.parametrize("solver", [isotropic_xy_spacing], ids=["isotropic"])
def test_misused_spacing_fails(solver: Callable[[Session], None]) -> None:
    outcome = solve(build(), solver)
    assert outcome.metrics[0].verdict == "fail"
    assert outcome.metrics[0].value == pytest.approx(0.75)


def test_one_object_off_by_a_few_percent_fails() -> None:
    fx = build()

    def one_off(session: Session) -> None:
        measure.reference_volumes(session)
        session.namespace["volumes"][3] *= 1.03

    outcome = solve(fx, one_off)
    assert outcome.metrics[0].verdict == "fail"
    assert outcome.detail["relative_errors"][3] == pytest.approx(0.03, abs=1e-6)
    assert outcome.artifacts["relative_error_map"].max() == pytest.approx(0.03)


def test_wrong_length_and_type_are_unavailable() -> None:
    fx = build()
    n = fx.truth["volumes_um3"].size
    for bad in (np.ones(n - 1), np.ones((n, 1)), "12.5", np.array(["a"] * n)):
        outcome = CASE.verify(fx, Attempt(subject="t", arrays={"volumes": bad}))
        assert outcome.metrics[0].verdict == "unavailable", bad
        assert outcome.status == "unscorable-result"


# --------------------------------------------------------------------------- the builder's cross-checks


def test_builder_labels_are_contiguous_and_deterministic() -> None:
    a, b = measure.build_volumes(seed=5), measure.build_volumes(seed=5)
    np.testing.assert_array_equal(a.data["labels"], b.data["labels"])
    labels = a.data["labels"]
    assert labels.shape == measure.SHAPE
    assert set(np.unique(labels)) == set(range(a.truth["volumes_um3"].size + 1))


def test_check_volumes_catches_an_injected_inconsistency() -> None:
    fx = measure.build_volumes(seed=2)
    labels, volumes = fx.data["labels"], np.array(fx.truth["volumes_um3"])
    measure.check_volumes(labels, measure.SPACING, volumes)  # consistent: no error
    volumes[4] *= 1.0 + 1e-6
    with pytest.raises(FixtureError, match="label 5"):
        measure.check_volumes(labels, measure.SPACING, volumes)
    # A truth computed without the spacing is caught too.
    counts = np.bincount(labels.ravel())[1:].astype(float)
    with pytest.raises(FixtureError, match="regionprops"):
        measure.check_volumes(labels, measure.SPACING, counts)


def test_analytic_check_refuses_a_bad_rasterisation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measure, "ANALYTIC_TOLERANCE", 1e-4)
    with pytest.raises(FixtureError, match="analytic ellipsoid volume"):
        measure.build_volumes(seed=0)


def test_truth_never_reaches_the_session() -> None:
    fx = build()
    session = open_session(CASE, fx)
    for value in session.namespace.values():
        if isinstance(value, np.ndarray):
            assert truth_leaks(dict(fx.truth), array=value) == []
            assert truth_leaks(dict(fx.truth), blob=value.tobytes()) == []


# --------------------------------------------------------------------------- real nuclei, stated spacing


def test_real_volumes_case_reference_passes_and_wrong_spacings_fail() -> None:
    from imagebench.cases import get_case
    from imagebench.fixtures.fixture import Attempt

    case = get_case("calibrated-measurements/stardist-3d-volumes")
    assert case.available() == (True, "") and case.kind == "curated"
    assert case.layers[0].scale == measure.REAL_SPACING and case.layers[0].units == "um"
    fx = case.build()
    labels = np.asarray(fx.data["labels"])
    assert labels.shape == measure.REAL_SHAPE and int(labels.max()) == measure.REAL_OBJECTS
    assert np.array_equal(np.unique(labels), np.arange(measure.REAL_OBJECTS + 1))  # relabelled 1..N
    counts = np.bincount(labels.ravel())[1:].astype(float)

    def score(volumes):
        return case.verify(fx, Attempt("t", arrays={"volumes": volumes}))

    assert score(counts * 0.25).passed
    counted = score(counts)
    assert not counted.passed and "voxel counts" in counted.detail["hint"]
    assert not score(counts * 0.5**3).passed  # the in-plane spacing for all three axes
    assert not score(counts * 2.0 * 0.25).passed
    assert not score((counts * 0.25)[:-1]).scored
    from imagebench.case.session import open_session

    session = open_session(case, fx)
    case.baseline(session)
    assert not score(session.namespace["volumes"]).passed


def test_synthetic_volumes_baseline_fails() -> None:
    from imagebench.case.session import open_session
    from imagebench.cases import get_case
    from imagebench.fixtures.fixture import Attempt

    case = get_case("calibrated-measurements/anisotropic-volumes")
    fx = case.build()
    session = open_session(case, fx)
    case.baseline(session)
    assert not case.verify(fx, Attempt("t", arrays={"volumes": session.namespace["volumes"]})).passed
