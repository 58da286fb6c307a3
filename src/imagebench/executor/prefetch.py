"""Fixtures built ahead: a helper process builds the next cases' fixtures while this one runs samples.

Why a helper *process* builds fixtures ahead, not a thread: builders and subjects import
lazily (scipy, scikit-image, ...), and two threads importing a package with circular imports
at the same time can hand one of them a half-initialised module (CPython accepts a partially
initialised module rather than deadlock). A subject's result must never depend on that race.
A process shares no imports, no GIL, and gives back exactly what a build here would.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from imagebench.executor.cluster import THREAD_ENV

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.runs.runner import PreparedFixture

ANY_PLANE: Any = object()  # lets prepare_fixture build a tensor case's fixture; the plane is checked here


def frame_write(stream: Any, payload: bytes) -> None:
    stream.write(len(payload).to_bytes(8, "big"))
    stream.write(payload)
    stream.flush()


def frame_read(stream: Any) -> bytes | None:
    head = stream.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "big")
    data = stream.read(size)
    if len(data) < size:
        return None
    return data


def prefetch_main() -> None:
    """The helper process: read pickled ``(case, seed, definition)`` on stdin, answer pickled
    PreparedFixtures on stdout (``seed`` is None but in a sealed run; ``definition`` is the case's
    definition fingerprint as the driver computed it, the cache's key: a case pickled by value
    cannot always read its own source here)."""
    import pickle

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything a builder prints must not corrupt the frames
    head = frame_read(stdin)
    if head is None:
        return
    for entry in reversed(pickle.loads(head)):  # the driver's sys.path, so cases import the same way
        if entry not in sys.path:
            sys.path.insert(0, entry)
    from imagebench.runs.runner import prepare_fixture

    while True:
        data = frame_read(stdin)
        if data is None:
            return
        try:
            case, seed, definition = pickle.loads(data)
            prepared = prepare_fixture(case, plane=ANY_PLANE, seed=seed, definition=definition)
            answer = pickle.dumps(("ok", prepared), protocol=5)
        except Exception as exc:  # the driver builds it itself
            answer = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"), protocol=5)
        try:
            frame_write(stdout, answer)
        except OSError:  # the run is gone (stopped or killed): so is the reason to build
            return


BuildKey = tuple[str, int | None]  # (case label, seed): one fixture to build


class Prefetcher:
    """Builds upcoming cases' fixtures in one helper process while this one runs samples.

    :meth:`submit` queues a case (with a sealed run's seed, one of its samples' fixtures);
    :meth:`take` returns its :class:`PreparedFixture`, or None when the helper could not build it
    (it could not be pickled, the helper failed): then the caller builds it here, so the result is
    always the one a serial build gives. The helper is sent seeds, never a sealed run's secret.
    """

    def __init__(self) -> None:
        import subprocess

        self._lock = threading.Lock()
        self._answers: dict[BuildKey, Future[bytes | None]] = {}
        self._order: list[Future[bytes | None]] = []  # answers still to come, in the order asked
        self._broken = False
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import imagebench.executor.prefetch as p; p.prefetch_main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **THREAD_ENV},  # builds as on a worker (see unit_pools)
            start_new_session=True,  # a terminal's Ctrl-C reaches the run, which stops the helper in order
        )
        import pickle

        assert self.proc.stdin is not None
        frame_write(self.proc.stdin, pickle.dumps(list(sys.path)))
        self._reader = threading.Thread(target=self._read, name="imagebench-prefetch-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            try:
                data = frame_read(self.proc.stdout)
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

    def submit(self, case: Case, seed: int | None = None) -> None:
        import cloudpickle

        key = (case.label, seed)
        with self._lock:
            if self._broken or key in self._answers:
                return
            try:
                payload = cloudpickle.dumps((case, seed, case_definition(case) if seed is None else None), protocol=5)
            except Exception:
                return  # not picklable: take() answers None and the case is built here
            fut: Future[bytes | None] = Future()
            self._answers[key] = fut
            self._order.append(fut)
            try:
                assert self.proc.stdin is not None
                frame_write(self.proc.stdin, payload)
            except (OSError, ValueError):
                self._broken = True
                self._order.remove(fut)
                fut.set_result(None)

    def ready(self, case: Case, seed: int | None = None) -> bool:
        """Whether the helper's answer for ``case`` (and ``seed``) is in (so :meth:`take` will not wait)."""
        with self._lock:
            fut = self._answers.get((case.label, seed))
        return fut is not None and fut.done()

    def take(self, case: Case, seed: int | None = None) -> PreparedFixture | None:
        import pickle

        with self._lock:
            fut = self._answers.pop((case.label, seed), None)
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


PREFETCH_DEPTH = 2  # cases built ahead of the one running


def case_definition(case: Case) -> str | None:
    """The case's definition fingerprint taken here (the fixture cache's key), None when it has none."""
    from imagebench.fixtures.digest import FingerprintError
    from imagebench.runs.fingerprint import definition_fingerprint

    try:
        return definition_fingerprint(case)
    except FingerprintError:
        return None


def costly(case: Case, seed: int | None) -> bool:
    """Whether building ``case`` (from ``seed``) is work worth a helper: not a curated case (its
    arrays are read lazily) nor a procedural one whose fixture the cache already holds."""
    from imagebench.fixtures.specs import OnDisk, Procedural

    spec = case.fixture
    if seed is None and isinstance(spec, OnDisk):
        return False
    if seed is None and isinstance(spec, Procedural):
        from imagebench.fixtures import cache

        definition = case_definition(case)
        return definition is None or not cache.present(definition, spec.seed)
    return True


def start_prefetch(builds: Sequence[tuple[Case, int | None]], enabled: bool) -> Prefetcher | None:
    """The helper for a serial pass, already asked for the ``(case, seed)`` builds after the first
    (which is built here at once: a fresh helper still has its imports to do). None when no build
    after the first is :func:`costly`: a warm cache needs no second process to read it."""
    if not enabled or len(builds) < 2 or not any(costly(case, seed) for case, seed in builds[1:]):
        return None
    try:
        helper = Prefetcher()
    except OSError:
        return None
    for case, seed in builds[1 : 1 + PREFETCH_DEPTH]:
        helper.submit(case, seed)
    return helper
