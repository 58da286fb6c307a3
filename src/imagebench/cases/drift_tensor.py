"""drift-correction, presented as a tensor: measure the drift of a large field read lazily off the data plane.

The movie is too large to be worth copying into every session (8 frames of 1024x1024 uint16,
16 MiB): the harness uploads it once per run to the data plane, chunked (1, 256, 256) with
dim_labels ("t", "y", "x"), and the subject gets only its id, ``fixture_tensors["movie"]``, and a
client. Reading the whole movie works; reading a central crop of each frame is enough, and is what
the reference does.

The builder makes one band-limited random texture (white noise shaped by a Gaussian spectrum,
so an exact sub-pixel Fourier shift of it has no interpolation error), shifts it by the frame's
displacement in the Fourier domain, crops the field of view away from the wrapped border, and
adds read noise. Sign convention as in :mod:`imagebench.cases.drift`: ``shifts[t] = (dy, dx)`` is
the displacement of the content of frame ``t`` relative to frame 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.fft

from imagebench.case.model import Case, Collect, Layer, Skill
from imagebench.cases.drift import trajectory_metrics
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
FRAMES = 8
SIZE = 1024
CHUNKS = (1, 256, 256)
DIM_LABELS = ("t", "y", "x")
PAD = 48  # texture beyond the field of view on each side: more than any drift, so nothing wraps in
CROP = 512  # the reference reads this central square of each frame (4 of its 16 chunks)
ARTIFACT = 256  # side of the central square shown in the artifacts

# The skill (and its checklist ("dask", "tensor")) is declared by imagebench.cases.drift.
SKILLS: list[Skill] = []


# --------------------------------------------------------------------------- builder


def _trajectory(rng: np.random.Generator, frames: int, max_drift: float) -> np.ndarray:
    """A random walk with a steady creep, zero at frame 0, clipped to ``max_drift`` px per axis. (frames, 2)."""
    heading = rng.uniform(0.0, 2.0 * np.pi)
    creep = rng.uniform(1.0, 2.5) * np.array([np.sin(heading), np.cos(heading)])
    steps = creep + rng.normal(0.0, 1.2, (frames - 1, 2))
    path = np.vstack([np.zeros((1, 2)), np.cumsum(steps, axis=0)])
    return np.clip(path, -max_drift, max_drift)


def build_large_field(
    *,
    seed: int,
    frames: int = FRAMES,
    size: int = SIZE,
    texture_sigma: float = 2.5,
    contrast: float = 600.0,
    offset: float = 1500.0,
    noise: float = 40.0,
) -> Fixture:
    """A drifting textured field (frames, size, size) uint16 with its exact sub-pixel trajectory."""
    if frames < 2 or size < 128 or size % 2:
        raise FixtureError(f"build_large_field: need frames >= 2 and an even size >= 128, got {frames}, {size}")
    rng = np.random.default_rng(seed)
    trajectory = _trajectory(rng, frames, max_drift=PAD - 8)
    full = size + 2 * PAD
    fy = np.fft.fftfreq(full)[:, None]
    fx = np.fft.rfftfreq(full)[None, :]
    # White noise shaped by a Gaussian transfer function: a band-limited texture (its spectrum,
    # kept in the Fourier domain so every frame is an exact shift of the same continuous field).
    # Single precision throughout: the frames are rounded to uint16, far coarser than float32.
    spectrum = scipy.fft.rfft2(rng.standard_normal((full, full), dtype=np.float32))
    spectrum *= np.exp(-2.0 * (np.pi * texture_sigma) ** 2 * (fy**2 + fx**2)).astype(np.float32)
    spectrum[0, 0] = 0.0
    scale = None
    movie = np.empty((frames, size, size), dtype=np.uint16)
    inner = (slice(PAD, PAD + size), slice(PAD, PAD + size))
    for k, (dy, dx) in enumerate(trajectory):
        ramp = np.exp(-2j * np.pi * (fy * dy)).astype(np.complex64) * np.exp(-2j * np.pi * (fx * dx)).astype(np.complex64)
        frame = scipy.fft.irfft2(spectrum * ramp, s=(full, full))[inner]
        if scale is None:
            scale = contrast / float(frame.std())
        frame = offset + scale * frame + noise * rng.standard_normal(frame.shape, dtype=np.float32)
        movie[k] = np.clip(np.rint(frame), 0, 65535).astype(np.uint16)
    # Cross-check the construction: frame 1 is frame 0 moved by the trajectory's first step (to within noise).
    if frames > 1:
        a = movie[0, PAD : PAD + 64, PAD : PAD + 64].astype(np.float64)
        iy, ix = np.rint(trajectory[1]).astype(int)
        b = movie[1, PAD + iy : PAD + iy + 64, PAD + ix : PAD + ix + 64].astype(np.float64)
        if np.corrcoef(a.ravel(), b.ravel())[0, 1] < 0.5:
            raise FixtureError(f"build_large_field(seed={seed}): frame 1 does not follow the trajectory it was built with")
    return Fixture(
        provenance=(
            f"procedural (seed {seed}): a band-limited random texture (white noise through a Gaussian transfer "
            f"function, sigma {texture_sigma:g} px, contrast {contrast:g} on an offset of {offset:g}) shifted per "
            f"frame in the Fourier domain by a random-walk drift with a steady creep (at most {PAD - 8} px per "
            f"axis), cropped {PAD} px inside the wrapped border, plus Gaussian read noise sigma {noise:g}; "
            "rounded to uint16"
        ),
        data={"movie": movie},
        truth={"trajectory": trajectory},
        about=f"a {frames}-frame {size}x{size} uint16 textured field with a known sub-pixel drift",
    )


# --------------------------------------------------------------------------- verifier


def verify_large_field(fixture: Fixture, attempt: Attempt) -> Outcome:
    truth = np.asarray(fixture.truth["trajectory"], dtype=np.float64)
    tol = fixture.tolerance
    frames = truth.shape[0]
    metrics: list[Metric] = []
    detail: dict[str, Any] = {"frames": frames}
    # What a person compares: the mean over time of a central square, raw and moved back by the
    # subject's shifts (both on the movie's intensity scale, so one shared contrast range fits).
    movie = fixture.data["movie"]
    h, w = movie.shape[1:]
    y0, x0 = (h - ARTIFACT) // 2, (w - ARTIFACT) // 2
    crops = np.asarray(movie[:, y0 : y0 + ARTIFACT, x0 : x0 + ARTIFACT], dtype=np.float64)
    artifacts: dict[str, Any] = {"raw_mean": crops.mean(axis=0)}
    shifts, why = read_array(attempt, "shifts", shape=(frames, 2), dtype="iuf")
    if shifts is None:
        for name in ("trajectory_rms_error", "trajectory_max_error"):
            metrics.append(Metric.missing(name, tol[name], why or "unreadable", "px"))
        return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)
    shifts = shifts.astype(np.float64)
    from scipy import ndimage

    artifacts["corrected_mean"] = np.mean(
        [ndimage.shift(c, -s, order=1, mode="nearest") for c, s in zip(crops, shifts, strict=True)], axis=0
    )
    metrics += trajectory_metrics(shifts, truth, tol, detail)
    return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)


# --------------------------------------------------------------------------- reference


def reference_large_field(session: Session) -> None:
    """Read a central crop of each frame lazily through the plane's client; phase-correlate against frame 0."""
    from skimage.filters import window
    from skimage.registration import phase_cross_correlation

    client = session.client
    if client is None:
        raise RuntimeError("this case presents its movie on the data plane, and the session has no client")
    movie = client.get(session.namespace["fixture_tensors"]["movie"])  # lazy: nothing is read yet
    t, h, w = movie.shape
    y0, x0 = (h - CROP) // 2, (w - CROP) // 2
    crops = np.asarray(movie[:, y0 : y0 + CROP, x0 : x0 + CROP].compute(scheduler="threads"), dtype=np.float64)
    crops -= crops.mean(axis=(1, 2), keepdims=True)
    taper = window("hann", crops.shape[1:])
    ref = crops[0] * taper
    shifts = np.zeros((t, 2))
    for k in range(1, t):
        register, _, _ = phase_cross_correlation(ref, crops[k] * taper, upsample_factor=50, normalization=None)
        shifts[k] = -register  # skimage answers the shift that registers the frame; we report the content's motion
    session.namespace["shifts"] = shifts


def baseline_no_drift(session: Session) -> None:
    """The naive baseline: no drift at all (zero shifts), without reading a pixel."""
    session.namespace["shifts"] = np.zeros((FRAMES, 2))


# --------------------------------------------------------------------------- the case

CASES = [
    Case(
        case_id="large-field-tensor",
        namespace=SKILL_ID,
        task=(
            f"A time-lapse of {FRAMES} frames of {SIZE}x{SIZE} px (uint16, axes t, y, x) of a textured field is "
            "on the data plane, not in memory: its id is `fixture_tensors['movie']`. In Python, the session's "
            "client (`session.client`) reads it: `client.get(fixture_tensors['movie'])` is a lazy dask array "
            "(chunks of 1x256x256, fetched on demand) and `client.levels(...)` the multiscale pyramid; a command "
            "finds the plane's address in "
            "$IMAGEBENCH_TENSOR_URL (connect with `imagebench.plane.Client(url)`) and the id in "
            "fixture_tensors.json. The whole field drifts by a sub-pixel trajectory of up to tens of pixels. "
            f"Leave `shifts`: a float array of shape ({FRAMES}, 2) whose row t is (dy, dx) in pixels, the "
            "displacement of the content of frame t relative to frame 0 (a feature at (y, x) in frame 0 is at "
            "(y + dy, x + dx) in frame t; row 0 is (0, 0))."
        ),
        persona="an imaging scientist whose acquisitions are too large to load whole, working through the data plane",
        fixture=Procedural(
            build_large_field,
            seed=5,
            # Calibrated against the reference over seeds 0-9: worst rms 0.0119 px, worst max 0.0202 px;
            # limits are about 4x those, so a careful sub-pixel method passes while a whole-pixel
            # estimate (rms >= 0.30 px on the same seeds) does not. See docs/cases.md.
            tolerance={"trajectory_rms_error": 0.05, "trajectory_max_error": 0.08},
        ),
        layers=(
            Layer("movie", "movie", "image", presentation="tensor", chunks=CHUNKS, dim_labels=DIM_LABELS),
        ),
        collect=(
            Collect("shifts", "array", f"({FRAMES}, 2) float, (dy, dx) content displacement of each frame vs frame 0, px"),
        ),
        verify=verify_large_field,
        reference=reference_large_field,
        baseline=baseline_no_drift,
        baseline_about="no drift: zero shifts",
        case_class="golden",
        timeout_s=120.0,
        about="sub-pixel drift of a large uint16 field read lazily, chunk by chunk, from the data plane",
    ),
]

BUILDERS = {"drift-large-field": build_large_field}
