"""Built-in structured cases: references pass, naive answers fail, truth stays held out, builders cross-check."""

from __future__ import annotations

import types

import numpy as np
import pytest

from imagebench.cases import all_cases, builders, pick, structured
from imagebench.fixtures.fixture import Attempt, FixtureError
from imagebench.scoring.answer import final_json_message
from imagebench.scoring.comparators import unpack_region
from imagebench.scoring.contract import TaskContract, exemplar

CASES = {c.label: c for c in structured.CASES}
SEEDS = (0, 1, 2026)


def _fixture(case, seed: int):
    return case.fixture.builder(seed=seed, **dict(case.fixture.params))


def _run_reference(case, fixture) -> dict:
    ns = types.SimpleNamespace(namespace={layer.name: np.array(fixture.data[layer.key]) for layer in case.layers})
    case.reference(ns)
    return ns.namespace["answer"]


def _verify(case, fixture, answer):
    fixture = type(fixture)(**{**fixture.__dict__, "tolerance": dict(case.tolerances)})
    return case.verify(fixture, Attempt("test", arrays={} if answer is None else {"answer": answer}))


def test_registered_and_contracted() -> None:
    labels = {c.label for c in all_cases()}
    assert set(CASES) <= labels
    assert set(CASES) == {
        "segment-nuclei/count-nuclei", "drift-correction/drift-vector", "fibre-angle/synthetic-lines", "pick-a-nucleus/synthetic-volume",
    }  # fmt: skip
    assert set(structured.BUILDERS.values()) <= set(builders().values())
    for case in CASES.values():
        assert isinstance(case.answer, TaskContract) and case.answer.evaluation_eligible is True
        assert getattr(case.verify, "contract", None) is case.answer
        assert [c.name for c in case.collect] == ["answer"] and case.collect[0].what == "json"
        for field in case.answer.answer_schema:
            assert f'"{field}"' in case.task  # the prompt states each JSON field


def test_contracts_carry_no_truth() -> None:
    for case in CASES.values():
        assert all(set(v) == {"from_truth"} for v in case.answer.ground_truth.values()), case.label


@pytest.mark.parametrize("label", sorted(CASES))
@pytest.mark.parametrize("seed", SEEDS)
def test_reference_passes(label: str, seed: int) -> None:
    case = CASES[label]
    fixture = _fixture(case, seed)
    outcome = _verify(case, fixture, _run_reference(case, fixture))
    assert outcome.status == "ok", outcome.detail
    assert outcome.detail["answer"]["answer_score"] == 1.0


@pytest.mark.parametrize(
    "label, naive",
    [
        ("segment-nuclei/count-nuclei", {"count": 0}),
        ("segment-nuclei/count-nuclei", {"count": "12"}),
        ("drift-correction/drift-vector", {"shift": [0.0, 0.0]}),
        ("fibre-angle/synthetic-lines", {"angle_deg": 0.0}),
        ("fibre-angle/synthetic-lines", {"angle_deg": 90.0}),
        ("pick-a-nucleus/synthetic-volume", {"voxel": [16, 32, 32]}),
    ],
)
@pytest.mark.parametrize("seed", SEEDS)
def test_naive_answers_fail(label: str, naive: dict, seed: int) -> None:
    case = CASES[label]
    fixture = _fixture(case, seed)
    if label == "fibre-angle/synthetic-lines" and naive["angle_deg"] == 90.0:
        from imagebench.cases.structured import FIBRE_TOLERANCE_DEG, _circular_gap

        if _circular_gap(90.0, fixture.truth["angle_deg"]) <= FIBRE_TOLERANCE_DEG:
            pytest.skip("this seed's fibres run near 90 degrees")
    outcome = _verify(case, fixture, naive)
    assert outcome.status == "wrong-answer" and outcome.detail["answer"]["answer_score"] == 0.0


@pytest.mark.parametrize("label", sorted(CASES))
def test_nop_and_prose_do_not_pass(label: str) -> None:
    case = CASES[label]
    fixture = _fixture(case, 3)
    assert _verify(case, fixture, None).status == "no-result"
    outcome = _verify(case, fixture, "I looked at the image and the answer is obvious.")
    assert outcome.status == "unscorable-result" and not outcome.passed


@pytest.mark.parametrize("label", sorted(CASES))
def test_truth_fed_back_scores_one_through_a_final_message(label: str) -> None:
    case = CASES[label]
    fixture = _fixture(case, 4)
    answer = exemplar(case.answer, fixture.truth)
    outcome = case.verify(fixture, Attempt("t", notes={"final_message": final_json_message(answer, "done")}))
    assert outcome.status == "ok"


def test_wrong_shape_and_type_are_mismatches() -> None:
    drift = CASES["drift-correction/drift-vector"]
    fixture = _fixture(drift, 5)
    truth = fixture.truth["shift"]
    for bad in ({"shift": truth[::-1]}, {"shift": [truth[0]]}, {"shift": {"dy": truth[0], "dx": truth[1]}}):
        assert _verify(drift, fixture, bad).status == "wrong-answer"
    pick = CASES["pick-a-nucleus/synthetic-volume"]
    fixture = _fixture(pick, 5)
    mask = unpack_region(fixture.truth["largest_nucleus"])
    inside = [int(i) for i in np.argwhere(mask)[0]]
    assert _verify(pick, fixture, {"voxel": inside}).status == "ok"
    assert _verify(pick, fixture, {"voxel": [float(i) for i in inside]}).status == "wrong-answer"
    assert _verify(pick, fixture, {"voxel": inside[:2]}).status == "wrong-answer"


def test_the_voxel_must_be_in_the_largest_nucleus_not_any() -> None:
    from scipy import ndimage as ndi

    pick = CASES["pick-a-nucleus/synthetic-volume"]
    fixture = _fixture(pick, 6)
    mask = unpack_region(fixture.truth["largest_nucleus"])
    labels, _ = ndi.label(fixture.data["volume"] > 0.45)
    other = np.argwhere((labels > 0) & ~ndi.binary_dilation(mask, iterations=2))[0]
    assert _verify(pick, fixture, {"voxel": [int(i) for i in other]}).status == "wrong-answer"


def test_truth_never_reaches_the_subject() -> None:
    from imagebench.case.session import open_session

    for case in CASES.values():
        fixture = case.build()
        session = open_session(case, fixture)
        assert not set(fixture.truth) & set(session.namespace)
        for value in session.namespace.values():
            for truth in fixture.truth.values():
                if isinstance(value, np.ndarray) and isinstance(truth, np.ndarray) and value.shape == truth.shape:
                    assert not np.array_equal(value, truth)
        assert "from_truth" not in session.prompt


def test_builders_are_deterministic() -> None:
    for case in CASES.values():
        a, b = _fixture(case, 11), _fixture(case, 11)
        for key in a.data:
            assert np.array_equal(a.data[key], b.data[key])
        assert repr(a.truth) == repr(b.truth)


def test_builder_cross_checks_catch_an_inconsistency(monkeypatch) -> None:
    # Count: a nucleus drawn so faint the noiseless image no longer shows it.
    monkeypatch.setattr(structured, "_place", lambda rng, n, radii, shape, gap: np.zeros((n, 2)) + 30.0)
    with pytest.raises(FixtureError, match="noiseless image shows"):
        structured.build_count_nuclei(seed=0)


def test_drift_cross_check(monkeypatch) -> None:
    real = structured._shift_field
    monkeypatch.setattr(structured, "_shift_field", lambda field, shift: real(field, (shift[0] + 1.0, shift[1])))
    with pytest.raises(FixtureError, match="truth inconsistent"):
        structured.build_drift_vector(seed=0)


def test_fibre_cross_check(monkeypatch) -> None:
    real = structured._fibre_texture

    def off_by_twenty(rng, size, theta, count):
        return real(rng, size, theta, count)[0], theta + 20

    monkeypatch.setattr(structured, "_fibre_texture", off_by_twenty)
    with pytest.raises(FixtureError, match="average"):
        structured.build_fibre_angle(seed=0)


def test_fixtures_are_well_formed() -> None:
    f = _fixture(CASES["segment-nuclei/count-nuclei"], 7)
    assert f.data["nuclei"].shape == (128, 128) and f.data["nuclei"].dtype == np.float32
    assert isinstance(f.truth["count"], int)
    f = _fixture(CASES["drift-correction/drift-vector"], 7)
    assert f.data["frames"].shape == (2, 96, 96) and all(1.5 <= abs(v) <= 6 for v in f.truth["shift"])
    f = _fixture(CASES["fibre-angle/synthetic-lines"], 7)
    assert 0 <= f.truth["angle_deg"] < 180
    f = _fixture(CASES["pick-a-nucleus/synthetic-volume"], 7)
    assert f.data["volume"].shape == (32, 64, 64)
    assert unpack_region(f.truth["largest_nucleus"]).sum() > 100


# --------------------------------------------------------------------------- artifacts

WRONG = {
    "segment-nuclei/count-nuclei": {"count": 3},
    "drift-correction/drift-vector": {"shift": [0.5, -0.5]},
    "fibre-angle/synthetic-lines": {"angle_deg": 100.0},
    "pick-a-nucleus/synthetic-volume": {"voxel": [2, 3, 4]},
}


def _marked(rgb: np.ndarray, colour: tuple[float, float, float]) -> np.ndarray:
    """Pixels painted in one overlay colour: the grey image has equal channels, a mark does not."""
    r, g, b = np.moveaxis(rgb, -1, 0)
    return (r == b) & ((g > r) if colour[1] > colour[0] else (g < r))


@pytest.mark.parametrize("label", sorted(CASES))
def test_every_structured_case_draws_the_truth_and_the_answer(label: str, tmp_path) -> None:
    from imagebench.cases._overlay import GREEN, MAGENTA
    from imagebench.runs.artifacts import write_report

    case = CASES[label]
    fixture = case.fixture.build(case.namespace, case.case_id)
    right = case.verify(fixture, Attempt("test", arrays={"answer": _run_reference(case, fixture)}))
    wrong = case.verify(fixture, Attempt("test", arrays={"answer": WRONG[label]}))
    nothing = case.verify(fixture, Attempt("test", arrays={}))
    assert (right.status, wrong.status, nothing.status) == ("ok", "wrong-answer", "no-result")
    assert right.artifacts and set(right.artifacts) == set(wrong.artifacts) == set(nothing.artifacts)
    assert "green" in right.detail["drawn"] and "magenta" in right.detail["drawn"]
    for name, image in right.artifacts.items():
        assert image.ndim == 3 and image.shape[-1] == 3, name
        assert not np.array_equal(image, wrong.artifacts[name]), f"{name}: a wrong answer looks like the right one"
        assert not np.array_equal(image, nothing.artifacts[name]), f"{name}: the answer is not drawn"
        assert _marked(nothing.artifacts[name], MAGENTA).sum() == 0  # no answer, no magenta
    assert any(_marked(image, GREEN).any() for image in nothing.artifacts.values())  # the truth, always
    assert any(_marked(image, MAGENTA).any() for image in wrong.artifacts.values())
    summary = write_report(wrong, tmp_path)
    assert {p.name for p in summary.parent.glob("*.png")} == {f"{n}.png" for n in wrong.artifacts}


def test_a_wild_answer_is_drawn_off_the_image_without_trouble() -> None:
    for label, wild in [
        ("drift-correction/drift-vector", {"shift": [1e300, -1e300]}),
        ("pick-a-nucleus/synthetic-volume", {"voxel": [10**40, -(10**40), 5]}),
        ("segment-nuclei/count-nuclei", {"count": 10**12}),
        ("fibre-angle/synthetic-lines", {"angle_deg": "ninety"}),
    ]:
        case = CASES[label]
        fixture = case.fixture.build(case.namespace, case.case_id)
        outcome = case.verify(fixture, Attempt("test", arrays={"answer": wild}))
        assert outcome.artifacts and outcome.status in ("wrong-answer", "unscorable-result"), label


@pytest.mark.parametrize("label", ["segment-nuclei/count-nuclei", "pick-a-nucleus/synthetic-volume"])
@pytest.mark.parametrize("seed", SEEDS)
def test_baselines_fail(label: str, seed: int) -> None:
    case = CASES[label]
    assert case.baseline is not None and case.baseline_about
    fixture = _fixture(case, seed)
    ns = types.SimpleNamespace(namespace={layer.name: np.array(fixture.data[layer.key]) for layer in case.layers})
    case.baseline(ns)
    assert _verify(case, fixture, ns.namespace["answer"]).status == "wrong-answer"


def test_pick_a_nucleus_is_a_skill() -> None:
    from imagebench.cases import skills

    assert "pick-a-nucleus" in skills()
    assert CASES["pick-a-nucleus/synthetic-volume"].answer.task_id == "pick-a-nucleus/synthetic-volume"


# --------------------------------------------------------------------------- pick-a-nucleus, the largest whole one

PICK_CASES = {c.label: c for c in pick.CASES}
TOUCHING = "pick-a-nucleus/touching-volume"
STARDIST = "pick-a-nucleus/stardist-3d"


def _pick_fixture(label: str, seed: int):
    case = PICK_CASES[label]
    return case.build() if label == STARDIST else _fixture(case, seed)


def test_pick_cases_registered_and_contracted() -> None:
    assert set(PICK_CASES) == {TOUCHING, STARDIST} and set(PICK_CASES) <= {c.label for c in all_cases()}
    assert pick.build_pick_touching in builders().values()
    for case in PICK_CASES.values():
        assert case.answer.answer_schema["voxel"].comparator == "voxel_member_of_set"
        assert all(set(v) == {"from_truth"} for v in case.answer.ground_truth.values())
        assert getattr(case.verify, "contract", None) is case.answer and '"voxel"' in case.task


@pytest.mark.parametrize("label, seed", [(TOUCHING, 0), (TOUCHING, 1), (TOUCHING, 2026), (STARDIST, 0)])
def test_pick_reference_passes_and_baseline_nop_fail(label: str, seed: int) -> None:
    case = PICK_CASES[label]
    fixture = _pick_fixture(label, seed)
    outcome = _verify(case, fixture, _run_reference(case, fixture))
    assert outcome.status == "ok", outcome.detail
    ns = types.SimpleNamespace(namespace={"volume": np.array(fixture.data["volume"])})
    case.baseline(ns)
    assert _verify(case, fixture, ns.namespace["answer"]).status == "wrong-answer"
    assert _verify(case, fixture, None).status == "no-result"


def test_touching_volume_truth_is_whole_and_another_nucleus_fails() -> None:
    from scipy import ndimage as ndi

    case = PICK_CASES[TOUCHING]
    fixture = _fixture(case, 3)
    mask = unpack_region(fixture.truth[pick.TRUTH_KEY])
    assert mask.any() and not (mask[0].any() or mask[-1].any() or mask[:, 0].any() or mask[:, -1].any())
    assert not (mask[:, :, 0].any() or mask[:, :, -1].any())
    # the brightest voxel away from the truth is on another nucleus (the brighter neighbour, as a rule)
    smooth = ndi.gaussian_filter(np.asarray(fixture.data["volume"], np.float64), 1.5)
    smooth[ndi.binary_dilation(mask, iterations=2)] = -np.inf
    other = [int(i) for i in np.unravel_index(int(np.argmax(smooth)), smooth.shape)]
    assert _verify(case, fixture, {"voxel": other}).status == "wrong-answer"
    again = _fixture(case, 3)
    assert np.array_equal(again.data["volume"], fixture.data["volume"]) and again.truth == fixture.truth


def test_stardist_pick_truth_is_nucleus_81_and_its_neighbour_146_fails() -> None:
    import tifffile

    from imagebench.fixtures import tree

    case = PICK_CASES[STARDIST]
    fixture = case.build()
    mask = unpack_region(fixture.truth[pick.TRUTH_KEY])
    labels = tifffile.imread(tree.PACKAGED_ROOT / "segment-nuclei-3d" / "stardist-3d" / "mask3d.tif")
    assert np.array_equal(mask, labels == 81)
    neighbour = [int(i) for i in np.argwhere(labels == 146)[0]]
    assert _verify(case, fixture, {"voxel": neighbour}).status == "wrong-answer"
    inside = [int(i) for i in np.argwhere(mask)[0]]
    assert _verify(case, fixture, {"voxel": inside}).status == "ok"
