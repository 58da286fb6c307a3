"""The data-plane client: upload an array chunk by chunk, read it back lazily as dask arrays.

``Client(url).get(id)`` is a dask array whose every block is fetched with its own ``do_get`` the
first time it is computed; ``Client(url).levels(id)`` is the whole pyramid, ready for
``viewer.add_image(levels, multiscale=True)``. A client is cheap and picklable (it is its URL):
Flight connections are opened per thread on first use.

A thread's connections are released when Python tears the thread down. A thread Python did not
create (a Qt pool thread, where napari's workers run) tears its Python state down in a way that
crashes the process if a Flight connection is released then, so work on such a thread closes its
connections itself before it returns: :meth:`Client.close_thread_connection`,
:func:`close_thread_connections`, or the :func:`closing_thread_connections` wrapper.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from imagebench.plane.arrow import UPLOAD_SCHEMA, binary_column, index_column
from imagebench.plane.protocol import (
    META_KEY,
    ArrayMeta,
    ChunkTicket,
    ProtocolError,
    UploadRequest,
    chunk_shape,
    chunk_slices,
    dask_chunks,
    iter_chunk_indices,
    source_id,
    spatial_axes,
)
from imagebench.plane.token import HEADER, SCHEME, TENSOR_TOKEN_ENV

DEFAULT_SPATIAL_CHUNK = 256
_URL_SCHEMES = ("grpc://", "grpc+tcp://")

_local = threading.local()
T = TypeVar("T")


class _Bearer(fl.ClientMiddlewareFactory):
    """Puts a read token on every call of a connection (:mod:`imagebench.plane.token`)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.headers = {HEADER: SCHEME + token}

    def start_call(self, info: Any) -> fl.ClientMiddleware:
        return _BearerCall(self.headers)


class _BearerCall(fl.ClientMiddleware):
    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__()
        self.headers = headers

    def sending_headers(self) -> dict[str, str]:
        return self.headers


def _thread_conns() -> dict[tuple[str, str | None], fl.FlightClient]:
    """This thread's connections by URL and token (a fresh, empty table in a forked child)."""
    conns = getattr(_local, "conns", None)
    if conns is None or getattr(_local, "pid", None) != os.getpid():
        conns = _local.conns = {}
        _local.pid = os.getpid()
    return conns


def _connection(url: str, auth: str | None = None) -> fl.FlightClient:
    """This thread's Flight connection to ``url`` carrying the read token ``auth`` (one per thread,
    process and token, opened on first use)."""
    conns = _thread_conns()
    conn = conns.get((url, auth))
    if conn is None:
        conn = conns[url, auth] = fl.connect(url, middleware=[_Bearer(auth)] if auth else None)
    return conn


def thread_connections() -> list[str]:
    """The URLs this thread holds an open Flight connection to."""
    return sorted({url for url, _ in _thread_conns()})


def close_thread_connections(url: str | None = None) -> int:
    """Close this thread's Flight connections (only the one to ``url`` when given); return how many.

    Closing is idempotent and never raises: a connection that fails to close is dropped anyway. A
    later call on this thread opens a fresh connection.
    """
    conns = _thread_conns()
    keys = [k for k in conns if url is None or k[0] == url]
    closed = 0
    for k in keys:
        conn = conns.pop(k, None)
        if conn is None:
            continue
        with contextlib.suppress(Exception):
            conn.close()
        closed += 1
    return closed


def closing_thread_connections(work: Callable[[], T]) -> Callable[[], T]:
    """``work`` wrapped so that the Flight connections it opened on its thread are closed when it
    returns or raises, on that same thread (for a worker thread that Python did not create)."""

    def run() -> T:
        try:
            return work()
        finally:
            close_thread_connections()

    run.__name__ = getattr(work, "__name__", "run")
    run.__doc__ = getattr(work, "__doc__", None)
    return run


def clean_message(exc: BaseException) -> str:
    """A Flight error's own message, without gRPC's debug context."""
    text = str(exc)
    for marker in (". Detail:", ". gRPC client debug context:"):
        if marker in text:
            text = text.split(marker, 1)[0]
    return text


@contextlib.contextmanager
def _flight_errors(what: str) -> Iterator[None]:
    """Re-raise a Flight error as the same Flight error class with a readable message."""
    try:
        yield
    except fl.FlightError as exc:
        raise type(exc)(f"{what}: {clean_message(exc)}") from None


def _fetch_block(
    url: str,
    sid: str,
    level: int,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: str,
    block_id: tuple[int, ...] | None = None,
    auth: str | None = None,
) -> np.ndarray:
    """One block of a plane array: its own ``do_get``. Runs on dask's worker threads."""
    assert block_id is not None
    return _read_chunk(url, sid, level, tuple(block_id), shape, chunks, dtype, auth)


def _read_chunk(
    url: str,
    sid: str,
    level: int,
    index: tuple[int, ...],
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: str,
    auth: str | None = None,
) -> np.ndarray:
    ticket = fl.Ticket(ChunkTicket(id=sid, level=level, chunk=index).encode())
    with _flight_errors(f"reading chunk {list(index)} of level {level} of {sid}"):
        table = _connection(url, auth).do_get(ticket).read_all()
    expect = chunk_shape(index, shape, chunks)
    if table.num_rows != 1:
        raise fl.FlightServerError(f"reading {sid}: the plane sent {table.num_rows} rows for one chunk")
    buf = table.column(0).chunk(0)[0].as_buffer()
    nbytes = math.prod(expect) * np.dtype(dtype).itemsize
    if buf is None or buf.size != nbytes:
        raise fl.FlightServerError(
            f"reading {sid}: chunk {list(index)} came back with {0 if buf is None else buf.size} bytes, expected {nbytes}"
        )
    # A private, writable copy: the Arrow buffer belongs to the stream.
    return np.frombuffer(buf, dtype=dtype).reshape(expect).copy()


def _fetch_box(
    url: str,
    sid: str,
    level: int,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: str,
    span: tuple[int, ...],
    block_id: tuple[int, ...] | None = None,
    auth: str | None = None,
) -> np.ndarray:
    """One dask block of ``span`` chunks per axis: one ``do_get`` streaming them all."""
    assert block_id is not None
    start = tuple(b * s for b, s in zip(block_id, span, strict=True))
    return read_box(url, sid, level, start, span, shape, chunks, dtype, auth=auth)


def read_box(
    url: str,
    sid: str,
    level: int,
    start: tuple[int, ...],
    span: tuple[int, ...],
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: str,
    out: np.ndarray | None = None,
    auth: str | None = None,
) -> np.ndarray:
    """The box of ``span`` chunks from chunk ``start`` (cut at the grid's end) through one stream,
    each chunk copied once, from the stream's buffer into its place in ``out`` (a new array unless
    given: then it must have the box's shape)."""
    grid = tuple(math.ceil(n / c) for n, c in zip(shape, chunks, strict=True))
    stop = tuple(min(a + s, g) for a, s, g in zip(start, span, grid, strict=True))
    lo = tuple(a * c for a, c in zip(start, chunks, strict=True))
    hi = tuple(min(b * c, n) for b, c, n in zip(stop, chunks, shape, strict=True))
    extent = tuple(h - low for h, low in zip(hi, lo, strict=True))
    if out is None:
        out = np.empty(extent, dtype=dtype)
    elif out.shape != extent:
        raise ValueError(f"reading {sid}: the box is {extent}, the array to fill is {out.shape}")
    expected = math.prod(b - a for a, b in zip(start, stop, strict=True))
    itemsize = np.dtype(dtype).itemsize
    ticket = fl.Ticket(ChunkTicket(id=sid, level=level, chunk=start, span=span).encode())
    seen = 0
    with _flight_errors(f"reading chunks {list(start)} to {[s - 1 for s in stop]} of level {level} of {sid}"):
        reader = _connection(url, auth).do_get(ticket)
        for batch in reader.to_reader():
            n = batch.num_rows
            if n == 0:
                continue
            index_col, data_col = batch.column(0), batch.column(1)
            found = index_col.flatten().to_numpy(zero_copy_only=False)
            if found.size != n * len(start):
                raise fl.FlightServerError(f"reading {sid}: the plane sent chunk indices of the wrong length")
            found = found.reshape(n, len(start))
            _, offsets_buf, data_buf = data_col.buffers()
            offsets = np.frombuffer(offsets_buf, dtype=np.int64)[data_col.offset : data_col.offset + n + 1]
            raw = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
            for row in range(n):
                index = tuple(int(i) for i in found[row])
                if any(not a <= i < b for i, a, b in zip(index, start, stop, strict=True)):
                    raise fl.FlightServerError(
                        f"reading {sid}: the plane sent chunk {list(index)}, outside the box asked for"
                    )
                region = chunk_slices(index, shape, chunks)
                want = tuple(r.stop - r.start for r in region)
                nbytes = math.prod(want) * itemsize
                lo_b, hi_b = int(offsets[row]), int(offsets[row + 1])
                if hi_b - lo_b != nbytes:
                    raise fl.FlightServerError(
                        f"reading {sid}: chunk {list(index)} came back with {hi_b - lo_b} bytes, expected {nbytes}"
                    )
                local = tuple(slice(r.start - a, r.stop - a) for r, a in zip(region, lo, strict=True))
                out[local] = raw[lo_b:hi_b].view(dtype).reshape(want)
                seen += 1
    if seen != expected:
        raise fl.FlightServerError(f"reading {sid}: the plane sent {seen} of the {expected} chunks asked for")
    return out


def _is_dask(array: Any) -> bool:
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(array, module.Array)


def default_chunks(shape: Sequence[int], dim_labels: Sequence[str] | None = None) -> tuple[int, ...]:
    """Chunks when none are asked for: 256 along each spatial axis, 1 along the others."""
    axes = spatial_axes(len(shape), dim_labels)
    return tuple(min(n, DEFAULT_SPATIAL_CHUNK) if a in axes else 1 for a, n in enumerate(shape))


class _ChunkSender:
    """A ``da.store`` target that sends each block it is given as one record batch."""

    def __init__(self, writer: Any, chunks: tuple[int, ...]) -> None:
        self.writer = writer
        self.chunks = chunks
        self.lock = threading.Lock()  # one Flight writer, many dask threads

    def send(self, index: tuple[int, ...], block: np.ndarray) -> None:
        block = np.ascontiguousarray(block)
        batch = pa.record_batch([index_column(index), binary_column(block)], schema=UPLOAD_SCHEMA)
        with self.lock:
            self.writer.write_batch(batch)

    def __setitem__(self, key: tuple[slice, ...], value: np.ndarray) -> None:
        self.send(tuple(s.start // c for s, c in zip(key, self.chunks, strict=True)), value)


class Client:
    """A connection to a data plane at ``url`` (``grpc://127.0.0.1:PORT``).

    ``token`` is the read token every call carries (:mod:`imagebench.plane.token`); without one,
    ``$IMAGEBENCH_TENSOR_TOKEN`` when set (a ``command:`` subject's), else none (a plane started by hand).
    """

    def __init__(self, url: str, key: str | None = None, token: str | None = None) -> None:
        if not isinstance(url, str) or not url.startswith(_URL_SCHEMES):
            raise ValueError(f"a data-plane URL starts with grpc://, got {url!r}")
        self.url = url
        self.key = key  # the upload key of the process that started the plane (None: a guest's uploads)
        self.token = token if token is not None else (os.environ.get(TENSOR_TOKEN_ENV) or None)

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Client, (self.url, self.key, self.token))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Client) and (other.url, other.token) == (self.url, self.token)

    def __hash__(self) -> int:
        return hash(("imagebench.plane.Client", self.url))

    def close_thread_connection(self) -> bool:
        """Close the calling thread's connection to this plane; False when it held none.

        Call it at the end of work on a thread Python did not create (see the module's notes);
        the next call on this thread reconnects. Other threads' connections are untouched.
        """
        return close_thread_connections(self.url) > 0

    # ----------------------------------------------------------------- metadata

    def health(self) -> dict[str, Any]:
        with _flight_errors(f"plane {self.url}"):
            results = list(_connection(self.url, self.token).do_action(fl.Action("health", b"")))
        return json.loads(results[0].body.to_pybytes())

    def list(self) -> list[str]:
        """Every id stored on the plane (the harness's fixtures and anything a subject uploaded)."""
        with _flight_errors(f"listing {self.url}"):
            infos = list(_connection(self.url, self.token).list_flights())
        return sorted(info.descriptor.path[0].decode() for info in infos)

    def _meta(self, sid: str) -> ArrayMeta:
        with _flight_errors(f"describing {sid}"):
            info = _connection(self.url, self.token).get_flight_info(fl.FlightDescriptor.for_path(str(sid)))
        raw = json.loads(info.schema.metadata[META_KEY])
        return ArrayMeta.from_json(raw)

    def describe(self, sid: str) -> dict[str, Any]:
        """``{shape, dtype, chunks, dim_labels, downsample, levels}``; ``levels`` lists each level's shape."""
        return self._meta(sid).to_json()

    # ----------------------------------------------------------------- reading

    def read_chunk(self, sid: str, index: Sequence[int], level: int = 0) -> np.ndarray:
        """One chunk, eagerly (its own ``do_get``)."""
        meta = self._meta(sid)
        try:
            shape, chunks = meta.level_shape(level), meta.level_chunks(level)
        except ProtocolError as exc:
            raise ValueError(f"{sid}: {exc}") from None
        # The plane checks the index (and answers a FlightError for one outside the grid).
        return _read_chunk(self.url, sid, level, tuple(int(i) for i in index), shape, chunks, meta.dtype, self.token)

    def get(self, sid: str, level: int = 0, *, span: Sequence[int] | None = None) -> Any:
        """Level ``level`` of ``sid`` as a lazy dask array; each block is fetched on demand.

        A block is one chunk of the plane (what a viewer wants: the first pixels arrive soonest),
        or with ``span`` a box of that many chunks per axis fetched through one stream (fewer
        round trips when every block will be read).
        """
        import dask.array as da
        from dask.base import tokenize

        meta = self._meta(sid)
        try:
            shape, chunks = meta.level_shape(level), meta.level_chunks(level)
        except ProtocolError as exc:
            raise ValueError(f"{sid}: {exc}") from None
        box = self._span(span, shape)
        name = f"plane-{sid}-{level}-{tokenize(self.url, sid, level, meta.to_json(), box)}"
        common = {"dtype": np.dtype(meta.dtype), "meta": np.empty((0,) * len(shape), dtype=meta.dtype), "name": name}
        if box is None:
            return da.map_blocks(
                _fetch_block,
                self.url,
                sid,
                level,
                shape,
                chunks,
                meta.dtype,
                chunks=dask_chunks(shape, chunks),
                auth=self.token,
                **common,
            )
        blocks = tuple(min(n, c * s) for n, c, s in zip(shape, chunks, box, strict=True))
        return da.map_blocks(
            _fetch_box,
            self.url,
            sid,
            level,
            shape,
            chunks,
            meta.dtype,
            box,
            chunks=dask_chunks(shape, blocks),
            auth=self.token,
            **common,
        )

    @staticmethod
    def _span(span: Sequence[int] | None, shape: tuple[int, ...]) -> tuple[int, ...] | None:
        if span is None:
            return None
        box = tuple(int(s) for s in span)
        if len(box) != len(shape) or any(s < 1 for s in box):
            raise ValueError(f"span must be {len(shape)} positive chunk counts, one per axis, got {list(span)}")
        return None if all(s == 1 for s in box) else box

    def read(self, sid: str, level: int = 0, *, streams: int = 2) -> np.ndarray:
        """All of level ``level`` of ``sid`` in memory, now: ``streams`` parallel ``do_get`` streams,
        each a band of chunks along the first axis, copied once into the result."""
        meta = self._meta(sid)
        try:
            shape, chunks = meta.level_shape(level), meta.level_chunks(level)
        except ProtocolError as exc:
            raise ValueError(f"{sid}: {exc}") from None
        out = np.empty(shape, dtype=meta.dtype)
        if out.size == 0:
            return out
        grid = [math.ceil(n / c) for n, c in zip(shape, chunks, strict=True)]
        rows = math.ceil(grid[0] / max(1, min(int(streams), grid[0])))
        bands = [(r, min(rows, grid[0] - r)) for r in range(0, grid[0], rows)]

        def band(r: int, n: int) -> None:
            start = (r,) + (0,) * (len(shape) - 1)
            span = (n, *grid[1:])
            lo, hi = r * chunks[0], min((r + n) * chunks[0], shape[0])
            try:
                read_box(
                    self.url, sid, level, start, tuple(span), shape, chunks, meta.dtype, out=out[lo:hi], auth=self.token
                )
            finally:
                if threading.current_thread() is not threading.main_thread():
                    close_thread_connections(self.url)

        if len(bands) == 1:
            band(*bands[0])
            return out
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(bands), thread_name_prefix="imagebench-plane-read") as pool:
            for future in [pool.submit(band, r, n) for r, n in bands]:
                future.result()
        return out

    def levels(self, sid: str) -> list[Any]:
        """The pyramid, level 0 first: pass it to ``viewer.add_image(levels, multiscale=True)``."""
        n = len(self._meta(sid).level_shapes())
        return [self.get(sid, level) for level in range(n)]

    # ----------------------------------------------------------------- writing

    def upload(
        self,
        array: Any,
        name: str,
        chunks: Sequence[int] | None = None,
        dim_labels: Sequence[str] | None = None,
        *,
        downsample: str = "mean",
    ) -> str:
        """Stream ``array`` (numpy, dask, or anything ``np.asarray`` reads) chunk by chunk; return its id.

        The id is ``cache_`` + the first 12 hex digits of sha256(``name``). The plane refuses a
        name whose id already exists. ``chunks`` defaults to 256 along the spatial axes (those
        labelled x/y/z, else the last two) and 1 along the others.
        """
        lazy = _is_dask(array)
        if not lazy and not isinstance(array, np.ndarray):
            array = np.asarray(array)
        shape = tuple(int(n) for n in array.shape)
        if chunks is None:
            chunks = default_chunks(shape, dim_labels)
        meta = ArrayMeta(
            shape=shape,
            dtype=str(np.dtype(array.dtype)),
            chunks=tuple(chunks),
            dim_labels=tuple(dim_labels) if dim_labels is not None else None,
            downsample=downsample,
        )
        request = UploadRequest(name=name if isinstance(name, str) else str(name), meta=meta, key=self.key)
        descriptor = fl.FlightDescriptor.for_command(request.encode())
        what = f"uploading {request.id}"
        conn = _connection(self.url, self.token)
        with _flight_errors(what):
            writer, reader = conn.do_put(descriptor, UPLOAD_SCHEMA)
        sender = _ChunkSender(writer, meta.chunks)
        failure: BaseException | None = None
        answer: Any = None
        try:
            if lazy:
                import dask.array as da

                da.store(array.rechunk(meta.chunks), sender, lock=False, scheduler="threads")
            else:
                for index in iter_chunk_indices(meta.shape, meta.chunks):
                    sender.send(index, array[chunk_slices(index, meta.shape, meta.chunks)])
            writer.done_writing()
            answer = reader.read()
        except fl.FlightError as exc:
            failure = exc
        except BaseException as exc:
            # A local failure (or Ctrl-C) mid-stream: cancel, so the plane discards what it has.
            with contextlib.suppress(Exception):
                writer.close()
            raise exc
        try:
            writer.close()
        except fl.FlightError as exc:
            failure = exc  # the server's own reason arrives here; prefer it
        if failure is not None:
            raise type(failure)(f"{what}: {clean_message(failure)}") from None
        if answer is None:
            raise fl.FlightServerError(f"{what}: the plane closed the upload without confirming it")
        sid = json.loads(answer.to_pybytes())["id"]
        if sid != source_id(request.name):
            raise fl.FlightServerError(f"{what}: the plane confirmed id {sid!r}, expected {request.id!r}")
        return str(sid)
