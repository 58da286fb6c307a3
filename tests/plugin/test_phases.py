"""One unit, three phases, three routes: the serial loop, the dask workers and the panel all go
through ``imagebench.runs.runner``'s ``open_unit``, ``work_unit`` and ``finish_unit``.

Each test patches one phase with a spy that marks the summaries it writes and checks that every
route's sample carries the mark: a route that repeated the phase instead of calling it would not.
No Qt: the panel's model is driven directly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import make_toy_case

from imagebench.executor import run_cases
from imagebench.runs import runner
from imagebench.subjects import parse_subject
from napari_imagebench._model import BenchModel

PHASES = ("open_unit", "work_unit", "finish_unit")


def _spy(monkeypatch: pytest.MonkeyPatch, phase: str) -> list[str]:
    """Wrap ``runner.<phase>``; every call records the case label it was given."""
    calls: list[str] = []
    real: Callable[..., Any] = getattr(runner, phase)

    def spy(*args: Any, **kwargs: Any) -> Any:
        first = args[0]
        calls.append(getattr(first, "label", None) or first.case.label)
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, phase, spy)
    return calls


def _serial(tmp_path: Path) -> None:
    result = run_cases([make_toy_case()], parse_subject("reference"), out=tmp_path / "serial", progress=False)
    assert result.passed


def _dask(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    # Workers in this process (threads), so the patched module is the one they run.
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        result = run_cases(
            [make_toy_case()],
            parse_subject("reference"),
            out=tmp_path / "dask",
            progress=False,
            scheduler=cluster.scheduler_address,
        )
    assert result.passed


def _panel(tmp_path: Path) -> None:
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "panel")
    model.load("toy/rectangle")
    job = model.prepare_run("reference")
    model.finish_run(job, job.work())
    assert model.score("reference").status == "ok"


@pytest.mark.parametrize("phase", PHASES)
def test_every_route_calls_the_patched_phase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str) -> None:
    routes = {"serial": _serial, "dask": _dask, "panel": _panel}
    for name, route in routes.items():
        calls = _spy(monkeypatch, phase)
        route(tmp_path)
        assert calls, f"the {name} route never called runner.{phase}"
        assert set(calls) == {"toy/rectangle"}
        monkeypatch.undo()


def test_a_phase_that_changes_the_result_changes_every_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch finish_unit to flag every sample: all three routes' summaries carry the flag."""
    real = runner.finish_unit

    def flagged(unit: Any, run: Any, **kwargs: Any) -> Any:
        kwargs["flags"] = [*kwargs.get("flags", ()), "patched-phase"]
        return real(unit, run, **kwargs)

    monkeypatch.setattr(runner, "finish_unit", flagged)
    _serial(tmp_path)
    _dask(tmp_path)
    _panel(tmp_path)
    summaries = sorted(tmp_path.rglob("sample-*/summary.json"))
    assert len(summaries) == 3
    for path in summaries:
        assert '"patched-phase"' in path.read_text(encoding="utf-8"), path
