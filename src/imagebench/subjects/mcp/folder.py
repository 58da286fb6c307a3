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
BRIDGE = r'''"""imagebench MCP bridge: this process's stdin/stdout <-> the case server's Unix socket.

When stdin and stdout are pipes (or sockets), as an MCP client's are, they are handed to the
server, which then reads and writes them itself; this process only holds the socket until the
session ends. Otherwise (or when the server refuses) it relays.
"""
import array
import os
import socket
import stat
import sys
import threading

os.chdir(os.path.dirname(os.path.abspath(__file__)))  # a short relative socket path
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect("server.sock")
except OSError as exc:
    sys.exit(f"imagebench bridge: cannot reach the case server: {exc}")


def piped(fd):
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


if piped(0) and piped(1):
    try:
        sock.sendmsg([b"\x01"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1]))])
        taken = sock.recv(1) == b"\x01"
    except OSError as exc:
        sys.exit(f"imagebench bridge: the case server closed the connection: {exc}")
    if taken:  # the server holds the pipes; this process, the lifeline
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        while sock.recv(1 << 12):
            pass
        sys.exit(0)


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
    data = sock.recv(1 << 20)  # a large result (base64 pixels) in few pieces
    if not data:
        break
    out.write(data)
    out.flush()
'''


class McpFolder:
    """The socket, the bridge and the files ``read_layer(encoding="npy")`` writes, in a fresh
    folder (under ``parent`` when given). At most :data:`READS_KEPT` reads are kept; an older one
    is removed when a new one is written. A read saved with ``keep=True`` (a whole input layer,
    whose pixels never change: :meth:`AgentSession.read_layer` hands the same file out again) is
    not counted among them and stays until the folder goes, at most :data:`KEPT_WHOLE` of them.
    ``ids``: the subject's uid, which owns the socket."""

    READS_KEPT = 16
    KEPT_WHOLE = 16

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
        self._write(self._fd, BRIDGE_NAME, [BRIDGE.encode("utf-8")])
        self._kept: list[str] = []
        self._whole = 0

    @property
    def socket_path(self) -> Path:
        return self.path / SOCKET_NAME

    @staticmethod
    def _write(folder: int, name: str, parts: list[bytes | memoryview]) -> None:
        """``parts`` written in order into a new file ``name`` beneath ``folder``, with one
        ``writev`` where the kernel takes it all (a short write goes on from where it stopped)."""
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder)
        try:
            views = [memoryview(p).cast("B") for p in parts]
            while views:
                done = os.writev(fd, views)
                while views and done >= len(views[0]):
                    done -= len(views[0])
                    views.pop(0)
                if views:
                    views[0] = views[0][done:]
        finally:
            os.close(fd)

    def save_read(self, name: str, arr: Any, *, keep: bool = False) -> str:
        """Write ``arr`` as the ``.npy`` file ``reads/<name>``; returns the path relative to this folder.

        The file is the ``.npy`` header (format 1.0, or 2.0 for a header that needs it, as
        ``np.save`` writes it) and the array's C-order bytes, written straight from the array,
        never through a copy. ``keep``: kept until the folder goes (see the class), when fewer
        than :data:`KEPT_WHOLE` are; else it is counted among the last :data:`READS_KEPT`."""
        import numpy as np
        from numpy.lib import format as npy

        if "/" in name or name.startswith(".") or not name:
            raise ValueError(f"a read's file name must be a plain name, got {name!r}")
        arr = np.require(arr, requirements="C")  # C order, as the header says (a 0-d array stays 0-d)
        if arr.dtype.hasobject:
            raise ValueError(f"a read is numbers, not dtype {arr.dtype}")
        header = npy.header_data_from_array_1_0(arr)
        try:
            head = io_bytes(lambda fh: npy.write_array_header_1_0(fh, header))
        except ValueError:  # a header past 64 KiB (a very long shape): format 2.0, as np.save does
            head = io_bytes(lambda fh: npy.write_array_header_2_0(fh, header))
        self._write(self._reads, name, [head, arr.reshape(-1).view(np.uint8) if arr.size else b""])
        if keep and self._whole < self.KEPT_WHOLE:
            self._whole += 1
            return f"{READS}/{name}"
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


def io_bytes(write: Any) -> bytes:
    """What ``write(file)`` writes to an in-memory file."""
    import io

    buf = io.BytesIO()
    write(buf)
    return buf.getvalue()
