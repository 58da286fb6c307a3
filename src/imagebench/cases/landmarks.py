"""align-channels-from-landmarks: map probe points from a warped channel into the fixed one.

The moving channel is the fixed field seen through a known smooth warp ``G`` from moving to
fixed pixel coordinates: an affine map plus a small sinusoidal displacement,

    G(p) = A p + b + s(p),   s(p) = (a_r sin(2 pi k_r . p + phi_r), a_c sin(2 pi k_c . p + phi_c)).

Its amplitude is kept small enough that ``|A^-1| * max|Ds| < 1``, so ``G`` is a diffeomorphism and
its inverse is the fixed point of ``p = A^-1 (q - b - s(p))`` (a contraction). Both channels are
rendered analytically (the moving one by evaluating the fixed field at ``G(p)``), landmarks sit on
object centres of the fixed channel and are carried to the moving one by ``G^-1``, and the truth for
each probe in the moving channel is simply ``G(probe)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from imagebench.case.model import Case, Collect, Layer, Skill
from imagebench.cases._overlay import GREEN, MAGENTA, Overlay, answer_legend
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

SKILL_ID = "align-channels-from-landmarks"
CASE_ID = "synthetic-warp"
SIZE = 192
N_LANDMARKS = 18
N_PROBES = 25
INVERSE_TOLERANCE_PX = 1e-6

SKILLS = [
    Skill(
        SKILL_ID,
        checklist=(),
        about="Map points between two channels of one field from landmark pairs, through a smooth non-rigid warp.",
    )
]


# --------------------------------------------------------------------------- the warp


@dataclass(frozen=True)
class Warp:
    """``G(p) = A p + b + s(p)`` from moving (row, col) pixel coordinates to fixed ones."""

    matrix: np.ndarray  # (2, 2)
    offset: np.ndarray  # (2,)
    amplitude: np.ndarray  # (2,) px, one sinusoid per output axis
    wave: np.ndarray  # (2, 2) cycles per px; row i is the wave vector of the sinusoid on axis i
    phase: np.ndarray  # (2,)

    def wobble(self, p: np.ndarray) -> np.ndarray:
        return self.amplitude * np.sin(2.0 * np.pi * (p @ self.wave.T) + self.phase)

    def forward(self, p: np.ndarray) -> np.ndarray:
        """Moving -> fixed, for points of shape (..., 2)."""
        p = np.asarray(p, dtype=np.float64)
        return p @ self.matrix.T + self.offset + self.wobble(p)

    def contraction(self) -> float:
        """An upper bound of the Lipschitz constant of the fixed-point map ``p -> A^-1 (q - b - s(p))``."""
        # |Ds| <= sqrt(sum_i (2 pi a_i |k_i|)^2) (Frobenius bound, every sine at its steepest at once)
        slope = np.sqrt(np.sum((2.0 * np.pi * self.amplitude * np.linalg.norm(self.wave, axis=1)) ** 2))
        return float(np.linalg.norm(np.linalg.inv(self.matrix), 2) * slope)

    def inverse(self, q: np.ndarray, *, tol: float = 1e-12, max_iter: int = 200) -> np.ndarray:
        """Fixed -> moving by fixed-point iteration (converges because ``contraction() < 1``)."""
        q = np.asarray(q, dtype=np.float64)
        a_inv = np.linalg.inv(self.matrix)
        p = (q - self.offset) @ a_inv.T
        for _ in range(max_iter):
            nxt = (q - self.offset - self.wobble(p)) @ a_inv.T
            if np.max(np.abs(nxt - p), initial=0.0) < tol:
                return nxt
            p = nxt
        raise FixtureError(f"warp inverse did not converge in {max_iter} iterations")


def _random_warp(rng: np.random.Generator, size: int, amplitude: float, wavelength: tuple[float, float]) -> Warp:
    angle = np.deg2rad(rng.uniform(-6.0, 6.0))
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    scale = np.diag(rng.uniform(0.95, 1.05, 2))
    shear = np.array([[1.0, rng.uniform(-0.03, 0.03)], [0.0, 1.0]])
    matrix = rot @ scale @ shear
    centre = np.array([size / 2.0, size / 2.0])
    # Rotate about the centre, then translate by up to 8 px.
    offset = centre - matrix @ centre + rng.uniform(-8.0, 8.0, 2)
    lengths = rng.uniform(wavelength[0] * size, wavelength[1] * size, 2)
    heading = rng.uniform(0.0, 2.0 * np.pi, 2)
    wave = np.stack([np.sin(heading), np.cos(heading)], axis=1) / lengths[:, None]
    return Warp(
        matrix=matrix,
        offset=offset,
        amplitude=rng.uniform(0.7, 1.0, 2) * amplitude,
        wave=wave,
        # Put an extremum of each sinusoid near the middle of the field, so the bend is not nearly affine there.
        phase=np.pi / 2.0 - 2.0 * np.pi * (wave @ centre) + rng.uniform(-0.5, 0.5, 2),
    )


def check_inverse(warp: Warp, points: np.ndarray, inverse_points: np.ndarray) -> float:
    """Second derivation: ``forward(inverse(q))`` must give ``q`` back; raise FixtureError otherwise."""
    err = float(np.max(np.linalg.norm(warp.forward(inverse_points) - points, axis=-1), initial=0.0))
    if not err <= INVERSE_TOLERANCE_PX:
        raise FixtureError(
            f"{SKILL_ID}: forward(inverse(q)) misses q by {err:.3g} px (allowed {INVERSE_TOLERANCE_PX:g}); "
            "the probe truth would be wrong"
        )
    return err


# --------------------------------------------------------------------------- rendering


def _render(
    where: np.ndarray, near: np.ndarray, centres: np.ndarray, sigma: np.ndarray, amplitude: np.ndarray
) -> np.ndarray:
    """Sum of isotropic Gaussians placed at ``centres`` (fixed-channel coordinates), sampled at ``where``.

    ``where`` (Y, X, 2) holds, for each pixel of the image being drawn, its position in fixed coordinates;
    ``near`` (objects, 2) is where each object appears in that image. Each object is evaluated only in a
    window of 6 sigma (plus slack for the warp) around it, which loses less than 1e-5 of its amplitude.
    """
    shape = where.shape[:2]
    out = np.zeros(shape)
    for c, n, s, a in zip(centres, near, sigma, amplitude):
        r = int(np.ceil(6.0 * s * 1.2)) + 1
        y0, x0 = max(int(n[0]) - r, 0), max(int(n[1]) - r, 0)
        y1, x1 = min(int(n[0]) + r + 1, shape[0]), min(int(n[1]) + r + 1, shape[1])
        if y0 >= y1 or x0 >= x1:
            continue
        w = where[y0:y1, x0:x1]
        d2 = (w[..., 0] - c[0]) ** 2 + (w[..., 1] - c[1]) ** 2
        out[y0:y1, x0:x1] += a * np.exp(-0.5 * d2 / (s * s))
    return out


def _inside_hull(points: np.ndarray, hull_points: np.ndarray) -> np.ndarray:
    from scipy.spatial import Delaunay

    return Delaunay(hull_points).find_simplex(points) >= 0


# --------------------------------------------------------------------------- builder


def build_landmarks(
    *,
    seed: int,
    size: int = SIZE,
    objects: int = 70,
    landmarks: int = N_LANDMARKS,
    probes: int = N_PROBES,
    wobble_px: float = 4.0,
    wavelength: tuple[float, float] = (1.0, 1.5),
    localisation_px: float = 0.25,
    noise: float = 3.0,
) -> Fixture:
    """A fixed channel, a warped moving channel, landmark pairs and probe points with their true images."""
    rng = np.random.default_rng(seed)
    warp = _random_warp(rng, size, wobble_px, wavelength)
    lip = warp.contraction()
    if not lip < 0.5:
        raise FixtureError(f"{SKILL_ID}: warp is too strong to be safely invertible (contraction bound {lip:.3f})")

    # Object centres in fixed coordinates, kept apart so landmarks are unambiguous.
    centres: list[np.ndarray] = []
    while len(centres) < objects:
        c = rng.uniform(8.0, size - 8.0, 2)
        if all(np.hypot(*(c - o)) > 12.0 for o in centres):
            centres.append(c)
    centre_arr = np.array(centres)
    sigma = rng.uniform(2.5, 4.5, objects)
    amp_fixed = rng.uniform(60.0, 140.0, objects)
    amp_moving = amp_fixed * rng.uniform(0.6, 1.4, objects)  # another stain of the same structures

    axis = np.arange(size, dtype=np.float64)
    grid = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1)
    where_moving = warp.inverse(centre_arr)  # where each object appears in the moving channel
    fixed = _render(grid, centre_arr, centre_arr, sigma, amp_fixed) + 20.0 + rng.normal(0.0, noise, (size, size))
    moving = _render(warp.forward(grid), where_moving, centre_arr, sigma, amp_moving)
    moving += 20.0 + rng.normal(0.0, noise, (size, size))

    # Landmarks: object centres well inside both channels.
    ok = np.all((centre_arr > 12.0) & (centre_arr < size - 12.0), axis=1) & np.all(
        (where_moving > 12.0) & (where_moving < size - 12.0), axis=1
    )
    candidates = np.flatnonzero(ok)
    if candidates.size < landmarks:
        raise FixtureError(f"{SKILL_ID}: only {candidates.size} objects usable as landmarks, need {landmarks}")
    chosen = rng.choice(candidates, size=landmarks, replace=False)
    lm_fixed_true = centre_arr[chosen]
    lm_moving_true = where_moving[chosen]
    check_inverse(warp, lm_fixed_true, lm_moving_true)

    # Probes: anywhere inside the landmarks' hull in the moving channel (interpolation, not extrapolation).
    probe_list: list[np.ndarray] = []
    while len(probe_list) < probes:
        batch = rng.uniform(0.0, size - 1.0, (4 * probes, 2))
        probe_list.extend(batch[_inside_hull(batch, lm_moving_true)])
    probes_moving = np.array(probe_list[:probes])
    probes_true = warp.forward(probes_moving)
    check_inverse(warp, probes_true, warp.inverse(probes_true))

    lm_fixed = lm_fixed_true + rng.normal(0.0, localisation_px, lm_fixed_true.shape)
    lm_moving = lm_moving_true + rng.normal(0.0, localisation_px, lm_moving_true.shape)
    return Fixture(
        provenance=(
            f"procedural (seed {seed}): {objects} Gaussian objects rendered analytically in a fixed channel and, "
            f"with other brightnesses, in a moving channel seen through an affine (rotation +-6 deg, scale 0.95-1.05, "
            f"shear, shift +-8 px) plus sinusoid (amplitude <= {wobble_px:g} px, wavelength "
            f"{wavelength[0]:g}-{wavelength[1]:g} field widths, an extremum near the middle) warp; "
            f"{landmarks} landmarks on object centres with {localisation_px:g} px localisation noise per channel; "
            f"{probes} probes inside the landmarks' hull; the warp inverse (fixed-point iteration, contraction "
            f"bound {lip:.3f}) is checked by forward(inverse(q)) = q to {INVERSE_TOLERANCE_PX:g} px"
        ),
        data={
            "fixed": fixed.astype(np.float32),
            "moving": moving.astype(np.float32),
            "landmarks_fixed": lm_fixed,
            "landmarks_moving": lm_moving,
            "probes_moving": probes_moving,
        },
        truth={"probes_fixed_true": probes_true},
        about=f"two {size}x{size} channels related by a smooth non-rigid warp, {landmarks} landmark pairs",
    )


# --------------------------------------------------------------------------- verifier


def verify_landmarks(fixture: Fixture, attempt: Attempt) -> Outcome:
    truth = np.asarray(fixture.truth["probes_fixed_true"], dtype=np.float64)
    tol = fixture.tolerance
    artifacts: dict[str, Any] = {
        "fixed": np.asarray(fixture.data["fixed"]),
        "moving": np.asarray(fixture.data["moving"]),
    }
    detail: dict[str, Any] = {"probes": int(truth.shape[0])}
    names = ("median_probe_error", "worst_probe_error")
    predicted, why = read_array(attempt, "probes_fixed", shape=truth.shape, dtype="iuf")
    if predicted is None:
        metrics = [Metric.missing(n, tol[n], why or "unreadable", "px") for n in names]
    else:
        err = np.linalg.norm(predicted.astype(np.float64) - truth, axis=1)
        metrics = [
            Metric("median_probe_error", float(np.median(err)), tol["median_probe_error"], "px"),
            Metric("worst_probe_error", float(err.max()), tol["worst_probe_error"], "px"),
        ]
        detail["probe_errors_px"] = [round(float(e), 3) for e in err]
        swapped = np.linalg.norm(predicted[:, ::-1].astype(np.float64) - truth, axis=1)
        if np.median(swapped) < 0.5 * np.median(err):
            detail["hint"] = "the columns look swapped: points are (row, col), napari's order"
    artifacts["probes"] = _draw_probes(artifacts["fixed"], truth, predicted)
    detail["drawn"] = (
        "probes: the fixed channel with each probe's true position (green circle) and the answered one "
        "(magenta cross, joined to its truth by a magenta line); the legend under it names the colours"
    )
    return Outcome(fixture=fixture, attempt=attempt, metrics=metrics, detail=detail, artifacts=artifacts)


def _draw_probes(fixed: np.ndarray, truth: np.ndarray, predicted: np.ndarray | None) -> np.ndarray:
    view = Overlay(fixed)
    if predicted is not None:
        for t, p in zip(truth, predicted, strict=True):
            view.line(t, p, MAGENTA)
    for t in truth:
        view.circle(t, 3, GREEN)
    if predicted is not None:
        for p in predicted:
            view.cross(p, 2, MAGENTA)
    view.legend(answer_legend(predicted is not None))
    return view.rgb


# --------------------------------------------------------------------------- reference


def fit_affine(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares affine ``dst ~ [src, 1] @ M``; returns M of shape (3, 2)."""
    design = np.hstack([src, np.ones((src.shape[0], 1))])
    coef, *_ = np.linalg.lstsq(design, dst, rcond=None)
    return coef


def reference_landmarks(session: Session) -> None:
    """Affine least squares from the landmarks, then a smoothed thin-plate spline on what it leaves."""
    from scipy.interpolate import RBFInterpolator

    src = np.asarray(session.namespace["landmarks_moving"], dtype=np.float64)
    dst = np.asarray(session.namespace["landmarks_fixed"], dtype=np.float64)
    probes = np.asarray(session.namespace["probes_moving"], dtype=np.float64)
    coef = fit_affine(src, dst)

    def affine(p: np.ndarray) -> np.ndarray:
        return np.hstack([p, np.ones((p.shape[0], 1))]) @ coef

    residual = RBFInterpolator(src, dst - affine(src), kernel="thin_plate_spline", smoothing=1.0)
    session.namespace["probes_fixed"] = affine(probes) + residual(probes)


def baseline_identity(session: Session) -> None:
    """The naive baseline: the identity map (each probe answered where it is in the moving channel)."""
    session.namespace["probes_fixed"] = np.array(session.namespace["probes_moving"], dtype=np.float64, copy=True)


# --------------------------------------------------------------------------- case

CASES = [
    Case(
        case_id=CASE_ID,
        namespace=SKILL_ID,
        task=(
            f"Two channels of the same {SIZE}x{SIZE} px field are misaligned: `moving` is `fixed` seen through a "
            "smooth, slightly non-rigid warp. `landmarks_fixed` and `landmarks_moving` are points layers of the "
            f"same shape ({N_LANDMARKS}, 2): row i of each marks the same object in the two channels (clicked by "
            "hand, so each is off by a fraction of a pixel). `probes_moving` is a points layer of shape "
            f"({N_PROBES}, 2) in the moving channel. All points are (row, col) pixel coordinates, napari's order. "
            f"Leave `probes_fixed`: a float array of shape ({N_PROBES}, 2), row j the (row, col) position in the "
            "fixed channel of the point at row j of `probes_moving`."
        ),
        persona="a cell biologist whose two cameras disagree by more than an affine map can explain",
        fixture=Procedural(
            build_landmarks,
            seed=5,
            tolerance={"median_probe_error": 1.1, "worst_probe_error": 2.5},
        ),
        layers=(
            Layer("fixed", "fixed", "image", colormap="green", blending="additive"),
            Layer("moving", "moving", "image", colormap="magenta", blending="additive"),
            Layer("landmarks_fixed", "landmarks_fixed", "points", ordered=True),
            Layer("landmarks_moving", "landmarks_moving", "points", ordered=True),
            Layer("probes_moving", "probes_moving", "points", ordered=True),
        ),
        collect=(
            Collect(
                "probes_fixed", "array", f"({N_PROBES}, 2) float, (row, col) in the fixed channel, px",
                layer="points", like="fixed", ordered=True, pairs="probes_moving",
            ),
        ),  # fmt: skip
        verify=verify_landmarks,
        reference=reference_landmarks,
        baseline=baseline_identity,
        baseline_about="the identity map: probes_fixed = probes_moving",
        case_class="golden",
        about="landmark-based alignment through an affine-plus-sinusoid warp; probes scored in px",
    )
]

BUILDERS = {"landmarks-affine-sinusoid": build_landmarks}
