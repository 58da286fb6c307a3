"""What a person looks at after a run: ``summary.json`` plus PNGs, per case and sample.

The number says what happened; the images explain it. ``write_report`` puts both under
``<root>/<subject>/<namespace>/<case_id>/`` (or ``.../sample-<n>/``), keyed on the case's
label, so a second case of one skill lands beside the first.

Images that are meant to be compared are written with one shared contrast range
(``shared_range``). Scaling each image on its own is the trap: a corrected-minus-raw
difference that is near zero everywhere gets stretched to full range and looks just like
the uncorrected image.

A *difference* artifact (its name ``difference`` or ``difference_<x>``) is signed: a grey map
under the shared range would clip every negative value to black and hide the sign. It is drawn
instead with a diverging map (magenta below zero, black at zero, green above) over the range
symmetric about zero whose half-width is the shared range's width (:func:`difference_range`), so
one grey level of the other images and one step of the difference mean the same amount and a
near-zero difference still looks near zero.

PNG writing is best-effort (``save_png``): a missing imageio plugin or an image that cannot
be drawn leaves ``<name>.png.error`` with the reason instead of failing the run. imageio is
imported only when a PNG is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from imagebench.fixtures.fixture import Outcome
from imagebench.records import (
    STATUSES,
    MetricRecord,
    SampleSummary,
    atomic_write_text,
    json_safe,
    write_record,
)
from imagebench.runs.layout import artifact_digests, report_dir, safe_name

__all__ = [
    "DIFFERENCE_COLORS",
    "difference_range",
    "is_difference",
    "save_png",
    "shared_range",
    "write_report",
]


#: Percentiles (of the pooled finite pixel values) that bound a shared range: robust to a few
#: hot or dead pixels while keeping almost all of the dynamic range.
RANGE_PERCENTILES = (0.5, 99.5)
#: Above this many values an image contributes an evenly strided sample to the percentiles.
_RANGE_SAMPLE = 1 << 22
#: zlib level of the PNGs (Pillow's default is 6): 1 writes noisy 8-bit images about a third
#: faster for files about a tenth larger; the pixels are the same at every level.
PNG_COMPRESS_LEVEL = 1

#: The diverging map of a difference artifact, as RGB at -half, 0 and +half of its range (the
#: panel's compare pane uses the same three colours).
DIFFERENCE_COLORS = ((0.9, 0.25, 0.9), (0.0, 0.0, 0.0), (0.25, 0.85, 0.35))


def is_difference(name: str) -> bool:
    """Whether an artifact of this name is a signed difference (``difference``, ``difference_<x>``)."""
    return name == "difference" or name.startswith("difference_")


def difference_range(vmin: float, vmax: float) -> tuple[float, float]:
    """The range a difference artifact is drawn over, given the images' shared ``[vmin, vmax]``:
    symmetric about zero, half-width ``vmax - vmin``."""
    width = float(vmax) - float(vmin)
    return -width, width


def _diverging(arr: np.ndarray, half: float) -> np.ndarray:
    """``arr`` (2D) as 8-bit RGB on :data:`DIFFERENCE_COLORS` over ``[-half, half]``; NaN is black."""
    t = np.nan_to_num(arr.astype(np.float64) / half, nan=0.0, posinf=1.0, neginf=-1.0)
    t = np.clip(t, -1.0, 1.0)
    low, mid, high = (np.asarray(c) for c in DIFFERENCE_COLORS)
    neg = np.clip(-t, 0.0, 1.0)[..., None]
    pos = np.clip(t, 0.0, 1.0)[..., None]
    rgb = mid + neg * (low - mid) + pos * (high - mid)
    return np.round(rgb * 255.0).astype(np.uint8)


# Fields write_report derives itself; ``extra`` may set any other SampleSummary field.
_OWNED = {
    "schema_version",
    "label",
    "namespace",
    "case_id",
    "subject",
    "sample",
    "status",
    "reason",
    "passed",
    "metrics",
    "artifacts",
    "artifact_digests",
    "detail",
}


def _numeric(image: Any) -> np.ndarray | None:
    try:
        arr = np.asarray(image)
    except Exception:
        return None
    if arr.dtype.kind == "b":
        return arr.astype(np.uint8)
    if arr.dtype.kind not in "iuf" or arr.size == 0:
        return None
    return arr


def shared_range(*images: Any) -> tuple[float, float]:
    """One contrast range for every image given: the 0.5th and 99.5th percentiles of their
    pooled finite values (images larger than ~4M values contribute an evenly strided sample).

    Non-numeric or empty images are ignored. When the percentiles coincide (a sparse label
    image), the finite min/max is used; when those coincide too (a constant image), the range is
    widened around the value so it still maps to a defined grey. No finite value at all gives
    ``(0.0, 1.0)``.
    """
    pooled: list[np.ndarray] = []
    for image in images:
        arr = _numeric(image)
        if arr is None:
            continue
        flat = arr.reshape(-1)
        if flat.size > _RANGE_SAMPLE:
            flat = flat[:: -(-flat.size // _RANGE_SAMPLE)]
        flat = flat.astype(np.float64, copy=False)
        flat = flat[np.isfinite(flat)]
        if flat.size:
            pooled.append(flat)
    if not pooled:
        return 0.0, 1.0
    values = np.concatenate(pooled)
    lo, hi = (float(v) for v in np.percentile(values, RANGE_PERCENTILES))
    if not hi > lo:
        lo, hi = float(values.min()), float(values.max())
    if not hi > lo:
        pad = max(abs(lo), 1.0) * 0.5
        lo, hi = lo - pad, hi + pad
    return lo, hi


def _to_rgb_or_gray(arr: np.ndarray) -> np.ndarray:
    """Reduce to 2D (grey) or 3D with 3/4 trailing channels by max projection over leading axes."""
    if arr.ndim < 2:
        raise ValueError(f"expected an image of 2 or more dimensions, got shape {arr.shape}")
    color = arr.ndim >= 3 and arr.shape[-1] in (3, 4)
    keep = 3 if color else 2
    if arr.ndim > keep:
        arr = arr.max(axis=tuple(range(arr.ndim - keep)))
    return arr


def _to_uint8(arr: np.ndarray, vmin: float | None, vmax: float | None) -> np.ndarray:
    if arr.dtype == np.uint8 and arr.ndim == 3 and vmin is None and vmax is None:
        return arr  # colour that is already 8-bit
    if vmin is None or vmax is None:
        lo, hi = shared_range(arr)
        vmin = lo if vmin is None else vmin
        vmax = hi if vmax is None else vmax
    vmin, vmax = float(vmin), float(vmax)
    if not (np.isfinite(vmin) and np.isfinite(vmax)) or vmax <= vmin:
        raise ValueError(f"invalid contrast range ({vmin}, {vmax})")
    scaled = (arr.astype(np.float64) - vmin) / (vmax - vmin)
    scaled = np.nan_to_num(scaled, nan=0.0, posinf=1.0, neginf=0.0)
    return np.round(np.clip(scaled, 0.0, 1.0) * 255.0).astype(np.uint8)


#: The largest array kept beside its PNG (``save_values``); bigger ones are shown from the PNG only.
VALUES_MAX_BYTES = 16 * 1024 * 1024


def save_values(path: str | os.PathLike[str], image: Any) -> Path | None:
    """Keep a grey artifact's values (float32, reduced as its PNG is) at ``path`` (``.npy``), so a
    viewer shows and hovers the real numbers under one real contrast range rather than 0..255.
    Colour images and arrays over :data:`VALUES_MAX_BYTES` are not kept; never raises."""
    path = Path(path)
    try:
        arr = _numeric(image)
        if arr is None:
            return None
        values = _to_rgb_or_gray(arr)
        if values.ndim != 2 or values.size * 4 > VALUES_MAX_BYTES:
            return None
        tmp = path.with_name(f".{path.name}.tmp.npy")
        np.save(tmp, values.astype(np.float32), allow_pickle=False)
        os.replace(tmp, path)
        return path
    except Exception:
        return None


def save_png(
    path: str | os.PathLike[str],
    image: Any,
    vmin: float | None = None,
    vmax: float | None = None,
    *,
    signed: bool = False,
) -> Path | None:
    """Write ``image`` as a PNG at ``path``; best-effort, never raises.

    2D images are grey, mapped linearly from ``[vmin, vmax]`` to 0..255 (default: the image's
    own ``shared_range``; NaN is drawn black). A trailing axis of 3 or 4 is colour (uint8 colour
    is written as is unless a range is given). Higher dimensions are max-projected over the
    leading axes. ``signed`` draws a grey image on the diverging difference map over
    ``[vmin, vmax]``, which must then be symmetric about zero. On failure ``<path>.error`` holds the reason and None is returned; a stale
    file of the other kind is removed so the folder never shows both.
    """
    path = Path(path)
    error = path.with_name(path.name + ".error")
    tmp = path.with_name(f".{path.name}.tmp.png")
    try:
        arr = _numeric(image)
        if arr is None:
            kind = type(image).__name__
            raise ValueError(f"not a numeric, non-empty image (got {kind})")
        reduced = _to_rgb_or_gray(arr)
        if signed and reduced.ndim == 2:
            if vmin is None or vmax is None or not (np.isfinite(vmax) and vmax > 0 and vmin == -vmax):
                raise ValueError(f"a signed image needs a range symmetric about zero, got ({vmin}, {vmax})")
            pixels = _diverging(reduced, float(vmax))
        else:
            pixels = _to_uint8(reduced, vmin, vmax)
        from PIL import Image  # the bytes imageio's pillow plugin writes, without its per-call plugin lookup

        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(tmp, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
        os.replace(tmp, path)
    except Exception as exc:
        try:
            tmp.unlink(missing_ok=True)
            path.unlink(missing_ok=True)
            atomic_write_text(error, f"{type(exc).__name__}: {exc}\n")
        except Exception:
            pass
        return None
    try:
        error.unlink(missing_ok=True)
    except OSError:
        pass
    return path


# --------------------------------------------------------------------------- reports


def _metric_record(m: Any) -> MetricRecord:
    # An infinite value has no JSON spelling: it is stored as null, and the verdict keeps the truth.
    value = None if m.value is None else json_safe(float(m.value))
    return MetricRecord(
        name=m.name,
        value=value,
        limit=float(m.limit),
        unit=m.unit,
        unavailable=m.unavailable,
        unavailable_because=getattr(m, "unavailable_because", None),
        verdict=m.verdict,
    )


def write_report(
    outcome: Outcome,
    root: str | os.PathLike[str],
    *,
    subject: str | None = None,
    sample: int | None = None,
    status: str | None = None,
    reason: str = "",
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``summary.json`` (a ``records.SampleSummary``) and the outcome's images; return the summary path.

    The folder is ``report_dir(root, subject, namespace, case_id, sample)``, the subject
    defaulting to ``outcome.attempt.subject`` and the status to ``outcome.status``. Every image
    in ``outcome.artifacts`` becomes ``<name>.png`` with one range shared by all of them (a
    difference artifact on the diverging map over :func:`difference_range` of that range).
    ``outcome.detail`` is stored JSON-safe. ``extra`` sets further summary fields (``seed``,
    ``times``, ``flags``, ``answer``, ``case_class``, ...); fields this function derives are refused.
    The summary is written last and atomically, so it only ever lists artifacts that exist, and it
    records the sha256 of every file beside it (``artifact_digests``), which its journal line anchors.
    """
    fixture = outcome.fixture
    if not fixture.skill_id or not fixture.case_id:
        raise ValueError(
            f"write_report: the fixture carries no case identity (skill_id={fixture.skill_id!r}, "
            f"case_id={fixture.case_id!r}); only a fixture built by its case's spec can be reported"
        )
    subject = subject if subject is not None else outcome.attempt.subject
    status = status if status is not None else outcome.status
    if status not in STATUSES:
        raise ValueError(f"write_report: status {status!r} is not one of {STATUSES}")
    fields = dict(extra or {})
    owned = sorted(set(fields) & _OWNED)
    if owned:
        raise ValueError(f"write_report: extra may not set {owned}; write_report derives them")
    unknown = sorted(set(fields) - set(SampleSummary.model_fields))
    if unknown:
        raise ValueError(f"write_report: extra names unknown summary field(s) {unknown}")

    if "answer" not in fields and isinstance(outcome.detail.get("answer"), dict):
        fields["answer"] = outcome.detail["answer"]  # a structured case's per-field score

    folder = report_dir(root, subject, fixture.skill_id, fixture.case_id, sample)
    folder.mkdir(parents=True, exist_ok=True)

    written: list[str] = []
    images: dict[str, Any] = {}
    for name, image in outcome.artifacts.items():
        arr = _numeric(image)  # read each image (a ref, a dask array) once for range and PNG
        images[name] = image if arr is None else arr
    if images:
        kept = outcome.detail.get("artifact_range")  # record_artifact_range's, over these same arrays
        vmin, vmax = kept if _is_range(kept) else shared_range(*_ranged(images).values())
        for name, image in images.items():
            stem = safe_name(name, "image")
            if is_difference(stem):
                png = save_png(folder / f"{stem}.png", image, *difference_range(vmin, vmax), signed=True)
            else:
                png = save_png(folder / f"{stem}.png", image, vmin, vmax)
            written.append(png.name if png is not None else f"{stem}.png.error")
            if png is not None:
                save_values(folder / f"{stem}.npy", image)

    summary = SampleSummary(
        **{
            "kind": fixture.kind,
            "provenance": fixture.provenance,
            "citation": fixture.citation,
            **json_safe(fields),
            "label": f"{fixture.skill_id}/{fixture.case_id}",
            "namespace": fixture.skill_id,
            "case_id": fixture.case_id,
            "subject": subject,
            "sample": sample,
            "status": status,
            "reason": reason,
            "passed": bool(status == "ok" and outcome.passed),
            "metrics": [_metric_record(m) for m in outcome.metrics],
            "detail": json_safe(dict(outcome.detail)),
            "artifacts": written,
            "artifact_digests": artifact_digests(folder),
        }
    )
    return write_record(folder / "summary.json", summary)


def _ranged(images: Mapping[str, Any]) -> Mapping[str, Any]:
    """The images the shared range is taken over: all but the differences (drawn over a range
    derived from it), unless every image is one."""
    kept = {name: image for name, image in images.items() if not is_difference(safe_name(name, "image"))}
    return kept or images


def _is_range(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(v, float) and np.isfinite(v) for v in value)
        and value[0] < value[1]
    )


def record_artifact_range(outcome: Outcome) -> None:
    """Record in ``outcome.detail["artifact_range"]`` the one contrast range :func:`write_report`
    gives all of the outcome's PNGs (for the HTML report). Each artifact is read here once and
    kept as an array, so ``write_report`` does not read a lazy one again."""
    if not outcome.artifacts or "artifact_range" in outcome.detail:
        return
    arrays = {}
    for key, image in outcome.artifacts.items():
        arr = _numeric(image)
        arrays[key] = image if arr is None else arr
    outcome.artifacts.update(arrays)
    if any(_numeric(a) is not None for a in arrays.values()):
        lo, hi = shared_range(*_ranged(arrays).values())
        outcome.detail["artifact_range"] = [lo, hi]
