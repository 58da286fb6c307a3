"""The Answer tab: a person gives each leaving by picking a layer or filling a form (magicgui).

One row per :class:`~napari_imagebench._answers.AnswerSlot` of the loaded case:

- a layer slot: a magicgui combo box listing the layers of the kind the case wants (labels,
  points, image, shapes) that belong to the load on the viewer (:meth:`AnswerModel.offered`: never
  a layer made on another case, nor a subject's result), defaulting to the one named after the
  leaving, and a Create button adding an empty layer of that name shaped, typed and scaled like
  its data layer, in the mode to draw it (paint labels, add points or polygons); an ordered points
  answer has a counter (``12 of 25 clicked``);
- a form slot: magicgui widgets built from the case's answer contract (an integer, a number, a
  vector, a voxel filled from a clicked point, a yes/no, text) and a Set button;
- a console slot: what to bind in napari's console.

When a Load finds the person's layers of an earlier case on the viewer, a message box
(``leftovers_question``: *Keep aside*, ``leftovers_keep``, or *Remove*, ``leftovers_remove``)
asks what to do with them (:class:`~napari_imagebench._workbench_model.Leftovers`).

Every control has an objectName (``pick_<name>``, ``create_<name>``, ``count_<name>``,
``set_<name>``, ``field_<name>_<field>``, ``point_<name>``) so people's scripts and tests find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import (
    CheckBox,
    ComboBox,
    Container,
    LineEdit,
    PushButton,
    SpinBox,
)
from qtpy.QtCore import Signal
from qtpy.QtWidgets import QLabel, QMessageBox, QVBoxLayout, QWidget

from napari_imagebench._answers import AnswerSlot, FormField
from napari_imagebench._layers import add_layer_data
from napari_imagebench._model import BenchModel, PanelError
from napari_imagebench._owners import owner
from napari_imagebench._workbench_model import KEEP, REMOVE, Leftovers

if TYPE_CHECKING:
    import napari

_NONE = "(none)"


class AnswerPanel(QWidget):
    """The Answer tab of the bench panel; ``changed`` fires when what would be scored changes."""

    changed = Signal()

    def __init__(self, viewer: napari.Viewer, model: BenchModel) -> None:
        super().__init__()
        self.viewer, self.model = viewer, model
        self.setObjectName("answer_panel")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(2, 2, 2, 2)
        self._rows: list[QWidget] = []
        self.pickers: dict[str, ComboBox] = {}
        self.forms: dict[str, Container] = {}
        self.counters: dict[str, QLabel] = {}  # ordered points answers: "12 of 25 clicked"
        self._watched: dict[str, tuple[Any, Any]] = {}  # leaving -> (layer, callback) counted
        self._placeholder = QLabel("load a case to answer it here")
        self._placeholder.setObjectName("answer_placeholder")
        self._layout.addWidget(self._placeholder)
        self._layout.addStretch(1)
        viewer.layers.events.inserted.connect(self._layers_changed)
        viewer.layers.events.removed.connect(self._layers_changed)
        model.workbench.ask_leftovers = self.ask_leftovers

    def ask_leftovers(self, question: Leftovers) -> str:
        """Ask the person, in a message box, what to do with their layers of earlier cases."""
        box = QMessageBox(QMessageBox.Icon.Question, "Your layers of another case", question.text(), parent=self)
        box.setObjectName("leftovers_question")
        keep = box.addButton("Keep aside", QMessageBox.ButtonRole.AcceptRole)
        keep.setObjectName("leftovers_keep")
        keep.setToolTip("take them off the viewer; they come back when you load their case again")
        remove = box.addButton("Remove", QMessageBox.ButtonRole.DestructiveRole)
        remove.setObjectName("leftovers_remove")
        remove.setToolTip("delete them")
        box.setDefaultButton(keep)
        box.setEscapeButton(keep)  # never remove without a yes
        box.exec()
        return REMOVE if box.clickedButton() is remove else KEEP

    # ---------------------------------------------------------------- building

    def rebuild(self) -> None:
        """One row per leaving of the loaded case (called after each Load)."""
        for row in self._rows:
            self._layout.removeWidget(row)
            row.deleteLater()
        for name in list(self._watched):
            self._unwatch(name)
        self._rows, self.pickers, self.forms, self.counters = [], {}, {}, {}
        slots = self.model.answer_slots() if self.model.loaded is not None else []
        self._placeholder.setVisible(not slots)
        for slot in slots:
            row = self._row(slot)
            self._layout.insertWidget(self._layout.count() - 1, row)
            self._rows.append(row)
        self.changed.emit()

    def _row(self, slot: AnswerSlot) -> QWidget:
        box = QWidget()
        box.setObjectName(f"answer_{slot.name}")
        col = QVBoxLayout(box)
        col.setContentsMargins(0, 4, 0, 4)
        title = QLabel(f"<b>{slot.name}</b>: {slot.how()}" + (f"<br><i>{slot.description}</i>" if slot.description else ""))
        title.setWordWrap(True)
        col.addWidget(title)
        if slot.kind == "layer":
            picker = ComboBox(
                name=f"pick_{slot.name}",
                label="layer",
                choices=lambda _w, s=slot: self._choices(s),
                tooltip=f"the viewer's {slot.layer or ''} layer that is your `{slot.name}` (Score reads it)",
            )
            picker.native.setObjectName(f"pick_{slot.name}")
            picker.changed.connect(lambda _v: self.changed.emit())
            create = PushButton(
                name=f"create_{slot.name}",
                text=f"Create `{slot.name}`",
                tooltip=f"add an empty {slot.layer or ''} layer named `{slot.name}` to draw your answer in",
            )
            create.native.setObjectName(f"create_{slot.name}")
            create.changed.connect(lambda _v, s=slot: self.create_layer(s.name))
            self.pickers[slot.name] = picker
            col.addWidget(Container(widgets=[picker, create], layout="horizontal", labels=False).native)
            if slot.layer == "points" and slot.ordered:
                counter = QLabel()
                counter.setObjectName(f"count_{slot.name}")
                counter.setToolTip(f"how many points the layer picked for `{slot.name}` holds, of those it pairs with")
                self.counters[slot.name] = counter
                col.addWidget(counter)
                picker.changed.connect(lambda _v, name=slot.name: self._watch(name))
            self._select_default(slot)
            self._watch(slot.name)
        elif slot.kind == "form":
            widgets = [self._field(slot, f) for f in slot.fields]
            set_button = PushButton(name=f"set_{slot.name}", text="Set", tooltip=f"give the values above as `{slot.name}`")
            set_button.native.setObjectName(f"set_{slot.name}")
            set_button.changed.connect(lambda _v, s=slot: self.set_answer(s.name))
            form = Container(widgets=[*widgets, set_button])
            self.forms[slot.name] = form
            col.addWidget(form.native)
        return box

    def _field(self, slot: AnswerSlot, f: FormField) -> Any:
        name = f"field_{slot.name}_{f.name}"
        if f.kind == "int":
            widget: Any = SpinBox(name=name, label=f.name, min=-(10**9), max=10**9, value=0, tooltip=f"{f.name}: an integer")
        elif f.kind == "bool":
            widget = CheckBox(name=name, label=f.name, value=False, tooltip=f"{f.name}: yes or no")
        else:
            hint = {"vector": f"{f.length} numbers, comma-separated", "voxel": "z, y, x: or click a point"}.get(f.kind, "")
            widget = LineEdit(name=name, label=f.name, tooltip=f"{f.name}: {hint}" if hint else f.name)
        widget.native.setObjectName(name)
        if f.kind == "voxel":
            pick = PushButton(
                name=f"point_{slot.name}",
                text="From the last clicked point",
                tooltip="fill z, y, x from the point last clicked on the canvas",
            )
            pick.native.setObjectName(f"point_{slot.name}")
            pick.changed.connect(lambda _v, w=widget: self._fill_from_point(w))
            return Container(widgets=[widget, pick], layout="horizontal", labels=False, name=f"voxel_{slot.name}")
        return widget

    # ---------------------------------------------------------------- layer slots

    def _choices(self, slot: AnswerSlot) -> list[str]:
        if self.model.loaded is None:
            return [_NONE]
        listed = [(layer.name, type(layer).__name__, layer.metadata) for layer in self.viewer.layers]
        return [_NONE, *self.model.answering.offered(slot, listed)]

    def _select_default(self, slot: AnswerSlot) -> None:
        picker = self.pickers[slot.name]
        picker.reset_choices()
        if picker.value in (None, _NONE) and slot.name in picker.choices:
            picker.value = slot.name

    def _layers_changed(self, _event: Any = None) -> None:
        for name, picker in self.pickers.items():
            current = picker.value
            picker.reset_choices()
            if current in picker.choices:
                picker.value = current
            elif name in picker.choices:
                picker.value = name
            self._watch(name)
        self.changed.emit()

    def _watch(self, name: str) -> None:
        """Count the points of the layer picked for ``name`` as they are clicked."""
        counter = self.counters.get(name)
        if counter is None:
            return
        picked = self.pickers[name].value
        layer = self.viewer.layers[picked] if picked not in (None, _NONE) and picked in self.viewer.layers else None
        if name in self._watched and self._watched[name][0] is not layer:
            self._unwatch(name)
        if layer is not None and name not in self._watched:
            callback = lambda _e=None, n=name: self._show_count(n)  # noqa: E731
            layer.events.data.connect(callback)
            self._watched[name] = (layer, callback)
        self._show_count(name)

    def _unwatch(self, name: str) -> None:
        layer, callback = self._watched.pop(name)
        try:
            layer.events.data.disconnect(callback)
        except (TypeError, RuntimeError, ValueError):
            pass

    def _show_count(self, name: str) -> None:
        counter = self.counters.get(name)
        if counter is None or self.model.loaded is None or name not in {s.name for s in self.model.answer_slots()}:
            return  # a row of the case before, until the rows are rebuilt for this one
        watched = self._watched.get(name)
        given = len(watched[0].data) if watched is not None else 0
        counter.setText(self.model.answering.count(name, given) + ("" if watched else " (no layer picked)"))

    def create_layer(self, name: str) -> Any:
        """Add the empty answer layer of ``name`` (as the case wants it), pick it, and make it the
        active layer in the mode to draw it (paint labels, add points or polygons)."""
        try:
            data = self.model.answer_layer(name)
        except PanelError:
            return None
        slot = next(s for s in self.model.answer_slots() if s.name == name)
        if name in self.viewer.layers and name in self._choices(slot):
            self.model.notify("warning", f"a layer named {name!r} is there already: it is picked instead")
            layer = self.viewer.layers[name]
        else:
            layer = add_layer_data(self.viewer, data)
            if "features" in data[1]:  # ordered points: their index follows their order
                layer.events.data.connect(lambda _e, lay=layer: _renumber(lay))
        self.viewer.layers.selection.active = layer
        if slot.mode is not None:
            layer.mode = slot.mode
        self.pickers[name].reset_choices()
        self.pickers[name].value = layer.name
        self._watch(name)
        self.changed.emit()
        return layer

    def picked_names(self) -> dict[str, str]:
        """``{leaving name: layer name}`` of every picked layer still on the viewer."""
        out: dict[str, str] = {}
        for name, picker in self.pickers.items():
            chosen = picker.value
            if chosen not in (None, _NONE) and chosen in self.viewer.layers:
                out[name] = chosen
        return out

    # ---------------------------------------------------------------- form slots

    def form_values(self, name: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        slot = next(s for s in self.model.answer_slots() if s.name == name)
        form = self.forms[name]
        for f in slot.fields:
            widget = form[f"voxel_{name}"][0] if f.kind == "voxel" else form[f"field_{name}_{f.name}"]
            value = widget.value
            if f.kind in ("vector", "voxel") and isinstance(value, str):
                value = [v for v in value.replace(";", ",").split(",") if v.strip()] if value.strip() else ""
            values[f.name] = value
        return values

    def set_answer(self, name: str) -> Any:
        try:
            value = self.model.set_answer(name, self.form_values(name))
        except PanelError:
            return None
        self.changed.emit()
        return value

    def _fill_from_point(self, widget: Any) -> None:
        points = [layer for layer in self.viewer.layers if type(layer).__name__ == "Points" and len(layer.data)]
        active = self.viewer.layers.selection.active
        source = active if active in points else (points[-1] if points else None)
        if source is None:
            self.model.notify("warning", "add a Points layer and click the voxel first")
            return
        point = np.asarray(source.data[-1], dtype=float)
        grid = self._voxel_grid(len(point))
        if grid is not None:  # the point where it shows, in the voxels of the case's volume
            point = np.asarray(grid.world_to_data(source.data_to_world(point)), dtype=float)
        voxel = np.round(point).astype(int)
        widget.value = ", ".join(str(int(v)) for v in voxel)

    def _voxel_grid(self, ndim: int) -> Any:
        """The loaded case's data layer of ``ndim`` dimensions a voxel answer indexes, when shown."""
        loaded = self.model.loaded
        if loaded is None:
            return None
        for declared in loaded.case.layers:
            layer = self.viewer.layers[declared.name] if declared.name in self.viewer.layers else None
            if layer is not None and layer.ndim == ndim and owner(layer.metadata).role == "case":
                return layer
        return None


def _renumber(layer: Any) -> None:
    n = len(layer.data)
    if len(layer.features) != n or list(layer.features.get("index", [])) != list(range(n)):
        layer.features = {"index": np.arange(n)}
