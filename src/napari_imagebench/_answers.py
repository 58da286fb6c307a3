"""How a person at the viewer gives each answer a case asks for: the headless half of the Answer tab.

Every leaving of the loaded case becomes an :class:`AnswerSlot`:

- a *layer* slot (the case's ``Collect.layer``): painted labels, clicked points, an image; the
  person picks the layer (or creates an empty one shaped, typed and scaled like the data layer
  the case names in ``Collect.like``);
- a *form* slot: a scalar, or a structured answer whose fields and their types come from the
  case's answer contract (an integer, a number, a vector, a voxel, a yes/no, text); the person
  fills the form and sets it;
- a *console* slot: an array a person computes (bound by that name in napari's console).

Nothing here reads the fixture's truth: a slot is made from the case (its layers, leavings and
contract) and the session's data shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from imagebench.case.model import Case, Collect, Layer

FieldKind = Literal["int", "float", "vector", "voxel", "bool", "text"]
SlotKind = Literal["layer", "form", "console"]

# The comparator a contract field is scored with says what the person types.
_FIELD_KINDS: dict[str, FieldKind] = {
    "integer_equal": "int",
    "abs_tolerance": "float",
    "circular_tolerance": "float",
    "vector_abs_tolerance": "vector",
    "voxel_member_of_set": "voxel",
    "boolean_equal": "bool",
}


class AnswerError(ValueError):
    """A value typed into the form cannot be the answer (names the field and what was expected)."""


@dataclass(frozen=True)
class FormField:
    """One entry of a form: its name, what is typed, and for a vector or voxel its length."""

    name: str
    kind: FieldKind
    length: int = 0


@dataclass(frozen=True)
class AnswerSlot:
    """One leaving of the case, as a person gives it."""

    name: str
    kind: SlotKind
    description: str
    layer: str | None = None  # the napari layer kind of a layer slot
    like: str | None = None  # the data layer whose grid (shape, scale) it shares
    ordered: bool = False
    fields: tuple[FormField, ...] = ()
    pairs: str | None = None  # ordered points given one for each point of this data layer

    @property
    def mode(self) -> str | None:
        """The napari mode a created layer for this slot starts in: painting labels, adding points
        or polygons (an image is computed, not drawn: None)."""
        return {"labels": "paint", "points": "add", "shapes": "add_polygon"}.get(self.layer or "")

    def how(self) -> str:
        """What the person does, in words."""
        if self.kind == "layer":
            verb = {"labels": "paint", "points": "click", "image": "compute"}.get(self.layer or "", "make")
            where = f" on the grid of `{self.like}`" if self.like else ""
            order = " in order (their index is shown)" if self.ordered else ""
            return f"{verb} {self.layer} into the layer `{self.name}`{where}{order}; Create makes an empty one"
        if self.kind == "form":
            return f"fill the form for `{self.name}` and press Set"
        return f"compute it and bind `{self.name}` in napari's console"


def _contract_fields(case: Case, collect: Collect) -> tuple[FormField, ...]:
    schema = getattr(case.answer, "answer_schema", None) or {}
    ndim = _first_ndim(case)
    fields = []
    for name, rule in schema.items():
        kind = _FIELD_KINDS.get(getattr(rule, "comparator", ""), "text")
        length = 0
        if kind == "vector":
            tolerance = (getattr(rule, "config", None) or {}).get("tolerance")
            length = len(tolerance) if isinstance(tolerance, (list, tuple)) else 2
        elif kind == "voxel":
            length = ndim or 3
        fields.append(FormField(name, kind, length))
    return tuple(fields)


def _first_ndim(case: Case) -> int:
    for layer in case.layers:
        if layer.dim_labels:
            return len(layer.dim_labels)
    return 0


def answer_slots(case: Case) -> list[AnswerSlot]:
    """The slots of every leaving ``case`` asks for, in the case's order (a recorded leaving, a
    trigger case's ``trace``, has none: the harness keeps it, nobody gives it)."""
    slots: list[AnswerSlot] = []
    for c in case.collect:
        if c.recorded:
            continue
        if c.layer is not None:
            slots.append(AnswerSlot(c.name, "layer", c.description, c.layer, c.like, c.ordered, pairs=c.pairs))
        elif c.what == "json" and case.answer is not None:
            slots.append(AnswerSlot(c.name, "form", c.description, fields=_contract_fields(case, c)))
        elif c.what == "scalar":
            slots.append(AnswerSlot(c.name, "form", c.description, fields=(FormField(c.name, "float"),)))
        else:
            slots.append(AnswerSlot(c.name, "console", c.description))
    return slots


def form_value(slot: AnswerSlot, values: Mapping[str, Any]) -> Any:
    """The leaving a filled form stands for: a number for a scalar slot, ``{field: value}`` for a
    structured answer. AnswerError names a field that is missing or not what its kind needs."""
    out: dict[str, Any] = {}
    for f in slot.fields:
        if f.name not in values or values[f.name] is None or values[f.name] == "":
            raise AnswerError(f"{slot.name}: field {f.name!r} is empty; expected {_expected(f)}")
        out[f.name] = _typed(slot.name, f, values[f.name])
    if len(slot.fields) == 1 and slot.fields[0].name == slot.name:
        return out[slot.name]  # a scalar leaving
    return out


def _expected(f: FormField) -> str:
    return {
        "int": "an integer",
        "float": "a number",
        "vector": f"{f.length} numbers",
        "voxel": f"{f.length} integer voxel indices",
        "bool": "yes or no",
        "text": "text",
    }[f.kind]


def _typed(slot: str, f: FormField, value: Any) -> Any:
    try:
        if f.kind == "int":
            if isinstance(value, bool) or float(value) != int(value):
                raise ValueError
            return int(value)
        if f.kind == "float":
            number = float(value)
            if not np.isfinite(number):
                raise ValueError
            return number
        if f.kind in ("vector", "voxel"):
            items = [float(v) for v in value]
            if len(items) != f.length or not all(np.isfinite(items)):
                raise ValueError
            if f.kind == "voxel":
                if any(v != int(v) for v in items):
                    raise ValueError
                return [int(v) for v in items]
            return items
        if f.kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError
            return bool(value)
        return str(value)
    except (TypeError, ValueError):
        raise AnswerError(f"{slot}: field {f.name!r} is {value!r}; expected {_expected(f)}") from None


def counted(slot: AnswerSlot, given: int, expected: int | None) -> str:
    """What a counter beside an ordered points answer says: ``12 of 25 clicked`` (``expected``: the
    points of the layer it pairs with), ``12 clicked`` when the case pairs it with none."""
    if expected is None:
        return f"{given} clicked"
    text = f"{given} of {expected} clicked"
    if given > expected:
        text += f": {given - expected} too many"
    return text


def answer_layer_data(
    slot: AnswerSlot,
    layers: Sequence[Layer],
    data: Mapping[str, Any],
    *,
    point_size: float | None = None,
    style: int = 0,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> tuple[Any, dict, str]:
    """An empty layer for ``slot``: named after it, of its kind, shaped and scaled like the data
    layer it is ``like`` (``data`` maps layer names to the session's arrays; ``shapes`` gives the
    shape of a tensor layer, which the session holds as an id); points sized like the case's
    (``point_size``) in their own colour and symbol (``style``, :data:`._layers.POINT_STYLES`)."""
    from napari_imagebench._layers import points_kwargs, presentation_kwargs

    if slot.kind != "layer" or slot.layer is None:
        raise AnswerError(f"{slot.name} is not given as a layer")
    if slot.layer == "tracks":
        raise AnswerError(
            f"{slot.name} is a Tracks layer a tracker makes (or the console adds): pick it; it cannot be drawn empty"
        )
    like = next((layer for layer in layers if layer.name == slot.like), None)
    shape = tuple(np.shape(data[like.name])) if like is not None and like.name in data else None
    if like is not None and like.presentation == "tensor":
        shape = tuple(int(n) for n in shapes[like.name]) if shapes and like.name in shapes else None
    if shape is None and slot.layer in ("labels", "image"):
        raise AnswerError(f"{slot.name}: the case names no layer whose shape it can take")
    ndim = len(shape) if shape is not None else 2
    kwargs: dict[str, Any] = {"name": slot.name, "metadata": {"imagebench": {"answer": slot.name}}}
    if like is not None:
        shown = presentation_kwargs(like, ndim)
        kwargs.update({k: v for k, v in shown.items() if k in ("scale", "units")})
        if like.dim_labels and len(like.dim_labels) == ndim:
            kwargs["axis_labels"] = tuple(like.dim_labels)
    if slot.layer == "labels":
        return np.zeros(shape, np.int32), kwargs, "labels"
    if slot.layer == "image":
        return np.zeros(shape, np.float32), kwargs, "image"
    if slot.layer == "points":
        points = np.zeros((0, ndim), np.float64)
        kwargs.update(points_kwargs(points, ordered=slot.ordered, size=point_size, style=style))
        if slot.ordered:
            kwargs["features"] = {"index": np.zeros(0, int)}
        # the next point clicked takes this colour and symbol (a Points layer's "current" ones)
        return points, kwargs, "points"
    return [], kwargs, "shapes"
