"""Sparse IoU matching: hand-checked examples, agreement with a dense brute force, 3D, edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage as ndi
from scipy.optimize import linear_sum_assignment

from imagebench.matching import label_overlaps, match_labels

# --------------------------------------------------------------------------- a dense brute force


def dense_match(truth: np.ndarray, pred: np.ndarray, thr: float) -> tuple[int, int, int, list[tuple[int, int]]]:
    """(tp, n_true, n_pred, matched pairs) from a full IoU table and an exact assignment.

    The objective is StarDist's: as many pairs with IoU >= thr as possible, ties by summed IoU.
    """
    tl = [int(v) for v in np.unique(truth) if v]
    pl = [int(v) for v in np.unique(pred) if v]
    if not tl or not pl:
        return 0, len(tl), len(pl), []
    table = np.zeros((len(tl), len(pl)))
    for i, a in enumerate(tl):
        ma = truth == a
        for j, b in enumerate(pl):
            mb = pred == b
            table[i, j] = np.count_nonzero(ma & mb) / np.count_nonzero(ma | mb)
    k = min(len(tl), len(pl))
    rows, cols = linear_sum_assignment(-(table >= thr).astype(float) - table / (2 * k))
    pairs = [(tl[r], pl[c]) for r, c in zip(rows, cols, strict=True) if table[r, c] >= thr]
    return len(pairs), len(tl), len(pl), sorted(pairs)


def random_labels(rng: np.random.Generator, shape: tuple[int, ...], density: float, scramble: bool) -> np.ndarray:
    labels, n = ndi.label(ndi.binary_opening(rng.random(shape) < density) | (rng.random(shape) < density / 4))
    if scramble and n:  # non-consecutive, shuffled label values
        lut = np.zeros(n + 1, np.int64)
        lut[1:] = rng.choice(10 * n + 5, size=n, replace=False) + 1
        labels = lut[labels]
    return labels


# --------------------------------------------------------------------------- hand-checked


def square(
    shape: tuple[int, int], r0: int, r1: int, c0: int, c1: int, value: int, into: np.ndarray | None = None
) -> np.ndarray:
    out = np.zeros(shape, np.int32) if into is None else into
    out[r0:r1, c0:c1] = value
    return out


def test_identical_images_match_everything() -> None:
    t = square((20, 20), 2, 6, 2, 6, 3)
    square((20, 20), 10, 15, 10, 18, 9, into=t)
    r = match_labels(t, t)
    assert (r.tp, r.fp, r.fn, r.n_true, r.n_pred) == (2, 0, 0, 2, 2)
    assert r.precision == r.recall == r.f1 == r.accuracy == 1.0
    assert r.mean_matched_iou == 1.0
    assert r.pairs.tolist() == [[3, 3], [9, 9]]


def test_shifted_square_matches_by_hand_counted_iou() -> None:
    # 10x10 truth, prediction shifted by 2 rows: intersection 80, union 120 -> IoU 2/3
    t = square((30, 30), 5, 15, 5, 15, 1)
    p = square((30, 30), 7, 17, 5, 15, 4)
    r = match_labels(t, p, iou=0.5)
    assert (r.tp, r.fp, r.fn) == (1, 0, 0)
    assert r.pair_iou[0] == pytest.approx(80 / 120)
    r = match_labels(t, p, iou=0.7)
    assert (r.tp, r.fp, r.fn) == (0, 1, 1)
    assert r.mean_matched_iou is None
    assert (r.precision, r.recall, r.f1, r.accuracy) == (0.0, 0.0, 0.0, 0.0)


def test_split_merge_miss_and_false_object_counts() -> None:
    shape = (40, 40)
    t = np.zeros(shape, np.int32)
    p = np.zeros(shape, np.int32)
    # object 1 split 70/30 into 5 and 6: the big piece matches (IoU 0.7), the small one is false
    t[0:10, 0:10] = 1
    p[0:7, 0:10] = 5
    p[7:10, 0:10] = 6
    # objects 2 (10x10) and 3 (10x5) merged into 7: IoU 100/150 and 50/150 -> 2 matches, 3 is missed
    t[15:25, 0:10] = 2
    t[15:25, 10:15] = 3
    p[15:25, 0:15] = 7
    # object 4 missed entirely; a false object 8 far from everything
    t[30:35, 30:35] = 4
    p[0:4, 30:34] = 8
    r = match_labels(t, p)
    assert (r.n_true, r.n_pred, r.tp, r.fp, r.fn) == (4, 4, 2, 2, 2)
    assert r.pairs.tolist() == [[1, 5], [2, 7]]
    assert r.pair_iou.tolist() == pytest.approx([0.7, 100 / 150])
    assert r.precision == 0.5 and r.recall == 0.5 and r.f1 == 0.5
    assert r.accuracy == pytest.approx(2 / 6)


def test_overlaps_are_sparse_pairs_with_areas() -> None:
    t = np.array([[1, 1, 0, 2], [1, 1, 0, 2]])
    p = np.array([[7, 0, 0, 2], [7, 7, 3, 3]])
    ov = label_overlaps(t, p)
    assert ov.true_labels.tolist() == [1, 2] and ov.true_areas.tolist() == [4, 2]
    assert ov.pred_labels.tolist() == [2, 3, 7] and ov.pred_areas.tolist() == [1, 2, 3]
    assert list(zip(ov.pair_true.tolist(), ov.pair_pred.tolist(), ov.intersection.tolist(), strict=True)) == [
        (1, 7, 3),
        (2, 2, 1),
        (2, 3, 1),
    ]
    assert ov.iou().tolist() == pytest.approx([3 / 4, 1 / 2, 1 / 3])


def test_exact_half_tie_at_threshold_one_half_is_one_to_one() -> None:
    # one truth object cut into two exact halves: each half has IoU exactly 0.5 with it
    t = square((10, 10), 0, 4, 0, 4, 1)
    p = square((10, 10), 0, 2, 0, 4, 1)
    square((10, 10), 2, 4, 0, 4, 2, into=p)
    r = match_labels(t, p, iou=0.5)
    assert (r.tp, r.fp, r.fn) == (1, 1, 0)
    assert r.pairs.tolist() == [[1, 1]]  # ties broken by the lower label
    assert dense_match(t, p, 0.5)[0] == 1


# --------------------------------------------------------------------------- empty and bad input


def test_both_empty_is_perfect() -> None:
    z = np.zeros((8, 9), np.uint16)
    r = match_labels(z, z)
    assert (r.tp, r.fp, r.fn, r.n_true, r.n_pred) == (0, 0, 0, 0, 0)
    assert r.precision == r.recall == r.f1 == r.accuracy == 1.0
    assert r.mean_matched_iou is None
    assert r.pairs.shape == (0, 2)


def test_objects_on_an_empty_truth_are_all_false() -> None:
    z = np.zeros((8, 8), np.int32)
    p = square((8, 8), 1, 3, 1, 3, 5)
    square((8, 8), 5, 7, 5, 7, 6, into=p)
    r = match_labels(z, p)
    assert (r.tp, r.fp, r.fn) == (0, 2, 0)
    assert r.precision == 0.0 and r.recall == 1.0 and r.f1 == 0.0 and r.accuracy == 0.0


def test_nothing_predicted_misses_everything() -> None:
    t = square((8, 8), 1, 3, 1, 3, 5)
    r = match_labels(t, np.zeros_like(t))
    assert (r.tp, r.fp, r.fn) == (0, 0, 1)
    assert r.precision == 1.0 and r.recall == 0.0 and r.f1 == 0.0


def test_zero_size_images() -> None:
    r = match_labels(np.zeros((0, 5), np.int32), np.zeros((0, 5), np.int32))
    assert (r.n_true, r.n_pred, r.f1) == (0, 0, 1.0)


@pytest.mark.parametrize(
    ("truth", "pred", "message"),
    [
        (np.zeros((4, 4), int), np.zeros((4, 5), int), "shape"),
        (np.zeros((4, 4), float), np.zeros((4, 4), int), "integer"),
        (np.full((4, 4), -1), np.zeros((4, 4), int), ">= 0"),
        (np.zeros((4, 4), int), np.full((4, 4), 2**63 + 5, np.uint64), "2\\*\\*63"),
    ],
)
def test_bad_input_is_refused(truth: np.ndarray, pred: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        match_labels(truth, pred)


@pytest.mark.parametrize("thr", [0.0, -0.1, 1.5, float("nan")])
def test_threshold_outside_zero_one_is_refused(thr: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        match_labels(np.zeros((3, 3), int), np.zeros((3, 3), int), iou=thr)


def test_bool_and_mixed_integer_dtypes() -> None:
    t = np.zeros((6, 6), bool)
    t[1:4, 1:4] = True
    p = np.zeros((6, 6), np.uint64)
    p[1:4, 1:5] = 2**40  # a huge label value
    r = match_labels(t, p)
    assert r.tp == 1 and r.pairs.tolist() == [[1, 2**40]]
    assert r.pair_iou[0] == pytest.approx(9 / 12)


# --------------------------------------------------------------------------- against the brute force


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("thr", [0.1, 0.3, 0.5, 0.75])
def test_agrees_with_dense_brute_force_2d(seed: int, thr: float) -> None:
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(8, 40)), int(rng.integers(8, 40)))
    t = random_labels(rng, shape, 0.5, scramble=seed % 2 == 0)
    # a prediction that resembles the truth: dilated/eroded pieces, relabelled, plus noise objects
    p = random_labels(rng, shape, 0.45, scramble=True)
    keep = (t > 0) & (rng.random(shape) < 0.85)
    p = np.where(keep, t * 3 + 1, p)
    tp, n_true, n_pred, pairs = dense_match(t, p, thr)
    r = match_labels(t, p, iou=thr)
    assert (r.tp, r.n_true, r.n_pred) == (tp, n_true, n_pred)
    assert r.fp == n_pred - tp and r.fn == n_true - tp
    if thr >= 0.5:  # unique matches: the very same pairs
        assert sorted(map(tuple, r.pairs.tolist())) == pairs


def test_agrees_with_dense_brute_force_3d() -> None:
    rng = np.random.default_rng(7)
    for _ in range(4):
        shape = (6, 14, 12)
        t = random_labels(rng, shape, 0.5, scramble=True)
        p = ndi.grey_dilation(t, size=(1, 2, 2)) * (rng.random(shape) < 0.9)
        for thr in (0.2, 0.5, 0.8):
            tp, n_true, n_pred, pairs = dense_match(t, p, thr)
            r = match_labels(t, p, iou=thr)
            assert (r.tp, r.n_true, r.n_pred) == (tp, n_true, n_pred)


def test_3d_hand_checked() -> None:
    t = np.zeros((4, 6, 6), np.int32)
    t[0:2, 0:3, 0:3] = 1  # 18 voxels
    t[2:4, 3:6, 3:6] = 2
    p = np.zeros_like(t)
    p[0:2, 0:3, 0:2] = 10  # 12 voxels inside object 1: IoU 12/18
    p[3:4, 3:6, 3:6] = 11  # 9 voxels inside object 2: IoU 9/18 = 0.5 exactly
    r = match_labels(t, p, iou=0.5)
    assert (r.tp, r.fp, r.fn) == (2, 0, 0)
    assert r.pair_iou.tolist() == pytest.approx([12 / 18, 0.5])
    r = match_labels(t, p, iou=0.51)
    assert r.pairs.tolist() == [[1, 10]]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([(5, 7), (12, 3), (4, 5, 6)]),
    st.sampled_from([0.25, 0.5, 0.6]),
)
def test_property_agrees_with_dense(seed: int, shape: tuple[int, ...], thr: float) -> None:
    rng = np.random.default_rng(seed)
    t = rng.integers(0, 4, size=shape) * rng.integers(1, 3)
    p = rng.integers(0, 5, size=shape)
    tp, n_true, n_pred, _ = dense_match(t, p, thr)
    r = match_labels(t, p, iou=thr)
    assert (r.tp, r.n_true, r.n_pred) == (tp, n_true, n_pred)
    assert 0.0 <= r.f1 <= 1.0
    # swapping the roles swaps the error kinds
    s = match_labels(p, t, iou=thr)
    assert (s.tp, s.fp, s.fn) == (r.tp, r.fn, r.fp)


def test_result_as_dict_is_plain_json() -> None:
    import json

    t = square((10, 10), 0, 4, 0, 4, 1)
    d = match_labels(t, t).as_dict()
    assert json.loads(json.dumps(d)) == d
    assert "accuracy" in d and "ap" not in {k.lower() for k in d}


# --------------------------------------------------------------------------- every counting path


# every dtype with every label offset it can hold (labels up to offset + 200)
RANGES = [
    (dtype, offset)
    for dtype in (np.uint8, np.int16, np.uint32, np.int64, np.uint64)
    for offset in (0, 3_000_000, 2**40, 2**62)
    if offset + 200 <= np.iinfo(dtype).max
]


@pytest.mark.parametrize(("dtype", "offset"), RANGES, ids=[f"{d.__name__}+{o}" for d, o in RANGES])
@pytest.mark.parametrize("tables", [True, False])
def test_every_label_range_and_dtype_agrees_with_dense(
    dtype: type, offset: int, tables: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small labels (tables by value), large ones (the packed sort, or np.unique where packing
    would overflow), every integer dtype; ``tables=False`` forces the sorting paths everywhere."""
    import imagebench.matching as matching

    if not tables:
        monkeypatch.setattr(matching, "_dense_enough", lambda top, count: False)
    rng = np.random.default_rng(offset % 97)
    t = random_labels(rng, (30, 41), 0.5, scramble=True)
    p = np.where((t > 0) & (rng.random(t.shape) < 0.8), t * 3 + 1, random_labels(rng, t.shape, 0.4, True))
    t = np.where(t > 0, t + offset, 0).astype(dtype)
    p = np.where(p > 0, p + offset, 0).astype(dtype)
    for thr in (0.3, 0.5):
        tp, n_true, n_pred, pairs = dense_match(t, p, thr)
        r = match_labels(t, p, iou=thr)
        assert (r.tp, r.n_true, r.n_pred) == (tp, n_true, n_pred)
        if thr >= 0.5:
            assert sorted(map(tuple, r.pairs.tolist())) == pairs
    ov = label_overlaps(t, p)
    for a, b, inter in zip(ov.pair_true, ov.pair_pred, ov.intersection, strict=True):
        assert inter == np.count_nonzero((t == a) & (p == b))
    for label, area in zip(ov.true_labels, ov.true_areas, strict=True):
        assert area == np.count_nonzero(t == label)


@pytest.mark.parametrize("shape", [(1,), (63,), (64,), (65,), (3, 64), (7, 9, 11)])
def test_run_starts_at_word_edges_and_dense_changes(shape: tuple[int, ...]) -> None:
    """Sizes around the 64-pixel words, and noise dense enough to take np.flatnonzero's way."""
    from imagebench.matching import _run_starts

    rng = np.random.default_rng(sum(shape))
    for density in (0.02, 0.2, 0.9):
        change = rng.random(int(np.prod(shape))) < density
        assert np.array_equal(_run_starts(change), np.flatnonzero(change))
    t = rng.integers(0, 50, size=shape)
    p = rng.integers(0, 50, size=shape)
    tp, n_true, n_pred, _ = dense_match(t, p, 0.2)
    r = match_labels(t, p, iou=0.2)
    assert (r.tp, r.n_true, r.n_pred) == (tp, n_true, n_pred)


def test_negative_label_is_named_even_when_it_lies_inside_a_run() -> None:
    t = np.zeros((5, 5), np.int32)
    t[2, 1:4] = -7
    with pytest.raises(ValueError, match="truth: labels must be >= 0.*found -7"):
        match_labels(t, np.zeros_like(t))
    p = np.zeros((5, 5), np.uint64)
    p[4, 4] = 2**63
    with pytest.raises(ValueError, match="pred: labels must be below 2\\*\\*63"):
        match_labels(np.zeros((5, 5), np.uint8), p)


# --------------------------------------------------------------------------- against the previous counting


def _same_overlaps(t: np.ndarray, p: np.ndarray) -> None:
    """label_overlaps gives, field for field and dtype for dtype, what the previous counting gave."""
    from matching_v1 import label_overlaps_v1

    got, want = label_overlaps(t, p), label_overlaps_v1(t, p)
    for name in want.__dataclass_fields__:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert np.array_equal(got.iou(), want.iou())


def _edge_images() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(29)
    blobs = random_labels(rng, (37, 70), 0.5, scramble=True)
    other = np.where(rng.random(blobs.shape) < 0.1, 0, np.roll(blobs, 2, axis=1))
    vol = random_labels(rng, (9, 13, 17), 0.45, scramble=True)
    noise = rng.permutation(64 * 65).reshape(64, 65) + 1  # every pixel its own object
    giant = np.ones((50, 80), np.int32)
    cases = [
        ("blobs", blobs, other),
        ("volume", vol, np.roll(vol, 1, axis=2)),
        ("one side empty", blobs, np.zeros_like(blobs)),
        ("other side empty", np.zeros_like(blobs), other),
        ("both empty", np.zeros((5, 64), np.uint8), np.zeros((5, 64), np.uint8)),
        ("one pixel", np.array([3]), np.array([3])),
        ("many small objects", noise, np.roll(noise, 1)),
        ("noise against blobs", noise[:37, :65], blobs[:, :65]),
        ("one giant object", giant, np.where(rng.random(giant.shape) < 0.5, 7, 0)),
        ("giant against giant", giant, giant * 9),
        ("non-contiguous views", blobs[::2, ::3], other[::2, ::3]),
        ("transposed", blobs.T, other.T),
    ]
    for dtype in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64):
        top = int(np.iinfo(dtype).max)
        t = np.where(blobs % 5 == 1, top, np.where(blobs > 0, blobs % 100 + 1, 0)).astype(dtype)
        q = np.where(other % 7 == 2, top, np.where(other > 0, other % 90 + 1, 0)).astype(dtype)
        cases.append((f"{dtype.__name__} up to its max", t, q))
    return cases


EDGES = _edge_images()


@pytest.mark.parametrize(("name", "t", "p"), EDGES, ids=[e[0] for e in EDGES])
@pytest.mark.parametrize("tables", [True, False])
def test_overlaps_are_those_of_the_previous_counting(
    name: str, t: np.ndarray, p: np.ndarray, tables: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import imagebench.matching as matching

    if not tables:
        monkeypatch.setattr(matching, "_dense_enough", lambda top, count: False)
    if t.dtype == np.uint64 and int(max(t.max(), p.max())) >= 2**63:
        with pytest.raises(ValueError, match="2\\*\\*63"):
            label_overlaps(t, p)
        return
    _same_overlaps(t, p)
    if np.unique(t).size * np.unique(p).size > 20_000:  # the dense table would take seconds
        return
    for thr in (0.3, 0.5):
        tp, n_true, n_pred, pairs = dense_match(t, p, thr)
        r = match_labels(t, p, iou=thr)
        assert (r.tp, r.n_true, r.n_pred) == (tp, n_true, n_pred)
        if thr >= 0.5:
            assert sorted(map(tuple, r.pairs.tolist())) == pairs


@pytest.mark.parametrize("past", [0, 1])
def test_packed_pair_key_at_the_edge_of_an_int64(past: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pair key ``(t * (top_p + 1) + p) << bits | length`` just fitting an int64, and one past
    it (where both label sets are compacted first): the same pairs and intersections either way."""
    import imagebench.matching as matching

    compacted: list[int] = []
    compact = matching._compact
    monkeypatch.setattr(matching, "_compact", lambda *a: compacted.append(1) or compact(*a))

    top_p = 2**30 + 7
    bits = 5  # runs of up to 31 pixels
    top_t = ((matching._INT64_MAX >> bits) - top_p) // (top_p + 1) + past
    t = np.zeros((4, 31), np.int64)
    p = np.zeros_like(t)
    t[0, :] = top_t  # a run of 31: ``bits`` is 5
    p[0, :20] = top_p
    p[0, 20:] = 3
    t[2, 3:9] = 5
    p[2, 4:12] = top_p
    _same_overlaps(t, p)
    ov = label_overlaps(t, p)
    assert list(zip(ov.pair_true.tolist(), ov.pair_pred.tolist(), ov.intersection.tolist(), strict=True)) == [
        (5, top_p, 5),
        (top_t, 3, 11),
        (top_t, top_p, 20),
    ]
    assert bool(compacted) == bool(past)  # the packed key where it fits, compacted labels past it


def test_one_prediction_over_two_exact_halves_matches_once() -> None:
    """The mirror of the exact-half tie: the repeated label is on the predicted side."""
    t = square((10, 10), 0, 2, 0, 4, 1)
    square((10, 10), 2, 4, 0, 4, 2, into=t)
    p = square((10, 10), 0, 4, 0, 4, 9)
    r = match_labels(t, p, iou=0.5)
    assert (r.tp, r.fp, r.fn) == (1, 0, 1)
    assert r.pairs.tolist() == [[1, 9]]
    assert dense_match(t, p, 0.5)[0] == 1


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 18])
def test_changes_are_the_same_whatever_the_chunk(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second image is compared a chunk at a time: every chunk edge, and a chunk of one pixel."""
    import imagebench.matching as matching

    monkeypatch.setattr(matching, "_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    t = random_labels(rng, (23, 29), 0.5, scramble=True)
    p = random_labels(rng, t.shape, 0.5, scramble=True)
    tf, pf = t.ravel(), p.ravel()
    want = np.concatenate(([True], (tf[1:] != tf[:-1]) | (pf[1:] != pf[:-1])))
    assert np.array_equal(matching._changes(tf, pf), want)
    _same_overlaps(t, p)


def test_overlaps_listed_out_of_order_still_match_one_to_one() -> None:
    """match_overlaps does not lean on the pairs' order: a truth object listed twice, apart."""
    from imagebench.matching import LabelOverlaps, match_overlaps

    a = np.array
    ov = LabelOverlaps(
        true_labels=a([1, 2]),
        true_areas=a([4, 4]),
        pred_labels=a([5, 6, 7]),
        pred_areas=a([4, 4, 4]),
        pair_true=a([1, 2, 1]),
        pair_pred=a([5, 6, 7]),
        intersection=a([3, 4, 3]),
    )
    r = match_overlaps(ov, 0.5)
    assert r.tp == 2 and sorted(map(tuple, r.pairs.tolist())) == [(1, 5), (2, 6)]
