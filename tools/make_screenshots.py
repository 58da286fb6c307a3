"""Generate the screenshots that docs/napari.md shows, by driving the real bench panel.

Run it under a display, e.g.::

    xvfb-run -a -s "-screen 0 1600x1200x24" .venv/bin/python tools/make_screenshots.py

(``make docs-shots`` does exactly that). It opens napari, docks the Imagebench panel from the
plugin, selects a built-in case, loads it, runs the ``reference`` subject, scores it and shows
the artifacts, then opens the example skill bundle, scores one of its cases with the example
solver and shows the Coverage tab, and (with the MCP SDK installed) serves ``count-nuclei`` to the
example agent, connected by the command line the Serve pane shows, until it has submitted,
saving a PNG after each step into ``docs/images/`` (or ``--out``); last, two suite runs of the
case (``reference`` and ``baseline``, run headless) side by side in the Compare tab (``--only
compare`` takes that shot alone). The run folder
goes to a temporary outcome root, and napari's settings to a temporary file, so neither the
checkout nor your napari settings change.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASE = "segment-nuclei/synthetic-blobs"
BUNDLE = ROOT / "examples" / "bundles" / "segment-nuclei"
BUNDLE_CASE = "segment-nuclei/golden-count"
SOLVER = "python:count_nuclei:solve"  # examples/solvers/count_nuclei.py
LEAVING = "labels"  # what that case asks a subject to leave
WIDTH = 1000  # pixels: screenshots are scaled down to this width at most, to keep them small


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="folder for the PNGs")
    parser.add_argument(
        "--only",
        choices=("compare", "savecase"),
        help="take only this shot (compare: panel-compare.png, savecase: panel-savecase.png)",
    )
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="imagebench-shots-") as tmp:
        os.environ["IMAGEBENCH_OUTCOME_DIR"] = str(Path(tmp) / "outcomes")
        os.environ["NAPARI_CONFIG"] = str(Path(tmp) / "napari-settings.yaml")
        os.environ["IMAGEBENCH_SUITES"] = str(Path(tmp) / "suites")  # the suite the compare shot pins
        if args.only == "compare":
            return _shoot_compare(args.out, CASE, Path(tmp))
        if args.only == "savecase":
            return _shoot_savecase(args.out, Path(tmp))
        return (
            _shoot(args.out, CASE) or _shoot_compare(args.out, CASE, Path(tmp)) or _shoot_savecase(args.out, Path(tmp))
        )


def _suite_runs(label: str, tmp: Path, subjects: tuple[str, ...]) -> list[Path]:
    """One run per subject of ``label`` as ``imagebench run --suite`` makes it (a suite of that case
    pinned under ``$IMAGEBENCH_SUITES``), so that ``imagebench compare`` can compare them."""
    from imagebench.cases import get_case
    from imagebench.executor import run_cases
    from imagebench.subjects import parse_subject
    from imagebench.suite.model import write_suite
    from imagebench.suite.record import RUN_INFO_KEY, SuiteRunInfo, conditions_now
    from imagebench.suite.resolve import pin_suite
    from imagebench.suite.sampling import assign

    case = get_case(label)
    manifest, problems = pin_suite("shots", "2026.11.0", [case])
    if manifest is None:
        raise SystemExit(f"make_screenshots: the suite did not pin: {problems}")
    write_suite(Path(os.environ["IMAGEBENCH_SUITES"]) / "shots.json", manifest)
    assignment = assign(manifest, "all", 0)
    info = SuiteRunInfo(requested="shots", assignment=assignment, conditions=conditions_now(samples=2, timeout=None, cases=[case]))
    extra = {RUN_INFO_KEY: info.model_dump(mode="json")}
    return [
        run_cases([case], parse_subject(spec), samples=2, out=tmp / "runs", progress=False, record_extra=extra).run_dir
        for spec in subjects
    ]


def _shoot_compare(out: Path, label: str, tmp: Path) -> int:
    """panel-compare.png: the reference and the baseline side by side, with compare's tables."""
    import napari
    from qtpy.QtWidgets import QApplication

    runs = _suite_runs(label, tmp, ("reference", "baseline"))
    out.mkdir(parents=True, exist_ok=True)
    viewer = napari.Viewer(title="napari: Imagebench", show=True)
    viewer.window._qt_window.resize(1500, 950)
    _, panel = viewer.window.add_plugin_dock_widget("napari-imagebench", "Imagebench")
    panel.setMinimumWidth(520)
    try:
        panel.tabs.setCurrentWidget(panel.compare_tab)
        panel.tabs.set_folded(False)
        for side, run in zip(("A", "B"), runs, strict=True):
            if not panel.compare_tab.pick_folder(side, run):
                print(f"make_screenshots: run {side} was refused: {panel.compare_tab.model.refused[side]}", file=sys.stderr)
                return 1
        panel.compare_tab.compare_case.setCurrentText(label)
        if not panel.compare_tab.show_side_by_side():
            print("make_screenshots: nothing to lay side by side", file=sys.stderr)
            return 1
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            QApplication.processEvents()
            time.sleep(0.02)
        _close_toasts()
        from PIL import Image

        path = out / "panel-compare.png"
        shot = Image.fromarray(viewer.screenshot(canvas_only=False, flash=False)[..., :3])
        shot.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    finally:
        viewer.close()
    return 0


def _shoot_savecase(out: Path, tmp: Path) -> int:
    """panel-savecase.png: an image and a Labels layer painted over it, saved as a case into a new tree."""
    import napari
    import numpy as np
    from PIL import Image
    from qtpy.QtWidgets import QApplication

    out.mkdir(parents=True, exist_ok=True)
    viewer = napari.Viewer(title="napari: Imagebench", show=True)
    viewer.window._qt_window.resize(1500, 950)
    _, panel = viewer.window.add_plugin_dock_widget("napari-imagebench", "Imagebench")
    panel.setMinimumWidth(520)
    try:
        labels = np.zeros((96, 128), np.int32)
        for label, (r, c, radius) in enumerate(((24, 30, 10), (60, 80, 14), (30, 100, 9)), start=1):
            rr, cc = np.ogrid[:96, :128]
            labels[(rr - r) ** 2 + (cc - c) ** 2 <= radius**2] = label
        rng = np.random.default_rng(3)
        viewer.add_image(((labels > 0) * 200.0 + rng.normal(20, 6, labels.shape)).astype(np.float32), name="nuclei")
        viewer.add_labels(labels, name="Labels", opacity=0.4)
        tab = panel.savecase_tab
        panel.tabs.setCurrentWidget(tab)
        panel.tabs.set_folded(False)
        tab.skill_edit.setText("my-skill")
        tab.case_edit.setText("three-nuclei")
        tab.tree_edit.setText(str(tmp / "my-tree"))
        tab.citation_edit.setText("my lab, 2026")
        tab.provenance_edit.setText("painted in napari over a synthetic field")
        if tab.save() is None:
            print(f"make_screenshots: the case was not saved: {tab.why_label.text()}", file=sys.stderr)
            return 1
        for _ in range(2):  # the canvas has its size once the dock is laid out: fit the image then
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                QApplication.processEvents()
                time.sleep(0.02)
            viewer.reset_view()
        _close_toasts()
        path = out / "panel-savecase.png"
        shot = Image.fromarray(viewer.screenshot(canvas_only=False, flash=False)[..., :3])
        shot.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    finally:
        viewer.close()
    return 0


def _shoot(out: Path, label: str) -> int:
    import napari
    import numpy as np
    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QApplication

    from napari_imagebench._canvas import remove_layers
    from napari_imagebench._model import INTERACTIVE

    out.mkdir(parents=True, exist_ok=True)
    viewer = napari.Viewer(title="napari: Imagebench", show=True)
    window = viewer.window._qt_window
    window.resize(1500, 950)
    _, panel = viewer.window.add_plugin_dock_widget("napari-imagebench", "Imagebench")
    panel.setMinimumWidth(520)

    def settle(seconds: float = 0.3) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            QApplication.processEvents()
            time.sleep(0.02)
        _close_toasts()

    def save(widget: object, name: str, width: int | None = WIDTH) -> None:
        settle()
        pixmap = widget.grab()  # type: ignore[attr-defined]
        if width is not None and pixmap.width() > width:
            pixmap = pixmap.scaledToWidth(width, Qt.SmoothTransformation)
        path = out / name
        _save_small(pixmap.toImage(), path)
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")

    try:
        settle(1.0)
        panel.select_case(label)
        panel.tabs.set_folded(False)  # the Detail page, unfolded: what the case asks and where its pixels come from
        save(panel, "panel-case.png")
        panel.tabs.set_folded(True)

        def wait(what: str) -> None:
            deadline = time.monotonic() + 120
            while panel.running and time.monotonic() < deadline:
                settle(0.05)
            if panel.running:
                raise SystemExit(f"make_screenshots: {what} did not finish in 120 s")

        panel.load(label)
        wait(f"loading {label}")
        if panel.model.loaded is None:
            print(f"make_screenshots: {label} could not be loaded: {panel.model.messages[-1].text}", file=sys.stderr)
            return 1
        save(window, "viewer-loaded.png")

        panel.subject_combo.setCurrentText("reference")
        panel.run()
        wait("the reference run")
        result = panel.score()
        if result is None:
            print(f"make_screenshots: scoring failed: {panel.model.messages[-1].text}", file=sys.stderr)
            return 1
        save(panel, "panel-scored.png")

        panel.view_artifacts()
        save(window, "viewer-artifacts.png", width=None)  # full size: thin coloured lines of a difference stay

        # You, at the viewer: a labels layer named after the leaving, painted by hand. Here it is
        # the reference's answer with every third nucleus left unpainted, as a hurried person might.
        panel.back_to_the_case()
        painted = np.array(viewer.layers[f"reference:{LEAVING}"].data)
        for value in np.unique(painted)[1::3]:
            painted[painted == value] = 0
        viewer.add_labels(painted, name=LEAVING)
        panel.subject_combo.setCurrentText(INTERACTIVE)
        if panel.score() is None:
            print(f"make_screenshots: the interactive score failed: {panel.model.messages[-1].text}", file=sys.stderr)
            return 1
        save(panel, "panel-interactive.png")

        # a skill bundle: its cases join the tree; one scored by the example solver moves its claim.
        # The painted layer goes first: napari on Mesa can crash drawing a Labels layer left when
        # another Labels layer below it was removed (napari/napari#8471).
        remove_layers(viewer, [viewer.layers[LEAVING]])
        sys.path.insert(0, str(ROOT / "examples" / "solvers"))
        if not panel.open_bundle(BUNDLE):
            print(f"make_screenshots: the bundle did not open: {panel.model.messages[-1].text}", file=sys.stderr)
            return 1
        panel.select_case(BUNDLE_CASE)
        panel.load(BUNDLE_CASE)
        wait(f"loading {BUNDLE_CASE}")
        panel.solver_edit.setText(SOLVER)
        panel.add_solver()
        panel.subject_combo.setCurrentText(SOLVER)
        panel.run()
        wait("the solver's run")
        if panel.score() is None:
            print(f"make_screenshots: scoring the bundle case failed: {panel.model.messages[-1].text}", file=sys.stderr)
            return 1
        panel.tabs.setCurrentIndex(panel.tabs.indexOf(panel.coverage_title.parentWidget()))
        panel.tabs.set_folded(False)  # the tabs start folded to their bar (a laptop screen); show the page
        save(panel, "panel-coverage.png")
        panel.tabs.set_folded(True)
        if not _serve_the_example_agent(panel, settle, wait):
            return 1
        save(panel, "panel-serve.png")
    finally:
        viewer.close()
    return 0


def _serve_the_example_agent(panel: object, settle: object, wait: object) -> bool:
    """Serve ``count-nuclei`` and connect the example agent with the command line the Serve pane
    shows, until the pane says it submitted (skipped, True, without the MCP SDK)."""
    import importlib.util
    import shlex
    import subprocess

    if importlib.util.find_spec("mcp") is None:
        print("make_screenshots: no MCP SDK: panel-serve.png not made", file=sys.stderr)
        return True
    label = "segment-nuclei/count-nuclei"
    panel.select_case(label)  # type: ignore[attr-defined]
    panel.load(label)  # type: ignore[attr-defined]
    wait(f"loading {label}")  # type: ignore[operator]
    if not panel.serve_agent():  # type: ignore[attr-defined]
        print(f"make_screenshots: serving failed: {panel.model.messages[-1].text}", file=sys.stderr)  # type: ignore[attr-defined]
        return False
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    agent = subprocess.run(
        shlex.split(panel.connect_edit.text()), env=env, capture_output=True, text=True, timeout=180, check=False  # type: ignore[attr-defined]
    )
    deadline = time.monotonic() + 10
    while not panel.submitted_label.isVisible() and time.monotonic() < deadline:  # type: ignore[attr-defined]
        settle(0.05)  # type: ignore[operator]
    if agent.returncode != 0 or not panel.submitted_label.isVisible():  # type: ignore[attr-defined]
        print(f"make_screenshots: the example agent did not submit: {agent.stderr[-500:]}", file=sys.stderr)
        return False
    return True


def _save_small(image: object, path: Path) -> None:
    """Write a QImage as a palette PNG (a UI screenshot needs few colours; the file stays small)."""
    import numpy as np
    from PIL import Image
    from qtpy.QtGui import QImage

    rgba = image.convertToFormat(QImage.Format_RGBA8888)  # type: ignore[attr-defined]
    ptr = rgba.constBits()
    ptr.setsize(rgba.height() * rgba.bytesPerLine())
    rows = np.frombuffer(ptr, np.uint8).reshape(rgba.height(), rgba.bytesPerLine())
    pixels = rows[:, : rgba.width() * 4].reshape(rgba.height(), rgba.width(), 4)[..., :3]
    # 256 colours, chosen by median cut over the whole shot: few enough to keep the PNGs small,
    # enough that a pane's few coloured pixels (a difference in PiYG) keep their colour
    Image.fromarray(np.ascontiguousarray(pixels)).quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(
        path, optimize=True
    )


def _close_toasts() -> None:
    """Hide napari's notification pop-ups so they do not cover the canvas in a screenshot."""
    from qtpy.QtWidgets import QApplication

    for widget in QApplication.topLevelWidgets() + [
        w for top in QApplication.topLevelWidgets() for w in top.findChildren(object)
    ]:
        if type(widget).__name__ == "NapariQtNotification":
            widget.hide()


if __name__ == "__main__":
    sys.exit(main())
