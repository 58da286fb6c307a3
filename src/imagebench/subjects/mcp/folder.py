"""The harness's folder of one served MCP session: the socket, the stdlib bridge, the reads.

It is never the subject's: made by the harness, not writable by the subject (the sandbox shows it
read-only at :data:`MCP_SHOWN`), and written only beneath a descriptor held since it was made,
with ``O_EXCL | O_NOFOLLOW``, so no link a subject plants can redirect a write of the harness's.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.sandbox.limits import SubjectIds

#: where the sandbox shows the folder (read-only)
MCP_SHOWN = "/mcp"
READS = "reads"
SOCKET_NAME = "server.sock"
FOLDER_PREFIX = "imagebench-mcp-"
BRIDGE_NAME = "bridge.py"

#: Runs inside the sandbox with only the standard library: stdin/stdout <-> the server's socket.
BRIDGE = r'''"""imagebench MCP bridge: this process's stdin/stdout <-> the case server's Unix socket."""
import os
import socket
import sys
import threading

os.chdir(os.path.dirname(os.path.abspath(__file__)))  # a short relative socket path
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect("server.sock")
except OSError as exc:
    sys.exit(f"imagebench bridge: cannot reach the case server: {exc}")


def upstream():
    try:
        while True:
            data = os.read(0, 1 << 16)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


threading.Thread(target=upstream, daemon=True).start()
out = sys.stdout.buffer
while True:
    data = sock.recv(1 << 16)
    if not data:
        break
    out.write(data)
    out.flush()
'''



class McpFolder:
    """The socket, the bridge and the files ``read_layer(encoding="npy")`` writes, in a fresh
    folder (under ``parent`` when given). At most :data:`READS_KEPT` reads are kept; an older one
    is removed when a new one is written. ``ids``: the subject's uid, which owns the socket."""

    READS_KEPT = 16

    def __init__(self, parent: Path | None = None, *, ids: SubjectIds | None = None) -> None:
        import tempfile

        from imagebench.sandbox.process import sweep_stale

        if parent is None:
            sweep_stale(FOLDER_PREFIX)  # the folders of harnesses killed before they could clean up
        self.path = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-", dir=parent))
        os.chmod(self.path, 0o755)  # the subject's uid reads it (root's 0700 otherwise)
        self.ids = ids
        self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        os.mkdir(READS, 0o755, dir_fd=self._fd)
        self._reads = os.open(READS, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self._fd)
        self._write(self._fd, BRIDGE_NAME, BRIDGE.encode("utf-8"))
        self._kept: list[str] = []

    @property
    def socket_path(self) -> Path:
        return self.path / SOCKET_NAME

    @staticmethod
    def _write(folder: int, name: str, data: bytes | memoryview) -> None:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)

    def save_read(self, name: str, arr: Any) -> str:
        """Write ``arr`` as ``reads/<name>``; returns the path relative to this folder."""
        import io

        if "/" in name or name.startswith(".") or not name:
            raise ValueError(f"a read's file name must be a plain name, got {name!r}")
        import numpy as np

        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        self._write(self._reads, name, buf.getbuffer())
        self._kept.append(name)
        while len(self._kept) > self.READS_KEPT:
            with suppress(OSError):
                os.unlink(self._kept.pop(0), dir_fd=self._reads)
        return f"{READS}/{name}"

    def remove(self) -> None:
        import shutil

        for fd in (self._reads, self._fd):
            with suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.path, ignore_errors=True)
