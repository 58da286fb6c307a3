"""Removing layers without crashing the canvas on Mesa (software OpenGL, as under Xvfb).

Two napari/vispy behaviours segfault in ``glDrawArrays`` on Mesa (napari/napari#6472, #8471):

- removing layers and adding others with no draw between them;
- removing a Labels layer while another Labels layer stays *above* it in the layer list.

:func:`remove_layers` avoids both: it moves the layers to go to the top of the list (their
order kept), lets the canvas draw, removes them from the top down and lets it draw again.

napari collects garbage in full after each layer it removes (``gc.collect()`` in
``VispyCanvas._clean_and_update_scenegraph``, so a removed layer's GL objects go before the next
draw); with napari loaded that is about 0.2 s a layer. :func:`remove_layers` keeps the objects
that were alive before the removal out of those collections (``gc.freeze``) and collects once
when every layer is gone, before the canvas draws again: the same guarantee, paid once.
"""

from __future__ import annotations

import gc
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
    ours = gc.get_freeze_count() == 0  # a freeze the application made is left as it is
    if ours:
        gc.freeze()  # napari's collection after each removal then walks only what the removal made
    try:
        for layer in sorted(going, key=viewer.layers.index, reverse=True):  # from the top down
            viewer.layers.remove(layer)
    finally:
        if ours:
            gc.unfreeze()
    gc.collect()  # the removed layers' GL objects go now, before the next draw, as napari wants
    settle_canvas()
