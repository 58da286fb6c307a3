"""A content-addressed cache of built procedural fixtures.

Every run used to rebuild every procedural fixture from its seed. A built fixture is now kept
once under a key that covers everything it is made from:

- the case's definition fingerprint (builder source, params, tolerances, prompt, layers, ...),
- the seed it is built from,
- the source of the whole ``imagebench.cases`` package (a builder's helpers live there) and the
  versions of the libraries builders draw with (numpy, scipy, scikit-image),

in ``$IMAGEBENCH_CACHE`` (default: ``$XDG_CACHE_HOME/imagebench/fixtures``, else
``~/.cache/imagebench/fixtures``; ``IMAGEBENCH_CACHE=off`` turns it off). An entry is a folder
holding each array as ``.npy`` (memory-mapped on load) and ``entry.json`` (the rest of the
fixture, and the digest of what was built, :func:`imagebench.fixture_digest.built_fixture_digest`).
On load the digest is computed again: an entry that is corrupted, truncated or does not match is
removed with a warning and the fixture is built afresh, never used. Two runs filling one entry
at once each write a private folder and rename it into place; the first one wins.

Fixtures of a sealed run (built from a secret-derived seed) are never cached. The cache holds
truth: the sandbox hides it from subjects (:mod:`imagebench.sandbox`).
"""

from __future__ import annotations

import base64
import functools
import os
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from imagebench.records import Record

if TYPE_CHECKING:
    from imagebench.fixture import Fixture

CACHE_ENV = "IMAGEBENCH_CACHE"
CACHE_VERSION = 1
ENTRY = "entry.json"
_OFF = ("off", "0", "no", "none", "false")


class CacheEntry(Record):
    """``entry.json`` of a cache entry (``version`` 1): the fixture's fields with each array
    replaced by ``{"$a": i}`` (``a<i>.npy`` beside it), and the digest of what was built."""

    version: Literal[1] = CACHE_VERSION
    label: str
    seed: int
    built: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    arrays: int = Field(ge=0)
    fixture: dict[str, Any]


class NotCacheable(TypeError):
    """A fixture value has no form the cache can store and give back unchanged."""


class CacheWarning(UserWarning):
    """A cache entry could not be used (it is rebuilt) or written (the run goes on)."""


def cache_root() -> Path | None:
    """Where entries live, or None when the cache is turned off."""
    value = os.environ.get(CACHE_ENV)
    if value is not None:
        return None if value.strip().lower() in _OFF or not value.strip() else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "imagebench" / "fixtures"


@functools.lru_cache(maxsize=1)
def _environment_digest() -> str:
    """The source of ``imagebench.cases`` and the versions builders draw with, as one digest."""
    import importlib.util

    from imagebench.digest import digest_json

    spec = importlib.util.find_spec("imagebench.cases")  # found, not imported: the cases sit above
    folder = Path(next(iter(spec.submodule_search_locations or []))).resolve() if spec else Path(".")
    sources = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py"))}
    versions = {}
    for dist in ("numpy", "scipy", "scikit-image"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return digest_json({"sources": sources, "versions": versions})


def entry_key(definition: str, seed: int) -> str:
    """The hex key of a case whose definition fingerprint is ``definition``, built from ``seed``
    (:func:`imagebench.fingerprint.definition_fingerprint`)."""
    from imagebench.digest import digest_json

    return digest_json(
        {"version": CACHE_VERSION, "definition": definition, "seed": seed, "environment": _environment_digest()}
    ).split(":", 1)[1]


# --------------------------------------------------------------------------- encoding


def _encode(value: Any, arrays: list[np.ndarray], where: str) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise NotCacheable(f"{where}: an array of Python objects")
        arrays.append(value)
        return {"$a": len(arrays) - 1}
    if isinstance(value, np.generic):
        return {"$s": value.dtype.str, "v": value.item()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise NotCacheable(f"{where}: a mapping with keys that are not text")
        return {"$m": [[k, _encode(v, arrays, f"{where}.{k}")] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"$t": [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return {"$l": [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]}
    raise NotCacheable(f"{where}: a {type(value).__name__}")


def _decode(value: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(value, dict):
        if "$a" in value:
            return arrays[value["$a"]]
        if "$s" in value:
            return np.dtype(value["$s"]).type(value["v"])
        if "$b" in value:
            return base64.b64decode(value["$b"])
        if "$m" in value:
            return {k: _decode(v, arrays) for k, v in value["$m"]}
        if "$t" in value:
            return tuple(_decode(v, arrays) for v in value["$t"])
        if "$l" in value:
            return [_decode(v, arrays) for v in value["$l"]]
        raise ValueError(f"unknown entry {sorted(value)}")
    return value


# --------------------------------------------------------------------------- entries


def _fixture_fields(fixture: Fixture) -> dict[str, Any]:
    return {f.name: getattr(fixture, f.name) for f in fields(fixture)}


def present(definition: str, seed: int, root: Path | None = None) -> bool:
    """Whether an entry for this definition and seed is on disk (not yet checked: :func:`load` checks)."""
    root = root if root is not None else cache_root()
    return root is not None and (root / entry_key(definition, seed) / ENTRY).is_file()


def load(label: str, definition: str, seed: int, root: Path | None = None) -> Fixture | None:
    """The cached fixture of case ``label`` (definition fingerprint ``definition``) built from
    ``seed``, or None (no entry, the cache is off, or an entry that failed its digest: removed,
    with a :class:`CacheWarning`)."""
    from imagebench.fixture import Fixture
    from imagebench.fixture_digest import built_fixture_digest

    root = root if root is not None else cache_root()
    if root is None:
        return None
    folder = root / entry_key(definition, seed)
    if not (folder / ENTRY).is_file():
        return None
    try:
        meta = CacheEntry.model_validate_json((folder / ENTRY).read_text(encoding="utf-8"))
        arrays = [np.load(folder / f"a{i}.npy", mmap_mode="r", allow_pickle=False) for i in range(meta.arrays)]
        values = _decode(meta.fixture, arrays)
        fixture = Fixture(**values)
        if built_fixture_digest(fixture) != meta.built:
            raise ValueError("its content does not match the digest it was stored with")
    except Exception as exc:
        warnings.warn(
            f"fixture cache entry {folder} for {label} (seed {seed}) cannot be used ({type(exc).__name__}: "
            f"{exc}); it is removed and the fixture is built again",
            CacheWarning,
            stacklevel=2,
        )
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return fixture


def store(label: str, definition: str, seed: int, fixture: Fixture, root: Path | None = None) -> Path | None:
    """Keep ``fixture`` (case ``label`` built from ``seed``); the path of its entry, or None when
    the cache is off or the fixture holds a value the cache cannot store. Never raises for the disk."""
    from imagebench.fixture_digest import built_fixture_digest

    root = root if root is not None else cache_root()
    if root is None:
        return None
    folder = root / entry_key(definition, seed)
    if (folder / ENTRY).is_file():
        return folder
    arrays: list[np.ndarray] = []
    try:
        encoded = _encode(_fixture_fields(fixture), arrays, label)
        meta = CacheEntry(label=label, seed=seed, built=built_fixture_digest(fixture), arrays=len(arrays), fixture=encoded)
    except (NotCacheable, ValueError):  # a value with no stored form (ValueError: pydantic, a digest)
        return None
    tmp: Path | None = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=root))
        for i, arr in enumerate(arrays):
            np.save(tmp / f"a{i}.npy", np.ascontiguousarray(arr), allow_pickle=False)
        (tmp / ENTRY).write_text(meta.model_dump_json(), encoding="utf-8")
        try:
            os.rename(tmp, folder)  # atomic; fails when another writer got there first
        except OSError:
            if not (folder / ENTRY).is_file():
                raise
        else:
            tmp = None
        return folder
    except OSError as exc:
        warnings.warn(f"fixture cache {root}: an entry for {label} could not be written ({exc})", CacheWarning, stacklevel=2)
        return None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def info(root: Path | None = None) -> dict[str, Any]:
    """``{"root", "entries", "bytes"}`` of the cache (root None when it is off)."""
    root = root if root is not None else cache_root()
    if root is None or not root.is_dir():
        return {"root": None if root is None else str(root), "entries": 0, "bytes": 0}
    entries = [p for p in root.iterdir() if p.is_dir() and (p / ENTRY).is_file()]
    size = sum(f.stat().st_size for p in entries for f in p.iterdir() if f.is_file())
    return {"root": str(root), "entries": len(entries), "bytes": size}


def clear(root: Path | None = None) -> int:
    """Remove every entry (and leftovers of interrupted writes); return how many entries went."""
    root = root if root is not None else cache_root()
    if root is None or not root.is_dir():
        return 0
    removed = 0
    for path in root.iterdir():
        if path.is_dir():
            removed += (path / ENTRY).is_file()
            shutil.rmtree(path, ignore_errors=True)
    return removed
