"""A local cluster that pays on two cores: units batched into tasks (planned before anything is
submitted, every sample in exactly one batch, smaller batches towards the end), a batch whose unit
raises keeps its other units, and workers forked from one forkserver that imported the run's
modules first (and that survives a module that fails to import)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import make_toy_case

from imagebench.executor import workers as wk
from imagebench.executor.batches import Batch, batch_size, plan_batches
from imagebench.executor.cluster import IDLE_LESS, close_local_cluster, local_cluster
from imagebench.executor.forked import WARM_ENV, forkserver_running

# --------------------------------------------------------------------------- the plan


def _builds(n_cases: int, samples: int) -> list[tuple[Any, None, list[int]]]:
    return [(make_toy_case(f"c{i}"), None, list(range(samples))) for i in range(n_cases)]


def _covered(batches: list[Batch], builds: list[tuple[Any, None, list[int]]]) -> None:
    seen: dict[int, list[int]] = {}
    for b in batches:
        assert b.case is builds[b.build][0]
        seen.setdefault(b.build, []).extend(b.samples)
    assert seen == {i: list(samples) for i, (_, _, samples) in enumerate(builds)}


def test_a_suite_of_small_cases_is_one_task_per_case_but_the_last_few() -> None:
    builds = _builds(43, 4)  # the built-in suite at --samples 4
    batches = plan_batches(builds, workers=2)
    _covered(batches, builds)
    whole = [b for b in batches if not b.shared]
    assert len(whole) >= 39 and all(len(b.samples) == 4 for b in whole)
    # the last builds are split (their fixture built once by a prepare task), down to single units
    assert batches[-1].shared and len(batches[-1].samples) == 1
    assert [len(b.samples) for b in batches[-4:]] == [1, 1, 1, 1]
    assert len(batches) < 172 / 3  # far fewer tasks than units


def test_a_long_case_is_split_in_shrinking_batches() -> None:
    builds = _builds(1, 64)
    batches = plan_batches(builds, workers=2)
    _covered(batches, builds)
    sizes = [len(b.samples) for b in batches]
    assert sizes[0] == 16 and sizes == sorted(sizes, reverse=True) and sizes[-1] == 1
    assert all(b.shared for b in batches)
    # one unit: one batch that builds its own fixture
    single = plan_batches(_builds(1, 1), workers=2)
    assert [(b.samples, b.shared) for b in single] == [((0,), False)]


def test_batch_sizes_are_bounded_and_workers_checked() -> None:
    assert batch_size(1000, 2) == 16  # never more than MOST_PER_BATCH
    assert batch_size(3, 8) == 1
    assert batch_size(40, 2) == 10
    with pytest.raises(ValueError, match="workers must be at least 1"):
        batch_size(10, 0)


# --------------------------------------------------------------------------- a batch on its worker


def test_a_unit_that_raises_in_a_batch_leaves_the_others_standing(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []

    def prepare(case: Any, seed: Any = None, definition: Any = None) -> str:
        assert definition == "the driver's key"  # the cache's key as the driver took it
        built.append(1)
        return "prepared"

    def unit(case: Any, spec: Any, n: int, prepared: Any, *rest: Any) -> wk.UnitReturn:
        assert prepared == "prepared"
        if n == 1:
            raise RuntimeError(f"unit {n} left no summary.json")
        return wk.UnitReturn(files={"summary.json": b"{}"}, worker_s=0.0, host="h", pid=1)

    monkeypatch.setattr(wk, "_prepare_task", prepare)
    monkeypatch.setattr(wk, "_unit_task", unit)
    spec = ("reference", None, False, False, None, None)
    out = wk._batch_task(make_toy_case(), spec, (0, 1, 2), None, None, None, definition="the driver's key")
    assert [type(r).__name__ for r in out] == ["UnitReturn", "UnitFailure", "UnitReturn"]
    assert out[1].error == "RuntimeError: unit 1 left no summary.json"  # type: ignore[union-attr]
    assert built == [1]  # built once, on the worker, for the whole batch
    # a batch given its fixture (a build split over several batches) builds nothing
    wk._batch_task(make_toy_case(), spec, (0,), "prepared", None, None)
    assert built == [1]


# --------------------------------------------------------------------------- forked workers


def test_workers_are_forked_from_one_process_that_imported_the_run_modules(tmp_path: Path) -> None:
    import dask
    from distributed import Client

    # a case module that fails to import (not with ImportError): the forkserver goes on without it
    (tmp_path / "imagebench_test_bad_module.py").write_text("raise RuntimeError('broken on import')\n")
    (tmp_path / "imagebench_test_good_module.py").write_text("VALUE = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        cluster = local_cluster(2, ["imagebench_test_bad_module", "imagebench_test_good_module"])
    finally:
        sys.path.remove(str(tmp_path))
    try:
        assert cluster.imagebench_forkserver and forkserver_running()
        with Client(cluster, set_as_default=False) as client:

            def look() -> dict[str, Any]:
                return {
                    "parent": os.getppid(),
                    "good": "imagebench_test_good_module" in sys.modules,
                    "bad": "imagebench_test_bad_module" in sys.modules,
                    "libraries": all(m in sys.modules for m in ("skimage.segmentation", "scipy.ndimage")),
                    "runner": "imagebench.runs.runner" in sys.modules,
                    "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
                    "warm_env": os.environ.get(WARM_ENV),
                    "profiler": dask.config.get("distributed.worker.profile.enabled"),
                    "tick": dask.config.get("distributed.admin.tick.interval"),
                }

            seen = list(client.run(look).values())
        assert len(seen) == 2
        parents = {s["parent"] for s in seen}
        assert len(parents) == 1 and os.getpid() not in parents  # one forkserver, not this process
        for s in seen:
            assert s["good"] and not s["bad"] and s["libraries"] and s["runner"]
            assert s["threads"] == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
            assert s["warm_env"] is None
            # nothing on a clock that a run never looks at: no profiler thread, a rare tick
            assert s["profiler"] is False and s["tick"] == IDLE_LESS["distributed.admin.tick.interval"]
        assert WARM_ENV not in os.environ  # set for the forkserver's start alone
    finally:
        close_local_cluster(cluster)
    assert not forkserver_running()  # the next run's workers start afresh
