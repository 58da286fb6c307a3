"""The built-in verifiers by name, for cases declared in files (``bench-case.json``, a bundle's ``case.json``).
Over 600 lines for one reason: the one table of every named verifier (:data:`VERIFIERS`) beside each runner.

Each entry of :data:`VERIFIERS` is a :class:`NamedKind`: its parameters (which data, truth and
leaving keys it reads, and its own settings such as a matching radius), the metrics it produces
(every one needs a limit in the case's ``tolerance``) and a factory ``params -> Verifier``
(:meth:`NamedKind.make`). The verifiers themselves are those of the built-in cases, unchanged:
a :class:`NamedVerifier` hands the built-in verifier a *view* of the fixture and the attempt
under the keys it expects (``image``, ``labels``, ...), so a user's data key ``raw`` and truth
key ``nuclei`` work, and gives the outcome back on the real fixture and attempt, with messages
naming the user's own leaving.

Named here: ``label-image`` (object agreement at IoU 0.5 of a label image, 2-D or 3-D),
``empty-labels`` (a field with no object), ``points`` (one-to-one matching within a radius,
:mod:`imagebench.cases.points`), ``restored`` (an image restored against its clean truth at a declared
data range, :mod:`imagebench.cases.restored`), ``drift`` (a drift trajectory and the corrected movie),
``landmarks`` (probe points mapped through a channel alignment), ``volumes`` (calibrated object
volumes), ``flatfield`` (flat-field corrected fields), ``stack`` (per-slice shifts of a stack) and
``ctc-tracking`` (a label movie and its lineage table: TRA, DET, SEG and division F1,
:mod:`imagebench.cases.tracking`).
A truth drawn as napari Shapes is rasterised to a label image when it is saved, so it is
scored by ``label-image`` (:func:`verifier_for_truth`). docs/cases.md tabulates them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from imagebench.case.model import LayerKind, Verifier
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError, Outcome, WhyNot

Role = Literal["data", "truth", "leaving", "number", "numbers", "names", "text"]
KEY_ROLES: tuple[str, ...] = ("data", "truth", "leaving")


_UNSET = object()


class VerifierError(ValueError):
    """A verifier name or parameter that cannot be used (names the parameter and what was expected)."""


@dataclass(frozen=True)
class Param:
    """One parameter: a key the verifier reads (``data``/``truth``/``leaving``, default the key the
    built-in verifier reads), or a setting (``number``, ``numbers``, ``names``)."""

    name: str
    role: Role
    about: str
    default: Any = None  # None and not optional: required
    optional: bool = False
    size: int | None = None  # numbers: how many (None: any count, checked against the array it sizes)

    def settle(self, value: Any, verifier: str) -> Any:
        where = f"verifier {verifier!r}: parameter {self.name!r}"
        if value is _UNSET or (value is None and not self.optional):
            if self.default is None and not self.optional:
                raise VerifierError(f"{where} is required ({self.about})")
            return self.default
        if value is None:  # an optional parameter given as null: not read at all
            return None
        if self.role in KEY_ROLES:
            if not isinstance(value, str) or not value:
                raise VerifierError(f"{where} must be a key name (text), got {value!r}")
            return value
        if self.role == "number":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
                raise VerifierError(f"{where} must be a positive number, got {value!r}")
            return float(value)
        if self.role == "text":
            if not isinstance(value, str) or not value.strip():
                raise VerifierError(f"{where} must be a non-empty text, got {value!r}")
            return value
        if self.role == "numbers":
            ok = isinstance(value, (list, tuple)) and (len(value) == self.size or (self.size is None and value))
            ok = ok and all(
                not isinstance(v, bool) and isinstance(v, (int, float)) and np.isfinite(v) and v > 0 for v in value
            )
            if not ok:
                raise VerifierError(f"{where} must be {self.size or 'a list of'} positive numbers, got {value!r}")
            return [float(v) for v in value]
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise VerifierError(f"{where} must be a non-empty list of names, got {value!r}")
        return list(value)


@dataclass(frozen=True)
class NamedKind:
    """A built-in verifier by name: its parameters, the metrics it produces and how it runs."""

    name: str
    about: str
    params: tuple[Param, ...]
    metrics: tuple[str, ...]
    run: Callable[[Fixture, Attempt, Mapping[str, Any]], Outcome] = field(repr=False)
    same_grid: tuple[str, ...] = ()  # key parameters whose arrays must share one shape
    spacing_of: str | None = None  # the key parameter whose array's dimensions `spacing` gives sizes of

    def settle(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """``params`` checked and completed with the defaults; :class:`VerifierError` names a bad one."""
        params = dict(params or {})
        known = {p.name for p in self.params}
        unknown = sorted(set(params) - known)
        if unknown:
            raise VerifierError(
                f"verifier {self.name!r}: unknown parameter(s) {unknown} (it takes {sorted(known) or 'none'})"
            )
        out = {p.name: p.settle(params.get(p.name, _UNSET), self.name) for p in self.params}
        if out.get("metrics") is not None:
            bad = sorted(set(out["metrics"]) - set(self.metrics))
            if bad:
                raise VerifierError(
                    f"verifier {self.name!r}: parameter 'metrics' names {bad}, not among {list(self.metrics)}"
                )
        return out

    def keys(self, params: Mapping[str, Any], role: str) -> dict[str, str]:
        """``{parameter: key}`` of the keys of ``role`` it reads with ``params`` (settled)."""
        return {p.name: params[p.name] for p in self.params if p.role == role and params.get(p.name) is not None}

    def produced(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """The metrics it produces with ``params`` (settled): each needs a limit."""
        chosen = params.get("metrics")
        return tuple(m for m in self.metrics if chosen is None or m in chosen)

    def make(self, params: Mapping[str, Any] | None = None) -> NamedVerifier:
        """The factory: a :data:`~imagebench.case.model.Verifier` with ``params`` settled."""
        return NamedVerifier(self.name, self.settle(params))


@dataclass(frozen=True)
class NamedVerifier:
    """A built-in verifier by name with its parameters: a plain, picklable callable whose fields
    are what the fingerprint pins (and :meth:`scoring_inputs` what the scoring closure adds)."""

    name: str
    params: Mapping[str, Any]

    def __call__(self, fixture: Fixture, attempt: Attempt) -> Outcome:
        return _RUNNERS[self.name](fixture, attempt, self.params)

    def scoring_inputs(self) -> dict[str, Any]:
        return {"verifier": self.name, "params": dict(self.params)}


# --------------------------------------------------------------------------- views under canonical keys


def _view(
    fixture: Fixture, attempt: Attempt, data: Mapping[str, str], truth: Mapping[str, str], leavings: Mapping[str, str]
) -> tuple[Fixture, Attempt]:
    """The fixture and attempt seen under canonical keys (``{canonical: user's key}``)."""
    for part, keys, source in (("data", data, fixture.data), ("truth", truth, fixture.truth)):
        missing = sorted(user for user in keys.values() if user not in source)
        if missing:
            raise FixtureError(
                f"case {fixture.label}: the verifier reads {part} key(s) {missing}, which the fixture lacks"
            )
    seen = replace(
        fixture,
        data={canon: fixture.data[user] for canon, user in data.items()},
        truth={canon: fixture.truth[user] for canon, user in truth.items()},
    )
    notes = dict(attempt.notes) if isinstance(attempt.notes, Mapping) else {}
    why_not = notes.get("why_not")
    if isinstance(why_not, Mapping):
        notes["why_not"] = {canon: why_not[user] for canon, user in leavings.items() if user in why_not}
    unreadable = notes.get("unreadable")
    if isinstance(unreadable, (list, tuple, set)):
        notes["unreadable"] = [canon for canon, user in leavings.items() if user in unreadable]
    arrays = {canon: attempt.arrays[user] for canon, user in leavings.items() if user in attempt.arrays}
    return seen, Attempt(attempt.subject, arrays=arrays, notes=notes)


def _renamed(text: Any, leavings: Mapping[str, str]) -> Any:
    if not isinstance(text, str):
        return text
    out = text
    for canon, user in leavings.items():
        if canon != user:
            out = out.replace(repr(canon), repr(user))
    return WhyNot(out, text.because) if isinstance(text, WhyNot) else out


def _through(
    verify: Callable[[Fixture, Attempt], Outcome],
    fixture: Fixture,
    attempt: Attempt,
    data: Mapping[str, str],
    truth: Mapping[str, str],
    leavings: Mapping[str, str],
) -> Outcome:
    """Run ``verify`` on the view; its outcome on the real fixture and attempt, under the user's names."""
    seen, left = _view(fixture, attempt, data, truth, leavings)
    outcome = verify(seen, left)
    metrics = [
        m if m.unavailable is None else replace(m, unavailable=_renamed(m.unavailable, leavings))
        for m in outcome.metrics
    ]
    detail = dict(outcome.detail)
    if "why" in detail:
        detail["why"] = _renamed(detail["why"], leavings)
    return Outcome(fixture, attempt, metrics, detail=detail, artifacts=outcome.artifacts)


# --------------------------------------------------------------------------- the verifiers


def _label_image(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases import segmentation, segmentation3d

    truth = fixture.truth.get(p["truth"])
    ndim = None if truth is None else np.ndim(truth)
    if ndim == 2:
        table, views, detail = segmentation.NUCLEI_METRICS, segmentation._outlines, None
    elif ndim == 3:
        table, views, detail = segmentation3d.METRICS, segmentation3d._views, {"matched_in": "3D (z, y, x)"}
    else:
        raise FixtureError(
            f"case {fixture.label}: truth {p['truth']!r} must be a 2-D or 3-D label image, got {ndim} dimension(s)"
        )
    image = fixture.data.get(p["data"])
    if image is not None and np.shape(image) != np.shape(truth):
        raise FixtureError(
            f"case {fixture.label}: data {p['data']!r} has shape {np.shape(image)}, truth {p['truth']!r} {np.shape(truth)}: "
            "a label image is scored on the grid of its image"
        )
    chosen = tuple(row for row in table if p.get("metrics") is None or row[0] in p["metrics"])
    spacing = p.get("spacing")
    if spacing is not None and len(spacing) != ndim:
        raise FixtureError(
            f"case {fixture.label}: verifier 'label-image': parameter 'spacing' {spacing} gives {len(spacing)} "
            f"sizes, truth {p['truth']!r} has {ndim} dimension(s): one pixel size per axis, in the array's order"
        )
    unit = p.get("unit") or ("px" if spacing is None else "um")

    def verify(seen: Fixture, left: Attempt) -> Outcome:
        return segmentation.score_labels(
            seen, left, chosen, views, detail=detail, spacing=None if spacing is None else tuple(spacing), unit=unit
        )

    return _through(verify, fixture, attempt, {"image": p["data"]}, {"labels": p["truth"]}, {"labels": p["leaving"]})


def _empty_labels(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases.segmentation import verify_empty

    return _through(
        verify_empty, fixture, attempt, {"image": p["data"]}, {"labels": p["truth"]}, {"labels": p["leaving"]}
    )


def _points(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases.points import EXTRA_POINT_METRICS, POINT_METRICS, score_points

    limits = {}
    chosen = set(p.get("metrics") or _POINT_DEFAULT)
    for name, _ in POINT_METRICS + EXTRA_POINT_METRICS:
        if name not in chosen:
            continue
        if name not in fixture.tolerance:
            raise FixtureError(f"case {fixture.label}: no limit for metric {name!r} (has {sorted(fixture.tolerance)})")
        limits[name] = float(fixture.tolerance[name])
    for part, key in (("truth", p["truth"]), ("data", p["data"])):
        if key is not None and key not in (fixture.truth if part == "truth" else fixture.data):
            raise FixtureError(f"case {fixture.label}: the verifier reads {part} key {key!r}, which the fixture lacks")
    return score_points(
        fixture,
        attempt,
        radius=p["radius"],
        limits=limits,
        truth_key=p["truth"],
        leaving=p["leaving"],
        image_key=p["data"],
    )


def _restored(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases.restored import score_restored

    truth, given = fixture.truth.get(p["truth"]), fixture.data.get(p["data"])
    if truth is not None and given is not None and np.shape(truth) != np.shape(given):
        raise FixtureError(
            f"case {fixture.label}: data {p['data']!r} has shape {np.shape(given)}, truth {p['truth']!r} "
            f"{np.shape(truth)}: a restored image is scored on the grid of its input"
        )

    def verify(seen: Fixture, left: Attempt) -> Outcome:
        return score_restored(seen, left, leaving="restored", data_key="input", data_range=p["data_range"])

    return _through(verify, fixture, attempt, {"input": p["data"]}, {"clean": p["truth"]}, {"restored": p["leaving"]})


def _drift(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases.drift import verify_drift

    return _through(
        verify_drift,
        fixture,
        attempt,
        {"movie": p["data"]},
        {"trajectory": p["truth"], "undrifted_mean": p["undrifted"]},
        {"shifts": p["shifts"], "corrected": p["corrected"]},
    )


def _landmarks(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases.landmarks import verify_landmarks

    return _through(
        verify_landmarks,
        fixture,
        attempt,
        {"fixed": p["fixed"], "moving": p["moving"]},
        {"probes_fixed_true": p["truth"]},
        {"probes_fixed": p["leaving"]},
    )


def _volumes(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases.measure import volumes_verifier

    verify = volumes_verifier(tuple(p["spacing"]))  # type: ignore[arg-type]
    return _through(
        verify, fixture, attempt, {"labels": p["data"]}, {"volumes_um3": p["truth"]}, {"volumes": p["leaving"]}
    )


def _flatfield(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases.flatfield import verify_flatfield

    return _through(
        verify_flatfield,
        fixture,
        attempt,
        {"fields": p["data"], "dark": p["dark"]},
        {"specimen": p["truth"]},
        {"corrected": p["leaving"]},
    )


def _stack(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases.stack import verify_stack

    return _through(
        verify_stack, fixture, attempt, {"volume": p["data"]}, {"offsets": p["truth"]}, {"shifts": p["leaving"]}
    )


def _ctc_tracking(fixture: Fixture, attempt: Attempt, p: Mapping[str, Any]) -> Outcome:
    from imagebench.cases.tracking import score_tracking

    buffer = p.get("frame_buffer") or 1.0
    if float(buffer) != int(buffer):
        raise FixtureError(
            f"case {fixture.label}: verifier 'ctc-tracking': frame_buffer {buffer!r} is not a whole number"
        )

    def verify(seen: Fixture, left: Attempt) -> Outcome:
        return score_tracking(seen, left, frame_buffer=int(buffer))

    return _through(
        verify,
        fixture,
        attempt,
        {"movie": p["data"]},
        {"labels": p["truth"], "lineage": p["lineage"]},
        {"masks": p["masks"], "tracks": p["tracks"]},
    )


_RUNNERS: dict[str, Callable[[Fixture, Attempt, Mapping[str, Any]], Outcome]] = {
    "label-image": _label_image,
    "empty-labels": _empty_labels,
    "points": _points,
    "restored": _restored,
    "drift": _drift,
    "landmarks": _landmarks,
    "volumes": _volumes,
    "flatfield": _flatfield,
    "stack": _stack,
    "ctc-tracking": _ctc_tracking,
}

_POINT_DEFAULT = ("f1_shortfall", "missed_fraction", "false_fraction", "localization_error")
_LABEL_METRICS = ("f1_shortfall", "missed_fraction", "false_fraction", "iou_shortfall")


def _keys(data: str, truth: str, leaving: str, what: tuple[str, str, str]) -> tuple[Param, ...]:
    return (
        Param("data", "data", what[0], default=data),
        Param("truth", "truth", what[1], default=truth),
        Param("leaving", "leaving", what[2], default=leaving),
    )


VERIFIERS: dict[str, NamedKind] = {
    kind.name: kind
    for kind in (
        NamedKind(
            "label-image",
            "object agreement of a label image with the truth's at IoU 0.5 (2-D or 3-D, as the truth is)",
            (
                *_keys(
                    "image",
                    "labels",
                    "labels",
                    (
                        "the image (its grid; drawn under the outlines)",
                        "the true label image",
                        "the answered label image",
                    ),
                ),
                Param("metrics", "names", "the metrics scored (default: all four)", optional=True),
                Param(
                    "spacing",
                    "numbers",
                    "the pixel size per axis of the truth (2 or 3), for HD95 and mean surface distance (null: px)",
                    optional=True,
                ),
                Param("unit", "text", "the unit of `spacing` (default um; px without a spacing)", optional=True),
            ),
            _LABEL_METRICS,
            _label_image,
            same_grid=("data", "truth"),
            spacing_of="truth",
        ),
        NamedKind(
            "empty-labels",
            "a field with no object: every answered object is a false one",
            _keys(
                "image",
                "labels",
                "labels",
                ("the image", "the (all-zero) true label image", "the answered label image"),
            ),
            ("false_objects",),
            _empty_labels,
            same_grid=("data", "truth"),
        ),
        NamedKind(
            "points",
            "points matched one-to-one to the true points within `radius` px (Hungarian matching)",
            (
                Param(
                    "data",
                    "data",
                    "the image the overlay is drawn on (null: no overlay)",
                    default="image",
                    optional=True,
                ),
                Param("truth", "truth", "the true points, (points, 2 or 3) in pixels", default="points"),
                Param("leaving", "leaving", "the answered points, (points, same columns)", default="points"),
                Param("radius", "number", "the farthest a matched pair may lie apart, px", default=3.0),
                Param(
                    "metrics",
                    "names",
                    "the metrics scored (default: the first four; localization_rmse and count_error when named)",
                    default=list(_POINT_DEFAULT),
                ),
            ),
            _POINT_DEFAULT + ("localization_rmse", "count_error"),
            _points,
        ),
        NamedKind(
            "restored",
            "an image restored (denoised, deconvolved) against its clean truth: NRMSE and 1 - SSIM at a declared data range",
            (
                *_keys(
                    "input",
                    "clean",
                    "restored",
                    (
                        "the image given to restore (same grid as the truth; its own figures reported beside)",
                        "the clean image",
                        "the restored image (same grid and intensity scale as the truth)",
                    ),
                ),
                Param("data_range", "number", "the data range R of SSIM and PSNR (the truth's max - min possible)"),
            ),
            ("nrmse", "ssim_shortfall"),
            _restored,
            same_grid=("data", "truth"),
        ),
        NamedKind(
            "drift",
            "a drift trajectory (per-frame content displacement) and the movie corrected by it",
            (
                Param("data", "data", "the movie (t, y, x)", default="movie"),
                Param("truth", "truth", "the true trajectory (t, 2)", default="trajectory"),
                Param("undrifted", "truth", "the mean of the movie without drift (y, x)", default="undrifted_mean"),
                Param("shifts", "leaving", "the answered trajectory (t, 2)", default="shifts"),
                Param("corrected", "leaving", "the answered corrected movie", default="corrected"),
            ),
            ("trajectory_rms_error", "trajectory_max_error", "residual_ratio"),
            _drift,
        ),
        NamedKind(
            "landmarks",
            "probe points mapped from the moving channel into the fixed one",
            (
                Param("fixed", "data", "the fixed channel (drawn under the probes)", default="fixed"),
                Param("moving", "data", "the moving channel", default="moving"),
                Param(
                    "truth",
                    "truth",
                    "the probes' true positions in the fixed channel (n, 2)",
                    default="probes_fixed_true",
                ),
                Param("leaving", "leaving", "the answered positions (n, 2)", default="probes_fixed"),
            ),
            ("median_probe_error", "worst_probe_error"),
            _landmarks,
        ),
        NamedKind(
            "volumes",
            "calibrated volumes of labelled objects (um^3), relative error of the worst",
            (
                *_keys(
                    "labels",
                    "volumes_um3",
                    "volumes",
                    (
                        "the label volume (z, y, x)",
                        "the true volume of each object, in label order",
                        "the answered volumes",
                    ),
                ),
                Param("spacing", "numbers", "the voxel size (z, y, x) in um, for the voxel-count hint", size=3),
            ),
            ("volume_relative_error",),
            _volumes,
        ),
        NamedKind(
            "flatfield",
            "flat-field corrected fields against the true specimen (up to one overall scale)",
            (
                Param("data", "data", "the raw fields (n, y, x)", default="fields"),
                Param("dark", "data", "the dark frame (y, x)", default="dark"),
                Param("truth", "truth", "the true specimen fields", default="specimen"),
                Param("leaving", "leaving", "the answered corrected fields", default="corrected"),
            ),
            ("profile_residual", "relative_error"),
            _flatfield,
        ),
        NamedKind(
            "stack",
            "per-slice displacement of a stack, up to what a stack cannot tell apart (an offset and a linear drift)",
            _keys(
                "volume",
                "offsets",
                "shifts",
                (
                    "the stack (axis 0, axis 1, slices)",
                    "the true offsets (slices, 2)",
                    "the answered shifts (slices, 2)",
                ),
            ),
            ("median_slice_error", "worst_slice_error"),
            _stack,
        ),
        NamedKind(
            "ctc-tracking",
            "tracks of a label movie scored as the Cell Tracking Challenge scores them (TRA, DET, SEG) and by division F1",
            (
                Param("data", "data", "the movie (t, y, x), drawn under the tracks", default="movie"),
                Param("truth", "truth", "the true label movie (t, y, x), one label per track", default="labels"),
                Param(
                    "lineage", "truth", "the true lineage table (n, 4): label, begin, end, parent", default="lineage"
                ),
                Param("masks", "leaving", "the answered label movie", default="masks"),
                Param("tracks", "leaving", "the answered lineage table (n, 4)", default="tracks"),
                Param("frame_buffer", "number", "frames a division may be shifted and still count", default=1.0),
            ),
            ("tra_shortfall", "det_shortfall", "seg_shortfall", "division_f1_shortfall"),
            _ctc_tracking,
            same_grid=("data", "truth"),
        ),
    )
}


def named_kind(name: str) -> NamedKind:
    kind = VERIFIERS.get(name)
    if kind is None:
        raise VerifierError(
            f"{name!r} is not a built-in verifier (known: {', '.join(sorted(VERIFIERS))}; or pkg.mod:func)"
        )
    return kind


def named_verifier(name: str, params: Mapping[str, Any] | None = None) -> Verifier:
    """The built-in verifier ``name`` with ``params`` (:class:`VerifierError` for a bad name or parameter)."""
    return named_kind(name).make(params)


def limit_problems(
    name: str, params: Mapping[str, Any] | None, tolerance: Mapping[str, float]
) -> list[tuple[str, str]]:
    """``[(field, problem)]`` of a tolerance for verifier ``name``: a limit for a metric it does not
    produce (field ``tolerance.<metric>``), a metric it produces without a limit (``tolerance``)."""
    kind = named_kind(name)
    produced = kind.produced(kind.settle(params))
    out = [
        (f"tolerance.{metric}", f"{metric!r} is not a metric of verifier {name!r} (it produces {list(produced)})")
        for metric in sorted(set(tolerance) - set(produced))
    ]
    out += [
        ("tolerance", f"no limit for metric {metric!r} of verifier {name!r} (every one of {list(produced)} needs one)")
        for metric in produced
        if metric not in tolerance
    ]
    return out


#: the verifier a truth saved from a napari layer of that kind is scored by (shapes are rasterised to labels)
TRUTH_VERIFIERS: dict[str, str] = {"labels": "label-image", "shapes": "label-image", "points": "points"}


def verifier_for_truth(kind: LayerKind) -> str:
    """The name of the verifier for a truth saved from a layer of ``kind`` (save-as-case)."""
    try:
        return TRUTH_VERIFIERS[kind]
    except KeyError:
        raise VerifierError(
            f"no built-in verifier scores a truth of kind {kind!r} (known: {', '.join(sorted(TRUTH_VERIFIERS))})"
        ) from None


def verifier_of(name: str, params: Mapping[str, Any] | None = None, leavings: tuple[str, ...] = ()) -> Verifier:
    """A built-in verifier by ``name``, or the user's ``pkg.mod:func`` (imported here, in the harness)."""
    from imagebench.cases.targets import TargetVerifier, is_target

    if is_target(name):
        return TargetVerifier.of(name, params, leavings)
    return named_verifier(name, params)


__all__ = [
    "VERIFIERS",
    "NamedKind",
    "NamedVerifier",
    "Param",
    "VerifierError",
    "limit_problems",
    "named_kind",
    "named_verifier",
    "verifier_for_truth",
    "verifier_of",
]
