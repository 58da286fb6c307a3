"""Running a run's units: serially with prefetch, or spread over dask.distributed workers; resuming.

A run is a list of ``(case, sample)`` units, each :func:`imagebench.runs.runner.run_unit`. This
package drives them and owns the run folder while it does, one concept per module:

- :mod:`~imagebench.executor.cluster`: where units run (:class:`Parallel`: serially here, a
  ``LocalCluster`` of N single-threaded processes, or the workers behind a scheduler address);
- :mod:`~imagebench.executor.prefetch`: the helper process that builds the next cases' fixtures;
- :mod:`~imagebench.executor.planes`: the run's data plane, started in the background, presented to workers;
- :mod:`~imagebench.executor.sink`: where finished units go (journal, progress, case summaries);
- :mod:`~imagebench.executor.serial` and :mod:`~imagebench.executor.workers`: the two loops;
- :mod:`~imagebench.executor.run`: a new run (:func:`run_cases`) and a resumed one (:func:`resume_run`).

Every run writes ``journal.jsonl`` and holds ``<run>/.lock`` while it writes; results are the
same whichever loop ran the units.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebench._lazy import lazy_package

# The public names are the imports of the TYPE_CHECKING block below: declared once.
__getattr__, __dir__, __all__ = lazy_package(__name__, __file__)

if TYPE_CHECKING:  # pragma: no cover
    from imagebench.executor.cluster import (
        THREAD_ENV,
        Cluster,
        ExecutorError,
        Parallel,
        cluster_for,
        local_cluster,
        open_cluster,
        subject_spec,
        unit_pools,
    )
    from imagebench.executor.run import (
        ResumeError,
        RunInterrupted,
        execute,
        resolve_cases,
        resume_run,
        run_cases,
    )
    from imagebench.executor.workers import LAST_STATS, DaskStats, ping
