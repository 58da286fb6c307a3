"""The run journal and the run lock: what makes a run folder resumable.

``journal.jsonl`` in a run folder is an append-only log, one JSON object per line, each line
flushed and fsync'd before the run goes on:

- ``start`` when a run begins, ``resume`` each time ``imagebench run --resume`` takes it up again,
  ``end`` when a pass over the run finished (``complete`` says whether every unit is done);
- ``unit`` for every finished ``(case, sample)``: its label, sample, status, the summary's path
  relative to the run folder and the sha256 of the summary's bytes.

The order of writes is what makes a resume safe: a unit's ``summary.json`` is written atomically
(and is the last file of its sample folder) *before* its journal line. So a run killed at any
moment leaves, for each unit, either a complete summary or none; at worst a complete summary
whose journal line never made it (the resume keeps it and writes the line), or a torn last
journal line (dropped on the next open). A journal line whose digest no longer matches its
summary means the summary was changed afterwards: the unit is run again.

:class:`RunLock` is an exclusive ``flock`` on ``<run>/.lock``, held by whoever writes the run,
so two processes never resume the same folder at once. A killed process releases it.
"""

from __future__ import annotations

import hashlib
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from imagebench.records import Record

if TYPE_CHECKING:
    from imagebench.records import SampleSummary

JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = ".lock"
JOURNAL_SCHEMA_VERSION = 1

Event = Literal["start", "resume", "unit", "end"]


class JournalError(ValueError):
    """The journal cannot be read (names the file, the line and what was expected)."""


class RunLocked(RuntimeError):
    """Another process holds the run folder's lock."""


class JournalEntry(Record):
    """One line of ``journal.jsonl``."""

    schema_version: Literal[1] = JOURNAL_SCHEMA_VERSION
    event: Event
    time: str
    pid: int | None = None
    label: str | None = None
    sample: int | None = None
    status: str | None = None
    summary: str | None = None  # path of the unit's summary.json, relative to the run folder
    sha256: str | None = None  # of the summary's bytes
    detail: dict[str, Any] | None = None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- writing


class Journal:
    """An open ``journal.jsonl``: :meth:`append` writes one line and fsyncs it. Thread-safe."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self._lock = threading.Lock()

    @classmethod
    def open(cls, run_dir: str | os.PathLike[str]) -> Journal:
        """Open (or create) the run's journal for appending; a torn last line is cut off first."""
        path = Path(run_dir) / JOURNAL_NAME
        created = not path.exists()
        if not created:
            _cut_torn_tail(path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if created:
            _fsync_dir(path.parent)
        return cls(path, fd)

    def append(self, event: Event, **fields: Any) -> JournalEntry:
        entry = JournalEntry(event=event, time=_now(), pid=os.getpid(), **fields)
        line = (entry.model_dump_json(exclude_none=True) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                raise JournalError(f"{self.path}: the journal is closed")
            view = memoryview(line)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        return entry

    def unit(self, run_dir: Path, summary_path: Path, summary: SampleSummary, data: bytes) -> JournalEntry:
        """The line for a finished unit, once its summary (``data`` are its bytes) is on disk."""
        return self.append(
            "unit",
            label=summary.label,
            sample=summary.sample,
            status=summary.status,
            summary=summary_path.relative_to(run_dir).as_posix(),
            sha256=digest(data),
        )

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cut_torn_tail(path: Path) -> None:
    """Truncate a last line that has no newline (a write cut short by a kill)."""
    with open(path, "rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        # find the last newline
        pos = size - 1
        block = 4096
        keep = 0
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())


# --------------------------------------------------------------------------- reading


def read_journal(path: str | os.PathLike[str]) -> list[JournalEntry]:
    """Every complete line of a journal; a torn last line is ignored, any other bad line raises."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise JournalError(f"{path}: cannot be read ({exc})") from None
    lines = raw.split(b"\n")
    lines.pop()  # after the last newline: b"" for a clean file, else a line cut short by a kill
    entries: list[JournalEntry] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entries.append(JournalEntry.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(line)"
            raise JournalError(
                f"{path}: line {number}: field {where!r}: {first['msg']} (expected one JournalEntry JSON object per line)"
            ) from None
    return entries


# --------------------------------------------------------------------------- the lock


class RunLock:
    """An exclusive, non-blocking ``flock`` on ``<run>/.lock`` that records the holder's pid."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock, documented
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
            finally:
                os.close(fd)
            raise RunLocked(
                f"{self.path.parent} is being written by another imagebench process (pid {holder}); "
                "wait for it to finish or stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
