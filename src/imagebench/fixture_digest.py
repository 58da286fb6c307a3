"""The digest of a built fixture: every byte of its data and truth, in one canonical form.

A case fingerprint digests how a fixture is *made* (the builder's source, seed and params). That
misses whatever the builder reaches beyond its own source: a helper it calls, a library that draws
other random numbers, a file it reads. This module digests what the fixture *is* once built, so
none of those can change the pixels a subject sees, or the truth it is scored against, unseen.
The same digest serves as a cache key for a built fixture and as a check that a sample did not
alter the truth it was handed.

Each value is fed to one sha256 as a tagged, length-prefixed record, so two different values can
never produce the same stream:

- an array (an ndarray, an :class:`~imagebench.refs.ArrayRef` such as ``NpzRef``/``FileRef``, or
  anything numpy reads through ``__array__``): its dtype (little-endian), shape and C-order bytes.
  A numpy scalar is a 0-d array, so ``np.float32(1)`` and ``1.0`` differ;
- a mapping: its keys (strings) sorted, each followed by its value; a list or tuple: its items;
- None, a bool, an int, a float (its IEEE-754 bytes, so NaN and infinities have a form too), a
  string (UTF-8), bytes; a pydantic model as its JSON dump.

Anything else has no stable byte form and raises :class:`~imagebench.digest.FingerprintError`.
Big arrays are hashed in place: a C-contiguous little-endian array is read through a byte view and
never copied; any other array is copied a block of rows at a time.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from imagebench.digest import (
    PREFIX,
    FingerprintError,
    canonical_json,
    digest_json,
    scrub,
)

if TYPE_CHECKING:
    from imagebench.fixture import Fixture

# How many bytes of a non-contiguous (or byte-swapped) array are copied at once.
_BLOCK = 64 << 20


def _record(h: Any, tag: bytes, payload: bytes | memoryview) -> None:
    h.update(tag)
    h.update(len(payload).to_bytes(8, "little"))
    h.update(payload)


def _dtype_token(dtype: np.dtype) -> tuple[str, np.dtype]:
    """``(canonical dtype text, the dtype its bytes are hashed in)``: plain dtypes in little-endian."""
    if dtype.fields is None and dtype.subdtype is None:
        little = dtype.newbyteorder("<") if dtype.byteorder in ">=" else dtype
        return little.str, little
    return canonical_json(np.lib.format.dtype_to_descr(dtype)), dtype


def _feed_array(h: Any, value: Any, where: str) -> None:
    try:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    except Exception as exc:  # an ArrayRef whose file is gone, a reader that fails
        raise FingerprintError(f"{where}: cannot be read as an array ({type(exc).__name__}: {scrub(str(exc))})") from None
    if arr.dtype.hasobject:
        raise FingerprintError(f"{where}: an array of Python objects has no stable byte form")
    token, little = _dtype_token(arr.dtype)
    _record(h, b"A", canonical_json({"dtype": token, "shape": list(arr.shape)}).encode("ascii"))
    flat = arr if arr.ndim else arr.reshape(1)
    h.update(int(arr.nbytes).to_bytes(8, "little"))
    if flat.flags.c_contiguous and flat.dtype == little:
        h.update(flat.reshape(-1).view(np.uint8))
        return
    row_bytes = max(1, flat[0].nbytes if len(flat) else 1)
    step = max(1, _BLOCK // row_bytes)
    for start in range(0, len(flat), step):
        block = np.ascontiguousarray(flat[start : start + step], dtype=little)
        h.update(block.reshape(-1).view(np.uint8))
        del block  # one block alive at a time


def _feed(h: Any, value: Any, where: str) -> None:
    if isinstance(value, (np.ndarray, np.generic)):  # first: np.float64 is also a float
        _feed_array(h, value, where)
    elif value is None:
        _record(h, b"N", b"")
    elif isinstance(value, bool):
        _record(h, b"B", b"\x01" if value else b"\x00")
    elif isinstance(value, int):
        _record(h, b"I", str(int(value)).encode("ascii"))
    elif isinstance(value, float):
        _record(h, b"F", struct.pack("<d", value))
    elif isinstance(value, str):
        try:
            _record(h, b"S", value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise FingerprintError(f"{where}: not valid UTF-8 text ({exc.reason} at character {exc.start})") from None
    elif isinstance(value, (bytes, bytearray)):
        _record(h, b"Y", bytes(value))
    elif isinstance(value, Mapping):
        keys = list(value)
        for k in keys:
            if not isinstance(k, str):
                raise FingerprintError(f"{where}: key {k!r} is a {type(k).__name__}, expected a string")
        _record(h, b"M", len(keys).to_bytes(8, "little"))
        for k in sorted(keys):
            _record(h, b"K", k.encode("utf-8", "surrogatepass"))
            _feed(h, value[k], f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        _record(h, b"L", len(value).to_bytes(8, "little"))
        for i, item in enumerate(value):
            _feed(h, item, f"{where}[{i}]")
    elif hasattr(type(value), "__array__"):
        _feed_array(h, value, where)
    elif callable(getattr(value, "model_dump", None)) and hasattr(type(value), "model_fields"):
        _feed(h, value.model_dump(mode="json"), where)
    else:
        raise FingerprintError(f"{where}: a {type(value).__name__} has no stable byte form")


def value_digest(value: Any, where: str = "value") -> str:
    """``"sha256:<hex>"`` of one data or truth value in the canonical form above."""
    h = hashlib.sha256()
    _feed(h, value, where)
    return PREFIX + h.hexdigest()


def built_parts(fixture: Fixture, label: str | None = None) -> dict[str, str]:
    """``{"data:<key>": digest, "truth:<key>": digest}`` for every value of a built fixture.

    ``label`` names the case in errors (default: the fixture's own label).
    """
    name = label or (fixture.label if fixture.skill_id or fixture.case_id else "the fixture")
    parts: dict[str, str] = {}
    for role, values in (("data", fixture.data), ("truth", fixture.truth)):
        for key in sorted(values):
            if not isinstance(key, str):
                raise FingerprintError(f"{role} of {name}: key {key!r} is a {type(key).__name__}, expected a string")
            parts[f"{role}:{key}"] = value_digest(values[key], f"built {role} {key!r} of {name}")
    return parts


def digest_of_parts(parts: Mapping[str, str]) -> str:
    """The whole-fixture digest from :func:`built_parts` (what :func:`built_fixture_digest` returns)."""
    return digest_json(dict(parts))


def built_fixture_digest(fixture: Fixture) -> str:
    """``"sha256:<hex>"`` over every data and truth value of ``fixture``, keys sorted.

    Equal for two fixtures exactly when they hold the same keys with the same bytes (dtype, shape
    and C-order content for arrays). Provenance, description and tolerances are not part of it.
    """
    return digest_of_parts(built_parts(fixture))


__all__ = ["built_fixture_digest", "built_parts", "digest_of_parts", "value_digest"]
