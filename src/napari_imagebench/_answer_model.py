"""The Answer tab's model: how a person gives each leaving of the loaded case, the answers set in
its forms, which layers may stand for a leaving, and where a person's leavings are found when
Score asks for them. Qt-free.

A layer is offered for a leaving only when it belongs to the load on the viewer
(:mod:`napari_imagebench._owners`): a data layer of the loaded case, a layer Create made for it,
or one the person added while it was loaded. A layer the person made on another case (or before
any), and what a subject's Run left, is never offered: Score would record it as this case's answer
by this person."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_imagebench._answers import AnswerError, AnswerSlot, answer_layer_data, answer_slots, counted, form_value
from napari_imagebench._base import Notices
from napari_imagebench._layers import point_styles, session_marker_size
from napari_imagebench._owners import owner, stamp
from napari_imagebench._tracks import tracks_lookup

#: napari's layer class for each layer kind a leaving is given as
LAYER_TYPES = {"labels": "Labels", "points": "Points", "image": "Image", "shapes": "Shapes", "tracks": "Tracks"}

if TYPE_CHECKING:
    from napari_imagebench._workbench_model import WorkbenchModel


class AnswerModel:
    """The leavings of the loaded case a person gives: by a layer, a form or the console."""

    def __init__(self, notices: Notices, workbench: WorkbenchModel) -> None:
        self.notices, self.workbench = notices, workbench

    def answer_slots(self) -> list[AnswerSlot]:
        """How a person gives each leaving of the loaded case (:mod:`napari_imagebench._answers`)."""
        return answer_slots(self.workbench.need_loaded().case)

    def _slot(self, name: str) -> AnswerSlot:
        slot = next((s for s in self.answer_slots() if s.name == name), None)
        if slot is None:
            raise self.notices.fail(f"{self.workbench.need_loaded().case.label} asks for no leaving named {name!r}")
        return slot

    def set_answer(self, name: str, values: Mapping[str, Any]) -> Any:
        """Set the form answer ``name`` from ``values`` ({field: value}); PanelError names a bad field."""
        slot = self._slot(name)
        try:
            value = form_value(slot, values)
        except AnswerError as exc:
            raise self.notices.fail(str(exc), "warning") from None
        self.workbench.need_loaded().answers[name] = value
        self.notices.notify("info", f"answer set: {name} = {value}")
        return value

    def answer_layer(self, name: str) -> tuple[Any, dict[str, Any], str]:
        """An empty layer for the layer slot ``name``, shaped, typed and scaled like its data layer,
        tagged as the person's answer of this load; points sized like the case's, in a colour of
        their own."""
        loaded = self.workbench.need_loaded()
        data = {n: sl.data for n, sl in loaded.session.layers.items()}
        slot = self._slot(name)
        try:
            out = answer_layer_data(
                slot,
                loaded.case.layers,
                data,
                point_size=session_marker_size(loaded.session),
                style=point_styles(loaded.case).get(name, 0),
                shapes=self._tensor_shapes(),
            )
        except AnswerError as exc:
            raise self.notices.fail(str(exc)) from None
        stamp(out[1]["metadata"], "answer", loaded.case.label, loaded.number)
        return out

    def _tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        """The shape of each tensor layer of the loaded case, as the data plane describes it."""
        loaded = self.workbench.need_loaded()
        out: dict[str, tuple[int, ...]] = {}
        for name, sl in loaded.session.layers.items():
            if sl.layer.presentation == "tensor" and loaded.session.client is not None:
                try:
                    out[name] = tuple(int(n) for n in loaded.session.client.describe(str(sl.data))["shape"])
                except Exception:  # the plane is gone: the slot says it has no shape to take
                    continue
        return out

    def offered(self, slot: AnswerSlot, layers: Sequence[tuple[str, str, Mapping[str, Any]]]) -> list[str]:
        """The names of the layers that may stand for ``slot``, of ``layers`` (``(name, napari
        class name, metadata)`` each, in the viewer's order): of its kind, and of the load on the
        viewer (a data layer of the case, a created answer, a layer the person added while it was
        loaded); never a subject's result, nor a layer made on another case or before any."""
        loaded = self.workbench.loaded
        if loaded is None:
            return []
        wanted, label, number = LAYER_TYPES.get(slot.layer or ""), loaded.case.label, loaded.number
        return [
            name
            for name, kind, metadata in layers
            if kind == wanted and (o := owner(metadata)).of_load(label, number) and o.role in ("case", "answer", "person")
        ]

    def count(self, name: str, given: int) -> str:
        """The counter of an ordered points answer: ``given`` points of the ones it pairs with
        (``12 of 25 clicked``)."""
        slot = self._slot(name)
        loaded = self.workbench.need_loaded()
        expected: int | None = None
        if slot.pairs is not None and slot.pairs in loaded.session.layers:
            expected = int(np.shape(loaded.session.layers[slot.pairs].data)[0])
        return counted(slot, given, expected)

    def missing_answers(self, layers: Mapping[str, Any], console: Mapping[str, Any] | None) -> dict[str, str]:
        """``{leaving: why it is missing}`` for each leaving a person has not given yet (Score waits
        for every one), in the case's order."""
        loaded = self.workbench.need_loaded()
        lookup = self.interactive_lookup(layers, console)
        missing: dict[str, str] = {}
        for c in loaded.case.collect:
            if c.recorded:  # the harness keeps it (a trigger case's trace): nobody gives it
                continue
            try:
                lookup(c.name)
            except KeyError as exc:
                missing[c.name] = str(exc.args[0]) if exc.args else "not given"
        return missing
    def interactive_lookup(
        self, layers: Mapping[str, Any], console: Mapping[str, Any] | None
    ) -> Callable[[str], Any]:
        """Where a person's leavings are found: an answer set in the Answer tab's form, a viewer
        layer of that name (or the one picked for it), then the console namespace, then the
        panel's own session namespace."""
        loaded = self.workbench.need_loaded()
        deleted = set(self.workbench.deleted)

        def lookup(name: str) -> Any:
            if name in loaded.answers:
                return loaded.answers[name]
            if name in layers:
                return layers[name]
            if console is not None and name in console:
                return console[name]
            try:
                return loaded.session.lookup(name)
            except KeyError:
                if name in deleted:
                    raise KeyError(f"the layer {name!r} was deleted before scoring") from None
                where = "no layer, no console name and no panel binding" if console is not None else (
                    "no layer and no panel binding (the console is not open)"
                )
                raise KeyError(f"you left nothing named {name!r}: {where}") from None

        return tracks_lookup(loaded.case, lookup)  # a Tracks layer and its Labels over time: one CTC answer
