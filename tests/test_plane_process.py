"""The plane's process lifetime: start, stop, Ctrl-C, a dead parent, and a plane that cannot start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow.flight")

from imagebench.plane import (  # noqa: E402
    PlaneProcess,
    PlaneUnavailable,
    RunPlane,
    shared_plane,
    start_plane,
)
from imagebench.plane import process as plane_process  # noqa: E402


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0); it has ended all the same.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] == "Z"
    except OSError:
        return True


def _wait_until(predicate, limit_s: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_start_serve_and_stop() -> None:
    with start_plane() as plane:
        assert plane.url is not None and plane.url.startswith("grpc://127.0.0.1:")
        assert plane.data_dir is not None and plane.data_dir.is_dir()
        assert plane.alive
        sid = plane.client.upload(np.arange(12, dtype=np.uint8).reshape(3, 4), "n", chunks=(2, 2))
        assert (plane.data_dir / "arrays" / sid / "plane.json").is_file()
        pid, data_dir = plane.pid, plane.data_dir
    assert pid is not None and _gone(pid)
    assert not data_dir.exists()
    assert not plane.alive
    plane.close()  # a second close is harmless


def test_keyboard_interrupt_in_the_parent_flow_stops_it() -> None:
    seen: dict[str, object] = {}
    with pytest.raises(KeyboardInterrupt):
        with start_plane() as plane:
            seen["pid"], seen["dir"] = plane.pid, plane.data_dir
            raise KeyboardInterrupt
    assert _gone(seen["pid"])  # type: ignore[arg-type]
    assert not Path(seen["dir"]).exists()  # type: ignore[arg-type]


def test_an_exception_stops_it() -> None:
    seen: dict[str, object] = {}
    with pytest.raises(RuntimeError, match="boom"):
        with RunPlane.start() as plane:
            seen["pid"], seen["dir"] = plane.process.pid, plane.data_dir
            raise RuntimeError("boom")
    assert _gone(seen["pid"])  # type: ignore[arg-type]
    assert not Path(seen["dir"]).exists()  # type: ignore[arg-type]


_PARENT = textwrap.dedent(
    """
    import sys, time
    from imagebench.plane import start_plane
    with start_plane() as plane:
        print(plane.pid, plane.data_dir, flush=True)
        while True:
            time.sleep(0.1)
    """
)


def _parent() -> tuple[subprocess.Popen[str], int, Path]:
    proc = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert len(line) == 2, proc.stderr.read() if proc.stderr else ""
    return proc, int(line[0]), Path(line[1])


def test_ctrl_c_in_a_real_parent_process() -> None:
    parent, pid, data_dir = _parent()
    assert data_dir.is_dir() and not _gone(pid)
    parent.send_signal(signal.SIGINT)
    parent.wait(timeout=60)
    assert parent.returncode != 0  # it died of the KeyboardInterrupt, after cleaning up
    assert _gone(pid)
    assert not data_dir.exists()


def test_a_killed_parent_does_not_leave_the_plane_behind() -> None:
    parent, pid, data_dir = _parent()
    parent.kill()  # no cleanup code runs in the parent at all
    parent.wait(timeout=60)
    # The server watches its parent and stops by itself, removing its temporary folder.
    assert _wait_until(lambda: _gone(pid) and not data_dir.exists())


def test_serve_command_prints_the_url_first_and_stops_on_sigterm(tmp_path: Path) -> None:
    keep = tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-m", "imagebench.plane", "serve", "--port", "0", "--data-dir", str(keep)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first.startswith("grpc://127.0.0.1:")
        assert proc.stdout.readline().strip() == f"data-dir {keep}"
        from imagebench.plane import Client

        assert _wait_until(lambda: _answers(Client(first)))
        Client(first).upload(np.zeros((4, 4), np.uint8), "kept", chunks=(4, 4))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert (keep / "arrays").is_dir()  # a folder the caller named is the caller's: kept
    assert not (keep / "staging").exists()  # only the staging area goes


def _answers(client) -> bool:  # type: ignore[no-untyped-def]
    try:
        return bool(client.health()["ok"])
    except Exception:
        return False


def test_a_server_that_exits_is_unavailable_with_its_reason() -> None:
    failing = [sys.executable, "-c", "import sys; sys.stderr.write('no luck here'); sys.exit(3)"]
    with pytest.raises(PlaneUnavailable, match="exited with code 3.*no luck here"):
        PlaneProcess(command=failing).start()
    silent = [sys.executable, "-c", "print('hello'); import time; time.sleep(30)"]
    with pytest.raises(PlaneUnavailable, match="not a grpc:// URL"):
        PlaneProcess(command=silent, startup_timeout=20).start()
    plane, reason = RunPlane.try_start(command=failing)
    assert plane is None and "exited with code 3" in reason
    with pytest.raises(PlaneUnavailable, match="could not start"):
        PlaneProcess(command=["/nonexistent/imagebench-plane"]).start()


def test_missing_pyarrow_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.flight", None)  # import pyarrow.flight now raises ImportError
    with pytest.raises(PlaneUnavailable, match="pyarrow.flight is not installed"):
        start_plane()


def test_shared_plane_is_one_lazily_started_plane() -> None:
    try:
        first = shared_plane()
        assert shared_plane() is first and first.alive
        first.close()
        assert not first.alive and first.data_dir is not None and not first.data_dir.exists()
        second = shared_plane()
        assert second is not first and second.alive
    finally:
        if plane_process._SHARED is not None:
            plane_process._SHARED.close()
    assert plane_process._SHARED is None
