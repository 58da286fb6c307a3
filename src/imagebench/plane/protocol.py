"""The data plane's wire vocabulary: ids, upload descriptors, tickets and the chunk grid.

Pure Python and numpy only (no pyarrow), so the server, the client and the tests share one
definition of what a valid request is. Every check raises :class:`ProtocolError` with a message
that names the field and what was expected; the server turns it into a Flight error.

Messages (see docs/plane.md):

- upload descriptor (``FlightDescriptor.for_command``), JSON::

    {"op": "upload", "version": 1, "name": str, "shape": [int], "dtype": str,
     "chunks": [int], "dim_labels": [str] | null, "downsample": "mean" | "nearest"}

- upload stream: one record batch per chunk with :data:`CHUNK_FIELDS` (``index``: the chunk's
  position in the grid, ``data``: its C-order bytes);
- chunk ticket (``do_get``), JSON: ``{"id": str, "level": int, "chunk": [int]}``;
- describe (``get_flight_info`` on ``FlightDescriptor.for_path(id)``): the schema metadata key
  ``imagebench.plane`` holds the JSON of :class:`ArrayMeta`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

PROTOCOL_VERSION = 1
ID_PREFIX = "cache_"
MAX_NAME_LENGTH = 200
MAX_NDIM = 8
# A chunk travels as one message; keep it well below gRPC's and Arrow's per-message limits.
MAX_CHUNK_BYTES = 64 * 1024 * 1024
# Axes with one of these labels are spatial and get halved in the pyramid.
SPATIAL_LABELS: frozenset[str] = frozenset({"x", "y", "z"})
DOWNSAMPLE_METHODS: tuple[str, ...] = ("mean", "nearest")
ALLOWED_DTYPES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)
META_KEY = b"imagebench.plane"
# Column names of an upload batch (and of a chunk returned by do_get: only ``data``).
#: The environment variable the plane process reads its upload key from (popped at once).
UPLOAD_KEY_ENV = "IMAGEBENCH_PLANE_UPLOAD_KEY"
INDEX_FIELD = "index"
DATA_FIELD = "data"
CHUNK_FIELDS: tuple[str, ...] = (INDEX_FIELD, DATA_FIELD)


class ProtocolError(ValueError):
    """A request does not follow the plane's protocol (names the field and what was expected)."""


def source_id(name: str) -> str:
    """The id an upload under ``name`` is stored as: a one-way hash of the name.

    Knowing an id does not tell anyone the name, so it cannot be used to upload over it.
    """
    return ID_PREFIX + hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]


def is_valid_id(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) == len(ID_PREFIX) + 12
        and value.startswith(ID_PREFIX)
        and all(c in "0123456789abcdef" for c in value[len(ID_PREFIX) :])
    )


def check_id(value: Any) -> str:
    if not is_valid_id(value):
        raise ProtocolError(f"field 'id': expected {ID_PREFIX!r} followed by 12 hex digits, got {value!r}")
    return str(value)


def check_name(name: Any) -> str:
    """A source name: non-empty text of at most MAX_NAME_LENGTH characters, no path separators."""
    if not isinstance(name, str):
        raise ProtocolError(f"field 'name': expected a string, got {type(name).__name__}")
    if not name:
        raise ProtocolError("field 'name': must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise ProtocolError(f"field 'name': {len(name)} characters, at most {MAX_NAME_LENGTH} allowed")
    if "/" in name or "\\" in name:
        raise ProtocolError(f"field 'name': {name[:40]!r} contains a path separator ('/' or '\\')")
    if name in (".", ".."):
        raise ProtocolError(f"field 'name': {name!r} is not allowed")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ProtocolError("field 'name': contains a control character")
    return name


def _int_list(value: Any, field: str, *, minimum: int) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)):
        raise ProtocolError(f"field {field!r}: expected a list of integers, got {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ProtocolError(f"field {field!r}[{i}]: expected an integer, got {v!r}")
        if int(v) < minimum:
            raise ProtocolError(f"field {field!r}[{i}]: expected an integer >= {minimum}, got {int(v)}")
        out.append(int(v))
    return tuple(out)


def check_dtype(value: Any) -> np.dtype[Any]:
    try:
        dt = np.dtype(value)
    except TypeError:
        raise ProtocolError(f"field 'dtype': {value!r} is not a numpy dtype") from None
    if dt.name not in ALLOWED_DTYPES or dt.byteorder == ">":
        raise ProtocolError(f"field 'dtype': {value!r} is not supported; expected one of {list(ALLOWED_DTYPES)}")
    return dt


def spatial_axes(ndim: int, dim_labels: Sequence[str] | None) -> tuple[int, ...]:
    """The axes the pyramid halves: those labelled x/y/z, else the last two (or the only one)."""
    if dim_labels is not None:
        axes = tuple(i for i, label in enumerate(dim_labels) if label.lower() in SPATIAL_LABELS)
        if axes:
            return axes
    return tuple(range(max(0, ndim - 2), ndim))


@dataclass(frozen=True)
class ArrayMeta:
    """What the plane knows about one stored array (level 0) and its pyramid."""

    shape: tuple[int, ...]
    dtype: str
    chunks: tuple[int, ...]
    dim_labels: tuple[str, ...] | None = None
    downsample: str = "mean"

    def __post_init__(self) -> None:
        shape = _int_list(list(self.shape), "shape", minimum=1)
        if not 1 <= len(shape) <= MAX_NDIM:
            raise ProtocolError(f"field 'shape': expected 1 to {MAX_NDIM} dimensions, got {len(shape)}")
        chunks = _int_list(list(self.chunks), "chunks", minimum=1)
        if len(chunks) != len(shape):
            raise ProtocolError(
                f"field 'chunks': {list(chunks)} has {len(chunks)} entries, the shape {list(shape)} has {len(shape)}"
            )
        # A chunk larger than the array is the whole axis.
        chunks = tuple(min(c, n) for c, n in zip(chunks, shape, strict=True))
        dt = check_dtype(self.dtype)
        nbytes = math.prod(chunks) * dt.itemsize
        if nbytes > MAX_CHUNK_BYTES:
            raise ProtocolError(
                f"field 'chunks': a {list(chunks)} chunk of {dt.name} is {nbytes} bytes, at most {MAX_CHUNK_BYTES} allowed"
            )
        labels = self.dim_labels
        if labels is not None:
            if not isinstance(labels, (list, tuple)) or not all(isinstance(x, str) and x for x in labels):
                raise ProtocolError(f"field 'dim_labels': expected a list of non-empty strings, got {labels!r}")
            if len(labels) != len(shape):
                raise ProtocolError(
                    f"field 'dim_labels': {list(labels)} has {len(labels)} entries, the shape has {len(shape)}"
                )
            if len(set(labels)) != len(labels):
                raise ProtocolError(f"field 'dim_labels': {list(labels)} repeats a label")
            labels = tuple(labels)
        if self.downsample not in DOWNSAMPLE_METHODS:
            raise ProtocolError(
                f"field 'downsample': expected one of {list(DOWNSAMPLE_METHODS)}, got {self.downsample!r}"
            )
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "chunks", chunks)
        object.__setattr__(self, "dtype", dt.name)
        object.__setattr__(self, "dim_labels", labels)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def spatial_axes(self) -> tuple[int, ...]:
        return spatial_axes(self.ndim, self.dim_labels)

    def level_shapes(self) -> list[tuple[int, ...]]:
        """Level 0 and each 2x-downsampled level, until every spatial axis fits in one chunk."""
        shapes = [self.shape]
        axes = self.spatial_axes
        while any(shapes[-1][a] > self.chunks[a] for a in axes):
            shapes.append(tuple((n + 1) // 2 if a in axes else n for a, n in enumerate(shapes[-1])))
        return shapes

    def level_chunks(self, level: int) -> tuple[int, ...]:
        shape = self.level_shape(level)
        return tuple(min(c, n) for c, n in zip(self.chunks, shape, strict=True))

    def level_shape(self, level: int) -> tuple[int, ...]:
        shapes = self.level_shapes()
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < len(shapes):
            raise ProtocolError(f"field 'level': expected an integer in [0, {len(shapes) - 1}], got {level!r}")
        return shapes[level]

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "chunks": list(self.chunks),
            "dim_labels": list(self.dim_labels) if self.dim_labels is not None else None,
            "downsample": self.downsample,
            "levels": [list(s) for s in self.level_shapes()],
        }

    @classmethod
    def from_json(cls, raw: Any) -> ArrayMeta:
        if not isinstance(raw, dict):
            raise ProtocolError(f"array metadata: expected a JSON object, got {type(raw).__name__}")
        for key in ("shape", "dtype", "chunks"):
            if key not in raw:
                raise ProtocolError(f"array metadata: field {key!r} is missing")
        return cls(
            shape=tuple(_int_list(raw["shape"], "shape", minimum=1)),
            dtype=raw["dtype"],
            chunks=tuple(_int_list(raw["chunks"], "chunks", minimum=1)),
            dim_labels=raw.get("dim_labels"),
            downsample=raw.get("downsample", "mean"),
        )


# --------------------------------------------------------------------------- the chunk grid


def grid_shape(shape: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    return tuple(-(-n // c) for n, c in zip(shape, chunks, strict=True))


def chunk_count(shape: Sequence[int], chunks: Sequence[int]) -> int:
    return math.prod(grid_shape(shape, chunks))


def iter_chunk_indices(shape: Sequence[int], chunks: Sequence[int]) -> Iterator[tuple[int, ...]]:
    return itertools.product(*(range(g) for g in grid_shape(shape, chunks)))


def check_chunk_index(index: Any, shape: Sequence[int], chunks: Sequence[int], field: str = "chunk") -> tuple[int, ...]:
    grid = grid_shape(shape, chunks)
    if not isinstance(index, (list, tuple)) or len(index) != len(grid):
        raise ProtocolError(
            f"field {field!r}: expected {len(grid)} integers (the chunk grid is {list(grid)}), got {index!r}"
        )
    out = []
    for i, (v, g) in enumerate(zip(index, grid, strict=True)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < g:
            raise ProtocolError(
                f"field {field!r}: index {list(index)} is outside the chunk grid {list(grid)} (axis {i})"
            )
        out.append(int(v))
    return tuple(out)


def chunk_slices(index: Sequence[int], shape: Sequence[int], chunks: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(index, chunks, shape, strict=True))


def chunk_shape(index: Sequence[int], shape: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    return tuple(s.stop - s.start for s in chunk_slices(index, shape, chunks))


def dask_chunks(shape: Sequence[int], chunks: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """The per-axis block sizes dask expects for a regular grid."""
    out = []
    for n, c in zip(shape, chunks, strict=True):
        full, rest = divmod(n, c)
        out.append((c,) * full + ((rest,) if rest else ()))
    return tuple(out)


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class UploadRequest:
    name: str
    meta: ArrayMeta
    key: str | None = None  # the harness's upload key (an upload without it is a guest's, budgeted)

    @property
    def id(self) -> str:
        return source_id(self.name)

    def encode(self) -> bytes:
        m = self.meta.to_json()
        del m["levels"]
        body = {"op": "upload", "version": PROTOCOL_VERSION, "name": self.name, **m}
        if self.key is not None:
            body["key"] = self.key
        return json.dumps(body).encode("utf-8")

    @classmethod
    def decode(cls, raw: bytes) -> UploadRequest:
        body = _json_object(raw, "upload descriptor")
        if body.get("op") != "upload":
            raise ProtocolError(f"upload descriptor: field 'op' must be 'upload', got {body.get('op')!r}")
        if body.get("version") != PROTOCOL_VERSION:
            raise ProtocolError(
                f"upload descriptor: field 'version' is {body.get('version')!r}, this plane speaks {PROTOCOL_VERSION}"
            )
        name = check_name(body.get("name"))
        key = body.get("key")
        return cls(name=name, meta=ArrayMeta.from_json(body), key=key if isinstance(key, str) else None)


@dataclass(frozen=True)
class ChunkTicket:
    """A read: one chunk, or with ``span`` a box of ``span`` chunks per axis starting at ``chunk``
    (cut at the grid's end), streamed as one record batch per chunk in C order over the box."""

    id: str
    level: int
    chunk: tuple[int, ...]
    span: tuple[int, ...] | None = None

    def encode(self) -> bytes:
        body: dict[str, Any] = {"id": self.id, "level": self.level, "chunk": list(self.chunk)}
        if self.span is not None:
            body["span"] = list(self.span)
        return json.dumps(body).encode("utf-8")

    @classmethod
    def decode(cls, raw: bytes) -> ChunkTicket:
        body = _json_object(raw, "ticket")
        for key in ("id", "level", "chunk"):
            if key not in body:
                raise ProtocolError(f"ticket: field {key!r} is missing")
        level = body["level"]
        if isinstance(level, bool) or not isinstance(level, int):
            raise ProtocolError(f"ticket: field 'level' must be an integer, got {level!r}")
        chunk = body["chunk"]
        if not isinstance(chunk, list):
            raise ProtocolError(f"ticket: field 'chunk' must be a list of integers, got {chunk!r}")
        span = body.get("span")
        if span is not None:
            if (
                not isinstance(span, list)
                or len(span) != len(chunk)
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in span)
            ):
                raise ProtocolError(
                    f"ticket: field 'span' must be {len(chunk)} positive integers (chunks per axis), got {span!r}"
                )
            span = tuple(span)
        return cls(id=check_id(body["id"]), level=level, chunk=tuple(chunk), span=span)

    def indices(self, shape: Sequence[int], chunks: Sequence[int]) -> list[tuple[int, ...]]:
        """The chunk indices this ticket reads, in C order (``chunk`` must already be checked)."""
        if self.span is None:
            return [tuple(self.chunk)]
        grid = grid_shape(shape, chunks)
        ranges = [range(c, min(c + s, g)) for c, s, g in zip(self.chunk, self.span, grid, strict=True)]
        return list(itertools.product(*ranges))


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        body = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"{what}: not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise ProtocolError(f"{what}: expected a JSON object, got {type(body).__name__}")
    return body


# --------------------------------------------------------------------------- the pyramid


def downsample_block(block: np.ndarray, axes: Sequence[int], method: str) -> np.ndarray:
    """Halve ``block`` along ``axes``: the mean of each pair (an odd end averages with itself) or every other sample.

    Means are accumulated in float32 for 8- and 16-bit data and float16/32 (exact for the former),
    in float64 otherwise, and rounded back to integer dtypes.
    """
    if method == "nearest":
        return np.ascontiguousarray(
            block[tuple(slice(None, None, 2) if a in axes else slice(None) for a in range(block.ndim))]
        )
    dt = block.dtype
    small = (dt.kind in "biu" and dt.itemsize <= 2) or dt in (np.float16, np.float32)
    acc = np.float32 if small else np.float64
    odd = [(0, block.shape[a] % 2 if a in axes else 0) for a in range(block.ndim)]
    x = np.pad(block, odd, mode="edge") if any(pad for _, pad in odd) else block
    shape: list[int] = []
    pairs: list[int] = []
    for a, n in enumerate(x.shape):
        if a in axes:
            shape += [n // 2, 2]
            pairs.append(len(shape) - 1)
        else:
            shape.append(n)
    mean = x.reshape(shape).sum(axis=tuple(pairs), dtype=acc)
    mean *= acc(1.0 / 2 ** len(pairs))
    if dt.kind == "b":
        return mean >= 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.clip(np.rint(mean), info.min, info.max).astype(dt)
    return mean.astype(dt)
