"""The spot-detection cases (issue 28): builders, reference/baseline/nop, the verifier, ``metrics spots``.

The reference passes every case and the baseline and nop fail each; the verifier's F1, RMSE and
count error agree with a brute-force matching on small cases; dishonest leavings (NaN points,
the wrong number of columns, 10^6 points) are refused with their reason named, never scored.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from imagebench import cases as builtin
from imagebench.case.session import collect_attempt, open_session
from imagebench.cases.points import MAX_POINTS, match_points
from imagebench.cases.spots import (
    CASES,
    PSF_SIGMA,
    RADIUS,
    SPOT_METRICS,
    build_spots,
    detect_spots,
    render_spots,
    verify_spots,
)
from imagebench.cli import main
from imagebench.fixtures.fixture import Attempt, Fixture

LABELS = [c.label for c in CASES]


def _fixture(case):
    return case.fixture.build(case.namespace, case.case_id)


def _attempt(case, fixture, solve) -> Attempt:
    session = open_session(case, fixture)
    if solve is not None:
        solve(session)
    return collect_attempt(case, "t", session.lookup)


@pytest.fixture(scope="module")
def built():
    return {c.label: (c, _fixture(c)) for c in CASES}


def test_the_builder_is_seeded_and_reproducible() -> None:
    a, b = build_spots(seed=7), build_spots(seed=7)
    assert np.array_equal(a.data["image"], b.data["image"])
    assert np.array_equal(a.truth["spots"], b.truth["spots"])
    assert not np.array_equal(a.truth["spots"], build_spots(seed=8).truth["spots"])
    assert a.data["image"].shape == (256, 256) and a.data["image"].dtype == np.uint16
    assert a.truth["spots"].shape == (60, 2) and set(a.data).isdisjoint(a.truth)
    clustered = build_spots(seed=7, n_spots=10, clusters=5)
    assert clustered.truth["spots"].shape[0] > 20  # the clusters' spots besides the scattered ones


def test_the_psf_is_integrated_over_each_pixel() -> None:
    image = render_spots((21, 21), np.array([[10.3, 9.8]]), np.array([1000.0]))
    assert image.sum() == pytest.approx(1000.0, rel=1e-6)  # all of it lands within 5 sigma
    yy, xx = np.mgrid[0:21, 0:21]
    centre = ((image * yy).sum() / image.sum(), (image * xx).sum() / image.sum())
    assert centre == pytest.approx((10.3, 9.8), abs=1e-6)


def test_the_reference_localises_to_a_fraction_of_a_pixel() -> None:
    rng = np.random.default_rng(3)
    truth = np.column_stack([rng.uniform(10, 54, 12), rng.uniform(10, 54, 12)])
    truth = truth[[i for i in range(12) if all(np.hypot(*(truth[i] - truth[j])) > 6 for j in range(i))]]
    image = 100 + rng.poisson(10 + render_spots((64, 64), truth, np.full(len(truth), 3000.0), PSF_SIGMA))
    found = detect_spots(image)
    m = match_points(truth, found, RADIUS)
    assert m.tp == len(truth) == m.n_pred
    assert m.rmse < 0.15


def test_the_cases_are_registered_with_a_skill_and_a_builder() -> None:
    labels = [c.label for c in builtin.all_cases()]
    assert set(LABELS) <= set(labels)
    assert "spot-detection" in builtin.skills()
    assert builtin.builders()["spots-synthetic"] is build_spots
    for case in CASES:
        assert case.collect[0].layer == "points" and case.collect[0].like == "image"
        assert case.layers[0].scale == (0.1, 0.1) and case.layers[0].units == "um"


@pytest.mark.parametrize("label", LABELS)
def test_reference_passes_baseline_and_nop_fail(built, label: str) -> None:
    case, fixture = built[label]
    assert {name for name, _ in SPOT_METRICS} == set(fixture.tolerance)
    ref = case.verify(fixture, _attempt(case, fixture, case.reference))
    assert ref.passed, [(m.name, m.value, m.limit) for m in ref.metrics]
    base = case.verify(fixture, _attempt(case, fixture, case.baseline))
    assert not base.passed
    nop = case.verify(fixture, _attempt(case, fixture, None))
    assert not nop.passed and all(m.value is None for m in nop.metrics)
    overlay = ref.artifacts["overlay"]  # the image with the legend under it
    assert overlay.shape[1:] == (fixture.data["image"].shape[1], 3) and overlay.shape[0] > 256


def _small(truth: np.ndarray) -> Fixture:
    limits = {name: 1.0 for name, _ in SPOT_METRICS}
    return Fixture(
        provenance="test", data={"image": np.zeros((32, 32), np.float32)}, truth={"spots": truth}, tolerance=limits
    )


def _brute(truth: np.ndarray, pred: np.ndarray, radius: float) -> tuple[int, float]:
    """The most pairs within ``radius``, and among those the least squared distance: every assignment tried."""
    best = (0, 0.0)
    n, m = len(truth), len(pred)
    for k in range(min(n, m), 0, -1):
        for rows in itertools.combinations(range(n), k):
            for cols in itertools.permutations(range(m), k):
                d = np.hypot(*(truth[list(rows)] - pred[list(cols)]).T)
                if np.all(d <= radius):
                    total = float(d.sum())
                    if best[0] < k or total < best[1]:
                        best = (k, total, float(np.sqrt(np.mean(d**2))))  # type: ignore[assignment]
        if best[0]:
            return best  # type: ignore[return-value]
    return best


def test_f1_rmse_and_count_agree_with_brute_force_on_small_cases() -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        n, m = int(rng.integers(0, 6)), int(rng.integers(0, 6))
        truth, pred = rng.uniform(0, 8, (n, 2)), rng.uniform(0, 8, (m, 2))
        outcome = verify_spots(_small(truth), Attempt("s", arrays={"spots": pred}))
        got = {x.name: x.value for x in outcome.metrics}
        brute = _brute(truth, pred, RADIUS)
        tp = brute[0]
        f1 = 1.0 if n + m == 0 else 2 * tp / (n + m)
        assert got["f1_shortfall"] == pytest.approx(1 - f1)
        assert outcome.detail["matching"]["tp"] == tp
        if tp:
            # among the matchings of the most pairs the least total distance; its RMSE is the one scored
            assert outcome.detail["matching"]["rmse"] == pytest.approx(brute[2])
        else:
            assert got["localization_rmse"] is None
        expected_count = abs(m - n) / n if n else float(m)
        assert got["count_error"] == pytest.approx(expected_count)


@pytest.mark.parametrize(
    ("left", "words"),
    [
        (np.array([[np.nan, 3.0], [4.0, 4.0]]), "NaN or infinite"),
        (np.array([[1.0, 2.0, 3.0]]), "expected (points, 2)"),
        (np.zeros((10**6, 2)), f"more than the {MAX_POINTS}"),
        (np.array([[1.0, np.inf]]), "NaN or infinite"),
    ],
    ids=["nan", "wrong-ndim", "a-million", "inf"],
)
def test_dishonest_leavings_are_refused_not_scored(built, left: np.ndarray, words: str) -> None:
    case, fixture = built["spot-detection/sparse-spots"]
    outcome = case.verify(fixture, Attempt("s", arrays={"spots": left}))
    assert not outcome.passed
    assert all(m.value is None for m in outcome.metrics)
    assert words in outcome.detail["why"]


def test_a_cloud_of_guesses_does_not_pass(built) -> None:
    """Every pixel answered: each true spot has a match, but the false points and the count fail it."""
    case, fixture = built["spot-detection/sparse-spots"]
    grid = np.argwhere(np.ones((256, 256), bool))[::4].astype(float)  # 16384 points, under the cap
    outcome = case.verify(fixture, Attempt("s", arrays={"spots": grid}))
    values = {m.name: m for m in outcome.metrics}
    assert values["missed_fraction"].passed and not values["false_fraction"].passed
    assert not values["count_error"].passed and not outcome.passed


def test_the_points_verifier_by_name_scores_the_new_metrics_only_when_asked() -> None:
    from imagebench.cases.verifiers import limit_problems, named_verifier

    truth = np.array([[5.0, 5.0], [10.0, 10.0]])
    four = {"f1_shortfall": 0.1, "missed_fraction": 0.1, "false_fraction": 0.1, "localization_error": 1.0}
    fixture = Fixture(provenance="t", data={"image": np.zeros((16, 16))}, truth={"points": truth}, tolerance=four)
    outcome = named_verifier("points", {"radius": 2.0})(fixture, Attempt("s", arrays={"points": truth + 0.5}))
    assert [m.name for m in outcome.metrics] == list(four) and outcome.passed
    assert limit_problems("points", {}, four) == []
    six = {**four, "localization_rmse": 1.0, "count_error": 0.1}
    params = {"metrics": list(six)}
    assert limit_problems("points", params, four) != []  # asked for, without a limit
    outcome = named_verifier("points", params)(
        Fixture(provenance="t", data={"image": np.zeros((16, 16))}, truth={"points": truth}, tolerance=six),
        Attempt("s", arrays={"points": truth + 0.5}),
    )
    got = {m.name: m.value for m in outcome.metrics}
    assert got["localization_rmse"] == pytest.approx(np.sqrt(0.5)) and got["count_error"] == 0.0


# --------------------------------------------------------------------------- imagebench metrics spots


def test_metrics_spots_prints_the_scores(tmp_path: Path, capsys) -> None:
    truth = tmp_path / "truth.npy"
    np.save(truth, np.array([[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]]))
    pred = tmp_path / "pred.csv"
    pred.write_text("y,x\n10.5,10\n20,21.5\n50,50\n")
    assert main(["metrics", "spots", str(truth), str(pred), "--distance", "2", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert (scores["tp"], scores["fp"], scores["fn"]) == (2, 1, 1)
    assert scores["f1"] == pytest.approx(2 / 3)
    assert scores["rmse"] == pytest.approx(np.sqrt((0.25 + 2.25) / 2))
    assert main(["metrics", "spots", str(truth), str(pred), "--distance", "1"]) == 0
    out = capsys.readouterr().out
    assert "tp           1" in out and "fn           2" in out


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (np.array([[np.nan, 1.0]]), "NaN or infinite"),
        (np.zeros((4,)), "expected (points, 2 or 3)"),
        (np.zeros((MAX_POINTS + 1, 2)), f"more than the {MAX_POINTS}"),
        (np.array(["a", "b"]), "expected numbers"),
    ],
    ids=["nan", "1-d", "too-many", "text"],
)
def test_metrics_spots_refuses_a_bad_file_naming_it(tmp_path: Path, capsys, content, words: str) -> None:
    good = tmp_path / "truth.npy"
    np.save(good, np.zeros((2, 2)))
    bad = tmp_path / "bad.npy"
    np.save(bad, content)
    assert main(["metrics", "spots", str(good), str(bad), "--distance", "2"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and words in err


def test_metrics_spots_refuses_a_bad_csv_a_suffix_and_a_distance(tmp_path: Path, capsys) -> None:
    good = tmp_path / "truth.npy"
    np.save(good, np.zeros((2, 2)))
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("1,2\n3,4,5\n")
    assert main(["metrics", "spots", str(good), str(ragged), "--distance", "2"]) == 2
    assert "same 2 or 3" in capsys.readouterr().err
    other = tmp_path / "p.txt"
    other.write_text("1,2\n")
    assert main(["metrics", "spots", str(good), str(other), "--distance", "2"]) == 2
    assert "expected .npy or .csv" in capsys.readouterr().err
    assert main(["metrics", "spots", str(good), str(good), "--distance", "0"]) == 2
    assert "positive" in capsys.readouterr().err
    three = tmp_path / "three.npy"
    np.save(three, np.zeros((2, 3)))
    assert main(["metrics", "spots", str(good), str(three), "--distance", "2"]) == 2
    assert "3 coordinates" in capsys.readouterr().err
