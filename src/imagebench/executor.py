"""Running a run's units: serially with prefetch, or spread over dask.distributed workers; resuming.

A run is a list of ``(case, sample)`` units (:func:`imagebench.runner.run_unit`). This module
drives them and owns the run folder while it does:

- **serial** (the default): one unit after another in this process. The data plane (when a case
  presents a tensor) starts in a background thread while array cases run; the next two cases'
  fixtures are built ahead in a helper process (never a thread: see ``_Prefetcher``) while the
  current case's samples run, and a tensor case's fixture is uploaded ahead when it is in.
- **workers** (``Parallel(workers=N)``, ``imagebench run --workers N``): a
  ``dask.distributed.LocalCluster`` of N single-threaded worker processes (BLAS/OpenMP pools of 1,
  no dashboard, quiet logs), started for the run and closed after it.
- **scheduler** (``Parallel(scheduler="tcp://HOST:PORT")``): the workers of an existing cluster.

With workers, each case's fixture is built once on a worker (a ``prepare`` task; dask moves it to
the workers that run the case's samples) and each unit runs on a worker in a private temporary
folder. The worker sends the unit's files back and the driver writes them into the run folder,
``summary.json`` last and atomically, so workers need no shared file system and the driver alone
writes the run folder. The subject travels as its spec string and is parsed on the worker.

Tensor cases: the run still has one data plane, started by the driver, which uploads each tensor
fixture once; workers reach it by URL. The plane listens on loopback only, so tensor units are
pinned to workers on the driver's host; when a scheduler has none there, the run is refused
before anything is written (deselect those cases with ``-k`` or start a worker on this host).

While units run, BLAS/OpenMP pools have one thread here as on every worker (:func:`unit_pools`),
so a unit gives the same numbers wherever it runs.

Every run writes ``journal.jsonl`` (:mod:`imagebench.journal`) and holds ``<run>/.lock`` while it
writes. :func:`resume_run` re-reads ``run.json``, keeps every unit with a complete, valid summary,
runs the rest and rewrites the case summaries and ``run.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from imagebench.case import Case
    from imagebench.fixture import Fixture
    from imagebench.journal import Journal, Scan
    from imagebench.records import CaseSummary, RunRecord, SampleSummary
    from imagebench.runner import Plane, PreparedFixture, RunResult
    from imagebench.subjects import Subject

FixtureMode = Literal["worker", "driver"]
FIXTURE_MODES: tuple[str, ...] = ("worker", "driver")
THREAD_ENV: dict[str, str] = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
CONNECT_TIMEOUT_S = 15.0
# record.extra keys a run rewrites at its end (a resume drops the stale ones first)
_END_KEYS = ("verdicts", "passed", "interrupted")


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


class ResumeError(ValueError):
    """A run folder cannot be resumed (names the file, the field and what was expected)."""


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
    def distributed(self) -> bool:
        return self.workers is not None or self.scheduler is not None

    def describe(self) -> str:
        if self.workers is not None:
            return f"local cluster of {self.workers} worker(s)"
        if self.scheduler is not None:
            return f"dask scheduler {self.scheduler}"
        return "serial"


def subject_spec(subject: Subject) -> str:
    """The spec string that :func:`imagebench.subjects.parse_subject` turns back into ``subject``.

    Raises :class:`ExecutorError` for a subject that no spec describes (a custom object, or a
    command that keeps its workspace): such a subject cannot be sent to a worker.
    """
    from imagebench.subjects import (
        CommandSubject,
        NopSubject,
        PythonSubject,
        ReferenceSubject,
    )

    if isinstance(subject, ReferenceSubject):
        return "reference"
    if isinstance(subject, NopSubject):
        return "nop"
    if isinstance(subject, PythonSubject):
        return f"python:{subject.target}"
    if isinstance(subject, CommandSubject):
        if subject.keep_workspace:
            raise ExecutorError(
                "a command subject that keeps its workspace cannot run on workers (the workspace would stay on the worker)"
            )
        return f"command:{subject.command}"
    raise ExecutorError(
        f"subject {getattr(subject, 'name', type(subject).__name__)!r} ({type(subject).__name__}) has no spec string, so "
        "it cannot be sent to a worker; use reference, nop, python:package.module:function or command:<shell command>"
    )


# --------------------------------------------------------------------------- the cluster


def local_cluster(n_workers: int) -> Any:
    """A ``LocalCluster`` for a run: ``n_workers`` processes of one thread each, BLAS/OpenMP pools
    of one thread, bound to loopback, no dashboards, dask's own logs silenced (CRITICAL only:
    the run reports failures itself)."""
    import dask

    # dask sets MALLOC_TRIM_THRESHOLD_ in its workers to hand memory back to the OS; setting it
    # turns off glibc's adaptive mmap threshold, so large temporary arrays are mmap'd and faulted
    # in afresh each time (subjects took about 10 % longer on the built-in suite). A run's workers
    # live only as long as the run: leave it unset.
    environ = {
        k: v for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ") or {}).items()
        if k != "MALLOC_TRIM_THRESHOLD_"
    }
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return _start_local_cluster(n_workers)


def _start_local_cluster(n_workers: int) -> Any:
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
def _quiet_distributed() -> Iterator[None]:
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
    def open(cls, parallel: Parallel) -> Cluster:
        quiet = _quiet_distributed()
        quiet.__enter__()
        try:
            from distributed import Client

            if parallel.workers is not None:
                cluster = local_cluster(parallel.workers)
                try:
                    client = Client(cluster, set_as_default=False)
                except BaseException:
                    cluster.close()
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
        here = _this_host()
        return sorted(addr for addr, host in self.worker_hosts().items() if host == here)

    def worker_hosts(self) -> dict[str, str]:
        """``{worker address: its host name}``."""
        return dict(self.client.run(_hostname))

    def cancel_subjects(self) -> None:
        """Kill the command subjects the workers are running (an interrupted run)."""
        with contextlib.suppress(Exception):
            self.client.run(_kill_subject_groups, wait=True)

    def close(self) -> None:
        try:
            with contextlib.suppress(Exception):
                self.client.close()
            if self.cluster is not None:
                with contextlib.suppress(Exception):
                    self.cluster.close()
        finally:
            if self._quiet is not None:
                self._quiet.__exit__(None, None, None)
                self._quiet = None


def open_cluster(
    parallel: Parallel, cases: Sequence[Case], subject: Subject, *, progress: bool = False
) -> Cluster | None:
    """Check that the units can travel and connect; None for a serial run. Raises ExecutorError.
    With ``progress`` a spinner on stderr says what is starting."""
    from imagebench.runner import presents_tensor

    if not parallel.distributed:
        return None
    subject_spec(subject)  # refuse a subject that cannot travel before anything starts
    if progress:
        from rich.console import Console

        what = "starting" if parallel.workers is not None else "connecting to"
        with Console(stderr=True).status(f"{what} the {parallel.describe()}"):
            cluster = Cluster.open(parallel)
    else:
        cluster = Cluster.open(parallel)
    try:
        tensor = [c.label for c in cases if presents_tensor(c)]
        if tensor and parallel.scheduler is not None and not cluster.workers_on_this_host():
            hosts = sorted(set(cluster.worker_hosts().values()))
            raise ExecutorError(
                f"{len(tensor)} selected case(s) present a layer as tensor ({', '.join(tensor)}); the data plane "
                f"listens on this host's loopback only ({_this_host()}) and no worker of {parallel.scheduler} "
                f"runs here (workers on: {', '.join(hosts) or 'none'}). Start a worker on this host, or deselect "
                "those cases with -k"
            )
    except BaseException:
        cluster.close()
        raise
    return cluster


# --------------------------------------------------------------------------- what runs on a worker


def _hostname() -> str:
    return socket.gethostname()


def _this_host() -> str:
    """The driver's host name (what a worker's must equal to reach the loopback plane)."""
    return socket.gethostname()


@functools.lru_cache(maxsize=32)
def _worker_subject(spec: str) -> Subject:
    from imagebench.subjects import parse_subject

    return parse_subject(spec)


@dataclass
class UnitReturn:
    """What a worker sends back for one unit: its files (``summary.json`` among them) and timings."""

    files: dict[str, bytes]
    worker_s: float
    host: str
    pid: int


def _prepare_task(case: Case) -> PreparedFixture:
    from imagebench.runner import prepare_fixture

    with unit_pools():
        return prepare_fixture(case, plane=None)


def _unit_task(
    case: Case,
    spec: str,
    sample: int,
    prepared: PreparedFixture,
    plane: PresentedPlane | None,
    timeout: float | None,
) -> UnitReturn:
    """Run one unit on a worker in a private folder and return the files it wrote."""
    import dask

    from imagebench.runner import run_unit, sample_dir

    start = time.perf_counter()
    subject = _worker_subject(spec)
    tmp = Path(tempfile.mkdtemp(prefix="imagebench-unit-"))
    try:
        # A subject's own dask computations stay in its process (never the cluster it runs on).
        with dask.config.set(scheduler="threads"), unit_pools():
            run_unit(case, subject, sample, tmp, fixture=prepared, plane=plane, timeout=timeout)
        folder = sample_dir(tmp, subject.name, case, sample)
        files = {
            p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if "summary.json" not in files:
        raise RuntimeError(f"unit {case.label} sample {sample} left no summary.json")
    return UnitReturn(files=files, worker_s=time.perf_counter() - start, host=socket.gethostname(), pid=os.getpid())


def _ping() -> float:
    return time.perf_counter()


def _kill_subject_groups() -> int:
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


@dataclass(frozen=True)
class PresentedPlane:
    """The run's plane as a worker sees it for one case: its URL and the ids of the fixture the
    driver uploaded (with a fingerprint of each stored corner, to check after each sample).

    ``error`` replays an upload that failed on the driver, so the sample ends exactly as it
    would have serially (``harness-error`` with the same reason).
    """

    url: str
    ids: Mapping[str, str]
    fingerprints: Mapping[str, str]
    error: tuple[str, str] | None = None

    @property
    def client(self) -> Any:
        from imagebench.plane.client import Client

        return Client(self.url)

    def present(self, case: Case, fixture: Fixture) -> dict[str, str]:
        if self.error is not None:
            name, message = self.error
            raise type(name, (Exception,), {})(message)
        return dict(self.ids)

    def after_sample(self, case: Case, fixture: Fixture) -> list[str]:
        from imagebench.plane.process import OVERWRITTEN_FLAG

        return [OVERWRITTEN_FLAG] if _changed(self.client, self.ids, self.fingerprints) else []


def _corner(client: Any, sid: str) -> str:
    from imagebench.plane.process import _fingerprint

    ndim = len(client.describe(sid)["shape"])
    return _fingerprint(client.read_chunk(sid, (0,) * ndim))


def _changed(client: Any, ids: Mapping[str, str], fingerprints: Mapping[str, str]) -> list[str]:
    changed = []
    for name, sid in ids.items():
        try:
            now = _corner(client, sid)
        except Exception:  # unreadable or gone counts as changed
            now = ""
        if now != fingerprints.get(name):
            changed.append(name)
    return changed


def _present_on_driver(plane: Plane, case: Case, fixture: Fixture) -> PresentedPlane:
    try:
        ids = dict(plane.present(case, fixture))
    except Exception as exc:
        return PresentedPlane(plane.url, {}, {}, error=(type(exc).__name__, str(exc)))
    client = plane.client
    return PresentedPlane(plane.url, ids, {name: _corner(client, sid) for name, sid in ids.items()})


# --------------------------------------------------------------------------- the data plane, in the background


class _PlaneStarter:
    """The run's plane: the caller's, or one started in a background thread when first needed."""

    def __init__(self, plane: Plane | None, needed: bool) -> None:
        self._plane: Any = plane
        self._reason = ""
        self.owned = plane is None and needed
        self._thread: threading.Thread | None = None
        self._closer: threading.Thread | None = None
        if self.owned:
            # Its modules (pyarrow, zarr) are imported on this thread first: the background thread
            # then only spawns the server and waits for it, importing nothing a subject might.
            with contextlib.suppress(ImportError):
                import imagebench.plane.client
                import imagebench.plane.process  # noqa: F401
            self._thread = threading.Thread(target=self._start, name="imagebench-plane-start", daemon=True)
            self._thread.start()

    def _start(self) -> None:
        from imagebench.plane import RunPlane

        try:
            self._plane, self._reason = RunPlane.try_start()
        except Exception as exc:  # try_start answers PlaneUnavailable itself; anything else is a reason too
            self._plane, self._reason = None, f"{type(exc).__name__}: {exc}"

    def ready(self) -> Any:
        """The plane when it is up, without waiting; None while it starts (or when it cannot)."""
        if self._thread is not None and self._thread.is_alive():
            return None
        return self._plane

    def get(self) -> tuple[Any, str]:
        """``(plane, "")``, or ``(None, reason)``; waits for a start in progress."""
        if self._thread is not None:
            self._thread.join()
        return self._plane, self._reason

    def close_soon(self) -> None:
        """Stop an owned plane in the background (its last tensor case is done)."""
        if not self.owned or self._closer is not None:
            return
        plane, _ = self.get()
        if plane is not None:
            self._closer = threading.Thread(target=plane.close, name="imagebench-plane-stop", daemon=True)
            self._closer.start()

    def close(self) -> None:
        if not self.owned:
            return
        plane, _ = self.get()
        if self._closer is not None:
            self._closer.join()
        if plane is not None:
            plane.close()  # idempotent


# --------------------------------------------------------------------------- what finished units feed


class _Sink:
    """Takes each finished unit: its journal line (after its summary is on disk), ``on_sample``, the
    progress bar, and each case's summary as soon as all of its samples are in."""

    def __init__(
        self,
        run_dir: Path,
        subject_name: str,
        cases: Sequence[Case],
        units: Mapping[str, int],
        journal: Journal,
        on_sample: Callable[[SampleSummary], None] | None,
        bar: Any,
        task: Any,
    ) -> None:
        self.run_dir = run_dir
        self.subject_name = subject_name
        self.cases = {c.label: c for c in cases}
        self.units = units
        self.journal = journal
        self.on_sample = on_sample
        self.bar, self.task = bar, task
        self.collected: dict[str, dict[int, SampleSummary]] = {c.label: {} for c in cases}
        self.build_s: dict[str, float] = {}
        self.summaries: dict[str, CaseSummary] = {}

    def keep(self, label: str, sample: int, summary: SampleSummary) -> None:
        """A unit done by an earlier pass (resume): counted, not announced."""
        self.collected[label][sample] = summary

    def add(self, case: Case, sample: int, summary: SampleSummary, data: bytes | None = None) -> None:
        from imagebench.runner import sample_dir

        path = sample_dir(self.run_dir, self.subject_name, case, sample) / "summary.json"
        if data is None:
            data = path.read_bytes()
        self.journal.unit(self.run_dir, path, summary, data)
        self.collected[case.label][sample] = summary
        if self.on_sample is not None:
            self.on_sample(summary)
        if self.bar is not None:
            self.bar.update(self.task, description=f"{case.label} #{sample}")
            self.bar.advance(self.task)
        self.maybe_finish(case)

    def complete(self, label: str) -> bool:
        return len(self.collected[label]) == self.units[label]

    def samples_of(self, label: str) -> list[SampleSummary]:
        got = self.collected[label]
        return [got[n] for n in range(self.units[label])]

    def maybe_finish(self, case: Case) -> None:
        from imagebench.records import write_record
        from imagebench.runner import case_dir, summarize_case

        if case.label in self.summaries or not self.complete(case.label):
            return
        samples = self.samples_of(case.label)
        build_s = self.build_s.get(case.label)
        if build_s is None:  # every unit came from an earlier pass: its recorded build time
            build_s = float(samples[0].times.get("build_s", 0.0)) if samples else 0.0
        cs = summarize_case(case, self.subject_name, samples, build_s)
        self.summaries[case.label] = cs
        write_record(case_dir(self.run_dir, self.subject_name, case) / "summary.json", cs)


# --------------------------------------------------------------------------- serial, with prefetch

# Why a helper *process* builds fixtures ahead, not a thread: builders and subjects import
# lazily (scipy, scikit-image, ...), and two threads importing a package with circular imports
# at the same time can hand one of them a half-initialised module (CPython accepts a partially
# initialised module rather than deadlock). A subject's result must never depend on that race.
# A process shares no imports, no GIL, and gives back exactly what a build here would.

_ANY_PLANE: Any = object()  # lets prepare_fixture build a tensor case's fixture; the plane is checked here


def _frame_write(stream: Any, payload: bytes) -> None:
    stream.write(len(payload).to_bytes(8, "big"))
    stream.write(payload)
    stream.flush()


def _frame_read(stream: Any) -> bytes | None:
    head = stream.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "big")
    data = stream.read(size)
    if len(data) < size:
        return None
    return data


def _prefetch_main() -> None:
    """The helper process: read pickled cases on stdin, answer pickled PreparedFixtures on stdout."""
    import pickle

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything a builder prints must not corrupt the frames
    head = _frame_read(stdin)
    if head is None:
        return
    for entry in reversed(pickle.loads(head)):  # the driver's sys.path, so cases import the same way
        if entry not in sys.path:
            sys.path.insert(0, entry)
    from imagebench.runner import prepare_fixture

    while True:
        data = _frame_read(stdin)
        if data is None:
            return
        try:
            case = pickle.loads(data)
            prepared = prepare_fixture(case, plane=_ANY_PLANE)
            answer = pickle.dumps(("ok", prepared), protocol=5)
        except Exception as exc:  # the driver builds it itself
            answer = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"), protocol=5)
        try:
            _frame_write(stdout, answer)
        except OSError:  # the run is gone (stopped or killed): so is the reason to build
            return


class _Prefetcher:
    """Builds upcoming cases' fixtures in one helper process while this one runs samples.

    :meth:`submit` queues a case; :meth:`take` returns its :class:`PreparedFixture`, or None when
    the helper could not build it (it could not be pickled, the helper failed): then the caller
    builds it here, so the result is always the one a serial build gives.
    """

    def __init__(self) -> None:
        import subprocess

        self._lock = threading.Lock()
        self._answers: dict[str, Future[bytes | None]] = {}
        self._order: list[Future[bytes | None]] = []  # answers still to come, in the order asked
        self._broken = False
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import imagebench.executor as e; e._prefetch_main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **THREAD_ENV},  # builds as on a worker (see unit_pools)
            start_new_session=True,  # a terminal's Ctrl-C reaches the run, which stops the helper in order
        )
        import pickle

        assert self.proc.stdin is not None
        _frame_write(self.proc.stdin, pickle.dumps(list(sys.path)))
        self._reader = threading.Thread(target=self._read, name="imagebench-prefetch-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            try:
                data = _frame_read(self.proc.stdout)
            except (OSError, ValueError):
                data = None
            with self._lock:
                if data is None or not self._order:
                    self._broken = True
                    for fut in self._order:
                        fut.set_result(None)
                    self._order.clear()
                    return
                self._order.pop(0).set_result(data)

    def submit(self, case: Case) -> None:
        import cloudpickle

        with self._lock:
            if self._broken or case.label in self._answers:
                return
            try:
                payload = cloudpickle.dumps(case, protocol=5)
            except Exception:
                return  # not picklable: take() answers None and the case is built here
            fut: Future[bytes | None] = Future()
            self._answers[case.label] = fut
            self._order.append(fut)
            try:
                assert self.proc.stdin is not None
                _frame_write(self.proc.stdin, payload)
            except (OSError, ValueError):
                self._broken = True
                self._order.remove(fut)
                fut.set_result(None)

    def ready(self, case: Case) -> bool:
        """Whether the helper's answer for ``case`` is in (so :meth:`take` will not wait)."""
        with self._lock:
            fut = self._answers.get(case.label)
        return fut is not None and fut.done()

    def take(self, case: Case) -> PreparedFixture | None:
        import pickle

        with self._lock:
            fut = self._answers.pop(case.label, None)
        if fut is None:
            return None
        data = fut.result()
        if data is None:
            return None
        try:
            kind, value = pickle.loads(data)  # here, on the caller's thread: its imports happen here too
        except Exception:
            return None
        return value if kind == "ok" else None

    def close(self) -> None:
        """Stop the helper now (whatever it is still building is not needed)."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def _prepared(case: Case, built: PreparedFixture | None, starter: _PlaneStarter) -> PreparedFixture:
    """``case``'s PreparedFixture: the helper's build when there is one, else built here; a tensor
    case with no plane is skipped with the plane's reason, as a serial run does."""
    from imagebench.runner import (
        TENSOR_SKIP_REASON,
        PreparedFixture,
        prepare_fixture,
        presents_tensor,
    )

    if presents_tensor(case):
        plane, reason = starter.get()
        if plane is None:
            return PreparedFixture(None, "skipped", f"{TENSOR_SKIP_REASON}: {reason}" if reason else TENSOR_SKIP_REASON)
    if built is not None:
        return built
    return prepare_fixture(case, plane=_ANY_PLANE)


PREFETCH_DEPTH = 2  # cases built ahead of the one running


def _start_prefetch(order: Sequence[Case], enabled: bool) -> _Prefetcher | None:
    """The helper for a serial pass, already asked for the cases after the first (which is built
    here at once: a fresh helper still has its imports to do)."""
    if not enabled or len(order) < 2:
        return None
    try:
        helper = _Prefetcher()
    except OSError:
        return None
    for case in order[1 : 1 + PREFETCH_DEPTH]:
        helper.submit(case)
    return helper


def _run_serial(
    order: Sequence[Case],
    todo: Mapping[str, list[int]],
    subject: Subject,
    run_dir: Path,
    timeout: float | None,
    starter: _PlaneStarter,
    sink: _Sink,
    helper: _Prefetcher | None,
) -> None:
    import numpy as np

    from imagebench.runner import presents_tensor, run_unit

    last_tensor = max((i for i, c in enumerate(order) if presents_tensor(c)), default=-1)
    early: dict[str, PreparedFixture | None] = {}  # taken from the helper ahead of their turn
    uploads: dict[str, threading.Thread] = {}

    def upload_ahead(nxt: Case) -> None:
        """The next case presents tensors and its fixture is in: upload it while this case runs."""
        plane = starter.ready()
        if helper is None or plane is None or not presents_tensor(nxt) or not helper.ready(nxt):
            return
        built = early[nxt.label] = helper.take(nxt)  # unpickled here, on this thread
        if built is None or built.fixture is None:
            return
        data = built.fixture.data
        if not all(type(data.get(layer.key)) is np.ndarray for layer in nxt.layers if layer.presentation == "tensor"):
            return  # a lazy array would import dask on that thread: run_unit uploads it instead

        def upload() -> None:
            with contextlib.suppress(Exception):  # run_unit presents again and reports a failure itself
                plane.present(nxt, built.fixture)

        # Only the plane's client runs there; its modules were imported on this thread (_PlaneStarter).
        uploads[nxt.label] = threading.Thread(target=upload, name="imagebench-plane-upload", daemon=True)
        uploads[nxt.label].start()

    try:
        for i, case in enumerate(order):
            if helper is not None:
                for ahead in order[i + 1 : i + 1 + PREFETCH_DEPTH]:
                    helper.submit(ahead)  # built there while this case's samples run (a no-op when asked before)
            if sink.bar is not None:
                sink.bar.update(sink.task, description=case.label)
            if case.label in early:
                built = early.pop(case.label)
            else:
                built = helper.take(case) if helper is not None and i > 0 else None
            prepared = _prepared(case, built, starter)
            sink.build_s[case.label] = prepared.build_s
            if case.label in uploads:
                uploads.pop(case.label).join()  # run_unit then finds the upload done
            if i + 1 < len(order):
                upload_ahead(order[i + 1])
            plane = starter.get()[0] if presents_tensor(case) else None
            for n in todo[case.label]:
                summary = run_unit(case, subject, n, run_dir, fixture=prepared, plane=plane, timeout=timeout)
                sink.add(case, n, summary)
            if i == last_tensor:
                starter.close_soon()
    finally:
        if helper is not None:
            helper.close()  # nothing it still builds is needed (idempotent; execute closes it too)


# --------------------------------------------------------------------------- on dask workers


def _write_unit_files(folder: Path, files: Mapping[str, bytes]) -> bytes:
    """Write a unit's files into its sample folder, ``summary.json`` last and atomically."""
    from imagebench.records import atomic_write_text

    if folder.exists():
        shutil.rmtree(folder)  # what an interrupted attempt left
    folder.mkdir(parents=True)
    for rel, data in files.items():
        if rel == "summary.json":
            continue
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    data = files["summary.json"]
    atomic_write_text(folder / "summary.json", data.decode("utf-8"))
    return data


@dataclass
class DaskStats:
    """Per-unit timings of the last distributed run (for benchmarks): seconds each unit spent on its
    worker in total and inside its subject and verifier, and what the driver spent taking it in."""

    worker_s: list[float] = field(default_factory=list)
    inside_s: list[float] = field(default_factory=list)
    driver_s: list[float] = field(default_factory=list)  # writing a unit's files and journal line here
    hosts: set[str] = field(default_factory=set)


LAST_STATS = DaskStats()


def _run_dask(
    cluster: Cluster,
    order: Sequence[Case],
    todo: Mapping[str, list[int]],
    subject: Subject,
    run_dir: Path,
    timeout: float | None,
    starter: _PlaneStarter,
    sink: _Sink,
    fixture_mode: FixtureMode,
) -> None:
    from distributed import as_completed

    from imagebench.records import SampleSummary
    from imagebench.runner import (
        PreparedFixture,
        _write_plain,
        prepare_fixture,
        presents_tensor,
        run_unit,
        sample_dir,
    )

    global LAST_STATS
    stats = LAST_STATS = DaskStats()
    client = cluster.client
    spec = subject_spec(subject)
    tensor_workers: list[str] | None = None
    if any(presents_tensor(c) for c in order) and cluster.cluster is None:
        tensor_workers = cluster.workers_on_this_host()
    window = max(2, 2 * cluster.n_workers)  # cases with work in flight at once
    # Results come with their futures: no round trip to the client's event loop per unit.
    pending = as_completed(loop=client.loop, with_results=True, raise_errors=False)
    meta: dict[str, tuple[Case, int]] = {}
    futures: dict[str, Any] = {}
    remaining: dict[str, int] = {}
    prep_futures: dict[str, Any] = {}
    token = uuid.uuid4().hex[:8]
    queue = list(order)
    tensor_left = sum(1 for c in order if presents_tensor(c))

    def here(case: Case, prepared: PreparedFixture) -> None:
        """Units that need no worker (no fixture to work on): written by the driver, as serially."""
        for n in todo[case.label]:
            sink.add(case, n, run_unit(case, subject, n, run_dir, fixture=prepared, plane=None, timeout=timeout))

    def submit(case: Case) -> None:
        label = case.label
        plane_arg: PresentedPlane | None = None
        restrict: list[str] | None = None
        if presents_tensor(case):
            plane, reason = starter.get()
            if plane is None:
                from imagebench.runner import TENSOR_SKIP_REASON

                why = f"{TENSOR_SKIP_REASON}: {reason}" if reason else TENSOR_SKIP_REASON
                here(case, PreparedFixture(None, "skipped", why))
                return
            prepared = prepare_fixture(case, plane=plane)
            sink.build_s[label] = prepared.build_s
            if prepared.fixture is None:
                here(case, prepared)
                return
            plane_arg = _present_on_driver(plane, case, prepared.fixture)
            restrict = tensor_workers
            prep = client.scatter(prepared, hash=False, workers=restrict)
        elif fixture_mode == "driver":
            prepared = prepare_fixture(case, plane=None)
            sink.build_s[label] = prepared.build_s
            if prepared.fixture is None:
                here(case, prepared)
                return
            prep = client.scatter(prepared, hash=False)
        else:
            prep = client.submit(_prepare_task, case, pure=False, key=f"prepare-{label}-{token}")
        prep_futures[label] = prep
        remaining[label] = len(todo[label])
        for n in todo[label]:
            fut = client.submit(
                _unit_task,
                case,
                spec,
                n,
                prep,
                plane_arg,
                timeout,
                pure=False,
                key=f"unit-{label}-{n}-{token}",
                workers=restrict,
                allow_other_workers=False,
            )
            meta[fut.key] = (case, n)
            futures[fut.key] = fut
            pending.add(fut)

    def refill() -> None:
        while queue and len(remaining) < window:
            submit(queue.pop(0))

    def finished(case: Case) -> None:
        nonlocal tensor_left
        remaining.pop(case.label, None)
        prep = prep_futures.pop(case.label, None)
        if prep is not None:
            prep.release()
        if presents_tensor(case):
            tensor_left -= 1
            if tensor_left == 0:
                starter.close_soon()

    try:
        refill()
        while meta or queue:
            if not meta:
                refill()
                continue
            fut, ret = next(pending)
            case, n = meta.pop(fut.key)
            futures.pop(fut.key, None)
            if not isinstance(ret, UnitReturn) and fut.status != "error":
                # cancelled: the scheduler went away (or dropped it). Stop; a resume runs it later.
                raise ExecutorError(
                    f"the dask cluster dropped unit {case.label} sample {n} ({fut.status}); the run stopped",
                    usage=False,
                )
            if not isinstance(ret, UnitReturn):  # it failed on a worker (the worker died, or it could not unpickle)
                exc = ret[1] if isinstance(ret, tuple) and len(ret) == 3 else ret
                summary = _write_plain(
                    case,
                    subject.name,
                    n,
                    run_dir,
                    status="harness-error",
                    reason=f"the executor could not run this unit: {type(exc).__name__}: {exc}",
                    fixture=None,
                    times={},
                )
                sink.add(case, n, summary)
            else:
                took = time.perf_counter()
                data = _write_unit_files(sample_dir(run_dir, subject.name, case, n), ret.files)
                summary = SampleSummary.model_validate_json(data)
                if case.label not in sink.build_s:
                    sink.build_s[case.label] = float(summary.times.get("build_s", 0.0))
                stats.worker_s.append(ret.worker_s)
                stats.inside_s.append(summary.times.get("subject_s", 0.0) + summary.times.get("verify_s", 0.0))
                stats.hosts.add(ret.host)
                sink.add(case, n, summary, data)
                stats.driver_s.append(time.perf_counter() - took)
            fut.release()
            remaining[case.label] -= 1
            if remaining[case.label] == 0:
                finished(case)
                refill()
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(list(futures.values()))
        cluster.cancel_subjects()
        raise


# --------------------------------------------------------------------------- a pass over a run


def _bar(total: int, done: int) -> tuple[Any, Any]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("[bold]{task.description}", justify="left"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("elapsed"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    task = bar.add_task("starting", total=total, completed=done)
    bar.start()
    return bar, task


def _write_receipt(run_dir: Path, record: RunRecord, subject: Subject, cases: Sequence[Case]) -> str:
    """Write ``receipt.json``; return why not (empty when written)."""
    try:
        from imagebench.receipt import build_receipt, write_receipt

        seeds = {c.label: getattr(c.fixture, "seed", None) for c in cases}
        receipt = build_receipt(
            subject=subject,
            samples=record.samples,
            seeds={k: v for k, v in seeds.items() if isinstance(v, int)},
            selection=record.selection,
            cases=cases,
        )
        write_receipt(run_dir, receipt)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _begin(
    run_dir: Path,
    record: RunRecord,
    cases: Sequence[Case],
    units: Mapping[str, int],
    journal: Journal,
    parallel: Parallel,
    resume: bool,
) -> tuple[RunRecord, Scan | None, dict[str, Any]]:
    """The journal's first line of a pass; for a resume, the scan and the clearing of what it cannot keep."""
    from imagebench.journal import remove_stale_temporaries, scan_run
    from imagebench.runner import _now_iso, sample_dir

    scan: Scan | None = None
    base_extra = {k: v for k, v in record.extra.items() if k not in _END_KEYS}
    if resume:
        scan = scan_run(run_dir, record, cases, units)
        remove_stale_temporaries(run_dir)
        by_label = {c.label: c for c in cases}
        for label, n in scan.todo:
            folder = sample_dir(run_dir, record.subject, by_label[label], n)
            if folder.exists():
                shutil.rmtree(folder)  # what an interrupted attempt left
        note = {
            "time": _now_iso(),
            "kept": len(scan.done),
            "run": len(scan.todo),
            "discarded": {f"{label}#{n}": why for (label, n), why in scan.discarded.items()},
            "mode": parallel.describe(),
        }
        base_extra["resumes"] = [*base_extra.get("resumes", []), note]
        journal.append("resume", detail={k: v for k, v in note.items() if k != "time"})
    else:
        journal.append("start", detail={"run_id": record.run_id, "mode": parallel.describe()})
    return record.model_copy(update={"extra": base_extra}), scan, base_extra


def execute(
    run_dir: Path,
    record: RunRecord,
    cases: Sequence[Case],
    subject: Subject,
    *,
    timeout: float | None = None,
    plane: Plane | None = None,
    progress: bool = True,
    on_sample: Callable[[SampleSummary], None] | None = None,
    parallel: Parallel = Parallel(),
    cluster: Cluster | None = None,
    resume: bool = False,
) -> RunResult:
    """One pass over the units of ``record`` in ``run_dir``: run those not done, write each case's
    summary, ``run.json`` and (when missing) ``receipt.json``. With ``resume`` the folder is first
    scanned: units with a complete, valid summary are kept, the others' folders are cleared."""
    from imagebench.journal import Journal, RunLock
    from imagebench.records import write_record
    from imagebench.runner import (
        RunResult,
        _now_iso,
        presents_tensor,
        sample_dir,
        samples_for,
    )

    cases = list(cases)
    units = {c.label: samples_for(c, record.samples) for c in cases}
    result = RunResult(run_dir=run_dir, record=record)
    lock = RunLock(run_dir).acquire()
    try:
        journal = Journal.open(run_dir)
    except BaseException:
        lock.release()
        raise
    try:
        record, scan, base_extra = _begin(run_dir, record, cases, units, journal, parallel, resume)
    except BaseException:
        journal.close()
        lock.release()
        raise
    done = scan.done if scan is not None else {}
    todo = {c.label: [n for n in range(units[c.label]) if (c.label, n) not in done] for c in cases}
    order = [c for c in cases if todo[c.label]]
    result.record = record

    total = sum(units.values())
    helper: _Prefetcher | None = None
    starter: _PlaneStarter | None = None
    bar, task = None, None
    sink = _Sink(run_dir, subject.name, cases, units, journal, on_sample, None, None)
    receipt_problem = ""
    finished = False
    try:
        # Serial: the helper that builds fixtures ahead starts first, so its start-up overlaps the receipt.
        helper = _start_prefetch(order, parallel.prefetch) if cluster is None else None
        # The receipt is written before any unit (a killed run has one too), on this thread: its
        # imports must not race a subject's (see _Prefetcher).
        if not (run_dir / "receipt.json").exists():
            receipt_problem = _write_receipt(run_dir, record, subject, cases)
        starter = _PlaneStarter(plane, any(presents_tensor(c) for c in order))
        bar, task = _bar(total, len(done)) if progress else (None, None)
        sink.bar, sink.task = bar, task
        if scan is not None:
            for (label, n), summary in scan.done.items():
                sink.keep(label, n, summary)
            for key in scan.unjournaled:  # complete summaries whose line a kill cut off
                case = next(c for c in cases if c.label == key[0])
                path = sample_dir(run_dir, record.subject, case, key[1]) / "summary.json"
                journal.unit(run_dir, path, scan.done[key], scan.data[key])
            for case in cases:
                sink.maybe_finish(case)
        with unit_pools():
            if cluster is not None:
                try:
                    _run_dask(cluster, order, todo, subject, run_dir, timeout, starter, sink, parallel.fixture_mode)
                except ExecutorError as exc:
                    exc.run_dir = run_dir
                    raise
            else:
                _run_serial(order, todo, subject, run_dir, timeout, starter, sink, helper)
        finished = True
    finally:
        if bar is not None:
            bar.stop()
        try:
            for case in cases:
                if sink.complete(case.label) and case.label in sink.summaries:
                    result.samples[case.label] = sink.samples_of(case.label)
                    result.summaries[case.label] = sink.summaries[case.label]
            counts: dict[str, int] = {}
            for samples in result.samples.values():
                for s in samples:
                    counts[s.status] = counts.get(s.status, 0) + 1
            extra = {**base_extra, "verdicts": result.verdicts, "passed": result.passed}
            if receipt_problem:
                extra["receipt_error"] = receipt_problem
            if not finished:
                extra["interrupted"] = True
            result.record = record.model_copy(
                update={"finished": _now_iso(), "counts": counts, "complete": finished, "extra": extra}
            )
            write_record(run_dir / "run.json", result.record)
            journal.append("end", detail={"complete": finished, "counts": counts})
            if not finished and progress and sys.exc_info()[0] is not ExecutorError:  # its message says it
                print(f"the run stopped early; take it up again with: imagebench run --resume {run_dir}", file=sys.stderr)
        finally:
            try:
                if helper is not None:
                    helper.close()
                if starter is not None:
                    starter.close()  # the plane, its process and its temporary data go with the run
            finally:
                journal.close()
                lock.release()
    return result


# --------------------------------------------------------------------------- a new run, a resumed run


@contextlib.contextmanager
def cluster_for(parallel: Parallel, cases: Sequence[Case], subject: Subject, *, progress: bool) -> Iterator[Any]:
    """The cluster a run's units go to (None when they run here), closed when the run ends."""
    cluster = open_cluster(parallel, cases, subject, progress=progress)
    try:
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()


def run_new(
    cases: Iterable[Case],
    subject: Subject,
    *,
    samples: int = 1,
    out: str | Path | None = None,
    progress: bool = True,
    timeout: float | None = None,
    plane: Plane | None = None,
    selection: Mapping[str, Any] | None = None,
    on_sample: Callable[[SampleSummary], None] | None = None,
    record_extra: Mapping[str, Any] | None = None,
    parallel: Parallel = Parallel(),
) -> RunResult:
    """What :func:`imagebench.runner.run_cases` does: a new run folder, then :func:`execute`.

    With ``parallel`` set the cluster is reached (and a subject that cannot travel refused)
    before the run folder is created. ``run.json``'s ``extra`` records ``subject_spec`` whenever
    the subject has one, so that ``--resume`` can rebuild it.
    """
    from imagebench.records import RunRecord, write_record
    from imagebench.runner import _new_run_dir, _utc_stamp

    cases = list(cases)
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    with cluster_for(parallel, cases, subject, progress=progress) as cluster:
        if out is None:
            from imagebench.artifacts import artifact_root

            root = Path(artifact_root())
        else:
            root = Path(out)
        stamp, started = _utc_stamp()
        run_dir = _new_run_dir(root, stamp)
        extra = dict(record_extra or {})
        with contextlib.suppress(ExecutorError):
            extra.setdefault("subject_spec", subject_spec(subject))
        if parallel.distributed:
            extra["executor"] = parallel.describe()
        record = RunRecord(
            run_id=run_dir.name,
            started=started,
            subject=subject.name,
            samples=samples,
            selection=dict(selection or {}),
            cases=[c.label for c in cases],
            complete=False,
            extra=extra,
        )
        write_record(run_dir / "run.json", record)
        return execute(
            run_dir,
            record,
            cases,
            subject,
            timeout=timeout,
            plane=plane,
            progress=progress,
            on_sample=on_sample,
            parallel=parallel,
            cluster=cluster,
        )


def read_run(run_dir: str | Path) -> RunRecord:
    """``run.json`` of a run folder; ResumeError naming the file when it is not there or not valid."""
    from imagebench.records import RecordError, RunRecord, read_record

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ResumeError(f"{run_dir}: not a folder; expected a run folder (run-<UTC timestamp>) holding run.json")
    try:
        return read_record(run_dir / "run.json", RunRecord)
    except RecordError as exc:
        raise ResumeError(str(exc)) from None


def resolve_cases(run_dir: Path, record: RunRecord, bundle: str | Path | None = None) -> list[Case]:
    """The cases ``run.json`` names, from the built-in suite or the bundle it ran (or ``bundle``)."""
    from imagebench import cases as builtin

    pool: dict[str, Case] = {c.label: c for c in builtin.all_cases()}
    source = bundle or record.selection.get("bundle")
    if source:
        from imagebench.bundle.load import BundleError, load_bundle

        try:
            loaded = load_bundle(source)
        except BundleError as exc:
            raise ResumeError(f"{run_dir / 'run.json'}: its bundle cannot be loaded: {exc}") from None
        pool.update({c.label: c for c in loaded.cases})
    missing = [label for label in record.cases if label not in pool]
    if missing:
        where = f"built-in cases or cases of bundle {source}" if source else "built-in cases (give --bundle DIR for a bundle's)"
        raise ResumeError(f"{run_dir / 'run.json'}: field 'cases' names {missing}, which are not {where}")
    return [pool[label] for label in record.cases]


def resume_run(
    run_dir: str | Path,
    *,
    cases: Sequence[Case] | None = None,
    subject: Subject | None = None,
    bundle: str | Path | None = None,
    progress: bool = True,
    parallel: Parallel = Parallel(),
    plane: Plane | None = None,
    on_sample: Callable[[SampleSummary], None] | None = None,
) -> RunResult:
    """Take up a run again: run every unit of ``run.json`` that has no complete, valid summary.

    The subject comes from ``run.json`` (``extra.subject_spec``) unless given; the cases are
    resolved by label (built-in, or the run's bundle) unless given; samples and the time limit
    are the run's. Raises :class:`ResumeError` for a folder that cannot be resumed and
    :class:`imagebench.journal.RunLocked` while another process writes it.
    """
    from imagebench.subjects import SubjectError, parse_subject

    run_dir = Path(run_dir)
    record = read_run(run_dir)
    where = run_dir / "run.json"
    if subject is None:
        spec = record.extra.get("subject_spec")
        if not isinstance(spec, str) or not spec:
            raise ResumeError(
                f"{where}: field 'extra.subject_spec' is missing (the run's subject {record.subject!r} has no spec "
                "string); resume it from Python with resume_run(..., subject=...)"
            )
        try:
            subject = parse_subject(spec)
        except SubjectError as exc:
            raise ResumeError(f"{where}: field 'extra.subject_spec' cannot be used: {exc}") from None
    if subject.name != record.subject:
        raise ResumeError(f"{where}: field 'subject' is {record.subject!r}, but the subject given is {subject.name!r}")
    if cases is None:
        cases = resolve_cases(run_dir, record, bundle)
    else:
        by_label = {c.label: c for c in cases}
        missing = [label for label in record.cases if label not in by_label]
        if missing:
            raise ResumeError(f"{where}: field 'cases' names {missing}, which the cases given do not hold")
        cases = [by_label[label] for label in record.cases]
    timeout = record.selection.get("timeout")
    if timeout is not None and not isinstance(timeout, (int, float)):
        raise ResumeError(f"{where}: field 'selection.timeout' is {timeout!r}, expected a number of seconds or null")
    with cluster_for(parallel, cases, subject, progress=progress) as cluster:
        return execute(
            run_dir,
            record,
            cases,
            subject,
            timeout=timeout,
            plane=plane,
            progress=progress,
            on_sample=on_sample,
            parallel=parallel,
            cluster=cluster,
            resume=True,
        )


# --------------------------------------------------------------------------- the CLI side (imagebench run)


def parallel_from_args(args: argparse.Namespace) -> Parallel:
    """``--workers`` / ``--scheduler`` as a :class:`Parallel`; a bad combination is a UsageError."""
    from imagebench.cli import UsageError

    workers = getattr(args, "workers", None)
    scheduler = getattr(args, "scheduler", None)
    try:
        return Parallel(workers=workers, scheduler=scheduler)
    except ExecutorError as exc:
        raise UsageError(f"--workers/--scheduler: {exc}") from None


def cmd_resume(args: argparse.Namespace) -> int:
    """``imagebench run --resume RUN_DIR``."""
    from imagebench.cli import UsageError
    from imagebench.journal import JournalError, RunLocked
    from imagebench.runner import _console, results_table, tally_line

    given = [
        flag
        for flag, value, default in (
            ("-k", getattr(args, "patterns", None), None),
            ("--subject", getattr(args, "subject", "reference"), "reference"),
            ("--samples", getattr(args, "samples", 1), 1),
            ("--fixtures", getattr(args, "fixtures", "all"), "all"),
            ("--timeout", getattr(args, "timeout", None), None),
            ("--out", getattr(args, "out", None), None),
            ("--suite", getattr(args, "suite", None), None),
        )
        if value not in (default, [], ())
    ]
    if given:
        raise UsageError(
            f"--resume takes the subject, cases, samples and time limit from run.json; drop {', '.join(given)}"
        )
    parallel = parallel_from_args(args)
    try:
        result = resume_run(args.resume, bundle=getattr(args, "bundle", None), progress=not args.quiet, parallel=parallel)
    except (ResumeError, JournalError) as exc:
        raise UsageError(str(exc)) from None
    except ExecutorError as exc:
        if exc.usage:
            raise UsageError(str(exc)) from None
        print(f"imagebench run: {exc}", file=sys.stderr)
        return 1
    except RunLocked as exc:
        print(f"imagebench run: {exc}", file=sys.stderr)
        return 1
    console = _console()
    note = (result.record.extra.get("resumes") or [{}])[-1]
    discarded = note.get("discarded") or {}
    console.print(
        f"resumed {result.run_dir.name}: kept {note.get('kept', 0)} finished unit(s), ran {note.get('run', 0)}"
        + (f" ({len(discarded)} had an unusable summary)" if discarded else "")
    )
    for unit, why in list(discarded.items())[:10]:
        console.print(f"  re-ran {unit}: {why}", soft_wrap=True)
    if not args.quiet:
        console.print(results_table(result))
    console.print(tally_line(result))
    finish_cli(args, result, console)
    return result.exit_code


def finish_cli(args: argparse.Namespace, result: RunResult, console: Any) -> None:
    """After ``run``: the report (unless ``--no-report``), then the run folder."""
    if not getattr(args, "no_report", False):
        try:
            from imagebench.report import write_html_report

            path = write_html_report(result.run_dir, progress=False)
            console.print(f"report: {path}", soft_wrap=True)
        except Exception as exc:  # the run stands; only its page is missing
            console.print(f"[yellow]report not written:[/yellow] {type(exc).__name__}: {exc}", soft_wrap=True)
    console.print(f"run folder: {result.run_dir}", soft_wrap=True)
