"""Scale-out and harness overhead of the executor (imagebench.executor), medians against anchors.

1. scale: the built-in suite (every case of ``imagebench.cases.all_cases()``: 43 today), ``reference``
   subject, 4 samples per case. Anchor: the serial run.
   Measured: ``workers=2`` (a LocalCluster started and closed by the run, as ``--workers 2``
   does) and the same on a cluster already running (``scheduler=``). Results must be identical
   to the serial run, field by field, times aside. Target: ``--workers 2`` at least 1.5x faster
   (two cores: the ideal is 2x), the cluster started by the run (in the background, while the
   run's records are written).
2. per-unit overhead on the executor: for every unit of a distributed run, its wall time on the
   worker minus the time inside subject and verifier; what the driver spends taking a finished
   unit in (writing its files, journal line); and the scheduler round trip of a trivial task.
   Target: median under 50 ms.
3. fixture shipping: each case's fixture built once on a worker and moved by dask (``worker``),
   against built here and scattered (``driver``), on the running cluster.
(The serial harness overhead is measured by ``bench_overhead.py``.)

Usage: python benchmarks/bench_scale.py [--repeats N] [--samples N] [--workers N]
The machine's load is printed: on a shared machine the ratios are what to compare.
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
from typing import Any

SPEEDUP_TARGET = 1.5  # issue 29: --workers 2 on the CPU-bound suite, the cluster started per run
UNIT_OVERHEAD_TARGET_S = 0.050


def _suite() -> list[Any]:
    from imagebench import cases

    return cases.all_cases()


def _comparable(summary: Any) -> dict[str, Any]:
    """A sample summary without what the clock decides: its times and the measured wall of its usage."""
    out = summary.model_dump(exclude={"times"})
    if isinstance(out.get("usage"), dict):
        out["usage"].pop("wall_s", None)
    return out


def _differences(a: Any, b: Any) -> list[str]:
    out = []
    for label in a.samples:
        for x, y in zip(a.samples[label], b.samples.get(label, [])):
            if _comparable(x) != _comparable(y):
                out.append(f"{label} sample {x.sample}")
        if len(a.samples[label]) != len(b.samples.get(label, [])):
            out.append(f"{label}: sample counts differ")
    for label in a.summaries:
        x = a.summaries[label].model_dump()
        y = b.summaries[label].model_dump() if label in b.summaries else {"extra": {}}
        x["extra"].pop("build_s", None)
        y["extra"].pop("build_s", None)
        if x != y:
            out.append(f"{label} case summary")
    return out


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the prefetch helper, the plane)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def bench_scale(repeats: int, samples: int, workers: int, out: Path) -> bool:
    from distributed import Client

    from imagebench import executor as ex
    from imagebench.executor import run_cases
    from imagebench.executor.cluster import close_local_cluster
    from imagebench.subjects import ReferenceSubject

    suite = _suite()
    subject = ReferenceSubject()

    def serial() -> Any:
        return run_cases(suite, subject, samples=samples, out=out, progress=False)

    def local() -> Any:
        return run_cases(suite, subject, samples=samples, out=out, progress=False, workers=workers)

    serial()  # warm-up: one-off imports land here
    t_serial, t_local, t_warm = [], [], []
    cpu_serial: list[float] = []
    cpu_local: list[float] = []
    ready: list[float] = []  # the local cluster's start: until its workers were up, until the first unit came back
    first_unit: list[float] = []
    tasks = 0
    first_serial = first_local = None
    for _ in range(repeats):
        before = _cpu()
        t, r = _timed(serial)
        cpu_serial.append(_cpu() - before)
        t_serial.append(t)
        first_serial = first_serial or r
        before = _cpu()
        t, r = _timed(local)
        cpu_local.append(_cpu() - before)  # the workers and their forkserver are reaped children by now
        t_local.append(t)
        first_local = first_local or r
        stats = ex.LAST_STATS
        ready += [stats.ready_s] if stats.ready_s is not None else []
        first_unit += [stats.first_unit_s] if stats.first_unit_s is not None else []
        tasks = stats.tasks
    cluster = ex.local_cluster(workers)
    client = Client(cluster, set_as_default=False)
    try:
        address = cluster.scheduler_address

        def warm() -> Any:
            return run_cases(suite, subject, samples=samples, out=out, progress=False, scheduler=address)

        warm()  # the workers' imports
        warm_result = None
        unit_over: list[float] = []
        driver: list[float] = []
        for _ in range(repeats):
            t, warm_result = _timed(warm)
            t_warm.append(t)
            stats = ex.LAST_STATS
            unit_over += [w - i for w, i in zip(stats.worker_s, stats.inside_s)]
            driver += stats.driver_s
        pings = []
        for _ in range(50):
            start = time.perf_counter()
            client.submit(ex.ping, pure=False).result()
            pings.append(time.perf_counter() - start)

        modes: dict[str, list[float]] = {"worker": [], "driver": []}
        for _ in range(repeats):
            for mode in modes:
                t, _ = _timed(
                    lambda mode=mode: ex.run_cases(
                        suite,
                        subject,
                        samples=samples,
                        out=out,
                        progress=False,
                        parallel=ex.Parallel(scheduler=address, fixture_mode=mode),  # type: ignore[arg-type]
                    )
                )
                modes[mode].append(t)
    finally:
        client.close()
        close_local_cluster(cluster)

    diffs = _differences(first_serial, first_local) + _differences(first_serial, warm_result)
    s, lo, wa = _med(t_serial), _med(t_local), _med(t_warm)
    units = sum(len(v) for v in first_serial.samples.values())
    cpu = _med(cpu_serial)
    print(f"scale: {len(suite)} case(s) x {samples} sample(s) = {units} units, reference subject, median of {repeats}")
    print(
        f"  serial (anchor)                       {s:7.2f} s  1.00x  (used {cpu:.2f} CPU-s: {cpu / s:.2f} cores busy)"
    )
    print(
        f"  --workers {workers} (cluster started per run) {lo:7.2f} s  {s / lo:4.2f}x  target >= {SPEEDUP_TARGET}x"
        f"  (used {_med(cpu_local):.2f} CPU-s, {_med(cpu_local) / cpu:.2f}x serial's)"
    )
    print(f"  {workers} workers already running           {wa:7.2f} s  {s / wa:4.2f}x")
    print(
        f"  the cluster started per run: workers up {_med(ready):.2f} s, first unit back {_med(first_unit):.2f} s "
        f"after its start; {units} units in {tasks} tasks"
    )
    print(f"  results identical to serial: {'yes' if not diffs else 'NO: ' + ', '.join(diffs[:5])}")
    over, drv, ping = _med(unit_over), _med(driver), _med(pings)
    print(f"per-unit overhead on the executor (median over {len(unit_over)} units)")
    print(
        f"  on the worker, outside subject and verifier  {over * 1000:7.1f} ms  target < {UNIT_OVERHEAD_TARGET_S * 1000:.0f} ms"
    )
    print(f"  on the driver, taking a finished unit in     {drv * 1000:7.1f} ms")
    print(f"  scheduler round trip of a trivial task       {ping * 1000:7.1f} ms (median of 50)")
    mw, md = _med(modes["worker"]), _med(modes["driver"])
    print("fixture shipping on the running cluster (whole suite)")
    print(f"  built on a worker, moved by dask (anchor)    {mw:7.2f} s  1.00x")
    print(f"  built on the driver, scattered               {md:7.2f} s  {mw / md:4.2f}x")
    return not diffs and s / lo >= SPEEDUP_TARGET and over < UNIT_OVERHEAD_TARGET_S


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"machine: {os.cpu_count()} cpu(s), load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    out = Path(tempfile.mkdtemp(prefix="imagebench-bench-scale-"))
    try:
        ok_scale = bench_scale(max(1, args.repeats), args.samples, args.workers, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"scale targets {'met' if ok_scale else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
