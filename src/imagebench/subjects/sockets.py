"""A Unix socket of the harness's, in a folder of the harness's, that a sandboxed subject reaches.

Both harness channels a command subject talks to live on one: the MCP session
(:class:`imagebench.subjects.mcp.server.SocketServer`) and the ``skill`` tool
(:class:`imagebench.subjects.skilltool.SkillServer`). The folder is shown read-only in the
sandbox, so the subject can connect but never replace the socket or plant a link beside it.
"""

from __future__ import annotations

import os
import socket
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.sandbox.limits import SubjectIds


def listen_unix(path: Path, ids: SubjectIds | None = None, *, backlog: int = 4, blocking: bool = False) -> socket.socket:
    """A listening socket at ``path``, in a folder of the harness's, readable and writable by its
    owner only: the subject's uid (``ids``) when the harness is root, else the harness's user.

    It is bound through the folder's descriptor (``/proc/self/fd/N/name``): no link is followed,
    and any depth fits ``sockaddr_un``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        with suppress(FileNotFoundError):
            os.unlink(path.name, dir_fd=folder)
        sock.bind(f"/proc/self/fd/{folder}/{path.name}")
        os.chmod(path.name, 0o600, dir_fd=folder)  # the folder is the harness's: nothing else is here
        if ids is not None:
            os.chown(path.name, ids.uid, ids.gid, dir_fd=folder)
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(folder)
    sock.listen(backlog)
    sock.setblocking(blocking)
    return sock
