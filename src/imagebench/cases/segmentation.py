"""Segmentation cases: nucleus instance segmentation and segmentation quality-control metrics.
Long because it is a catalogue: the 2D nucleus cases, their QC-metric cases, builders, references and baselines.

Skills and cases
----------------
``segment-nuclei``
    ``synthetic-blobs`` (golden, synthetic): a seeded fluorescence-like field of ~40 nuclei,
    some touching, on an uneven background with noise; truth is the label image it was drawn from.
    ``dsb2018`` (golden, curated): a real fluorescence image from the 2018 Data Science Bowl and
    its human annotation, read from the fixture tree shipped in ``imagebench/data/fixtures``.
    ``dsb2018-dim`` (hard-case, curated): the same field made dim and noisy at authoring time (a
    fixed gain, Poisson shot noise, a camera offset and read noise); truth is the same annotation.
    ``empty-field`` (empty, synthetic): background and noise only; the right answer is no object.
``segmentation-qc-metrics``
    ``annotation-vs-model`` (golden, synthetic): a hand annotation and a model's output with
    controlled misses, splits, merges, boundary errors and false objects; the subject reports
    precision, recall and F1 at IoU 0.5.
    ``dsb2018-watershed`` (golden, curated): the DSB 2018 annotation against a real classical
    watershed of the image computed once at authoring time, with its own merges, splits and misses.

Every instance score comes from :func:`imagebench.matching.match_labels` at IoU 0.5. The
reference solution is one classical pipeline, :func:`segment_nuclei_classical` (smoothing,
background flattening, a noise-aware Otsu threshold, distance transform, peak markers and a
watershed), run with one set of parameters chosen on the synthetic case (nucleus size and blur), never on a
curated image it is scored on. Every case also has a naive ``baseline`` that must fail it.
Limits and how they were calibrated are in ``docs/cases.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from imagebench.case.model import Case, Collect, Layer, Skill
from imagebench.cases._overlay import OUTLINE_LEGEND, outline_overlay
from imagebench.fixtures import tree
from imagebench.fixtures.fixture import (
    Attempt,
    Fixture,
    FixtureError,
    Metric,
    Outcome,
    read_array,
    read_scalar,
)
from imagebench.fixtures.specs import OnDisk, Procedural
from imagebench.matching import match_labels
from imagebench.metrics.figures import FIGURES_KEY, segmentation_figures

SEGMENT = "segment-nuclei"
QC = "segmentation-qc-metrics"
IOU = 0.5

#: the curated fixture tree shipped inside the package
FIXTURE_ROOT = tree.PACKAGED_ROOT

DSB_CITATION = (
    "Caicedo et al., Nucleus segmentation across imaging experiments: the 2018 Data Science Bowl, "
    "Nature Methods 16, 1247–1253 (2019)"
)

PERSONA = (
    "A cell biologist with a fluorescence image of stained nuclei who needs one label per nucleus "
    "to count them and measure each; touching nuclei must be told apart."
)
QC_PERSONA = (
    "An image-analysis core scientist comparing a model's nucleus segmentation against a hand "
    "annotation before trusting the model on new data."
)


# --------------------------------------------------------------------------- synthetic nuclei


@dataclass(frozen=True)
class _Nucleus:
    cy: float
    cx: float
    a: float  # semi-axis along the rotated row direction
    b: float  # semi-axis along the rotated column direction
    theta: float
    brightness: float


def _place_nuclei(
    rng: np.random.Generator,
    shape: tuple[int, int],
    n: int,
    radius: tuple[float, float],
    touching: float,
) -> list[_Nucleus]:
    """Non-overlapping ellipses; a fraction ``touching`` is set against an earlier one (a slight overlap)."""
    h, w = shape
    lo, hi = radius
    out: list[_Nucleus] = []
    tries = 0
    while len(out) < n and tries < 200 * n:
        tries += 1
        a, b = rng.uniform(lo, hi, size=2)
        theta = float(rng.uniform(0.0, np.pi))
        r = max(a, b)
        if out and rng.random() < touching:
            host = out[int(rng.integers(len(out)))]
            ang = rng.uniform(0.0, 2.0 * np.pi)
            # about the sum of the two extents along the joining line, less a little: they touch
            dist = 0.88 * (_extent(host, ang) + _extent_ab(a, b, theta, ang + np.pi))
            cy, cx = host.cy + dist * np.sin(ang), host.cx + dist * np.cos(ang)
            partner: _Nucleus | None = host
        else:
            cy, cx = rng.uniform(r + 2, h - r - 2), rng.uniform(r + 2, w - r - 2)
            partner = None
        if not (r + 2 <= cy <= h - r - 2 and r + 2 <= cx <= w - r - 2):
            continue
        clear = True
        for o in out:
            if o is partner:
                continue
            if np.hypot(o.cy - cy, o.cx - cx) < max(o.a, o.b) + r + 3:
                clear = False
                break
        if clear:
            out.append(_Nucleus(float(cy), float(cx), float(a), float(b), theta, float(rng.uniform(0.55, 1.0))))
    if len(out) < n:
        raise FixtureError(f"could place only {len(out)} of {n} nuclei in a {shape} field")
    return out


def _extent_ab(a: float, b: float, theta: float, ang: float) -> float:
    """Distance from an ellipse's centre to its edge in direction ``ang`` (image angle)."""
    phi = ang - theta
    return float(1.0 / np.sqrt((np.sin(phi) / a) ** 2 + (np.cos(phi) / b) ** 2))


def _extent(n: _Nucleus, ang: float) -> float:
    return _extent_ab(n.a, n.b, n.theta, ang)


def _rasterize(shape: tuple[int, int], nuclei: list[_Nucleus]) -> tuple[np.ndarray, np.ndarray]:
    """Label image (a pixel goes to the ellipse it is most inside) and a per-pixel profile in [0, 1]."""
    labels = np.zeros(shape, np.int32)
    best = np.full(shape, np.inf)
    profile = np.zeros(shape, np.float64)
    h, w = shape
    for k, nu in enumerate(nuclei, start=1):
        r = int(np.ceil(max(nu.a, nu.b))) + 1
        y0, y1 = max(0, int(nu.cy) - r), min(h, int(nu.cy) + r + 2)
        x0, x1 = max(0, int(nu.cx) - r), min(w, int(nu.cx) + r + 2)
        yy, xx = np.mgrid[y0:y1, x0:x1]
        dy, dx = yy - nu.cy, xx - nu.cx
        c, s = np.cos(nu.theta), np.sin(nu.theta)
        u = dy * s + dx * c  # along theta
        v = dy * c - dx * s
        q = (v / nu.a) ** 2 + (u / nu.b) ** 2
        inside = (q <= 1.0) & (q < best[y0:y1, x0:x1])
        labels[y0:y1, x0:x1][inside] = k
        best[y0:y1, x0:x1][inside] = q[inside]
        profile[y0:y1, x0:x1][inside] = (nu.brightness * (1.0 - 0.35 * q))[inside]
    return labels, profile


def _background(rng: np.random.Generator, shape: tuple[int, int], level: float, ramp: float) -> np.ndarray:
    h, w = shape
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    ang = rng.uniform(0.0, 2.0 * np.pi)
    plane = ramp * (np.cos(ang) * xx + np.sin(ang) * yy)
    cy, cx = rng.uniform(0.2, 0.8, size=2)
    glow = 0.5 * ramp * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 0.15)
    return level + plane - plane.min() + glow


def _fluorescence(rng: np.random.Generator, profile: np.ndarray, bg: np.ndarray, noise: float) -> np.ndarray:
    from scipy import ndimage as ndi

    texture = 1.0 + 0.08 * ndi.gaussian_filter(rng.standard_normal(profile.shape), 1.5)
    signal = ndi.gaussian_filter(profile * texture, 1.0)  # the optics blur the edges
    img = bg + signal
    img = img + rng.standard_normal(img.shape) * (noise * np.sqrt(0.5 + img))  # shot-like noise
    return img.astype(np.float32)


def build_synthetic_nuclei(
    *,
    seed: int,
    shape: tuple[int, int] = (256, 256),
    n_nuclei: int = 40,
    radius: tuple[float, float] = (6.0, 11.0),
    touching: float = 0.3,
    noise: float = 0.03,
) -> Fixture:
    """A fluorescence-like field of ``n_nuclei`` elliptical nuclei; truth is their label image."""
    rng = np.random.default_rng(seed)
    shape = (int(shape[0]), int(shape[1]))
    nuclei = _place_nuclei(rng, shape, int(n_nuclei), (float(radius[0]), float(radius[1])), float(touching))
    labels, profile = _rasterize(shape, nuclei)
    present = np.unique(labels[labels > 0])
    if present.size != len(nuclei):  # a nucleus drawn over entirely: the truth would miscount
        raise FixtureError(f"synthetic nuclei: {len(nuclei)} placed but {present.size} visible in the label image")
    bg = _background(rng, shape, level=0.12, ramp=0.15)
    image = _fluorescence(rng, profile, bg, float(noise))
    return Fixture(
        provenance=(
            f"synthetic: {len(nuclei)} elliptical nuclei (semi-axes {radius[0]}-{radius[1]} px, "
            f"{int(round(100 * touching))}% placed touching another), brightness 0.55-1.0 with a centre-bright "
            f"profile and 8% texture, Gaussian optics blur sigma 1 px, a tilted background with a glow "
            f"(0.12 + 0-0.22), shot-like noise {noise}; numpy default_rng(seed={seed})"
        ),
        data={"image": image},
        # ``count`` lets a structured answer (a bundle's count case) refer to the truth by key
        truth={"labels": labels, "count": int(np.count_nonzero(np.unique(labels)))},
        about=f"{shape[0]}x{shape[1]} float32 fluorescence image with {len(nuclei)} nuclei",
    )


def build_empty_field(*, seed: int, shape: tuple[int, int] = (256, 256), noise: float = 0.03) -> Fixture:
    """The same background and noise as ``build_synthetic_nuclei``, with no nucleus at all."""
    rng = np.random.default_rng(seed)
    shape = (int(shape[0]), int(shape[1]))
    bg = _background(rng, shape, level=0.12, ramp=0.15)
    image = _fluorescence(rng, np.zeros(shape), bg, float(noise))
    return Fixture(
        provenance=(
            f"synthetic: a tilted background with a glow (0.12 + 0-0.22) and shot-like noise {noise}, "
            f"no nuclei; numpy default_rng(seed={seed})"
        ),
        data={"image": image},
        truth={"labels": np.zeros(shape, np.int32), "count": 0},
        about=f"{shape[0]}x{shape[1]} float32 field of background and noise, no nuclei",
    )


# --------------------------------------------------------------------------- the reference pipeline


def segment_nuclei_classical(
    image: Any,
    *,
    sigma: float = 1.5,
    min_distance: int = 5,
    min_area: int = 30,
    background_size: int = 41,
    snr: float = 8.0,
) -> np.ndarray:
    """Label nuclei in a 2D fluorescence image with a classical pipeline (int32, 0 = background).

    1. Gaussian smoothing (``sigma``).
    2. Background flattening: subtract a grey opening of size ``background_size`` (wider than a
       nucleus), itself smoothed.
    3. Threshold at the larger of Otsu's and ``snr`` times the smoothed noise above the median
       background, so that a field with no nuclei yields no foreground instead of half the noise.
       The noise is estimated from neighbouring-pixel differences of the raw image (robust to edges).
    4. Drop objects smaller than ``min_area`` and fill holes.
    5. Split touching nuclei: markers at maxima of the distance transform at least
       ``min_distance`` apart, then a watershed on the inverted distance inside the mask.
    """
    from scipy import ndimage as ndi
    from skimage.feature import peak_local_max
    from skimage.filters import threshold_otsu
    from skimage.segmentation import watershed

    img = np.asarray(image, dtype=np.float64)
    if img.ndim != 2:
        raise ValueError(f"segment_nuclei_classical expects a 2D image, got shape {img.shape}")
    smooth = ndi.gaussian_filter(img, sigma)
    bg = ndi.gaussian_filter(ndi.grey_opening(smooth, size=(background_size, background_size)), background_size / 4)
    flat = smooth - bg

    diffs = np.diff(img, axis=1).ravel()
    noise_raw = 1.4826 * np.median(np.abs(diffs - np.median(diffs))) / np.sqrt(2.0)
    noise_smooth = noise_raw / (2.0 * np.sqrt(np.pi) * sigma)  # white noise after a 2D Gaussian
    floor = float(np.median(flat)) + snr * noise_smooth
    try:
        otsu = float(threshold_otsu(flat))
    except ValueError:  # a constant image
        otsu = float(flat.max())
    mask = flat > max(otsu, floor)
    mask = _drop_small(ndi.label(mask)[0], min_area) > 0
    mask = ndi.binary_fill_holes(mask)
    if not mask.any():
        return np.zeros(img.shape, np.int32)

    dist = ndi.distance_transform_edt(mask)
    dist = ndi.gaussian_filter(dist, 1.0)
    regions, _ = ndi.label(mask)
    peaks = peak_local_max(dist, min_distance=min_distance, labels=regions, exclude_border=False)
    markers = np.zeros(img.shape, np.int32)
    markers[tuple(peaks.T)] = np.arange(1, len(peaks) + 1)
    # a region without any peak (too small or flat) keeps one marker of its own
    missing = np.setdiff1d(np.unique(regions[mask]), np.unique(regions[markers > 0]))
    if missing.size:
        centres = ndi.maximum_position(dist, regions, missing)
        for i, c in enumerate(centres, start=len(peaks) + 1):
            markers[c] = i
    labels = watershed(-dist, markers, mask=mask)
    return _drop_small(labels, min_area // 2).astype(np.int32)


def _drop_small(labels: np.ndarray, min_area: int) -> np.ndarray:
    """``labels`` with every object of fewer than ``min_area`` pixels set to background."""
    if min_area <= 1 or not labels.any():
        return labels
    areas = np.bincount(labels.ravel())
    small = areas < min_area
    small[0] = False
    out = labels.copy()
    out[small[labels]] = 0
    return out


# --------------------------------------------------------------------------- segment-nuclei: verify

NUCLEI_METRICS: tuple[tuple[str, str], ...] = (
    ("f1_shortfall", "1 - F1 of object matching at IoU 0.5"),
    ("missed_fraction", "truth nuclei with no match / truth nuclei"),
    ("false_fraction", "predicted objects with no match / predicted objects"),
    ("iou_shortfall", "1 - mean IoU of the matched pairs (boundary quality)"),
)


def metric_limit(fixture: Fixture, name: str) -> float:
    """The limit of metric ``name`` in the fixture spec's tolerance; a FixtureError names the case and what it has."""
    try:
        return float(fixture.tolerance[name])
    except KeyError:
        raise FixtureError(
            f"case {fixture.label}: no limit for metric {name!r} in the fixture spec's tolerance "
            f"(has {sorted(fixture.tolerance)})"
        ) from None


def _outlines(image: np.ndarray, truth: np.ndarray, pred: np.ndarray | None) -> dict[str, np.ndarray]:
    """The image, the image with the truth's and with the subject's outlines drawn at its maximum,
    and the overlay of both outlines in two colours with its legend (:func:`outline_overlay`).

    All share one intensity scale, so flipping between them shows where the outlines differ.
    """
    from skimage.segmentation import find_boundaries

    img = np.asarray(image, dtype=np.float32)
    top = float(img.max()) if img.size else 0.0
    out = {"image": img}
    truth_view = img.copy()
    truth_view[find_boundaries(truth, mode="inner")] = top
    out["truth_outlines"] = truth_view
    if pred is not None:
        pred_view = img.copy()
        pred_view[find_boundaries(pred, mode="inner")] = top
        out["labels_outlines"] = pred_view
    out["overlay"] = outline_overlay(img, truth, pred)
    return out


def _with_legend(outcome: Outcome) -> Outcome:
    """``outcome`` with what its ``overlay`` artifact draws said in ``detail["drawn"]``."""
    if "overlay" in outcome.artifacts:
        outcome.detail["drawn"] = OUTLINE_LEGEND
    return outcome


def _read_labels(attempt: Attempt, shape: tuple[int, ...]) -> tuple[np.ndarray | None, str | None]:
    labels, why = read_array(attempt, "labels", shape=shape, dtype="iu")
    if labels is None:
        return None, why
    if labels.dtype.kind == "i" and labels.size and int(labels.min()) < 0:
        return None, f"'labels' has negative values (min {int(labels.min())}); 0 is background, objects are > 0"
    if labels.dtype.kind == "u" and labels.size and int(labels.max()) >= 2**63:
        return None, f"'labels' has values of 2**63 or more (max {int(labels.max())}); labels are object numbers"
    return labels, None


def score_labels(
    fixture: Fixture,
    attempt: Attempt,
    metrics: tuple[tuple[str, str], ...],
    views: Callable[[np.ndarray, np.ndarray, np.ndarray | None], dict[str, np.ndarray]],
    detail: Mapping[str, Any] | None = None,
    spacing: tuple[float, ...] | None = None,
    unit: str = "px",
) -> Outcome:
    """Object-level agreement of the subject's ``labels`` with the truth label image (2D or 3D)
    at IoU 0.5, as ``metrics`` (the names of :data:`NUCLEI_METRICS`), drawn by ``views``.

    Beside them, ``detail["figures"]`` holds the figures the field reports (AP over IoU
    0.5:0.05:0.95, panoptic quality, Dice, HD95 and mean surface distance in ``unit`` with the voxel
    ``spacing``; :func:`imagebench.metrics.figures.segmentation_figures`): informative, never gating."""
    truth = np.asarray(fixture.truth["labels"])
    image = np.asarray(fixture.data["image"])
    limits = {name: metric_limit(fixture, name) for name, _ in metrics}
    labels, why = _read_labels(attempt, truth.shape)
    if labels is None:
        missing = [Metric.missing(name, limits[name], why or "unreadable") for name, _ in metrics]
        return _with_legend(
            Outcome(fixture, attempt, missing, detail={"why": why}, artifacts=views(image, truth, None))
        )
    r = match_labels(truth, labels, iou=IOU)
    values: dict[str, float | None] = {
        "f1_shortfall": 1.0 - r.f1,
        "missed_fraction": r.fn / r.n_true if r.n_true else 0.0,
        "false_fraction": r.fp / r.n_pred if r.n_pred else 0.0,
        "iou_shortfall": None if r.mean_matched_iou is None else 1.0 - r.mean_matched_iou,
    }
    scored = []
    for name, _ in metrics:
        value = values[name]
        if value is None:
            # No matched pair: with nuclei in the truth that is the subject's doing (and F1 fails
            # too); with none, the truth has no boundary to compare and the metric is excused.
            because = "unusable" if r.n_true else "truth"
            reason = "no predicted object matched a truth nucleus" if r.n_true else "the truth has no nucleus"
            scored.append(Metric.missing(name, limits[name], reason, because=because))
        else:
            scored.append(Metric(name, value, limits[name]))
    return _with_legend(
        Outcome(
            fixture,
            attempt,
            scored,
            detail={
                "matching": r.as_dict(),
                "label_dtype": str(labels.dtype),
                FIGURES_KEY: segmentation_figures(truth, labels, spacing, unit),
                **dict(detail or {}),
            },
            artifacts=views(image, truth, labels),
        )
    )


def verify_nuclei(fixture: Fixture, attempt: Attempt) -> Outcome:
    """Object-level agreement of the subject's ``labels`` with the truth label image at IoU 0.5."""
    return score_labels(fixture, attempt, NUCLEI_METRICS, _outlines)


def verify_empty(fixture: Fixture, attempt: Attempt) -> Outcome:
    """On a field with no nuclei, every predicted object is a false one."""
    truth = np.asarray(fixture.truth["labels"])
    image = np.asarray(fixture.data["image"])
    limit = metric_limit(fixture, "false_objects")
    labels, why = _read_labels(attempt, truth.shape)
    if labels is None:
        return _with_legend(
            Outcome(
                fixture,
                attempt,
                [Metric.missing("false_objects", limit, why or "unreadable", unit="objects")],
                detail={"why": why},
                artifacts=_outlines(image, truth, None),
            )
        )
    present = np.unique(labels[labels > 0])
    return _with_legend(
        Outcome(
            fixture,
            attempt,
            [Metric("false_objects", float(present.size), limit, unit="objects")],
            detail={"labelled_fraction": float(np.count_nonzero(labels)) / labels.size},
            artifacts=_outlines(image, truth, labels),
        )
    )


# --------------------------------------------------------------------------- segment-nuclei: reference

#: chosen on the synthetic case (nucleus size and blur) and used unchanged on the curated DSB images,
#: so no reference parameter is chosen on an image it is scored on (see docs/cases.md)
SYNTHETIC_PIPELINE: dict[str, Any] = {"sigma": 1.5, "min_distance": 5, "min_area": 30, "background_size": 41}


def reference_synthetic(session: Any) -> None:
    session.namespace["labels"] = segment_nuclei_classical(session.namespace["nuclei"], **SYNTHETIC_PIPELINE)


#: the curated DSB cases run the synthetic case's pipeline as it is
reference_dsb = reference_synthetic


def otsu_components(image: Any) -> np.ndarray:
    """The naive answer: a light Gaussian blur (sigma 1), one global Otsu threshold, connected components."""
    from scipy import ndimage as ndi
    from skimage.filters import threshold_otsu

    smooth = ndi.gaussian_filter(np.asarray(image, dtype=np.float64), 1.0)
    try:
        labels, _ = ndi.label(smooth > threshold_otsu(smooth))
    except ValueError:  # a constant image
        return np.zeros(smooth.shape, np.int32)
    return labels.astype(np.int32)


def baseline_otsu(session: Any) -> None:
    session.namespace["labels"] = otsu_components(session.namespace["nuclei"])


OTSU_ABOUT = "a light blur, one global Otsu threshold and connected components: touching nuclei stay merged"


# --------------------------------------------------------------------------- QC: an annotation and a model


_BAND = (0.45, 0.55)  # no object pair may have an IoU this close to the 0.5 threshold


def _touching_pairs(labels: np.ndarray) -> list[tuple[int, int]]:
    """Pairs of labels that share an edge (4-connectivity)."""
    pairs: set[tuple[int, int]] = set()
    for a, b in ((labels[1:, :], labels[:-1, :]), (labels[:, 1:], labels[:, :-1])):
        m = (a != b) & (a > 0) & (b > 0)
        for x, y in zip(a[m].tolist(), b[m].tolist(), strict=True):
            pairs.add((min(x, y), max(x, y)))
    return sorted(pairs)


def _brute_force_counts(annotation: np.ndarray, model: np.ndarray, thr: float) -> tuple[int, int, int]:
    """(tp, n_true, n_pred) from an object-by-object IoU loop over boolean masks (an independent derivation)."""
    true_ids = [int(v) for v in np.unique(annotation) if v != 0]
    pred_ids = [int(v) for v in np.unique(model) if v != 0]
    matched_true: set[int] = set()
    matched_pred: set[int] = set()
    for t in true_ids:
        tm = annotation == t
        for p in np.unique(model[tm]).tolist():
            if p == 0:
                continue
            pm = model == p
            inter = np.count_nonzero(tm & pm)
            union = np.count_nonzero(tm | pm)
            if inter / union > thr:
                if t in matched_true or p in matched_pred:
                    raise FixtureError(f"QC fixture: object {t} or {p} matched twice above IoU {thr}")
                matched_true.add(t)
                matched_pred.add(p)
    return len(matched_true), len(true_ids), len(pred_ids)


def build_qc_pair(
    *,
    seed: int,
    shape: tuple[int, int] = (256, 256),
    n_objects: int | None = None,
    misses: int | None = None,
    splits: int | None = None,
    merges: int | None = None,
    false_objects: int | None = None,
    boundary_fraction: float = 0.5,
) -> Fixture:
    """A hand annotation and a model output that differs from it in controlled ways; truth = P, R, F1.

    The model output starts as a copy of the annotation; then objects are dropped (misses), cut
    about 70/30 across their long axis (splits), fused with a touching neighbour (merges), grown or
    shrunk by one pixel (boundary errors), and ellipses are added where the annotation has nothing
    (false objects). Its labels are then shuffled onto non-consecutive values. Any pair whose IoU
    would fall within 0.45-0.55 is reverted, so the answer cannot hinge on how a tie at 0.5 is broken.
    A count left as None is drawn from the seed (objects 35-45, misses 1-5, splits 1-4, merges 1-3,
    false objects 2-6), so the answer differs from seed to seed.
    """
    from scipy import ndimage as ndi

    rng = np.random.default_rng(seed)
    n_objects = int(rng.integers(35, 46)) if n_objects is None else int(n_objects)
    misses = int(rng.integers(1, 6)) if misses is None else int(misses)
    splits = int(rng.integers(1, 5)) if splits is None else int(splits)
    merges = int(rng.integers(1, 4)) if merges is None else int(merges)
    false_objects = int(rng.integers(2, 7)) if false_objects is None else int(false_objects)
    shape = (int(shape[0]), int(shape[1]))
    nuclei = _place_nuclei(rng, shape, int(n_objects), (6.0, 11.0), 0.4)
    annotation, _ = _rasterize(shape, nuclei)
    model = annotation.copy()
    ids = list(range(1, len(nuclei) + 1))
    order = [int(i) for i in rng.permutation(ids)]
    used: set[int] = set()
    done = {"misses": 0, "splits": 0, "merges": 0, "boundary": 0, "false_objects": 0, "reverted": 0}
    next_label = len(nuclei) + 1

    # merges first: they need touching pairs, preferring unequal sizes (IoU far from 0.5)
    areas = np.bincount(annotation.ravel(), minlength=len(nuclei) + 1)

    def unequal(ab: tuple[int, int]) -> float:
        return -max(areas[ab[0]], areas[ab[1]]) / min(areas[ab[0]], areas[ab[1]])

    pairs = sorted(_touching_pairs(annotation), key=unequal)
    for a, b in pairs:
        if done["merges"] >= merges:
            break
        if a in used or b in used:
            continue
        model[model == b] = a
        used.update((a, b))
        done["merges"] += 1
    free = [i for i in order if i not in used]
    for i in free[:misses]:
        model[model == i] = 0
        used.add(i)
        done["misses"] += 1
    free = [i for i in order if i not in used]
    for i in free[:splits]:
        nu = nuclei[i - 1]
        yy, xx = np.nonzero(model == i)
        c, s = np.cos(nu.theta), np.sin(nu.theta)
        # the long axis: along theta when b (the axis along theta) is the larger
        along = ((yy - nu.cy) * s + (xx - nu.cx) * c) if nu.b >= nu.a else ((yy - nu.cy) * c - (xx - nu.cx) * s)
        cut = np.quantile(along, 0.7)
        piece = along > cut
        model[yy[piece], xx[piece]] = next_label
        next_label += 1
        used.add(i)
        done["splits"] += 1
    free = [i for i in order if i not in used]
    for i in free[: int(round(boundary_fraction * len(free)))]:
        m = model == i
        if rng.random() < 0.5:
            grown = ndi.binary_dilation(m) & (annotation == 0) & (model == 0)
            model[grown] = i
        else:
            model[m & ~ndi.binary_erosion(m)] = 0
        done["boundary"] += 1
    extra = _place_nuclei(rng, shape, len(nuclei) + int(false_objects), (5.0, 9.0), 0.0) if false_objects else []
    # only those clear of every annotated and model object
    occupied = ndi.binary_dilation((annotation > 0) | (model > 0), iterations=3)
    for nu in extra:
        if done["false_objects"] >= false_objects:
            break
        blob, _ = _rasterize(shape, [nu])
        if np.any(blob & occupied):
            continue
        model[blob > 0] = next_label
        occupied |= ndi.binary_dilation(blob > 0, iterations=3)
        next_label += 1
        done["false_objects"] += 1

    # revert any pair too close to the threshold to an exact copy of the annotated objects
    from imagebench.matching import label_overlaps

    for _ in range(5):
        ov = label_overlaps(annotation, model)
        score = ov.iou()
        near = (score >= _BAND[0]) & (score <= _BAND[1])
        if not near.any():
            break
        for p in np.unique(ov.pair_pred[near]).tolist():
            touched = np.unique(annotation[model == p])
            model[model == p] = 0
            for tt in touched.tolist():
                if tt:
                    model[annotation == tt] = next_label
                    next_label += 1
            done["reverted"] += 1
    else:
        raise FixtureError(f"QC fixture (seed {seed}): could not keep every IoU outside {_BAND}")

    # shuffle the model's labels onto non-consecutive values
    present = np.unique(model[model > 0])
    new_values = 7 + 3 * rng.permutation(present.size)
    lut = np.zeros(int(model.max()) + 1, np.int32)
    lut[present] = new_values
    model = lut[model]

    r = match_labels(annotation, model, iou=IOU)
    tp, n_true, n_pred = _brute_force_counts(annotation, model, IOU)
    if (tp, n_true, n_pred) != (r.tp, r.n_true, r.n_pred):
        raise FixtureError(
            f"QC fixture (seed {seed}): match_labels gives tp={r.tp}, n_true={r.n_true}, n_pred={r.n_pred} but the "
            f"object-by-object IoU loop gives tp={tp}, n_true={n_true}, n_pred={n_pred}"
        )
    plan = ", ".join(f"{k} {v}" for k, v in done.items())
    return Fixture(
        provenance=(
            f"synthetic: {len(nuclei)} annotated elliptical nuclei; model output = annotation with {plan} "
            f"(reverted: pairs whose IoU fell within {_BAND[0]}-{_BAND[1]}), labels shuffled onto non-consecutive "
            f"values; truth from imagebench.matching.match_labels at IoU {IOU}, cross-checked by an "
            f"object-by-object IoU loop; numpy default_rng(seed={seed})"
        ),
        data={"annotation": annotation, "model": model},
        truth={"precision": r.precision, "recall": r.recall, "f1": r.f1, "tp": r.tp, "fp": r.fp, "fn": r.fn},
        about=f"{shape[0]}x{shape[1]} annotation ({r.n_true} objects) and model output ({r.n_pred} objects)",
    )


QC_METRICS: tuple[str, ...] = ("precision", "recall", "f1")


def _error_map(annotation: np.ndarray, model: np.ndarray) -> np.ndarray:
    """0 background, 1 matched annotated object, 2 missed annotated object, 3 model object with no match."""
    r = match_labels(annotation, model, iou=IOU)
    out = np.zeros(annotation.shape, np.float32)
    matched_true = np.isin(annotation, r.pairs[:, 0])
    matched_pred = np.isin(model, r.pairs[:, 1])
    out[annotation > 0] = 2
    out[matched_true] = 1
    out[(model > 0) & ~matched_pred & (out == 0)] = 3
    return out


def _number(value: Any) -> float:
    """A truth scalar, whether built in memory or read from a curated tree (a 0-d array file)."""
    return float(np.asarray(value).reshape(()))


def verify_qc(fixture: Fixture, attempt: Attempt) -> Outcome:
    """Absolute error of each reported score against the truth."""
    metrics: list[Metric] = []
    reported: dict[str, float | None] = {}
    for name in QC_METRICS:
        limit = metric_limit(fixture, f"{name}_error")
        value, why = read_scalar(attempt, name)
        reported[name] = None if value is None else float(value)
        if value is None:
            metrics.append(Metric.missing(f"{name}_error", limit, why or "unreadable"))
            continue
        if not 0.0 <= float(value) <= 1.0:
            why = f"{name!r} is {value!r}, expected a ratio in [0, 1]"
            metrics.append(Metric.missing(f"{name}_error", limit, why, because="unusable"))
            continue
        metrics.append(Metric(f"{name}_error", abs(float(value) - _number(fixture.truth[name])), limit))
    annotation = np.asarray(fixture.data["annotation"])
    model = np.asarray(fixture.data["model"])
    return Outcome(
        fixture,
        attempt,
        metrics,
        detail={
            "reported": reported,
            "truth_counts": {k: int(_number(fixture.truth[k])) for k in ("tp", "fp", "fn")},
            "errors_map": "0 background, 1 matched annotated object, 2 missed annotated object, "
            "3 unmatched model object",
        },
        artifacts={"errors": _error_map(annotation, model)},
    )


def reference_qc(session: Any) -> None:
    r = match_labels(session.namespace["annotation"], session.namespace["model"], iou=IOU)
    session.namespace["precision"] = r.precision
    session.namespace["recall"] = r.recall
    session.namespace["f1"] = r.f1


def pixel_scores(annotation: Any, model: Any) -> tuple[float, float, float]:
    """Pixel-wise precision, recall and F1 of the foregrounds: the naive answer that skips object matching."""
    a, m = np.asarray(annotation) > 0, np.asarray(model) > 0
    inter = float(np.count_nonzero(a & m))
    p = inter / max(np.count_nonzero(m), 1)
    r = inter / max(np.count_nonzero(a), 1)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def baseline_qc(session: Any) -> None:
    p, r, f = pixel_scores(session.namespace["annotation"], session.namespace["model"])
    session.namespace["precision"], session.namespace["recall"], session.namespace["f1"] = p, r, f


# --------------------------------------------------------------------------- the cases

# Limits: margin x the reference's worst value (see docs/cases.md for the numbers).
SYNTHETIC_TOLERANCE = {"f1_shortfall": 0.08, "missed_fraction": 0.10, "false_fraction": 0.06, "iou_shortfall": 0.23}
DSB_TOLERANCE = {"f1_shortfall": 0.31, "missed_fraction": 0.36, "false_fraction": 0.25, "iou_shortfall": 0.37}
DIM_TOLERANCE = {"f1_shortfall": 0.45, "missed_fraction": 0.47, "false_fraction": 0.43, "iou_shortfall": 0.41}
EMPTY_TOLERANCE = {"false_objects": 0.0}
QC_TOLERANCE = {"precision_error": 0.01, "recall_error": 0.01, "f1_error": 0.01}

_LABELS_TASK = (
    "Segment every nucleus in the fluorescence image `nuclei` ({shape}). Leave `labels`: an integer label "
    "image with exactly the shape of `nuclei`, 0 for background and one distinct positive integer per "
    "nucleus (the values need not be consecutive). Nuclei that touch must get different labels. "
    "It is scored by matching your objects to the truth at IoU >= 0.5: missed nuclei, extra objects "
    "and poor boundaries all count against it."
)

_SEGMENT_COLLECT = (
    Collect(
        "labels", "array", "int label image, same shape as `nuclei`, 0 = background", layer="labels", like="nuclei"
    ),
)

_QC_TASK = (
    "Two label images of the same field are loaded: `annotation` (a hand annotation, the reference) and "
    "`model` (a segmentation model's output); 0 is background in both and label values carry no meaning "
    "across the two. Match objects one-to-one where their intersection over union is at least 0.5 and "
    "report, as plain numbers between 0 and 1: `precision` (matched model objects / model objects), "
    "`recall` (matched annotated objects / annotated objects) and `f1` (their harmonic mean)."
)
_QC_COLLECT = (
    Collect("precision", "scalar", "a number in [0, 1]"),
    Collect("recall", "scalar", "a number in [0, 1]"),
    Collect("f1", "scalar", "a number in [0, 1]"),
)
QC_BASELINE_ABOUT = "pixel-wise precision, recall and F1 of the two foregrounds, with no object matching"

CASES: list[Case] = [
    Case(
        case_id="synthetic-blobs",
        namespace=SEGMENT,
        task=_LABELS_TASK.format(shape="256 x 256, float32"),
        persona=PERSONA,
        fixture=Procedural(build_synthetic_nuclei, seed=2026, params={}, tolerance=SYNTHETIC_TOLERANCE),
        layers=(Layer("nuclei", "image", kind="image"),),
        collect=_SEGMENT_COLLECT,
        verify=verify_nuclei,
        reference=reference_synthetic,
        baseline=baseline_otsu,
        baseline_about=OTSU_ABOUT,
        case_class="golden",
        about="~40 synthetic nuclei, about a third touching another, on an uneven background with noise",
    ),
    Case(
        case_id="dsb2018",
        namespace=SEGMENT,
        task=_LABELS_TASK.format(shape="512 x 512, uint16, a real fluorescence acquisition"),
        persona=PERSONA,
        fixture=OnDisk(tolerance=DSB_TOLERANCE, root=FIXTURE_ROOT),
        layers=(Layer("nuclei", "image", kind="image"),),
        collect=_SEGMENT_COLLECT,
        verify=verify_nuclei,
        reference=reference_dsb,
        baseline=baseline_otsu,
        baseline_about=OTSU_ABOUT,
        case_class="golden",
        about="a real DSB 2018 fluorescence image with its 125-nucleus human annotation (curated, shipped)",
    ),
    Case(
        case_id="dsb2018-dim",
        namespace=SEGMENT,
        task=_LABELS_TASK.format(
            shape="512 x 512, uint16, a real field acquired dim: few photons, a camera offset and read noise"
        ),
        persona=PERSONA,
        fixture=OnDisk(tolerance=DIM_TOLERANCE, root=FIXTURE_ROOT),
        layers=(Layer("nuclei", "image", kind="image"),),
        collect=_SEGMENT_COLLECT,
        verify=verify_nuclei,
        reference=reference_dsb,
        baseline=baseline_otsu,
        baseline_about=OTSU_ABOUT,
        case_class="hard-case",
        about="the DSB 2018 field as a dim, shot-noise-limited acquisition; the 125-nucleus human annotation",
    ),
    Case(
        case_id="empty-field",
        namespace=SEGMENT,
        task=(
            "Segment every nucleus in the fluorescence image `nuclei` (256 x 256, float32). Leave `labels`: an "
            "integer label image with exactly the shape of `nuclei`, 0 for background and one distinct positive "
            "integer per nucleus. If there is no nucleus, leave an all-zero `labels`; every object you report is "
            "checked against what is really there."
        ),
        persona=PERSONA,
        fixture=Procedural(build_empty_field, seed=2026, params={}, tolerance=EMPTY_TOLERANCE),
        layers=(Layer("nuclei", "image", kind="image"),),
        collect=_SEGMENT_COLLECT,
        verify=verify_empty,
        reference=reference_synthetic,
        baseline=baseline_otsu,
        baseline_about="a light blur, one global Otsu threshold and connected components: it cuts the noise into objects",
        case_class="empty",
        about="background and noise only: the right answer is no object at all",
    ),
    Case(
        case_id="annotation-vs-model",
        namespace=QC,
        task=_QC_TASK,
        persona=QC_PERSONA,
        fixture=Procedural(build_qc_pair, seed=2026, params={}, tolerance=QC_TOLERANCE),
        layers=(Layer("annotation", "annotation", kind="labels"), Layer("model", "model", kind="labels")),
        collect=_QC_COLLECT,
        verify=verify_qc,
        reference=reference_qc,
        baseline=baseline_qc,
        baseline_about=QC_BASELINE_ABOUT,
        case_class="golden",
        about="object-level precision/recall/F1 of a model against an annotation with controlled errors",
    ),
    Case(
        case_id="dsb2018-watershed",
        namespace=QC,
        task=_QC_TASK,
        persona=QC_PERSONA,
        fixture=OnDisk(tolerance=QC_TOLERANCE, root=FIXTURE_ROOT),
        layers=(Layer("annotation", "annotation", kind="labels"), Layer("model", "model", kind="labels")),
        collect=_QC_COLLECT,
        verify=verify_qc,
        reference=reference_qc,
        baseline=baseline_qc,
        baseline_about=QC_BASELINE_ABOUT,
        case_class="golden",
        about="object-level precision/recall/F1 of a real watershed segmentation against the DSB 2018 annotation",
    ),
]

SKILLS: list[Skill] = [
    Skill(SEGMENT, checklist=("labels",), about="instance segmentation of nuclei in a 2D fluorescence image"),
    Skill(QC, checklist=("labels", "scalars"), about="object-level quality of one segmentation against another"),
]

BUILDERS = {
    "nuclei-synthetic": build_synthetic_nuclei,
    "nuclei-empty-field": build_empty_field,
    "segmentation-qc-pair": build_qc_pair,
}
