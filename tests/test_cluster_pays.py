"""A local cluster that cannot pay is not started (the run is serial and says so), one that can
starts in the background, and a start that fails is reported as the executor's error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import make_toy_case

from imagebench.executor import cluster as cl
from imagebench.executor import run_cases
from imagebench.executor.cluster import ExecutorError, Parallel, cannot_pay, case_modules, paying
from imagebench.subjects import ReferenceSubject, parse_subject


def test_cannot_pay_names_the_one_core_and_the_single_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert "1 core" in cannot_pay(Parallel(workers=2), 100)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert cannot_pay(Parallel(workers=2), 100) == ""
    assert "1 unit" in cannot_pay(Parallel(workers=2), 1)
    # an existing cluster is already paid for; a serial run asks for nothing
    assert cannot_pay(Parallel(scheduler="tcp://127.0.0.1:1"), 1) == ""
    assert cannot_pay(Parallel(), 1) == ""


def test_paying_keeps_what_needs_no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    serial, why = paying(Parallel(workers=4, prefetch=False), ReferenceSubject(), 50)
    assert serial == Parallel(prefetch=False) and "1 core" in why
    command = parse_subject("command:true")  # threads here driving child processes: no cluster to pay for
    assert paying(Parallel(workers=4), command, 50) == (Parallel(workers=4), "")


def test_a_run_that_cannot_pay_runs_serially_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*a: object, **k: object) -> None:
        raise AssertionError("a cluster was started for a run that cannot pay for one")

    monkeypatch.setattr(cl, "StartingCluster", never)
    result = run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False, samples=1, workers=2)
    assert [s.status for s in result.samples["toy/rectangle"]] == ["ok"]
    record = json.loads((result.run_dir / "run.json").read_text())
    assert record["extra"]["executor"].startswith("serial, not the local cluster of 2 worker(s) asked: 1 unit")
    assert "running serially, not on the local cluster of 2 worker(s) asked" in capsys.readouterr().err


def test_a_cluster_that_fails_to_start_is_the_executors_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(parallel: Parallel, modules: object = ()) -> cl.Cluster:
        raise RuntimeError("Nanny failed to start")

    monkeypatch.setattr(cl.Cluster, "open", staticmethod(broken))
    with pytest.raises(ExecutorError, match="did not start: RuntimeError: Nanny failed to start") as info:
        run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False, samples=2, workers=2)
    assert info.value.run_dir is not None and "--resume" in str(info.value)


def test_the_modules_workers_warm_are_the_cases_own() -> None:
    from imagebench.cases import get_case

    modules = case_modules([get_case("segment-nuclei/synthetic-blobs"), make_toy_case()])
    assert "imagebench.cases.segmentation" in modules and "helpers" in modules
    assert cl.warm_imports(["no.such.module", "json"]) >= 0.0  # best effort: a failing import is the unit's to report
