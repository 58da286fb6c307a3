"""Switching cases never crashes the viewer, with a person's own layers of every kind on it.

Mesa under Xvfb segfaulted in ``glDrawArrays`` (swrast_dri) after layers were removed while
another stayed (napari/napari#6472, #8471): measured with a painted Labels layer left from
dsb2018 when annotation-vs-model and then another case loaded. The cause: napari deletes a
removed layer's GL objects at once, outside a paint, in whatever GL context is current, which
after a composed frame is Qt's, not the canvas's (:mod:`napari_imagebench._canvas`). Here a
person paints a Labels layer, clicks Points, draws Shapes, computes an Image and creates every
answer layer on every case, keeps layers of their own from before any case on the viewer
throughout (their visuals outlive every switch), and switches through every available case
twice: the first round keeps the leftovers aside, the second takes them back and then removes
them. A second test repeats the smallest plain-napari sequence that crashed, through the panel's
removal and through the layer list as a person deletes a layer.

The switching runs in a child process, so a crash is a failed test with its output, not the end
of the test session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("napari")

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import numpy as np
    import napari
    from qtpy.QtWidgets import QApplication
    from imagebench import cases as builtin
    from napari_imagebench._model import BenchModel
    from napari_imagebench._owners import owner
    from napari_imagebench._widget import BenchPanel

    viewer = napari.Viewer(show=True)
    panel = BenchPanel(viewer, BenchModel(cases=builtin.all_cases, outcome_root=Path(sys.argv[1])))
    viewer.window.add_dock_widget(panel)
    asked = []
    choice = ["keep"]
    panel.model.workbench.ask_leftovers = lambda question: (asked.append(question), choice[0])[1]
    # the person's own layers, there before any case: they stay on the viewer throughout
    own_image = viewer.add_image(np.random.default_rng(0).random((40, 40), np.float32), name="my own image", opacity=0.3)
    own_points = viewer.add_points(np.array([[5.0, 5.0], [20.0, 30.0]]), name="my own points")
    labels = [c.label for c in builtin.all_cases() if c.available()[0]]
    made = {}  # case label -> the names of the person's layers made on it in the first round

    def wait():
        start = time.time()
        while panel.running and time.time() - start < 180:
            QApplication.processEvents()
            time.sleep(0.02)

    def mine(number):
        return [l.name for l in viewer.layers if owner(l.metadata).persons and owner(l.metadata).load == number]

    for round_ in range(2):
        for label in labels:
            # keep aside through the first round (and the last case's, as the second starts); then remove
            choice[0] = "keep" if round_ == 0 or label == labels[0] else "remove"
            assert panel.load(label), label
            wait()
            loaded = panel.model.loaded
            assert loaded is not None and loaded.case.label == label, (label, panel.model.messages[-1].text)
            number = loaded.number
            case_layers = [l for l in viewer.layers if owner(l.metadata).role == "case"]
            # the case's layers, under their own names (a person's layer never renames one)
            assert [l.name for l in case_layers] == [d.name for d in loaded.case.layers], (label, viewer.layers)
            assert all(owner(l.metadata).load == number for l in case_layers), label
            ndim = max(l.ndim for l in case_layers)
            assert viewer.dims.ndim == ndim, (label, viewer.dims.ndim, ndim, [(l.name, l.ndim) for l in viewer.layers])
            assert own_image in viewer.layers and own_points in viewer.layers, label
            # the first round's layers kept aside are back on their own case in the second
            assert mine(number) == (made.get(label, []) if round_ == 1 else []), (label, mine(number))
            # what may stand for an answer: this load's layers only, never a leftover nor the person's own
            for slot, picker in panel.answer_panel.pickers.items():
                for name in picker.choices[1:]:
                    assert owner(viewer.layers[name].metadata).of_load(label, number), (label, slot, name)
            assert set(panel.viewer_leavings()) <= {l.name for l in viewer.layers if owner(l.metadata).of_load(label, number)}
            viewer.screenshot(canvas_only=True, flash=False)  # a real draw of the new layers
            # the person works: every answer layer created and painted, a layer of each kind of their own
            grid = next(l for l in case_layers if type(l).__name__ in ("Image", "Labels"))
            shape = tuple((grid.data[0] if grid.multiscale else grid.data).shape)
            centre = tuple(n // 2 for n in shape)
            for name in list(panel.answer_panel.pickers):
                created = panel.answer_panel.create_layer(name)
                if created is not None and type(created).__name__ == "Labels":
                    created.paint(centre, 2)
                elif created is not None and type(created).__name__ == "Points":
                    created.add(np.array([centre], float))
            painted = viewer.add_labels(np.zeros(shape, np.int32), name="painted")
            painted.paint(centre, 3)
            viewer.add_points(np.array([centre, [1] * len(shape)], float), name="clicked")
            corner = np.array([[*centre[:-2], 1, 1], [*centre[:-2], 1, 6], [*centre[:-2], 6, 6]], float)
            viewer.add_shapes([corner], shape_type="polygon", name="drawn")
            viewer.add_image(np.random.default_rng(1).random(shape, np.float32), name="computed", opacity=0.2)
            if round_ == 0:
                made[label] = mine(number)
            viewer.screenshot(canvas_only=True, flash=False)  # drawn with them on it
            print(round_, label, len(viewer.layers), flush=True)
    assert len(asked) >= 2 * len(labels) - 1
    panel.close()
    viewer.close()
    print("switched through", len(labels), "cases twice", flush=True)
    """
)


# Plain napari, no panel: an Image stays while one layer is removed, two are added and drawn, and
# both are removed after a frame was composed; the next draw segfaulted (every time, llvmpipe and
# softpipe) when the deletes ran in Qt's context.
SMALLEST = textwrap.dedent(
    """
    import sys
    import numpy as np
    import napari
    from napari_imagebench._canvas import gl_context_for_removals, remove_layers, settle_canvas

    route = sys.argv[1]
    viewer = napari.Viewer(show=True)
    if route == "layer-list":
        gl_context_for_removals(viewer)
    rng = np.random.default_rng(0)
    shot = lambda: viewer.screenshot(canvas_only=True, flash=False)
    def remove(*layers):
        if route == "panel":
            remove_layers(viewer, layers)
        else:
            for layer in layers:
                viewer.layers.remove(layer)  # as the layer list's delete button does
    first = viewer.add_image(rng.random((512, 512), np.float32), name="first")
    shot()
    kept = viewer.add_labels(rng.integers(0, 5, (512, 512)).astype(np.int32), name="kept")
    shot()
    remove(first)
    settle_canvas()
    a = viewer.add_labels(rng.integers(0, 5, (256, 256)).astype(np.int32), name="a")
    b = viewer.add_labels(rng.integers(0, 5, (256, 256)).astype(np.int32), name="b")
    shot()
    settle_canvas()
    remove(b, a)
    settle_canvas()
    shot()
    viewer.add_image(rng.random((20, 64, 64), np.float32), name="volume")
    shot()
    print("survived", route, flush=True)
    """
)


def _child(script: str, *args: str, tmp_path: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "child.py"
    path.write_text(script)
    env = {**os.environ, "IMAGEBENCH_OUTCOME_DIR": str(tmp_path / "outcomes")}
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


@pytest.mark.skipif(not os.environ.get("DISPLAY"), reason="needs a display (the tests run under xvfb-run)")
def test_switching_through_every_case_twice_with_a_person_s_layers_never_crashes(tmp_path: Path) -> None:
    done = _child(SCRIPT, str(tmp_path / "panel-out"), tmp_path=tmp_path, timeout=900)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "switched through" in done.stdout


@pytest.mark.skipif(not os.environ.get("DISPLAY"), reason="needs a display (the tests run under xvfb-run)")
@pytest.mark.parametrize("route", ["panel", "layer-list"])
def test_the_smallest_crashing_removal_survives_with_the_canvas_context_current(route: str, tmp_path: Path) -> None:
    done = _child(SMALLEST, route, tmp_path=tmp_path, timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert f"survived {route}" in done.stdout
