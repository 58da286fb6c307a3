"""The viewer tools of an agent served from the panel, bound to the live napari viewer: a
:class:`imagebench.subjects.mcp.view.ViewBackend` whose dims are the viewer's and whose displays
are the napari layers' own (visible, opacity, colormap, contrast limits). Imports no Qt.

Only the served session's layers are reachable: an input is the panel's layer of the loaded case
of that name (:attr:`PanelLayers.case`), an agent's layer is ``mcp:<client>:<name>``
(:attr:`PanelLayers.results`); a truth layer a person opened, another subject's results or a
layer of the person's are never looked up, and a snapshot is drawn from the session's arrays
(:mod:`imagebench.subjects.mcp.render`), never grabbed from the canvas. The server's thread asks;
``invoke`` runs each question on the GUI thread and waits for its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from imagebench.subjects.mcp.render import Display
    from imagebench.subjects.mcp.tools import AgentLayer
    from napari_imagebench._viewer import PanelLayers

T = TypeVar("T")


class LiveView:
    """The live viewer as the viewer tools' view (``bound: viewer``)."""

    bound: Literal["session", "viewer"] = "viewer"

    def __init__(self, layers: PanelLayers, subject: Callable[[], str], invoke: Callable[[Callable[[], Any]], Any]):
        self.layers, self._subject, self._invoke = layers, subject, invoke
        self._unshown: dict[str, Display] = {}  # a session layer the viewer does not show (a tensor input)

    def _napari_layer(self, layer: AgentLayer) -> Any:
        if layer.role == "input":
            return next((x for x in self.layers.case if x.name == layer.name), None)
        return self.layers.results.get(f"{self._subject()}:{layer.name}")

    def _offset(self, sizes: list[int]) -> int:
        return int(self.layers.viewer.dims.ndim) - (len(sizes) + 2)

    def steps(self, sizes: list[int]) -> dict[int, int | None]:
        def read() -> dict[int, int | None]:
            offset = self._offset(sizes)
            current = tuple(self.layers.viewer.dims.current_step)
            out: dict[int, int | None] = {}
            for axis, size in enumerate(sizes):
                at = axis + offset
                out[axis] = min(max(0, int(current[at])), size - 1) if 0 <= at < len(current) else None
            return out

        return self._invoke(read)

    def set_step(self, axis: int, step: int | None, sizes: list[int]) -> None:
        if step is None:
            return  # the viewer always shows one step (the tool refuses None before it gets here)

        def write() -> None:
            at = axis + self._offset(sizes)
            if 0 <= at < self.layers.viewer.dims.ndim:
                self.layers.viewer.dims.set_current_step(at, step)

        self._invoke(write)

    def display(self, layer: AgentLayer) -> Display:
        from imagebench.subjects.mcp.render import Display
        from imagebench.subjects.mcp.results import COLORMAPS

        def read() -> Display:
            shown = self._napari_layer(layer)
            if shown is None:
                return self._unshown.get(layer.name, Display())
            colormap, limits = None, None
            if layer.kind == "image":
                name = getattr(getattr(shown, "colormap", None), "name", None)
                colormap = name if name in COLORMAPS else None
                lo, hi = (float(v) for v in shown.contrast_limits)
                limits = (lo, hi) if lo < hi else None
            return Display(bool(shown.visible), float(shown.opacity), colormap, limits)

        return self._invoke(read)

    def set_display(self, layer: AgentLayer, display: Display) -> None:
        def write() -> None:
            shown = self._napari_layer(layer)
            if shown is None:
                self._unshown[layer.name] = display
                return
            shown.visible = display.visible
            if display.opacity is not None:
                shown.opacity = display.opacity
            if layer.kind == "image":
                if display.colormap is not None:
                    shown.colormap = display.colormap
                if display.contrast_limits is not None:
                    shown.contrast_limits = list(display.contrast_limits)

        self._invoke(write)
