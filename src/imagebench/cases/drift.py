"""drift-correction: recover a known sub-pixel drift trajectory from a time-lapse and undo it.

The builder renders every frame analytically: Gaussian beads and a few broad background blobs
are evaluated at their frame-0 positions plus the frame's displacement, so the movie carries an
exact sub-pixel trajectory with no interpolation error in the data. Noise is added afterwards.
The hard case lowers the signal-to-noise ratio and adds one bright object that moves on its own
path, so a tracker that follows the brightest thing (or the intensity centroid) follows the
wrong motion.

Sign convention (the prompt states it): ``shifts[t] = (dy, dx)`` is the displacement of the
content of frame ``t`` relative to frame 0; a feature at ``(y, x)`` in frame 0 sits at
``(y + dy, x + dx)`` in frame ``t``. Moving frame ``t`` by ``(-dy, -dx)`` re-aligns it.
"""

from __future__ import annotations

from collections.abc import Mapping
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

SKILL_ID = "drift-correction"

FRAMES = 20
SIZE = 128

SKILLS = [
    Skill(
        SKILL_ID,
        checklist=("dask", "tensor"),
        about="Estimate the rigid drift of a time-lapse to sub-pixel precision and register the frames.",
    )
]


# --------------------------------------------------------------------------- rendering


def _profiles(centres: np.ndarray, sigmas: np.ndarray, n: int) -> np.ndarray:
    """One 1-D Gaussian profile per object along an axis of length ``n``: shape (objects, n)."""
    x = np.arange(n, dtype=np.float64)
    return np.exp(-0.5 * ((x[None, :] - centres[:, None]) / sigmas[:, None]) ** 2)


def _render(
    cy: np.ndarray, cx: np.ndarray, sigma: np.ndarray, amplitude: np.ndarray, shape: tuple[int, int]
) -> np.ndarray:
    """Sum of isotropic Gaussians, evaluated exactly at pixel centres (separable: one matmul)."""
    gy = _profiles(cy, sigma, shape[0]) * amplitude[:, None]
    gx = _profiles(cx, sigma, shape[1])
    return gy.T @ gx


def _trajectory(rng: np.random.Generator, frames: int) -> np.ndarray:
    """A smooth drift: a slow linear creep plus a sinusoidal wobble per axis, zero at frame 0. (frames, 2)."""
    t = np.arange(frames, dtype=np.float64)[:, None]
    heading = rng.uniform(0.0, 2.0 * np.pi)
    velocity = rng.uniform(0.12, 0.25) * np.array([np.sin(heading), np.cos(heading)])  # px per frame
    amplitude = rng.uniform(0.8, 2.0, 2)
    period = rng.uniform(12.0, 30.0, 2)
    phase = rng.uniform(0.0, 2.0 * np.pi, 2)
    wobble = amplitude * (np.sin(2.0 * np.pi * t / period + phase) - np.sin(phase))
    return velocity * t + wobble


# --------------------------------------------------------------------------- builder


def build_drift(
    *,
    seed: int,
    frames: int = FRAMES,
    size: int = SIZE,
    beads: int = 160,
    bead_amplitude: tuple[float, float] = (40.0, 120.0),
    noise: float = 4.0,
    distractor_amplitude: float = 0.0,
    offset: float = 100.0,
) -> Fixture:
    """A drifting bead movie (frames, size, size) with its exact trajectory.

    With ``distractor_amplitude > 0`` one bright object (sigma 5 px) crosses the field on a straight
    path of its own, unrelated to the drift.
    """
    if frames < 2 or size < 32:
        raise FixtureError(f"build_drift: need frames >= 2 and size >= 32, got frames={frames}, size={size}")
    rng = np.random.default_rng(seed)
    shape = (size, size)
    trajectory = _trajectory(rng, frames)

    pad = 12.0  # beads beyond the border drift in, as in a real field of view
    cy = rng.uniform(-pad, size + pad, beads)
    cx = rng.uniform(-pad, size + pad, beads)
    sigma = rng.uniform(1.2, 2.5, beads)
    amp = rng.uniform(bead_amplitude[0], bead_amplitude[1], beads)
    n_bg = 6
    by = rng.uniform(0, size, n_bg)
    bx = rng.uniform(0, size, n_bg)
    bs = rng.uniform(15.0, 30.0, n_bg)
    ba = rng.uniform(10.0, 30.0, n_bg)
    ys = np.concatenate([cy, by])
    xs = np.concatenate([cx, bx])
    ss = np.concatenate([sigma, bs])
    aa = np.concatenate([amp, ba])

    def field(dy: float, dx: float) -> np.ndarray:
        return _render(ys + dy, xs + dx, ss, aa, shape) + offset

    clean = np.stack([field(dy, dx) for dy, dx in trajectory])
    undrifted_mean = field(0.0, 0.0)  # every un-drifted frame shows the field as in frame 0

    about_distractor = ""
    if distractor_amplitude > 0:
        start = rng.uniform(0.3 * size, 0.7 * size, 2)
        heading = rng.uniform(0.0, 2.0 * np.pi)
        speed = 1.5  # px per frame, in image coordinates: it ignores the drift
        t = np.arange(frames, dtype=np.float64)[:, None] - frames / 2.0
        track = start + speed * t * np.array([np.sin(heading), np.cos(heading)])
        d_sigma = np.array([5.0])
        d_amp = np.array([float(distractor_amplitude)])
        ideal_sum = np.zeros(shape)
        for k in range(frames):
            py, px = track[k]
            clean[k] += _render(np.array([py]), np.array([px]), d_sigma, d_amp, shape)
            # In a perfectly corrected frame k the object sits where frame k has it, moved back by the drift.
            qy, qx = track[k] - trajectory[k]
            ideal_sum += _render(np.array([qy]), np.array([qx]), d_sigma, d_amp, shape)
        undrifted_mean = undrifted_mean + ideal_sum / frames
        about_distractor = (
            f"; one bright object (amplitude {distractor_amplitude:g}, sigma 5 px) crosses the field at "
            f"{speed} px/frame on its own straight path"
        )

    movie = clean + rng.normal(0.0, noise, clean.shape)
    return Fixture(
        provenance=(
            f"procedural (seed {seed}): {beads} Gaussian beads (sigma 1.2-2.5 px, amplitude "
            f"{bead_amplitude[0]:g}-{bead_amplitude[1]:g}) and {n_bg} broad background blobs on an offset of "
            f"{offset:g}, rendered analytically at frame-0 positions plus a smooth drift (linear creep + "
            f"sinusoid per axis){about_distractor}; additive Gaussian noise sigma {noise:g}"
        ),
        data={"movie": movie.astype(np.float32)},
        truth={"trajectory": trajectory, "undrifted_mean": undrifted_mean},
        about=f"a {frames}-frame {size}x{size} bead movie with a known sub-pixel drift",
    )


# --------------------------------------------------------------------------- verifier


def _crop_margin(trajectory: np.ndarray) -> int:
    """Border excluded from image comparisons: content shifted in from outside is unknowable."""
    return int(np.ceil(np.abs(trajectory).max())) + 2


def residual_ratio(corrected: np.ndarray, raw: np.ndarray, undrifted_mean: np.ndarray, margin: int) -> float:
    """RMS of (mean projection of ``corrected`` - ideal mean projection), over the same for ``raw``.

    Both are taken inside a border of ``margin`` px. 0 is a perfect registration, 1 is no
    correction at all; noise largely averages out of the mean projection.
    """
    inner = (slice(margin, -margin), slice(margin, -margin))
    ideal = undrifted_mean[inner]
    num = np.sqrt(np.mean((corrected.mean(axis=0)[inner] - ideal) ** 2))
    den = np.sqrt(np.mean((raw.mean(axis=0)[inner] - ideal) ** 2))
    return float(num / den)


def trajectory_metrics(
    shifts: np.ndarray, truth: np.ndarray, tol: Mapping[str, float], detail: dict[str, Any]
) -> list[Metric]:
    """RMS and worst per-frame error (px) of a trajectory; per-frame errors and a sign hint go to ``detail``."""
    err = np.linalg.norm(shifts - truth, axis=1)
    rms = float(np.sqrt(np.mean(err**2)))
    detail["frame_errors_px"] = [round(float(e), 4) for e in err]
    flipped = float(np.sqrt(np.mean(np.linalg.norm(-shifts - truth, axis=1) ** 2)))
    if flipped < 0.5 * rms:
        detail["hint"] = (
            "the negated shifts fit the truth much better: they look like the correction applied to each "
            "frame, not the displacement of its content"
        )
    return [
        Metric("trajectory_rms_error", rms, tol["trajectory_rms_error"], "px"),
        Metric("trajectory_max_error", float(err.max()), tol["trajectory_max_error"], "px"),
    ]


def verify_drift(fixture: Fixture, attempt: Attempt) -> Outcome:
    movie = np.asarray(fixture.data["movie"], dtype=np.float64)
    truth = np.asarray(fixture.truth["trajectory"], dtype=np.float64)
    undrifted_mean = np.asarray(fixture.truth["undrifted_mean"], dtype=np.float64)
    tol = fixture.tolerance
    frames = movie.shape[0]
    metrics: list[Metric] = []
    detail: dict[str, Any] = {"frames": frames}
    raw_mean = movie.mean(axis=0)
    artifacts: dict[str, Any] = {"raw_mean": raw_mean}

    shifts, why = read_array(attempt, "shifts", shape=(frames, 2), dtype="iuf")
    if shifts is None:
        for name in ("trajectory_rms_error", "trajectory_max_error"):
            metrics.append(Metric.missing(name, tol[name], why or "unreadable", "px"))
    else:
        shifts = shifts.astype(np.float64)
        metrics += trajectory_metrics(shifts, truth, tol, detail)

    corrected, why = read_array(attempt, "corrected", shape=movie.shape, dtype="iuf")
    if corrected is None:
        metrics.append(Metric.missing("residual_ratio", tol["residual_ratio"], why or "unreadable"))
    else:
        corrected = corrected.astype(np.float64)
        margin = _crop_margin(truth)
        ratio = residual_ratio(corrected, movie, undrifted_mean, margin)
        metrics.append(Metric("residual_ratio", ratio, tol["residual_ratio"]))
        detail["residual_border_px"] = margin
        corrected_mean = corrected.mean(axis=0)
        artifacts["corrected_mean"] = corrected_mean
        artifacts["difference"] = corrected_mean - raw_mean
    return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)


# --------------------------------------------------------------------------- references


def _register(prepared: np.ndarray, upsample: int) -> np.ndarray:
    """Displacement of each prepared frame relative to frame 0 by upsampled cross-correlation."""
    from skimage.filters import window
    from skimage.registration import phase_cross_correlation

    taper = window("hann", prepared.shape[1:])
    ref = prepared[0] * taper
    shifts = np.zeros((prepared.shape[0], 2))
    for k in range(1, prepared.shape[0]):
        # Plain (un-whitened) cross-correlation: whitening amplifies noise and biases the sub-pixel peak.
        register, _, _ = phase_cross_correlation(ref, prepared[k] * taper, upsample_factor=upsample, normalization=None)
        shifts[k] = -register  # skimage returns the shift that registers the frame; we report the content's motion
    return shifts


def _apply(movie: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    from scipy import ndimage

    return np.stack([ndimage.shift(frame, -s, order=3, mode="nearest") for frame, s in zip(movie, shifts)])


def reference_drift(session: Session) -> None:
    """Upsampled cross-correlation of each (mean-subtracted, Hann-tapered) frame against frame 0."""
    movie = np.asarray(session.namespace["movie"], dtype=np.float64)
    prepared = movie - movie.mean(axis=(1, 2), keepdims=True)
    shifts = _register(prepared, upsample=50)
    session.namespace["shifts"] = shifts
    session.namespace["corrected"] = _apply(movie, shifts).astype(np.float32)


def _suppress_outliers(frame: np.ndarray) -> np.ndarray:
    """Band-pass a frame to bead scale and blank out large bright structures with a soft-edged mask."""
    from scipy import ndimage

    band = ndimage.gaussian_filter(frame, 1.0) - ndimage.gaussian_filter(frame, 6.0)
    med = np.median(band)
    mad = 1.4826 * np.median(np.abs(band - med))
    outlier = ndimage.binary_dilation(np.abs(band - med) > 5.0 * mad, iterations=3)
    labels, n = ndimage.label(outlier)
    sizes = ndimage.sum_labels(outlier, labels, np.arange(1, n + 1))
    big = np.isin(labels, 1 + np.flatnonzero(sizes > 80))  # far larger than any bead's footprint
    weight = 1.0 - ndimage.gaussian_filter(big.astype(np.float64), 2.0)
    weight[big] = 0.0
    return (band - med) * weight


def _refine_peak(cross_power: np.ndarray, centre: np.ndarray, upsample: int, half_width: float = 1.5) -> np.ndarray:
    """The cross-correlation peak near ``centre`` on a grid of 1/``upsample`` px (a local upsampled DFT)."""
    n, m = cross_power.shape
    offsets = np.arange(-half_width, half_width + 1e-9, 1.0 / upsample)
    ys = centre[0] + offsets
    xs = centre[1] + offsets
    rows = np.exp(2j * np.pi * np.outer(ys, np.fft.fftfreq(n)))
    cols = np.exp(2j * np.pi * np.outer(np.fft.fftfreq(m), xs))
    surface = (rows @ cross_power @ cols).real
    i, j = np.unravel_index(int(np.argmax(surface)), surface.shape)
    return np.array([ys[i], xs[j]])


def _track(prepared: np.ndarray, upsample: int, max_step: float) -> np.ndarray:
    """Displacement of each frame vs frame 0, searching only within ``max_step`` px of the previous frame's.

    Drift is slow and smooth, so a correlation peak far from the last estimate belongs to something
    else (an object moving on its own); the integer peak is then refined to 1/``upsample`` px.
    """
    from skimage.filters import window

    taper = window("hann", prepared.shape[1:])
    first = np.conj(np.fft.fft2(prepared[0] * taper))
    n, m = prepared.shape[1:]
    lag_y = np.fft.fftfreq(n, 1.0 / n)
    lag_x = np.fft.fftfreq(m, 1.0 / m)
    shifts = np.zeros((prepared.shape[0], 2))
    for k in range(1, prepared.shape[0]):
        cross_power = np.fft.fft2(prepared[k] * taper) * first  # correlation peaks at frame k's displacement
        surface = np.fft.ifft2(cross_power).real
        prev = shifts[k - 1]
        near = (np.abs(lag_y[:, None] - prev[0]) <= max_step) & (np.abs(lag_x[None, :] - prev[1]) <= max_step)
        i, j = np.unravel_index(int(np.argmax(np.where(near, surface, -np.inf))), surface.shape)
        shifts[k] = _refine_peak(cross_power, np.array([lag_y[i], lag_x[j]]), upsample)
    return shifts


def reference_drift_robust(session: Session) -> None:
    """Band-pass, mask large bright outliers, then track the correlation peak frame by frame near the last one."""
    movie = np.asarray(session.namespace["movie"], dtype=np.float64)
    prepared = np.stack([_suppress_outliers(frame) for frame in movie])
    shifts = _track(prepared, upsample=50, max_step=2.0)
    session.namespace["shifts"] = shifts
    session.namespace["corrected"] = _apply(movie, shifts).astype(np.float32)


def baseline_no_correction(session: Session) -> None:
    """The naive baseline: no drift at all (zero shifts) and the raw movie as the registered one."""
    movie = np.asarray(session.namespace["movie"])
    session.namespace["shifts"] = np.zeros((movie.shape[0], 2))
    session.namespace["corrected"] = movie.astype(np.float32)


# --------------------------------------------------------------------------- cases

_LEAVE = (
    f"Leave `shifts`: a float array of shape ({FRAMES}, 2) whose row t is (dy, dx) in pixels, the displacement "
    "of the content of frame t relative to frame 0: a feature at (y, x) in frame 0 is at (y + dy, x + dx) in "
    "frame t, so row 0 is (0, 0) and moving frame t by (-dy, -dx) puts it back onto frame 0. "
    f"Leave `corrected`: a float array of shape ({FRAMES}, {SIZE}, {SIZE}), the movie with every frame moved "
    "back onto frame 0, on the input's intensity scale (do not normalise); pixels that enter from outside the "
    "field may be filled any way."
)

_COLLECT = (
    Collect("shifts", "array", f"({FRAMES}, 2) float, (dy, dx) content displacement of each frame vs frame 0, px"),
    Collect("corrected", "array", f"({FRAMES}, {SIZE}, {SIZE}) float, the registered movie", layer="image", like="movie"),
)
_LAYERS = (Layer("movie", "movie", "image", dim_labels=("t", "y", "x")),)

CASES = [
    Case(
        case_id="beads-subpixel",
        namespace=SKILL_ID,
        task=(
            f"`movie` is a time-lapse of {FRAMES} frames ({SIZE}x{SIZE} px) of fluorescent beads. The whole field "
            "drifts slowly by a smooth, sub-pixel trajectory. Measure the drift to a fraction of a pixel and undo it. "
            + _LEAVE
        ),
        persona="a microscopist who wants a registered bead movie before tracking anything in it",
        fixture=Procedural(
            build_drift,
            seed=11,
            tolerance={"trajectory_rms_error": 0.11, "trajectory_max_error": 0.19, "residual_ratio": 0.43},
        ),
        layers=_LAYERS,
        collect=_COLLECT,
        verify=verify_drift,
        reference=reference_drift,
        baseline=baseline_no_correction,
        baseline_about="no correction: zero shifts and the raw movie",
        case_class="golden",
        about="sub-pixel drift of a bright, textured bead field",
    ),
    Case(
        case_id="low-snr-distractor",
        namespace=SKILL_ID,
        task=(
            f"`movie` is a noisy time-lapse of {FRAMES} frames ({SIZE}x{SIZE} px) of faint fluorescent beads. The "
            "field as a whole drifts by a smooth, sub-pixel trajectory; individual objects in it may also move on "
            "their own, and that motion is not drift. Measure the drift of the field and undo it. " + _LEAVE
        ),
        persona="a microscopist registering a dim, noisy movie of a live sample before measuring anything in it",
        fixture=Procedural(
            build_drift,
            seed=23,
            params={"beads": 220, "bead_amplitude": (10.0, 30.0), "noise": 8.0, "distractor_amplitude": 900.0},
            tolerance={"trajectory_rms_error": 0.62, "trajectory_max_error": 1.2, "residual_ratio": 0.88},
        ),
        layers=_LAYERS,
        collect=_COLLECT,
        verify=verify_drift,
        reference=reference_drift_robust,
        baseline=baseline_no_correction,
        baseline_about="no correction: zero shifts and the raw movie",
        case_class="hard-case",
        about="low-SNR drift with a bright object moving independently (a centroid/max tracker follows it)",
    ),
]

BUILDERS = {"drift-beads": build_drift}
