"""The bridge's stdin and stdout handed to the server: one process hop fewer on every call.

An agent's MCP client starts the stdlib bridge (``/mcp/bridge.py``) and speaks JSON-RPC on its
stdin and stdout, two pipes. Relaying, the bridge wakes twice a call (a request in, an answer
out), each a copy through a Python thread of the sandbox's. Instead the bridge offers the two
pipes themselves: the first byte it sends on the socket is :data:`OFFER` with the two descriptors
attached (``SCM_RIGHTS``); the server takes them when they are what a client's pipes are and
answers :data:`TAKEN`, then reads requests from the client's pipe and writes answers into the
client's pipe itself. The bridge then only holds its socket (the session's lifeline: the session
ends when it closes, and the bridge when the session does). Anything else is :data:`REFUSED`
(the bridge relays as before) or, a first byte that is not the offer, the start of an ordinary
JSON-RPC stream (a client that connects to the socket itself).

What the harness takes from a subject here is two descriptors, never a path: it checks each with
``fstat`` and ``fcntl`` on the descriptor (a FIFO or a socket, the first open for reading, the
second for writing; a regular file, a directory, a device, a third descriptor or one alone is
refused and every descriptor received is closed), reads and writes them non-blocking (a client
that never reads its answers stalls its own session only) and reads at most the server's
``MAX_MESSAGE`` a line, as on the socket. It writes only the answers it would have written on the
socket, into a pipe the subject could write itself.
"""

from __future__ import annotations

import array
import os
import socket
import stat
from contextlib import suppress
from typing import Any

import anyio
from anyio.abc import ByteStream

__all__ = ["OFFER", "REFUSED", "TAKEN", "PipeStream", "first_contact"]

OFFER = b"\x01"
TAKEN = b"\x01"
REFUSED = b"\x00"
#: room for the two descriptors an offer carries, and one more (so that three are seen, and refused)
_ROOM = socket.CMSG_SPACE(3 * array.array("i").itemsize)


def received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors an ``SCM_RIGHTS`` message carried (all of them, to be kept or closed)."""
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(data[: len(data) - len(data) % got.itemsize])
            fds.extend(got)
    return fds


def usable_pipes(fds: list[int]) -> str | None:
    """Why ``fds`` are not a client's stdin and stdout (None: they are)."""
    if len(fds) != 2:
        return f"two descriptors are offered, not {len(fds)}"
    for fd, want, name in ((fds[0], (os.O_RDONLY, os.O_RDWR), "stdin"), (fds[1], (os.O_WRONLY, os.O_RDWR), "stdout")):
        try:
            mode = os.fstat(fd).st_mode
            access = _flags(fd) & os.O_ACCMODE
        except OSError as exc:
            return f"{name}: {exc.strerror}"
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return f"{name} is not a pipe or a socket"
        if access not in want:
            return f"{name} is not open for {'reading' if name == 'stdin' else 'writing'}"
    return None


def _flags(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL)


async def first_contact(raw: socket.socket, *, take: bool = True) -> tuple[list[int] | None, bytes]:
    """The connection's first byte read from ``raw`` (a non-blocking accepted socket), with what it
    carried: ``(fds, b"")`` when it was an offer the server takes (:data:`TAKEN` sent), else
    ``(None, first)``, ``first`` being the byte the stream starts with (empty: an offer refused,
    :data:`REFUSED` sent, or the end of the stream). Descriptors not taken are closed; with
    ``take=False`` every offer is refused."""
    while True:
        await anyio.wait_readable(raw)
        try:
            data, ancillary, _flags_, _ = raw.recvmsg(1, _ROOM)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            return None, b""
        break
    fds = received_fds(ancillary)
    if take and data == OFFER and fds and usable_pipes(fds) is None:
        try:
            for fd in fds:
                os.set_blocking(fd, False)
                os.set_inheritable(fd, False)
            raw.send(TAKEN)
        except OSError:
            _close(fds)
            return None, b""
        return fds, b""
    _close(fds)
    if data == OFFER:
        with suppress(OSError):
            raw.send(REFUSED)
        return None, b""
    return None, data


def _close(fds: list[int]) -> None:
    for fd in fds:
        with suppress(OSError):
            os.close(fd)


class PipeStream(ByteStream):
    """A byte stream over two non-blocking descriptors: ``reading`` (the client's requests) and
    ``writing`` (its answers). Both are closed with the stream."""

    def __init__(self, reading: int, writing: int) -> None:
        self.reading, self.writing = reading, writing
        self._closed = False

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self.reading, max_bytes)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_readable(self.reading)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            return data

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                done = os.write(self.writing, view)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(self.writing)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            view = view[done:]

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            for fd in {self.reading, self.writing}:
                anyio.notify_closing(fd)  # a task waiting on it wakes (ClosedResourceError), never on a reused number
                with suppress(OSError):
                    os.close(fd)

    @property
    def extra_attributes(self) -> Any:
        return {}
