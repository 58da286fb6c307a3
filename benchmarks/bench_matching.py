"""Benchmark: imagebench.matching.match_labels against StarDist's ``stardist.matching.matching``.

Two workloads (defaults): a 2048 x 2048 image with ~5,000 objects and a 256^3 volume with
~10,000 objects. For each, a truth label image and a prediction that resembles it (centres
jittered, radii changed, ~5% of objects dropped, ~5% added, labels shuffled onto
non-consecutive values). Both implementations must report the same TP/FP/FN at IoU 0.5; the
script prints the median time of each over ``--repeats`` runs and the speed ratio
(StarDist / imagebench; the target is >= 10x).

The second anchor is the physical limit: one elementwise pass over both label images
(``np.not_equal(truth, pred)``: every pixel of each read once, one byte written per pixel),
timed the same way; the script prints imagebench's time as a multiple of it (target <= 5x).
It prints beside it ``np.add(truth, pred)``, a pass that writes an image of the labels' dtype,
for reference only: the target is taken against the cheaper pass.

Each figure is printed with the load average beside it (``os.getloadavg``), and each time both
as wall clock (the figure) and as this thread's CPU time (``time.thread_time``: on a shared machine
it leaves out the time the process waited for a core, not the contention for memory).

How StarDist is brought in: ``stardist.matching`` as installed (the ``peers`` extra of
pyproject.toml), else, without installing it or TensorFlow:

* ``pip download stardist==0.9.2 --no-deps`` into a temporary folder; only ``stardist/matching.py``
  is read out of the wheel and loaded as a standalone module (the package ``__init__`` is never
  imported).
* ``numba``: StarDist's overlap table is a ``@numba.jit`` loop. If numba is not importable here
  it is pip-installed (with llvmlite, ``--no-deps``) into the same temporary folder, because a
  pure-Python fallback loop would make the comparison meaningless.
* ``csbdeep.utils._raise`` is the only name matching.py takes from csbdeep; it is shimmed with
  the one-line function it is (``def _raise(e): raise e``) rather than installing csbdeep.
* tqdm, scipy and scikit-image are already dependencies of this environment.

The temporary folder is removed at the end. Run: ``python benchmarks/bench_matching.py``
(``--quick`` for a small smoke run).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage as ndi

from imagebench.matching import match_labels

STARDIST = "stardist==0.9.2"


# --------------------------------------------------------------------------- loading stardist.matching


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "-q"], check=True)


def load_stardist_matching(tmp: Path) -> types.ModuleType:
    try:
        import stardist.matching as installed
    except ImportError:
        pass
    else:
        print(f"stardist.matching as installed: {installed.__file__}", file=sys.stderr)
        return installed
    _pip("download", STARDIST, "--no-deps", "--only-binary=:all:", "-d", str(tmp))
    wheel = next(tmp.glob("stardist-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read("stardist/matching.py")
    path = tmp / "stardist_matching.py"
    path.write_bytes(source)
    try:
        import numba  # noqa: F401
    except ImportError:
        site = tmp / "site"
        _pip("install", "--no-deps", "--target", str(site), "numba", "llvmlite")
        sys.path.insert(0, str(site))
    if "csbdeep.utils" not in sys.modules:
        try:
            import csbdeep.utils  # noqa: F401
        except ImportError:

            def _raise(e: BaseException) -> None:
                raise e

            csbdeep = types.ModuleType("csbdeep")
            utils = types.ModuleType("csbdeep.utils")
            utils._raise = _raise  # type: ignore[attr-defined]
            csbdeep.utils = utils  # type: ignore[attr-defined]
            sys.modules["csbdeep"] = csbdeep
            sys.modules["csbdeep.utils"] = utils
    spec = importlib.util.spec_from_file_location("stardist_matching", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    print(f"stardist.matching loaded from {wheel.name}", file=sys.stderr)
    return module


# --------------------------------------------------------------------------- workloads


def blobs(shape: tuple[int, ...], centres: np.ndarray, radii: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each pixel goes to its nearest centre if within that centre's radius (a Voronoi-clipped ball)."""
    seeds = np.ones(shape, bool)
    idx = tuple(np.clip(centres.round().astype(int), 0, np.array(shape) - 1).T)
    seeds[idx] = False
    owner = np.zeros(shape, np.int64)
    owner[idx] = np.arange(1, len(centres) + 1)
    dist, nearest = ndi.distance_transform_edt(seeds, return_indices=True)
    own = owner[tuple(nearest)]
    del nearest
    lut_r = np.concatenate(([0.0], radii))
    lut_v = np.concatenate(([0], values)).astype(np.int64)
    inside = dist <= lut_r[own]
    return np.where(inside, lut_v[own], 0)


def workload(rng: np.random.Generator, shape: tuple[int, ...], n: int) -> tuple[np.ndarray, np.ndarray]:
    ndim = len(shape)
    spacing = 0.97 * (np.prod(shape) / n) ** (1.0 / ndim)  # a little dense, so the grid has >= n sites
    axes = [np.arange(spacing / 2, s, spacing) for s in shape]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, ndim)
    grid = grid[rng.permutation(len(grid))[:n]]
    centres = grid + rng.uniform(-0.15, 0.15, grid.shape) * spacing
    radii = rng.uniform(0.3, 0.5, len(centres)) * spacing
    truth = blobs(shape, centres, radii, np.arange(1, len(centres) + 1))
    keep = rng.random(len(centres)) > 0.05
    extra = rng.uniform(0, 1, (int(0.05 * n), ndim)) * (np.array(shape) - 1)
    pc = np.concatenate([centres[keep] + rng.normal(0, 0.08 * spacing, (keep.sum(), ndim)), extra])
    pr = np.concatenate([radii[keep] * rng.uniform(0.8, 1.2, keep.sum()), rng.uniform(0.3, 0.5, len(extra)) * spacing])
    values = rng.choice(50 * len(pc), size=len(pc), replace=False) + 1  # shuffled, non-consecutive
    pred = blobs(shape, pc, pr, values)
    return truth.astype(np.int32), pred.astype(np.int32)


# --------------------------------------------------------------------------- timing


def median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any, float]:
    """(median wall seconds, the last result, median CPU seconds of this thread) over ``repeats`` runs."""
    walls, cpus = [], []
    result = None
    for _ in range(repeats):
        c0, t0 = time.thread_time(), time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.thread_time() - c0)
    return statistics.median(walls), result, statistics.median(cpus)


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def run(
    name: str, truth: np.ndarray, pred: np.ndarray, sd: types.ModuleType, repeats: int, sd_repeats: int
) -> tuple[float, float]:
    """(stardist / imagebench, imagebench / one elementwise pass) on one workload."""
    n_true = np.unique(truth).size - 1
    n_pred = np.unique(pred).size - 1
    print(f"\n{name}: shape {truth.shape}, {n_true} truth objects, {n_pred} predicted objects  ({load()})")
    pass_t, _, pass_c = median_time(lambda: np.not_equal(truth, pred), 3 * repeats)
    add_t, _, _ = median_time(lambda: np.add(truth, pred), 3 * repeats)
    ours_t, ours, ours_c = median_time(lambda: match_labels(truth, pred, iou=0.5), repeats)
    theirs_t, theirs, _ = median_time(lambda: sd.matching(truth, pred, thresh=0.5), sd_repeats)
    same = (ours.tp, ours.fp, ours.fn) == (theirs.tp, theirs.fp, theirs.fn)
    print(f"  imagebench  tp={ours.tp} fp={ours.fp} fn={ours.fn}  median {ours_t * 1e3:9.1f} ms over {repeats}")
    print(
        f"  stardist    tp={theirs.tp} fp={theirs.fp} fn={theirs.fn}  median {theirs_t * 1e3:9.1f} ms over {sd_repeats}"
    )
    ratio = theirs_t / ours_t
    floor = ours_t / pass_t
    print(f"  one pass    np.not_equal(truth, pred)  median {pass_t * 1e3:9.1f} ms over {3 * repeats}")
    print(f"  (for reference: np.add(truth, pred)   median {add_t * 1e3:9.1f} ms, imagebench {ours_t / add_t:.1f}x)")
    print(f"  counts agree: {same}    speed ratio stardist/imagebench: {ratio:.1f}x")
    print(f"  imagebench / one elementwise pass: {floor:.1f}x (target <= 5x)  ({load()})")
    print(f"  the same in CPU time of this thread: {ours_c / pass_c:.1f}x ({ours_c * 1e3:.1f} / {pass_c * 1e3:.1f} ms)")
    if not same:
        raise SystemExit(f"{name}: the two implementations disagree")
    return ratio, floor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of imagebench per workload")
    parser.add_argument("--stardist-repeats", type=int, default=3, help="timed runs of stardist per workload")
    parser.add_argument("--quick", action="store_true", help="small workloads (512^2 / 64^3) for a smoke run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    size2, n2, size3, n3 = (512, 300, 64, 150) if args.quick else (2048, 5000, 256, 10000)
    with tempfile.TemporaryDirectory(prefix="imagebench-bench-") as tmp:
        sd = load_stardist_matching(Path(tmp))
        for shape in ((8, 8), (8, 8, 8)):  # numba compiles here, for 2D and 3D, outside the timed runs
            warm = np.zeros(shape, np.int32)
            warm[(slice(2, 5),) * len(shape)] = 1
            sd.matching(warm, warm)
            match_labels(warm, warm)
        t2, p2 = workload(rng, (size2, size2), n2)
        r2, f2 = run("2D", t2, p2, sd, args.repeats, args.stardist_repeats)
        del t2, p2
        t3, p3 = workload(rng, (size3,) * 3, n3)
        r3, f3 = run("3D", t3, p3, sd, args.repeats, args.stardist_repeats)
    print(f"\nspeed ratio (target >= 10x): 2D {r2:.1f}x, 3D {r3:.1f}x")
    print(f"imagebench / one elementwise pass over both images (target <= 5x): 2D {f2:.1f}x, 3D {f3:.1f}x")
    print(load())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
