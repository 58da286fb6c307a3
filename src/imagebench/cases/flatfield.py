"""flatfield: estimate uneven illumination from several fields and correct it.

Each raw field is ``dark + flatfield * specimen + noise``: a different textured specimen per
field, one shared smooth vignetting profile (an off-centre, anisotropic Gaussian falloff, mean 1)
and one dark level with a faint column pattern. The subject gets the fields and an averaged dark
frame; the flatfield itself is never given, so it has to be estimated from the fields (what every
field has in common is the illumination). Only the ratio between fields and specimen matters, so
the verifier forgives one overall scale factor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from imagebench.case.model import Case, Collect, Layer, Skill
from imagebench.fixtures.fixture import (
    Attempt,
    Fixture,
    FixtureError,
    Metric,
    Outcome,
    read_array,
)
from imagebench.fixtures.specs import Procedural

if TYPE_CHECKING:
    from imagebench.case.session import Session

SKILL_ID = "flatfield"
FIELDS = 16
SIZE = 128
PROFILE_SIGMA_PX = 8.0  # smoothing that separates residual illumination from texture and noise

SKILLS = [
    Skill(
        SKILL_ID,
        checklist=(),
        about="Estimate the illumination profile (and dark offset) of a microscope from images and correct for it.",
    )
]


# --------------------------------------------------------------------------- builder


def _flatfield(rng: np.random.Generator, size: int, widths: tuple[float, float]) -> np.ndarray:
    """An off-centre, anisotropic Gaussian falloff normalised to mean 1."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float64)
    cy, cx = size / 2.0 + rng.uniform(-0.12, 0.12, 2) * size
    wy, wx = rng.uniform(widths[0], widths[1], 2) * size
    profile = np.exp(-0.5 * (((y - cy) / wy) ** 2 + ((x - cx) / wx) ** 2))
    return profile / profile.mean()


def build_flatfield(
    *,
    seed: int,
    fields: int = FIELDS,
    size: int = SIZE,
    level: float = 2000.0,
    dark_level: float = 700.0,
    dark_frames: int = 16,
    coarse: float = 0.25,
    vignetting: tuple[float, float] = (0.4, 0.65),
) -> Fixture:
    """``fields`` raw images of different specimens under one illumination, and an averaged dark frame."""
    from scipy import ndimage

    if fields < 3:
        raise FixtureError(f"build_flatfield: need at least 3 fields to estimate a flatfield, got {fields}")
    rng = np.random.default_rng(seed)
    flat = _flatfield(rng, size, vignetting)
    # Specimens: log-normal texture (cells and debris at several scales), strictly positive.
    fine = ndimage.gaussian_filter(rng.normal(size=(fields, size, size)), (0, 2.0, 2.0))
    blotches = ndimage.gaussian_filter(rng.normal(size=(fields, size, size)), (0, 6.0, 6.0))
    texture = fine / fine.std() + coarse * blotches / blotches.std()
    specimen = level * np.exp(0.45 * texture)
    dark = np.tile(dark_level + rng.normal(0.0, 3.0, size), (size, 1))  # a fixed pattern per column
    signal = flat * specimen
    raw = dark + signal + rng.normal(size=signal.shape) * np.sqrt(signal + 25.0)  # shot + read noise
    dark_frame = dark + rng.normal(0.0, 5.0, (size, size)) / np.sqrt(dark_frames)
    corner = float(min(flat[0, 0], flat[0, -1], flat[-1, 0], flat[-1, -1]) / flat.max())
    return Fixture(
        provenance=(
            f"procedural (seed {seed}): {fields} log-normal textured specimens (median level {level:g}) times one "
            f"off-centre anisotropic Gaussian vignetting profile (darkest corner {corner:.2f} of the peak), plus "
            f"a dark level {dark_level:g} with a column pattern (sigma 3), shot and read noise; the dark frame is "
            f"the mean of {dark_frames} noisy dark exposures"
        ),
        data={"fields": raw.astype(np.float32), "dark": dark_frame.astype(np.float32)},
        truth={"flatfield": flat, "specimen": specimen},
        about=f"{fields} vignetted {size}x{size} fields sharing one illumination profile, with a dark frame",
    )


# --------------------------------------------------------------------------- verifier


def best_scale(estimate: np.ndarray, truth: np.ndarray) -> float:
    """The factor ``a`` that minimises ``|a * estimate - truth|`` (0 when the estimate is all zeros)."""
    denom = float(np.sum(estimate * estimate))
    return float(np.sum(estimate * truth) / denom) if denom > 0 else 0.0


def profile_residual(corrected: np.ndarray, specimen: np.ndarray) -> float | None:
    """Residual illumination: coefficient of variation of smooth(sum corrected) / smooth(sum specimen).

    Summing over fields and smoothing with sigma ``PROFILE_SIGMA_PX`` leaves the illumination that the
    correction did not remove; a perfect correction gives a constant ratio (0). None when the corrected
    fields carry no positive signal to divide.
    """
    from scipy import ndimage

    num = ndimage.gaussian_filter(corrected.sum(axis=0), PROFILE_SIGMA_PX)
    den = ndimage.gaussian_filter(specimen.sum(axis=0), PROFILE_SIGMA_PX)
    ratio = num / den
    mean = float(ratio.mean())
    if not mean > 0:
        return None
    return float(ratio.std() / mean)


def verify_flatfield(fixture: Fixture, attempt: Attempt) -> Outcome:
    raw = np.asarray(fixture.data["fields"], dtype=np.float64)
    specimen = np.asarray(fixture.truth["specimen"], dtype=np.float64)
    tol = fixture.tolerance
    detail: dict[str, Any] = {}
    raw_mean = raw.mean(axis=0)
    artifacts: dict[str, Any] = {"raw_mean": raw_mean}
    corrected, why = read_array(attempt, "corrected", shape=raw.shape, dtype="iuf")
    if corrected is None:
        metrics = [
            Metric.missing("profile_residual", tol["profile_residual"], why or "unreadable"),
            Metric.missing("relative_error", tol["relative_error"], why or "unreadable"),
        ]
        return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)

    corrected = corrected.astype(np.float64)
    scale = best_scale(corrected, specimen)
    detail["scale_applied"] = scale
    rel = float(np.linalg.norm(scale * corrected - specimen) / np.linalg.norm(specimen))
    residual = profile_residual(corrected, specimen)
    if residual is None:
        why = "the corrected fields have no positive signal"
        profile = Metric.missing("profile_residual", tol["profile_residual"], why, because="unusable")
    else:
        profile = Metric("profile_residual", residual, tol["profile_residual"])
    metrics = [profile, Metric("relative_error", rel, tol["relative_error"])]
    # For scale: the same number for the fields with only the dark frame subtracted.
    detail["dark_subtracted_profile_residual"] = profile_residual(raw - np.asarray(fixture.data["dark"]), specimen)
    # On the specimen's scale (the one overall factor applied), so the three images share one range.
    corrected_mean = scale * corrected.mean(axis=0)
    artifacts["corrected_mean"] = corrected_mean
    artifacts["difference"] = corrected_mean - raw_mean
    return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)


# --------------------------------------------------------------------------- reference


def smooth_surface(image: np.ndarray, degree: int = 3) -> np.ndarray:
    """A smooth positive surface through ``image``: a 2-D polynomial of total ``degree`` fitted to its log."""
    n, m = image.shape
    y, x = np.meshgrid(np.linspace(-1.0, 1.0, n), np.linspace(-1.0, 1.0, m), indexing="ij")
    terms = np.stack([(y**i * x**j).ravel() for i in range(degree + 1) for j in range(degree + 1 - i)], axis=1)
    positive = np.clip(image, 1e-6 * max(float(image.max()), 1e-12), None)
    coef, *_ = np.linalg.lstsq(terms, np.log(positive).ravel(), rcond=None)
    return np.exp(terms @ coef).reshape(n, m)


def reference_flatfield(session: Session) -> None:
    """Subtract the dark frame, take the per-pixel median over fields, fit a smooth surface to it, divide."""
    fields = np.asarray(session.namespace["fields"], dtype=np.float64)
    dark = np.asarray(session.namespace["dark"], dtype=np.float64)
    signal = fields - dark
    # What all fields share is the illumination; the median over fields keeps it and drops most specimen detail,
    # and a low-order surface (no edge bias, unlike a wide Gaussian blur) drops the rest.
    flat = smooth_surface(np.median(signal, axis=0))
    flat /= flat.mean()
    session.namespace["corrected"] = (signal / flat).astype(np.float32)


def baseline_no_correction(session: Session) -> None:
    """The naive baseline: no correction at all (the raw fields, offset and shading left in)."""
    session.namespace["corrected"] = np.asarray(session.namespace["fields"], dtype=np.float32).copy()


# --------------------------------------------------------------------------- case

CASES = [
    Case(
        case_id="vignetted-field",
        namespace=SKILL_ID,
        task=(
            f"`fields` holds {FIELDS} raw images ({FIELDS}, {SIZE}, {SIZE}) of different parts of a specimen, taken "
            "with the same microscope: the illumination falls off towards the edges (and not symmetrically), and the "
            "camera adds a dark offset. `dark` is an averaged dark frame (shutter closed) of shape "
            f"({SIZE}, {SIZE}). Remove the dark offset and the uneven illumination. Leave `corrected`: a float array "
            f"of shape ({FIELDS}, {SIZE}, {SIZE}), each field as it would look under perfectly even illumination "
            "with no offset; any single overall intensity scale is fine."
        ),
        persona="a microscopist stitching tiles whose seams show the vignetting of every tile",
        fixture=Procedural(
            build_flatfield,
            seed=7,
            tolerance={"profile_residual": 0.064, "relative_error": 0.081},
        ),
        layers=(
            Layer("fields", "fields", "image", dim_labels=("field", "y", "x")),
            Layer("dark", "dark", "image"),
        ),
        collect=(
            Collect(
                "corrected", "array", f"({FIELDS}, {SIZE}, {SIZE}) float, shading- and offset-free fields", layer="image", like="fields"
            ),
        ),
        verify=verify_flatfield,
        reference=reference_flatfield,
        baseline=baseline_no_correction,
        baseline_about="no correction: the raw fields",
        case_class="golden",
        about="flatfield and dark correction from several fields under one vignetting profile",
    )
]

BUILDERS = {"flatfield-vignetting": build_flatfield}
