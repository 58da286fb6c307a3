"""The serial pass: one unit after another in this process, the next cases' fixtures built ahead
in a helper process (:mod:`imagebench.executor.prefetch`) and a tensor case's fixture uploaded
while the case before it runs.

The pass is a list of *builds* (:func:`serial_builds`): a case's fixture and the samples that
share it. Without seeds a case is one build for all its samples; in a sealed run
(:mod:`imagebench.runs.sealed`) each seed of a procedural case is a build of its own.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from imagebench.executor.prefetch import ANY_PLANE, PREFETCH_DEPTH

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.executor.planes import PlaneStarter
    from imagebench.executor.prefetch import Prefetcher
    from imagebench.executor.sink import Sink
    from imagebench.runs.runner import PreparedFixture
    from imagebench.subjects import Subject
    from imagebench.usage import Budget

    Build = tuple[Case, int | None, list[int]]  # (case, seed or None, the samples built from it)


def serial_builds(
    order: Sequence[Case], todo: Mapping[str, list[int]], seeds: Mapping[str, Sequence[int]] | None = None
) -> list[Build]:
    """The fixtures a serial pass builds, in order: ``(case, seed, samples)``.

    A case without seeds is one build (seed None) shared by all its samples to do; a case with
    seeds (a sealed run's, one per sample) is one build per distinct seed, in sample order.
    """
    builds: list[Build] = []
    for case in order:
        case_seeds = (seeds or {}).get(case.label)
        if case_seeds is None:
            builds.append((case, None, list(todo[case.label])))
            continue
        by_seed: dict[int, list[int]] = {}
        for n in todo[case.label]:
            by_seed.setdefault(case_seeds[n], []).append(n)
        builds.extend((case, seed, samples) for seed, samples in by_seed.items())
    return builds


def prepared_for(
    case: Case, built: PreparedFixture | None, starter: PlaneStarter, seed: int | None = None
) -> PreparedFixture:
    """``case``'s PreparedFixture (from ``seed`` when given): the helper's build when there is one,
    else built here; a tensor case with no plane is skipped with the plane's reason, as a serial
    run does."""
    from imagebench.runs.runner import (
        TENSOR_SKIP_REASON,
        PreparedFixture,
        prepare_fixture,
        presents_tensor,
    )

    if presents_tensor(case):
        plane, reason = starter.get()
        if plane is None:
            why = f"{TENSOR_SKIP_REASON}: {reason}" if reason else TENSOR_SKIP_REASON
            return PreparedFixture(None, "skipped", why, seed=seed)
    if built is not None:
        return built
    return prepare_fixture(case, plane=ANY_PLANE, seed=seed)


def run_serial(
    builds: Sequence[Build],
    subject: Subject,
    run_dir: Path,
    timeout: float | None,
    starter: PlaneStarter,
    sink: Sink,
    helper: Prefetcher | None,
    budget: Budget | None = None,
) -> None:
    import numpy as np

    from imagebench.runs.runner import presents_tensor, run_unit

    last_tensor = max((i for i, (c, _, _) in enumerate(builds) if presents_tensor(c)), default=-1)
    early: dict[tuple[str, int | None], PreparedFixture | None] = {}  # taken from the helper ahead of their turn
    uploads: dict[tuple[str, int | None], threading.Thread] = {}
    sealed = any(seed is not None for _, seed, _ in builds)

    def upload_ahead(nxt: Case, seed: int | None) -> None:
        """The next build presents tensors and its fixture is in: upload it while this one runs."""
        plane = starter.ready()
        if helper is None or plane is None or not presents_tensor(nxt) or not helper.ready(nxt, seed):
            return
        built = early[nxt.label, seed] = helper.take(nxt, seed)  # unpickled here, on this thread
        if built is None or built.fixture is None:
            return
        data = built.fixture.data
        if not all(type(data.get(layer.key)) is np.ndarray for layer in nxt.layers if layer.presentation == "tensor"):
            return  # a lazy array would import dask on that thread: run_unit uploads it instead

        def upload() -> None:
            with contextlib.suppress(Exception):  # run_unit presents again and reports a failure itself
                plane.present(nxt, built.fixture)

        # Only the plane's client runs there; its modules were imported on this thread (PlaneStarter).
        uploads[nxt.label, seed] = threading.Thread(target=upload, name="imagebench-plane-upload", daemon=True)
        uploads[nxt.label, seed].start()

    try:
        for i, (case, seed, samples) in enumerate(builds):
            key = (case.label, seed)
            if helper is not None:
                for ahead, ahead_seed, _ in builds[i + 1 : i + 1 + PREFETCH_DEPTH]:
                    helper.submit(ahead, ahead_seed)  # built there while these samples run (a no-op when asked before)
            if sink.bar is not None:
                sink.bar.describe(case.label)
            if key in early:
                built = early.pop(key)
            else:
                built = helper.take(case, seed) if helper is not None and i > 0 else None
            prepared = prepared_for(case, built, starter, seed)
            if sealed:  # each seed built its own fixture: the case's build time is their sum
                sink.build_s[case.label] = sink.build_s.get(case.label, 0.0) + prepared.build_s
            else:
                sink.build_s[case.label] = prepared.build_s
            if key in uploads:
                uploads.pop(key).join()  # run_unit then finds the upload done
            # The plane keeps one upload per case: the next seed of this very case waits for its turn.
            if i + 1 < len(builds) and builds[i + 1][0].label != case.label:
                upload_ahead(builds[i + 1][0], builds[i + 1][1])
            plane = starter.get()[0] if presents_tensor(case) else None
            for n in samples:
                summary = run_unit(
                    case, subject, n, run_dir, fixture=prepared, plane=plane, timeout=timeout, seed=seed, budget=budget
                )
                sink.add(case, n, summary)
            if i == last_tensor:
                starter.close_soon()
    finally:
        if helper is not None:
            helper.close()  # nothing it still builds is needed (idempotent; execute closes it too)
