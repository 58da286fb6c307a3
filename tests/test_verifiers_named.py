"""The built-in verifiers by name: the built-in cases' scores under the user's keys, the new
``points`` verifier against a brute-force matching, and dishonest leavings that never pass."""

from __future__ import annotations

import itertools
import pickle
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from imagebench.cases import get_case
from imagebench.cases.measure import SPACING
from imagebench.cases.points import match_points
from imagebench.cases.verifiers import (
    VERIFIERS,
    NamedVerifier,
    VerifierError,
    limit_problems,
    named_kind,
    named_verifier,
    verifier_for_truth,
)
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError


def _built(label: str) -> Fixture:
    case = get_case(label)
    return case.build()


def _renamed(fixture: Fixture) -> Fixture:
    """The same fixture under the user's keys: ``u_<key>`` for every data and truth key."""
    return replace(
        fixture,
        data={f"u_{k}": v for k, v in fixture.data.items()},
        truth={f"u_{k}": v for k, v in fixture.truth.items()},
    )


def _user_params(name: str) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for p in named_kind(name).params:
        if p.role in ("data", "truth", "leaving") and p.default is not None:
            params[p.name] = f"u_{p.default}"
    if name == "volumes":
        params["spacing"] = list(SPACING)
    return params


def _answers(label: str, fx: Fixture) -> dict[str, Any]:
    t = fx.truth
    return {
        "segment-nuclei/synthetic-blobs": lambda: {"labels": np.asarray(t["labels"])},
        "segment-nuclei-3d/synthetic-ellipsoids": lambda: {"labels": np.asarray(t["labels"])},
        "segment-nuclei/empty-field": lambda: {"labels": np.zeros_like(np.asarray(t["labels"]))},
        "drift-correction/beads-subpixel": lambda: {
            "shifts": np.asarray(t["trajectory"]) + 0.05,
            "corrected": np.asarray(fx.data["movie"]),
        },
        "align-channels-from-landmarks/synthetic-warp": lambda: {
            "probes_fixed": np.asarray(t["probes_fixed_true"]) + 0.2
        },
        "calibrated-measurements/anisotropic-volumes": lambda: {"volumes": np.asarray(t["volumes_um3"]) * 1.01},
        "flatfield/vignetted-field": lambda: {"corrected": np.asarray(t["specimen"])},
        "stack-alignment/synthetic-jitter": lambda: {"shifts": np.asarray(t["offsets"])},
    }[label]()


BUILT_IN = [
    ("label-image", "segment-nuclei/synthetic-blobs"),
    ("label-image", "segment-nuclei-3d/synthetic-ellipsoids"),
    ("empty-labels", "segment-nuclei/empty-field"),
    ("drift", "drift-correction/beads-subpixel"),
    ("landmarks", "align-channels-from-landmarks/synthetic-warp"),
    ("volumes", "calibrated-measurements/anisotropic-volumes"),
    ("flatfield", "flatfield/vignetted-field"),
    ("stack", "stack-alignment/synthetic-jitter"),
]


def _rows(outcome: Any) -> list[tuple[str, float | None, float, str | None]]:
    return [(m.name, m.value, m.limit, m.unavailable_because) for m in outcome.metrics]


@pytest.mark.parametrize(("name", "label"), BUILT_IN)
def test_a_named_verifier_scores_as_the_built_in_case_does_under_the_users_keys(name: str, label: str) -> None:
    case = get_case(label)
    fx = case.build()
    answer = _answers(label, fx)
    builtin = case.verify(fx, Attempt("s", arrays=dict(answer)))
    verify = named_verifier(name, _user_params(name))
    named = verify(_renamed(fx), Attempt("s", arrays={f"u_{k}": v for k, v in answer.items()}))
    assert _rows(named) == _rows(builtin)
    assert named.status == builtin.status
    assert sorted(named.artifacts) == sorted(builtin.artifacts)
    assert set(named_kind(name).produced(named_kind(name).settle(_user_params(name)))) == {
        m.name for m in named.metrics
    }
    # what the subject left under the canonical name is not its leaving: it left nothing
    wrong_name = verify(_renamed(fx), Attempt("s", arrays=dict(answer)))
    assert not wrong_name.passed and wrong_name.status == "no-result"
    for m in wrong_name.metrics:
        assert m.unavailable_because == "absent"
        assert "'u_" in str(m.unavailable)  # the message names the user's leaving


@pytest.mark.parametrize(("name", "label"), [row for row in BUILT_IN if row[0] != "empty-labels"])
def test_a_wrong_answer_fails_and_a_dishonest_one_never_passes(name: str, label: str) -> None:
    fx = _renamed(_built(label))
    verify = named_verifier(name, _user_params(name))
    answer = _answers(label, _built(label))
    wrong = {}
    for key, value in answer.items():
        arr = np.asarray(value)
        wrong[f"u_{key}"] = np.zeros_like(arr) if key == "labels" else arr * 3.0 + 7.0
    if name == "flatfield":  # scored up to one overall scale: the uncorrected fields are the wrong answer
        wrong = {"u_corrected": np.asarray(fx.data["u_fields"])}
    assert not verify(fx, Attempt("s", arrays=wrong)).passed
    for key, value in answer.items():
        arr = np.asarray(value, dtype=np.float64)
        for bad in (arr[..., :-1], np.full(arr.shape, np.nan), "an answer", None):
            outcome = verify(fx, Attempt("s", arrays={**{f"u_{k}": v for k, v in answer.items()}, f"u_{key}": bad}))
            assert not outcome.passed, (key, bad if isinstance(bad, str) else getattr(bad, "shape", bad))


def test_a_label_image_of_floats_is_refused_not_rounded() -> None:
    fx = _renamed(_built("segment-nuclei/synthetic-blobs"))
    labels = np.asarray(fx.truth["u_labels"])
    verify = named_verifier("label-image", {"data": "u_image", "truth": "u_labels", "leaving": "mask"})
    outcome = verify(fx, Attempt("s", arrays={"mask": labels.astype(np.float32)}))
    assert outcome.status == "unscorable-result"
    assert "'mask'" in str(outcome.metrics[0].unavailable)
    negative = verify(fx, Attempt("s", arrays={"mask": -labels}))
    assert negative.status == "unscorable-result"
    assert "overlay" in negative.artifacts  # the truth is still drawn


def test_label_image_metrics_can_be_chosen_and_the_tolerance_checked_against_them() -> None:
    params = {"metrics": ["f1_shortfall"]}
    assert limit_problems("label-image", params, {"f1_shortfall": 0.1}) == []
    assert limit_problems("label-image", None, {"f1_shortfall": 0.1})[0][0] == "tolerance"
    assert limit_problems("label-image", params, {"f1_shortfall": 0.1, "f1": 0.2})[0][0] == "tolerance.f1"
    with pytest.raises(VerifierError, match="'metrics'"):
        named_kind("label-image").settle({"metrics": ["accuracy"]})
    fx = replace(_built("segment-nuclei/synthetic-blobs"), tolerance={"f1_shortfall": 0.1})
    outcome = named_verifier("label-image", params)(fx, Attempt("s", arrays={"labels": fx.truth["labels"]}))
    assert [m.name for m in outcome.metrics] == ["f1_shortfall"] and outcome.passed


def test_bad_names_and_parameters_are_named() -> None:
    with pytest.raises(VerifierError, match="not a built-in verifier"):
        named_verifier("segmentation")
    with pytest.raises(VerifierError, match="unknown parameter"):
        named_verifier("points", {"distance": 3})
    with pytest.raises(VerifierError, match="'radius' must be a positive number"):
        named_verifier("points", {"radius": -1})
    with pytest.raises(VerifierError, match="'spacing' is required"):
        named_verifier("volumes")
    with pytest.raises(VerifierError, match="'truth' must be a key name"):
        named_verifier("label-image", {"truth": 3})


def test_a_truth_key_the_fixture_lacks_is_the_cases_fault() -> None:
    fx = _built("segment-nuclei/synthetic-blobs")
    with pytest.raises(FixtureError, match="nuclei"):
        named_verifier("label-image", {"truth": "nuclei"})(fx, Attempt("s", arrays={}))


def test_the_verifier_for_a_truth_layer() -> None:
    assert verifier_for_truth("labels") == "label-image"
    assert verifier_for_truth("shapes") == "label-image"  # shapes are rasterised to labels when saved
    assert verifier_for_truth("points") == "points"
    with pytest.raises(VerifierError, match="image"):
        verifier_for_truth("image")
    assert set(VERIFIERS) >= {"label-image", "points", "drift", "landmarks", "volumes", "flatfield", "stack"}


def test_a_named_verifier_pickles_and_says_what_decides_its_scores() -> None:
    verify = named_verifier("points", {"radius": 2.5, "truth": "spots"})
    assert isinstance(verify, NamedVerifier)
    assert pickle.loads(pickle.dumps(verify)) == verify
    assert verify.scoring_inputs()["params"]["truth"] == "spots"


# --------------------------------------------------------------------------- points


def _points_fixture(truth: np.ndarray, image: bool = True, limits: dict[str, float] | None = None) -> Fixture:
    data = {"raw": np.zeros((64, 64), np.float32)} if image else {"other": np.zeros(3)}
    return Fixture(
        provenance="test",
        data=data,
        truth={"spots": truth},
        tolerance=limits
        or {"f1_shortfall": 0.1, "missed_fraction": 0.1, "false_fraction": 0.1, "localization_error": 1.0},
        skill_id="s",
        case_id="c",
    )


POINTS = {"data": "raw", "truth": "spots", "leaving": "centres", "radius": 3.0}


def test_points_honest_wrong_and_dishonest() -> None:
    rng = np.random.default_rng(1)
    truth = rng.uniform(5, 59, size=(12, 2))
    fx = _points_fixture(truth)
    verify = named_verifier("points", POINTS)
    honest = verify(fx, Attempt("s", arrays={"centres": truth + rng.normal(0, 0.3, truth.shape)}))
    assert honest.passed and honest.status == "ok"
    assert honest.detail["matching"]["tp"] == 12 and "overlay" in honest.artifacts
    assert honest.artifacts["overlay"].shape[1:] == (64, 3)
    far = verify(fx, Attempt("s", arrays={"centres": truth + 10.0}))
    assert far.status == "wrong-answer"
    half = verify(fx, Attempt("s", arrays={"centres": truth[:6]}))
    assert half.status == "wrong-answer" and half.detail["matching"]["fn"] == 6
    none = verify(fx, Attempt("s", arrays={"centres": np.zeros((0, 2))}))
    assert none.status == "wrong-answer"
    assert next(m for m in none.metrics if m.name == "localization_error").unavailable_because == "unusable"
    for bad in (
        np.where(np.arange(24).reshape(12, 2) == 3, np.nan, truth),  # a NaN coordinate
        np.full((12, 2), np.inf),
        truth[:, :1],  # one column
        np.stack([truth, truth], axis=0),  # three dimensions
        truth.astype(str),
        {"points": truth.tolist()},
        np.zeros((30_000, 2)),  # more than a case scores
    ):
        outcome = verify(fx, Attempt("s", arrays={"centres": bad}))
        assert not outcome.passed and outcome.status == "unscorable-result", bad
    missing = verify(fx, Attempt("s", arrays={"points": truth}))
    assert missing.status == "no-result" and "'centres'" in str(missing.metrics[0].unavailable)


def test_points_without_an_image_and_an_empty_truth() -> None:
    params = {**POINTS, "data": None}
    fx = _points_fixture(np.zeros((0, 2)), image=False)
    verify = named_verifier("points", params)
    outcome = verify(fx, Attempt("s", arrays={"centres": np.zeros((0, 2))}))
    assert outcome.passed and not outcome.artifacts
    loc = next(m for m in outcome.metrics if m.name == "localization_error")
    assert loc.excused  # the truth has no point to localise
    assert not verify(fx, Attempt("s", arrays={"centres": np.ones((3, 2))})).passed


def test_points_in_3d_are_drawn_on_the_projection() -> None:
    truth = np.array([[1.0, 10.0, 10.0], [3.0, 40.0, 20.0]])
    fx = replace(_points_fixture(truth), data={"raw": np.zeros((5, 64, 64), np.float32)})
    outcome = named_verifier("points", POINTS)(fx, Attempt("s", arrays={"centres": truth[::-1] + 0.5}))
    assert outcome.passed and outcome.artifacts["image"].shape == (64, 64)


def _brute(truth: np.ndarray, answer: np.ndarray, radius: float) -> tuple[int, float]:
    """The most pairs within ``radius`` and, among those matchings, the least total distance."""
    n, m = len(truth), len(answer)
    dist = np.linalg.norm(truth[:, None] - answer[None], axis=-1)
    best = (0, 0.0)
    small, big = (truth, answer) if n <= m else (answer, truth)
    for perm in itertools.permutations(range(max(n, m)), min(n, m)):
        pairs = [(i, j) for i, j in enumerate(perm)]
        if n > m:
            pairs = [(j, i) for i, j in pairs]
        within = [dist[i, j] for i, j in pairs if dist[i, j] <= radius]
        key = (len(within), -sum(within))
        if key > (best[0], -best[1]):
            best = (len(within), float(sum(within)))
    del small, big
    return best


def test_points_matching_agrees_with_a_brute_force_search() -> None:
    rng = np.random.default_rng(7)
    for _ in range(150):
        n, m = int(rng.integers(0, 6)), int(rng.integers(0, 6))
        truth = rng.uniform(0, 10, size=(n, 2))
        answer = rng.uniform(0, 10, size=(m, 2))
        radius = float(rng.uniform(0.5, 4.0))
        match = match_points(truth, answer, radius)
        count, total = _brute(truth, answer, radius) if n and m else (0, 0.0)
        assert match.tp == count
        assert float(match.distances.sum()) == pytest.approx(total)
        assert np.all(match.distances <= radius)
        assert len(set(match.pairs[:, 0].tolist())) == match.tp == len(set(match.pairs[:, 1].tolist()))
