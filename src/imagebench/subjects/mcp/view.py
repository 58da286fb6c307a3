"""The viewer tools' view: which step of each non-displayed axis (time, z) is shown and how each
layer is displayed, over the session's own layers and nothing else.

A :class:`ViewBackend` holds that state. :class:`SessionView` is a session's own (headless: ``mcp
serve``, ``run --subject-mcp``); the bench panel binds the same tools to its live napari viewer
(``napari_imagebench._agent_view.LiveView``). Either way every name is resolved among the
session's layers (the case's inputs and the agent's own), and every picture is drawn by
:mod:`imagebench.subjects.mcp.render` from those layers' arrays: no viewer tool can name, show or
move a truth layer, a result of another subject or a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import numpy as np

from imagebench.subjects.mcp.errors import ToolError
from imagebench.subjects.mcp.render import (
    FRAME_MAX_SIDE,
    Display,
    Drawn,
    at_position,
    leading_axes,
    png,
    render,
    track_marks,
)
from imagebench.subjects.mcp.results import COLORMAPS


class AgentLayer(Protocol):
    """What the view reads of a layer the agent sees (:class:`imagebench.subjects.mcp.tools.AgentLayer`)."""

    name: str
    kind: str
    data: Any
    role: str


class AgentSession(Protocol):
    """What the view reads of the agent's session (:class:`imagebench.subjects.mcp.tools.AgentSession`):
    named here, so that the view never imports the session that calls it."""

    display: ViewBackend
    layers: dict[str, Any]

    def layer_named(self, name: Any) -> Any: ...

    def array(self, layer: Any) -> np.ndarray: ...

    def layer_info(self, layer: Any) -> dict[str, Any]: ...


#: frames one snapshot_frames returns at most
MAX_FRAMES = 16


class ViewBackend(Protocol):
    """Where the view's state lives: the session's own, or a live viewer's."""

    bound: Literal["session", "viewer"]

    def steps(self, sizes: list[int]) -> dict[int, int | None]:
        """The step shown of each of the view's leading axes (``sizes``: their lengths); None: projected."""
        ...

    def set_step(self, axis: int, step: int | None, sizes: list[int]) -> None: ...

    def display(self, layer: AgentLayer) -> Display: ...

    def set_display(self, layer: AgentLayer, display: Display) -> None: ...


@dataclass
class SessionView:
    """A session's own view (headless): every leading axis max-projected until a step is set."""

    bound: Literal["session", "viewer"] = "session"
    _steps: dict[int, int] = field(default_factory=dict)
    _displays: dict[str, Display] = field(default_factory=dict)

    def steps(self, sizes: list[int]) -> dict[int, int | None]:
        return {axis: self._steps.get(axis) for axis in range(len(sizes))}

    def set_step(self, axis: int, step: int | None, sizes: list[int]) -> None:
        if step is None:
            self._steps.pop(axis, None)
        else:
            self._steps[axis] = step

    def display(self, layer: AgentLayer) -> Display:
        return self._displays.get(layer.name, Display())

    def set_display(self, layer: AgentLayer, display: Display) -> None:
        self._displays[layer.name] = display


# --------------------------------------------------------------------------- the view's axes


def grid(agent: AgentSession) -> tuple[list[int], list[str] | None]:
    """The view's grid: the shape of the case's first image or labels input (the layer the others
    are drawn on), and its axes' names when the case gives them."""
    for layer in agent.layers.values():
        if layer.role == "input" and layer.kind in ("image", "labels"):
            info = agent.layer_info(layer)
            axes = info.get("axes")
            return [int(n) for n in info.get("shape") or []], list(axes) if axes else None
    return [], None


def _leading(agent: AgentSession) -> tuple[list[int], list[str] | None]:
    shape, axes = grid(agent)
    lead = leading_axes(shape)
    return shape[:lead], (axes[:lead] if axes and len(axes) == len(shape) else None)


def view_result(agent: AgentSession) -> dict[str, Any]:
    """The view: its leading axes (size, name, the step shown) and each layer's display."""
    sizes, labels = _leading(agent)
    steps = agent.display.steps(sizes)
    dims = [
        {"axis": i, "label": labels[i] if labels else None, "size": n, "step": steps.get(i)}
        for i, n in enumerate(sizes)
    ]
    layers = []
    for layer in agent.layers.values():
        d = agent.display.display(layer)
        layers.append(
            {
                "name": layer.name,
                "visible": d.visible,
                "opacity": d.opacity_of(layer.kind),
                "colormap": (d.colormap or "gray") if layer.kind == "image" else None,
                "contrast_limits": list(d.contrast_limits) if d.contrast_limits is not None else None,
            }
        )
    shape, _ = grid(agent)
    return {"displayed": len(shape) - len(sizes), "dims": dims, "layers": layers, "bound": agent.display.bound}


def _axis(agent: AgentSession, axis: Any) -> tuple[int, int]:
    sizes, labels = _leading(agent)
    if not sizes:
        raise ToolError("the view has no axis to step: every layer is 2D (y, x)")
    if isinstance(axis, str) and labels and axis in labels:
        axis = labels.index(axis)
    if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < len(sizes):
        names = f" or its name ({', '.join(labels)})" if labels else ""
        raise ToolError(f"axis must be a leading axis of the view, 0 to {len(sizes) - 1}{names}; got {axis!r}")
    return axis, sizes[axis]


def set_step(agent: AgentSession, axis: Any, step: Any) -> dict[str, Any]:
    """Show ``step`` of ``axis`` (None: max-project it, the session's view only)."""
    index, size = _axis(agent, axis)
    if step is None:
        if agent.display.bound == "viewer":
            raise ToolError("the viewer shows one step of every axis: give step=0 to " + str(size - 1))
    elif isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < size:
        raise ToolError(
            f"axis {index} has {size} steps: step must be a whole number from 0 to {size - 1}, got {step!r}"
        )
    agent.display.set_step(index, step, _leading(agent)[0])
    return view_result(agent)


def step_by(agent: AgentSession, axis: Any, by: Any) -> dict[str, Any]:
    """Move ``axis`` by ``by`` steps (from 0 when it is projected), held at its ends."""
    index, size = _axis(agent, axis)
    if isinstance(by, bool) or not isinstance(by, int):
        raise ToolError(f"by must be a whole number of steps, got {by!r}")
    sizes = _leading(agent)[0]
    now = agent.display.steps(sizes).get(index)
    agent.display.set_step(index, min(size - 1, max(0, (now if now is not None else 0) + by)), sizes)
    return view_result(agent)


def set_display(
    agent: AgentSession,
    name: Any,
    *,
    visible: Any = None,
    opacity: Any = None,
    colormap: Any = None,
    contrast_limits: Any = None,
) -> dict[str, Any]:
    """Change how one of the session's layers is drawn; what is not given stays."""
    layer = agent.layer_named(name)
    d = agent.display.display(layer)
    if visible is not None:
        if not isinstance(visible, bool):
            raise ToolError(f"visible must be true or false, got {visible!r}")
        d = replace(d, visible=visible)
    if opacity is not None:
        if isinstance(opacity, bool) or not isinstance(opacity, (int, float)) or not 0 <= opacity <= 1:
            raise ToolError(f"opacity must be a number from 0 to 1, got {opacity!r}")
        d = replace(d, opacity=float(opacity))
    if colormap is not None or contrast_limits is not None:
        if layer.kind != "image":
            raise ToolError(f"layer {layer.name!r} is {layer.kind}: colormap and contrast_limits are an image layer's")
    if colormap is not None:
        if colormap not in COLORMAPS:
            raise ToolError(f"colormap must be one of {list(COLORMAPS)}, got {colormap!r}")
        d = replace(d, colormap=colormap)
    if contrast_limits is not None:
        ok = (
            isinstance(contrast_limits, (list, tuple))
            and len(contrast_limits) == 2
            and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in contrast_limits
            )
        )
        if not ok or not contrast_limits[0] < contrast_limits[1]:
            raise ToolError(
                f"contrast_limits must be [low, high], finite numbers with low < high; got {contrast_limits!r}"
            )
        d = replace(d, contrast_limits=(float(contrast_limits[0]), float(contrast_limits[1])))
    agent.display.set_display(layer, d)
    return next(x for x in view_result(agent)["layers"] if x["name"] == layer.name)


# --------------------------------------------------------------------------- pictures


def _shown(agent: AgentSession, layer: str | None) -> list[AgentLayer]:
    if layer is not None:
        return [agent.layer_named(layer)]
    return [x for x in agent.layers.values() if not isinstance(x.data, str)]


def _drawn(agent: AgentSession, shown: list[AgentLayer], position: dict[int, int]) -> list[Drawn]:
    lead = len(_leading(agent)[0])
    labels = next((agent.array(x) for x in agent.layers.values() if x.kind == "labels" and x.role == "answer"), None)
    out = []
    for x in shown:
        a = agent.array(x)
        if x.kind == "tracks":
            frame = position.get(0)
            a = track_marks(a, labels, frame) if frame is not None else np.zeros((0, 2))
        elif x.kind in ("image", "labels"):
            a = at_position(a, position, max(lead, leading_axes(a.shape)))
        out.append(Drawn(x.name, x.kind, np.asarray(a)))
    return out


def _position(agent: AgentSession) -> dict[int, int]:
    return {k: v for k, v in agent.display.steps(_leading(agent)[0]).items() if v is not None}


def picture(agent: AgentSession, layer: str | None = None, frame: Any = None) -> tuple[bytes, dict[str, Any]]:
    """A PNG of one layer or of the view at the view's position (``frame``: axis 0 at that step)."""
    shown = _shown(agent, layer)
    position = _position(agent)
    if frame is not None:
        movies = [x for x in shown if x.kind in ("image", "labels") and agent.array(x).ndim >= 3]
        if not movies:
            raise ToolError("frame= picks a frame of a time-lapse, and no layer shown is one")
        frames = int(agent.array(movies[0]).shape[0])
        if isinstance(frame, bool) or not isinstance(frame, int) or not 0 <= frame < frames:
            raise ToolError(f"frame must be a whole number from 0 to {frames - 1}, got {frame!r}")
        position[0] = frame
    rgb, step, names = render(_drawn(agent, shown, position), {x.name: agent.display.display(x) for x in shown})
    info = {
        "width": int(rgb.shape[1]),
        "height": int(rgb.shape[0]),
        "layers": names,
        "position": {str(k): v for k, v in sorted(position.items())},
        "downsampled": step,
    }
    return png(rgb), info


def frames(
    agent: AgentSession,
    axis: Any = 0,
    start: Any = 0,
    stop: Any = None,
    every: Any = 1,
    layer: str | None = None,
) -> tuple[list[bytes], dict[str, Any]]:
    """PNGs of ``axis`` at steps ``range(start, stop, every)`` (the other axes at the view's
    position), at most :data:`MAX_FRAMES`, each at most :data:`FRAME_MAX_SIDE` a side."""
    index, size = _axis(agent, axis)
    stop = size if stop is None else stop
    for what, v in (("start", start), ("stop", stop), ("every", every)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ToolError(f"{what} must be a whole number, got {v!r}")
    if not (0 <= start < size and start < stop <= size and every >= 1):
        raise ToolError(
            f"axis {index} has {size} steps: give 0 <= start < stop <= {size} and every >= 1; "
            f"got start={start}, stop={stop}, every={every}"
        )
    steps = list(range(start, stop, every))
    truncated = len(steps) > MAX_FRAMES
    steps = steps[:MAX_FRAMES]
    shown = _shown(agent, layer)
    displays = {x.name: agent.display.display(x) for x in shown}
    pngs, listed, names, step = [], [], [], 1
    for k in steps:
        position = {**_position(agent), index: k}
        rgb, step, names = render(_drawn(agent, shown, position), displays, max_side=FRAME_MAX_SIDE)
        pngs.append(png(rgb))
        listed.append({"step": k, "width": int(rgb.shape[1]), "height": int(rgb.shape[0])})
    info = {"axis": index, "frames": listed, "layers": names, "downsampled": step, "truncated": truncated}
    return pngs, info
