"""Units on dask.distributed workers.

Each case's fixture is built once on a worker (a ``prepare`` task; dask moves it to the workers
that run the case's samples) and each unit runs :func:`imagebench.runs.runner.run_unit` on a worker in
a private temporary folder. The worker sends the unit's files back and the driver writes them
into the run folder, ``summary.json`` last and atomically, so workers need no shared file system
and the driver alone writes the run folder. The subject travels as its spec string. With shipping
(``--scheduler``), the files a curated case reads and a ``python:`` file subject's code travel by
digest (:mod:`.shipping`, :mod:`.remote`) and what comes back is checked first (:mod:`.returned`).

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

from imagebench.executor.cluster import (
    Cluster,
    ExecutorError,
    FixtureMode,
    subject_spec,
    unit_pools,
)
from imagebench.executor.planes import PresentedPlane, present_on_driver
from imagebench.plane.process import off_loopback

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.executor.planes import PlaneStarter
    from imagebench.executor.shipping import Shipment
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


def _prepare_task(case: Case, seed: int | None = None) -> PreparedFixture:
    from imagebench.runs.runner import prepare_fixture

    with unit_pools():
        return prepare_fixture(case, plane=None, seed=seed)


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

    def clear(self) -> None:
        for values in (self.worker_s, self.inside_s, self.driver_s, self.hosts):
            values.clear()


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
    window = max(2, 2 * cluster.n_workers)  # cases with work in flight at once
    # Results come with their futures: no round trip to the client's event loop per unit.
    pending = as_completed(loop=client.loop, with_results=True, raise_errors=False)
    meta: dict[str, tuple[Case, int]] = {}
    futures: dict[str, Any] = {}
    remaining: dict[str, int] = {}
    prep_futures: dict[str, list[Any]] = {}
    driver_built: set[str] = set()  # cases whose fixtures the driver built (their build time is known here)
    worker_seeds: dict[str, set[int | None]] = {}  # seeds whose build time a summary already brought
    token = uuid.uuid4().hex[:8]
    queue = list(order)
    tensor_left = sum(1 for c in order if presents_tensor(c))

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

    def builds_of(case: Case) -> list[tuple[int | None, list[int]]]:
        """``(seed, samples)`` per fixture to build: one for the case, or one per seed (sealed)."""
        if (seeds or {}).get(case.label) is None:
            return [(None, list(todo[case.label]))]
        by_seed: dict[int | None, list[int]] = {}
        for n in todo[case.label]:
            by_seed.setdefault(seed_of(case, n), []).append(n)
        return list(by_seed.items())

    def submit(case: Case) -> None:
        label = case.label
        remaining[label] = len(todo[label])
        prep_futures[label] = []
        for i, (seed, samples) in enumerate(builds_of(case)):
            submit_build(case, seed, samples, f"{label}-{i}" if seed is not None else label)
        if remaining[label] == 0:  # every unit was written here
            finished(case)

    def submit_build(case: Case, seed: int | None, samples: list[int], tag: str) -> None:
        label = case.label
        plane_arg: PresentedPlane | None = None
        mint: Any = None
        restrict: list[str] | None = None
        shipment = None
        if shipper is not None:
            failed: PreparedFixture | None = None
            available = False
            try:
                available = case.available()[0]  # unavailable here (tree, entry, sizes, headers): prepared here
                shipped = shipment_of(case) if available else None
                if shipped is not None:
                    shipment, sources = shipped
                    shipper.offer(label, shipment, sources)
            except (ShippingError, BlobError) as exc:  # bytes here or on a worker that do not match their digest
                failed = PreparedFixture(
                    None, "harness-error", f"shipping the fixture's files failed: {exc}", seed=seed
                )
            except Exception:  # the tree cannot describe the case: prepared here, its failure as serially
                available = False
            if failed is None and not available:
                failed = prepare_fixture(case, plane=starter.get()[0] if presents_tensor(case) else None, seed=seed)
            if failed is not None:
                here(case, failed, samples)
                remaining[label] -= len(samples)
                return
        if presents_tensor(case):
            plane, reason = starter.get()
            if plane is None:
                why = f"{TENSOR_SKIP_REASON}: {reason}" if reason else TENSOR_SKIP_REASON
                here(case, PreparedFixture(None, "skipped", why, seed=seed), samples)
                remaining[label] -= len(samples)
                return
            prepared = prepare_fixture(case, plane=plane, seed=seed)
            driver_built.add(label)
            sink.build_s[label] = sink.build_s.get(label, 0.0) + prepared.build_s
            if prepared.fixture is None:
                here(case, prepared, samples)
                remaining[label] -= len(samples)
                return
            plane_arg = present_on_driver(plane, case, prepared.fixture)
            mint = getattr(plane, "token_for", None)  # a read token of each unit's own
            restrict = tensor_workers
            # a shipped case's fixture is built again on its worker, from that worker's copy
            prep = None if shipment is not None else client.scatter(prepared, hash=False, workers=restrict)
        elif shipment is not None:
            prep = None  # built on the unit's worker from the shipped files (curated: read lazily)
        elif fixture_mode == "driver":
            prepared = prepare_fixture(case, plane=None, seed=seed)
            driver_built.add(label)
            sink.build_s[label] = sink.build_s.get(label, 0.0) + prepared.build_s
            if prepared.fixture is None:
                here(case, prepared, samples)
                remaining[label] -= len(samples)
                return
            prep = client.scatter(prepared, hash=False)
        else:
            prep = client.submit(_prepare_task, case, seed, pure=False, key=f"prepare-{tag}-{token}")
        if prep is not None:
            prep_futures[label].append(prep)
        for n in samples:
            fut = client.submit(
                _unit_task,
                case,
                spec,
                n,
                prep,
                plane_arg.for_unit(mint) if plane_arg is not None else None,
                timeout,
                seed,
                budget,
                shipment,
                subject_code,
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
        for prep in prep_futures.pop(case.label, []):
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
            refused: ReturnError | None = None
            if isinstance(ret, UnitReturn):  # names and digests checked before anything is written
                try:
                    check_returned(ret.files, ret.digests, f"{case.label} sample {n}")
                except ReturnError as bad:
                    refused = bad
            if not isinstance(ret, UnitReturn) or refused is not None:
                # it failed on a worker (the worker died, or it could not unpickle), or what came back is refused
                exc = refused or (ret[1] if isinstance(ret, tuple) and len(ret) == 3 else ret)
                lost = Unit(
                    case,
                    subject.name,
                    PreparedFixture(None),
                    timeout_s=0.0,
                    run_dir=run_dir,
                    sample=n,
                    seed=seed_of(case, n),
                )
                summary = write_ended(
                    lost, "harness-error", f"the executor could not run this unit: {type(exc).__name__}: {exc}"
                )
                sink.add(case, n, summary)
            else:
                took = time.perf_counter()
                data = write_returned(sample_dir(run_dir, subject.name, case, n), ret.files)
                summary = SampleSummary.model_validate_json(data)
                seen = worker_seeds.setdefault(case.label, set())
                if case.label not in driver_built and summary.seed not in seen:
                    seen.add(summary.seed)  # one build per seed: the case's build time is their sum
                    sink.build_s[case.label] = sink.build_s.get(case.label, 0.0) + float(
                        summary.times.get("build_s", 0.0)
                    )
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
