"""A local cluster's worker processes forked from one pre-imported process, not spawned one by one.

dask's nannies start their worker processes with ``spawn`` by default: each is a fresh interpreter
that imports dask, numpy, scipy, scikit-image, the runner and the case modules before its first
unit (about 1.7 CPU-s each here). With ``distributed.worker.multiprocessing-method: forkserver``
they are forked instead from multiprocessing's forkserver, which :func:`forked_workers` starts
first, with :mod:`imagebench.executor.preload` as its one preload module: those imports are paid
once, by that process, while the driver writes the run's records; each worker is then a fork that
already has them (copy-on-write).

The forkserver is this process's own (multiprocessing keeps one per process). :func:`stop_forkserver`
stops it when the run's cluster closes, so that every run starts its workers afresh, with its own
case modules preloaded. The forkserver listens on a Unix socket that only this user can open,
in this process's private temporary folder; the units that run on these workers are in-process
subjects (a subject in a sandboxed child works from threads here, never on a cluster).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence

PRELOAD_MODULE = "imagebench.executor.preload"  # imported by name in the forkserver, never here
WARM_ENV = "IMAGEBENCH_WORKER_PRELOAD"  # {"modules": [...], "path": [...]}; set only for the forkserver's start
METHOD_KEY = "distributed.worker.multiprocessing-method"
NANNY_HASH_SEED = "6640"  # what distributed.nanny sets when the environment sets none


def forkserver_running() -> bool:
    """Whether this process's forkserver is up (best effort: multiprocessing keeps it private)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    return getattr(server, "_forkserver_pid", None) is not None


@contextlib.contextmanager
def forked_workers(modules: Sequence[str]) -> Iterator[bool]:
    """While it is open, dask's nannies fork their workers from this process's forkserver, which it
    starts now (when none runs) with ``modules`` preloaded (and one-thread pools: the preload sets
    them before numpy loads). Yields whether it started the forkserver (then the caller stops it
    with :func:`stop_forkserver` when its cluster closes)."""
    import dask
    from distributed.utils import get_mp_context

    with dask.config.set({METHOD_KEY: "forkserver"}):
        context = get_mp_context()  # dask sets its own preload list on its first call; ours replaces it
        context.set_forkserver_preload([PRELOAD_MODULE])
        started = not forkserver_running()
        if started:
            # dask's nannies give a spawned worker this hash seed; forked ones get the forkserver's
            seed = os.environ.get("PYTHONHASHSEED")
            start_forkserver(modules, {} if seed not in (None, "0") else {"PYTHONHASHSEED": NANNY_HASH_SEED})
        yield started


def start_forkserver(modules: Sequence[str], environ: Mapping[str, str]) -> None:
    """Start this process's forkserver (it inherits ``os.environ``: ``environ`` and the preload's
    module list are set in it for the start alone). Returns at once: the forkserver imports its
    preload while the caller goes on, and the first fork waits for it."""
    import sys
    from multiprocessing import forkserver

    # the driver's sys.path too: the forkserver is handed it but (Python 3.11) never applies it
    wanted = {**environ, WARM_ENV: json.dumps({"modules": list(modules), "path": list(sys.path)})}
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        forkserver.ensure_running()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def stop_forkserver() -> None:
    """Stop this process's forkserver (its forked workers live on until their cluster closes them)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)
    if stop is not None:
        with contextlib.suppress(Exception):
            stop()
