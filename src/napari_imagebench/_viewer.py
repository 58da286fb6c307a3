"""The panel's side of the napari viewer: the layers it put there for the loaded case (the case's
data, each subject's results, an agent's layers) and the console's namespace. No Qt of its own.

Every piece of the panel that adds a layer goes through :class:`PanelLayers`, so loading another
case removes exactly what the panel added (through :func:`napari_imagebench._canvas.remove_layers`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from napari_imagebench._artifacts import ARTIFACT_KEY, artifact_layers
from napari_imagebench._canvas import remove_layers
from napari_imagebench._layers import add_layer_data, layer_value, point_size, result_kind, result_layer_data

if TYPE_CHECKING:
    import napari

    from napari_imagebench._model import BenchModel, Loaded, RunJob


def console_namespace(viewer: napari.Viewer) -> dict[str, Any] | None:
    """The napari console's user namespace when the console has been opened, else None.

    Never opens the console (that would start a kernel): only an existing one is read. napari
    has no public route to the console's namespace; the private one is read under a guard, so a
    napari that hides it reads as "no console" rather than an error.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # napari's notice about private attributes
        try:
            console = viewer.window._qt_viewer._console
        except AttributeError:
            return None
    if console is None:
        return None
    for path in (("shell",), ("kernel_manager", "kernel", "shell"), ("kernel", "shell")):
        obj: Any = console
        for attr in path:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        ns = getattr(obj, "user_ns", None) if obj is not None else None
        if isinstance(ns, dict):
            return ns
    return None


def _marker_size(session: Any) -> float | None:
    shapes = {n: tuple(sl.data.shape) for n, sl in session.layers.items() if hasattr(sl.data, "shape")}
    return point_size(next(iter(shapes.values()))) if shapes else None


class PanelLayers:
    """The layers this panel added to ``viewer`` and what the console's ``imagebench_results`` holds."""

    def __init__(self, viewer: napari.Viewer, model: BenchModel) -> None:
        self.viewer, self.model = viewer, model
        self.case: list[Any] = []  # data layers this panel added for the loaded case
        self.results: dict[str, Any] = {}  # "<subject>:<leaving>" -> layer
        self.console_results: dict[str, dict[str, Any]] = {}  # the console's imagebench_results

    def show_case(self, loaded: Loaded, tuples: list[Any]) -> None:
        """Replace what the panel showed with the loaded case's data layers; the console gets its session."""
        # one removal for all (napari collects garbage after each): the case, the results, the panes
        remove_layers(self.viewer, self.case + list(self.results.values()) + artifact_layers(self.viewer))
        self.case, self.results, self.console_results = [], {}, {}
        for data in tuples:
            layer = add_layer_data(self.viewer, data)
            self.case.append(layer)
            self.model.layer_shown(layer.name)
        self.viewer.reset_view()
        self.viewer.update_console(
            {**loaded.session.namespace, "session": loaded.session, "imagebench_results": self.console_results}
        )

    def show_results(self, job: RunJob, left: Mapping[str, Any]) -> None:
        """What a subject's Run left, as layers named ``<subject>:<leaving>`` (and in the console)."""
        case = job.unit.case
        declared = {c.name: c for c in case.collect}
        layers = {layer.name: layer for layer in case.layers}
        shapes = {n: tuple(sl.data.shape) for n, sl in job.session.layers.items() if hasattr(sl.data, "shape")}
        size = _marker_size(job.session)
        for name, value in left.items():
            collect = declared.get(name)
            kind = collect.layer if collect is not None and collect.layer is not None else result_kind(value, shapes)
            if kind is None:
                continue
            like = layers.get(collect.like) if collect is not None and collect.like else None
            ordered = bool(collect is not None and collect.ordered)
            layer_name = f"{job.subject_name}:{name}"
            old = self.results.pop(layer_name, None)
            if old is not None:
                remove_layers(self.viewer, [old])
            try:
                data = result_layer_data(layer_name, value, kind, like=like, ordered=ordered, size=size)
                layer = add_layer_data(self.viewer, data)
            except Exception as exc:  # what a subject left may not be showable as the case says
                self.model.notify("warning", f"{layer_name} cannot be shown as {kind}: {type(exc).__name__}: {exc}")
                continue
            self.results[layer_name] = layer
            self.model.layer_shown(layer.name)
        self.console_results[job.subject_name] = dict(left)
        self.viewer.update_console({"imagebench_results": self.console_results})

    def show_agent_layer(self, name: str, kind: str, data: Any, like: str | None) -> None:
        """A layer an agent added or updated through its tools, named ``mcp:<client>:<name>``."""
        serve, loaded = self.model.agent, self.model.loaded
        if serve is None or loaded is None:
            return
        layer_name = f"{serve.subject_name}:{name}"
        old = self.results.get(layer_name)
        if old is not None and old in self.viewer.layers:
            old.data = data
            return
        declared = {layer.name: layer for layer in loaded.case.layers}
        try:
            layer = add_layer_data(
                self.viewer,
                result_layer_data(
                    layer_name, data, kind, like=declared.get(like) if like else None, size=_marker_size(loaded.session)
                ),
            )
        except Exception as exc:
            self.model.notify("warning", f"{layer_name} cannot be shown as {kind}: {type(exc).__name__}: {exc}")
            return
        self.results[layer_name] = layer
        self.model.layer_shown(layer.name)

    def forget(self, layer: Any) -> None:
        """``layer`` left the viewer."""
        if layer in self.case:
            self.case.remove(layer)
        for key, value in list(self.results.items()):
            if value is layer:
                del self.results[key]

    def leavings(self, picked: Mapping[str, str]) -> dict[str, Any]:
        """``{layer name: data}`` of the viewer's layers, artifact panes aside; a layer ``picked``
        for a leaving (``{leaving: layer name}``) stands for it."""
        found = {layer.name: layer_value(layer) for layer in self.viewer.layers if ARTIFACT_KEY not in layer.metadata}
        for name, layer_name in picked.items():
            found[name] = found[layer_name]
        return found
