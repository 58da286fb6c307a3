"""The data-plane server: an Arrow Flight service over a zarr v3 store in its own data directory.
Long because the Flight protocol's handlers and the zarr store they write must change together.

It listens on loopback, or on another address only when started with a read key (every call then
carries a token: :mod:`imagebench.plane.token`, checked by :class:`ReadTokens`). Every upload is streamed chunk by chunk into a staging folder and
published under its id (``arrays/<id>/``) by one directory rename once every chunk has arrived
and the pyramid is built, so a reader never sees half an array. A stored array is never
replaced. Run it as its own process with ``imagebench plane serve``.

Layout of the data directory::

    arrays/<id>/             a zarr v3 group, published by rename
        zarr.json            group metadata (attributes: the array's ArrayMeta)
        0/, 1/, ...          pyramid levels (zarr arrays), level 0 first
        plane.json           commit marker, written last before the rename
    staging/<id>-<token>/    uploads in progress (removed on failure and at start-up)
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import zarr

import imagebench.plane.token as tokens
from imagebench.plane.arrow import (  # UPLOAD_SCHEMA and index_column: re-exported from their old home
    BOX_BATCH_BYTES,
    BOX_SCHEMA,
    CHUNK_SCHEMA,
    UPLOAD_SCHEMA,  # noqa: F401
    binary_column,
    index_column,  # noqa: F401
    index_rows,
)
from imagebench.plane.protocol import (
    DATA_FIELD,
    INDEX_FIELD,
    META_KEY,
    PROTOCOL_VERSION,
    UPLOAD_KEY_ENV,
    ArrayMeta,
    ChunkTicket,
    ProtocolError,
    UploadRequest,
    check_chunk_index,
    check_id,
    chunk_count,
    chunk_shape,
    chunk_slices,
    downsample_block,
    grid_shape,
    is_valid_id,
    iter_chunk_indices,
)

#: The environment variables the process that starts a plane gives it: the harness's upload key
#: (``UPLOAD_KEY_ENV``, in :mod:`imagebench.plane.protocol`), and the bytes that uploads without it
#: (a subject's) may take in all (default :data:`GUEST_BYTES`).
GUEST_BYTES_ENV = "IMAGEBENCH_PLANE_GUEST_BYTES"
GUEST_BYTES = 2 * 1024**3

COMMIT_MARKER = "plane.json"
TEMP_PREFIX = "imagebench-plane-"
# How long a shutdown may wait for calls still in flight before the process exits anyway.
SHUTDOWN_GRACE_S = 5.0


def _store_layout() -> dict[str, Any]:
    from zarr.codecs import BytesCodec

    # Uncompressed little-endian chunks, keyed c/<i>/<j>...: the plane's store is a scratch folder on
    # local disk, where compression costs more time than the bytes it saves, and this layout lets
    # a chunk be served straight from its file.
    return {
        "serializer": BytesCodec(endian="little"),
        "compressors": None,
        "chunk_key_encoding": {"name": "default", "separator": "/"},
    }


STORE_LAYOUT: dict[str, Any] = _store_layout()


class NotLoopback(ValueError):
    """The server was asked to listen on an address other than loopback."""


def loopback_host(host: str, read_key: str | None = None) -> str:
    """``host`` as an address to bind: a loopback address, or (only with ``read_key``, every call then
    carrying a token) one other address of this machine that workers reach; never a wildcard."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise NotLoopback(
            f"--host {host!r} is not an IP address; the plane listens on loopback only (127.0.0.1 or ::1)"
        ) from None
    if address.is_loopback:
        return str(address)
    if read_key is None:
        raise NotLoopback(
            f"--host {host!r} is not a loopback address; the plane listens off loopback only with a read key "
            f"({tokens.READ_KEY_ENV} in its environment, as `imagebench run` gives it with IMAGEBENCH_PLANE_HOST)"
        )
    if address.is_unspecified:
        raise NotLoopback(f"--host {host!r} is a wildcard; name the one address of this machine the workers reach")
    return str(address)


def _url(host: str, port: int) -> str:
    return f"grpc://[{host}]:{port}" if ":" in host else f"grpc://{host}:{port}"


def _error(message: str) -> fl.FlightServerError:
    return fl.FlightServerError(message)


# --------------------------------------------------------------------------- read tokens


class _Granted(fl.ServerMiddleware):
    def __init__(self, grant: tokens.Grant) -> None:
        self.grant = grant


class ReadTokens(fl.ServerMiddlewareFactory):
    """Every call to a plane with a read key carries a token (:mod:`imagebench.plane.token`): a
    call without one, or with one this plane's key did not make, is refused before any handler runs."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key

    def start_call(self, info: Any, headers: dict[str, list[str]]) -> _Granted:
        token = tokens.bearer(headers)
        grant = tokens.grant_of(self.key, token)
        if grant is None:
            method = getattr(getattr(info, "method", None), "name", "call")
            why = "carries no read token" if not token else "carries a read token this plane did not issue"
            raise fl.FlightUnauthenticatedError(
                f"{method.lower()} refused: the call {why}; this plane reads only with its run's token "
                f"(the `{tokens.HEADER}: {tokens.SCHEME.strip()} <token>` header; a command subject's is "
                f"${tokens.TENSOR_TOKEN_ENV})"
            )
        return _Granted(grant)


# --------------------------------------------------------------------------- storing an upload


class PyramidWriter:
    """Writes an upload into a new zarr v3 group: level 0 chunk by chunk, and every coarser level.

    zarr creates the group and each level's metadata; the chunk files themselves are written here
    in the plain layout of :data:`STORE_LAYOUT` (uncompressed, C order, little-endian, ``c/<i>/<j>``),
    which is exactly what zarr would write, on a small thread pool while the stream goes on. When every spatial chunk
    size is even (or spans its axis), a chunk of level k+1 is made from the halved chunks of level
    k as soon as all of them have arrived, so level 0 is never read back; otherwise the pyramid is
    built from the stored level once the stream is complete.
    """

    WORKERS = 4
    IN_FLIGHT = 32  # chunks received but not yet written: bounds the memory an upload holds

    def __init__(self, root: Path, meta: ArrayMeta) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.root = root
        self.meta = meta
        self._folders: set[Path] = set()
        self.shapes = meta.level_shapes()
        self.axes = meta.spatial_axes
        self.group = zarr.open_group(store=str(root), mode="w", zarr_format=3)
        self.group.attrs["imagebench_plane"] = meta.to_json()
        self.arrays = [
            self.group.create_array(
                str(level),
                shape=shape,
                chunks=meta.level_chunks(level),
                dtype=meta.dtype,
                fill_value=0,
                dimension_names=meta.dim_labels,
                **STORE_LAYOUT,
            )
            for level, shape in enumerate(self.shapes)
        ]
        grid0 = grid_shape(meta.shape, meta.chunks)
        self.streaming = all(meta.chunks[a] % 2 == 0 or grid0[a] == 1 for a in self.axes)
        self._pending: dict[tuple[int, tuple[int, ...]], list[Any]] = {}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.IN_FLIGHT)
        self._pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="plane-write")
        self._futures: list[Any] = []
        self._failure: BaseException | None = None

    def submit(self, index: tuple[int, ...], block: np.ndarray, keepalive: Any = None) -> None:
        if self._failure is not None:
            raise self._failure
        self._slots.acquire()
        try:
            future = self._pool.submit(self._write, 0, index, block, keepalive)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(self._done)
        self._futures.append(future)

    def _done(self, future: Any) -> None:
        self._slots.release()
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None and self._failure is None:
            self._failure = exc

    def _write(self, level: int, index: tuple[int, ...], block: np.ndarray, keepalive: Any = None) -> None:
        self._store_chunk(level, index, block)
        if self.streaming and level + 1 < len(self.shapes):
            self._feed(level + 1, index, block)

    def _store_chunk(self, level: int, index: tuple[int, ...], block: np.ndarray) -> None:
        """Write one chunk's file in the store's plain layout (what zarr itself would write for it)."""
        chunks = self.meta.level_chunks(level)
        if block.shape != chunks:  # zarr keeps edge chunks at full size, the outside at the fill value
            full = np.zeros(chunks, dtype=block.dtype)
            full[tuple(slice(0, n) for n in block.shape)] = block
            block = full
        data = np.ascontiguousarray(block, dtype=block.dtype.newbyteorder("<"))
        folder = self.root / str(level) / "c" / Path(*map(str, index[:-1]))
        if folder not in self._folders:
            folder.mkdir(parents=True, exist_ok=True)
            with self._lock:
                self._folders.add(folder)
        with open(folder / str(index[-1]), "wb") as fh:
            fh.write(memoryview(data).cast("B"))

    def _feed(self, level: int, child: tuple[int, ...], block: np.ndarray) -> None:
        """Place the halved chunk ``child`` of level-1 into its parent chunk; write the parent once complete."""
        prev_chunks = self.meta.level_chunks(level - 1)
        prev_grid = grid_shape(self.shapes[level - 1], prev_chunks)
        chunks = self.meta.level_chunks(level)
        parent = tuple(i // 2 if a in self.axes else i for a, i in enumerate(child))
        small = downsample_block(block, self.axes, self.meta.downsample)
        at = tuple(
            slice((i % 2) * (prev_chunks[a] // 2), (i % 2) * (prev_chunks[a] // 2) + n)
            if a in self.axes
            else slice(0, n)
            for a, (i, n) in enumerate(zip(child, small.shape, strict=True))
        )
        expected = math.prod(min(2, prev_grid[a] - 2 * parent[a]) for a in self.axes)
        key = (level, parent)
        with self._lock:
            entry = self._pending.get(key)
            if entry is None:
                entry = self._pending[key] = [
                    np.zeros(chunk_shape(parent, self.shapes[level], chunks), dtype=self.meta.dtype),
                    0,
                ]
            entry[0][at] = small
            entry[1] += 1
            complete = entry[1] == expected
            if complete:
                del self._pending[key]
        if complete:
            self._write(level, parent, entry[0])

    def finish(self) -> None:
        """Wait for every write; raise the first failure; build the pyramid now if it was not streamed."""
        for future in self._futures:
            future.exception()  # waits; a failure is kept by _done
        if self._failure is not None:
            raise self._failure
        if self._pending:
            raise RuntimeError(f"the pyramid is incomplete: {len(self._pending)} chunk(s) still waiting")
        if not self.streaming:
            self._build_from_stored()

    def _build_from_stored(self) -> None:
        axes = self.axes
        for level in range(1, len(self.shapes)):
            src, src_shape = self.arrays[level - 1], self.shapes[level - 1]
            shape, chunks = self.shapes[level], self.meta.level_chunks(level)
            for index in iter_chunk_indices(shape, chunks):
                out = chunk_slices(index, shape, chunks)
                region = tuple(
                    slice(s.start * 2, min(s.stop * 2, n)) if a in axes else s
                    for a, (s, n) in enumerate(zip(out, src_shape, strict=True))
                )
                self._store_chunk(level, index, downsample_block(np.asarray(src[region]), axes, self.meta.downsample))

    def close(self) -> None:
        """Let writes still running end (they write into staging, which the caller removes next)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- the server


class PlaneServer(fl.FlightServerBase):
    """Arrow Flight service: ``do_put`` uploads, ``do_get`` one chunk, ``list_flights``, ``get_flight_info``.

    Serving starts when the object is constructed; :meth:`shutdown` stops it.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        upload_key: str | None = None,
        guest_bytes: int | None = None,
        read_key: str | None = None,
    ) -> None:
        self.host = loopback_host(host, read_key)
        # With a read key every call carries a token (ReadTokens); a scoped one reads its ids and
        # the uploads made with it (kept here by its mac), nothing else.
        self.read_key = read_key
        self._owned: dict[str, set[str]] = {}
        # Uploads that do not carry ``upload_key`` (the harness's, given to the process that started
        # the plane) are a guest's, a subject's: at most ``guest_bytes`` in all over the plane's life,
        # however they reach it (the sandbox's bridge caps one sample's; a subject given the host's
        # network reaches the plane directly, and what it uploads stays until the run ends).
        self.upload_key = upload_key
        self.guest_bytes = GUEST_BYTES if guest_bytes is None else int(guest_bytes)
        self._guest_used = 0
        self.data_dir = Path(data_dir)
        self.arrays_dir = self.data_dir / "arrays"
        self.staging_dir = self.data_dir / "staging"
        self.arrays_dir.mkdir(parents=True, exist_ok=True)
        # Anything left in staging is an upload that never completed: it was never published.
        shutil.rmtree(self.staging_dir, ignore_errors=True)
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._uploading: set[str] = set()
        self._metas: dict[str, ArrayMeta] = {}
        self._zarrs: dict[tuple[str, int], Any] = {}
        self._plain: dict[tuple[str, int], bool] = {}
        middleware = {"auth": ReadTokens(read_key)} if read_key is not None else {}
        super().__init__(_url(self.host, port), middleware=middleware)

    @property
    def url(self) -> str:
        return _url(self.host, self.port)

    # ----------------------------------------------------------------- what a call may read

    def _grant(self, context: Any) -> tokens.Grant | None:
        """The call's grant; None when this plane has no read key (everything is readable)."""
        if self.read_key is None:
            return None
        granted = context.get_middleware("auth") if context is not None else None
        if granted is None:  # ReadTokens refuses first; never serve a call it did not see
            raise fl.FlightUnauthenticatedError("refused: the call carries no read token")
        return granted.grant

    def _visible(self, grant: tokens.Grant | None, sid: str) -> bool:
        if grant is None or grant.full:
            return True
        with self._lock:
            return sid in grant.ids or sid in self._owned.get(grant.scope, ())

    def _check_visible(self, context: Any, sid: str, what: str) -> None:
        if not self._visible(self._grant(context), sid):
            # the same answer as an id that is not stored: a token learns nothing of what it cannot read
            raise _error(f"{what} refused: no array with id {sid!r} is stored")

    # ----------------------------------------------------------------- storage

    def _published(self, sid: str) -> bool:
        return (self.arrays_dir / sid / COMMIT_MARKER).is_file()

    def stored_ids(self) -> list[str]:
        if not self.arrays_dir.is_dir():
            return []
        return sorted(p.name for p in self.arrays_dir.iterdir() if is_valid_id(p.name) and self._published(p.name))

    def _meta(self, sid: str) -> ArrayMeta:
        meta = self._metas.get(sid)
        if meta is not None:
            return meta
        if not self._published(sid):
            raise _error(f"no array with id {sid!r} is stored on this plane")
        try:
            raw = json.loads((self.arrays_dir / sid / COMMIT_MARKER).read_text(encoding="utf-8"))
            meta = ArrayMeta.from_json(raw["meta"])
        except (OSError, KeyError, ValueError) as exc:
            raise _error(f"array {sid!r}: its metadata on the plane is unreadable ({exc})") from None
        with self._lock:
            self._metas[sid] = meta
        return meta

    def _level(self, sid: str, level: int) -> Any:
        key = (sid, level)
        arr = self._zarrs.get(key)
        if arr is None:
            arr = zarr.open_array(store=str(self.arrays_dir / sid / str(level)), mode="r")
            with self._lock:
                self._zarrs[key] = arr
        return arr

    def _direct(self, sid: str, level: int, meta: ArrayMeta) -> bool:
        """Whether level ``level`` of ``sid`` has the plain layout whose chunk files can be served as they are."""
        key = (sid, level)
        known = self._plain.get(key)
        if known is None:
            try:
                raw = json.loads((self.arrays_dir / sid / str(level) / "zarr.json").read_text(encoding="utf-8"))
                codecs = raw.get("codecs")
                encoding = raw.get("chunk_key_encoding", {})
                grid = raw.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
                known = (
                    raw.get("zarr_format") == 3
                    and raw.get("data_type") == meta.dtype
                    and raw.get("fill_value") in (0, False)
                    and isinstance(codecs, list)
                    and len(codecs) == 1
                    and codecs[0].get("name") == "bytes"
                    and codecs[0].get("configuration", {}).get("endian", "little") in ("little", None)
                    and encoding.get("name") == "default"
                    and encoding.get("configuration", {}).get("separator") == "/"
                    and grid == list(meta.level_chunks(level))
                )
            except (OSError, ValueError, AttributeError):
                known = False
            with self._lock:
                self._plain[key] = known
        return known

    def _read_block(self, sid: str, level: int, index: tuple[int, ...], meta: ArrayMeta) -> np.ndarray | bytes:
        """One chunk: the C-order bytes of its file when the layout allows (a missing file is all zeros), else via zarr."""
        shape, chunks = meta.level_shape(level), meta.level_chunks(level)
        if self._direct(sid, level, meta):
            itemsize = np.dtype(meta.dtype).itemsize
            path = self.arrays_dir / sid / str(level) / "c" / Path(*map(str, index))
            try:
                data = path.read_bytes()
            except FileNotFoundError:  # zarr leaves out chunks that hold only the fill value
                data = bytes(math.prod(chunks) * itemsize)
            if len(data) != math.prod(chunks) * itemsize:
                raise ValueError(
                    f"chunk file {path.name} holds {len(data)} bytes, expected {math.prod(chunks) * itemsize}"
                )
            extent = chunk_shape(index, shape, chunks)
            if extent == tuple(chunks):
                return data
            # an edge chunk is stored at full size: cut it to the array
            full = np.frombuffer(data, dtype=meta.dtype).reshape(chunks)
            return np.ascontiguousarray(full[tuple(slice(0, n) for n in extent)])
        return np.ascontiguousarray(self._level(sid, level)[chunk_slices(index, shape, chunks)])

    def _read_into(self, out: memoryview, sid: str, level: int, index: tuple[int, ...], meta: ArrayMeta) -> None:
        """One chunk's C-order bytes into ``out`` (exactly its size): a full chunk of the plain layout
        is read from its file straight into ``out`` (a missing file leaves the zeros it holds)."""
        chunks = meta.level_chunks(level)
        if self._direct(sid, level, meta) and chunk_shape(index, meta.level_shape(level), chunks) == tuple(chunks):
            path = self.arrays_dir / sid / str(level) / "c" / Path(*map(str, index))
            try:
                with open(path, "rb", buffering=0) as fh:
                    n = fh.readinto(out)
                    extra = fh.read(1)
            except FileNotFoundError:  # zarr leaves out chunks that hold only the fill value
                return
            if n != out.nbytes or extra:
                raise ValueError(f"chunk file {path.name} does not hold the {out.nbytes} bytes of one chunk")
            return
        block = self._read_block(sid, level, index, meta)
        out[:] = memoryview(block).cast("B")

    # ----------------------------------------------------------------- upload

    def do_put(self, context: Any, descriptor: fl.FlightDescriptor, reader: Any, writer: Any) -> None:
        if descriptor.descriptor_type != fl.DescriptorType.CMD:
            raise _error("upload refused: the descriptor must be a command holding the upload JSON (see docs/plane.md)")
        try:
            request = UploadRequest.decode(descriptor.command)
        except ProtocolError as exc:
            raise _error(f"upload refused: {exc}") from None
        sid = request.id
        grant = self._grant(context)
        guest = 0
        if self.upload_key is not None and not (
            request.key is not None and hmac.compare_digest(request.key, self.upload_key)
        ):
            guest = math.prod(request.meta.shape) * np.dtype(request.meta.dtype).itemsize
        with self._lock:
            if guest and self._guest_used + guest > self.guest_bytes:
                raise _error(
                    f"upload refused: {guest} bytes would take the uploads made without the harness's key past "
                    f"{self.guest_bytes} bytes in all on this plane ({self._guest_used} stored); nothing was stored"
                )
            if self._published(sid):
                raise _error(
                    f"upload refused: an array with id {sid!r} already exists; a stored array is never replaced"
                )
            if sid in self._uploading:
                raise _error(f"upload refused: an upload with id {sid!r} is already in progress")
            self._uploading.add(sid)
            self._guest_used += guest  # held while it uploads, given back unless it is stored
        staging = self.staging_dir / f"{sid}-{secrets.token_hex(4)}"
        stored = False
        try:
            self._receive(request, reader, staging)
            marker = {"version": PROTOCOL_VERSION, "id": sid, "meta": request.meta.to_json()}
            (staging / COMMIT_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
            with self._lock:
                target = self.arrays_dir / sid
                if target.exists():
                    raise _error(f"upload refused: an array with id {sid!r} already exists")
                os.rename(staging, target)  # the publish step: atomic on one file system
                stored = True
                if grant is not None and not grant.full:  # readable back with the token that uploaded it
                    self._owned.setdefault(grant.scope, set()).add(sid)
            writer.write(pa.py_buffer(json.dumps({"id": sid, "levels": len(request.meta.level_shapes())}).encode()))
        except fl.FlightError:
            raise
        except ProtocolError as exc:
            raise _error(f"upload of {sid} refused: {exc}; nothing was stored") from None
        except Exception as exc:  # the client went away, the disk filled up, ...
            raise _error(f"upload of {sid} failed: {type(exc).__name__}: {exc}; nothing was stored") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            with self._lock:
                self._uploading.discard(sid)
                if not stored:
                    self._guest_used -= guest

    def _receive(self, request: UploadRequest, reader: Any, staging: Path) -> None:
        """Read the stream into a new store under ``staging``: level 0 and, on the fly, the pyramid."""
        meta = request.meta
        schema = reader.schema
        names = schema.names
        if (
            names != [INDEX_FIELD, DATA_FIELD]
            or not pa.types.is_list(schema.field(INDEX_FIELD).type)
            or not (
                pa.types.is_binary(schema.field(DATA_FIELD).type)
                or pa.types.is_large_binary(schema.field(DATA_FIELD).type)
            )
        ):
            raise ProtocolError(
                f"stream schema: expected fields {INDEX_FIELD!r} (list<int64>) and {DATA_FIELD!r} (binary), got {schema}"
            )
        staging.mkdir(parents=True)
        store = PyramidWriter(staging, meta)
        try:
            itemsize = np.dtype(meta.dtype).itemsize
            total = chunk_count(meta.shape, meta.chunks)
            seen: set[tuple[int, ...]] = set()
            while True:
                try:
                    chunk = reader.read_chunk()
                except StopIteration:
                    break
                batch = chunk.data
                if batch is None:
                    continue
                if batch.num_rows != 1:
                    raise ProtocolError(
                        f"stream: each record batch carries exactly one chunk, got {batch.num_rows} rows"
                    )
                index = check_chunk_index(batch.column(0)[0].as_py(), meta.shape, meta.chunks, field=INDEX_FIELD)
                if index in seen:
                    raise ProtocolError(f"stream: chunk {list(index)} arrived twice")
                buf = batch.column(1)[0].as_buffer()
                expect = chunk_shape(index, meta.shape, meta.chunks)
                if buf is None or buf.size != math.prod(expect) * itemsize:
                    got = 0 if buf is None else buf.size
                    raise ProtocolError(
                        f"stream: chunk {list(index)} has {got} bytes, expected {math.prod(expect) * itemsize} "
                        f"({list(expect)} of {meta.dtype})"
                    )
                # The batch (and the buffer under this view) stays alive until the write is done.
                store.submit(index, np.frombuffer(buf, dtype=meta.dtype).reshape(expect), batch)
                seen.add(index)
            if len(seen) != total:
                raise ProtocolError(f"stream ended after {len(seen)} of {total} chunks (a truncated upload)")
            store.finish()
        finally:
            store.close()

    # ----------------------------------------------------------------- reading

    def do_get(self, context: Any, ticket: fl.Ticket) -> fl.FlightDataStream:
        try:
            request = ChunkTicket.decode(ticket.ticket)
            self._check_visible(context, request.id, "chunk request")
            meta = self._meta(request.id)
            shape = meta.level_shape(request.level)
            chunks = meta.level_chunks(request.level)
            index = check_chunk_index(list(request.chunk), shape, chunks)
        except ProtocolError as exc:
            raise _error(f"chunk request refused: {exc}") from None
        if request.span is not None:
            return self._stream_box(request, meta, shape, chunks)
        try:
            block = self._read_block(request.id, request.level, index, meta)
        except Exception as exc:
            raise _error(
                f"array {request.id!r}: chunk {list(index)} of level {request.level} is unreadable ({exc})"
            ) from None
        extent = chunk_shape(index, shape, chunks)
        schema = CHUNK_SCHEMA.with_metadata(
            {META_KEY: json.dumps({"shape": list(extent), "dtype": meta.dtype}).encode()}
        )
        return fl.RecordBatchStream(pa.Table.from_batches([pa.record_batch([binary_column(block)], schema=schema)]))

    def _stream_box(
        self, request: ChunkTicket, meta: ArrayMeta, shape: tuple[int, ...], chunks: tuple[int, ...]
    ) -> fl.GeneratorStream:
        """A box of chunks as one stream: a batch per chunk (its index and its bytes), read as it is sent."""
        indices = request.indices(shape, chunks)
        schema = BOX_SCHEMA.with_metadata(
            {META_KEY: json.dumps({"dtype": meta.dtype, "chunks": len(indices)}).encode()}
        )

        itemsize = np.dtype(meta.dtype).itemsize
        per_batch = max(1, BOX_BATCH_BYTES // max(1, math.prod(chunks) * itemsize))

        def batches() -> Iterator[pa.RecordBatch]:
            # Several chunks to a batch (about BOX_BATCH_BYTES), each read straight into its place in
            # the batch's one buffer: fewer trips through Python per byte sent, one copy from the file.
            for start in range(0, len(indices), per_batch):
                group = indices[start : start + per_batch]
                sizes = [math.prod(chunk_shape(index, shape, chunks)) * itemsize for index in group]
                offsets = np.zeros(len(group) + 1, dtype=np.int64)
                np.cumsum(sizes, out=offsets[1:])
                buf = bytearray(int(offsets[-1]))
                view = memoryview(buf)
                for k, index in enumerate(group):
                    try:
                        self._read_into(view[offsets[k] : offsets[k + 1]], request.id, request.level, index, meta)
                    except Exception as exc:
                        raise _error(
                            f"array {request.id!r}: chunk {list(index)} of level {request.level} is unreadable ({exc})"
                        ) from None
                data = pa.Array.from_buffers(
                    pa.large_binary(), len(group), [None, pa.py_buffer(offsets), pa.py_buffer(buf)]
                )
                yield pa.record_batch([index_rows(group), data], schema=schema)

        return fl.GeneratorStream(schema, batches())

    def _info(self, sid: str) -> fl.FlightInfo:
        meta = self._meta(sid)
        schema = CHUNK_SCHEMA.with_metadata({META_KEY: json.dumps({"id": sid, **meta.to_json()}).encode()})
        nbytes = math.prod(meta.shape) * np.dtype(meta.dtype).itemsize
        return fl.FlightInfo(
            schema, fl.FlightDescriptor.for_path(sid), [], chunk_count(meta.shape, meta.chunks), nbytes
        )

    def list_flights(self, context: Any, criteria: bytes) -> Iterator[fl.FlightInfo]:
        grant = self._grant(context)
        for sid in [sid for sid in self.stored_ids() if self._visible(grant, sid)]:
            try:
                yield self._info(sid)
            except fl.FlightError:  # unreadable metadata: listed by describe, not here
                continue

    def get_flight_info(self, context: Any, descriptor: fl.FlightDescriptor) -> fl.FlightInfo:
        if descriptor.descriptor_type != fl.DescriptorType.PATH or len(descriptor.path) != 1:
            raise _error("describe refused: the descriptor must be a path holding one id")
        try:
            sid = check_id(descriptor.path[0].decode("utf-8", "replace"))
        except ProtocolError as exc:
            raise _error(f"describe refused: {exc}") from None
        self._check_visible(context, sid, "describe")
        return self._info(sid)

    def list_actions(self, context: Any) -> list[tuple[str, str]]:
        return [("health", "answer {ok, version, arrays} when serving")]

    def do_action(self, context: Any, action: fl.Action) -> Iterator[bytes]:
        if action.type == "health":
            grant = self._grant(context)
            visible = sum(self._visible(grant, sid) for sid in self.stored_ids())
            body = {"ok": True, "version": PROTOCOL_VERSION, "arrays": visible}
            return iter([json.dumps(body).encode()])
        raise _error(f"unknown action {action.type!r}; this plane knows: health")


# --------------------------------------------------------------------------- the process


def _watch_parent(stop: threading.Event) -> None:
    parent = os.getppid()
    while not stop.wait(0.5):
        if os.getppid() != parent:  # the process that started us is gone
            stop.set()


def serve(*, host: str = "127.0.0.1", port: int = 0, data_dir: str | None = None, watch_parent: bool = False) -> int:
    """``imagebench plane serve``: print the URL (first line) and the data dir, serve until signalled."""
    read_key = os.environ.pop(tokens.READ_KEY_ENV, None) or None
    try:
        host = loopback_host(host, read_key)
    except NotLoopback as exc:
        print(f"imagebench plane serve: {exc}", file=sys.stderr)
        return 2
    owned = data_dir is None
    folder = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX)) if data_dir is None else Path(data_dir)
    stop = threading.Event()  # set by the parent watcher
    signalled: list[int] = []  # appended to by the signal handler (no locks inside a handler)
    server: PlaneServer | None = None
    previous = {
        sig: signal.signal(sig, lambda signum, _: signalled.append(signum)) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        try:
            guest = os.environ.get(GUEST_BYTES_ENV)
            server = PlaneServer(
                folder, host=host, port=port, upload_key=os.environ.pop(UPLOAD_KEY_ENV, None) or None,
                guest_bytes=int(guest) if guest else None, read_key=read_key,
            )  # fmt: skip
        except Exception as exc:
            print(f"imagebench plane serve: could not start on {host}:{port}: {exc}", file=sys.stderr)
            return 1
        print(server.url, flush=True)
        print(f"data-dir {folder}", flush=True)
        if watch_parent:
            threading.Thread(target=_watch_parent, args=(stop,), daemon=True, name="plane-watch-parent").start()
        while not signalled and not stop.is_set():
            time.sleep(0.2)  # a signal interrupts the sleep and runs the handler
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        clean_exit = True
        if server is not None:
            stopper = threading.Thread(target=server.shutdown, daemon=True, name="plane-shutdown")
            stopper.start()
            stopper.join(SHUTDOWN_GRACE_S)
            clean_exit = not stopper.is_alive()
        if owned:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            shutil.rmtree(folder / "staging", ignore_errors=True)
        if not clean_exit:  # a call that would not finish: leave without waiting for it
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
