"""Work under way shows its seconds: the busy bar, napari's status bar and its activity dock."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("napari")

from napari.utils import progress  # noqa: E402
from qtpy.QtWidgets import QProgressBar  # noqa: E402

from napari_imagebench._busy import ACTIVITY_AFTER_S, Busy  # noqa: E402


def _seconds(line: str) -> float:
    found = re.search(r"(\d+\.\d) s$", line)
    assert found, line
    return float(found.group(1))


def test_the_seconds_move_while_work_runs_and_the_end_says_how_long(qtbot: Any) -> None:
    bar = QProgressBar()
    qtbot.addWidget(bar)
    said: list[str] = []
    busy = Busy(bar, said.append)
    busy.start("loading toy…")
    assert bar.maximum() == 0 and bar.isTextVisible()  # indeterminate

    def shown() -> list[Any]:
        return [p for p in progress._all_instances if p.desc.startswith("loading toy…")]

    assert not shown()  # a moment's work opens nothing in the activity dock
    qtbot.wait(700)  # the GUI thread is free, as while a worker loads
    assert bar.format().startswith("loading toy… ") and _seconds(bar.format()) >= 0.4
    assert not shown()
    qtbot.waitUntil(lambda: len(shown()) == 1, timeout=int(ACTIVITY_AFTER_S * 1000) + 2000)  # work that lasts has it
    ticks = [_seconds(line) for line in said]
    assert len(ticks) >= 3 and ticks == sorted(ticks) and ticks[-1] > ticks[0]
    assert busy.stop("loaded toy") >= ACTIVITY_AFTER_S
    assert re.fullmatch(r"loaded toy in \d+\.\d s", said[-1])
    assert not bar.isTextVisible() and bar.maximum() == 1
    assert not [p for p in progress._all_instances if p.desc.startswith("loading toy…")]  # closed


def test_load_run_and_score_tell_napari_s_status_bar(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    from helpers import make_toy_case

    from napari_imagebench._model import BenchModel
    from napari_imagebench._widget import BenchPanel

    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out"))
    viewer.window.add_dock_widget(panel)
    statuses: list[str] = []
    viewer.events.status.connect(lambda event: statuses.append(str(event.value)))
    assert panel.load("toy/rectangle")
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert any(s.startswith("loading toy/rectangle… ") for s in statuses)
    assert re.fullmatch(r"loading toy/rectangle: done in \d+\.\d s", viewer.status)
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert re.fullmatch(r"reference working: done in \d+\.\d s", viewer.status)
    assert panel.score() is not None
    assert any(s.startswith("scoring reference… ") for s in statuses)
    assert re.fullmatch(r"scored reference in \d+\.\d s", viewer.status)
