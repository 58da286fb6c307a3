"""Sparse IoU matching of two integer label images (2D, 3D, any number of dimensions).

``match_labels(truth, pred, iou=0.5)`` counts true positives (a truth object and a
predicted object whose intersection-over-union is at least ``iou``), false positives
(predicted objects left unmatched) and false negatives (truth objects left unmatched),
and derives precision, recall, F1 and ``accuracy = TP / (TP + FP + FN)`` from them.
(That last ratio is often called "AP" in the nucleus-segmentation literature; it is not an
average precision, so this module calls it accuracy.)

How the overlaps are counted
----------------------------
Never as a dense objects-by-objects matrix, which for 10,000 objects would be 10^8 cells.
Instead one pass over the flattened pixels finds *runs*: maximal stretches of consecutive
pixels (in C order) that carry the same (truth label, predicted label) pair. Objects are
spatially compact, so there are far fewer runs than pixels. The runs whose truth and
predicted labels are both non-zero are grouped by pair with one sort over the runs only
(of ``(t * (top_p + 1) + p) << b | length``, one int64 a run), and their lengths summed:
that gives the intersection of every overlapping pair, and only of those. Object areas
come from the same runs. Label values need not be consecutive;
label 0 is background.

Why no assignment solver is needed at ``iou >= 0.5``
----------------------------------------------------
If IoU(t, p) = I / (|t| + |p| - I) > 0.5 then I > |t| / 2 and I > |p| / 2, so the overlap
covers more than half of each object; no other object can do the same, and the match of
each object is unique. At exactly 0.5 a tie is possible only in one shape: an object
split into two exact halves, each of which lies wholly inside it (each half then has IoU
exactly 0.5 with the whole). Those halves can overlap nothing else, so the candidate graph
is a set of stars and keeping the highest-IoU edge of each star (ties by label) is optimal.

Below 0.5
---------
Matches are no longer unique, so the candidate pairs (IoU >= threshold) are split into
connected components of the bipartite overlap graph, and each component with a choice in
it is solved exactly by ``scipy.optimize.linear_sum_assignment`` on that component's small
table: first the largest number of matches, then, among those, the largest summed IoU.
(This is the objective StarDist's ``matching`` optimizes over the whole dense table.)

Empty images
------------
Every ratio with a zero denominator is defined as 1.0: with nothing to find, nothing was
missed (recall 1.0); with nothing claimed, no claim was wrong (precision 1.0). So two empty
images score precision = recall = F1 = accuracy = 1.0, while any predicted object on an
empty truth scores precision 0 and F1 0 (recall stays 1.0). ``mean_matched_iou`` is None
when nothing matched. (StarDist uses 0.0 for every zero denominator instead.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["LabelOverlaps", "MatchResult", "label_overlaps", "match_labels", "match_overlaps"]

_INT64_MAX = np.iinfo(np.int64).max


@dataclass(frozen=True)
class LabelOverlaps:
    """Every overlapping (truth, pred) pair with its intersection, and both images' object areas.

    ``true_labels``/``true_areas`` and ``pred_labels``/``pred_areas`` list the non-zero labels
    present (sorted) and their pixel counts. ``pair_true``, ``pair_pred`` and ``intersection``
    list each pair of objects sharing at least one pixel (sorted by truth, then pred label).
    """

    true_labels: np.ndarray
    true_areas: np.ndarray
    pred_labels: np.ndarray
    pred_areas: np.ndarray
    pair_true: np.ndarray
    pair_pred: np.ndarray
    intersection: np.ndarray

    def iou(self) -> np.ndarray:
        """The IoU of each overlapping pair (same order as ``pair_true``)."""
        at = self.true_areas[np.searchsorted(self.true_labels, self.pair_true)]
        ap = self.pred_areas[np.searchsorted(self.pred_labels, self.pair_pred)]
        inter = self.intersection.astype(np.float64)
        return inter / (at + ap - inter)


@dataclass(frozen=True)
class MatchResult:
    """Counts and ratios of one matching at one IoU threshold.

    ``pairs`` is an ``(tp, 2)`` int64 array of matched (truth label, pred label), sorted by
    truth label; ``pair_iou`` holds each pair's IoU.
    """

    iou_threshold: float
    tp: int
    fp: int
    fn: int
    n_true: int
    n_pred: int
    precision: float
    recall: float
    f1: float
    accuracy: float
    mean_matched_iou: float | None
    pairs: np.ndarray
    pair_iou: np.ndarray

    def as_dict(self) -> dict[str, Any]:
        """The scalar fields (no pairs), JSON-ready."""
        return {
            "iou_threshold": self.iou_threshold,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "n_true": self.n_true,
            "n_pred": self.n_pred,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "accuracy": self.accuracy,
            "mean_matched_iou": self.mean_matched_iou,
        }


# --------------------------------------------------------------------------- input checks


def _as_labels(image: Any, what: str) -> np.ndarray:
    """The image flattened in C order, its dtype and rank checked (its values are checked on its runs)."""
    arr = np.asarray(image)
    if arr.dtype == bool:
        arr = arr.view(np.uint8)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{what}: expected an integer label image, got dtype {arr.dtype}")
    if arr.ndim < 1:
        raise ValueError(f"{what}: expected a label image with at least one dimension, got a scalar")
    return arr.ravel()


def _checked_top(runs: np.ndarray, what: str) -> int:
    """The largest label, after refusing negative ones and ones from 2**63 up.

    Every pixel's value is the value of the run it lies in, so the run values have the
    image's minimum and maximum: the check costs nothing per pixel.
    """
    if runs.dtype.kind == "i":
        low = int(runs.min())
        if low < 0:
            raise ValueError(f"{what}: labels must be >= 0 (0 is background), found {low}")
    top = int(runs.max())
    if top > _INT64_MAX:
        raise ValueError(f"{what}: labels must be below 2**63, found {top}")
    return top


_ONE = np.uint64(1)
_CHUNK = 1 << 18  # pixels of the second image compared at a time (the buffer stays in cache)
_GRID_MAX_BITS = 16  # above this many changes in some 64 pixels, np.flatnonzero is the cheaper way (measured)


def _changes(tf: np.ndarray, pf: np.ndarray) -> np.ndarray:
    """Where each run starts: pixel 0, and every pixel that differs from the one before it in
    either image. The second image's comparison is made a chunk at a time into one small buffer
    and merged in place, so no second image-sized temporary is written (or paged in)."""
    n = tf.size
    change = np.empty(n, bool)
    change[0] = True
    np.not_equal(tf[1:], tf[:-1], out=change[1:])
    buffer = np.empty(min(_CHUNK, n), bool)
    for begin in range(1, n, _CHUNK):
        end = min(n, begin + _CHUNK)
        part = buffer[: end - begin]
        np.not_equal(pf[begin:end], pf[begin - 1 : end - 1], out=part)
        change[begin:end] |= part
    return change


def _run_starts(change: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(change)``, found 64 pixels at a time where the changes are sparse enough.

    The changes are packed into 64-bit words; the k-th pass peels every word's lowest set bit
    and its index is ``popcount(bit - 1)`` (a word with no bit left gives 64, marking nothing).
    The (word, pass) grid read in C order lists the bits sorted, each word's base repeated by its
    count of bits: fewer and cheaper passes than ``np.flatnonzero``'s per-pixel scan when each
    word holds a few changes.
    """
    size = change.size
    pad = (-size) % 64
    bits = np.packbits(np.concatenate((change, np.zeros(pad, bool))) if pad else change, bitorder="little")
    words = bits.view("<u8").copy()
    counts = np.bitwise_count(words)
    passes = int(counts.max()) if words.size else 0
    if passes > _GRID_MAX_BITS:
        return np.flatnonzero(change)
    index = np.empty((words.size, passes), np.uint8)
    low = np.empty_like(words)
    for k in range(passes):
        np.negative(words, out=low)  # two's complement: low & words is the lowest set bit
        low &= words
        words ^= low
        low -= _ONE
        index[:, k] = np.bitwise_count(low)
    starts = np.repeat(np.arange(0, 64 * words.size, 64, dtype=np.int64), counts)
    starts += index[index < 64]
    return starts


def _dense_enough(top: int, count: int) -> bool:
    """Whether a table indexed by value (``top + 1`` cells) costs no more than sorting ``count`` values."""
    return top <= max(1 << 20, 4 * count)


def _group_sum(
    values: np.ndarray, lengths: np.ndarray, top: int, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct non-zero ``values`` (sorted) and the summed ``lengths`` (positive int64) of each.

    ``top`` bounds ``values``; ``weights`` is ``lengths`` as float64, when the caller has it. A
    table indexed by value when that is cheap (exact: the sums are integers far below 2**53),
    else one sort of ``(value, length)`` packed into an int64 when that cannot overflow, else
    ``np.unique``.
    """
    if values.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if _dense_enough(top, values.size):
        w = lengths.astype(np.float64) if weights is None else weights
        sums = np.bincount(values, weights=w, minlength=top + 1)
        sums[0] = 0
        present = np.flatnonzero(sums)
        return present, np.rint(sums[present]).astype(np.int64)
    nonzero = np.flatnonzero(values)
    values, lengths = values[nonzero].astype(np.int64), lengths[nonzero]
    if values.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    span = int(lengths.max()) + 1
    if top <= (_INT64_MAX - span) // span:
        packed = np.sort(values * span + lengths)
        vals = packed // span
        first = np.flatnonzero(np.concatenate(([True], vals[1:] != vals[:-1])))
        return vals[first], np.add.reduceat(packed - vals * span, first)
    uniq, inverse = np.unique(values, return_inverse=True)
    sums = np.bincount(inverse.ravel(), weights=lengths.astype(np.float64), minlength=uniq.size)
    return uniq, np.rint(sums).astype(np.int64)


def _compact(labels: np.ndarray, top: int, values: np.ndarray) -> np.ndarray:
    """The index of each of ``values`` in the sorted ``labels`` (each value is one of them)."""
    if _dense_enough(top, values.size):
        lut = np.zeros(top + 1, np.int64)
        lut[labels] = np.arange(labels.size)
        return lut[values]
    return np.searchsorted(labels, values)


def label_overlaps(truth: Any, pred: Any) -> LabelOverlaps:
    """Intersections of every overlapping object pair and every object's area, sparsely.

    Raises ValueError for non-integer images, negative labels or a shape mismatch.
    """
    tf = _as_labels(truth, "truth")
    pf = _as_labels(pred, "pred")
    t_shape, p_shape = np.shape(truth), np.shape(pred)
    if t_shape != p_shape:
        raise ValueError(f"truth has shape {t_shape} but pred has shape {p_shape}; they must be equal")
    n = tf.size
    if n == 0:
        empty = np.zeros(0, np.int64)
        return LabelOverlaps(empty, empty, empty, empty, empty, empty, empty)
    # One pass: where does the (truth, pred) pair change from one pixel to the next?
    starts = _run_starts(_changes(tf, pf))
    lengths = np.empty_like(starts)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1] = n - starts[-1]
    run_t = np.take(tf, starts)
    run_p = np.take(pf, starts)
    top_t = _checked_top(run_t, "truth")
    top_p = _checked_top(run_p, "pred")
    if run_t.dtype == np.uint64:  # below 2**63 (checked): what bincount and the int64 keys take
        run_t = run_t.view(np.int64)
    if run_p.dtype == np.uint64:
        run_p = run_p.view(np.int64)
    weights = lengths.astype(np.float64)
    true_labels, true_areas = _group_sum(run_t, lengths, top_t, weights)
    pred_labels, pred_areas = _group_sum(run_p, lengths, top_p, weights)

    both = np.flatnonzero(np.logical_and(run_t, run_p))
    if both.size == 0:
        empty = np.zeros(0, np.int64)
        return LabelOverlaps(true_labels, true_areas, pred_labels, pred_areas, empty, empty, empty)
    pair_true, pair_pred, inter = _pair_sums(
        np.take(run_t, both), np.take(run_p, both), np.take(lengths, both), top_t, top_p, true_labels, pred_labels
    )
    return LabelOverlaps(true_labels, true_areas, pred_labels, pred_areas, pair_true, pair_pred, inter)


def _pair_sums(
    run_t: np.ndarray,
    run_p: np.ndarray,
    lengths: np.ndarray,
    top_t: int,
    top_p: int,
    true_labels: np.ndarray,
    pred_labels: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each distinct (truth, pred) pair of the runs given (both labels non-zero) and its summed
    length, sorted by truth label then pred label.

    One sort of ``(t * (top_p + 1) + p) << b | length`` when that fits an int64 (``b`` bits hold
    the longest run), equal pairs then side by side; else both label sets compacted to their
    indices first, so the key cannot overflow.
    """
    span = top_p + 1
    bits = int(lengths.max()).bit_length()
    if top_t <= ((_INT64_MAX >> bits) - top_p) // span:
        key = run_t.astype(np.int64)
        key *= span
        key += run_p
        key <<= bits
        key |= lengths
        key.sort()
        pair = key >> bits
        first = np.flatnonzero(np.concatenate(([True], pair[1:] != pair[:-1])))
        key &= (1 << bits) - 1
        inter = np.add.reduceat(key, first)
        pair = pair[first]
        pair_true = pair // span
        return pair_true, pair - pair_true * span, inter
    width = pred_labels.size
    ct = _compact(true_labels, top_t, run_t)
    cp = _compact(pred_labels, top_p, run_p)
    keys, inter = _group_sum(ct * width + cp + 1, lengths, true_labels.size * width)
    keys -= 1
    return true_labels[keys // width], pred_labels[keys % width], inter


# --------------------------------------------------------------------------- matching


def _unique_matches(pt: np.ndarray, pp: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Indices of a one-to-one selection when each component is a star (threshold >= 0.5)."""
    order = np.lexsort((pp, pt, -score))  # best IoU first; ties by truth label, then pred label
    taken_t: set[int] = set()
    taken_p: set[int] = set()
    keep: list[int] = []
    for i in order.tolist():
        a, b = int(pt[i]), int(pp[i])
        if a in taken_t or b in taken_p:
            continue
        taken_t.add(a)
        taken_p.add(b)
        keep.append(i)
    return np.asarray(sorted(keep), dtype=np.int64)


def _assignment_matches(pt: np.ndarray, pp: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Indices of a maximum-cardinality, then maximum-IoU one-to-one selection, per component."""
    from scipy.optimize import linear_sum_assignment
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    ut, it = np.unique(pt, return_inverse=True)
    up, ip = np.unique(pp, return_inverse=True)
    nt, np_ = ut.size, up.size
    graph = coo_matrix((np.ones(pt.size), (it, nt + ip)), shape=(nt + np_, nt + np_))
    _, comp = connected_components(graph, directed=False)
    edge_comp = comp[it]
    keep: list[np.ndarray] = []
    order = np.argsort(edge_comp, kind="stable")
    bounds = np.flatnonzero(np.diff(edge_comp[order])) + 1
    for group in np.split(order, bounds):
        if group.size == 1:
            keep.append(group)
            continue
        gt, gt_idx = np.unique(it[group], return_inverse=True)
        gp, gp_idx = np.unique(ip[group], return_inverse=True)
        k = min(gt.size, gp.size)
        # cost: every match is worth 1, plus its IoU scaled so the sum cannot outweigh one match
        cost = np.zeros((gt.size, gp.size))
        cost[gt_idx, gp_idx] = -(1.0 + score[group] / (2.0 * k))
        rows, cols = linear_sum_assignment(cost)
        lookup = {(int(a), int(b)): int(e) for a, b, e in zip(gt_idx, gp_idx, group, strict=True)}
        chosen = [lookup[(int(r), int(c))] for r, c in zip(rows, cols, strict=True) if (int(r), int(c)) in lookup]
        keep.append(np.asarray(chosen, dtype=np.int64))
    if not keep:
        return np.zeros(0, np.int64)
    return np.sort(np.concatenate(keep))


def _has_repeats(sorted_values: np.ndarray) -> bool:
    return bool(np.any(sorted_values[1:] == sorted_values[:-1]))


def _ratio(num: int, den: int) -> float:
    return 1.0 if den == 0 else num / den


def match_labels(truth: Any, pred: Any, iou: float = 0.5) -> MatchResult:
    """Match objects of two label images of equal shape at an IoU threshold (``0 < iou <= 1``).

    A pair matches when its IoU is at least ``iou``; each object matches at most once.
    See the module docstring for the method, the conventions for empty images and why
    thresholds of 0.5 and above need no assignment solver.
    """
    thr = float(iou)
    if not (0.0 < thr <= 1.0):
        raise ValueError(f"iou threshold must be in (0, 1], got {iou!r}")
    return match_overlaps(label_overlaps(truth, pred), thr)


def match_overlaps(ov: LabelOverlaps, iou: float) -> MatchResult:
    """:func:`match_labels` on overlaps counted once (:func:`label_overlaps`), so a sweep over
    thresholds counts them once. ``iou`` must be in ``(0, 1]``."""
    thr = float(iou)
    if not (0.0 < thr <= 1.0):
        raise ValueError(f"iou threshold must be in (0, 1], got {iou!r}")
    n_true = int(ov.true_labels.size)
    n_pred = int(ov.pred_labels.size)
    score = ov.iou()
    cand = np.flatnonzero(score >= thr)
    pt, pp, sc = ov.pair_true[cand], ov.pair_pred[cand], score[cand]
    if thr >= 0.5:
        # distinct when no two neighbours in sorted order are equal (sorting a few thousand labels
        # costs microseconds; the pairs' own order is not relied on)
        unique = not _has_repeats(np.sort(pt)) and not _has_repeats(np.sort(pp))
        chosen = np.arange(pt.size) if unique else _unique_matches(pt, pp, sc)
    else:
        chosen = _assignment_matches(pt, pp, sc) if pt.size else np.zeros(0, np.int64)
    pairs = np.stack([pt[chosen], pp[chosen]], axis=1).astype(np.int64) if chosen.size else np.zeros((0, 2), np.int64)
    pair_iou = sc[chosen].astype(np.float64)
    tp = int(chosen.size)
    fp = n_pred - tp
    fn = n_true - tp
    return MatchResult(
        iou_threshold=thr,
        tp=tp,
        fp=fp,
        fn=fn,
        n_true=n_true,
        n_pred=n_pred,
        precision=_ratio(tp, n_pred),
        recall=_ratio(tp, n_true),
        f1=_ratio(2 * tp, 2 * tp + fp + fn),
        accuracy=_ratio(tp, tp + fp + fn),
        mean_matched_iou=float(pair_iou.mean()) if tp else None,
        pairs=pairs,
        pair_iou=pair_iou,
    )
