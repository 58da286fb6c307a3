"""The two costly, pure steps of the scoring-closure walk, kept across runs.

Walking a case's scoring closure (:mod:`imagebench.runs.closure`) reads the source of every
project function and class it reaches (``inspect.getsource``: tokenising, and parsing the whole
file for a class) and the names each code object loads (``dis``). A fresh process paid both for
about 200 functions and 40 classes on every run, warm fixture cache or not. Both are functions
of bytes alone, so they are kept here, in the fixture cache's folder
(:func:`imagebench.fixtures.cache.cache_root`, under ``closure-v1/``), one entry per source file:

- a source digest is keyed by the sha256 of the file's bytes as read now (the bytes
  ``inspect.getsource`` reads after ``linecache.checkcache``) and by what ``inspect`` locates in
  them: ``f:<qualname>:<first line>`` for a function (its code's first line), ``c:<qualname>``
  for a class;
- the names a code object loads are keyed by the sha256 of the code object itself
  (``marshal.dumps``: its bytecode, names, constants and nested code), which is what ``dis`` reads.

Entries sit under a folder named by the interpreter (``sys.version``) and :data:`VERSION`, since
``inspect`` and ``dis`` differ between versions. The walk itself is not cached: it still follows
the live objects of this process, reads every module file it enters and digests every constant,
so a closure served from here is the closure a fresh walk records, byte for byte. An entry is a
:class:`ClosureCacheEntry` (``imagebench schema closure-cache-entry``) carrying the digest of its
own content; one that does not parse, does not match its digest or names another file is removed
with a :class:`~imagebench.fixtures.cache.CacheWarning` and its values are computed afresh. Writes
are atomic and merge with what another run wrote meanwhile. ``IMAGEBENCH_CACHE=off`` turns it off
with the fixture cache; like it, it is masked from subjects (it lies inside the cache's folder).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import sys
import threading
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from imagebench.records import Record

VERSION = 1
FOLDER = f"closure-v{VERSION}"
Names = tuple[list[tuple[str, int]], list[str], list[str]]


class ClosureCacheEntry(Record):
    """One source file's entry (``version`` 1): the source digests of the functions and classes
    found in it and the names loaded by code compiled from it, keyed as the module says;
    ``digest`` is the sha256 of the rest, as canonical JSON."""

    version: Literal[1] = VERSION
    file: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of the source file's bytes")
    python: str = Field(description="sys.version of the interpreter that computed the values")
    sources: dict[str, str] = Field(default_factory=dict)
    names: dict[str, tuple[list[tuple[str, int]], list[str], list[str]]] = Field(default_factory=dict)
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")


def _content_digest(file: str, python: str, sources: dict[str, str], names: dict[str, Any]) -> str:
    body = {"version": VERSION, "file": file, "python": python, "sources": sources, "names": names}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class _Entry:
    __slots__ = ("file", "sources", "names", "dirty")

    def __init__(self, file: str) -> None:
        self.file = file
        self.sources: dict[str, str] = {}
        self.names: dict[str, Names] = {}
        self.dirty = False


class ClosureCache:
    """Source digests and loaded names under ``root`` (None: computed every time, nothing kept)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self.folder = None if root is None else root / FOLDER / hashlib.sha256(sys.version.encode()).hexdigest()[:16]
        self._lock = threading.RLock()
        self._files: dict[str, str | None] = {}  # path -> sha256 of its bytes (None: unreadable)
        self._entries: dict[str, _Entry] = {}  # file digest -> entry
        self.hits = 0
        self.misses = 0

    # ------------------------------------------------------------------ lookups
    def source_digest(self, obj: Any, compute: Callable[[], str]) -> str:
        """``compute()`` (the digest of ``obj``'s source), kept under its file's bytes and place."""
        place = _place(obj)
        entry = self._entry_for(place[0]) if place is not None else None
        if entry is None or place is None:
            return compute()
        path = place[0]
        # kept only when the file did not change under us
        return self._kept(
            entry, entry.sources, place[1], compute, lambda: self._digest_of(path, fresh=True) == entry.file
        )

    def names(self, code: types.CodeType, compute: Callable[[], Names]) -> Names:
        """``compute()`` (the names ``code`` loads), kept under the digest of the code object."""
        entry = self._entry_for(code.co_filename)
        if entry is None:
            return compute()
        try:
            key = hashlib.sha256(marshal.dumps(code)).hexdigest()
        except ValueError:  # a code object built by hand, holding a constant marshal cannot write
            return compute()
        return self._kept(entry, entry.names, key, compute)

    def _kept(
        self,
        entry: Any,
        table: dict[str, Any],
        key: str,
        compute: Callable[[], Any],
        still_true: Callable[[], bool] | None = None,
    ) -> Any:
        """``table[key]`` (counted a hit), else ``compute()`` (a miss), kept in ``table`` unless
        ``still_true()`` says what it was computed from has changed."""
        with self._lock:
            found = table.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        found = compute()
        if still_true is None or still_true():
            with self._lock:
                table[key] = found
                entry.dirty = True
        return found

    # ------------------------------------------------------------------ entries
    def _digest_of(self, path: str, *, fresh: bool = False) -> str | None:
        with self._lock:
            if not fresh and path in self._files:
                return self._files[path]
        try:
            with open(path, "rb") as fh:
                digest: str | None = hashlib.sha256(fh.read()).hexdigest()
        except (OSError, ValueError):
            digest = None
        with self._lock:
            self._files.setdefault(path, digest)
        return digest

    def _entry_for(self, path: str | None) -> _Entry | None:
        if self.folder is None or not path or not os.path.isabs(path):
            return None
        file = self._digest_of(path)
        if file is None:
            return None
        with self._lock:
            entry = self._entries.get(file)
            if entry is None:
                entry = self._entries[file] = _Entry(file)
                self._load(entry)
            return entry

    def _path(self, file: str) -> Path:
        assert self.folder is not None
        return self.folder / f"{file}.json"

    def _read(self, file: str) -> ClosureCacheEntry | None:
        """The entry on disk for ``file``; None when there is none, or one that cannot be used
        (removed, with a warning)."""
        path = self._path(file)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            return self._refuse(path, f"it cannot be read ({type(exc).__name__})")
        try:
            record = ClosureCacheEntry.model_validate_json(text)
        except ValueError as exc:
            first = str(exc).splitlines()[:3]
            return self._refuse(path, f"it is not a closure cache entry ({' '.join(first)})")
        if record.file != file:
            return self._refuse(path, f"it is the entry of another file (file {record.file[:12]}...)")
        names = {k: [list(map(list, v[0])), list(v[1]), list(v[2])] for k, v in record.names.items()}
        if _content_digest(record.file, record.python, record.sources, names) != record.digest:
            return self._refuse(path, "its content does not match its digest")
        if record.python != sys.version:
            return self._refuse(path, "it was written by another interpreter")
        return record

    def _load(self, entry: _Entry) -> None:
        record = self._read(entry.file)
        if record is None:
            return
        entry.sources.update(record.sources)
        entry.names.update(
            {k: ([(str(n), int(lv)) for n, lv in v[0]], list(v[1]), list(v[2])) for k, v in record.names.items()}
        )

    @staticmethod
    def _refuse(path: Path, why: str) -> None:
        from imagebench.fixtures.cache import CacheWarning

        warnings.warn(
            f"closure cache entry {path} cannot be used: {why}; it is removed and its values are computed again",
            CacheWarning,
            stacklevel=4,
        )
        try:
            path.unlink()
        except OSError:
            pass
        return None

    def flush(self) -> int:
        """Write every entry that gained values (merged with what is on disk now); how many were
        written. Never raises for the disk: a cache that cannot be written is only slower."""
        from imagebench.fixtures.cache import CacheWarning
        from imagebench.records import atomic_write_text

        with self._lock:
            dirty = [e for e in self._entries.values() if e.dirty]
            for e in dirty:
                e.dirty = False
        written = 0
        for entry in dirty:
            on_disk = self._read(entry.file)
            with self._lock:
                sources = {**(on_disk.sources if on_disk else {}), **entry.sources}
                names_t = {**(on_disk.names if on_disk else {}), **entry.names}
            names = {k: [[list(x) for x in v[0]], list(v[1]), list(v[2])] for k, v in sorted(names_t.items())}
            sources = dict(sorted(sources.items()))
            record = ClosureCacheEntry(
                file=entry.file,
                python=sys.version,
                sources=sources,
                names=names,
                digest=_content_digest(entry.file, sys.version, sources, names),
            )
            try:
                atomic_write_text(self._path(entry.file), record.model_dump_json())
                written += 1
            except OSError as exc:
                warnings.warn(
                    f"closure cache {self.folder}: an entry could not be written ({exc})", CacheWarning, stacklevel=2
                )
                break
        return written


def _place(obj: Any) -> tuple[str, str] | None:
    """``(source file, key)`` of what ``inspect.getsource(obj)`` reads for a function or a class:
    the unwrapped object's file, and its code's first line (a function) or its qualified name (a
    class), which is all ``inspect.findsource`` locates it by. None for anything else."""
    import inspect

    try:
        target = inspect.unwrap(obj)
    except ValueError:
        return None
    if inspect.isclass(target):
        key = f"c:{target.__qualname__}"
    elif inspect.isfunction(target):
        key = f"f:{target.__qualname__}:{target.__code__.co_firstlineno}"
    else:
        return None
    try:
        file = inspect.getsourcefile(target)
    except TypeError:
        return None
    return (file, key) if file else None


_CURRENT: ClosureCache | None = None
_CURRENT_LOCK = threading.Lock()


def current() -> ClosureCache:
    """The cache under this process's cache root (the environment's ``IMAGEBENCH_CACHE`` as it is
    now: a changed setting gets a new cache)."""
    global _CURRENT
    from imagebench.fixtures.cache import cache_root

    root = cache_root()
    with _CURRENT_LOCK:
        if _CURRENT is None or _CURRENT.root != root:
            if _CURRENT is not None:
                _CURRENT.flush()
            _CURRENT = ClosureCache(root)
        return _CURRENT


__all__ = ["ClosureCache", "ClosureCacheEntry", "current", "FOLDER", "VERSION"]
