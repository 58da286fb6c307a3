"""Built-in structured-answer cases: the subject answers with one JSON object, scored field by field.
Long because it is a catalogue: one contract, builder and reference per structured case.

Each case's ``answer`` is a :class:`imagebench.scoring.TaskContract` whose ground truth refers
to the fixture's held-out truth (``{"from_truth": key}``), so the case carries no answer; the
verifier is :func:`imagebench.scoring.structured_verifier` followed by a drawing (:func:`drawn`).
A subject leaves ``answer`` (a dict bound in the namespace, ``outputs/answer.json`` for a
command) or ends its final message with a line ``IMAGEBENCH_FINAL_JSON: {...}``.

- ``segment-nuclei/count-nuclei``: how many nuclei (``integer_equal``);
- ``drift-correction/drift-vector``: the sub-pixel shift between two frames (``vector_abs_tolerance``);
- ``fibre-angle/synthetic-lines``: the dominant fibre orientation, modulo 180 degrees (``circular_tolerance``);
- ``pick-a-nucleus/synthetic-volume``: one voxel inside the largest nucleus of a volume (``voxel_member_of_set``).

Field tolerances were calibrated against the reference solutions over seeds 0-9 (see
``docs/scoring.md``): each limit is the stated margin times the worst reference error.

After scoring, each verifier draws the answer and the truth on the case's image (green the
truth, magenta the answer; see :mod:`imagebench.cases._overlay`) as the outcome's artifact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from imagebench.case.model import Case, Collect, Layer, Skill
from imagebench.cases._overlay import GREEN, MAGENTA, Overlay, answer_legend, numbers
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError, Outcome
from imagebench.fixtures.specs import Procedural
from imagebench.scoring.answer import parse_answer
from imagebench.scoring.comparators import pack_region, unpack_region
from imagebench.scoring.contract import (
    FieldRule,
    ScorerSpec,
    TaskContract,
    read_leaving,
    structured_verifier,
)

if TYPE_CHECKING:
    from imagebench.case.session import Session

SEGMENT = "segment-nuclei"
DRIFT = "drift-correction"
PICK = "pick-a-nucleus"
FIBRE = "fibre-angle"
# segment-nuclei and drift-correction are declared by their own modules
SKILLS: list[Skill] = [
    Skill(PICK, checklist=(), about="point at one named object (the largest nucleus) of a 3D stack with a voxel index"),
    Skill(FIBRE, checklist=(), about="Measure the dominant orientation of an oriented texture, modulo 180 degrees."),
]

#: a structured answer passes only when every field matches
TOLERANCE = {"answer_mismatch": 0.0}

# Calibrated field tolerances (reference worst over seeds 0-9, times the margin in docs/scoring.md).
DRIFT_TOLERANCE_PX = 0.1
FIBRE_TOLERANCE_DEG = 2.0

_FINAL = (
    "Leave `answer`: a JSON object (a dict bound as `answer`; a command writes outputs/answer.json, or ends "
    "its final message with the line `IMAGEBENCH_FINAL_JSON: {{...}}`). It must hold these fields: {fields}. "
    "Nothing is read out of prose, and types count: an integer is not a string."
)


def _contract(task_id: str, contract: str, fields: dict[str, tuple[str, dict[str, Any], str]]) -> TaskContract:
    return TaskContract(
        task_id=task_id,
        answer_schema={name: FieldRule(comparator=cmp, config=cfg) for name, (cmp, cfg, _) in fields.items()},
        ground_truth={name: {"from_truth": key} for name, (_, _, key) in fields.items()},
        scorer=ScorerSpec(contract=contract),
        evaluation_eligible=True,
    )


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _smooth(image: np.ndarray, sigma: float) -> np.ndarray:
    from scipy import ndimage as ndi

    return ndi.gaussian_filter(image, sigma)


# --------------------------------------------------------------------------- count nuclei


def _place(rng: np.random.Generator, n: int, radii: np.ndarray, shape: tuple[int, ...], gap: float) -> np.ndarray:
    """Centres for ``n`` objects of the given radii, none closer than the sum of radii plus ``gap``."""
    centres: list[np.ndarray] = []
    for r in radii:
        for _ in range(2000):
            c = np.array([rng.uniform(r + 3, s - r - 3) for s in shape])
            if all(np.linalg.norm(c - o) > r + ro + gap for o, ro in zip(centres, radii, strict=False)):
                centres.append(c)
                break
        else:
            raise FixtureError(f"could not place {n} separated objects in {shape}")
    return np.array(centres)


def build_count_nuclei(*, seed: int, size: int = 128, low: int = 6, high: int = 14) -> Fixture:
    """A 2D fluorescence-like image of ``low``..``high`` separated nuclei on a noisy background."""
    from scipy import ndimage as ndi

    rng = _rng(seed)
    n = int(rng.integers(low, high + 1))
    radii = rng.uniform(4.0, 7.0, size=n)
    centres = _place(rng, n, radii, (size, size), gap=5.0)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    clean = np.zeros((size, size))
    for (cy, cx), r, amp in zip(centres, radii, rng.uniform(0.6, 1.0, size=n), strict=True):
        d2 = ((yy - cy) ** 2 + (xx - cx) ** 2) / r**2
        clean = np.maximum(clean, amp * np.exp(-(d2**2)))
    image = (0.1 + clean + rng.normal(0.0, 0.05, clean.shape)).astype(np.float32)
    # Cross-check: the noiseless image has exactly n separate bright objects.
    _, found = ndi.label(clean > 0.25)
    if found != n:
        raise FixtureError(f"count-nuclei seed {seed}: drew {n} nuclei but the noiseless image shows {found}")
    return Fixture(
        provenance=f"{n} flat-topped Gaussian nuclei (radius 4-7 px, >= 5 px apart) on 0.1 + N(0, 0.05), seed {seed}",
        data={"nuclei": image},
        truth={"count": n},
        about="count separated nuclei in a noisy 2D image",
    )


def baseline_count_nuclei(session: Session) -> None:
    """The naive count: connected components of the raw image above its mean, no smoothing, no size filter."""
    from scipy import ndimage as ndi

    image = np.asarray(session.namespace["nuclei"], dtype=np.float64)
    _, n = ndi.label(image > image.mean())
    session.namespace["answer"] = {"count": int(n)}


def reference_count_nuclei(session: Session) -> None:
    from scipy import ndimage as ndi
    from skimage.filters import threshold_otsu

    image = _smooth(np.asarray(session.namespace["nuclei"], dtype=np.float64), 1.0)
    labels, _ = ndi.label(image > threshold_otsu(image))
    sizes = np.bincount(labels.ravel())[1:]
    session.namespace["answer"] = {"count": int(np.sum(sizes >= 12))}


# --------------------------------------------------------------------------- drift vector


def _shift_field(field: np.ndarray, shift: tuple[float, float]) -> np.ndarray:
    from scipy import ndimage as ndi

    return np.fft.ifftn(ndi.fourier_shift(np.fft.fftn(field), shift)).real


def build_drift_vector(*, seed: int, size: int = 96, max_shift: float = 6.0, min_shift: float = 1.5) -> Fixture:
    """Two frames of one textured field, the second moved by a known sub-pixel (dy, dx)."""
    from scipy import ndimage as ndi

    rng = _rng(seed)
    pad = 16
    full = size + 2 * pad
    field = _smooth(rng.normal(size=(full, full)), 2.0)
    field = (field - field.min()) / (field.max() - field.min())
    magnitudes = rng.uniform(min_shift, max_shift, size=2)
    shift = tuple(float(round(m * s, 3)) for m, s in zip(magnitudes, rng.choice([-1.0, 1.0], size=2), strict=True))
    moved = _shift_field(field, shift)
    crop = np.s_[pad : pad + size, pad : pad + size]
    noise = 0.01
    reference = (field[crop] + rng.normal(0, noise, (size, size))).astype(np.float32)
    moving = (moved[crop] + rng.normal(0, noise, (size, size))).astype(np.float32)
    # Cross-check: moving the second frame back by the truth reproduces the first (away from the edges).
    back = ndi.shift(moved[crop], (-shift[0], -shift[1]), order=3, mode="nearest")
    inner = np.s_[8:-8, 8:-8]
    err = float(np.sqrt(np.mean((back[inner] - field[crop][inner]) ** 2)))
    if err > 0.02:
        raise FixtureError(f"drift-vector seed {seed}: undoing shift {shift} leaves RMS {err:.4f}; truth inconsistent")
    return Fixture(
        provenance=(
            f"smoothed Gaussian noise field (sigma 2 px), second frame Fourier-shifted by {shift} px "
            f"(rows, cols), both cropped to {size}x{size} with N(0, {noise}) noise, seed {seed}"
        ),
        data={"frames": np.stack([reference, moving])},
        truth={"shift": [shift[0], shift[1]]},
        about="sub-pixel translation between two frames",
    )


def baseline_drift_vector(session: Session) -> None:
    """The naive baseline: no drift (a zero shift)."""
    session.namespace["answer"] = {"shift": [0.0, 0.0]}


def reference_drift_vector(session: Session) -> None:
    """Cross-correlation for a first estimate, then least squares: move frame 1 back by a candidate
    shift (cubic spline) and minimise its squared difference from frame 0 away from the edges."""
    from scipy import ndimage as ndi
    from scipy import optimize
    from skimage.registration import phase_cross_correlation

    frames = np.asarray(session.namespace["frames"], dtype=np.float64)
    found, _, _ = phase_cross_correlation(frames[0], frames[1], upsample_factor=10, normalization=None)
    inner = np.s_[10:-10, 10:-10]

    def cost(s: np.ndarray) -> float:
        back = ndi.shift(frames[1], (-s[0], -s[1]), order=3, mode="nearest")
        return float(np.mean((back[inner] - frames[0][inner]) ** 2))

    # found moves frame 1 back onto frame 0; the drift of frame 1 is its negative
    best = optimize.minimize(cost, -found, method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-12})
    session.namespace["answer"] = {"shift": [round(float(best.x[0]), 4), round(float(best.x[1]), 4)]}


# --------------------------------------------------------------------------- fibre angle


def _fibre_texture(rng: np.random.Generator, size: int, theta_deg: float, count: int) -> tuple[np.ndarray, float]:
    """Blurred anti-aliased segments near ``theta_deg``; also the mean direction of the segments
    as drawn (their rounded end points, weighted by length and brightness, averaged as doubled
    angles), which is what the image actually shows."""
    from skimage.draw import line_aa

    margin = 20
    canvas = np.zeros((size + 2 * margin, size + 2 * margin))
    doubled = 0j
    for _ in range(count):
        t = np.deg2rad(theta_deg + rng.normal(0.0, 2.0))
        length = rng.uniform(20, 60)
        cy, cx = rng.uniform(0, size + 2 * margin, size=2)
        dy, dx = -np.sin(t) * length / 2, np.cos(t) * length / 2  # rows grow downwards
        r0, c0, r1, c1 = (int(round(v)) for v in (cy - dy, cx - dx, cy + dy, cx + dx))
        rr, cc, val = line_aa(r0, c0, r1, c1)
        keep = (rr >= 0) & (rr < canvas.shape[0]) & (cc >= 0) & (cc < canvas.shape[1])
        brightness = rng.uniform(0.5, 1.0)
        canvas[rr[keep], cc[keep]] += val[keep] * brightness
        inside = (rr[keep] >= margin) & (rr[keep] < size + margin) & (cc[keep] >= margin) & (cc[keep] < size + margin)
        drawn = np.arctan2(-(r1 - r0), c1 - c0)  # displayed counter-clockwise angle of this segment
        doubled += np.count_nonzero(inside) * brightness * np.exp(2j * drawn)
    mean = float(np.rad2deg(np.angle(doubled) / 2) % 180.0)
    return _smooth(canvas, 1.0)[margin:-margin, margin:-margin], mean


def _orientation_structure_tensor(image: np.ndarray, sigma: float = 1.5) -> float:
    """Dominant fibre direction in degrees (counter-clockwise from +x, rows pointing down), mod 180,
    from the image-wide structure tensor of Gaussian-derivative gradients."""
    from scipy import ndimage as ndi

    gx = ndi.gaussian_filter(image, sigma, order=(0, 1))
    gy = ndi.gaussian_filter(image, sigma, order=(1, 0))
    jxx, jyy, jxy = np.mean(gx * gx), np.mean(gy * gy), np.mean(gx * gy)
    gradient = 0.5 * np.arctan2(2 * jxy, jxx - jyy)  # dominant gradient, in (col, row-down) axes
    return float(np.rad2deg(-(gradient + np.pi / 2)) % 180.0)


def _orientation_spectrum(image: np.ndarray) -> float:
    """Second derivation: the principal axis of the power spectrum is perpendicular to the fibres."""
    power = np.abs(np.fft.fftshift(np.fft.fft2(image - image.mean()))) ** 2
    n = image.shape[0]
    fy, fx = np.mgrid[0:n, 0:n] - n // 2
    fy = -fy  # spectrum rows also point down; flip to "up"
    w = power / power.sum()
    cxx, cyy, cxy = np.sum(w * fx * fx), np.sum(w * fy * fy), np.sum(w * fx * fy)
    axis = 0.5 * np.arctan2(2 * cxy, cxx - cyy)
    return float(np.rad2deg(axis + np.pi / 2) % 180.0)


def _circular_gap(a: float, b: float, modulus: float = 180.0) -> float:
    d = (a - b) % modulus
    return min(d, modulus - d)


def build_fibre_angle(*, seed: int, size: int = 128, count: int = 220) -> Fixture:
    """An image of thin fibres all running at one angle (+- 2 degrees jitter), blurred, with noise."""
    rng = _rng(seed)
    theta = float(rng.uniform(15.0, 165.0))
    texture, drawn = _fibre_texture(rng, size, theta, count)
    texture = texture / texture.max()
    image = (texture + rng.normal(0.0, 0.05, texture.shape)).astype(np.float32)
    truth = round(drawn, 3)
    if _circular_gap(truth, theta) > 1.0:
        raise FixtureError(f"fibre-angle seed {seed}: aimed at {theta:.2f} deg but the segments average {truth} deg")
    seen = _orientation_spectrum(texture)
    if _circular_gap(seen, truth) > 4.0:
        raise FixtureError(
            f"fibre-angle seed {seed}: the segments average {truth} deg but the spectrum says {seen:.2f}"
        )
    return Fixture(
        provenance=f"{count} anti-aliased line segments (20-60 px) aimed at {theta:.2f} deg +- N(0, 2) deg, "
        f"blurred 1 px, N(0, 0.05) noise, seed {seed}; truth is the drawn segments' weighted mean direction",
        data={"fibres": image},
        truth={"angle_deg": truth},
        about="dominant orientation of an oriented texture",
    )


def reference_fibre_angle(session: Session) -> None:
    image = np.asarray(session.namespace["fibres"], dtype=np.float64)
    session.namespace["answer"] = {"angle_deg": round(_orientation_structure_tensor(image), 3)}


def baseline_fibre_angle(session: Session) -> None:
    """The naive baseline: a constant angle (0 degrees, along the rows), whatever the image shows."""
    session.namespace["answer"] = {"angle_deg": 0.0}


# --------------------------------------------------------------------------- pick a nucleus


def build_pick_nucleus(*, seed: int, shape: tuple[int, int, int] = (32, 64, 64), count: int = 6) -> Fixture:
    """A 3D volume of ellipsoidal nuclei; truth is the packed voxel mask of the largest one."""
    from scipy import ndimage as ndi

    rng = _rng(seed)
    zz, yy, xx = np.indices(shape).astype(np.float64)
    centre = np.array(shape, dtype=np.float64) / 2
    for _ in range(200):
        semi = rng.uniform([2.5, 4.0, 4.0], [3.5, 6.0, 6.0], size=(count, 3))
        semi[0] *= 1.35  # the first nucleus is the largest by a clear margin
        radii = semi.max(axis=1)
        try:
            centres = _place(rng, count, radii, shape, gap=3.0)
        except FixtureError:
            continue
        # The middle of the volume (a do-nothing guess) must lie well outside the largest nucleus.
        if np.sum(((centres[0] - centre) / semi[0]) ** 2) <= 1.5**2:
            continue
        masks = [
            ((zz - c[0]) / s[0]) ** 2 + ((yy - c[1]) / s[1]) ** 2 + ((xx - c[2]) / s[2]) ** 2 <= 1.0
            for c, s in zip(centres, semi, strict=True)
        ]
        volumes = [int(m.sum()) for m in masks]
        # The first nucleus must be the largest by a clear margin once voxelised (else draw again:
        # every seed, a sealed run's derived ones included, gives a fixture).
        if int(np.argmax(volumes)) == 0 and volumes[0] >= 1.3 * sorted(volumes)[-2]:
            break
    else:
        raise FixtureError(f"pick-a-nucleus seed {seed}: could not lay out {count} nuclei with a clear largest one")
    clean = np.zeros(shape)
    for m, amp in zip(masks, rng.uniform(0.6, 1.0, size=count), strict=True):
        clean[m] = amp
    clean = _smooth(clean, 0.7)
    volume = (0.1 + clean + rng.normal(0.0, 0.05, shape)).astype(np.float32)
    # Cross-check: the noiseless volume splits into `count` objects, the largest overlapping the truth mask.
    labels, found = ndi.label(clean > 0.3)
    if found != count:
        raise FixtureError(f"pick-a-nucleus seed {seed}: drew {count} nuclei, the noiseless volume shows {found}")
    sizes = np.bincount(labels.ravel())[1:]
    biggest = labels == (int(np.argmax(sizes)) + 1)
    if not np.any(biggest & masks[0]):
        raise FixtureError(f"pick-a-nucleus seed {seed}: the largest object is not the drawn largest nucleus")
    return Fixture(
        provenance=f"{count} ellipsoids (semi-axes z 2.5-3.5, y/x 4-6 px; the largest 1.35x) in a {shape} volume, "
        f"blurred 0.7 px, 0.1 + N(0, 0.05) noise, seed {seed}",
        data={"volume": volume},
        truth={"largest_nucleus": pack_region(masks[0])},
        about="point at the largest nucleus of a 3D volume",
    )


def reference_pick_nucleus(session: Session) -> None:
    from scipy import ndimage as ndi
    from skimage.filters import threshold_otsu

    volume = _smooth(np.asarray(session.namespace["volume"], dtype=np.float64), 1.0)
    labels, _ = ndi.label(volume > threshold_otsu(volume))
    sizes = np.bincount(labels.ravel())[1:]
    biggest = labels == (int(np.argmax(sizes)) + 1)
    depth = ndi.distance_transform_edt(biggest)
    index = np.unravel_index(int(np.argmax(depth)), depth.shape)
    session.namespace["answer"] = {"voxel": [int(i) for i in index]}


def baseline_pick_centre(session: Session) -> None:
    """The do-nothing guess: the voxel at the middle of the volume."""
    shape = np.shape(session.namespace["volume"])
    session.namespace["answer"] = {"voxel": [int(n) // 2 for n in shape]}


# --------------------------------------------------------------------------- drawing the verdict

#: ``draw(fixture, answer)`` -> ``(images, legend)``; ``answer`` is the parsed answer or None.
Draw = Callable[[Fixture, dict[str, Any] | None], tuple[dict[str, np.ndarray], str]]


def _answer(attempt: Attempt) -> tuple[dict[str, Any] | None, bool]:
    """The subject's answer as the scorer reads it (leaving or final message), or None; and
    whether it left no answer at all."""
    value, _, why = read_leaving(attempt)
    if why is not None:
        return None, True
    parsed, _ = parse_answer(value)
    return parsed, False


def drawn(contract: TaskContract, draw: Draw) -> Callable[[Fixture, Attempt], Outcome]:
    """The structured verifier for ``contract``, followed by ``draw``: the fixture's image with the
    truth and the subject's answer marked on it becomes the outcome's artifacts (and what the
    marks mean goes to ``detail["drawn"]``). A blocked outcome is left as it is."""
    score = structured_verifier(contract)

    def verify(fixture: Fixture, attempt: Attempt) -> Outcome:
        outcome = score(fixture, attempt)
        if outcome.detail.get("blocked"):
            return outcome
        answer, absent = _answer(attempt)
        if absent:  # the scorer cannot tell "left nothing" from "left junk"; here it is nothing
            outcome.metrics = [
                replace(m, unavailable_because="absent") if m.value is None else m for m in outcome.metrics
            ]
        images, legend = draw(fixture, answer)
        outcome.artifacts.update(images)
        outcome.detail["drawn"] = legend
        return outcome

    verify.contract = contract  # type: ignore[attr-defined]
    verify.__qualname__ = f"drawn[{contract.task_id}]"
    return verify


def draw_count(fixture: Fixture, answer: dict[str, Any] | None) -> tuple[dict[str, np.ndarray], str]:
    given = answer.get("count") if answer else None
    count = given if isinstance(given, int) and not isinstance(given, bool) else None
    view = Overlay(fixture.data["nuclei"])
    view.tally([(int(fixture.truth["count"]), GREEN), (count, MAGENTA)])
    view.legend(answer_legend(count is not None))
    legend = "under the image, one green square per true nucleus and one magenta square per nucleus counted"
    return {"count": view.rgb}, legend


def draw_drift_vector(fixture: Fixture, answer: dict[str, Any] | None) -> tuple[dict[str, np.ndarray], str]:
    frames = np.asarray(fixture.data["frames"])
    view = Overlay(frames[0])
    truth = np.asarray(fixture.truth["shift"], dtype=np.float64)
    given = numbers(answer.get("shift") if answer else None, 2)
    centre = np.array(view.shape, dtype=np.float64) / 2.0
    # Drawn longer than life so that a tenth of a pixel shows: the truth spans about a third of the frame.
    scale = float(max(1.0, min(10.0, 0.35 * min(view.shape) / max(float(np.abs(truth).max()), 1e-9))))
    view.line(centre, centre + scale * truth, GREEN)
    view.circle(centre + scale * truth, 3, GREEN)
    if given is not None:
        view.line(centre, centre + scale * np.asarray(given), MAGENTA)
        view.cross(centre + scale * np.asarray(given), 3, MAGENTA)
    view.legend(answer_legend(given is not None))
    legend = (
        f"on frame 0, the drift (dy, dx) from the centre, {scale:.3g}x longer than life: green the truth "
        "(ending in a circle), magenta the answer (ending in a cross)"
    )
    return {"shift": view.rgb}, legend


def draw_fibre_angle(fixture: Fixture, answer: dict[str, Any] | None) -> tuple[dict[str, np.ndarray], str]:
    view = Overlay(fixture.data["fibres"])
    view.through_centre(float(fixture.truth["angle_deg"]), GREEN)
    given = numbers(answer.get("angle_deg") if answer else None, 1)
    if given is not None:
        view.through_centre(given[0], MAGENTA)
    view.legend(answer_legend(given is not None))
    return {"angle": view.rgb}, "a line through the centre at the fibre direction: green the truth, magenta the answer"


def draw_pick_nucleus(fixture: Fixture, answer: dict[str, Any] | None) -> tuple[dict[str, np.ndarray], str]:
    return draw_voxel_in(fixture, answer, "largest_nucleus")


def draw_voxel_in(fixture: Fixture, answer: dict[str, Any] | None, key: str) -> tuple[dict[str, np.ndarray], str]:
    """The answered voxel on ``volume`` with the outline of the truth region ``key`` (a packed mask)."""
    volume = np.asarray(fixture.data["volume"])
    mask = unpack_region(fixture.truth[key])
    given = numbers(answer.get("voxel") if answer else None, 3)
    # The slice through the answered voxel (the truth's middle slice when there is none), and the
    # projection: a voxel off in z can sit inside the nucleus's outline in one and not the other.
    z = int(round(given[0])) if given is not None else int(np.round(np.nonzero(mask)[0].mean()))
    in_volume = 0 <= z < volume.shape[0]
    where = volume[z] if in_volume else np.full(volume.shape[1:], float(volume.min()), np.float32)
    plane = Overlay(where)
    if in_volume:
        plane.outline(mask[z], GREEN)
    projection = Overlay(volume.max(axis=0))
    projection.outline(mask.any(axis=0), GREEN)
    if given is not None:
        for view in (plane, projection):
            view.cross(given[1:], 3, MAGENTA)
    for view in (plane, projection):
        view.legend(answer_legend(given is not None))
    legend = (
        f"slice z={z} (the answered voxel's; blank when outside the volume) and the projection over z: "
        "green the outline of the largest nucleus, magenta a cross at the answered (y, x)"
    )
    return {"slice": plane.rgb, "projection": projection.rgb}, legend


# --------------------------------------------------------------------------- the cases

COUNT_CONTRACT = _contract(
    "segment-nuclei/count-nuclei", "deterministic_structured_v2_1", {"count": ("integer_equal", {}, "count")}
)
DRIFT_CONTRACT = _contract(
    "drift-correction/drift-vector",
    "deterministic_structured_v2_1",
    {"shift": ("vector_abs_tolerance", {"tolerance": [DRIFT_TOLERANCE_PX, DRIFT_TOLERANCE_PX]}, "shift")},
)
FIBRE_CONTRACT = _contract(
    "fibre-angle/synthetic-lines",
    "structured_deterministic_rubric_v1",
    {"angle_deg": ("circular_tolerance", {"tolerance": FIBRE_TOLERANCE_DEG, "modulus": 180}, "angle_deg")},
)
PICK_CONTRACT = _contract(
    "pick-a-nucleus/synthetic-volume",
    "extent_voxel_tolerance_v1",
    {"voxel": ("voxel_member_of_set", {}, "largest_nucleus")},
)

_COLLECT = (Collect("answer", what="json", description="one JSON object with the fields named in the task"),)

CASES: list[Case] = [
    Case(
        case_id="count-nuclei",
        namespace=SEGMENT,
        task=(
            "Count the nuclei in the fluorescence image `nuclei` (128 x 128, float32). The nuclei do not touch. "
            + _FINAL.format(fields='{"count": <integer number of nuclei>}')
        ),
        persona="A cell biologist who needs the number of nuclei in a field before normalising a per-cell assay.",
        fixture=Procedural(build_count_nuclei, seed=2026, tolerance=TOLERANCE),
        layers=(Layer("nuclei", "nuclei", kind="image"),),
        collect=_COLLECT,
        verify=drawn(COUNT_CONTRACT, draw_count),
        reference=reference_count_nuclei,
        baseline=baseline_count_nuclei,
        baseline_about="connected components of the raw image above its mean intensity: noise specks count as nuclei",
        answer=COUNT_CONTRACT,
        about="6-14 separated nuclei; the count must be exact (integer_equal)",
    ),
    Case(
        case_id="drift-vector",
        namespace=DRIFT,
        task=(
            "`frames` (2 x 96 x 96, float32) holds two frames of one field; the second has drifted by a "
            "sub-pixel translation. Report that drift as [dy, dx] in pixels (rows, then columns), meaning "
            "frame1(y, x) = frame0(y - dy, x - dx): positive dy means the content moved down. "
            + _FINAL.format(fields='{"shift": [<dy, float>, <dx, float>]}')
            + f" Each component must be within {DRIFT_TOLERANCE_PX} px."
        ),
        persona="A microscopist registering a time-lapse who wants the drift of one frame before correcting it.",
        fixture=Procedural(build_drift_vector, seed=2026, tolerance=TOLERANCE),
        layers=(Layer("frames", "frames", kind="image", dim_labels=("t", "y", "x")),),
        collect=_COLLECT,
        verify=drawn(DRIFT_CONTRACT, draw_drift_vector),
        reference=reference_drift_vector,
        baseline=baseline_drift_vector,
        baseline_about="no drift: a zero shift",
        answer=DRIFT_CONTRACT,
        about="sub-pixel translation of 1.5-6 px per axis between two textured frames (vector_abs_tolerance)",
    ),
    Case(
        case_id="synthetic-lines",
        namespace=FIBRE,
        task=(
            "`fibres` (128 x 128, float32) shows thin fibres that mostly run in one direction. Report that "
            "direction in degrees, counter-clockwise from the +x axis (increasing column) as the image is "
            "displayed with row 0 at the top, in [0, 180): a fibre running up and to the right at 45 degrees "
            "is 45, one running down and to the right is 135. "
            + _FINAL.format(fields='{"angle_deg": <float>}')
            + f" It is judged modulo 180 degrees with a tolerance of {FIBRE_TOLERANCE_DEG} degrees."
        ),
        persona="A materials scientist measuring the alignment of collagen fibres in a second-harmonic image.",
        fixture=Procedural(build_fibre_angle, seed=2026, tolerance=TOLERANCE),
        layers=(Layer("fibres", "fibres", kind="image"),),
        collect=_COLLECT,
        verify=drawn(FIBRE_CONTRACT, draw_fibre_angle),
        reference=reference_fibre_angle,
        baseline=baseline_fibre_angle,
        baseline_about="a constant angle of 0 degrees",
        answer=FIBRE_CONTRACT,
        about="dominant orientation of an oriented line texture, modulo 180 (circular_tolerance)",
    ),
    Case(
        case_id="synthetic-volume",
        namespace=PICK,
        task=(
            "`volume` (32 x 64 x 64, float32, axes z, y, x) holds several nuclei. Point at the largest one "
            "(most voxels): give the integer index of any voxel inside it. "
            + _FINAL.format(fields='{"voxel": [<z, int>, <y, int>, <x, int>]}')
            + " Any voxel inside that nucleus counts; one outside it, or on another nucleus, does not."
        ),
        persona="A cell biologist picking the largest nucleus of a stack to seed a detailed 3D measurement.",
        fixture=Procedural(build_pick_nucleus, seed=2026, tolerance=TOLERANCE),
        layers=(Layer("volume", "volume", kind="image", dim_labels=("z", "y", "x")),),
        collect=_COLLECT,
        verify=drawn(PICK_CONTRACT, draw_pick_nucleus),
        reference=reference_pick_nucleus,
        baseline=baseline_pick_centre,
        baseline_about="the voxel at the middle of the volume (the builder keeps it outside the largest nucleus)",
        answer=PICK_CONTRACT,
        about="one voxel inside the largest of six ellipsoidal nuclei; the truth mask is the tolerance",
    ),
]

BUILDERS = {
    "structured-count-nuclei": build_count_nuclei,
    "structured-drift-vector": build_drift_vector,
    "structured-fibre-angle": build_fibre_angle,
    "structured-pick-nucleus": build_pick_nucleus,
}
