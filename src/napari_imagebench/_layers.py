"""Layer presentation: how a session's layers (and a subject's results) become napari layers.

A case says, per layer, which ``viewer.add_*`` call presents it (``kind``) and whether the
pixels arrive in memory (``array``: the session's private numpy copy) or lazily from the data
plane (``tensor``: the session holds an id; the pyramid comes from ``client.levels(id)`` as dask
arrays and is shown multiscale). Only what the session holds is presented: a session is opened
on ``fixture.data`` alone, so nothing here can reach truth.

The functions return napari *layer data tuples* ``(data, kwargs, kind)`` so that the reader,
the sample-data contributions and the bench panel share one presentation; ``add_layer_data``
adds such a tuple to a viewer.

As the case declares it: each points layer of a case gets a colour and symbol of its own
(:data:`POINT_STYLES`, in the case's order, then its points leavings), sized to the image it lies
on; a tensor is shown as a pyramid only where its full resolution exceeds a GL texture
(:data:`TEXTURE_LIMIT` per side): a stack that fits is shown at full resolution, in 2D and in 3D
(napari draws a pyramid's coarsest level in 3D).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from imagebench.case.model import Layer

if TYPE_CHECKING:
    import napari

    from imagebench.case.session import Session

LayerData = tuple[Any, dict[str, Any], str]


#: The side, in pixels, a GL texture can be counted on to hold (2D, and per axis in 3D): a tensor
#: whose full resolution fits is shown as one level, never as a pyramid.
TEXTURE_LIMIT = 2048

#: Colour and symbol of each points layer of a case, in order (its data layers, then its leavings):
#: distinct from each other and from the green and magenta of two overlaid channels.
POINT_STYLES: tuple[tuple[str, str], ...] = (
    ("yellow", "disc"),
    ("cyan", "square"),
    ("orange", "triangle_up"),
    ("white", "diamond"),
    ("red", "star"),
    ("dodgerblue", "hbar"),
)


class PresentationError(ValueError):
    """A layer cannot be presented as its case says (names the layer and what was wrong)."""


def _shapes_data(value: Any, name: str) -> list[np.ndarray]:
    """Shapes data as a list of ``(vertices, ndim)`` arrays (napari's own shapes format)."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        if value.ndim == 3:
            return [np.asarray(v) for v in value]
        if value.ndim == 2:
            return [value]
        raise PresentationError(f"layer {name!r}: shapes data has shape {value.shape}, expected (n, vertices, ndim)")
    try:
        return [np.asarray(v, dtype=float) for v in value]
    except (TypeError, ValueError) as exc:
        raise PresentationError(f"layer {name!r}: shapes data is not a list of vertex arrays ({exc})") from None


def shown_levels(levels: Sequence[Any], dim_labels: Sequence[str] | None, limit: int | None = None) -> list[Any]:
    """The levels of a pyramid (finest first) worth showing: up to the first whose spatial axes all
    fit ``limit`` (:data:`TEXTURE_LIMIT`), so a stack that fits a texture is one level (full
    resolution, in 2D and 3D) and a larger one a pyramid whose coarsest level still fits."""
    from imagebench.plane.protocol import spatial_axes

    limit = TEXTURE_LIMIT if limit is None else limit

    out: list[Any] = []
    for level in levels:
        out.append(level)
        shape = tuple(int(n) for n in level.shape)
        if all(shape[a] <= limit for a in spatial_axes(len(shape), dim_labels)):
            break
    return out


def layer_data(
    layer: Layer, value: Any, *, client: Any = None, point_size: float | None = None, style: int = 0
) -> LayerData:
    """The napari layer data tuple presenting ``value`` as ``layer`` says.

    ``value`` is the session's data for the layer: an array for ``array`` presentation, the
    data-plane id for ``tensor`` (which then needs ``client``). ``point_size`` sizes a points
    layer's markers (:func:`point_size` of the image they lie on); ``style`` is its place among the
    case's points layers (:data:`POINT_STYLES`).
    """
    kwargs: dict[str, Any] = {"name": layer.name, "metadata": {"imagebench": {"key": layer.key}}}
    if layer.presentation == "tensor":
        if client is None:
            raise PresentationError(
                f"layer {layer.name!r} presents as tensor, and no data-plane client is connected to read it"
            )
        try:
            levels = list(client.levels(str(value)))
        except Exception as exc:
            raise PresentationError(
                f"layer {layer.name!r}: the data plane could not serve array {value!r} ({type(exc).__name__}: {exc})"
            ) from exc
        if not levels:
            raise PresentationError(f"layer {layer.name!r}: the data plane returned no levels for {value!r}")
        if layer.kind not in ("image", "labels"):
            raise PresentationError(
                f"layer {layer.name!r}: a {layer.kind} layer cannot be presented as a tensor pyramid"
            )
        levels = shown_levels(levels, layer.dim_labels)
        data: Any = levels if len(levels) > 1 else levels[0]
        kwargs["multiscale"] = len(levels) > 1
        kwargs["metadata"]["imagebench"]["array_id"] = str(value)
        ndim = levels[0].ndim
    else:
        if layer.kind == "shapes":
            data = _shapes_data(value, layer.name)
            ndim = data[0].shape[-1] if data else 2
        else:
            data = np.asarray(value)
            if data.dtype.kind not in "biuf":
                raise PresentationError(f"layer {layer.name!r}: dtype {data.dtype} is not numeric")
            ndim = data.shape[1] if layer.kind == "points" and data.ndim == 2 else data.ndim
            if layer.kind == "labels" and data.dtype.kind not in "biu":
                raise PresentationError(f"layer {layer.name!r}: labels need an integer array, got {data.dtype}")
            if layer.kind == "labels" and data.dtype.kind == "b":
                data = data.astype(np.uint8)
    if layer.dim_labels and len(layer.dim_labels) == ndim:
        kwargs["axis_labels"] = tuple(layer.dim_labels)
    kwargs.update(presentation_kwargs(layer, ndim))
    if layer.kind == "points":
        kwargs.update(points_kwargs(np.asarray(data), ordered=layer.ordered, size=point_size, style=style))
    return data, kwargs, layer.kind


def presentation_kwargs(layer: Layer, ndim: int) -> dict[str, Any]:
    """What the case declares about showing ``layer``: physical scale and units (per axis), a
    colormap and blending; an image without a colormap is grey."""
    out: dict[str, Any] = {}
    if layer.scale is not None:
        if len(layer.scale) != ndim:
            raise PresentationError(
                f"layer {layer.name!r}: the case's scale {layer.scale} has {len(layer.scale)} axes, the data {ndim}"
            )
        out["scale"] = tuple(float(v) for v in layer.scale)
        if layer.units:
            out["units"] = (layer.units,) * ndim
    if layer.kind == "image":
        out["colormap"] = layer.colormap or "gray"
    if layer.blending:
        out["blending"] = layer.blending
    return out


def points_kwargs(
    data: np.ndarray, *, ordered: bool = False, size: float | None = None, style: int = 0, symbol: str | None = None
) -> dict[str, Any]:
    """Points sized to the data they mark (``size``: about 1/50 of the image they lie on), in the
    colour and symbol of their place ``style`` among the case's points layers (:data:`POINT_STYLES`;
    ``symbol`` overrides the symbol) and, when their order carries meaning, each one's index drawn
    beside it in that colour."""
    colour, shape = POINT_STYLES[style % len(POINT_STYLES)]
    out: dict[str, Any] = {"size": float(size) if size else 5.0, "face_color": colour, "symbol": symbol or shape}
    if ordered:
        out["features"] = {"index": np.arange(len(data))}
        out["text"] = {"string": "{index}", "size": 10, "color": colour, "anchor": "upper_left"}
    return out


def point_styles(case: Any) -> dict[str, int]:
    """``{name: style}`` for the points layers of ``case`` and then its points leavings, in order
    (the index into :data:`POINT_STYLES`)."""
    names = [layer.name for layer in case.layers if layer.kind == "points"]
    names += [c.name for c in case.collect if c.layer == "points" and c.name not in names]
    return {name: i for i, name in enumerate(names)}


def case_colormaps(case: Any) -> dict[str, str]:
    """``{layer name: colormap}`` of the case's image layers that declare one (its channels)."""
    return {layer.name: layer.colormap for layer in case.layers if layer.kind == "image" and layer.colormap}


def case_axes(case: Any, ndim: int) -> tuple[str, ...] | None:
    """The axis names the case declares for ``ndim`` dimensions (a data layer's ``dim_labels``), or None."""
    for layer in case.layers:
        if layer.dim_labels and len(layer.dim_labels) == ndim:
            return tuple(layer.dim_labels)
    return None


def case_units(case: Any) -> str | None:
    """The physical unit the case's layers are scaled in, or None when they have none."""
    return next((layer.units for layer in case.layers if layer.units and layer.scale is not None), None)


def point_size(shape: Sequence[int]) -> float:
    """A marker about 1/50 of the smaller in-plane side of the image it lies on (at least 2 px)."""
    sides = [int(v) for v in shape[-2:]] or [100]
    return max(2.0, round(min(sides) / 50.0, 1))


def fixture_layer_data(layers: Sequence[Layer], data: Mapping[str, Any]) -> list[LayerData]:
    """In-memory layer data for the ``array`` layers of ``layers``, read from a fixture's ``data``
    mapping (never its truth). A ``tensor`` layer is refused: it is presented through the data
    plane (:func:`present_fixture`), never substituted by an in-memory array."""
    tensors = [layer.name for layer in layers if layer.presentation == "tensor" and layer.key in data]
    if tensors:
        raise PresentationError(
            f"layer(s) {tensors} present as tensor: they come from the data plane (present_fixture), "
            "never as an in-memory array"
        )
    size = _marker_size([(layer, data[layer.key]) for layer in layers if layer.key in data])
    styles = _styles(layers)
    return [
        layer_data(layer, np.asarray(data[layer.key]), point_size=size, style=styles.get(layer.name, 0))
        for layer in layers
        if layer.key in data
    ]


def _styles(layers: Sequence[Layer]) -> dict[str, int]:
    return {name: i for i, name in enumerate(layer.name for layer in layers if layer.kind == "points")}


def present_fixture(case: Any, fixture: Any) -> list[LayerData]:
    """Layer data for every layer of ``case`` as the case presents it: ``array`` layers from
    ``fixture.data`` in memory, ``tensor`` layers as lazy pyramids uploaded to this process's
    data plane (:func:`imagebench.plane.shared_plane`). Where no plane can run, a
    :class:`PresentationError` says so; a tensor layer never falls back to an array."""
    tensor_layers = [layer for layer in case.layers if layer.presentation == "tensor"]
    if not tensor_layers:
        return fixture_layer_data(case.layers, fixture.data)
    from imagebench.plane import PlaneUnavailable, shared_plane

    try:
        plane = shared_plane()
    except PlaneUnavailable as exc:
        names = [layer.name for layer in tensor_layers]
        raise PresentationError(
            f"{case.label}: layer(s) {names} present as tensor through the data plane, which cannot run here "
            f"({exc.reason}); they are not shown as in-memory arrays instead"
        ) from None
    ids = plane.present(case, fixture)
    size = _marker_size([(layer, fixture.data[layer.key]) for layer in case.layers if layer.key in fixture.data])
    styles = _styles(case.layers)
    out: list[LayerData] = []
    for layer in case.layers:
        if layer.presentation == "tensor":
            out.append(layer_data(layer, ids[layer.name], client=plane.client))
        elif layer.key in fixture.data:
            value = np.asarray(fixture.data[layer.key])
            out.append(layer_data(layer, value, point_size=size, style=styles.get(layer.name, 0)))
    return out


def session_layer_data(session: Session) -> list[LayerData]:
    """One layer data tuple per layer of ``session`` (its data layers, in the case's order)."""
    size = session_marker_size(session)
    styles = _styles([sl.layer for sl in session.layers.values()])
    return [
        layer_data(sl.layer, sl.data, client=session.client, point_size=size, style=styles.get(sl.layer.name, 0))
        for sl in session.layers.values()
    ]


def session_marker_size(session: Any) -> float | None:
    """The marker size of the session's points layers (and of answers and results drawn with them)."""
    return _marker_size([(sl.layer, sl.data) for sl in session.layers.values()])


def _marker_size(pairs: Sequence[tuple[Layer, Any]]) -> float | None:
    """:func:`point_size` of the first in-memory image or labels layer among ``pairs``."""
    for layer, value in pairs:
        if layer.kind in ("image", "labels") and layer.presentation == "array" and hasattr(value, "shape"):
            return point_size(value.shape)
    return None


def result_kind(value: Any, reference_shapes: Mapping[str, tuple[int, ...]]) -> str | None:
    """Which kind of layer shows a subject's leaving, or None when it is not an image-like array.

    An integer or boolean array shaped like a data layer is a label image; any other array of
    two or more dimensions shaped like one is an image; an ``(n, d)`` float array whose ``d``
    matches the data's dimensionality is points. Scalars and mappings stay in the namespace.
    """
    if isinstance(value, (str, bytes, dict, bool, int, float)) or value is None:
        return None
    try:
        arr = np.asarray(value)
    except Exception:
        return None
    if arr.dtype.kind not in "biuf" or arr.ndim < 2 or arr.size == 0:
        return None
    shapes = set(reference_shapes.values())
    if tuple(arr.shape) in shapes:
        return "labels" if arr.dtype.kind in "biu" else "image"
    dims = {len(s) for s in shapes}
    if arr.ndim == 2 and arr.dtype.kind == "f" and arr.shape[1] in dims:
        return "points"
    return "image"


def result_layer_data(
    name: str,
    value: Any,
    kind: str,
    *,
    like: Layer | None = None,
    ordered: bool = False,
    size: float | None = None,
    style: int = 0,
) -> LayerData:
    """The layer data tuple showing leaving ``name`` as ``kind`` (the case's ``Collect.layer``, else
    :func:`result_kind`), on the grid (scale, units) of the data layer ``like``; ``ordered``
    points show their index; points in their leaving's colour (``style``), drawn as crosses so a
    subject's points never look like the person's own.

    The layer gets a copy: painting on it must not change what the subject left (and is scored).
    """
    arr = np.array(value, copy=True)
    if kind == "labels" and arr.dtype.kind == "b":
        arr = arr.astype(np.uint8)
    kwargs: dict[str, Any] = {"name": name, "metadata": {"imagebench": {"result": name}}}
    ndim = arr.shape[1] if kind == "points" and arr.ndim == 2 else arr.ndim
    if like is not None and like.scale is not None and len(like.scale) == ndim:
        kwargs.update({k: v for k, v in presentation_kwargs(like, ndim).items() if k in ("scale", "units")})
    if kind == "image":
        # an image answer (a corrected, denoised or deconvolved image) is shown as itself, grey and
        # opaque above the input it replaces: hide it to see the input (added on top, it would
        # blend the two into a picture that is neither)
        kwargs["colormap"] = "gray"
    if kind == "points":
        kwargs.update(points_kwargs(arr, ordered=ordered, size=size, style=style, symbol="cross"))
    return arr, kwargs, kind


def add_layer_data(viewer: napari.Viewer, data: LayerData) -> Any:
    """Add one layer data tuple to ``viewer`` and return the new layer."""
    array, kwargs, kind = data
    adder = getattr(viewer, f"add_{kind}", None)
    if adder is None:
        raise PresentationError(f"napari has no add_{kind} for layer {kwargs.get('name')!r}")
    return adder(array, **kwargs)


def layer_value(layer: Any) -> Any:
    """What a napari layer holds, as a leaving: its data (the full-resolution level when multiscale);
    a Tracks layer's rows with its graph of divisions (``{"data", "graph"}``, which
    :func:`napari_imagebench._tracks.tracks_lookup` makes a CTC answer)."""
    if type(layer).__name__ == "Tracks":
        return {"data": np.asarray(layer.data), "graph": dict(getattr(layer, "graph", {}) or {})}
    data = layer.data
    if getattr(layer, "multiscale", False):
        data = data[0]
    return data
