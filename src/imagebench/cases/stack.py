"""stack-alignment: re-align a stack of slices that were each displaced in-plane by an unknown translation.

A volume is a stack of 2-D slices along its last axis. After acquisition (or sectioning) every
slice was re-placed by its own in-plane translation; the subject measures that translation per
slice. Only the slices' positions relative to each other can be recovered from the stack: moving every
slice by the same amount, or shearing the whole stack (a drift that grows linearly with the slice
index), leaves a stack that looks just as straight, since structures may run obliquely. So the
verifier removes the translation plus linear drift that fits the answer's error best before it scores.

Re-placing a slice (:func:`replace_slices`) is an exact sub-pixel Fourier shift of its mirror-symmetric
extension (the image and its reflections tile the plane without a seam, so nothing wraps in and
there is no ringing at the border), cropped back to the slice: content that enters from outside is
the slice's own reflection.

Sign convention (the prompt states it): ``shifts[k] = (d0, d1)`` is the displacement of the content
of slice ``k`` along (axis 0, axis 1): a feature at ``(u, v)`` of the straight stack sits at
``(u + d0, v + d1)`` in the re-placed slice ``k``, so moving slice ``k`` by ``(-d0, -d1)`` puts it
back.

Cases: ``synthetic-jitter`` (a seeded band-limited volume with blobs) and ``mri-anatomical`` (a
real MRI volume, nibabel's ``anatomical.nii``, its slices re-placed once at authoring time by
``tools/author_stack_fixture.py`` and stored as ``.nii.gz``, so the run reads NIfTI through the
fixture tree).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from imagebench.case.model import Case, Collect, Layer, Skill
from imagebench.fixtures import tree
from imagebench.fixtures.fixture import (
    Attempt,
    Fixture,
    FixtureError,
    Metric,
    Outcome,
    WhyNot,
    read_array,
)
from imagebench.fixtures.specs import OnDisk, Procedural

if TYPE_CHECKING:
    from imagebench.case.session import Session

SKILL_ID = "stack-alignment"
FIXTURE_ROOT = tree.PACKAGED_ROOT

SYNTHETIC_SHAPE = (64, 64, 24)  # (axis 0, axis 1, slices)
MAX_OFFSET_PX = 2.5
DETREND_DEGREE = 2  # the reference's trend along the stack (chosen on synthetic-jitter, see docs/cases.md)

SKILLS = [
    Skill(
        SKILL_ID,
        checklist=(),
        about="Measure and undo the in-plane translation of each slice of a stack whose slices were re-placed.",
    )
]


# --------------------------------------------------------------------------- re-placing slices


def fourier_shift_slice(image: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``image`` (2-D) with its content moved by ``shift`` = (d0, d1) px, exactly (band-limited interpolation).

    The image is extended by its reflections to twice its size along each axis, which tiles the plane
    without a seam; that tile is shifted in the Fourier domain and cropped back.
    """
    n, m = image.shape
    tile = np.pad(np.asarray(image, dtype=np.float64), ((0, n), (0, m)), mode="symmetric")
    f0 = np.fft.fftfreq(2 * n)[:, None]
    f1 = np.fft.fftfreq(2 * m)[None, :]
    ramp = np.exp(-2j * np.pi * (f0 * shift[0] + f1 * shift[1]))
    return np.fft.ifft2(np.fft.fft2(tile) * ramp).real[:n, :m]


def replace_slices(volume: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each slice ``volume[..., k]`` moved in-plane by ``offsets[k]`` (float64 out)."""
    volume = np.asarray(volume, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.float64)
    if volume.ndim != 3 or offsets.shape != (volume.shape[2], 2):
        raise FixtureError(
            f"replace_slices: need a 3-D volume and ({volume.shape[-1]}, 2) offsets, got {offsets.shape}"
        )
    return np.stack([fourier_shift_slice(volume[..., k], offsets[k]) for k in range(volume.shape[2])], axis=2)


def check_replaced(straight: np.ndarray, replaced: np.ndarray, offsets: np.ndarray, margin: int) -> float:
    """Second derivation: moving each re-placed slice back (cubic spline, not Fourier) must restore it.

    The two interpolators agree on everything but detail near the Nyquist frequency, so both sides are
    smoothed (Gaussian, sigma 1 px) before the comparison. Returns the worst RMS difference inside
    ``margin`` px, relative to the smoothed slice's own spread; raises ``FixtureError`` above 0.05.
    """
    from scipy import ndimage

    worst = 0.0
    inner = (slice(margin, -margin), slice(margin, -margin))
    for k in range(straight.shape[2]):
        back = ndimage.gaussian_filter(ndimage.shift(replaced[..., k], -offsets[k], order=3, mode="mirror"), 1.0)
        ref = ndimage.gaussian_filter(straight[..., k], 1.0)[inner]
        spread = float(ref.std()) or 1.0
        worst = max(worst, float(np.sqrt(np.mean((back[inner] - ref) ** 2))) / spread)
    if not worst <= 0.05:
        raise FixtureError(f"{SKILL_ID}: moving the slices back by their offsets leaves {worst:.3g} of their spread")
    return worst


def jitter(rng: np.random.Generator, slices: int, max_offset: float = MAX_OFFSET_PX) -> np.ndarray:
    """Independent in-plane offsets per slice, uniform in +-``max_offset`` px per axis, rounded to 1/1000 px."""
    return np.round(rng.uniform(-max_offset, max_offset, (slices, 2)), 3)


# --------------------------------------------------------------------------- synthetic builder


def build_stack(
    *,
    seed: int,
    shape: tuple[int, int, int] = SYNTHETIC_SHAPE,
    max_offset: float = MAX_OFFSET_PX,
    texture_sigma: tuple[float, float, float] = (2.0, 2.0, 1.5),
    blobs: int = 12,
    noise: float = 0.05,
) -> Fixture:
    """A seeded volume (axis 0, axis 1, slices) whose slices were re-placed by known in-plane offsets."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    n0, n1, nz = shape
    # A band-limited 3-D texture (tissue-like detail that changes smoothly from slice to slice) ...
    texture = ndimage.gaussian_filter(rng.standard_normal(shape), texture_sigma, mode="wrap")
    texture /= texture.std()
    # ... and a few broad ellipsoidal structures that run through several slices ("anatomy").
    g0, g1, gz = np.meshgrid(np.arange(n0), np.arange(n1), np.arange(nz), indexing="ij")
    anatomy = np.zeros(shape)
    for _ in range(blobs):
        c = rng.uniform([0, 0, 0], [n0, n1, nz])
        r = rng.uniform([5, 5, 3], [14, 14, 9])
        anatomy += rng.uniform(0.5, 1.5) * np.exp(
            -0.5 * (((g0 - c[0]) / r[0]) ** 2 + ((g1 - c[1]) / r[1]) ** 2 + ((gz - c[2]) / r[2]) ** 2)
        )
    straight = 1.0 + anatomy + 0.35 * texture
    offsets = jitter(rng, nz, max_offset)
    replaced = replace_slices(straight, offsets)
    check_replaced(straight, replaced, offsets, margin=int(np.ceil(max_offset)) + 4)
    volume = replaced + rng.normal(0.0, noise, shape)
    return Fixture(
        provenance=(
            f"procedural (seed {seed}): a {n0}x{n1}x{nz} volume, 1 + {blobs} Gaussian ellipsoids (semi-axes 5-14 px "
            f"in-plane, 3-9 slices) + 0.35 x a band-limited texture (Gaussian-filtered white noise, sigma "
            f"{texture_sigma}); each slice then re-placed by its own in-plane offset, uniform in +-{max_offset:g} px "
            f"per axis (a Fourier shift of its mirror-symmetric extension); Gaussian noise sigma {noise:g}"
        ),
        data={"volume": volume.astype(np.float32)},
        truth={"offsets": offsets},
        about=f"a {n0}x{n1}x{nz} stack whose slices were each re-placed by a known in-plane translation",
    )


# --------------------------------------------------------------------------- verifier


def verify_stack(fixture: Fixture, attempt: Attempt) -> Outcome:
    truth = np.asarray(fixture.truth["offsets"], dtype=np.float64)
    tol = fixture.tolerance
    names = ("median_slice_error", "worst_slice_error")
    detail: dict[str, Any] = {"slices": int(truth.shape[0])}
    volume = np.asarray(fixture.data["volume"], dtype=np.float64)
    artifacts: dict[str, Any] = {"raw_section": _section(volume)}
    shifts, why = read_array(attempt, "shifts", shape=truth.shape, dtype="iuf")
    if shifts is None:
        metrics = [Metric.missing(n, tol[n], why or "unreadable", "px") for n in names]
        return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)
    shifts = shifts.astype(np.float64)
    extent = float(max(volume.shape[:2]))
    if not np.all(np.isfinite(shifts)) or float(np.abs(shifts).max(initial=0.0)) > extent:
        # A shift past the slice's own extent measures nothing, and a huge one would swamp the
        # truth in ``shifts - truth`` (1e18 - 3 == 1e18 in float64): refused, never scored.
        why = f"'shifts' must be finite and within the slice's extent (|d| <= {extent:g} px)"
        metrics = [Metric.missing(n, tol[n], WhyNot(why, "unusable"), "px") for n in names]
        return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)
    err, common = slice_errors(shifts, truth)
    detail["removed_offset_px"] = [round(float(v), 4) for v in common[0]]
    detail["removed_drift_px_per_slice"] = [round(float(v), 4) for v in common[1]]
    detail["slice_errors_px"] = [round(float(e), 4) for e in err]
    flipped, _ = slice_errors(-shifts, truth)
    if np.median(flipped) < 0.5 * np.median(err):
        detail["hint"] = (
            "the negated shifts fit the truth much better: they look like the correction applied to each slice, "
            "not the displacement of its content"
        )
    metrics = [
        Metric("median_slice_error", float(np.median(err)), tol["median_slice_error"], "px"),
        Metric("worst_slice_error", float(err.max()), tol["worst_slice_error"], "px"),
    ]
    artifacts["corrected_section"] = _section(replace_slices(volume, -shifts))
    detail["drawn"] = (
        "raw_section and corrected_section: the plane through the middle of axis 0 (axis 1 across, slices down), "
        "before and after moving each slice back by the answered shifts; a straight stack shows smooth bands"
    )
    return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)


def slice_errors(shifts: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-slice Euclidean error (px) of ``shifts`` after removing what a stack cannot tell apart.

    A translation common to every slice, and a drift that grows linearly with the slice index (a shear of
    the whole stack, indistinguishable from structures that run obliquely), are fitted to the residual
    ``shifts - truth`` by least squares, per axis, and removed. Returns the errors and the removed
    (offset, drift per slice) as a (2, 2) array.
    """
    residual = shifts - truth
    index = np.arange(residual.shape[0], dtype=np.float64)
    design = np.stack([np.ones_like(index), index - index.mean()], axis=1)
    coef, *_ = np.linalg.lstsq(design, residual, rcond=None)
    return np.linalg.norm(residual - design @ coef, axis=1), coef


def _section(volume: np.ndarray) -> np.ndarray:
    """The plane through the middle of axis 0, slices as rows: jagged edges show misplaced slices."""
    return np.ascontiguousarray(volume[volume.shape[0] // 2].T)


# --------------------------------------------------------------------------- reference and baseline


def _prepare(image: np.ndarray) -> np.ndarray:
    from skimage.filters import window

    image = np.asarray(image, dtype=np.float64)
    return (image - image.mean()) * window("hann", image.shape)


def _pair_shift(a: np.ndarray, b: np.ndarray, upsample: int) -> np.ndarray:
    """Content displacement of ``b`` relative to ``a`` (upsampled plain cross-correlation)."""
    from skimage.registration import phase_cross_correlation

    register, _, _ = phase_cross_correlation(_prepare(a), _prepare(b), upsample_factor=upsample, normalization=None)
    return -register


def estimate_slice_shifts(volume: np.ndarray, *, upsample: int = 20, degree: int = DETREND_DEGREE) -> np.ndarray:
    """Chain neighbour registrations along the stack, then remove a smooth trend of low ``degree``.

    Each slice is registered to the one before it (upsampled cross-correlation of the mean-free,
    Hann-windowed slices) and the displacements are summed along the stack. What the structures do
    from slice to slice (a slant, a curve) enters every pairwise estimate and adds up along the chain;
    the jitter does not, being independent per slice. A polynomial of low degree in the slice index,
    fitted per axis and subtracted, removes the smooth part and keeps the jitter.
    """
    volume = np.asarray(volume, dtype=np.float64)
    nz = volume.shape[2]
    chained = np.zeros((nz, 2))
    for k in range(1, nz):
        chained[k] = chained[k - 1] + _pair_shift(volume[..., k - 1], volume[..., k], upsample)
    index = np.arange(nz, dtype=np.float64)
    trend = np.stack([np.polyval(np.polyfit(index, chained[:, i], degree), index) for i in range(2)], axis=1)
    return chained - trend


def reference_stack(session: Session) -> None:
    """Chain neighbour registrations and remove a quadratic trend along the stack (tuned on synthetic-jitter)."""
    session.namespace["shifts"] = estimate_slice_shifts(np.asarray(session.namespace["volume"]))


def baseline_no_correction(session: Session) -> None:
    """The naive baseline: the stack is taken as straight (zero shifts)."""
    volume = np.asarray(session.namespace["volume"])
    session.namespace["shifts"] = np.zeros((volume.shape[-1], 2))


# --------------------------------------------------------------------------- cases


def _task(what: str, shape: tuple[int, int, int], extra: str = "") -> str:
    n0, n1, nz = shape
    return (
        f"`volume` ({n0} x {n1} x {nz}) is {what}, a stack of {nz} slices along its last axis. After acquisition "
        "every slice was re-placed: moved within its plane by its own translation of up to a few pixels (the "
        "structures themselves were straight). " + extra + "Measure each slice's translation. Leave `shifts`: a "
        f"float array of shape ({nz}, 2) whose row k is (d0, d1) in pixels along (axis 0, axis 1), the "
        "displacement of the content of slice `volume[:, :, k]`: a feature at (u, v) in the straight stack is at "
        "(u + d0, v + d1) in slice k, so moving slice k by (-d0, -d1) puts it back. Only the slices' positions "
        "relative to each other can be known: a translation common to all rows, and a drift that grows linearly "
        "with k (a shear of the whole stack), are removed from your answer's error before it is scored."
    )


# Limits: 1.5x the reference's worst value (synthetic: over seeds 0-9 and 13; MRI: its one volume); docs/cases.md.
SYNTHETIC_TOLERANCE = {"median_slice_error": 1.3, "worst_slice_error": 2.5}
MRI_TOLERANCE = {"median_slice_error": 0.90, "worst_slice_error": 1.7}
MRI_SHAPE = (33, 41, 25)

_COLLECT = (Collect("shifts", "array", "(slices, 2) float, (d0, d1) content displacement of each slice, px"),)

CASES = [
    Case(
        case_id="synthetic-jitter",
        namespace=SKILL_ID,
        task=_task("a synthetic volume (float32)", SYNTHETIC_SHAPE),
        persona="a histologist stacking serial sections that each landed a little off on the slide",
        fixture=Procedural(build_stack, seed=13, tolerance=SYNTHETIC_TOLERANCE),
        layers=(Layer("volume", "volume", "image", dim_labels=("u", "v", "slice")),),
        collect=_COLLECT,
        verify=verify_stack,
        reference=reference_stack,
        baseline=baseline_no_correction,
        baseline_about="no correction: zero shifts",
        case_class="golden",
        about="in-plane jitter of every slice of a seeded volume; scored per slice after removing a global shift",
    ),
    Case(
        case_id="mri-anatomical",
        namespace=SKILL_ID,
        task=_task(
            "a real structural MRI volume of a head (float32, 2 mm voxels, read from a NIfTI file)",
            MRI_SHAPE,
            "The volume is stored as `.nii.gz`; `volume` is its voxel array in the file's own axis order. ",
        ),
        persona="an MRI physicist whose slices were each acquired with a slightly different in-plane position",
        fixture=OnDisk(tolerance=MRI_TOLERANCE, root=FIXTURE_ROOT),
        layers=(Layer("volume", "volume", "image", dim_labels=("i", "j", "k"), scale=(2.0, 2.0, 2.0), units="mm"),),
        collect=_COLLECT,
        verify=verify_stack,
        reference=reference_stack,
        baseline=baseline_no_correction,
        baseline_about="no correction: zero shifts",
        case_class="golden",
        about="a real MRI volume (nibabel anatomical.nii) with its slices re-placed by known in-plane offsets",
    ),
]

BUILDERS = {"stack-jittered-slices": build_stack}
