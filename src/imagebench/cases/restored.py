"""An image restored, scored against its clean truth: what the denoising and deconvolution cases share.

The truth is a clean image in expected photo-electrons a pixel (its floor 0, its peak the case's
declared data range ``R``); the subject is shown a camera image of it (``photon_camera``: Poisson
shot noise, gain 1, the offset removed, Gaussian read noise) and leaves the restored image on the
same grid and scale. :func:`score_restored` scores it with :mod:`imagebench.metrics.image`
(scikit-image's measures, the data range given, never inferred):

- ``nrmse`` = ``||truth - answer|| / ||truth||`` (scikit-image's ``normalized_root_mse``, "euclidean");
- ``ssim_shortfall`` = ``1 - SSIM(truth, answer, data_range=R)`` (scikit-image's defaults: a 7-px
  uniform window, K1 0.01, K2 0.03);

each passing at or under its limit. PSNR at ``R`` is reported beside them (``detail["figures"]``)
with the PSNR the ``nrmse`` limit is equivalent to (for a fixed truth PSNR and NRMSE are one
measure: ``PSNR = 20 log10(R / (nrmse * rms(truth)))``), and the input's own figures, so the gain is
seen. An answer of another shape, a non-real dtype, or any NaN or infinite pixel is refused with the
reason named, never scored. The artifacts are the truth, the input, the answer and the difference
(answer - truth), written in one contrast range.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from imagebench.cases.segmentation import metric_limit
from imagebench.fixtures.fixture import Attempt, Fixture, Metric, Outcome, WhyNot, read_array

#: the gating metrics, in the order they are reported, each with what it measures
RESTORED_METRICS: tuple[tuple[str, str], ...] = (
    ("nrmse", "||truth - answer|| / ||truth||"),
    ("ssim_shortfall", "1 - SSIM(truth, answer) at the declared data range"),
)
#: the camera's read noise (electrons, standard deviation) in every restoration case; the task says it
READ_NOISE = 2.0


def peak_range(truth: np.ndarray) -> float:
    """The declared data range: the clean image's peak (its floor is 0 photo-electrons)."""
    return float(np.max(truth))


def photon_camera(rng: np.random.Generator, expected: np.ndarray, read_noise: float = READ_NOISE) -> np.ndarray:
    """Expected photo-electrons made a camera image: Poisson shot noise, gain 1, offset removed,
    Gaussian read noise of ``read_noise`` electrons (float32; a pixel may read below 0)."""
    electrons = rng.poisson(np.clip(expected, 0, None)).astype(np.float64)
    return (electrons + rng.normal(0.0, float(read_noise), size=expected.shape)).astype(np.float32)


def gaussian_psf(sigma: float, half: int | None = None) -> np.ndarray:
    """A 2-D Gaussian point-spread function of standard deviation ``sigma`` px, ``2 half + 1`` px square
    (``half`` = ceil(4 sigma) by default), summing to 1."""
    half = int(math.ceil(4 * sigma)) if half is None else int(half)
    yy, xx = np.mgrid[-half : half + 1, -half : half + 1].astype(np.float64)
    psf = np.exp(-(yy**2 + xx**2) / (2.0 * sigma**2))
    return psf / psf.sum()


def _trace(rng: np.random.Generator, size: int, steps: int, wiggle: float) -> np.ndarray:
    """A random smooth curve drawn one pixel wide: a walk of half-pixel steps turning by ``wiggle``."""
    out = np.zeros((size, size))
    p = rng.uniform(0, size, 2)
    angle = rng.uniform(0, 2 * np.pi)
    for _ in range(steps):
        angle += rng.normal(0.0, wiggle)
        p = p + 0.5 * np.array([np.cos(angle), np.sin(angle)])
        iy, ix = int(p[0]), int(p[1])
        if 0 <= iy < size and 0 <= ix < size:
            out[iy, ix] = 1.0
    return out


def specimen(seed: int, size: int = 256) -> np.ndarray:
    """A procedural fluorescence specimen, peak 1: soft-edged nuclei, thin curved filaments and
    sub-resolution beads on a faint floor (numpy ``default_rng(seed)``)."""
    from scipy import ndimage as ndi

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    img = np.zeros((size, size))
    for _ in range(8):
        cy, cx = rng.uniform(20, size - 20, 2)
        radius = rng.uniform(8, 16)
        img += rng.uniform(0.3, 0.6) / (1.0 + np.exp((np.hypot(yy - cy, xx - cx) - radius) * 2.0))
    filaments = sum(_trace(rng, size, 2 * size, 0.03) for _ in range(10))
    filaments = ndi.gaussian_filter(np.clip(filaments, 0, 1), 0.6)
    img += 0.6 * filaments / filaments.max()
    beads = np.zeros((size, size))
    at = rng.integers(4, size - 4, (60, 2))
    beads[at[:, 0], at[:, 1]] = rng.uniform(0.5, 1.0, 60)
    beads = ndi.gaussian_filter(beads, 0.7)
    img += beads / beads.max()
    img += 0.05
    return img / img.max()


def _refused(fixture: Fixture, attempt: Attempt, why: WhyNot | str, artifacts: dict[str, Any]) -> Outcome:
    metrics = [Metric.missing(name, metric_limit(fixture, name), why) for name, _ in RESTORED_METRICS]
    return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail={"why": str(why)}, artifacts=artifacts)


def score_restored(
    fixture: Fixture, attempt: Attempt, *, leaving: str, data_key: str, data_range: float | None = None
) -> Outcome:
    """The answer ``leaving`` against ``truth["clean"]``: ``nrmse`` and ``ssim_shortfall`` at ``data_range``
    (default the clean image's peak, as the built-in cases declare it: their floor is 0), PSNR and the
    input ``data[data_key]``'s own figures reported beside them."""
    from imagebench.metrics.image import image_scores

    truth = np.asarray(fixture.truth["clean"], dtype=np.float64)
    given = np.asarray(fixture.data[data_key], dtype=np.float64)
    r = peak_range(truth) if data_range is None else float(data_range)
    artifacts: dict[str, Any] = {"truth": truth, "input": given}
    answer, why = read_array(attempt, leaving, shape=truth.shape, dtype="iuf")
    if answer is None:
        return _refused(fixture, attempt, why or WhyNot("unreadable"), artifacts)
    answer = answer.astype(np.float64)  # read_array refused NaN and infinite pixels
    scores = image_scores(truth, answer, data_range=r)
    baseline = image_scores(truth, given, data_range=r)
    rms = float(np.sqrt(np.mean(truth**2)))
    nrmse_limit = metric_limit(fixture, "nrmse")
    floor = 20.0 * math.log10(r / (nrmse_limit * rms)) if nrmse_limit > 0 else None
    metrics = [
        Metric("nrmse", scores.nrmse if scores.nrmse is not None else math.nan, nrmse_limit),
        Metric("ssim_shortfall", 1.0 - scores.ssim, metric_limit(fixture, "ssim_shortfall")),
    ]
    detail: dict[str, Any] = {
        "data_range": r,
        "figures": {
            f"psnr_db@range={r:g}": scores.psnr,
            f"ssim@range={r:g}": scores.ssim,
            "nrmse": scores.nrmse,
            f"psnr_db@range={r:g} that the nrmse limit means": floor,
        },
        "input_figures": {
            f"psnr_db@range={r:g}": baseline.psnr,
            f"ssim@range={r:g}": baseline.ssim,
            "nrmse": baseline.nrmse,
        },
    }
    artifacts["answer"] = answer
    artifacts["difference"] = answer - truth
    return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)
