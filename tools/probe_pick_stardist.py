"""Why the first attempt at a curated ``pick-a-nucleus`` case on StarDist's real 3D stack failed: the record, re-runnable.

Reads the packaged byte copies of the StarDist 0.9.2 wheel's ``img3d.tif`` / ``mask3d.tif``
(``segment-nuclei-3d/stardist-3d``) and prints, from the annotation alone:

1. the largest nuclei and which are cut by a face of the stack (the largest, 59, leads the next,
   81, by 0.6%: "the largest nucleus" is not a clear question on the whole stack);
2. the truth-only crop rules tried (full z, every 40 x 40 (y, x) window; the window maximising
   largest / second-largest, the largest (a) whole in the window or (b) counted by its voxels in
   the window; the window's centre voxel outside it): both choose the window at (y, x) = (5, 12),
   nucleus 81, a 1.48x margin;

and then, on the pixels, where each reference tried puts its voxel (the truth is 81 every time):

- A. ``segment_nuclei_3d`` with the parameters of ``segment-nuclei-3d`` (set on the synthetic
  case), the largest object, its deepest voxel (distance transform, sampling 2, 1, 1, the volume's
  faces counted as boundary); whole stack, its largest object touching no face; and the window;
- B. the same mask split by a watershed on the smoothed intensity, markers at intensity maxima
  (the pipeline's own sigma and marker distance), largest object touching no face;
- C. ``blob_log`` (sigma z 1-3, y/x 2-6, threshold 0.05 of the normalised stack; first guesses,
  10/10 on the synthetic volume's seeds 0-9), the largest blob whose extent touches no face.

None lands in 81: in the image, 81 (mean 217) sits on 146 (mean 260, cut by the last z slice)
and the boundary between them is a dip of about 2% in the smoothed intensity, so every method
tried merges the two or misses 81. The second attempt (``imagebench.cases.pick``, designed on a
synthetic case built to reproduce this) does land in 81; see docs/cases.md. Usage: ``python tools/probe_pick_stardist.py`` (a few seconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "src") not in sys.path:
    sys.path.append(str(REPO / "src"))

STACK = REPO / "src" / "imagebench" / "data" / "fixtures" / "segment-nuclei-3d" / "stardist-3d"
WINDOW = 40


def faces(labels: np.ndarray) -> set[int]:
    sides = [labels[0], labels[-1], labels[:, 0], labels[:, -1], labels[:, :, 0], labels[:, :, -1]]
    return {int(v) for side in sides for v in np.unique(side)} - {0}


def windows(labels: np.ndarray, whole: bool) -> list[tuple[float, int, int, int]]:
    out = []
    for y0 in range(labels.shape[1] - WINDOW + 1):
        for x0 in range(labels.shape[2] - WINDOW + 1):
            crop = labels[:, y0 : y0 + WINDOW, x0 : x0 + WINDOW]
            ids, n = np.unique(crop[crop > 0], return_counts=True)
            order = np.argsort(-n, kind="stable")
            top = int(ids[order[0]])
            if (whole and top in faces(crop)) or crop[tuple(s // 2 for s in crop.shape)] == top:
                continue
            out.append((float(n[order[0]] / n[order[1]]), y0, x0, top))
    return sorted(out, key=lambda t: (-t[0], t[1], t[2]))


def deepest(mask: np.ndarray) -> tuple[int, ...]:
    from scipy import ndimage as ndi

    depth = ndi.distance_transform_edt(np.pad(mask, 1), sampling=(2.0, 1.0, 1.0))[1:-1, 1:-1, 1:-1]
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(depth)), depth.shape))


def largest(seg: np.ndarray, whole: bool) -> np.ndarray:
    ids, n = np.unique(seg[seg > 0], return_counts=True)
    cut = faces(seg) if whole else set()
    keep = [(c, i) for i, c in zip(ids, n, strict=True) if int(i) not in cut]
    return seg == max(keep)[1]


def by_intensity(volume: np.ndarray, pipeline: dict) -> np.ndarray:
    from scipy import ndimage as ndi
    from skimage.feature import peak_local_max
    from skimage.segmentation import watershed

    from imagebench.cases.segmentation3d import segment_nuclei_3d

    mask = segment_nuclei_3d(volume, **pipeline) > 0
    smooth = ndi.gaussian_filter(volume.astype(np.float64), pipeline["sigma"])
    peaks = peak_local_max(smooth, min_distance=pipeline["min_distance"], labels=mask.astype(int), exclude_border=False)
    markers = np.zeros(volume.shape, np.int32)
    markers[tuple(peaks.T)] = np.arange(1, len(peaks) + 1)
    return watershed(-smooth, markers, mask=mask)


def blobs(volume: np.ndarray) -> tuple[int, ...]:
    from skimage.feature import blob_log

    v = volume.astype(np.float64)
    v = (v - np.median(v)) / (v.max() - np.median(v))
    found = blob_log(v, min_sigma=(1, 2, 2), max_sigma=(3, 6, 6), num_sigma=9, threshold=0.05, exclude_border=False)
    best = None
    for b in found:
        reach = b[3:] * np.sqrt(3)
        if np.any(b[:3] - reach < 0) or np.any(b[:3] + reach > np.array(v.shape) - 1):
            continue
        if best is None or np.prod(b[3:]) > np.prod(best[3:]):
            best = b
    return tuple(int(round(x)) for x in best[:3])


def main() -> int:
    import tifffile

    from imagebench.cases.segmentation3d import PIPELINE, segment_nuclei_3d

    image = tifffile.imread(STACK / "img3d.tif")
    labels = tifffile.imread(STACK / "mask3d.tif")
    cut = faces(labels)
    ids, n = np.unique(labels[labels > 0], return_counts=True)
    print("largest nuclei (label, voxels, cut by a face):")
    for c, i in sorted(zip(n.tolist(), ids.tolist(), strict=True), reverse=True)[:6]:
        print(f"  {i:4d} {c:5d} {'cut' if i in cut else 'whole'}")
    for whole in (True, False):
        ratio, y0, x0, top = windows(labels, whole)[0]
        print(
            f"window rule ({'whole' if whole else 'voxels in window'}): (y0, x0) = ({y0}, {x0}), nucleus {top}, {ratio:.3f}x"
        )
    box = np.s_[:, 5 : 5 + WINDOW, 12 : 12 + WINDOW]
    for name, vol, lab in (("stack", image, labels), ("window", image[box], labels[box])):
        seg = segment_nuclei_3d(vol, **PIPELINE)
        for whole in (False, True):
            at = deepest(largest(seg, whole))
            print(f"A {name} {'whole' if whole else 'any'}: {at} -> nucleus {int(lab[at])}")
        at = deepest(largest(by_intensity(vol, PIPELINE), True))
        print(f"B {name}: {at} -> nucleus {int(lab[at])}")
        at = blobs(vol)
        print(f"C {name}: {at} -> nucleus {int(lab[at])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
