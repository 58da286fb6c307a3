"""The sparse overlap counting of ``imagebench.matching`` as it was before the packed-word
pipeline (the version of issue 29's measurements): a test oracle only. ``label_overlaps_v1`` must
give field for field what ``imagebench.matching.label_overlaps`` gives."""

from __future__ import annotations

from typing import Any

import numpy as np

from imagebench.matching import LabelOverlaps

_INT64_MAX = np.iinfo(np.int64).max


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
_GRID_MAX_BITS = 16  # above this many changes in some 64 pixels, np.flatnonzero is the cheaper way (measured)


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


def label_overlaps_v1(truth: Any, pred: Any) -> LabelOverlaps:
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
    change = np.empty(n, bool)
    change[0] = True
    np.not_equal(tf[1:], tf[:-1], out=change[1:])
    change[1:] |= np.not_equal(pf[1:], pf[:-1])
    starts = _run_starts(change)
    del change
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

    both = np.flatnonzero((run_t != 0) & (run_p != 0))
    if both.size == 0:
        empty = np.zeros(0, np.int64)
        return LabelOverlaps(true_labels, true_areas, pred_labels, pred_areas, empty, empty, empty)
    # Compact both label sets so one int64 key per run cannot overflow; key 0 stays free.
    width = pred_labels.size
    ct = _compact(true_labels, top_t, np.take(run_t, both))
    cp = _compact(pred_labels, top_p, np.take(run_p, both))
    keys, inter = _group_sum(ct * width + cp + 1, np.take(lengths, both), true_labels.size * width)
    keys -= 1
    pair_true = true_labels[keys // width]
    pair_pred = pred_labels[keys % width]
    return LabelOverlaps(true_labels, true_areas, pred_labels, pred_areas, pair_true, pair_pred, inter)
