"""PSNR, SSIM and NRMSE of an image against a reference: the implementation IS scikit-image's.

``image_scores(truth, pred, data_range=R)`` calls ``skimage.metrics.peak_signal_noise_ratio``,
``structural_similarity`` and ``normalized_root_mse`` on the two arrays as float64, with the
``data_range`` given (never inferred from the dtype, which for float data is a guess):

- ``psnr = 10 log10(R^2 / MSE)`` in dB (``inf`` for identical images is written as None);
- ``ssim``: scikit-image's defaults (a 7-pixel uniform window in every axis, K1 0.01, K2 0.03,
  no channel axis: a 3-D array is one volume), ``data_range = R``; every axis needs at least 7 pixels;
- ``nrmse = ||truth - pred|| / ||truth||`` (scikit-image's default normalization ``"euclidean"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ImageScores", "image_scores"]


@dataclass(frozen=True)
class ImageScores:
    data_range: float
    psnr: float | None
    ssim: float
    nrmse: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"data_range": self.data_range, "psnr": self.psnr, "ssim": self.ssim, "nrmse": self.nrmse}


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def image_scores(truth: Any, pred: Any, data_range: float) -> ImageScores:
    """PSNR (dB), SSIM and NRMSE of ``pred`` against ``truth`` (real arrays of one shape).

    Raises ValueError for a data range that is not a positive finite number, mismatched shapes,
    non-real data, or an axis shorter than SSIM's 7-pixel window. A value that is infinite or
    undefined (PSNR of identical images, NRMSE against an all-zero truth) is None.
    """
    from skimage.metrics import normalized_root_mse, peak_signal_noise_ratio, structural_similarity

    r = float(data_range)
    if not (r > 0 and math.isfinite(r)):
        raise ValueError(f"data_range: expected a positive finite number, got {data_range!r}")
    t, p = np.asarray(truth), np.asarray(pred)
    for what, arr in (("truth", t), ("pred", p)):
        if arr.dtype != bool and arr.dtype.kind not in "iuf":
            raise ValueError(f"{what}: expected a real-valued image, got dtype {arr.dtype}")
    if t.shape != p.shape:
        raise ValueError(f"truth has shape {t.shape} but pred has shape {p.shape}; they must be equal")
    if t.ndim < 2 or min(t.shape) < 7:
        raise ValueError(
            f"SSIM needs an image of 2 or more axes, each at least 7 pixels (its window); got shape {t.shape}"
        )
    tf, pf = t.astype(np.float64), p.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        psnr = peak_signal_noise_ratio(tf, pf, data_range=r)
        nrmse = normalized_root_mse(tf, pf) if np.any(tf) else float("nan")
    ssim = structural_similarity(tf, pf, data_range=r)
    return ImageScores(r, _finite(psnr), float(ssim), _finite(nrmse))
