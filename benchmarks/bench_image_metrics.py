"""Benchmark: imagebench's PSNR, SSIM and NRMSE against scikit-image's ``skimage.metrics`` on the same inputs.

Workloads: the packaged ``denoise/dsb2018-nuclei`` fixture's clean image against its noisy copy
(256 x 256), and ``--n`` synthetic images of ``--size`` px square (a smooth random field against a
noisy copy) in float32, uint16 and uint8. Both sides compute the three measures at one declared data
range: imagebench with :func:`imagebench.metrics.image_scores` (its checks, the float64 cast and the
three calls), scikit-image with ``peak_signal_noise_ratio``, ``structural_similarity`` and
``normalized_root_mse`` called directly on the float64 arrays. The values must agree to 1e-12
(imagebench's implementation is scikit-image's); the script prints the median seconds of each over
``--repeats`` runs and the ratio imagebench / scikit-image (the cost of the checks; about 1).

Run: ``python benchmarks/bench_image_metrics.py`` (``--quick``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from imagebench.metrics import image_scores

FIXTURE = Path(__file__).resolve().parents[1] / "src/imagebench/data/fixtures/denoise/dsb2018-nuclei"


def _median(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _skimage(truth: np.ndarray, pred: np.ndarray, r: float) -> tuple[float, float, float]:
    from skimage.metrics import normalized_root_mse, peak_signal_noise_ratio, structural_similarity

    t, p = truth.astype(np.float64), pred.astype(np.float64)
    return (
        peak_signal_noise_ratio(t, p, data_range=r),
        structural_similarity(t, p, data_range=r),
        normalized_root_mse(t, p),
    )


def _pairs(n: int, size: int) -> list[tuple[str, np.ndarray, np.ndarray, float]]:
    out = [
        ("denoise/dsb2018-nuclei 256^2 float32", np.load(FIXTURE / "clean.npy"), np.load(FIXTURE / "noisy.npy"), 200.0)
    ]
    rng = np.random.default_rng(0)
    for i in range(n):
        field = ndi.gaussian_filter(rng.normal(size=(size, size)), 4.0)
        field = (field - field.min()) / (field.max() - field.min())
        noisy = np.clip(field + rng.normal(0, 0.05, field.shape), 0, 1)
        kind = ("float32", "uint16", "uint8")[i % 3]
        top = {"float32": 1.0, "uint16": 65535.0, "uint8": 255.0}[kind]
        out.append((f"synthetic {size}^2 {kind}", (field * top).astype(kind), (noisy * top).astype(kind), top))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=6, help="synthetic images (default 6)")
    ap.add_argument("--size", type=int, default=1024, help="their side, px (default 1024)")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each, the median kept (default 5)")
    ap.add_argument("--quick", action="store_true", help="3 images of 256 px, 3 repeats")
    args = ap.parse_args()
    if args.quick:
        args.n, args.size, args.repeats = 3, 256, 3
    ratios = []
    print(f"{'workload':40s} {'imagebench s':>13s} {'skimage s':>10s} {'ratio':>6s}")
    for name, truth, pred, r in _pairs(args.n, args.size):
        ours = image_scores(truth, pred, data_range=r)
        theirs = _skimage(truth, pred, r)
        for got, want in zip((ours.psnr, ours.ssim, ours.nrmse), theirs, strict=True):
            assert got is not None and abs(got - want) <= 1e-12 * max(1.0, abs(want)), (name, got, want)
        mine = _median(lambda t=truth, p=pred, r=r: image_scores(t, p, data_range=r), args.repeats)
        peer = _median(lambda t=truth, p=pred, r=r: _skimage(t, p, r), args.repeats)
        ratios.append(mine / peer)
        print(f"{name:40s} {mine:13.4f} {peer:10.4f} {mine / peer:6.2f}")
    print(
        f"values identical (1e-12) on {len(ratios)} pairs; median ratio imagebench / skimage {statistics.median(ratios):.2f}"
    )


if __name__ == "__main__":
    main()
