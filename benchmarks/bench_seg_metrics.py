"""Benchmark: imagebench's instance measures over IoU 0.5:0.05:0.95 against StarDist's.

Workloads: the DSB 2018 fixture's label image (src/imagebench/data/fixtures/segment-nuclei/dsb2018)
against a dilated copy, and ``--n`` synthetic images (``--size`` px square, ~``--objects``
objects each) against perturbed copies (shifted, some objects dropped, one added, relabelled).
For each image both sides compute the ten thresholds' measures: imagebench with
:func:`imagebench.metrics.instance_scores` (overlaps counted once, matched per threshold),
StarDist with ``stardist.matching.matching(y_true, y_pred, thresh=[0.5, ..., 0.95])`` (its own
sweep), and over the set with ``matching_dataset``. TP/FP/FN must agree at every threshold; the
script prints the median seconds of each over ``--repeats`` runs and the ratio StarDist / imagebench.

Needs stardist (the ``test`` extra). Run: ``python benchmarks/bench_seg_metrics.py`` (``--quick``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from imagebench.metrics import AP_THRESHOLDS, instance_scores

DSB = Path(__file__).resolve().parents[1] / "src/imagebench/data/fixtures/segment-nuclei/dsb2018/mask2d.tif"


def _synthetic(rng: np.random.Generator, size: int, objects: int) -> np.ndarray:
    seeds = np.zeros((size, size), np.int32)
    seeds[rng.integers(0, size, objects), rng.integers(0, size, objects)] = np.arange(1, objects + 1)
    dist, nearest = ndi.distance_transform_edt(seeds == 0, return_indices=True)
    labels = seeds[tuple(nearest)]
    labels[dist > 0.35 * size / np.sqrt(objects)] = 0
    return labels


def _perturbed(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    pred = np.roll(labels, (int(rng.integers(-2, 3)), int(rng.integers(-2, 3))), axis=(0, 1))
    present = np.unique(pred[pred > 0])
    pred[np.isin(pred, rng.choice(present, size=max(1, present.size // 20), replace=False))] = 0
    pred[:6, :6] = pred.max() + 1
    perm = rng.permutation(4 * int(pred.max()) + 4)[: int(pred.max()) + 1]
    perm[0] = 0
    return perm[pred].astype(np.int32)


def _median(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    import tifffile
    from stardist.matching import matching, matching_dataset

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8, help="synthetic images")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--objects", type=int, default=1500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2 images of 256 px, 100 objects, 1 repeat")
    a = ap.parse_args()
    if a.quick:
        a.n, a.size, a.objects, a.repeats = 2, 256, 100, 1
    rng = np.random.default_rng(0)
    dsb = tifffile.imread(DSB).astype(np.int32)
    truths = [dsb] + [_synthetic(rng, a.size, a.objects) for _ in range(a.n)]
    preds = [ndi.grey_dilation(dsb, size=3)] + [_perturbed(rng, t) for t in truths[1:]]
    thresholds = list(AP_THRESHOLDS)

    for t, p in zip(truths, preds, strict=True):  # agreement first
        ours = instance_scores(t, p)
        theirs = matching(t, p, thresh=thresholds)
        for s, r in zip(ours.per_threshold, theirs, strict=True):
            assert (s.tp, s.fp, s.fn) == (r.tp, r.fp, r.fn), (s.thresh, s, r)
    ours_ds = [instance_scores(t, p) for t, p in zip(truths, preds, strict=True)]
    theirs_ds = matching_dataset(truths, preds, thresh=thresholds, show_progress=False)
    for i, r in enumerate(theirs_ds):
        assert sum(o.per_threshold[i].tp for o in ours_ds) == r.tp, thresholds[i]

    ib = [_median(lambda t=t, p=p: instance_scores(t, p), a.repeats) for t, p in zip(truths, preds, strict=True)]
    sd = [
        _median(lambda t=t, p=p: matching(t, p, thresh=thresholds), a.repeats)
        for t, p in zip(truths, preds, strict=True)
    ]
    ib_ds = _median(lambda: [instance_scores(t, p) for t, p in zip(truths, preds, strict=True)], a.repeats)
    sd_ds = _median(lambda: matching_dataset(truths, preds, thresh=thresholds, show_progress=False), a.repeats)
    print(
        f"TP/FP/FN agree at IoU {thresholds[0]}..{thresholds[-1]} on {len(truths)} images (DSB fixture + {a.n} synthetic)"
    )
    print(
        f"DSB fixture {dsb.shape}: imagebench {ib[0]:.4f} s, stardist.matching {sd[0]:.4f} s, ratio {sd[0] / ib[0]:.1f}x"
    )
    if a.n:
        ratios = [s / i for s, i in zip(sd[1:], ib[1:], strict=True)]
        print(
            f"synthetic {a.size}^2, ~{a.objects} objects: median imagebench {statistics.median(ib[1:]):.4f} s, "
            f"stardist.matching {statistics.median(sd[1:]):.4f} s, median ratio {statistics.median(ratios):.1f}x"
        )
    print(f"whole set: imagebench {ib_ds:.3f} s, stardist.matching_dataset {sd_ds:.3f} s, ratio {sd_ds / ib_ds:.1f}x")


if __name__ == "__main__":
    main()
