"""Save as case, without Qt: the form, the rule that enables Save, and the layers made arrays.

A person picks the data layers (Image) and the one truth layer (Labels, Points or Shapes) on the
viewer, names the skill and the case, and gives a prompt (pre-filled), a citation and a
provenance. :meth:`SaveCaseModel.problem` says why Save is not ready (``None`` when it is: the
panel enables the button on that alone); :meth:`SaveCaseModel.save` turns the layers into arrays
(a Shapes layer rasterized on its data layer's grid, one label per shape) and writes the case
with :func:`imagebench.cases.authoring.save_case` into the fixture tree. A truth layer must sit
on its data layer's pixel grid (the same scale and translate), or its coordinates would mean
other pixels; the tree shipped inside the package is never written to.

Layers are handed over as napari layers but only read (``name``, ``data``, ``scale``,
``translate``, ``shape_type``, and the class name): nothing here imports napari or Qt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DATA_KINDS: tuple[str, ...] = ("Image",)
TRUTH_KINDS: tuple[str, ...] = ("Labels", "Points", "Shapes")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

__all__ = ["DATA_KINDS", "TRUTH_KINDS", "SaveCaseModel", "SaveForm", "key_for"]


@dataclass
class SaveForm:
    """What the person filled in; layer names as the viewer shows them."""

    data: list[str] = field(default_factory=list)
    truth: str | None = None
    skill: str = ""
    case_id: str = ""
    prompt: str = ""
    citation: str = ""
    provenance: str = ""
    tree: str = ""


def key_for(name: str, taken: Iterable[str] = ()) -> str:
    """A layer's name as a data or truth key: lowercase, ``_`` for anything else, never one ``taken``."""
    key = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_") or "layer"
    if not key[0].isalpha():
        key = f"layer_{key}"
    taken = set(taken)
    out, n = key, 2
    while out in taken:
        out, n = f"{key}_{n}", n + 1
    return out


def _kind(layer: Any) -> str:
    return type(layer).__name__


class SaveCaseModel:
    """The Save as case form's rules and its one action."""

    def __init__(self, packaged_root: Path | None = None) -> None:
        if packaged_root is None:
            from imagebench.fixtures.tree import PACKAGED_ROOT

            packaged_root = PACKAGED_ROOT
        self.packaged_root = packaged_root

    # ------------------------------------------------------------------ what the form offers

    @staticmethod
    def offered(layers: Iterable[Any]) -> tuple[list[str], list[str]]:
        """The names of the layers that may be data (Image) and truth (Labels, Points, Shapes)."""
        listed = list(layers)
        return (
            [layer.name for layer in listed if _kind(layer) in DATA_KINDS],
            [layer.name for layer in listed if _kind(layer) in TRUTH_KINDS],
        )

    @staticmethod
    def keys(form: SaveForm) -> tuple[dict[str, str], str | None]:
        """Each data layer's key and the truth's key (also the leaving's name) the case will use."""
        data: dict[str, str] = {}
        for name in form.data:
            data[name] = key_for(name, data.values())
        truth = key_for(form.truth, data.values()) if form.truth else None
        return data, truth

    def default_prompt(self, form: SaveForm, layers: Mapping[str, Any]) -> str:
        """The prompt written for the person to edit: the data layers and the leaving (or '')."""
        from imagebench.cases.authoring import default_prompt

        data, truth = self.keys(form)
        if not data or truth is None or form.truth not in layers or any(n not in layers for n in data):
            return ""
        grids = {data[n]: tuple(np.shape(layers[n].data)) for n in data}
        kind = "points" if _kind(layers[form.truth]) == "Points" else "labels"
        return default_prompt(grids, truth, kind, next(iter(grids.keys())))  # type: ignore[arg-type]

    # ------------------------------------------------------------------ the rule

    def problem(self, form: SaveForm, layers: Mapping[str, Any]) -> str | None:
        """Why Save is not ready, or None: every field the case needs, and layers of the right kinds."""
        if not form.data:
            return "pick at least one data layer (an Image)"
        for name in form.data:
            if name not in layers or _kind(layers[name]) not in DATA_KINDS:
                return f"data layer {name!r} is not an Image layer on the viewer"
        if not form.truth:
            return "pick the truth layer (Labels, Points or Shapes)"
        if form.truth not in layers or _kind(layers[form.truth]) not in TRUTH_KINDS:
            return f"truth layer {form.truth!r} is not a Labels, Points or Shapes layer on the viewer"
        if form.truth in form.data:
            return "a layer cannot be both data and truth"
        for what, value in (("skill", form.skill), ("case", form.case_id)):
            if not value.strip():
                return f"name the {what}"
            if not _NAME.match(value):
                return f"the {what} name {value!r} must be lowercase: letters, digits, '.', '_' or '-'"
        if not form.tree.strip():
            return "choose the fixture tree to save into"
        if self.is_packaged(Path(form.tree)):
            return "the tree shipped inside the package is not yours to write; choose your own tree"
        if not form.prompt.strip():
            return "write the prompt"
        if not form.citation.strip():
            return "write the citation: whose data this is"
        if not form.provenance.strip():
            return "write the provenance: how the data and its truth came to be"
        return None

    def is_packaged(self, path: str | Path) -> bool:
        """Whether ``path`` is the tree shipped inside the package (never written to)."""
        try:
            return Path(path).resolve().is_relative_to(self.packaged_root.resolve())
        except OSError:
            return False

    # ------------------------------------------------------------------ the action

    def arrays(self, form: SaveForm, layers: Mapping[str, Any]) -> tuple[dict[str, Any], str, Any, str]:
        """The data arrays by key, the truth's key, its array and kind (``labels`` or ``points``)."""
        from imagebench.fixtures.annotations import shapes_label_image

        keys, truth_key = self.keys(form)
        assert truth_key is not None and form.truth is not None
        data = {keys[name]: self._plain(layers[name]) for name in form.data}
        truth_layer = layers[form.truth]
        grid_layer = layers[form.data[0]]
        self._same_grid(truth_layer, grid_layer)
        kind = _kind(truth_layer)
        if kind == "Shapes":
            grid = tuple(np.shape(data[keys[form.data[0]]]))
            truth = shapes_label_image(form.truth, list(truth_layer.data), list(truth_layer.shape_type), grid)
            return data, truth_key, truth, "labels"
        return data, truth_key, self._plain(truth_layer), "points" if kind == "Points" else "labels"

    @staticmethod
    def _plain(layer: Any) -> np.ndarray:
        from napari_imagebench._base import PanelError

        if getattr(layer, "multiscale", False):
            raise PanelError(f"layer {layer.name!r} is multiscale; save its full-resolution level as a layer first")
        return np.array(layer.data)

    @staticmethod
    def _same_grid(truth: Any, data: Any) -> None:
        from napari_imagebench._base import PanelError

        for what in ("scale", "translate"):
            a, b = np.asarray(getattr(truth, what, ()), float), np.asarray(getattr(data, what, ()), float)
            if a.shape != b.shape or not np.allclose(a, b):
                raise PanelError(
                    f"truth layer {truth.name!r} has {what} {a.tolist()}, its data layer {data.name!r} {b.tolist()}: "
                    "a truth must sit on its data layer's pixel grid"
                )

    def save(self, form: SaveForm, layers: Mapping[str, Any]) -> Any:
        """Write the case (an :class:`imagebench.cases.authoring.SavedCase`); a refusal is a
        ``PanelError`` naming what to change, with nothing written."""
        from imagebench.cases.authoring import SaveError, save_case
        from imagebench.fixtures.annotations import AnnotationError
        from imagebench.fixtures.fixture import FixtureError
        from napari_imagebench._base import PanelError

        why = self.problem(form, layers)
        if why is not None:
            raise PanelError(why)
        try:
            data, truth_key, truth, kind = self.arrays(form, layers)
            keys, _ = self.keys(form)
            scales = {
                keys[n]: [float(v) for v in layers[n].scale]
                for n in form.data
                if not np.allclose(np.asarray(layers[n].scale, float), 1.0)
            }
            return save_case(
                Path(form.tree),
                form.skill,
                form.case_id,
                data=data,
                truth={truth_key: truth},
                kinds={truth_key: kind},
                prompt=form.prompt,
                provenance=form.provenance,
                citation=form.citation,
                scale=scales or None,
            )
        except (SaveError, AnnotationError, FixtureError) as exc:
            text = str(exc)
            keys, truth_key = self.keys(form)
            for name, key in [*keys.items(), (form.truth, truth_key)]:
                text = text.replace(f"layer {key!r}", f"layer {name!r}")  # the layer as the viewer names it
            raise PanelError(f"{text}; nothing was written") from None
