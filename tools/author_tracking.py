"""Author the curated tracking fixture: real DSB 2018 nuclei moved along recorded trajectories.

The StarDist 0.9.2 wheel ships one DSB 2018 fluorescence image of nuclei and its instance
annotation (``stardist/data/images/img2d.tif``, ``mask2d.tif``; ``tools/sources.stardist_wheel``).
This script cuts real nuclei out of it (image pixels and annotated mask, each whole and away
from the border), halves them (so they are the size the tracking cases' reference was tuned on),
and moves them through a movie along trajectories recorded from the tracking cases' simulator
(:func:`imagebench.cases.tracking_movies.simulate`: a persistent random walk, divisions, entries
and exits across the border, a fixed seed). Each simulated cell carries one real nucleus
(daughters carry two other real nuclei, shrunk to the daughters' size and growing back), turned
by the cell's orientation; they are pasted in label order on a flat background at the real
image's background level with Gaussian noise of its measured spread. The truth is the pasted
masks made a CTC movie (``tracks_from_labels``) and its lineage table. It writes one case,
``tracking/dsb2018-nuclei`` (``movie.npy``, ``labels.npy``, ``lineage.npy``), through
``imagebench.fixtures.tree``.

Usage::

    python tools/author_tracking.py                  # into src/imagebench/data/fixtures
    python tools/author_tracking.py --out /some/tree [--wheel path/to/stardist-*.whl]

Re-running it reproduces every file byte for byte (a fixed seed, deterministic resampling).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))
if str(REPO / "src") not in sys.path:
    sys.path.append(str(REPO / "src"))

import sources  # noqa: E402

SKILL = "tracking"
CASE_ID = "dsb2018-nuclei"
CASES: tuple[tuple[str, str], ...] = ((SKILL, CASE_ID),)
MEMBERS = {"image": "stardist/data/images/img2d.tif", "labels": "stardist/data/images/mask2d.tif"}
CITATION = (
    "Caicedo et al., Nucleus segmentation across imaging experiments: the 2018 Data Science Bowl, "
    "Nature Methods 16, 1247–1253 (2019)"
)
#: the recorded motion (the simulator's parameters) and the rendering
MOTION = {
    "seed": 2027,
    "frames": 24,
    "shape": (128, 128),
    "cells": 7,
    "radius": 6.0,
    "speed": 1.5,
    "cycle": (8, 16),
    "arrivals": 0.12,
    "deform": 0.0,
    "max_cells": 24,
    "spacing": 1.6,
}
SCALE = 0.5  # real nuclei are about 12 px in radius; halved, the size the reference was tuned on
AREA = (200, 700)  # the annotated nuclei cut out: pixels (before halving)


def nuclei(image: np.ndarray, labels: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(pixels, mask) of each whole annotated nucleus of ``AREA`` pixels away from the border, halved."""
    from scipy import ndimage as ndi
    from skimage.transform import rescale

    out = []
    for k, box in enumerate(ndi.find_objects(labels), start=1):
        if box is None:
            continue
        (y0, y1), (x0, x1) = (box[0].start, box[0].stop), (box[1].start, box[1].stop)
        if y0 < 2 or x0 < 2 or y1 > labels.shape[0] - 2 or x1 > labels.shape[1] - 2:
            continue
        mask = labels[box] == k
        if not AREA[0] <= int(mask.sum()) <= AREA[1]:
            continue
        pixels = image[box].astype(np.float64)
        small = rescale(pixels, SCALE, order=1, anti_aliasing=True, preserve_range=True)
        small_mask = rescale(mask.astype(np.float64), SCALE, order=1, anti_aliasing=False) > 0.5
        out.append((small, small_mask))
    return out


def paste(
    history: list, patches: list[tuple[np.ndarray, np.ndarray]], assigned: dict[int, int], shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """The label movie and the nuclei's pixels (0 elsewhere): each cell's nucleus turned by its
    orientation, scaled by its radius over the simulator's full one, centred on it, pasted in label order."""
    from skimage.transform import rescale, rotate

    frames = len(history)
    labels = np.zeros((frames, *shape), np.uint16)
    signal = np.zeros((frames, *shape), np.float64)
    for t, cells in enumerate(history):
        for cell in sorted(cells, key=lambda c: c.label):
            pixels, mask = patches[assigned[cell.label]]
            factor = cell.radius / MOTION["radius"]
            angle = float(np.degrees(cell.theta))
            pix = rotate(
                rescale(pixels, factor, order=1, preserve_range=True), angle, order=1, resize=True, preserve_range=True
            )
            msk = rotate(rescale(mask.astype(np.float64), factor, order=1), angle, order=1, resize=True) > 0.5
            h, w = msk.shape
            y0, x0 = int(round(cell.y - h / 2)), int(round(cell.x - w / 2))
            ys, xs = slice(max(y0, 0), min(y0 + h, shape[0])), slice(max(x0, 0), min(x0 + w, shape[1]))
            if ys.start >= ys.stop or xs.start >= xs.stop:
                continue
            sub = (slice(ys.start - y0, ys.stop - y0), slice(xs.start - x0, xs.stop - x0))
            m = msk[sub]
            labels[t, ys, xs][m] = cell.label
            signal[t, ys, xs][m] = pix[sub][m]
    return labels, signal


def main(argv: list[str] | None = None) -> int:
    args = sources.author_parser(__doc__, wheel=True).parse_args(argv)

    import tifffile

    from imagebench.cases.tracking_movies import simulate
    from imagebench.fixtures import tree
    from imagebench.tracking.synthetic import tracks_from_labels

    wheel = args.wheel if args.wheel is not None else sources.stardist_wheel()
    raw = sources.stardist_members(MEMBERS, wheel)
    image = tifffile.imread(io.BytesIO(raw["image"]))
    annotation = tifffile.imread(io.BytesIO(raw["labels"]))
    pool = nuclei(image, annotation)
    background = image[annotation == 0].astype(np.float64)
    level = float(np.median(background))
    spread = float(1.4826 * np.median(np.abs(background - level)))

    rng = np.random.default_rng(MOTION["seed"])
    params = {k: v for k, v in MOTION.items() if k != "seed"}
    history, parents = simulate(rng, **params)  # type: ignore[arg-type]
    labels_seen = sorted({c.label for cells in history for c in cells})
    assigned = {label: int(rng.integers(len(pool))) for label in labels_seen}
    raw_labels, signal = paste(history, pool, assigned, MOTION["shape"])
    truth = tracks_from_labels(raw_labels, parents)
    noise = rng.normal(0.0, spread, size=signal.shape)
    movie = np.where(truth.labels > 0, signal, level) + noise
    movie = np.clip(np.round(movie), 0, 65535).astype(np.uint16)
    table = truth.lineage.as_array()
    divisions = int(sum(1 for p in set(table[:, 3].tolist()) if p and int((table[:, 3] == p).sum()) >= 2))

    folder = args.out / SKILL / CASE_ID
    sources.save_npy(folder / "movie.npy", movie)
    sources.save_npy(folder / "labels.npy", truth.labels.astype(np.uint16))
    sources.save_npy(folder / "lineage.npy", table.astype(np.int64))
    frames, height, width = movie.shape
    tree.write_case_layout(
        args.out, SKILL, CASE_ID,
        about=(
            f"{frames} frames of {height}x{width}: real DSB 2018 nuclei moved along recorded trajectories, "
            f"{len(truth.lineage.tracks)} tracks, {divisions} divisions"
        ),
        data={"movie": "movie.npy"}, truth={"labels": "labels.npy", "lineage": "lineage.npy"},
    )  # fmt: skip
    motion = ", ".join(f"{k}={v}" for k, v in MOTION.items())
    tree.write_manifest_entry(
        args.out, SKILL, CASE_ID,
        provenance=(
            f"Real nuclei from the DSB 2018 image and annotation of the stardist {sources.STARDIST_VERSION} wheel "
            f"{wheel.name} (sha256 {sources.sha256(wheel.read_bytes())}): {MEMBERS['image']} (sha256 "
            f"{sources.sha256(raw['image'])}) and {MEMBERS['labels']} (sha256 {sources.sha256(raw['labels'])}). "
            f"{len(pool)} whole annotated nuclei of {AREA[0]}-{AREA[1]} px away from the border cut out (pixels and "
            f"mask) and rescaled by {SCALE} (skimage.transform.rescale, linear, anti-aliased; masks thresholded at "
            f"0.5). Trajectories recorded from imagebench.cases.tracking_movies.simulate({motion}) with numpy "
            f"default_rng(seed={MOTION['seed']}); each cell then drew one of the nuclei from the same generator "
            "(daughters their own), scaled by the cell's radius over 6 px and turned by its orientation "
            "(skimage.transform.rotate, linear), pasted centred on it in label order (a later label over an "
            f"earlier one). Background: the image's background median {level:g} everywhere outside the nuclei; "
            f"Gaussian noise of its robust spread {spread:.3f} (1.4826 x MAD) over every pixel, drawn last; "
            "rounded and clipped to uint16 -> movie.npy. Truth: the pasted masks made a CTC movie by "
            "imagebench.tracking.synthetic.tracks_from_labels -> labels.npy, and its lineage table (label, "
            f"begin, end, parent) -> lineage.npy; {len(truth.lineage.tracks)} tracks, {divisions} divisions. "
            "Authored by tools/author_tracking.py."
        ),
        citation=CITATION,
        files={"movie.npy": ["movie"], "labels.npy": ["labels"], "lineage.npy": ["lineage"]},
    )  # fmt: skip
    print(f"author: wrote {folder} ({frames} frames, {len(truth.lineage.tracks)} tracks, {divisions} divisions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
