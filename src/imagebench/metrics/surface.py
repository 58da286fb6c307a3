"""Foreground overlap and boundary distances of two masks, in physical units.

The foreground of a label image is every non-zero pixel (all objects together).

``dice = 2 |T ∩ P| / (|T| + |P|)`` (1.0 when both are empty).

Boundary distances, as seg-metrics (``seg_metrics.computeQualityMeasures``, SimpleITK with
``fullyConnected=True``) defines them, and checked against it (tests/test_seg_metrics.py):

- the surface of a mask is its pixels with a background pixel among their full neighbourhood
  (8 in 2-D, 26 in 3-D): ``mask & ~binary_erosion(mask, full structure, border_value=1)``, so the
  edge of the image is not a surface;
- the distance of a surface pixel of one mask is the Euclidean distance, in the units of
  ``spacing`` (one step per axis, in the array's axis order, e.g. ``(z, y, x)``), from its centre
  to the nearest surface pixel centre of the other mask
  (``scipy.ndimage.distance_transform_edt(..., sampling=spacing)``);
- the distances of both surfaces are pooled (truth to prediction and prediction to truth, one
  list): ``hd95`` is their 95th percentile (NumPy's linear interpolation), ``msd`` (mean surface
  distance) their mean, ``hd`` their maximum.

When either mask is empty the distances are undefined: None, with the reason in ``undefined``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SurfaceScores", "dice", "surface_of", "surface_scores"]


def _mask(image: Any, what: str) -> np.ndarray:
    arr = np.asarray(image)
    if arr.dtype != bool and arr.dtype.kind not in "iuf":
        raise ValueError(f"{what}: expected a numeric label image or mask, got dtype {arr.dtype}")
    if arr.ndim < 1:
        raise ValueError(f"{what}: expected an image with at least one dimension, got a scalar")
    return arr != 0


def _spacing(spacing: Any, ndim: int) -> tuple[float, ...]:
    if spacing is None:
        return (1.0,) * ndim
    steps = tuple(float(s) for s in spacing)
    if len(steps) != ndim:
        raise ValueError(f"spacing: expected {ndim} steps (one per axis), got {len(steps)}: {steps}")
    if any(not (s > 0 and np.isfinite(s)) for s in steps):
        raise ValueError(f"spacing: expected positive finite steps, got {steps}")
    return steps


def _pair(truth: Any, pred: Any) -> tuple[np.ndarray, np.ndarray]:
    t, p = _mask(truth, "truth"), _mask(pred, "pred")
    if t.shape != p.shape:
        raise ValueError(f"truth has shape {t.shape} but pred has shape {p.shape}; they must be equal")
    return t, p


def dice(truth: Any, pred: Any) -> float:
    """Foreground Dice of two images of one shape (non-zero is foreground); 1.0 when both are empty."""
    t, p = _pair(truth, pred)
    total = int(t.sum()) + int(p.sum())
    return 1.0 if total == 0 else 2.0 * int(np.count_nonzero(t & p)) / total


def surface_of(mask: np.ndarray) -> np.ndarray:
    """The pixels of ``mask`` with a background pixel in their full neighbourhood (image edge excluded)."""
    from scipy import ndimage as ndi

    structure = ndi.generate_binary_structure(mask.ndim, mask.ndim)
    return mask & ~ndi.binary_erosion(mask, structure, border_value=1)


@dataclass(frozen=True)
class SurfaceScores:
    """Foreground Dice and the pooled boundary distances (units of ``spacing``)."""

    spacing: tuple[float, ...]
    dice: float
    hd95: float | None
    msd: float | None
    hd: float | None
    undefined: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "spacing": list(self.spacing),
            "dice": self.dice,
            "hd95": self.hd95,
            "msd": self.msd,
            "hd": self.hd,
        }
        if self.undefined:
            out["undefined"] = self.undefined
        return out


def surface_scores(truth: Any, pred: Any, spacing: Any = None) -> SurfaceScores:
    """Dice, HD95, mean surface distance and Hausdorff distance of the foregrounds of ``truth`` and ``pred``.

    ``spacing``: the size of a pixel along each axis, in the array's axis order (default 1 per
    axis: pixels). Raises ValueError for mismatched shapes or a bad spacing.
    """
    from scipy import ndimage as ndi

    t, p = _pair(truth, pred)
    steps = _spacing(spacing, t.ndim)
    d = dice(t, p)
    if not t.any() or not p.any():
        side = "both" if not t.any() and not p.any() else ("truth" if not t.any() else "pred")
        why = f"no foreground in {side}: boundary distances are undefined"
        return SurfaceScores(steps, d, None, None, None, undefined=why)
    st, sp = surface_of(t), surface_of(p)
    to_truth = ndi.distance_transform_edt(~st, sampling=steps)
    to_pred = ndi.distance_transform_edt(~sp, sampling=steps)
    pooled = np.concatenate((to_truth[sp], to_pred[st]))
    return SurfaceScores(
        steps,
        d,
        hd95=float(np.percentile(pooled, 95)),
        msd=float(pooled.mean()),
        hd=float(pooled.max()),
    )
