"""The bench panel against the headless run of the same case: Load, Run + Score, View artifacts.

For each case there are two anchors, measured in the same run:

- *headless*: the case run with the reference subject in this process as ``imagebench run -k
  CASE`` does it (``executor.run_cases`` and the report);
- *napari alone*: the physical cost of showing that case at all: removing the previous case's
  layers, adding the same layer data with ``viewer.add_*`` and drawing the canvas once.

The panel does the work by its buttons in a real napari viewer: Load (build, open the session,
put the layers up), Run (the reference in a worker thread) and Score (verify, write the sample,
journal, receipt and report). View artifacts (and Back to the case) is timed on its own. Medians
of ``--repeats`` after one warm-up of each. The issue's target is Load + Run + Score within 1.5x
of the headless run; the ratio to headless + napari alone says how much is the panel's own.

Usage: python benchmarks/bench_panel.py [--repeats N] [-k LABEL ...]
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
    """Remove every layer, add ``case``'s layers as the panel would, draw once."""
    from imagebench.case.session import open_session
    from napari_imagebench._layers import add_layer_data, session_layer_data

    session = open_session(case, case.build())
    tuples = session_layer_data(session)
    from qtpy.QtCore import QEventLoop
    from qtpy.QtWidgets import QApplication

    start = time.perf_counter()
    viewer.layers.clear()
    QApplication.processEvents(QEventLoop.ExcludeUserInputEvents)  # napari#6472: draw before adding
    for data in tuples:
        add_layer_data(viewer, data)
    viewer.window._qt_viewer.canvas.native.repaint()  # one draw, as the panel's load ends with
    return time.perf_counter() - start


def _panel_once(panel, label: str) -> tuple[float, float, float]:
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
    panel.view_artifacts()
    panel.back_to_the_case()
    viewed = time.perf_counter()
    return loaded - start, scored - loaded, viewed - scored


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("-k", dest="labels", action="append")
    args = parser.parse_args()
    if not os.environ.get("DISPLAY"):
        xvfb = shutil.which("xvfb-run")
        if xvfb is None:
            print("bench_panel: needs a display or xvfb-run", file=sys.stderr)
            return 1
        os.execv(xvfb, [xvfb, "-a", "-s", "-screen 0 1600x1200x24", sys.executable, *sys.argv])

    import napari

    from imagebench import cases as builtin
    from napari_imagebench._model import BenchModel
    from napari_imagebench._widget import BenchPanel

    labels = args.labels or list(CASES)
    tmp = Path(tempfile.mkdtemp(prefix="imagebench-bench-panel-"))
    viewer = napari.Viewer(show=True)
    plain = napari.Viewer(show=True)  # the "napari alone" anchor, in a viewer of its own
    panel = BenchPanel(viewer, BenchModel(cases=builtin.all_cases, outcome_root=tmp / "panel"))
    viewer.window.add_dock_widget(panel)
    print(
        f"{'case':40} {'headless':>9} {'napari':>7} {'load':>6} {'run+score':>9} {'/headless':>9} "
        f"{'/(headless+napari)':>18} {'view':>6}"
    )
    worst = worst_own = 0.0
    try:
        for label in labels:
            case = builtin.get_case(label)
            _headless(case, tmp / "warm")
            _panel_once(panel, label)
            heads, alone, loads, scores, views = [], [], [], [], []
            for _ in range(args.repeats):
                heads.append(_headless(case, tmp / "headless"))
                alone.append(_napari_alone(plain, case))
                load, score, view = _panel_once(panel, label)
                loads.append(load)
                scores.append(score)
                views.append(view)
            head, napari_s = statistics.median(heads), statistics.median(alone)
            both = statistics.median(a + b for a, b in zip(loads, scores, strict=True))
            ratio, own = both / head, both / (head + napari_s)
            worst, worst_own = max(worst, ratio), max(worst_own, own)
            print(
                f"{label:40} {head:9.3f} {napari_s:7.3f} {statistics.median(loads):6.3f} "
                f"{statistics.median(scores):9.3f} {ratio:8.2f}x {own:17.2f}x {statistics.median(views):6.3f}"
            )
    finally:
        panel.close()
        viewer.close()
        plain.close()
        shutil.rmtree(tmp, ignore_errors=True)
    verdict = "met" if worst <= TARGET else "missed"
    print(f"worst Load + Run + Score / headless run: {worst:.2f}x (target {TARGET}x: {verdict}); medians of {args.repeats}")
    print(f"worst Load + Run + Score / (headless run + napari alone showing the layers): {worst_own:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
