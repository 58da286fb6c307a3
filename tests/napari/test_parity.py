"""Headless parity: the panel (Run reference + Score) and ``imagebench run`` leave the same records.

Both go through :func:`imagebench.runs.runner.finish_unit`; this checks it end to end, field by
field, with only the wall-clock times set aside.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import make_toy_case

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from imagebench import cases as builtin  # noqa: E402
from imagebench.executor import run_cases  # noqa: E402
from imagebench.subjects import ReferenceSubject  # noqa: E402
from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _assert_same(headless: dict[str, Any], panel: dict[str, Any], where: str) -> None:
    assert sorted(headless) == sorted(panel), where
    for key in headless:
        assert headless[key] == panel[key], f"{where}: field {key!r} differs"


@pytest.mark.parametrize("label", ["toy/rectangle", "segmentation-qc-metrics/annotation-vs-model"])
def test_panel_and_headless_runner_write_identical_summaries(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, label: str
) -> None:
    def cases() -> list[Any]:
        return [make_toy_case(), *builtin.all_cases()]

    case = next(c for c in cases() if c.label == label)
    headless = run_cases([case], ReferenceSubject(), out=tmp_path / "headless", progress=False)

    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(cases=cases, outcome_root=tmp_path / "panel"))
    viewer.window.add_dock_widget(panel)
    assert panel.load(label)
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    result = panel.score()
    assert result is not None and result.status == "ok"

    rel = Path("reference", *label.split("/"))
    h_sample, p_sample = headless.run_dir / rel / "sample-0", result.run_dir / rel / "sample-0"
    assert p_sample == result.sample_dir
    h, p = _json(h_sample / "summary.json"), _json(p_sample / "summary.json")
    assert set(h.pop("times")) == set(p.pop("times"))
    for usage in (h.get("usage"), p.get("usage")):  # the turn's measured wall time: a clock, like ``times``
        if isinstance(usage, dict):
            assert usage.pop("wall_s", None) is not None
    _assert_same(h, p, "sample summary.json")
    for name in h["artifacts"]:
        assert (h_sample / name).read_bytes() == (p_sample / name).read_bytes(), name

    hc, pc = _json(headless.run_dir / rel / "summary.json"), _json(result.run_dir / rel / "summary.json")
    hc["extra"].pop("build_s"), pc["extra"].pop("build_s")
    _assert_same(hc, pc, "case summary.json")

    hr, pr = _json(headless.run_dir / "run.json"), _json(result.run_dir / "run.json")
    for key in ("schema_version", "subject", "samples", "cases", "counts", "complete"):
        assert hr[key] == pr[key], f"run.json field {key!r} differs"
    assert hr["extra"]["verdicts"] == pr["extra"]["verdicts"]
