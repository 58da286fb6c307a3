"""The plane's lifetime: a server process per run (or per viewer), gone with its data when the run ends.

:class:`PlaneProcess` starts ``imagebench plane serve`` as a child process and stops it again,
removing its temporary data directory even on Ctrl-C or an exception. :class:`RunPlane` is what
the runner holds for a whole run: it uploads each tensor-presented fixture once under a per-run
random name, fingerprints a corner of every upload and says after each sample whether a fixture
was overwritten. :func:`shared_plane` is one lazily started plane per process, for the napari panel.

This module imports no pyarrow at import time; a machine without it gets :class:`PlaneUnavailable`.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.fixtures.fixture import Fixture
    from imagebench.plane.client import Client

STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
TEMP_PREFIX = "imagebench-plane-"
OVERWRITTEN_FLAG = "fixture-overwritten"
# Never handed to the plane: where truth lives on disk.
_WITHHELD_ENV = ("IMAGEBENCH_FIXTURES",)
#: The address a run's plane listens on when workers on other machines must reach it (default:
#: loopback). Off loopback every call carries the run's read token (imagebench.plane.token).
PLANE_HOST_ENV = "IMAGEBENCH_PLANE_HOST"
LOOPBACK = "127.0.0.1"


def plane_host() -> str:
    """Where a plane started here listens: ``$IMAGEBENCH_PLANE_HOST``, else loopback."""
    return os.environ.get(PLANE_HOST_ENV, "").strip() or LOOPBACK


def off_loopback() -> bool:
    """Whether a plane started here listens on an address other machines may reach."""
    import ipaddress

    host = plane_host()
    try:
        return host != "localhost" and not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return True  # not an address: the server refuses it, naming the variable


class PlaneUnavailable(RuntimeError):
    """No data plane can run here (pyarrow missing, or the server would not start); ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def flight_missing() -> str | None:
    """Why Arrow Flight cannot be used in this process, or None when it can."""
    try:
        import pyarrow.flight  # noqa: F401
    except ImportError as exc:
        return f"pyarrow.flight is not installed ({exc}); tensor presentation needs it"
    return None


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C while a cleanup runs, then deliver it: a cleanup is never cut in half."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    except ValueError:  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pending:
            if previous is signal.default_int_handler:
                raise KeyboardInterrupt
            if callable(previous):
                previous(signal.SIGINT, None)


class PlaneProcess:
    """``imagebench plane serve`` in a child process, with its own temporary data directory.

    ``start()`` spawns it, reads the URL it prints and waits until it answers; ``close()`` (also
    on exit from ``with``, at interpreter exit, and safe to call twice) stops it and removes its
    data directory. When ``data_dir`` is given it is the caller's: it is kept and only the
    staging area is cleared; otherwise the server makes a temporary one that goes with it.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        startup_timeout: float = STARTUP_TIMEOUT_S,
        command: list[str] | None = None,
        host: str | None = None,
    ) -> None:
        self.host = host or plane_host()
        self.requested_dir = Path(data_dir) if data_dir is not None else None
        self.startup_timeout = startup_timeout
        self.command = command
        self.url: str | None = None
        self.data_dir: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._lock = threading.RLock()
        self._closed = False
        # the key this process's uploads carry; uploads without it (a subject's) are budgeted
        # (imagebench.plane.server.GUEST_BYTES); never in an environment a subject is given
        self.upload_key = secrets.token_hex(16)
        # the read key every call must carry (imagebench.plane.token): the server's environment
        # only, never argv, a run folder or a receipt; a sample is given a token scoped to its ids
        self.read_key = secrets.token_hex(32)

    # ----------------------------------------------------------------- state

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and not self._closed

    @property
    def client(self) -> Client:
        """A :class:`~imagebench.plane.client.Client` for this plane."""
        if self.url is None:
            raise PlaneUnavailable("the plane has not been started")
        from imagebench.plane.client import Client

        return Client(self.url, key=self.upload_key, token=self.read_key)

    def _stderr_tail(self, limit: int = 2000) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        return text[-limit:].strip()

    # ----------------------------------------------------------------- start

    def argv(self) -> list[str]:
        if self.command is not None:
            return list(self.command)
        argv = [
            sys.executable,
            "-m",
            "imagebench.plane",
            "serve",
            "--host",
            self.host,
            "--port",
            "0",
            "--watch-parent",
        ]
        if self.requested_dir is not None:
            argv += ["--data-dir", str(self.requested_dir)]
        return argv

    def start(self) -> PlaneProcess:
        """Spawn the server and wait until it answers; raise :class:`PlaneUnavailable` when it cannot."""
        missing = flight_missing()
        if missing:
            raise PlaneUnavailable(missing)
        with self._lock:
            if self.proc is not None:
                raise RuntimeError("this PlaneProcess was already started")
            try:
                self._spawn()
                self._await_ready()
            except BaseException:
                self.close()
                raise
        return self

    def _spawn(self) -> None:
        from imagebench.plane.protocol import UPLOAD_KEY_ENV
        from imagebench.plane.token import READ_KEY_ENV

        env = {k: v for k, v in os.environ.items() if k not in _WITHHELD_ENV}
        env[UPLOAD_KEY_ENV] = self.upload_key
        env[READ_KEY_ENV] = self.read_key
        self._stderr = tempfile.TemporaryFile(prefix="imagebench-plane-stderr-")
        try:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=env,
                # Its own session: a terminal's Ctrl-C reaches the run, which then stops the plane in order.
                start_new_session=True,
            )
        except OSError as exc:
            raise PlaneUnavailable(f"could not start the plane server: {exc}") from None
        atexit.register(self.close)

    def _await_ready(self) -> None:
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()

        def pump(stream: IO[bytes]) -> None:
            # Read the first lines for us, then drain whatever else it prints so it never blocks.
            for raw in iter(stream.readline, b""):
                lines.put(raw.decode("utf-8", "replace").strip())
            lines.put(None)

        threading.Thread(target=pump, args=(proc.stdout,), daemon=True, name="plane-stdout").start()
        deadline = time.monotonic() + self.startup_timeout

        def next_line(what: str) -> str:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PlaneUnavailable(
                        f"the plane server printed no {what} within {self.startup_timeout:g} s" + self._why_suffix()
                    )
                try:
                    line = lines.get(timeout=min(left, 0.5))
                except queue.Empty:
                    continue
                if line is None:
                    proc.wait(timeout=5)
                    raise PlaneUnavailable(
                        f"the plane server exited with code {proc.returncode} before printing its {what}"
                        + self._why_suffix()
                    )
                if line:
                    return line

        url = next_line("URL")
        if not url.startswith("grpc://"):
            raise PlaneUnavailable(f"the plane server's first line is not a grpc:// URL: {url[:200]!r}")
        self.url = url
        second = next_line("data directory")
        if not second.startswith("data-dir "):
            raise PlaneUnavailable(f"the plane server's second line does not name its data directory: {second[:200]!r}")
        self.data_dir = Path(second[len("data-dir ") :])
        client = self.client
        last: Exception | None = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise PlaneUnavailable(f"the plane server exited with code {proc.returncode}" + self._why_suffix())
            try:
                client.health()
                return
            except Exception as exc:  # not answering yet
                last = exc
                time.sleep(0.1)
        raise PlaneUnavailable(f"the plane server at {url} did not answer within {self.startup_timeout:g} s: {last}")

    def _why_suffix(self) -> str:
        tail = self._stderr_tail()
        return f"; its stderr ends: {tail}" if tail else ""

    # ----------------------------------------------------------------- stop

    def close(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its temporary data directory. Idempotent."""
        with self._lock, _sigint_deferred():
            proc = self.proc
            if proc is not None and proc.poll() is None:
                try:
                    proc.terminate()
                    proc.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=STOP_TIMEOUT_S)
                except ProcessLookupError:
                    pass
            if proc is not None and proc.stdout is not None:
                with contextlib.suppress(OSError):
                    proc.stdout.close()
            self._remove_data()
            if self._stderr is not None:
                with contextlib.suppress(OSError):
                    self._stderr.close()
                self._stderr = None
            self._closed = True
            with contextlib.suppress(Exception):
                atexit.unregister(self.close)

    def _remove_data(self) -> None:
        d = self.data_dir
        if d is None:
            return
        if self.requested_dir is not None:
            # The caller's folder: keep it, but never leave a half-written upload behind.
            shutil.rmtree(d / "staging", ignore_errors=True)
            return
        # The server removes its own folder on a clean stop; this covers one that was killed.
        if d.name.startswith(TEMP_PREFIX) and d.is_dir():
            shutil.rmtree(d, ignore_errors=True)

    def __enter__(self) -> PlaneProcess:
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_plane(data_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> PlaneProcess:
    """Start a plane server process; use it as a context manager so it always stops.

    Raises :class:`PlaneUnavailable` (with the reason) when pyarrow is missing or it will not start.
    """
    return PlaneProcess(data_dir, **kwargs).start()


# --------------------------------------------------------------------------- a run's plane


def block_fingerprint(block: Any) -> str:
    """A digest of one stored block (dtype, shape, bytes): what an overwrite check compares."""
    import numpy as np

    b = np.ascontiguousarray(block)
    h = hashlib.sha256()
    h.update(f"{b.dtype.str}{b.shape}".encode())
    h.update(b.tobytes())
    return h.hexdigest()


class RunPlane:
    """One plane for a whole run: the fixtures of every tensor case, uploaded once, watched for overwrites.

    Each tensor layer's data is uploaded under a fresh random name (``secrets.token_hex``) that
    nobody outside this object learns, so a subject holding the id cannot upload over it. A
    subject's own uploads stay until :meth:`close`.
    """

    def __init__(self, process: PlaneProcess) -> None:
        self.process = process
        # case label -> (fixture object, {layer name: (id, fingerprint)})
        self._uploads: dict[str, tuple[Any, dict[str, tuple[str, str]]]] = {}
        self._case_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    @classmethod
    def start(cls, data_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> RunPlane:
        """Start the plane; raise :class:`PlaneUnavailable` with the reason when it cannot."""
        return cls(start_plane(data_dir, **kwargs))

    @classmethod
    def try_start(cls, data_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> tuple[RunPlane | None, str]:
        """``(plane, "")``, or ``(None, reason)`` when no plane can run here."""
        try:
            return cls.start(data_dir, **kwargs), ""
        except PlaneUnavailable as exc:
            return None, exc.reason

    @property
    def url(self) -> str:
        assert self.process.url is not None
        return self.process.url

    @property
    def data_dir(self) -> Path | None:
        return self.process.data_dir

    @property
    def alive(self) -> bool:
        return self.process.alive

    @property
    def client(self) -> Client:
        """The harness's :class:`~imagebench.plane.client.Client` (its upload key, the run's read key)."""
        return self.process.client

    def token_for(self, ids: Iterable[str]) -> str:
        """A read token for ``ids`` only (and what is uploaded with it): what one sample is given."""
        from imagebench.plane.token import scoped_token

        return scoped_token(self.process.read_key, ids)

    def client_for(self, ids: Iterable[str]) -> Client:
        """What a sample's session gets: no upload key, a token that reads ``ids`` and its own uploads."""
        from imagebench.plane.client import Client

        return Client(self.url, token=self.token_for(ids))

    # The runner's seam (imagebench.runs.runner.Plane): present before a sample, check after it.
    def present(self, case: Case, fixture: Fixture) -> dict[str, str]:
        return self.upload_fixture(case, fixture)

    def after_sample(self, case: Case, fixture: Fixture) -> list[str]:
        """``["fixture-overwritten"]`` when a stored fixture of ``case`` changed during the sample."""
        return [OVERWRITTEN_FLAG] if self.overwritten(case) else []

    def upload_fixture(self, case: Case, fixture: Fixture) -> dict[str, str]:
        """Upload the data behind each of ``case``'s tensor layers; return ``{layer name: id}``.

        Only ``fixture.data`` entries that a tensor layer names are uploaded (never truth, never
        an array layer's data). Calling it again with the same fixture object reuses the uploads,
        also while a first call is still uploading in another thread (it waits for that one).
        """
        with self._lock:
            case_lock = self._case_locks.setdefault(case.label, threading.Lock())
        with case_lock:
            with self._lock:
                known = self._uploads.get(case.label)
                if known is not None and known[0] is fixture:
                    return {name: sid for name, (sid, _) in known[1].items()}
            return self._upload(case, fixture)

    def _upload(self, case: Case, fixture: Fixture) -> dict[str, str]:
        tensor_layers = [layer for layer in case.layers if layer.presentation == "tensor"]
        client = self.client
        uploaded: dict[str, tuple[str, str]] = {}
        for layer in tensor_layers:
            if layer.kind not in ("image", "labels"):
                raise ValueError(
                    f"case {case.label}: layer {layer.name!r} is a {layer.kind} layer; only image and labels "
                    "layers can be presented as tensor"
                )
            if layer.key not in fixture.data:
                raise KeyError(
                    f"case {case.label}: tensor layer {layer.name!r} presents data key {layer.key!r}, which the "
                    f"fixture does not have (data keys: {sorted(fixture.data)})"
                )
            value = fixture.data[layer.key]
            # An ArrayRef goes as ``np.asarray`` reads it (Client.upload): a read-only memory map for
            # an uncompressed file, each chunk paged in as it is sent, else the array loaded once, as
            # its dask form would load it. Not through ``ref.dask()``: dask.array pulls in xarray,
            # pandas and distributed, about two seconds of a run that needs none of them.
            sid = client.upload(
                value,
                secrets.token_hex(16),
                chunks=layer.chunks,
                dim_labels=layer.dim_labels,
                downsample="nearest" if layer.kind == "labels" else "mean",
            )
            ndim = len(client.describe(sid)["shape"])
            uploaded[layer.name] = (sid, block_fingerprint(client.read_chunk(sid, (0,) * ndim)))
        with self._lock:
            self._uploads[case.label] = (fixture, uploaded)
        return {name: sid for name, (sid, _) in uploaded.items()}

    def fixture_ids(self, case: Case) -> dict[str, str]:
        with self._lock:
            known = self._uploads.get(case.label)
        return {} if known is None else {name: sid for name, (sid, _) in known[1].items()}

    def harness_ids(self) -> set[str]:
        """Every id this object uploaded (the fixtures), over all cases."""
        with self._lock:
            return {sid for _, layers in self._uploads.values() for sid, _ in layers.values()}

    def overwritten(self, case: Case) -> list[str]:
        """Layers of ``case`` whose stored corner no longer matches its fingerprint (or is gone).

        Raises :class:`PlaneUnavailable` when the plane itself has stopped (a harness matter, not a flag).
        """
        with self._lock:
            known = self._uploads.get(case.label)
        if known is None:
            return []
        if not self.alive:
            raise PlaneUnavailable("the data plane stopped during the run; its fixtures cannot be checked")
        from pyarrow.flight import FlightServerError

        client = self.client
        changed: list[str] = []
        for name, (sid, fingerprint) in known[1].items():
            try:
                ndim = len(client.describe(sid)["shape"])
                now = block_fingerprint(client.read_chunk(sid, (0,) * ndim))
            except FlightServerError:  # the plane answers that it is gone or unreadable: changed all the same
                now = ""
            if now != fingerprint:
                changed.append(name)
        return changed

    def close(self) -> None:
        self.process.close()
        global _SHARED
        with _SHARED_LOCK:
            if _SHARED is self:
                _SHARED = None

    def __enter__(self) -> RunPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- one plane per viewer

_SHARED: RunPlane | None = None
_SHARED_LOCK = threading.Lock()


def shared_plane() -> RunPlane:
    """This process's plane, started on first use (and again if it died); ``close()`` stops it.

    The napari panel calls this when a viewer first needs a tensor layer and registers
    ``close`` on the viewer's quit. Raises :class:`PlaneUnavailable` when no plane can run.
    """
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is not None and _SHARED.alive:
            return _SHARED
        if _SHARED is not None:
            _SHARED.process.close()
        _SHARED = RunPlane.start()
        return _SHARED
