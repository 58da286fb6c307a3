"""The bench panel against the headless run of the same case: Load, Run + Score, View artifacts.

For each case there are two anchors, measured in the same run:

- *headless*: the case run with the reference subject in this process as ``imagebench run -k
  CASE`` does it (``executor.run_cases`` and the report);
- *napari alone*: the physical cost of showing that case at all: removing the previous case's
  layers, adding the same layer data with ``viewer.add_*``, drawing the canvas, adding the layers
  the reference left (as the panel shows them after Run) and drawing again.

The panel does the work by its buttons in a real napari viewer: Load (build, open the session,
put the layers up), Run (the reference in a worker thread) and Score (verify, write the sample,
journal, receipt and report). View artifacts and Back to the case are timed on their own (the
first View of a sample, then Back, then the same View again). Medians of ``--repeats`` after one
warm-up of each. The targets: Load + Run + Score within 1.5x of (headless run + napari alone),
so the panel's own work costs at most half of what it cannot avoid, and View and Back each
within 1 s; the ratio to the headless run alone is printed too.

The napari-alone anchor runs in a child process with a viewer of its own: two napari viewers in
one process on Mesa (software OpenGL, as under Xvfb) abort now and then while drawing text,
``GLError 1282 invalid operation`` in ``glTexSubImage2D`` from vispy's glyph atlas (vispy's
``_text_to_vbo`` flushes the *current* canvas's GL commands, which with two canvases need not be
the one drawing); with one viewer a process never did (0 of 12 runs against 5 of 10 with two).
``--journey`` walks the panel's part alone, once per case, with no anchor: what
``tests/napari/test_gl_journey.py`` runs in five child processes.

Usage: python benchmarks/bench_panel.py [--repeats N] [-k LABEL ...] [--journey]
(needs a display: without one it runs itself again under xvfb-run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.5
VIEW_TARGET = 1.0  # seconds
CASES = ("segment-nuclei/synthetic-blobs", "segment-nuclei/count-nuclei", "align-channels-from-landmarks/synthetic-warp")


def _wait(panel, timeout: float = 120.0) -> None:
    from qtpy.QtWidgets import QApplication

    start = time.perf_counter()
    while panel.running and time.perf_counter() - start < timeout:
        QApplication.processEvents()
        time.sleep(0.001)
    QApplication.processEvents()


def _headless(case, out: Path) -> float:
    from imagebench.executor import run_cases
    from imagebench.report import write_html_report
    from imagebench.subjects import ReferenceSubject

    start = time.perf_counter()
    result = run_cases([case], ReferenceSubject(), out=out, progress=False)
    write_html_report(result.run_dir, progress=False)
    wall = time.perf_counter() - start
    assert result.samples[case.label][0].status == "ok", result.samples[case.label][0].reason
    return wall


def _napari_alone(viewer, case) -> float:
    """Remove every layer, add ``case``'s layers as the panel would, draw, add what the reference
    leaves as the panel would, draw again."""
    from qtpy.QtCore import QEventLoop
    from qtpy.QtWidgets import QApplication

    from imagebench.case.session import open_session
    from napari_imagebench._layers import add_layer_data, result_kind, result_layer_data, session_layer_data

    session = open_session(case, case.build())
    tuples = session_layer_data(session)
    worked = open_session(case, case.build())
    case.reference(worked)
    shapes = {n: tuple(sl.data.shape) for n, sl in worked.layers.items() if hasattr(sl.data, "shape")}
    results = []
    for collect in case.collect:
        if collect.name in worked.namespace:
            value = worked.namespace[collect.name]
            kind = collect.layer or result_kind(value, shapes)
            if kind is not None:
                results.append(result_layer_data(f"reference:{collect.name}", value, kind))

    def draw() -> None:
        QApplication.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)
        viewer.window._qt_viewer.canvas.native.repaint()

    start = time.perf_counter()
    viewer.layers.clear()
    draw()  # napari#6472: draw before adding
    for data in tuples:
        add_layer_data(viewer, data)
    draw()
    for data in results:
        add_layer_data(viewer, data)
    draw()
    return time.perf_counter() - start


class _Anchor:
    """:func:`_napari_alone` for one case in a child process with a viewer of its own, timed on
    request (a line on its stdin), so its timings interleave with the panel's."""

    def __init__(self, label: str) -> None:
        import subprocess

        self.label = label
        self.child = subprocess.Popen(
            [sys.executable, __file__, "--anchor", label],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.time()  # the warm-up

    def time(self) -> float:
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write("go\n")
        self.child.stdin.flush()
        for line in self.child.stdout:  # anything else the child prints is passed over
            if line.startswith("anchor "):
                return float(line.split()[1])
        raise RuntimeError(f"the napari-alone anchor of {self.label} ended ({self.child.wait()})")

    def close(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()
        self.child.wait(timeout=60)


def _anchor_main(label: str) -> int:
    import napari

    from imagebench import cases as builtin

    viewer = napari.Viewer(show=True)
    case = builtin.get_case(label)
    for _ in sys.stdin:
        print(f"anchor {_napari_alone(viewer, case):.6f}", flush=True)
    viewer.close()
    return 0


def _panel_once(panel, label: str) -> tuple[float, float, float, float, float]:
    """Seconds of Load, Run + Score, the first View of the new sample, Back, and that View again."""
    start = time.perf_counter()
    assert panel.load(label), label
    _wait(panel)
    loaded = time.perf_counter()
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    _wait(panel)
    result = panel.score()
    scored = time.perf_counter()
    assert result is not None and result.status == "ok", result
    times = []
    for step in (panel.view_artifacts, panel.back_to_the_case, panel.view_artifacts):
        begun = time.perf_counter()
        step()
        _wait(panel)  # what the step left for the event loop (the draw) is part of it
        times.append(time.perf_counter() - begun)
    panel.back_to_the_case()
    return loaded - start, scored - loaded, *times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("-k", dest="labels", action="append")
    parser.add_argument("--journey", action="store_true", help="the panel's part once per case, no anchors")
    parser.add_argument("--anchor", help=argparse.SUPPRESS)  # the child process of _anchor_in_child
    args = parser.parse_args()
    if not os.environ.get("DISPLAY"):
        xvfb = shutil.which("xvfb-run")
        if xvfb is None:
            print("bench_panel: needs a display or xvfb-run", file=sys.stderr)
            return 1
        os.execv(xvfb, [xvfb, "-a", "-s", "-screen 0 1600x1200x24", sys.executable, *sys.argv])

    if args.anchor:
        return _anchor_main(args.anchor)
    import napari

    from imagebench import cases as builtin
    from napari_imagebench._model import BenchModel
    from napari_imagebench._widget import BenchPanel

    labels = args.labels or list(CASES)
    tmp = Path(tempfile.mkdtemp(prefix="imagebench-bench-panel-"))
    viewer = napari.Viewer(show=True)  # the one viewer of this process (see the opening)
    panel = BenchPanel(viewer, BenchModel(cases=builtin.all_cases, outcome_root=tmp / "panel"))
    viewer.window.add_dock_widget(panel)
    if args.journey:
        try:
            for label in labels:
                print(label, " ".join(f"{t:.3f}" for t in _panel_once(panel, label)), flush=True)
        finally:
            panel.close()
            viewer.close()
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    print(
        f"{'case':40} {'headless':>9} {'napari':>7} {'load':>6} {'run+score':>9} {'/headless':>9} "
        f"{'/(headless+napari)':>18} {'view':>6} {'back':>6} {'again':>6}"
    )
    worst = worst_own = worst_view = 0.0
    try:
        for label in labels:
            case = builtin.get_case(label)
            _headless(case, tmp / "warm")
            _panel_once(panel, label)
            anchor = _Anchor(label)
            heads, alone, rows = [], [], []
            try:
                for _ in range(args.repeats):
                    heads.append(_headless(case, tmp / "headless"))
                    alone.append(anchor.time())
                    rows.append(_panel_once(panel, label))
            finally:
                anchor.close()
            head, napari_s = statistics.median(heads), statistics.median(alone)
            load, score, view, back, again = (statistics.median(column) for column in zip(*rows, strict=True))
            both = statistics.median(row[0] + row[1] for row in rows)
            ratio, own = both / head, both / (head + napari_s)
            worst, worst_own = max(worst, ratio), max(worst_own, own)
            worst_view = max(worst_view, view, back, again)
            print(
                f"{label:40} {head:9.3f} {napari_s:7.3f} {load:6.3f} {score:9.3f} {ratio:8.2f}x {own:17.2f}x "
                f"{view:6.3f} {back:6.3f} {again:6.3f}"
            )
    finally:
        panel.close()
        viewer.close()
        shutil.rmtree(tmp, ignore_errors=True)
    verdict = "met" if worst_own <= TARGET else "missed"
    print(
        f"worst Load + Run + Score / (headless run + napari alone showing the same layers): {worst_own:.2f}x "
        f"(target {TARGET}x: {verdict}); medians of {args.repeats}"
    )
    print(f"worst Load + Run + Score / headless run alone: {worst:.2f}x")
    seen = "met" if worst_view <= VIEW_TARGET else "missed"
    print(f"slowest View artifacts or Back: {worst_view:.3f} s (target {VIEW_TARGET} s: {seen})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
