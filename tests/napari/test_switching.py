"""Switching cases never crashes the viewer (Mesa under Xvfb segfaulted in glDrawArrays when a
case was loaded after one with images and points: napari/napari#6472).

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
    import sys, tempfile, time
    from pathlib import Path
    import napari
    from qtpy.QtWidgets import QApplication
    from imagebench import cases as builtin
    from napari_imagebench._model import BenchModel
    from napari_imagebench._widget import BenchPanel

    viewer = napari.Viewer(show=True)
    panel = BenchPanel(viewer, BenchModel(cases=builtin.all_cases, outcome_root=Path(sys.argv[1])))
    viewer.window.add_dock_widget(panel)
    labels = [c.label for c in builtin.all_cases() if c.available()[0]]
    for round_ in range(2):
        for label in labels:
            assert panel.load(label), label
            start = time.time()
            while panel.running and time.time() - start < 120:
                QApplication.processEvents()
                time.sleep(0.02)
            assert panel.model.loaded is not None and panel.model.loaded.case.label == label, label
            viewer.screenshot(canvas_only=True, flash=False)  # a real draw of the new layers
            print(round_, label, len(viewer.layers), flush=True)
    panel.close()
    viewer.close()
    print("switched through", len(labels), "cases twice", flush=True)
    """
)


@pytest.mark.skipif(not os.environ.get("DISPLAY"), reason="needs a display (the tests run under xvfb-run)")
def test_switching_through_every_case_twice_never_crashes_the_viewer(tmp_path: Path) -> None:
    script = tmp_path / "switch.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "IMAGEBENCH_OUTCOME_DIR": str(tmp_path / "outcomes")}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "panel-out")],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "switched through" in done.stdout
