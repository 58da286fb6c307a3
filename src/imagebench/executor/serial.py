"""The serial pass: one unit after another in this process, the next cases' fixtures built ahead
in a helper process (:mod:`imagebench.executor.prefetch`) and a tensor case's fixture uploaded
while the case before it runs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from imagebench.executor.prefetch import ANY_PLANE, PREFETCH_DEPTH

if TYPE_CHECKING:
    from imagebench.case import Case
    from imagebench.executor.planes import PlaneStarter
    from imagebench.executor.prefetch import Prefetcher
    from imagebench.executor.sink import Sink
    from imagebench.runner import PreparedFixture
    from imagebench.subjects import Subject


def prepared_for(case: Case, built: PreparedFixture | None, starter: PlaneStarter) -> PreparedFixture:
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
    return prepare_fixture(case, plane=ANY_PLANE)


def run_serial(
    order: Sequence[Case],
    todo: Mapping[str, list[int]],
    subject: Subject,
    run_dir: Path,
    timeout: float | None,
    starter: PlaneStarter,
    sink: Sink,
    helper: Prefetcher | None,
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

        # Only the plane's client runs there; its modules were imported on this thread (PlaneStarter).
        uploads[nxt.label] = threading.Thread(target=upload, name="imagebench-plane-upload", daemon=True)
        uploads[nxt.label].start()

    try:
        for i, case in enumerate(order):
            if helper is not None:
                for ahead in order[i + 1 : i + 1 + PREFETCH_DEPTH]:
                    helper.submit(ahead)  # built there while this case's samples run (a no-op when asked before)
            if sink.bar is not None:
                sink.bar.describe(case.label)
            if case.label in early:
                built = early.pop(case.label)
            else:
                built = helper.take(case) if helper is not None and i > 0 else None
            prepared = prepared_for(case, built, starter)
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
