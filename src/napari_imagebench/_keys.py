"""The panel's keyboard shortcuts: Qt shortcuts on the dock (:data:`._controls.SHORTCUTS`), live
while the focus is anywhere in the panel, so they never take a key from napari's canvas or its
layer controls. Each presses its button, so a greyed button's shortcut does nothing.

Why not npe2 keybindings: npe2's manifest has a ``keybindings`` contribution, but napari (0.9)
registers each plugin command as an action with no keybindings, and a command is called without
the dock widget, so it could not press this panel's buttons."""

from __future__ import annotations

from collections.abc import Callable

from qtpy.QtCore import Qt
from qtpy.QtGui import QKeySequence
from qtpy.QtWidgets import QAbstractButton, QShortcut, QWidget

from napari_imagebench._controls import SHORTCUTS


def press(button: QAbstractButton) -> Callable[[], None]:
    """What a shortcut does: click ``button`` when it is enabled (and shown)."""

    def pressed() -> None:
        if button.isEnabled() and button.isVisibleTo(button.window()):
            button.click()

    return pressed


def install(panel: QWidget, actions: dict[str, Callable[[], None]]) -> list[QShortcut]:
    """A shortcut on ``panel`` per key of each action in :data:`SHORTCUTS`; the shortcuts made."""
    made = []
    for action, keys in SHORTCUTS.items():
        for key in keys:
            shortcut = QShortcut(QKeySequence(key), panel)
            shortcut.setContext(Qt.WidgetWithChildrenShortcut)
            shortcut.activated.connect(actions[action])
            made.append(shortcut)
    return made
