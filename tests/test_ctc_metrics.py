"""SEG, DET, TRA and division F1 (imagebench.tracking) against py-ctcmetrics and traccuracy, to 1e-9.

Every value of every folder is compared with the peers: curated edge cases built disc by disc
(a perfect result, a missed division, a false merge, a false split, a wrong parent, a gap closed
by a parent link, a relabel that changes an edge's semantic, a division shifted by one frame,
empty frames), random disc movies with random errors, and real nuclei (the DSB 2018 fixture's
mask) moved along a trajectory. Division F1 is compared at frame buffer 0 and 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ctc_peers import TOLERANCE, peer_ctc, peer_divisions, perturb, same, write_pair
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import imagebench
from imagebench.tracking import ctc, metrics
from imagebench.tracking.synthetic import disc_movie, tracks_from_labels

SHAPE = (64, 96)
FRAMES = 14

# (label, first frame, last frame, y, x, radius, x step a frame); the reference scene
BASE = [
    (1, 0, 4, 20, 10, 6, 2),
    (2, 5, 8, 12, 20, 5, 1),  # daughters of 1
    (3, 5, 8, 28, 20, 5, 1),
    (4, 0, 8, 50, 60, 7, 0),
    (5, 11, 13, 30, 70, 6, 1),  # appears after two empty frames (9, 10)
    (6, 0, 2, 50, 20, 5, 0),
    (7, 4, 6, 50, 20, 5, 0),  # 6 comes back after a gap as 7 (parent link across frame 3)
    (10, 0, 3, 12, 80, 5, 0),
    (11, 4, 8, 12, 80, 5, 0),  # a relabel: 10's only child, no gap
]
BASE_PARENTS = {2: 1, 3: 1, 7: 6, 11: 10}


def draw(objects: list[tuple[int, int, int, float, float, float, float]], frames: int = FRAMES) -> np.ndarray:
    labels = np.zeros((frames, *SHAPE), dtype=np.uint16)
    yy, xx = np.mgrid[0 : SHAPE[0], 0 : SHAPE[1]]
    for label, begin, end, y, x, r, step in objects:
        for t in range(begin, end + 1):
            cx = x + step * (t - begin)
            labels[t][(yy - y) ** 2 + (xx - cx) ** 2 <= r * r] = label
    return labels


def movie(objects: list, parents: dict[int, int]) -> ctc.TimeLapse:
    labels = draw(objects)
    return ctc.TimeLapse(labels=labels, lineage=ctc.lineage_from_labels(labels, parents))


def reference() -> ctc.TimeLapse:
    return movie(BASE, BASE_PARENTS)


def scenario_results() -> dict[str, ctc.TimeLapse]:
    ref = reference()
    missed = movie(
        [(1, 0, 4, 20, 10, 6, 2), (1, 5, 8, 12, 20, 5, 1), *[o for o in BASE if o[0] not in (1, 2)]], {7: 6, 11: 10}
    )
    merged_labels = ref.labels.copy()
    yy, xx = np.mgrid[0 : SHAPE[0], 0 : SHAPE[1]]
    for t in range(5, 9):  # the daughters as one object covering both
        merged_labels[t][merged_labels[t] == 3] = 2
        merged_labels[t][(np.abs(yy - 20) < 4) & (np.abs(xx - (20 + t - 5)) < 3)] = 2
    merged = tracks_from_labels(merged_labels, BASE_PARENTS)
    split_labels = ref.labels.copy()
    for t in range(3, 6):  # track 4 cut into 65% and 35% (a new label) for three frames
        split_labels[t][(split_labels[t] == 4) & (xx > 60 + 2)] = 20
    split = tracks_from_labels(split_labels, BASE_PARENTS)
    wrong_parent = movie(BASE, {**BASE_PARENTS, 3: 6})
    through_gap = movie([*[o for o in BASE if o[0] not in (6, 7)], (6, 0, 6, 50, 20, 5, 0)], {2: 1, 3: 1, 11: 10})
    relabelled = movie([*[o for o in BASE if o[0] not in (10, 11)], (10, 0, 8, 12, 80, 5, 0)], {2: 1, 3: 1, 7: 6})
    late = movie(
        [
            (1, 0, 5, 20, 10, 6, 2),
            (2, 6, 8, 13, 21, 5, 1),
            (3, 6, 8, 29, 21, 5, 1),
            *[o for o in BASE if o[0] not in (1, 2, 3)],
        ],
        BASE_PARENTS,
    )
    late.labels[5][(yy - 12) ** 2 + (xx - 20) ** 2 <= 25] = 1  # at frame 5 one object where the daughter 2 is
    late = tracks_from_labels(late.labels, BASE_PARENTS)
    extra = movie([*BASE, (30, 9, 10, 40, 40, 4, 0)], BASE_PARENTS)  # a false detection in the empty frames
    return {
        "perfect": ref,
        "missed-division": missed,
        "false-merge": merged,
        "false-split": split,
        "wrong-parent": wrong_parent,
        "linked-through-the-gap": through_gap,
        "relabel-as-one-track": relabelled,
        "division-one-frame-late": late,
        "false-positive-in-empty-frames": extra,
        "shifted": perturb(ref, seed=3, shift=2, drop=0.1, relink=0.3),
    }


SCENARIOS = scenario_results()


def agree(
    tmp: Path, truth: ctc.TimeLapse, result: ctc.TimeLapse, seg_frames: tuple[int, ...] = (0, 6)
) -> metrics.CtcScores:
    """Write the folders, score them, compare every value with both peers; return our scores."""
    pytest.importorskip("ctc_metrics")
    pytest.importorskip("traccuracy")
    res, gt = write_pair(tmp, truth, result, seg_frames)
    ours = metrics.evaluate_folders(res, gt)
    peer = peer_ctc(res, gt)
    assert peer["Valid"] == 1
    for key in ("SEG", "DET", "TRA"):
        assert same(getattr(ours, key), peer[key]), (key, getattr(ours, key), peer[key])
    for key in ("NS", "FN", "FP", "ED", "EA", "EC"):
        assert ours.counts[key] == peer[f"AOGM_{key}"], (key, ours.counts, peer)
    assert abs(ours.counts["AOGM"] - peer["AOGM"]) <= TOLERANCE
    assert abs(ours.counts["AOGM_0"] - peer["AOGM_0"]) <= TOLERANCE
    for buffer in (0, 1):
        mine = metrics.evaluate_folders(res, gt, frame_buffer=buffer).divisions
        theirs = peer_divisions(res, gt, buffer)
        assert same(mine.f1, theirs["Division F1"]), (buffer, mine, theirs)
        assert mine.true_positive == theirs["True Positive Divisions"], (buffer, mine, theirs)
        assert mine.false_positive == theirs["False Positive Divisions"], (buffer, mine, theirs)
        assert mine.false_negative == theirs["False Negative Divisions"], (buffer, mine, theirs)
        assert mine.wrong_children == theirs["Wrong Children Divisions"], (buffer, mine, theirs)
        assert (mine.reference, mine.computed) == (theirs["Total GT Divisions"], theirs["Total Predicted Divisions"])
    return ours


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_curated_edge_cases_agree_with_the_peers(name: str, tmp_path: Path) -> None:
    scores = agree(tmp_path, reference(), SCENARIOS[name])
    if name == "perfect":
        assert (scores.SEG, scores.DET, scores.TRA, scores.division_f1) == (1.0, 1.0, 1.0, 1.0)
    else:
        assert scores.TRA < 1.0


def test_each_edge_case_is_the_error_it_claims() -> None:
    """Not only agreement: each scenario makes the AOGM error it is named for."""
    ref = reference()
    got = {name: metrics.evaluate(result, ctc.CtcTruth(tra=ref)) for name, result in SCENARIOS.items()}
    assert got["missed-division"].divisions.false_negative == 1 and got["missed-division"].counts["EC"] >= 1
    assert got["false-merge"].counts["NS"] == 4  # four frames of one object over two daughters
    assert got["false-split"].counts["FP"] == 3 and got["false-split"].counts["FN"] == 0
    assert got["wrong-parent"].counts["ED"] == 1 and got["wrong-parent"].counts["EA"] == 1
    # daughter 3 given to track 6: 1 no longer divides (a missed division) and 6 does (a false one)
    assert (got["wrong-parent"].divisions.false_negative, got["wrong-parent"].divisions.false_positive) == (1, 1)
    assert got["linked-through-the-gap"].counts["FP"] == 1 and got["linked-through-the-gap"].counts["EA"] == 1
    assert got["relabel-as-one-track"].counts["EC"] == 1 and got["relabel-as-one-track"].DET == 1.0
    late = got["division-one-frame-late"]
    assert late.divisions.true_positive == 0
    shifted = metrics.evaluate(SCENARIOS["division-one-frame-late"], ctc.CtcTruth(tra=ref), frame_buffer=1)
    assert shifted.divisions.true_positive == 1 and shifted.division_f1 == 1.0
    assert got["false-positive-in-empty-frames"].counts["FP"] == 2


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), shift=st.integers(0, 3), drop=st.floats(0, 0.2), relink=st.floats(0, 0.4))
def test_random_movies_agree_with_the_peers(
    tmp_path_factory: pytest.TempPathFactory, seed: int, shift: int, drop: float, relink: float
) -> None:
    truth = disc_movie(seed=seed, frames=12, shape=(80, 80), cells=5, cycle=(4, 8))
    result = perturb(truth, seed + 1, shift=shift, drop=drop, relink=relink)
    agree(tmp_path_factory.mktemp("random"), truth, result, seg_frames=(0, 11))


def test_real_nuclei_moved_along_a_trajectory_agree_with_the_peers(tmp_path: Path) -> None:
    """Real pixels: the DSB 2018 fixture's nucleus labels (183 nuclei), a 192×192 window drifting across them."""
    import tifffile
    from skimage.morphology import binary_erosion, disk

    mask = tifffile.imread(Path(imagebench.__file__).parent / "data/fixtures/segment-nuclei/dsb2018/mask2d.tif")
    path = [(int(40 + 9 * t), int(30 + 7 * t)) for t in range(16)]
    truth_labels = np.stack([mask[y : y + 192, x : x + 192] for y, x in path])
    truth = tracks_from_labels(truth_labels)
    rng = np.random.default_rng(0)
    eroded = truth.labels.copy()
    for t in range(eroded.shape[0]):  # a segmenter that shrinks every nucleus by a pixel and misses a few
        eroded[t][~binary_erosion(eroded[t] > 0, disk(1))] = 0
        for label in rng.choice(np.unique(eroded[t])[1:], size=3, replace=False):
            eroded[t][eroded[t] == label] = 0
    result = perturb(tracks_from_labels(eroded), seed=1, shift=1, drop=0.0, relink=0.2)
    scores = agree(tmp_path, truth, result, seg_frames=(0, 7, 15))
    assert 0.5 < scores.TRA < 1.0 and scores.SEG is not None and 0.5 < scores.SEG < 1.0


def _movie_3d() -> tuple[ctc.TimeLapse, ctc.TimeLapse]:
    zz, yy, xx = np.mgrid[0:12, 0:40, 0:40]
    labels = np.zeros((6, 12, 40, 40), np.uint16)
    for t in range(6):
        labels[t][(zz - 6) ** 2 + (yy - 12) ** 2 + (xx - 8 - 3 * t) ** 2 <= 16] = 1
        if t >= 2:
            labels[t][(zz - 5) ** 2 + (yy - 28) ** 2 + (xx - 20) ** 2 <= 25] = 2
    return tracks_from_labels(labels), tracks_from_labels(np.roll(labels, 1, axis=-1))


def test_3d_movie_agrees_with_the_peer(tmp_path: Path) -> None:
    """T×Z×Y×X: a 3D movie, SEG of a whole frame and of one slice of another."""
    pytest.importorskip("ctc_metrics")
    truth, result = _movie_3d()
    seg = (
        ctc.SegTruth(frame=2, labels=truth.labels[2]),
        ctc.SegTruth(frame=4, labels=truth.labels[4][[5]], slices=(5,)),
    )
    gt = ctc.write_truth(tmp_path / "01_GT", ctc.CtcTruth(tra=truth, seg=seg))
    res = ctc.write_result(tmp_path / "01_RES", result)
    ours, peer = metrics.evaluate_folders(res, gt), peer_ctc(res, gt)
    for key in ("SEG", "DET", "TRA"):
        assert same(getattr(ours, key), peer[key]), key
    assert ours.seg_objects == 4


def test_a_frame_annotated_on_several_slices_counts_once(tmp_path: Path) -> None:
    """py-ctcmetrics 1.3.3 lists a frame annotated on k slices k times (parse_masks compares a name with
    joined paths), so it weighs that frame k times; imagebench counts it once. The test shows the peer's
    value is ours over the frame repeated k times, and ours is not."""
    pytest.importorskip("ctc_metrics")
    truth, result = _movie_3d()
    sliced = ctc.SegTruth(frame=4, labels=truth.labels[4][[5, 6]], slices=(5, 6))
    seg = (ctc.SegTruth(frame=2, labels=truth.labels[2]), sliced)
    gt = ctc.write_truth(tmp_path / "01_GT", ctc.CtcTruth(tra=truth, seg=seg))
    res = ctc.write_result(tmp_path / "01_RES", result)
    ours, peer = metrics.evaluate_folders(res, gt), peer_ctc(res, gt)
    repeated, _ = metrics.seg(ctc.CtcTruth(tra=truth, seg=(*seg, sliced)), result)
    assert same(repeated, peer["SEG"]) and not same(ours.SEG, peer["SEG"])
    assert ours.seg_objects == 4 and same(ours.DET, peer["DET"]) and same(ours.TRA, peer["TRA"])


def test_an_empty_result_scores_zero_not_an_error(tmp_path: Path) -> None:
    """A tracker that found nothing: every reference vertex and edge missed, TRA = DET = 0 (py-ctcmetrics calls it invalid)."""
    ref = reference()
    empty = ctc.TimeLapse(labels=np.zeros_like(ref.labels), lineage=ctc.Lineage())
    res, gt = write_pair(tmp_path, ref, empty)
    scores = metrics.evaluate_folders(res, gt)
    assert (scores.DET, scores.TRA, scores.SEG) == (0.0, 0.0, 0.0)
    assert (
        scores.counts["FN"] == scores.counts["reference_vertices"]
        and scores.counts["EA"] == scores.counts["reference_edges"]
    )
    assert scores.division_f1 is None and scores.divisions.recall == 0.0


def test_a_result_far_worse_than_nothing_is_clamped_at_zero() -> None:
    ref = reference()
    noise = ref.labels.copy()
    noise[:, :4, :] = np.arange(1, 97, dtype=np.uint16)[None, None, :] + 100  # 96 false objects a frame
    noisy = tracks_from_labels(noise, {})
    scores = metrics.evaluate(noisy, ctc.CtcTruth(tra=ref))
    assert scores.counts["FP"] >= 96 * FRAMES
    assert 0.0 <= scores.TRA < 1.0 and scores.counts["AOGM"] > scores.counts["AOGM_D"]


def test_the_cli_prints_the_json_the_peers_agree_with(tmp_path: Path) -> None:
    pytest.importorskip("ctc_metrics")
    res, gt = write_pair(tmp_path, reference(), SCENARIOS["wrong-parent"])
    out = subprocess.run(
        [sys.executable, "-m", "imagebench", "metrics", "ctc", str(res), str(gt), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    printed = json.loads(out.stdout)
    assert {"SEG", "DET", "TRA", "division_f1", "counts"} <= set(printed)
    peer = peer_ctc(res, gt)
    for key in ("SEG", "DET", "TRA"):
        assert same(printed[key], peer[key])
    assert printed["counts"]["ED"] == peer["AOGM_ED"]


def test_the_cli_refuses_a_bad_folder_with_exit_2(tmp_path: Path) -> None:
    res, gt = write_pair(tmp_path, reference(), reference())
    (res / "res_track.txt").write_text("1 0 4\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "imagebench", "metrics", "ctc", str(res), str(gt)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "res_track.txt: line 1: 3 column(s)" in out.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "imagebench", "metrics", "ctc", str(tmp_path / "nowhere"), str(gt)],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "nowhere: not a folder" in missing.stderr


def test_a_result_of_another_length_is_refused(tmp_path: Path) -> None:
    ref = reference()
    short = ctc.TimeLapse(
        labels=ref.labels[:10], lineage=ctc.lineage_from_labels(ref.labels[:10], {2: 1, 3: 1, 7: 6, 11: 10})
    )
    res, gt = write_pair(tmp_path, ref, short)
    with pytest.raises(ctc.CtcFormatError, match="10 frame\\(s\\), but .* has 14"):
        metrics.evaluate_folders(res, gt)
