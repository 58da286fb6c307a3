"""The panel's side of the napari viewer: the layers it put there for the loaded case (the case's
data, each subject's results, an agent's layers), the person's layers, and the console's
namespace. No Qt of its own.

Every layer is tagged with whose it is (:mod:`napari_imagebench._owners`): the panel's own as it
adds them, a person's as it arrives. Loading another case replaces the panel's layers only; the
person's layers of earlier loads are kept aside or removed as the person answers
(:class:`napari_imagebench._workbench_model.Leftovers`), and a layer kept aside comes back when its
case is loaded again. A layer that was never the panel's nor made on a case stays where it is;
one that holds the name of a layer of the new case is renamed first (``name [1]``, with a
notice), so the case's layers keep their names.

Every removal from the viewer happens with its canvas's GL context current
(:func:`napari_imagebench._canvas.gl_context_for_removals`): napari deletes a layer's GL objects
outside a paint, and in Qt's compositing context they crashed the next draw on Mesa.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from napari_imagebench._artifacts import ARTIFACT_KEY, artifact_layers
from napari_imagebench._canvas import gl_context_for_removals, remove_layers
from napari_imagebench._layers import (
    add_layer_data,
    case_axes,
    case_units,
    layer_value,
    point_styles,
    result_kind,
    result_layer_data,
    session_marker_size,
)
from napari_imagebench._owners import owner, stamp
from napari_imagebench._tracks import result_tracks
from napari_imagebench._workbench_model import KEEP, Leftovers

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


def scale_bar(viewer: Any) -> Any:
    """The viewer's scale bar (``viewer.canvas.overlays.scale_bar`` from napari 0.9, ``viewer.scale_bar`` before)."""
    overlays = getattr(getattr(viewer, "canvas", None), "overlays", None)
    bar = getattr(overlays, "scale_bar", None)
    return bar if bar is not None else getattr(viewer, "scale_bar", None)


class PanelLayers:
    """The layers this panel added to ``viewer``, the person's layers kept aside, and what the
    console's ``imagebench_results`` holds."""

    def __init__(self, viewer: napari.Viewer, model: BenchModel) -> None:
        self.viewer, self.model = viewer, model
        self.case: list[Any] = []  # data layers this panel added for the loaded case
        self.results: dict[str, Any] = {}  # "<subject>:<leaving>" -> layer
        self.console_results: dict[str, dict[str, Any]] = {}  # the console's imagebench_results
        self._scale_bar_on = False  # the panel turned the scale bar on (and may turn it off)
        # first, so that whoever lists layers on the same event sees the new one tagged
        viewer.layers.events.inserted.connect(self._arrived, position="first")
        self._undo_gl = gl_context_for_removals(viewer)

    def close(self) -> None:
        """Stop tagging the viewer's layers (the panel is closing)."""
        self._undo_gl()
        try:
            self.viewer.layers.events.inserted.disconnect(self._arrived)
        except (TypeError, RuntimeError, ValueError):
            pass

    def _arrived(self, event: Any) -> None:
        layer = event.value
        if ARTIFACT_KEY not in layer.metadata:  # a layer the panel adds is tagged already
            self.model.workbench.tag_arrival(layer.metadata)

    # ---------------------------------------------------------------- a case switch

    def show_case(self, loaded: Loaded, tuples: list[Any]) -> None:
        """Replace what the panel showed with the loaded case's data layers (the person's layers of
        other cases kept aside or removed, as they answer; theirs of this case stay); the console
        gets its session."""
        label, number = loaded.case.label, loaded.number
        layers = [layer for layer in self.viewer.layers if ARTIFACT_KEY not in layer.metadata]
        owners = {id(layer): owner(layer.metadata) for layer in layers}
        earlier = [lay for lay in layers if owners[id(lay)].persons and not owners[id(lay)].of_load(label, number)]
        again = [lay for lay in earlier if owners[id(lay)].case == label]  # this case's, from a load before
        leftovers = [lay for lay in earlier if lay not in again]
        staying = [lay for lay in layers if not owners[id(lay)].panel and lay not in leftovers]  # the person's
        choice = KEEP
        if leftovers:
            by_case: dict[str, list[str]] = {}
            for layer in leftovers:
                by_case.setdefault(str(owners[id(layer)].case), []).append(layer.name)
            question = Leftovers(label, {case: tuple(names) for case, names in by_case.items()})
            choice = self.model.workbench.decide_leftovers(question)
        # one removal for all (napari collects garbage after each): the panel's, the leftovers, the panes
        going = [lay for lay in layers if owners[id(lay)].panel] + leftovers + artifact_layers(self.viewer)
        remove_layers(self.viewer, going)
        if choice == KEEP:
            for layer in leftovers:
                self.model.workbench.keep_aside(str(owners[id(layer)].case), [layer])
        self.model.workbench.start_showing()
        self._make_room([data[1].get("name") for data in tuples], staying)
        self.case, self.results, self.console_results = [], {}, {}
        for data in tuples:
            stamp(data[1].setdefault("metadata", {}), "case", label, number)
            layer = add_layer_data(self.viewer, data)
            self.case.append(layer)
            self.model.layer_shown(layer.name)
        self._join(again, self.model.workbench.kept(label))
        self._present(loaded)
        self.viewer.reset_view()
        self.viewer.update_console(
            {**loaded.session.namespace, "session": loaded.session, "imagebench_results": self.console_results}
        )

    def _make_room(self, names: list[Any], staying: list[Any]) -> None:
        """A layer that stays and holds the name of one of the case's layers takes napari's next
        free name (``name [1]``), so the case's layer keeps its own."""
        taken = {layer.name for layer in self.viewer.layers}
        for layer in staying:
            if layer.name in names:
                n = 1
                while f"{layer.name} [{n}]" in taken or f"{layer.name} [{n}]" in names:
                    n += 1
                old, layer.name = layer.name, f"{layer.name} [{n}]"
                taken.add(layer.name)
                self.model.notify("info", f"your layer `{old}` is now `{layer.name}`: the case has a layer `{old}`")

    def _join(self, again: list[Any], kept: list[Any]) -> None:
        """The person's layers of this case join this load: those still on the viewer (it was loaded
        again) and those kept aside, which come back on top. The load takes their loads' flags
        (what was seen of the truth when they were made)."""
        loaded = self.model.workbench.need_loaded()
        loads: list[int] = []
        for layer in [*again, *kept]:
            old = owner(layer.metadata)
            if old.load is not None:
                loads.append(old.load)
            stamp(layer.metadata, "answer" if old.role == "answer" else "person", loaded.case.label, loaded.number)
        for layer in kept:  # tagged: its arrival does not tag it again
            self.viewer.layers.append(layer)
        flags = self.model.workbench.take_back(loads) if loads else set()
        if kept:
            names = ", ".join(layer.name for layer in kept)
            also = f" (with what you had seen then: {', '.join(sorted(flags))})" if flags else ""
            self.model.notify("info", f"your layers {names} are back from when you last loaded {loaded.case.label}{also}")
        elif flags:
            self.model.notify("info", f"your layers of {loaded.case.label} stay, with what you had seen: {', '.join(sorted(flags))}")

    def _present(self, loaded: Loaded) -> None:
        """The viewer as the case declares it: the scale bar on when its layers are in physical
        units, the axes named as its layers name them."""
        bar = scale_bar(self.viewer)
        if bar is not None:
            units = case_units(loaded.case)
            if units is not None:
                self._scale_bar_on = self._scale_bar_on or not bar.visible
                bar.visible = True
            elif self._scale_bar_on:
                bar.visible = self._scale_bar_on = False
        axes = case_axes(loaded.case, self.viewer.dims.ndim)
        if axes is not None:
            self.viewer.dims.axis_labels = axes

    # ---------------------------------------------------------------- results

    def show_results(self, job: RunJob, left: Mapping[str, Any]) -> None:
        """What a subject's Run left, as layers named ``<subject>:<leaving>`` (and in the console)."""
        case = job.unit.case
        declared = {c.name: c for c in case.collect}
        layers = {layer.name: layer for layer in case.layers}
        shapes = {n: tuple(sl.data.shape) for n, sl in job.session.layers.items() if hasattr(sl.data, "shape")}
        size, styles = session_marker_size(job.session), point_styles(case)
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
                if kind == "tracks" and collect is not None:  # drawn over its masks as napari Tracks
                    data = result_tracks(layer_name, case, left, collect)
                else:
                    data = result_layer_data(
                        layer_name, value, kind, like=like, ordered=ordered, size=size, style=styles.get(name, 0)
                    )
                layer = self._add_result(data)
            except Exception as exc:  # what a subject left may not be showable as the case says
                self.model.notify("warning", f"{layer_name} cannot be shown as {kind}: {type(exc).__name__}: {exc}")
                continue
            self.results[layer_name] = layer
            self.model.layer_shown(layer.name)
        self.console_results[job.subject_name] = dict(left)
        self.viewer.update_console({"imagebench_results": self.console_results})

    def _add_result(self, data: Any) -> Any:
        loaded = self.model.workbench.need_loaded()
        stamp(data[1].setdefault("metadata", {}), "result", loaded.case.label, loaded.number)
        return add_layer_data(self.viewer, data)

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
            layer = self._add_result(
                result_layer_data(
                    layer_name,
                    data,
                    kind,
                    like=declared.get(like) if like else None,
                    size=session_marker_size(loaded.session),
                    style=point_styles(loaded.case).get(name, 0),
                )
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
        """``{layer name: data}`` of the viewer's layers that belong to the load on the viewer (its
        data layers and the person's layers made on it; never a result, an artifact pane, or a
        layer made on another case); a layer ``picked`` for a leaving (``{leaving: layer name}``)
        stands for it."""
        loaded = self.model.loaded
        label, number = (loaded.case.label, loaded.number) if loaded is not None else (None, None)
        found = {
            layer.name: layer_value(layer)
            for layer in self.viewer.layers
            if ARTIFACT_KEY not in layer.metadata
            and (o := owner(layer.metadata)).of_load(label, number)
            and o.role != "result"
        }
        for name, layer_name in picked.items():
            if layer_name in found:
                found[name] = found[layer_name]
        return found
