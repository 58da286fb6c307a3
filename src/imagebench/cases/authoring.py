"""A person's own case saved into a fixture tree: its arrays, layout, manifest entry and declaration.

:func:`save_case` is what the panel's *Save as case* tab and ``imagebench case new`` call. From
the data arrays (by key), the truth arrays (by key, each a ``labels`` image or ``points``) and
the words a person gives (skill, case, provenance, citation, optionally a prompt), it writes

- ``<root>/<skill>/<case>/<key>.npy`` for every data and truth key, ``case.json`` and the
  case's entry in ``<root>/manifest.json`` (:func:`imagebench.fixtures.authoring.write_curated_case`);
- ``<root>/<skill>/<case>/bench-case.json`` (:class:`imagebench.case.declared.CaseDeclaration`):
  the data keys as image layers, one leaving named after the scored truth key, the verifier
  chosen by the truth's kind (``label-image`` for labels, ``points`` for points) with its
  params (which data key gives the grid, which truth key and leaving it compares) and limits.

The declaration is listed in the manifest entry too, so ``imagebench fixtures verify`` pins the
prompt and the limits as it pins the pixels. Every check runs before anything is written; a
failed save leaves the tree as it was. The truth goes only into the tree: nothing here writes
into a workspace or a session.

Default limits (:data:`DEFAULT_TOLERANCES`) are a starting point, not a calibration: near the
limits the built-in curated segmentation case earned on real data (``docs/cases.md``). Set them
properly with ``imagebench calibrate`` once the case has a reference and a baseline, or give
them (``tolerance=``, ``--tolerance NAME=VALUE``: a limit given replaces its default; a name the verifier does
not produce is refused). A user case has no reference solution unless
one is named (``pkg.mod:func``); without one it still lists, and a person can work and score it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from imagebench.case.declared import (
    DECLARATION,
    CaseDeclaration,
    DeclaredLayer,
    DeclaredLeaving,
    DeclaredVerifier,
    declaration_json,
)
from imagebench.cases.verifiers import VERIFIERS, VerifierError, verifier_for_truth
from imagebench.fixtures.annotations import (
    TRUTH_KINDS,
    AnnotationError,
    TruthKind,
    data_array,
    grid_of,
    label_image,
    point_array,
)
from imagebench.fixtures.authoring import WrittenCase, write_curated_case

#: the limits a new case starts with, per built-in verifier (calibrate them: ``imagebench calibrate``)
DEFAULT_TOLERANCES: dict[str, dict[str, float]] = {
    # object matching at IoU 0.5: 1 - F1, unmatched truth / truth, unmatched objects / objects, 1 - mean IoU
    "label-image": {"f1_shortfall": 0.3, "missed_fraction": 0.35, "false_fraction": 0.3, "iou_shortfall": 0.35},
    # points matched one to one within 3 px: 1 - F1, unmatched truth / truth, unmatched points / points,
    # the mean distance of the matched pairs (px)
    "points": {"f1_shortfall": 0.2, "missed_fraction": 0.2, "false_fraction": 0.2, "localization_error": 2.0},
}


def metrics_of(name: str, params: Mapping[str, Any] | None = None) -> tuple[str, ...] | None:
    """The metrics the built-in verifier ``name`` produces with ``params`` (each needs a limit);
    None for ``pkg.mod:func``."""
    kind = VERIFIERS.get(name)
    return kind.produced(kind.settle(params)) if kind is not None else None


def _verifier_params(name: str, keys: Mapping[str, str], limits: Mapping[str, float]) -> dict[str, Any]:
    """The declaration's verifier parameters: its keys, and, for a verifier that scores some of its
    metrics only when named (``points``: ``localization_rmse``, ``count_error``), those a limit names."""
    params: dict[str, Any] = dict(keys)
    kind = VERIFIERS.get(name)
    if kind is not None and any(p.name == "metrics" for p in kind.params):
        default = kind.produced(kind.settle(params))
        chosen = [m for m in kind.metrics if m in default or m in limits]
        if chosen != list(default):
            params["metrics"] = chosen
    return params


__all__ = [
    "DEFAULT_TOLERANCES",
    "SaveError",
    "SavedCase",
    "default_prompt",
    "metrics_of",
    "save_case",
    "verifier_for_truth",
]


class SaveError(ValueError):
    """A case that cannot be saved as given; nothing was written. The message names what to change."""


@dataclass(frozen=True)
class SavedCase:
    """What :func:`save_case` wrote: the tree's files and the declaration."""

    written: WrittenCase
    declaration: CaseDeclaration
    declaration_path: Path

    @property
    def label(self) -> str:
        return self.written.label

    def paths(self) -> list[Path]:
        """Every file written or changed, the manifest last."""
        w = self.written
        return [*w.files.values(), w.layout, *w.texts.values(), w.manifest]


def _quoted(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def default_prompt(data: Mapping[str, tuple[int, ...]], leaving: str, kind: TruthKind, like: str) -> str:
    """The task as a subject reads it: the data layers by name and shape, and the one leaving."""
    shape = " x ".join(str(n) for n in data[like])
    shown = f"`{like}` ({shape})" if len(data) == 1 else f"{_quoted(list(data))} (`{like}` is {shape})"
    if kind == "labels":
        return (
            f"Segment every object in {shown}. Leave `{leaving}`: an integer label image "
            f"with exactly the shape of `{like}`, 0 for background and one distinct positive integer per object."
        )
    ndim = len(data[like])
    return (
        f"Locate every object in {shown}. Leave `{leaving}`: a float array of shape "
        f"(N, {ndim}), one row per object, its coordinates in the pixel grid of `{like}` (axis order as the array's)."
    )


def _truths(
    truth: Mapping[str, Any], kinds: Mapping[str, str], grids: dict[str, tuple[int, ...]]
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    arrays: dict[str, np.ndarray] = {}
    like: dict[str, str] = {}
    first = next(iter(grids))
    for key, value in truth.items():
        kind = kinds.get(key)
        if kind not in TRUTH_KINDS:
            raise SaveError(f"truth {key!r}: kind {kind!r}, expected one of {', '.join(TRUTH_KINDS)}")
        array = np.asarray(value)
        if kind == "labels":
            like[key] = grid_of(key, tuple(array.shape), grids)
            arrays[key] = label_image(key, array, grids[like[key]])
        else:
            ndims = [k for k, s in grids.items() if array.ndim == 2 and len(s) == array.shape[-1]]
            like[key] = ndims[0] if ndims else first
            arrays[key] = point_array(key, array, grids[like[key]])
    return arrays, like


def save_case(
    root: str | os.PathLike[str],
    skill: str,
    case_id: str,
    *,
    data: Mapping[str, Any],
    truth: Mapping[str, Any],
    kinds: Mapping[str, str],
    provenance: str,
    citation: str,
    scored: str | None = None,
    prompt: str | None = None,
    verifier: str | None = None,
    tolerance: Mapping[str, float] | None = None,
    reference: str | None = None,
    baseline: str | None = None,
    about: str = "",
    case_class: str = "golden",
    scale: Mapping[str, list[float]] | None = None,
) -> SavedCase:
    """Check, then write, a new case into the tree at ``root``; see the module. ``scored`` names
    the truth key the verifier compares (needed when there are several); its leaving has its name.
    Raises :class:`SaveError` (or the fixture tree's ``FixtureError``, ``CaseExists``) with nothing written."""
    try:
        arrays = {key: data_array(key, value) for key, value in data.items()}
        if not arrays:
            raise SaveError("no data layer: a case shows its subject at least one image")
        grids = {key: tuple(a.shape) for key, a in arrays.items()}
        truths, like = _truths(truth, kinds, grids)
    except AnnotationError as exc:
        raise SaveError(str(exc)) from None
    if not truths:
        raise SaveError("no truth layer: a case is scored against at least one")
    if scored is None:
        if len(truths) > 1:
            raise SaveError(f"several truth layers ({', '.join(truths)}): say which one the verifier scores")
        scored = next(iter(truths))
    if scored not in truths:
        raise SaveError(f"the scored truth {scored!r} is not a truth layer ({', '.join(truths)})")
    kind: TruthKind = kinds[scored]  # type: ignore[assignment]
    name = verifier or verifier_for_truth(kind)
    limits = {**DEFAULT_TOLERANCES.get(name, {}), **dict(tolerance or {})}  # a limit given replaces its default
    if not limits:
        raise SaveError(f"verifier {name!r} has no default limits here; give them (tolerance NAME=VALUE)")
    params = _verifier_params(name, {"data": like[scored], "truth": scored, "leaving": scored}, limits)
    try:
        produced = metrics_of(name, params)
    except VerifierError as exc:
        raise SaveError(str(exc)) from None
    if produced is not None:
        unknown = sorted(set(limits) - set(produced))
        if unknown:
            raise SaveError(f"tolerance {unknown}: not metrics of verifier {name!r} (it produces {list(produced)})")
        missing = [m for m in produced if m not in limits]
        if missing:
            raise SaveError(f"verifier {name!r} needs a limit for {missing} (tolerance NAME=VALUE)")
    grid = like[scored]
    text = prompt if prompt is not None and prompt.strip() else default_prompt(grids, scored, kind, grid)
    scales = dict(scale or {})
    try:
        declaration = CaseDeclaration(
            skill=skill,
            case_id=case_id,
            prompt=text,
            case_class=case_class,  # type: ignore[arg-type]
            about=about,
            layers=[DeclaredLayer(name=k, key=k, kind="image", scale=scales.get(k)) for k in arrays],
            leave=[
                DeclaredLeaving(
                    name=scored,
                    what="array",
                    layer=kind,
                    like=grid,
                    description="an integer label image" if kind == "labels" else "(N, ndim) point coordinates",
                )
            ],
            verifier=DeclaredVerifier(name=name, params=params),
            tolerance=limits,
            reference=reference or None,
            baseline=baseline or None,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise SaveError(
            f"{skill}/{case_id}: {DECLARATION} field {where!r}: {first['msg'].removeprefix('Value error, ')}"
        ) from None
    written = write_curated_case(
        root,
        skill,
        case_id,
        data=arrays,
        truth=truths,
        provenance=provenance,
        citation=citation,
        about=about,
        texts={DECLARATION: declaration_json(declaration)},
    )
    return SavedCase(written=written, declaration=declaration, declaration_path=written.texts[DECLARATION])
