"""stack-alignment: the reference passes both cases, no correction and other wrong answers fail, the
re-placement is exact and checked, the curated MRI case reads NIfTI from the tree, truth stays held out."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import pytest
from helpers import truth_leaks

import imagebench.cases.stack as st
from imagebench.case.model import Case
from imagebench.case.session import Session, collect_attempt, open_session
from imagebench.cases import all_cases, builders, skills
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError, Outcome
from imagebench.fixtures.refs import FileRef

CASES = {c.case_id: c for c in st.CASES}
SYNTHETIC = CASES["synthetic-jitter"]
MRI = CASES["mri-anatomical"]


@cache
def fixture_of(case_id: str, seed: int | None = None) -> Fixture:
    case = CASES[case_id]
    if seed is None:
        return case.build()
    return st.build_stack(seed=seed)


def solve(case: Case, fixture: Fixture, solver: Callable[[Session], None]) -> Outcome:
    from dataclasses import replace

    fixture = replace(fixture, tolerance=dict(case.tolerances))
    session = open_session(case, fixture)
    solver(session)
    return case.verify(fixture, collect_attempt(case, "test", session.lookup))


def values(outcome: Outcome) -> dict[str, float | None]:
    return {m.name: m.value for m in outcome.metrics}


def answer(shifts_of: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[Session], None]:
    def solver(session: Session) -> None:
        session.namespace["shifts"] = shifts_of(np.asarray(session.namespace["volume"]), np.zeros(0))

    return solver


def test_registered() -> None:
    labels = {c.label for c in all_cases()}
    assert {"stack-alignment/synthetic-jitter", "stack-alignment/mri-anatomical"} <= labels
    assert st.SKILL_ID in skills()
    assert builders()["stack-jittered-slices"] is st.build_stack
    assert MRI.kind == "curated" and SYNTHETIC.kind == "synthetic"
    for case in CASES.values():
        assert case.baseline is not None and case.baseline_about


def test_the_mri_case_reads_nifti_from_the_packaged_tree() -> None:
    assert MRI.available() == (True, "")
    f = fixture_of("mri-anatomical")
    ref = f.data["volume"]
    assert isinstance(ref, FileRef) and str(ref.path).endswith(".nii.gz")
    assert np.asarray(ref).shape == st.MRI_SHAPE
    assert np.asarray(f.truth["offsets"]).shape == (st.MRI_SHAPE[2], 2)
    assert "anatomical.nii" in f.provenance and "nibabel" in f.citation


@pytest.mark.parametrize("case_id", ["synthetic-jitter", "mri-anatomical"])
def test_reference_passes_and_baseline_and_nop_fail(case_id: str) -> None:
    case = CASES[case_id]
    f = fixture_of(case_id)
    ref = solve(case, f, case.reference)
    assert ref.passed, values(ref)
    base = solve(case, f, case.baseline)
    assert base.status == "wrong-answer", values(base)
    assert base.metrics[0].value > case.tolerances["median_slice_error"]
    nop = solve(case, f, lambda session: None)
    assert nop.status == "no-result"


@pytest.mark.parametrize("seed", [0, 3, 5, 21])
def test_synthetic_reference_passes_other_seeds(seed: int) -> None:
    assert solve(SYNTHETIC, fixture_of("synthetic-jitter", seed), SYNTHETIC.reference).passed


@pytest.mark.parametrize("case_id", ["synthetic-jitter", "mri-anatomical"])
def test_plausible_but_wrong_answers_fail(case_id: str) -> None:
    case = CASES[case_id]
    f = fixture_of(case_id)
    truth = np.asarray(f.truth["offsets"])
    wrong = {
        # the correction instead of the displacement
        "negated": lambda s: -truth,
        # axes swapped
        "swapped": lambda s: truth[:, ::-1],
        # the right offsets assigned to the wrong slices
        "one-slice-off": lambda s: np.roll(truth, 1, axis=0),
    }
    for name, shifts_of in wrong.items():
        out = solve(case, f, answer(lambda v, _, fn=shifts_of: fn(v)))
        assert out.status == "wrong-answer", (name, values(out))
    negated = solve(case, f, answer(lambda v, _: -truth))
    assert "hint" in negated.detail


def test_chaining_without_removing_the_structures_drift_fails_on_real_anatomy_only() -> None:
    """Neighbour registration chained along the stack (a linear trend is ignored by the score anyway)
    passes the synthetic volume, whose structures barely curve, and fails the MRI, whose do."""
    chained = answer(lambda v, _: st.estimate_slice_shifts(v, degree=1))
    assert solve(SYNTHETIC, fixture_of("synthetic-jitter"), chained).passed
    out = solve(MRI, fixture_of("mri-anatomical"), chained)
    assert out.status == "wrong-answer", values(out)


def test_scoring_ignores_a_common_translation_and_shear_only() -> None:
    f = fixture_of("synthetic-jitter")
    truth = np.asarray(f.truth["offsets"])
    k = np.arange(truth.shape[0])[:, None]
    sheared = truth + np.array([3.0, -1.0]) + 0.2 * k
    out = solve(SYNTHETIC, f, answer(lambda v, _: sheared))
    assert out.passed and max(values(out).values()) < 1e-9
    bent = truth + 0.06 * (k - 12.0) ** 2  # a curve along the stack is an error
    assert not solve(SYNTHETIC, f, answer(lambda v, _: bent)).passed


def test_bad_leavings_are_unavailable() -> None:
    f = fixture_of("synthetic-jitter")
    for left in (np.zeros((3, 2)), np.full((24, 2), np.nan), "zero"):
        out = SYNTHETIC.verify(f, Attempt("test", arrays={"shifts": left}))
        assert out.status == "unscorable-result", left


def test_replacement_is_an_exact_shift_and_the_check_catches_a_wrong_one() -> None:
    rng = np.random.default_rng(0)
    straight = rng.normal(size=(40, 48, 3))
    from scipy import ndimage

    straight = ndimage.gaussian_filter(straight, (2, 2, 0))
    offsets = np.array([[1.25, -0.5], [0.0, 2.0], [-2.2, 0.3]])
    moved = st.replace_slices(straight, offsets)
    # an integer shift is exact away from the border
    ints = np.array([[2.0, -1.0], [0.0, 0.0], [1.0, 3.0]])
    m = st.replace_slices(straight, ints)
    assert np.allclose(m[5:-5, 5:-5, 0], straight[3:-7, 6:-4, 0], atol=1e-9)
    assert st.check_replaced(straight, moved, offsets, margin=6) < 0.02
    with pytest.raises(FixtureError):
        st.check_replaced(straight, moved, offsets + np.array([0.5, 0.0]), margin=6)


@pytest.mark.parametrize("case_id", ["synthetic-jitter", "mri-anatomical"])
def test_truth_stays_out_of_the_session(case_id: str) -> None:
    case = CASES[case_id]
    f = fixture_of(case_id)
    session = open_session(case, f)
    for value in session.namespace.values():
        if isinstance(value, np.ndarray):
            assert truth_leaks(dict(f.truth), array=value) == []
            assert truth_leaks(dict(f.truth), blob=value.tobytes()) == []
