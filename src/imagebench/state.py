"""The user's state folder: what the harness keeps outside every run folder, hidden from subjects.

It holds the journal key (:mod:`imagebench.runs.journal` signs every journal line with it) and the
secrets of runs sealed by default (:mod:`imagebench.runs.sealed`). A run folder can be copied,
published or handed to a subject's author; the state folder never is.

The folder is ``$IMAGEBENCH_STATE`` when set, else ``$XDG_STATE_HOME/imagebench``, else
``~/.local/state/imagebench``. It is created mode 0700 and every file in it 0600. The sandbox masks
it (:func:`imagebench.sandbox.policy.harness_paths`), so a confined subject never sees it; a subject
run with ``--no-sandbox`` runs as the user and could read it (``docs/integrity.md`` says so).
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_ENV = "IMAGEBENCH_STATE"


class StateError(OSError):
    """The state folder or a file in it cannot be made or read (names the path and why)."""


def state_root() -> Path:
    """Where the state folder is (it may not exist yet)."""
    named = os.environ.get(STATE_ENV)
    if named:
        return Path(named).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "imagebench"


def state_dir(*parts: str) -> Path:
    """``state_root()/parts...``, made (0700) when missing; StateError naming it when it cannot be."""
    folder = state_root().joinpath(*parts)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(f"state folder {folder}: cannot be made ({exc.strerror or exc})") from None
    if not folder.is_dir() or folder.is_symlink():
        raise StateError(f"state folder {folder}: not a folder")
    return folder


def read_secret(path: Path) -> bytes | None:
    """The bytes of a state file, None when it does not exist; StateError when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"state file {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_secret(path: Path, data: bytes) -> bytes:
    """Create ``path`` (0600) holding ``data``, unless it exists: then its bytes win (two processes
    making the same file at once agree on one). Returns the bytes the file holds."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        found = read_secret(path)
        if not found:
            raise StateError(f"state file {path}: it exists but is empty") from None
        return found
    except OSError as exc:
        raise StateError(f"state file {path}: cannot be written ({exc.strerror or exc})") from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return data


__all__ = ["STATE_ENV", "StateError", "read_secret", "state_dir", "state_root", "write_secret"]
