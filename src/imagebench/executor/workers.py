"""Units on dask.distributed workers.

Units travel in batches (:mod:`imagebench.executor.batches`): a task runs several samples of one
build on a worker, one after another, each :func:`imagebench.runs.runner.run_unit` in a private
temporary folder. A build that is one batch builds its fixture inside that task; one split over
several batches is built once by a ``prepare`` task, which dask moves to the workers that need it.
The worker sends each unit's files back and the driver writes them into the run folder,
``summary.json`` last and atomically, so workers need no shared file system and the driver alone
writes the run folder. The subject travels as its spec string. With shipping (``--scheduler``),
the files a curated case reads and a ``python:`` file subject's code travel by digest
(:mod:`.shipping`, :mod:`.remote`), a shipped case's fixture is built on its worker from that
worker's copy, and what comes back is checked first (:mod:`.returned`).

Tensor cases: the driver uploads each tensor fixture once to the run's plane; workers reach it by
URL. On loopback (the default) tensor units are pinned to workers on the driver's host; with
``IMAGEBENCH_PLANE_HOST`` the plane listens where every worker reaches it and any worker runs them,
each unit carrying a read token for its own fixture's ids (:class:`~.planes.PresentedPlane`).

A sealed run (:mod:`imagebench.runs.sealed`) builds one fixture per seed of a procedural case, each
shared by the samples of that seed; only the seeds travel to the workers, never the secret.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.executor.batches import Batch, plan_batches
from imagebench.executor.cluster import (
    Cluster,
    ExecutorError,
    FixtureMode,
    subject_spec,
    unit_pools,
)
from imagebench.executor.planes import PresentedPlane, present_on_driver
from imagebench.executor.prefetch import case_definition
from imagebench.executor.serial import serial_builds
from imagebench.plane.process import off_loopback

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.executor.planes import PlaneStarter
    from imagebench.executor.shipment import Shipment
    from imagebench.executor.sink import Sink
    from imagebench.runs.runner import PreparedFixture
    from imagebench.sandbox.policy import SandboxPolicy
    from imagebench.subjects import Subject
    from imagebench.usage import Budget


@functools.lru_cache(maxsize=32)
def worker_subject(
    spec: str,
    sandbox: SandboxPolicy | None = None,
    isolate: bool = False,
    mcp: bool = False,
    kind: str | None = None,
    name: str | None = None,
) -> Subject:
    """The driver's subject rebuilt on a worker, as confined and as named (``--subject-name``) as it
    is on the driver. ``kind`` is the module that registers its kind (a kind from outside the
    package registers on import)."""
    import importlib

    from imagebench.subjects import parse_subject

    if kind is not None:
        importlib.import_module(kind)
    return parse_subject(spec, sandbox=sandbox, isolate=isolate, mcp=mcp, name=name)


@dataclass
class UnitReturn:
    """What a worker sends back for one unit: its files (``summary.json`` among them) and timings."""

    files: dict[str, bytes]
    worker_s: float
    host: str
    pid: int
    digests: dict[str, str] | None = None  # sha256 of each file, checked by the driver before it writes


def _prepare_task(case: Case, seed: int | None = None, definition: str | None = None) -> PreparedFixture:
    """Build a case's fixture on a worker. ``definition`` is its definition fingerprint as the
    driver took it (the fixture cache's key; the driver walks each closure once per run, a worker
    would walk them again)."""
    from imagebench.runs.runner import prepare_fixture

    with unit_pools():
        return prepare_fixture(case, plane=None, seed=seed, definition=definition)


def _unit_task(
    case: Case,
    spec: tuple[str, SandboxPolicy | None, bool, bool, str | None, str | None],
    sample: int,
    prepared: PreparedFixture,
    plane: PresentedPlane | None,
    timeout: float | None,
    seed: int | None = None,
    budget: Budget | None = None,
    shipment: Shipment | None = None,
    subject_code: Shipment | None = None,
) -> UnitReturn:
    """Run one unit on a worker in a private folder and return the files it wrote. With a
    ``shipment`` the case reads its files from this worker's copy of them (:mod:`.remote`), and its
    fixture is built here from that copy."""
    import dask

    from imagebench.executor.returned import pack
    from imagebench.runs.layout import SUMMARY, sample_dir
    from imagebench.runs.runner import prepare_fixture, run_unit

    start = time.perf_counter()
    if shipment is not None:
        from imagebench.executor.remote import localize

        case = localize(case, shipment)
        with unit_pools():
            prepared = prepare_fixture(case, plane=plane, seed=seed)
    if subject_code is not None:  # a python: file subject's code, shipped: this worker's copy of the file
        from imagebench.executor.remote import localized_spec

        spec = (localized_spec(spec[0], subject_code), *spec[1:])
    subject = worker_subject(*spec)
    tmp = Path(tempfile.mkdtemp(prefix="imagebench-unit-"))
    try:
        # A subject's own dask computations stay in its process (never the cluster it runs on).
        with dask.config.set(scheduler="threads"), unit_pools():
            run_unit(
                case, subject, sample, tmp, fixture=prepared, plane=plane, timeout=timeout, seed=seed, budget=budget
            )
        folder = sample_dir(tmp, subject.name, case, sample)
        files, digests = pack(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if SUMMARY not in files:
        raise RuntimeError(f"unit {case.label} sample {sample} left no summary.json")
    return UnitReturn(
        files=files, worker_s=time.perf_counter() - start, host=socket.gethostname(), pid=os.getpid(), digests=digests
    )


@dataclass
class UnitFailure:
    """A unit of a batch that raised on its worker (its batch's other units stand)."""

    error: str  # "TypeName: message"


def _batch_task(
    case: Case,
    spec: tuple[str, SandboxPolicy | None, bool, bool, str | None, str | None],
    samples: tuple[int, ...],
    prepared: PreparedFixture | None,
    planes: Sequence[PresentedPlane] | None,
    timeout: float | None,
    seed: int | None = None,
    budget: Budget | None = None,
    definition: str | None = None,
    shipment: Shipment | None = None,
    subject_code: Shipment | None = None,
) -> list[UnitReturn | UnitFailure]:
    """Run a batch of one build's samples on a worker, one after another (:mod:`imagebench.executor.batches`):
    the fixture is built here first unless it was built for several batches (``prepared``); a
    shipped case's is built here, once for the batch, from this worker's copy of its files.
    ``planes``: a tensor case's plane as each unit sees it, one per sample (each its own read token)."""
    if planes is not None and len(planes) != len(samples):
        raise ValueError(f"a batch of {len(samples)} sample(s) was given {len(planes)} plane presentation(s)")
    plane = planes[0] if planes else None
    if shipment is not None:
        from imagebench.executor.remote import localize
        from imagebench.runs.runner import prepare_fixture

        case = localize(case, shipment)
        with unit_pools():
            prepared = prepare_fixture(case, plane=plane, seed=seed)
    elif prepared is None:
        prepared = _prepare_task(case, seed, definition)
    out: list[UnitReturn | UnitFailure] = []
    for i, n in enumerate(samples):
        try:
            unit_plane = planes[i] if planes is not None else None
            out.append(_unit_task(case, spec, n, prepared, unit_plane, timeout, seed, budget, None, subject_code))
        except Exception as exc:
            out.append(UnitFailure(f"{type(exc).__name__}: {exc}"))
    return out


def ping() -> float:
    """A task that does nothing: what a round trip to a worker costs (benchmarks)."""
    return time.perf_counter()


@dataclass
class DaskStats:
    """Per-unit timings of the last distributed run (for benchmarks): seconds each unit spent on its
    worker in total and inside its subject and verifier, and what the driver spent taking it in."""

    worker_s: list[float] = field(default_factory=list)
    inside_s: list[float] = field(default_factory=list)
    driver_s: list[float] = field(default_factory=list)  # writing a unit's files and journal line here
    hosts: set[str] = field(default_factory=set)
    tasks: int = 0  # the tasks the units were batched into (:mod:`imagebench.executor.batches`)
    ready_s: float | None = None  # a local cluster started for the run: seconds until its workers were up
    first_unit_s: float | None = None  # ... and until the first unit was back here

    def clear(self) -> None:
        for values in (self.worker_s, self.inside_s, self.driver_s, self.hosts):
            values.clear()
        self.tasks = 0
        self.ready_s = self.first_unit_s = None


LAST_STATS = DaskStats()


def run_dask(
    cluster: Cluster,
    order: Sequence[Case],
    todo: Mapping[str, list[int]],
    subject: Subject,
    run_dir: Path,
    timeout: float | None,
    starter: PlaneStarter,
    sink: Sink,
    fixture_mode: FixtureMode,
    seeds: Mapping[str, Sequence[int]] | None = None,
    budget: Budget | None = None,
    ship: bool = False,
) -> None:
    from distributed import as_completed

    from imagebench.executor.returned import ReturnError, check_returned, write_returned
    from imagebench.executor.shipping import LAST_SHIPPING, Shipper, ShippingError, shipment_of, subject_shipment
    from imagebench.fixtures.blobs import BlobError
    from imagebench.records import SampleSummary
    from imagebench.runs.layout import sample_dir
    from imagebench.runs.runner import (
        TENSOR_SKIP_REASON,
        PreparedFixture,
        Unit,
        prepare_fixture,
        presents_tensor,
        run_unit,
        write_ended,
    )
    from imagebench.subjects import kind_module, subject_options

    stats = LAST_STATS
    stats.clear()
    LAST_SHIPPING.clear()
    client = cluster.client
    shipper = Shipper(client) if ship else None  # the files curated cases read, sent by digest
    subject_code = None
    if shipper is not None:
        try:
            shipped_code = subject_shipment(subject)
            if shipped_code is not None:
                shipper.offer("the subject's code", *shipped_code)
                subject_code = shipped_code[0]
        except (ShippingError, BlobError) as exc:
            raise ExecutorError(f"the subject's code could not be shipped to the workers: {exc}", usage=False) from None
    options = subject_options(subject)
    spec = (
        subject_spec(subject), options.get("sandbox"), bool(options.get("isolate")), bool(options.get("mcp")),
        kind_module(subject), options.get("name"),
    )  # fmt: skip
    tensor_workers: list[str] | None = None
    if any(presents_tensor(c) for c in order) and cluster.cluster is None and not off_loopback():
        tensor_workers = cluster.workers_on_this_host()
    n_workers = cluster.n_workers
    window = max(2, 2 * n_workers)  # batches in flight at once
    builds = serial_builds(order, todo, seeds)
    queue = plan_batches(builds, n_workers)
    stats.tasks = len(queue)
    # Results come with their futures: no round trip to the client's event loop per batch.
    pending = as_completed(loop=client.loop, with_results=True, raise_errors=False)
    meta: dict[str, Batch] = {}
    futures: dict[str, Any] = {}
    remaining: dict[str, int] = {label: len(samples) for label, samples in todo.items() if samples}
    # per build: what its batches are given (None: each builds its own), or None once it needs no worker
    given: dict[int, Any] = {}
    prep_futures: dict[str, list[Any]] = {}
    driver_built: set[str] = set()  # cases whose fixtures the driver built (their build time is known here)
    worker_seeds: dict[str, set[int | None]] = {}  # seeds whose build time a summary already brought
    token = uuid.uuid4().hex[:8]
    tensor_left = sum(1 for c in order if presents_tensor(c))
    planes: dict[int, PresentedPlane | None] = {}
    restricted: dict[int, list[str] | None] = {}
    here_done: set[int] = set()  # builds whose units the driver wrote itself (no fixture to work on)
    shipments: dict[int, Shipment | None] = {}  # per build: the files its worker reads, by digest
    mints: dict[int, Any] = {}  # per tensor build: what mints each unit's read token of the plane

    def seed_of(case: Case, n: int) -> int | None:
        case_seeds = (seeds or {}).get(case.label)
        return case_seeds[n] if case_seeds is not None else None

    def here(case: Case, prepared: PreparedFixture, samples: Sequence[int]) -> None:
        """Units that need no worker (no fixture to work on): written by the driver, as serially."""
        for n in samples:
            summary = run_unit(
                case,
                subject,
                n,
                run_dir,
                fixture=prepared,
                plane=None,
                timeout=timeout,
                seed=seed_of(case, n),
                budget=budget,
            )
            sink.add(case, n, summary)

    def shipped(batch: Batch) -> bool:
        """Offer ``batch``'s build's files to the workers that lack them, once per build (with
        shipping); False when its units were written here instead (a shipment refused, or a case
        unavailable here, prepared here with its reason as serially)."""
        index, case, seed = batch.build, batch.case, batch.seed
        if shipper is None or index in shipments:
            return True
        shipments[index] = None
        failed: PreparedFixture | None = None
        available = False
        try:
            available = case.available()[0]  # unavailable here (tree, entry, sizes, headers): prepared here
            offered = shipment_of(case) if available else None
            if offered is not None:
                shipments[index], sources = offered
                shipper.offer(case.label, offered[0], sources)
        except (ShippingError, BlobError) as exc:  # bytes here or on a worker that do not match their digest
            failed = PreparedFixture(None, "harness-error", f"shipping the fixture's files failed: {exc}", seed=seed)
        except Exception:  # the tree cannot describe the case: prepared here, its failure as serially
            available = False
        if failed is None and not available:
            failed = prepare_fixture(case, plane=starter.get()[0] if presents_tensor(case) else None, seed=seed)
        if failed is not None:
            here_instead(batch, failed)
            return False
        return True

    def on_driver(batch: Batch, tensor: bool) -> bool:
        """Build ``batch``'s fixture here (a tensor case, or fixture_mode ``driver``) and scatter it,
        once per build; False when it has none (its build's units are then written here)."""
        case, seed, index = batch.case, batch.seed, batch.build
        label = case.label
        if index in given:
            return True
        plane_arg: PresentedPlane | None = None
        plane: Any = None
        if tensor:
            plane, reason = starter.get()
            if plane is None:
                why = f"{TENSOR_SKIP_REASON}: {reason}" if reason else TENSOR_SKIP_REASON
                here_instead(batch, PreparedFixture(None, "skipped", why, seed=seed))
                return False
        prepared = prepare_fixture(case, plane=plane, seed=seed)
        driver_built.add(label)
        sink.build_s[label] = sink.build_s.get(label, 0.0) + prepared.build_s
        if prepared.fixture is None:
            here_instead(batch, prepared)
            return False
        if tensor:
            plane_arg = present_on_driver(plane, case, prepared.fixture)
            mints[index] = getattr(plane, "token_for", None)  # a read token of each unit's own
            restricted[index] = tensor_workers
        planes[index] = plane_arg
        if shipments.get(index) is not None:  # built again on its worker, from that worker's copy
            given[index] = None
            return True
        given[index] = client.scatter(prepared, hash=False, workers=restricted.get(index))
        prep_futures.setdefault(label, []).append(given[index])
        return True

    def here_instead(batch: Batch, prepared: PreparedFixture) -> None:
        """Every unit of ``batch``'s build written here: its fixture is not there to work on."""
        case = batch.case
        samples = builds[batch.build][2]
        here(case, prepared, samples)
        here_done.add(batch.build)
        remaining[case.label] -= len(samples)
        if remaining[case.label] == 0:
            finished(case)

    def submit(batch: Batch) -> None:
        case, seed, index = batch.case, batch.seed, batch.build
        label = case.label
        if index in here_done or not shipped(batch):
            return
        shipment = shipments.get(index)
        tensor = presents_tensor(case)
        if tensor or (fixture_mode == "driver" and shipment is None):
            if not on_driver(batch, tensor):
                return
        elif batch.shared and index not in given and shipment is None:
            tag = f"{label}-{index}"
            given[index] = client.submit(
                _prepare_task, case, seed, definition_of(case, seed), pure=False, key=f"prepare-{tag}-{token}"
            )
            prep_futures.setdefault(label, []).append(given[index])
        fut = client.submit(
            _batch_task,
            case,
            spec,
            batch.samples,
            given.get(index),
            None
            if planes.get(index) is None
            else tuple(planes[index].for_unit(mints.get(index)) for _ in batch.samples),
            timeout,
            seed,
            budget,
            definition_of(case, seed) if index not in given else None,
            shipment,
            subject_code,
            pure=False,
            key=f"units-{label}-{batch.samples[0]}-{len(batch.samples)}-{token}",
            workers=restricted.get(index),
            allow_other_workers=False,
        )
        meta[fut.key] = batch
        futures[fut.key] = fut
        pending.add(fut)

    def definition_of(case: Case, seed: int | None) -> str | None:
        """The cache's key of a case built from its own seed, taken here (:func:`_prepare_task`)."""
        return case_definition(case) if seed is None else None

    def refill() -> None:
        while queue and len(meta) < window:
            submit(queue.pop(0))

    def finished(case: Case) -> None:
        nonlocal tensor_left
        remaining.pop(case.label, None)
        for prep in prep_futures.pop(case.label, []):
            prep.release()
        if presents_tensor(case):
            tensor_left -= 1
            if tensor_left == 0:
                starter.close_soon()

    def lost(case: Case, n: int, error: str) -> None:
        unit = Unit(
            case, subject.name, PreparedFixture(None), timeout_s=0.0, run_dir=run_dir, sample=n, seed=seed_of(case, n)
        )
        sink.add(case, n, write_ended(unit, "harness-error", f"the executor could not run this unit: {error}"))

    def take_in(case: Case, n: int, ret: UnitReturn) -> None:
        try:  # names and digests checked before anything is written
            check_returned(ret.files, ret.digests, f"{case.label} sample {n}")
        except ReturnError as refused:
            lost(case, n, f"{type(refused).__name__}: {refused}")
            return
        took = time.perf_counter()
        data = write_returned(sample_dir(run_dir, subject.name, case, n), ret.files)
        summary = SampleSummary.model_validate_json(data)
        seen = worker_seeds.setdefault(case.label, set())
        if case.label not in driver_built and summary.seed not in seen:
            seen.add(summary.seed)  # one build per seed: the case's build time is their sum
            sink.build_s[case.label] = sink.build_s.get(case.label, 0.0) + float(summary.times.get("build_s", 0.0))
        stats.worker_s.append(ret.worker_s)
        stats.inside_s.append(summary.times.get("subject_s", 0.0) + summary.times.get("verify_s", 0.0))
        stats.hosts.add(ret.host)
        sink.add(case, n, summary, data)
        stats.driver_s.append(time.perf_counter() - took)

    try:
        refill()
        while meta or queue:
            if not meta:
                refill()
                continue
            fut, ret = next(pending)
            if stats.first_unit_s is None and getattr(cluster, "began", None) is not None:
                stats.first_unit_s = time.perf_counter() - cluster.began
                stats.ready_s = getattr(cluster, "ready_s", None)
            batch = meta.pop(fut.key)
            futures.pop(fut.key, None)
            case = batch.case
            if not isinstance(ret, list) and fut.status != "error":
                # cancelled: the scheduler went away (or dropped it). Stop; a resume runs it later.
                raise ExecutorError(
                    f"the dask cluster dropped unit {case.label} sample {batch.samples[0]} ({fut.status}); the run stopped",
                    usage=False,
                )
            if not isinstance(ret, list) or len(ret) != len(batch.samples):
                # it failed on a worker (the worker died, or the case could not be unpickled there)
                exc = ret[1] if isinstance(ret, tuple) and len(ret) == 3 else ret
                for n in batch.samples:
                    lost(case, n, f"{type(exc).__name__}: {exc}")
            else:
                for n, one in zip(batch.samples, ret):
                    if isinstance(one, UnitReturn):
                        take_in(case, n, one)
                    else:
                        lost(case, n, one.error if isinstance(one, UnitFailure) else repr(one))
            fut.release()
            remaining[case.label] -= len(batch.samples)
            if remaining[case.label] == 0:
                finished(case)
            refill()
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(list(futures.values()))
        cluster.cancel_subjects()
        raise
