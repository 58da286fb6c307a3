"""Removing layers without crashing the canvas: their GL objects are deleted in the canvas's context.

The cause of the segfaults on Mesa (software OpenGL, as under Xvfb; ``glDrawArrays`` in
swrast_dri, napari/napari#6472, #8471): when a layer leaves the viewer, napari closes its visual
and at once flushes vispy's GL commands, the layer's ``glDeleteProgram``, ``glDeleteTextures``
and ``glDeleteBuffers`` among them, with ``context.finish()`` (``VispyCanvas._remove_layer``). It
does so outside a paint and without making the canvas's GL context current. Qt 6 composes a
``QOpenGLWidget`` into its window with a context of its own that shares the canvas's objects, so
after a frame has been composed that context is the current one, and the deletes run in it.
Deleting a program from a context other than the one that drew with it leaves the canvas's
context pointing at freed state; its next draw of any visual that outlived the removal (a layer
that stays, a canvas overlay) segfaults. Measured under Xvfb (llvmpipe and softpipe alike): a
person's painted Labels layer left while annotation-vs-model's two Labels layers were removed,
and in plain napari an Image kept while two Images were removed after an earlier removal. The
deletes ran with Qt's context current; with the deletion of one removed layer's program skipped,
or with the canvas's context made current before the removal, the same steps survive.

:func:`gl_context_for_removals` makes the canvas's context current before *every* removal from a
viewer (the panel's, the person's own from the layer list, another plugin's), on the layer list's
``removing`` event; :func:`remove_layers` does the same for the panel's removals and lets the
canvas draw once after them.

napari collects garbage in full after each layer it removes (``gc.collect()`` in
``VispyCanvas._clean_and_update_scenegraph``, so a removed layer's GL objects go before the next
draw); with napari loaded that is about 0.2 s a layer. :func:`remove_layers` keeps the objects
that were alive before the removal out of those collections (``gc.freeze``), so each walks only
what the removal made. The removed layers themselves were alive before, so they are left for a
full collection: made at once when they held :data:`COLLECT_NOW_BYTES` or more of data (a large
image's memory is back before the next one is built), and otherwise left to Python's own
collector, which walks the heap when enough new objects have survived (a full walk of the panel's
heap costs about 0.2 s, as much as adding an image). Their GL objects need no collection: napari
closes each removed layer's visuals, which deletes their programs, textures and buffers through
vispy's command queue, and a GL object collected later only queues its delete there too; the
canvas runs the queue in its own context when it next draws.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

#: removed layers holding this many bytes of data or more are collected at once (see above)
COLLECT_NOW_BYTES = 64 * 2**20


def settle_canvas() -> None:
    """Let pending paints and posted events run (user input waits): the canvas draws once."""
    from qtpy.QtCore import QEventLoop
    from qtpy.QtWidgets import QApplication

    QApplication.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)


def scene_canvas(viewer: Any) -> Any:
    """The viewer's vispy ``SceneCanvas``, or None (a viewer without a window, a napari that hides it).

    napari has no public route to it; the private one is read under a guard."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # napari's notice about private attributes
        try:
            canvas = viewer.window._qt_viewer.canvas._scene_canvas
        except AttributeError:
            return None
    # a plugin's viewer is napari's public-only proxy, and so is what is reached through it: the
    # canvas itself, so that reading its backend does not warn again at every call
    return getattr(canvas, "__wrapped__", canvas)


def make_canvas_current(viewer: Any) -> bool:
    """Make the viewer canvas's GL context the current one (vispy's ``set_current``, the Qt
    widget's ``makeCurrent``), so GL calls made outside a paint go to it. False without a canvas."""
    canvas = scene_canvas(viewer)
    if canvas is None or getattr(canvas, "_backend", None) is None:
        return False
    canvas.set_current()
    return True


def gl_context_for_removals(viewer: Any) -> Callable[[], None]:
    """From now on, before any layer leaves ``viewer`` its canvas's GL context is made current
    (see the module's docstring). Returns the function that undoes it."""

    def removing(_event: Any = None) -> None:
        make_canvas_current(viewer)

    viewer.layers.events.removing.connect(removing)

    def undo() -> None:
        try:
            viewer.layers.events.removing.disconnect(removing)
        except (TypeError, RuntimeError, ValueError):
            pass

    return undo


def remove_layers(viewer: Any, layers: Iterable[Any]) -> None:
    """Remove ``layers`` from ``viewer`` (those still in it), from the top down, each with the
    canvas's GL context current, garbage collected once for all (see above), and let the canvas
    draw once after."""
    going = [layer for layer in layers if layer in viewer.layers]
    if not going:
        return
    held = sum(held_bytes(layer) for layer in going)
    ours = gc.get_freeze_count() == 0  # a freeze the application made is left as it is
    if ours:
        gc.freeze()  # napari's collection after each removal then walks only what the removal made
    try:
        for layer in sorted(going, key=viewer.layers.index, reverse=True):  # from the top down
            make_canvas_current(viewer)
            viewer.layers.remove(layer)
    finally:
        if ours:
            gc.unfreeze()
    del going
    if held >= COLLECT_NOW_BYTES:
        gc.collect()  # their memory is back now, before the next case is built
    settle_canvas()


def held_bytes(layer: Any) -> int:
    """Bytes of the arrays in memory a layer holds (a pyramid's levels summed); a lazy array
    (dask, the data plane) holds none until read."""
    data = getattr(layer, "data", None)
    levels = data if isinstance(data, (list, tuple)) else [data]
    total = 0
    for level in levels:
        if isinstance(level, np.ndarray):
            total += level.nbytes
    return total
