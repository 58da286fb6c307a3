"""Agent serving: Serve to an agent (a toggle: Stop serving), the ``mcp.json`` an MCP client is
pointed at, the command line that connects the example agent to it (copyable), the log of the
agent's tool calls, and "the agent submitted — press Score" once it has. The layers it adds appear as it works
(:meth:`napari_imagebench._viewer.PanelLayers.show_agent_layer`); Score scores what it left.
Its model is :class:`napari_imagebench._agent_model.AgentModel`."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from qtpy.QtCore import QObject, Qt, Signal
from qtpy.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from imagebench.subjects.mcp.errors import ToolError
from napari_imagebench._agent_model import SUBMITTED
from napari_imagebench._model import BenchModel, PanelError
from napari_imagebench._style import name_children

if TYPE_CHECKING:
    from napari_imagebench._controls import Controls
    from napari_imagebench._viewer import PanelLayers

AGENT_LAYER_WAIT_S = 5.0  # how long an agent's add_layer waits for the viewer to show the layer
SERVE = "Serve to an agent"


class _AgentSignals(QObject):
    """Tool calls and layers of an agent served over MCP: emitted from the server's thread,
    handled on the GUI thread (a queued connection)."""

    call = Signal(object)
    layer = Signal(object)
    invoke = Signal(object)  # (fn, holder, done): a viewer tool's question, asked on the GUI thread


class AgentPane(QWidget):
    """``changed`` fires when an agent starts or stops being served."""

    changed = Signal()

    def __init__(self, model: BenchModel, layers: PanelLayers) -> None:
        super().__init__()
        self.model, self.layers = model, layers
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        self.serve_button = QPushButton(SERVE)
        self.serve_button.setCheckable(True)
        self.serve_button.setToolTip(
            "serve the loaded case to an agent over MCP (the folder's mcp.json says how to reach it); its layers "
            "appear as it works, and Score scores what it left as subject mcp:<client name>"
        )
        self.serve_button.clicked.connect(self._serve_clicked)
        col.addWidget(self.serve_button)
        self.agent_label = QLabel("")
        self.agent_label.setWordWrap(True)
        self.agent_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.agent_label.setVisible(False)  # shown while an agent is served (the dock fits 1366x768)
        self.agent_label.setToolTip("the mcp.json an MCP client is pointed at (select it to copy)")
        self.connect_row = QWidget()  # the example agent's command line, shown while an agent is served
        row = QHBoxLayout(self.connect_row)
        row.setContentsMargins(0, 0, 0, 0)
        self.connect_edit = QLineEdit()
        self.connect_edit.setReadOnly(True)
        self.connect_edit.setToolTip(
            "the command line that connects the example agent (examples/agents/classical_agent.py) to the served case; "
            "any MCP client reads the same mcp.json (docs/agents.md)"
        )
        self.copy_connect_button = QPushButton("Copy")
        self.copy_connect_button.setToolTip("put the example agent's command line on the clipboard")
        self.copy_connect_button.clicked.connect(self.copy_connect)
        row.addWidget(self.connect_edit, 1)
        row.addWidget(self.copy_connect_button)
        self.connect_row.setVisible(False)
        self.submitted_label = QLabel(SUBMITTED)
        self.submitted_label.setStyleSheet("font-weight: bold")
        self.submitted_label.setToolTip("the agent called submit: nothing it left can change; Score scores it")
        self.submitted_label.setVisible(False)
        self.agent_log = QPlainTextEdit()
        self.agent_log.setReadOnly(True)
        self.agent_log.setMaximumHeight(110)
        self.agent_log.setPlaceholderText("the agent's tool calls appear here")
        self.agent_log.setVisible(False)
        col.addWidget(self.agent_label)
        col.addWidget(self.connect_row)
        col.addWidget(self.submitted_label)
        col.addWidget(self.agent_log)
        self._signals = _AgentSignals()
        self._signals.call.connect(self._agent_call)
        self._signals.layer.connect(self._agent_layer)
        self._signals.invoke.connect(self._invoked)
        self.setObjectName("agent_pane")
        name_children(self)

    def show_controls(self, controls: Controls) -> None:
        self.serve_button.setEnabled(controls.serve.enabled)

    def serve_agent(self) -> bool:
        """Serve the loaded case to an agent over MCP; False when it cannot start."""
        import numpy as np

        signals = self._signals

        def on_layer(layer: Any) -> None:  # the server's thread: show it, and wait until it is shown
            shown = threading.Event()
            signals.layer.emit((layer.name, layer.kind, np.array(layer.data, copy=True), layer.like, shown))
            shown.wait(AGENT_LAYER_WAIT_S)

        def invoke(fn: Any) -> Any:  # the server's thread: the viewer is the GUI thread's
            if threading.current_thread() is threading.main_thread():
                return fn()
            holder: dict[str, Any] = {}
            done = threading.Event()
            signals.invoke.emit((fn, holder, done))
            if not done.wait(AGENT_LAYER_WAIT_S):
                raise ToolError(f"the viewer did not answer within {AGENT_LAYER_WAIT_S:g} s; try again")
            if "error" in holder:
                raise ToolError(f"the viewer refused: {holder['error']}")
            return holder.get("value")

        from napari_imagebench._agent_view import LiveView

        live = LiveView(self.layers, lambda: self.model.agent.subject_name if self.model.agent else "", invoke)
        try:
            serve = self.model.serve_agent(on_layer=on_layer, on_call=signals.call.emit, display=live)
        except PanelError:
            self.serve_button.setChecked(False)
            return False
        self.agent_log.clear()
        self.agent_log.setVisible(True)
        self.agent_label.setVisible(True)
        self.agent_label.setText(f"mcp.json: {serve.config}")
        self.agent_label.setToolTip(f"point an MCP client at it, e.g. claude -p '<task>' --mcp-config {serve.config}")
        self.connect_edit.setText(serve.connect)
        self.connect_edit.setCursorPosition(0)
        self.connect_row.setVisible(True)
        self.submitted_label.setVisible(False)
        self.serve_button.setChecked(True)
        self.serve_button.setText("Stop serving")
        self.changed.emit()
        return True

    def stop_agent(self) -> None:
        """Stop serving the agent without scoring it."""
        self.model.stop_agent()
        self.agent_stopped()

    def agent_stopped(self) -> None:
        """The agent is no longer served (stopped or scored)."""
        self.serve_button.setChecked(False)
        self.serve_button.setText(SERVE)
        self.agent_label.setText("")
        self.agent_label.setVisible(False)  # the log stays until the next agent: the person reads it
        self.connect_row.setVisible(False)
        self.submitted_label.setVisible(False)
        self.changed.emit()

    def copy_connect(self) -> str:
        """The example agent's command line, put on the clipboard."""
        text = self.connect_edit.text()
        clipboard = QApplication.clipboard()
        if clipboard is not None and text:
            clipboard.setText(text)
            self.model.notify("info", f"copied to the clipboard: {text}")
        return text

    def _serve_clicked(self, checked: bool) -> None:
        if checked:
            self.serve_agent()
        else:
            self.stop_agent()

    def _agent_call(self, call: Any) -> None:
        if self.model.serving.heard(call) is not None:  # its submit, told once by the model
            self.agent_label.setVisible(False)  # in its place: the client is done with mcp.json
            self.submitted_label.setVisible(True)
        outcome = "ok" if call.ok else f"error: {call.error}"
        args = ", ".join(f"{k}={v}" for k, v in call.arguments.items())
        self.agent_log.appendPlainText(f"#{call.seq} {call.tool}({args[:120]}) {outcome} [{call.seconds * 1000:.1f} ms]")

    def _invoked(self, payload: Any) -> None:
        fn, holder, done = payload
        try:
            holder["value"] = fn()
        except Exception as exc:  # told to the agent as a tool error; the panel goes on
            holder["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            done.set()

    def _agent_layer(self, payload: Any) -> None:
        name, kind, data, like, shown = payload
        try:
            self.layers.show_agent_layer(name, kind, data, like)
        finally:
            shown.set()
