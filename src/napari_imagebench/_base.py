"""What every concern model of the bench panel shares: its notices, its error, the subject names.

Each concern (:mod:`._browser_model`, :mod:`._coverage`, :mod:`._workbench_model`,
:mod:`._subjects_model`, :mod:`._answer_model`, :mod:`._score_model`, :mod:`._agent_model`) raises
its notices through one :class:`Notices`, so the widget hears every one on ``events.message``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from psygnal import Signal, SignalGroup

from napari_imagebench._runs import ResultRow

INTERACTIVE = "You (interactive)"
#: the subject name (and run-folder name) of a person scoring their own work at the viewer
INTERACTIVE_NAME = "interactive"
AGENT_PREFIX = "mcp:"  # an agent served over MCP is recorded as subject mcp:<its client name>
BUILTIN_SUBJECTS: tuple[str, ...] = (INTERACTIVE, "reference")

Level = Literal["info", "warning", "error"]


class PanelError(Exception):
    """An action of the panel cannot go ahead; the message says why (shown as a notification)."""


@dataclass(frozen=True)
class Message:
    level: Level
    text: str


class PanelEvents(SignalGroup):
    """What the panel's views listen to: a notice for the person, a scored sample for the results pane."""

    message = Signal(Message)
    result = Signal(ResultRow)


@dataclass
class Notices:
    """The panel's notices, kept in order and emitted as they come."""

    messages: list[Message] = field(default_factory=list)
    events: PanelEvents = field(default_factory=PanelEvents)

    def notify(self, level: Level, text: str) -> Message:
        msg = Message(level, text)
        self.messages.append(msg)
        self.events.message.emit(msg)
        return msg

    def fail(self, text: str, level: Level = "error") -> PanelError:
        """A notice, and the PanelError to raise with it."""
        self.notify(level, text)
        return PanelError(text)
