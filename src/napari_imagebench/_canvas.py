"""Removing layers without crashing the canvas on Mesa (software OpenGL, as under Xvfb).

Two napari/vispy behaviours segfault in ``glDrawArrays`` on Mesa (napari/napari#6472, #8471):

- removing layers and adding others with no draw between them;
- removing a Labels layer while another Labels layer stays *above* it in the layer list.

:func:`remove_layers` avoids both: it moves the layers to go to the top of the list (their
order kept), lets the canvas draw, removes them from the top down and lets it draw again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def settle_canvas() -> None:
    """Let pending paints and posted events run (user input waits): the canvas draws once."""
    from qtpy.QtCore import QEventLoop
    from qtpy.QtWidgets import QApplication

    QApplication.processEvents(QEventLoop.ExcludeUserInputEvents)


def remove_layers(viewer: Any, layers: Iterable[Any]) -> None:
    """Remove ``layers`` from ``viewer`` (those still in it) without the Mesa crashes above."""
    going = [layer for layer in layers if layer in viewer.layers]
    if not going:
        return
    for layer in sorted(going, key=viewer.layers.index):  # lowest first: each ends on top, order kept
        viewer.layers.move(viewer.layers.index(layer), len(viewer.layers))
    settle_canvas()
    for layer in sorted(going, key=viewer.layers.index, reverse=True):  # from the top down
        viewer.layers.remove(layer)
    settle_canvas()
