"""The panel benchmark's journey (Load, Run, Score, View artifacts, Back, View again, Back on
three cases) five times, each in a child process of its own, on the display the tests run on
(Mesa under Xvfb): none aborts and none logs a GL error.

On this software GL, two napari viewers in one process abort now and then while drawing text
(``GLError 1282 invalid operation`` in ``glTexSubImage2D``, vispy's glyph atlas); the benchmark
used a second viewer for its napari-alone anchor and aborted in 4 of 5 runs. Its anchor now has
a process of its own (see ``benchmarks/bench_panel.py``), and this is the journey it times.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("napari")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_panel.py"


@pytest.mark.skipif(not os.environ.get("DISPLAY"), reason="needs a display (run under xvfb-run)")
def test_the_panel_journey_survives_five_child_processes(tmp_path: Path) -> None:
    env = {**os.environ, "IMAGEBENCH_OUTCOME_DIR": str(tmp_path / "outcomes")}
    for attempt in range(5):
        done = subprocess.run(
            [sys.executable, str(BENCH), "--journey"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=False,
        )
        said = done.stdout + done.stderr
        assert done.returncode == 0, f"attempt {attempt + 1} ended {done.returncode}:\n{said[-6000:]}"
        assert "GLError" not in said, f"attempt {attempt + 1} logged a GL error:\n{said[-6000:]}"
        timed = [line for line in done.stdout.splitlines() if line.startswith(("segment-nuclei/", "align-channels"))]
        assert len(timed) == 3, done.stdout[-3000:]
