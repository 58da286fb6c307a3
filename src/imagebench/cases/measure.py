"""calibrated-measurements: physical object volumes from a label volume on anisotropic voxels.

The builder rasterises randomly oriented ellipsoids into a (Z, Y, X) label volume whose voxels
are 2.0 x 0.5 x 0.5 um (the prompt states the spacing, as acquisition metadata would). The truth
is each object's voxel count times the voxel volume. Before the fixture is handed over that
truth is checked against an independent derivation (``skimage.measure.regionprops`` with
``spacing=``) and, loosely, against the analytic ellipsoid volume, so a rasteriser or spacing
mistake fails at build time instead of silently mis-scoring every run.
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
    read_array,
)
from imagebench.fixtures.specs import OnDisk, Procedural

if TYPE_CHECKING:
    from collections.abc import Callable

    from imagebench.case.session import Session

SKILL_ID = "calibrated-measurements"
SPACING: tuple[float, float, float] = (2.0, 0.5, 0.5)  # um per voxel along (z, y, x)
SHAPE: tuple[int, int, int] = (32, 128, 128)
ANALYTIC_TOLERANCE = 0.1  # rasterised ellipsoids this size land within 3% of 4/3 pi a b c (30 seeds)
#: the curated case: StarDist's annotated 3D nuclei, on the voxel size the case states (the TIFFs carry none)
FIXTURE_ROOT = tree.PACKAGED_ROOT
REAL_SPACING: tuple[float, float, float] = (1.0, 0.5, 0.5)
REAL_SHAPE: tuple[int, int, int] = (31, 61, 57)
REAL_OBJECTS = 51

SKILLS = [
    Skill(
        SKILL_ID,
        checklist=(),
        about="Report measurements in physical units, using the voxel spacing of the acquisition.",
    )
]


# --------------------------------------------------------------------------- builder


def _rotation(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random 3-D rotation (QR of a Gaussian matrix, sign-fixed)."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def check_volumes(labels: np.ndarray, spacing: tuple[float, float, float], volumes: np.ndarray) -> None:
    """Second derivation: ``volumes`` must equal regionprops' area with ``spacing=``; raise FixtureError if not."""
    from skimage.measure import regionprops

    props = regionprops(labels, spacing=spacing)
    other = np.zeros_like(volumes)
    for p in props:
        if not 1 <= p.label <= volumes.size:
            raise FixtureError(f"{SKILL_ID}: label {p.label} is outside 1..{volumes.size}")
        other[p.label - 1] = p.area
    bad = np.flatnonzero(~np.isclose(other, volumes, rtol=1e-9, atol=0.0))
    if bad.size:
        i = int(bad[0])
        raise FixtureError(
            f"{SKILL_ID}: truth volume of label {i + 1} is {volumes[i]:.6g} um^3 but regionprops(spacing={spacing}) "
            f"gives {other[i]:.6g} um^3 ({bad.size} label(s) disagree)"
        )


def build_volumes(
    *,
    seed: int,
    shape: tuple[int, int, int] = SHAPE,
    spacing: tuple[float, float, float] = SPACING,
    objects: int = 14,
    semi_axes_um: tuple[float, float] = (5.0, 11.0),
) -> Fixture:
    """Non-overlapping, randomly oriented ellipsoids labelled 1..N in a (Z, Y, X) volume."""
    rng = np.random.default_rng(seed)
    spacing_arr = np.asarray(spacing, dtype=np.float64)
    extent = np.asarray(shape) * spacing_arr  # um
    labels = np.zeros(shape, dtype=np.int32)
    placed: list[tuple[np.ndarray, float]] = []
    analytic: list[float] = []
    attempts = 0
    while len(placed) < objects:
        attempts += 1
        if attempts > 5000:
            raise FixtureError(f"{SKILL_ID}: could not place {objects} objects in a {shape} volume")
        axes = rng.uniform(semi_axes_um[0], semi_axes_um[1], 3)
        radius = float(axes.max())
        centre = rng.uniform(radius + spacing_arr, extent - radius - spacing_arr)
        if any(np.linalg.norm(centre - c) < radius + r + 1.0 for c, r in placed):
            continue
        rot = _rotation(rng)
        lo = np.maximum(np.floor((centre - radius) / spacing_arr - 0.5).astype(int), 0)
        hi = np.minimum(np.ceil((centre + radius) / spacing_arr + 0.5).astype(int) + 1, shape)
        zz, yy, xx = np.meshgrid(*(np.arange(a, b) for a, b in zip(lo, hi)), indexing="ij")
        # Voxel (i, j, k) covers [i, i+1) * spacing: its centre is at (i + 0.5) * spacing.
        pts = (np.stack([zz, yy, xx], axis=-1) + 0.5) * spacing_arr - centre
        local = pts @ rot  # coordinates along the ellipsoid's own axes
        inside = np.sum((local / axes) ** 2, axis=-1) <= 1.0
        box = labels[lo[0] : hi[0], lo[1] : hi[1], lo[2] : hi[2]]
        box[inside] = len(placed) + 1
        placed.append((centre, radius))
        analytic.append(4.0 / 3.0 * np.pi * float(np.prod(axes)))

    voxel_volume = float(np.prod(spacing_arr))
    volumes = np.bincount(labels.ravel(), minlength=objects + 1)[1:].astype(np.float64) * voxel_volume
    check_volumes(labels, spacing, volumes)
    off = np.abs(volumes / np.asarray(analytic) - 1.0)
    if off.max() > ANALYTIC_TOLERANCE:
        i = int(np.argmax(off))
        raise FixtureError(
            f"{SKILL_ID}: object {i + 1} rasterised to {volumes[i]:.1f} um^3, {off[i]:.0%} away from its analytic "
            f"ellipsoid volume {analytic[i]:.1f} um^3 (allowed {ANALYTIC_TOLERANCE:.0%})"
        )
    return Fixture(
        provenance=(
            f"procedural (seed {seed}): {objects} non-overlapping ellipsoids with semi-axes "
            f"{semi_axes_um[0]:g}-{semi_axes_um[1]:g} um and random orientation, rasterised by voxel centre into a "
            f"{shape} label volume with spacing {spacing} um (z, y, x); truth = voxel count x voxel volume, checked "
            "against regionprops(spacing=) and within "
            f"{ANALYTIC_TOLERANCE:.0%} of 4/3 pi a b c"
        ),
        data={"labels": labels},
        truth={"volumes_um3": volumes},
        about=f"{objects} labelled objects on anisotropic {spacing} um voxels",
    )


# --------------------------------------------------------------------------- verifier


def volumes_verifier(spacing: tuple[float, float, float]) -> Callable[[Fixture, Attempt], Outcome]:
    """The volume verifier of a case whose voxels are ``spacing`` um (z, y, x) (used for the voxel-count hint)."""

    def verify(fixture: Fixture, attempt: Attempt) -> Outcome:
        return _verify_volumes(fixture, attempt, spacing)

    verify.__qualname__ = f"volumes_verifier[{spacing}]"
    return verify


def verify_volumes(fixture: Fixture, attempt: Attempt) -> Outcome:
    return _verify_volumes(fixture, attempt, SPACING)


def _verify_volumes(fixture: Fixture, attempt: Attempt, spacing: tuple[float, float, float]) -> Outcome:
    truth = np.asarray(fixture.truth["volumes_um3"], dtype=np.float64)
    labels = np.asarray(fixture.data["labels"])
    limit = fixture.tolerance["volume_relative_error"]
    detail: dict[str, Any] = {"objects": int(truth.size)}
    artifacts: dict[str, Any] = {}
    volumes, why = read_array(attempt, "volumes", shape=truth.shape, dtype="iuf")
    if volumes is None:
        metric = Metric.missing("volume_relative_error", limit, why or "unreadable")
        # Nothing to paint an error on: show the objects that should have been measured.
        artifacts["objects"] = (labels > 0).max(axis=0).astype(np.float32)
    else:
        rel = np.abs(volumes.astype(np.float64) - truth) / truth
        metric = Metric("volume_relative_error", float(rel.max()), limit)
        detail["median_relative_error"] = float(np.median(rel))
        detail["relative_errors"] = [round(float(r), 5) for r in rel]
        ratio = float(np.median(volumes / truth))
        voxel_volume = float(np.prod(spacing))
        if np.isclose(ratio, 1.0 / voxel_volume, rtol=0.02):
            detail["hint"] = "the volumes look like voxel counts: the voxel spacing was not applied"
        # Each object painted with its relative error, seen from above (max over z).
        painted = np.concatenate([[0.0], rel])[labels.astype(np.intp)]
        artifacts["relative_error_map"] = painted.max(axis=0)
    return Outcome(fixture=fixture, attempt=attempt, metrics=[metric], detail=detail, artifacts=artifacts)


# --------------------------------------------------------------------------- reference


def _counts(session: Session) -> np.ndarray:
    labels = np.asarray(session.namespace["labels"])
    n = int(labels.max())
    return np.bincount(labels.ravel().astype(np.int64), minlength=n + 1)[1:].astype(np.float64)


def reference_volumes(session: Session) -> None:
    """Voxel counts per label times the voxel volume from the spacing the task states."""
    session.namespace["volumes"] = _counts(session) * float(np.prod(SPACING))


def reference_real_volumes(session: Session) -> None:
    """As :func:`reference_volumes`, on the curated case's stated spacing."""
    session.namespace["volumes"] = _counts(session) * float(np.prod(REAL_SPACING))


def baseline_voxel_counts(session: Session) -> None:
    """The naive answer: voxel counts, as if the voxels were 1 um cubes (the spacing ignored)."""
    session.namespace["volumes"] = _counts(session)


# --------------------------------------------------------------------------- case

_BASELINE_ABOUT = "voxel counts, the spacing ignored (as if each voxel were 1 um^3)"

CASES = [
    Case(
        case_id="anisotropic-volumes",
        namespace=SKILL_ID,
        task=(
            f"`labels` is a 3-D label volume of shape {SHAPE} (z, y, x) of segmented cells: 0 is background and the "
            "objects are labelled 1..N, N being the largest label. The voxels are not cubic: the spacing is "
            f"{SPACING[0]} um in z, {SPACING[1]} um in y and {SPACING[2]} um in x. Measure each object's physical "
            "volume as its number of voxels times the volume of one voxel. Leave `volumes`: a 1-D float array of "
            "length N in cubic micrometres (um^3), entry i the volume of label i + 1."
        ),
        persona="a cell biologist comparing cell volumes across confocal stacks with different z steps",
        fixture=Procedural(build_volumes, seed=3, tolerance={"volume_relative_error": 0.01}),
        layers=(Layer("labels", "labels", "labels", dim_labels=("z", "y", "x"), scale=SPACING, units="um"),),
        collect=(Collect("volumes", "array", "(N,) float, um^3, entry i for label i + 1"),),
        verify=verify_volumes,
        reference=reference_volumes,
        baseline=baseline_voxel_counts,
        baseline_about=_BASELINE_ABOUT,
        case_class="golden",
        about="per-object volume on anisotropic voxels; voxel counts without the spacing are wrong by 2x",
    ),
    Case(
        case_id="stardist-3d-volumes",
        namespace=SKILL_ID,
        task=(
            f"`labels` is a 3-D label volume of shape {REAL_SHAPE} (z, y, x): the human annotation of real nuclei in "
            "a confocal stack, 0 background and the nuclei labelled 1..N, N being the largest label (nuclei cut by "
            "a face of the stack are measured as far as they are annotated). The voxels are not cubic: the "
            f"spacing is {REAL_SPACING[0]} um in z, {REAL_SPACING[1]} um in y and {REAL_SPACING[2]} um in x. "
            "Measure each object's physical volume as its number of voxels times the volume of one voxel. Leave "
            "`volumes`: a 1-D float array of length N in cubic micrometres (um^3), entry i the volume of label i + 1."
        ),
        persona="a cell biologist comparing nuclear volumes across confocal stacks with different z steps",
        fixture=OnDisk(tolerance={"volume_relative_error": 0.01}, root=FIXTURE_ROOT),
        layers=(Layer("labels", "labels", "labels", dim_labels=("z", "y", "x"), scale=REAL_SPACING, units="um"),),
        collect=(Collect("volumes", "array", "(N,) float, um^3, entry i for label i + 1"),),
        verify=volumes_verifier(REAL_SPACING),
        reference=reference_real_volumes,
        baseline=baseline_voxel_counts,
        baseline_about=_BASELINE_ABOUT,
        case_class="golden",
        about=f"per-nucleus volume of {REAL_OBJECTS} annotated real nuclei (StarDist's 3D stack) on stated voxels",
    ),
]

BUILDERS = {"ellipsoids-anisotropic": build_volumes}
