"""Where a run's units go: serially here, a local dask cluster, or an existing one.

:class:`Parallel` says which; :class:`Cluster` is the dask client of one run (never the
process's default client) and the local cluster it owns when it started one. While units run,
BLAS/OpenMP pools have one thread here as on every worker (:func:`unit_pools`), so a unit gives
the same numbers wherever it runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.subjects import Subject
FixtureMode = Literal["worker", "driver"]
FIXTURE_MODES: tuple[str, ...] = ("worker", "driver")
THREAD_ENV: dict[str, str] = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
CONNECT_TIMEOUT_S = 15.0
# What a local cluster's processes do on a clock rather than for a unit, made rare: the statistical
# profiler (a thread sampling every stack each 10 ms, for a dashboard a run never opens), the event
# loops' 20 ms tick check, the system monitor and the memory monitor. With dask's defaults an idle
# cluster of 2 workers and its scheduler kept 0.11 of a core busy, 0.02 with these (measured here).
IDLE_LESS: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
}


class ExecutorError(RuntimeError):
    """The units cannot be run as asked (a subject that cannot travel, an unreachable scheduler,
    tensor cases with no worker on this host). ``usage`` marks a problem with the request itself."""

    def __init__(self, message: str, *, usage: bool = True) -> None:
        super().__init__(message)
        self.usage = usage
        self.run_dir: Path | None = None  # set when a run had started: resume it

    def __str__(self) -> str:
        text = super().__str__()
        if self.run_dir is not None:
            text += f"; take it up again with: imagebench run --resume {self.run_dir}"
        return text


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Parallel:
    """Where units run: serially here (the default), on ``workers`` local processes, or on the
    cluster behind ``scheduler``. ``fixture_mode`` says where a case's fixture is built with
    workers: ``worker`` (a task; dask moves it to the workers that need it) or ``driver`` (built
    here and scattered). Tensor cases are always built and uploaded here."""

    workers: int | None = None
    scheduler: str | None = None
    fixture_mode: FixtureMode = "worker"
    prefetch: bool = True  # serial runs: build the next case's fixture in a helper process
    # ship the files curated cases read to the workers by digest (executor.shipping); None: with a scheduler
    ship: bool | None = None

    def __post_init__(self) -> None:
        if self.workers is not None and self.scheduler is not None:
            raise ExecutorError("give either workers (a local cluster) or a scheduler address, not both")
        if self.workers is not None and (isinstance(self.workers, bool) or int(self.workers) < 1):
            raise ExecutorError(f"workers must be at least 1, got {self.workers!r}")
        if self.scheduler is not None and "://" not in self.scheduler:
            raise ExecutorError(
                f"scheduler {self.scheduler!r} is not an address; expected tcp://HOST:PORT (what `dask scheduler` prints)"
            )
        if self.fixture_mode not in FIXTURE_MODES:
            raise ExecutorError(f"fixture_mode must be one of {FIXTURE_MODES}, got {self.fixture_mode!r}")

    @property
    def ships(self) -> bool:
        """Whether curated cases' files travel to the workers by digest (the workers of an existing
        cluster may share no file with this machine; a local cluster's do)."""
        return self.scheduler is not None if self.ship is None else bool(self.ship) and self.distributed

    @property
    def distributed(self) -> bool:
        return self.workers is not None or self.scheduler is not None

    def threads_for(self, subject: Subject) -> int | None:
        """``workers`` when they are threads here (a subject working in a child process needs no
        worker process of its own, :mod:`imagebench.executor.threads`), else None."""
        from imagebench.subjects import runs_out_of_process

        return self.workers if self.workers is not None and runs_out_of_process(subject) else None

    def describe_for(self, subject: Subject) -> str:
        """What ``--workers`` chose for ``subject``: threads driving child processes, or processes."""
        threads = self.threads_for(subject)
        if threads is not None:
            return f"{threads} thread(s) here, each driving one unit's child process (no dask cluster needed)"
        return self.describe()

    def describe(self) -> str:
        if self.workers is not None:
            return f"local cluster of {self.workers} worker(s)"
        if self.scheduler is not None:
            return f"dask scheduler {self.scheduler}"
        return "serial"


def subject_spec(subject: Subject) -> str:
    """The spec string that :func:`imagebench.subjects.parse_subject` turns back into ``subject``
    (its kind says: :meth:`~imagebench.subjects.SubjectKind.spec`).

    Raises :class:`ExecutorError` for a subject that no spec describes (a custom object, or a
    command that keeps its workspace): such a subject cannot be sent to a worker.
    """
    from imagebench.subjects import SubjectError, SubjectKind, spec_of

    try:
        return spec_of(subject)
    except SubjectError as exc:
        if isinstance(subject, SubjectKind):
            raise ExecutorError(str(exc)) from None
        raise ExecutorError(
            f"subject {getattr(subject, 'name', type(subject).__name__)!r} ({type(subject).__name__}) has no spec "
            "string, so it cannot be sent to a worker; use reference, nop, python:package.module:function or "
            "command:<shell command>"
        ) from None


# --------------------------------------------------------------------------- the cluster


def local_cluster(n_workers: int, modules: Sequence[str] = ()) -> Any:
    """A ``LocalCluster`` for a run: ``n_workers`` processes of one thread each, BLAS/OpenMP pools
    of one thread, bound to loopback, no dashboards, dask's own logs silenced (CRITICAL only:
    the run reports failures itself). Its workers are forked from one forkserver that imported
    the harness, the libraries and ``modules`` first (:mod:`imagebench.executor.forked`); the
    cluster's ``imagebench_forkserver`` says whether it started that forkserver (close it with
    :func:`close_local_cluster`)."""
    import dask

    from imagebench.executor.forked import forked_workers

    # dask sets MALLOC_TRIM_THRESHOLD_ in its workers to hand memory back to the OS; setting it
    # turns off glibc's adaptive mmap threshold, so large temporary arrays are mmap'd and faulted
    # in afresh each time (subjects took about 10 % longer on the built-in suite). A run's workers
    # live only as long as the run: leave it unset.
    environ = {
        k: v
        for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ") or {}).items()
        if k != "MALLOC_TRIM_THRESHOLD_"
    }
    settings = {"distributed.nanny.pre-spawn-environ": environ, **IDLE_LESS}
    with dask.config.set(settings), forked_workers(modules) as started:
        cluster = start_local_cluster(n_workers)
    cluster.imagebench_forkserver = started
    return cluster


def close_local_cluster(cluster: Any) -> None:
    """Close a cluster of :func:`local_cluster` and the forkserver it started (the next one starts
    its workers afresh)."""
    try:
        cluster.close()
    finally:
        if getattr(cluster, "imagebench_forkserver", False):
            from imagebench.executor.forked import stop_forkserver

            stop_forkserver()


def start_local_cluster(n_workers: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=int(n_workers),
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        worker_dashboard_address=None,
        # No dashboard; the scheduler's health endpoint on a free loopback port (never :8787).
        scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
        silence_logs=logging.CRITICAL,
        env=dict(THREAD_ENV),
    )


@contextlib.contextmanager
def quiet_distributed() -> Iterator[None]:
    # The run reports what goes wrong itself (a lost scheduler ends it with the --resume line).
    logger = logging.getLogger("distributed")
    before = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def unit_pools() -> Iterator[None]:
    """BLAS and OpenMP pools of one thread while units run, here as on every worker.

    A multi-threaded reduction (a dot product in ``numpy.linalg.norm``, say) sums in an order
    that depends on its thread count, and so does the last bit of its result: a unit must give
    the same numbers wherever it runs. Libraries already loaded are limited with threadpoolctl,
    ones loaded later by the environment variables (restored afterwards).
    """
    saved = {k: os.environ.get(k) for k in THREAD_ENV}
    os.environ.update(THREAD_ENV)
    limits: Any = None
    try:
        try:
            from threadpoolctl import threadpool_limits

            limits = threadpool_limits(limits=1)
        except ImportError:  # pragma: no cover - a dependency; without it only later loads are limited
            limits = None
        yield
    finally:
        if limits is not None:
            limits.restore_original_limits()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Cluster:
    """A dask client for one run (never the process's default client), and the local cluster it
    owns when it started one."""

    def __init__(self, client: Any, cluster: Any = None, *, address: str) -> None:
        self.client = client
        self.cluster = cluster
        self.address = address
        self._quiet: contextlib.AbstractContextManager[None] | None = None

    @classmethod
    def open(cls, parallel: Parallel, modules: Sequence[str] = ()) -> Cluster:
        """Connect to ``parallel``'s cluster, or start a local one whose workers have ``modules`` imported."""
        quiet = quiet_distributed()
        quiet.__enter__()
        try:
            from distributed import Client

            if parallel.workers is not None:
                cluster = local_cluster(parallel.workers, modules)
                try:
                    client = Client(cluster, set_as_default=False)
                except BaseException:
                    close_local_cluster(cluster)
                    raise
                out = cls(client, cluster, address=cluster.scheduler_address)
            else:
                assert parallel.scheduler is not None
                try:
                    client = Client(parallel.scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
                except (OSError, TimeoutError) as exc:
                    raise ExecutorError(
                        f"could not connect to the dask scheduler at {parallel.scheduler}: {type(exc).__name__}: {exc}"
                    ) from None
                out = cls(client, None, address=parallel.scheduler)
                if not client.scheduler_info().get("workers"):
                    try:
                        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
                    except (OSError, TimeoutError):
                        out.close()
                        raise ExecutorError(
                            f"the dask scheduler at {parallel.scheduler} has no workers (waited {CONNECT_TIMEOUT_S:g} s); "
                            "start some with `dask worker " + parallel.scheduler + " --nthreads 1`"
                        ) from None
        except BaseException:
            quiet.__exit__(None, None, None)
            raise
        out._quiet = quiet
        return out

    @property
    def n_workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def workers_on_this_host(self) -> list[str]:
        """Addresses of the workers running on this machine (the only ones that reach a loopback plane)."""
        if self.cluster is not None:
            return list(self.client.scheduler_info().get("workers", {}))
        here = this_host()
        return sorted(addr for addr, host in self.worker_hosts().items() if host == here)

    def worker_hosts(self) -> dict[str, str]:
        """``{worker address: its host name}``."""
        return dict(self.client.run(hostname))

    def cancel_subjects(self) -> None:
        """Kill the command subjects the workers are running (an interrupted run)."""
        with contextlib.suppress(Exception):
            self.client.run(kill_subject_groups, wait=True)

    def close(self) -> None:
        try:
            with contextlib.suppress(Exception):
                self.client.close()
            if self.cluster is not None:
                with contextlib.suppress(Exception):
                    close_local_cluster(self.cluster)
        finally:
            if self._quiet is not None:
                self._quiet.__exit__(None, None, None)
                self._quiet = None


def warm_imports(modules: Sequence[str]) -> float:
    """On a worker: import the run's modules (the runner, the cases' own) before its first unit
    needs them; best effort (a module that fails here fails the unit, where it is reported).
    Returns the seconds it took."""
    import importlib
    import time

    start = time.perf_counter()
    for name in ("imagebench.runs.runner", "imagebench.executor.workers", *modules):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    return time.perf_counter() - start


def case_modules(cases: Sequence[Case]) -> list[str]:
    """The modules a worker imports to unpickle and run ``cases``: where their verifiers,
    builders and solutions are defined (in the ``imagebench`` package or on the driver's path)."""
    found: set[str] = set()
    for case in cases:
        spec = case.fixture
        for obj in (case.verify, getattr(spec, "builder", None), case.reference, case.baseline):
            target = getattr(obj, "func", obj)  # a partial's function
            module = getattr(target, "__module__", None) or type(target).__module__
            if isinstance(module, str) and module not in ("builtins", "__main__", "functools"):
                found.add(module)
    return sorted(found)


class StartingCluster:
    """A local cluster started in the background (its workers importing the run's modules), so the
    driver writes the run's records meanwhile; the first use of it waits for the start, and a start
    that failed raises there."""

    def __init__(self, parallel: Parallel, modules: Sequence[str]) -> None:
        import threading
        import time

        self._started: Cluster | None = None
        self._error: BaseException | None = None
        self.warm_s: dict[str, float] = {}
        self.began = time.perf_counter()  # when the start began (benchmarks: start to first unit)
        self.ready_s: float | None = None  # seconds until its workers were up with their imports
        self._thread = threading.Thread(
            target=self._start, args=(parallel, tuple(modules)), name="imagebench-cluster-start", daemon=True
        )
        self._thread.start()

    def _start(self, parallel: Parallel, modules: tuple[str, ...]) -> None:
        try:
            cluster = Cluster.open(parallel, modules)
        except BaseException as exc:
            self._error = exc
            return
        self._started = cluster
        with contextlib.suppress(Exception):
            self.warm_s = dict(cluster.client.run(warm_imports, modules))
        import time

        self.ready_s = time.perf_counter() - self.began

    def started(self) -> Cluster:
        self._thread.join()
        if self._error is not None:
            raise ExecutorError(
                f"the local dask cluster did not start: {type(self._error).__name__}: {self._error}", usage=False
            ) from self._error
        assert self._started is not None
        return self._started

    def __getattr__(self, name: str) -> Any:  # client, cluster, address, n_workers, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.started(), name)

    def close(self) -> None:
        self._thread.join()
        if self._started is not None:
            self._started.close()


def cannot_pay(parallel: Parallel, units: int) -> str:
    """Why a local cluster of ``parallel.workers`` would cost more than it gives ('' when it pays):
    fewer than two cores this process may use (the workers would share one, after their start-up
    and imports), or a single unit (one worker would do it alone, after the same start-up)."""
    if parallel.workers is None:
        return ""  # an existing cluster's start-up is already paid
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    if cores < 2:
        return f"this process may use {cores} core: {parallel.workers} worker process(es) would share it"
    if units < 2:
        return f"{units} unit: no second worker would have work while the first starts and runs it"
    return ""


def paying(parallel: Parallel, subject: Subject, units: int) -> tuple[Parallel, str]:
    """``(parallel, "")``, or ``(serial, why)`` when the local cluster it asks for cannot pay
    (:func:`cannot_pay`); the results are the same either way, only the time differs."""
    if parallel.workers is None or parallel.threads_for(subject) is not None:
        return parallel, ""
    why = cannot_pay(parallel, units)
    return (Parallel(prefetch=parallel.prefetch), why) if why else (parallel, "")


def refuse_shared_network(parallel: Parallel, subject: Subject) -> None:
    """ExecutorError when ``subject`` would share the host's network (``--subject-network``) with the
    dask cluster its units run on: dask's scheduler and workers take any client's code and run it,
    unconfined, as the harness (a sandboxed agent CLI found the scheduler's port in ``/proc/net/tcp``
    and ran code on a worker, as root). Such a subject runs serially, or on ``--workers``, which are
    threads here for a subject in a child process."""
    policy = getattr(subject, "sandbox", None)
    if policy is None or not getattr(policy, "enabled", False) or not getattr(policy, "network", False):
        return
    raise ExecutorError(
        f"--subject-network gives the subject the host's network, and with it the {parallel.describe()}, "
        "which runs any code it is sent, unconfined, as the harness; run this subject without --scheduler "
        "(serially, or with --workers: threads here driving each sample's sandbox)"
    )


def open_cluster(
    parallel: Parallel, cases: Sequence[Case], subject: Subject, *, progress: bool = False
) -> Cluster | StartingCluster | None:
    """Check that the units can travel and connect; None for a serial run. Raises ExecutorError.
    A local cluster starts in the background (:class:`StartingCluster`); with ``progress`` a
    spinner on stderr says what is being connected to."""
    from imagebench.runs.runner import presents_tensor

    if not parallel.distributed or parallel.threads_for(subject) is not None:
        return None  # serial, or threads here driving child processes
    subject_spec(subject)  # refuse a subject that cannot travel before anything starts
    refuse_shared_network(parallel, subject)
    if parallel.workers is not None:
        return StartingCluster(parallel, case_modules(cases))
    from imagebench.runs.progress import spinner

    with spinner(f"connecting to the {parallel.describe()}", enabled=progress):
        cluster = Cluster.open(parallel)
    try:
        from imagebench.plane.process import PLANE_HOST_ENV, off_loopback

        tensor = [c.label for c in cases if presents_tensor(c)]
        # a plane off loopback (IMAGEBENCH_PLANE_HOST, every call with the run's token) is reached from any worker
        if tensor and parallel.scheduler is not None and not off_loopback() and not cluster.workers_on_this_host():
            hosts = sorted(set(cluster.worker_hosts().values()))
            raise ExecutorError(
                f"{len(tensor)} selected case(s) present a layer as tensor ({', '.join(tensor)}); the data plane "
                f"listens on this host's loopback only ({this_host()}) and no worker of {parallel.scheduler} "
                f"runs here (workers on: {', '.join(hosts) or 'none'}). Set {PLANE_HOST_ENV} to this host's "
                "address the workers reach (the plane then asks every call for the run's token), start a worker "
                "on this host, or deselect those cases with -k"
            )
    except BaseException:
        cluster.close()
        raise
    return cluster


# --------------------------------------------------------------------------- hosts and subjects on workers


def hostname() -> str:
    return socket.gethostname()


def this_host() -> str:
    """The driver's host name (what a worker's must equal to reach the loopback plane)."""
    return socket.gethostname()


def kill_subject_groups() -> int:
    """On a worker: kill every child process that leads its own process group (a command subject)."""
    import signal

    import psutil

    killed = 0
    for child in psutil.Process().children(recursive=False):
        try:
            if os.getpgid(child.pid) == child.pid:
                os.killpg(child.pid, signal.SIGKILL)
                killed += 1
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return killed


@contextlib.contextmanager
def cluster_for(parallel: Parallel, cases: Sequence[Case], subject: Subject, *, progress: bool) -> Iterator[Any]:
    """The cluster a run's units go to (None when they run here), closed when the run ends."""
    cluster = open_cluster(parallel, cases, subject, progress=progress)
    try:
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()
