"""Units of an out-of-process subject on threads of this process (``--workers N`` for commands).

A ``command:`` subject (or an isolated ``python:`` one) spends its unit in a child process, mostly
waiting: an agent that calls a model API, a solver that sleeps. Such a unit needs no Python
worker process of its own, and no dask cluster to start: N threads here each drive one unit's
child (its sandbox, its workspace, its time limit) while this thread builds the fixtures in order
and hands every finished unit to the sink. Fixtures are built once per case (or per sealed seed)
as in a serial run, with the same prefetch helper; the results are the same as a serial run's.
CPU-bound in-process subjects keep the dask processes (:mod:`imagebench.executor.workers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING

from imagebench.executor.serial import prepared_for

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.executor.planes import PlaneStarter
    from imagebench.executor.prefetch import Prefetcher
    from imagebench.executor.serial import Build
    from imagebench.executor.sink import Sink
    from imagebench.subjects import Subject
    from imagebench.usage import Budget

#: How many builds the prefetch helper is asked for ahead of the one being submitted.
_AHEAD = 2


def run_threaded(
    builds: Sequence[Build],
    subject: Subject,
    run_dir: Path,
    timeout: float | None,
    starter: PlaneStarter,
    sink: Sink,
    helper: Prefetcher | None,
    threads: int,
    budget: Budget | None = None,
) -> None:
    """Run every unit of ``builds`` on ``threads`` threads; the sink takes each as it finishes."""
    from imagebench.runs.runner import presents_tensor, run_unit

    sealed = any(seed is not None for _, seed, _ in builds)
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="imagebench-unit")
    pending: dict[Future, tuple[Case, int]] = {}

    def drain(block: bool) -> None:
        if not pending:
            return
        done, _ = wait(pending, timeout=None if block else 0, return_when=FIRST_COMPLETED)
        for fut in done:
            case, n = pending.pop(fut)
            sink.add(case, n, fut.result())  # run_unit never raises for what a unit does

    clean = False
    try:
        for i, (case, seed, samples) in enumerate(builds):
            if helper is not None:
                for ahead, ahead_seed, _ in builds[i + 1 : i + 1 + _AHEAD]:
                    helper.submit(ahead, ahead_seed)
            built = helper.take(case, seed) if helper is not None and i > 0 else None
            prepared = prepared_for(case, built, starter, seed)
            total = sink.build_s.get(case.label, 0.0) if sealed else 0.0
            sink.build_s[case.label] = total + prepared.build_s
            plane = starter.get()[0] if presents_tensor(case) else None
            for n in samples:
                fut = pool.submit(
                    run_unit,
                    case,
                    subject,
                    n,
                    run_dir,
                    fixture=prepared,
                    plane=plane,
                    timeout=timeout,
                    seed=seed,
                    budget=budget,
                )
                pending[fut] = (case, n)
            drain(block=False)
        while pending:
            drain(block=True)
        clean = True
    finally:
        # Interrupted: what has not started is cancelled, and every running command is ended now
        # (its turn raises KeyboardInterrupt in its thread: no summary for a unit cut short), so
        # the threads are joined in moments, not when their commands would have finished.
        # Finished: every thread is idle already.
        from imagebench.subjects.running import clear_interrupt, interrupt_subjects

        if not clean:
            interrupt_subjects()
        try:
            pool.shutdown(wait=True, cancel_futures=True)
        finally:
            if not clean:
                clear_interrupt()
            if helper is not None:
                helper.close()
