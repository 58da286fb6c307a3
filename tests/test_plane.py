"""The data plane's server and client, against an in-process server (the process lifetime is in test_plane_process.py)."""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
fl = pytest.importorskip("pyarrow.flight")
da = pytest.importorskip("dask.array")

from imagebench.plane import Client, source_id  # noqa: E402
from imagebench.plane.protocol import (  # noqa: E402
    MAX_NAME_LENGTH,
    ArrayMeta,
    ChunkTicket,
    ProtocolError,
    UploadRequest,
    downsample_block,
)
from imagebench.plane.server import (  # noqa: E402
    UPLOAD_SCHEMA,
    NotLoopback,
    PlaneServer,
    binary_column,
)


class CountingServer(PlaneServer):
    """The real server, counting the chunk requests it answers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.gets: list[tuple[str, int, tuple[int, ...]]] = []
        self._count_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def do_get(self, context: Any, ticket: Any) -> Any:
        try:
            t = ChunkTicket.decode(ticket.ticket)
            with self._count_lock:
                self.gets.append((t.id, t.level, tuple(t.chunk)))
        except ProtocolError:
            pass  # the server itself answers a malformed ticket
        return super().do_get(context, ticket)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CountingServer]:
    srv = CountingServer(tmp_path_factory.mktemp("plane"))
    yield srv
    srv.shutdown()


@pytest.fixture(scope="module")
def client(server: CountingServer) -> Client:
    return Client(server.url)


_names = iter(range(10**6))


def fresh(prefix: str = "t") -> str:
    return f"{prefix}-{next(_names)}"


def _batch(index: list[int], block: np.ndarray) -> Any:
    return pa.record_batch(
        [pa.array([index], type=pa.list_(pa.int64())), binary_column(np.ascontiguousarray(block))], schema=UPLOAD_SCHEMA
    )


def raw_put(url: str, request: UploadRequest, batches: list[Any], *, done: bool = True) -> None:
    """Upload by hand (what a foreign client could send); raises the server's FlightError."""
    conn = fl.connect(url)
    writer, _ = conn.do_put(fl.FlightDescriptor.for_command(request.encode()), UPLOAD_SCHEMA)
    try:
        for b in batches:
            writer.write_batch(b)
        if done:
            writer.done_writing()
    finally:
        writer.close()


def assert_serving(server: PlaneServer) -> None:
    assert Client(server.url).health()["ok"] is True
    assert not any((server.data_dir / "staging").iterdir()), "a failed upload left staging behind"


# --------------------------------------------------------------------------- protocol


def test_source_id_is_a_one_way_hash_of_the_name() -> None:
    assert source_id("abc") == "cache_" + hashlib.sha256(b"abc").hexdigest()[:12]
    assert source_id("abc") != source_id("abd")


def test_array_meta_validates_and_builds_the_pyramid_shapes() -> None:
    meta = ArrayMeta(shape=(5, 1000, 700), dtype="uint16", chunks=(1, 256, 256))
    assert meta.level_shapes() == [(5, 1000, 700), (5, 500, 350), (5, 250, 175)]
    assert meta.level_chunks(2) == (1, 250, 175)
    labelled = ArrayMeta(shape=(40, 3, 100), dtype="float32", chunks=(16, 3, 16), dim_labels=("y", "c", "x"))
    assert labelled.spatial_axes == (0, 2)
    assert labelled.level_shapes()[-1] == (5, 3, 13)
    assert ArrayMeta(shape=(10,), dtype="int8", chunks=(100,)).chunks == (10,)  # clipped to the shape
    for bad, field in [
        (dict(shape=(4, 4), dtype="complex64", chunks=(2, 2)), "dtype"),
        (dict(shape=(4, 0), dtype="uint8", chunks=(2, 2)), "shape"),
        (dict(shape=(4, 4), dtype="uint8", chunks=(2,)), "chunks"),
        (dict(shape=(4, 4), dtype="uint8", chunks=(2, 2), dim_labels=("y", "y")), "dim_labels"),
        (dict(shape=(4, 4), dtype="uint8", chunks=(2, 2), downsample="max"), "downsample"),
        (dict(shape=(10**5, 10**5), dtype="float64", chunks=(10**5, 10**5)), "chunks"),
    ]:
        with pytest.raises(ProtocolError, match=field):
            ArrayMeta(**bad)


def test_downsample_block_mean_and_nearest() -> None:
    x = np.arange(15, dtype=np.uint16).reshape(3, 5)
    mean = downsample_block(x, (0, 1), "mean")
    assert mean.shape == (2, 3) and mean.dtype == np.uint16
    assert mean[0, 0] == np.rint(np.mean([0, 1, 5, 6]))
    assert mean[1, 2] == 14  # the odd corner averages with itself
    assert np.array_equal(downsample_block(x, (0, 1), "nearest"), x[::2, ::2])
    assert downsample_block(np.array([[True, False], [True, True]]), (0, 1), "mean").tolist() == [[True]]


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("dtype", ["uint16", "float32", "int8", "bool"])
def test_round_trip_numpy(client: Client, dtype: str) -> None:
    rng = np.random.default_rng(1)
    x = (rng.random((70, 45)) * 100).astype(dtype)
    sid = client.upload(x, fresh(), chunks=(32, 16))
    assert sid.startswith("cache_")
    got = client.get(sid)
    assert isinstance(got, da.Array) and got.dtype == x.dtype and got.chunks == ((32, 32, 6), (16, 16, 13))
    assert np.array_equal(got.compute(), x)
    assert np.array_equal(client.read_chunk(sid, (2, 2)), x[64:, 32:])


def test_round_trip_dask_input_with_irregular_chunks(client: Client) -> None:
    x = np.random.default_rng(2).random((3, 50, 61)).astype(np.float32)
    lazy = da.from_array(x, chunks=((1, 2), (7, 43), (61,)))
    sid = client.upload(lazy, fresh(), chunks=(1, 16, 16), dim_labels=("t", "y", "x"))
    d = client.describe(sid)
    assert d["chunks"] == [1, 16, 16] and d["dim_labels"] == ["t", "y", "x"] and d["dtype"] == "float32"
    assert np.array_equal(client.get(sid).compute(), x)


def test_default_chunks_are_spatial(client: Client) -> None:
    sid = client.upload(np.zeros((2, 300, 20), np.uint8), fresh())
    assert client.describe(sid)["chunks"] == [1, 256, 20]


def test_get_is_lazy_and_fetches_only_the_chunks_it_needs(server: CountingServer, client: Client) -> None:
    x = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    sid = client.upload(x, fresh(), chunks=(16, 16))
    before = len([g for g in server.gets if g[0] == sid])
    lazy = client.get(sid)
    assert len([g for g in server.gets if g[0] == sid]) == before  # building the array fetched nothing
    crop = lazy[20:30, 40:50].compute()
    assert np.array_equal(crop, x[20:30, 40:50])
    fetched = {g[2] for g in server.gets if g[0] == sid and g[1] == 0}
    assert fetched == {(1, 2), (1, 3)}


@pytest.mark.parametrize("shape, chunks", [((70, 45), (16, 16)), ((3, 40, 33), (1, 16, 16)), ((5,), (2,))])
def test_batched_reads_match_the_lazy_chunks_on_every_level(client: Client, shape: tuple, chunks: tuple) -> None:
    x = np.random.default_rng(4).integers(0, 60000, shape).astype(np.uint16)
    sid = client.upload(x, fresh(), chunks=chunks)
    assert np.array_equal(client.read(sid), x)
    for streams in (1, 2, 7):
        assert np.array_equal(client.read(sid, streams=streams), x)
    for level in range(len(client.describe(sid)["levels"])):
        chunked = client.get(sid, level).compute()
        assert np.array_equal(client.read(sid, level), chunked)
        for span in [(2,) * len(shape), (1,) * (len(shape) - 1) + (3,), (99,) * len(shape)]:
            assert np.array_equal(client.get(sid, level, span=span).compute(), chunked)
    with pytest.raises(ValueError, match="span must be"):
        client.get(sid, span=(0,) * len(shape))


def test_a_box_ticket_streams_only_the_chunks_asked_for(server: PlaneServer, client: Client) -> None:
    x = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    sid = client.upload(x, fresh(), chunks=(16, 16))
    conn = fl.connect(server.url)
    table = conn.do_get(fl.Ticket(ChunkTicket(sid, 0, (1, 2), span=(2, 5)).encode())).read_all()
    assert [tuple(i) for i in table.column(0).to_pylist()] == [(1, 2), (1, 3), (2, 2), (2, 3)]
    for ticket, why in [
        (json.dumps({"id": sid, "level": 0, "chunk": [0, 0], "span": [0, 1]}).encode(), "field 'span'"),
        (json.dumps({"id": sid, "level": 0, "chunk": [0, 0], "span": [1]}).encode(), "field 'span'"),
        (json.dumps({"id": sid, "level": 0, "chunk": [4, 0], "span": [1, 1]}).encode(), "outside the chunk grid"),
    ]:
        with pytest.raises(fl.FlightServerError, match=why):
            conn.do_get(fl.Ticket(ticket)).read_all()
    assert_serving(server)


def test_parallel_reads_are_thread_safe(client: Client) -> None:
    x = np.random.default_rng(3).integers(0, 60000, (128, 128), dtype=np.uint16)
    sid = client.upload(x, fresh(), chunks=(16, 16))
    import dask

    with dask.config.set(scheduler="threads", num_workers=8):
        for _ in range(3):
            assert np.array_equal(client.get(sid).compute(), x)


def test_pyramid_levels(client: Client) -> None:
    x = np.random.default_rng(4).integers(0, 1000, (2, 100, 70), dtype=np.uint16)
    sid = client.upload(x, fresh(), chunks=(1, 16, 16), dim_labels=("t", "y", "x"))
    levels = client.levels(sid)
    assert [lv.shape for lv in levels] == [(2, 100, 70), (2, 50, 35), (2, 25, 18), (2, 13, 9)]
    assert client.describe(sid)["levels"] == [list(lv.shape) for lv in levels]
    assert all(lv.chunksize[1] <= 16 and lv.chunksize[2] <= 16 for lv in levels)
    one = x[:, :100, :70].astype(np.float64).reshape(2, 50, 2, 35, 2).mean(axis=(2, 4))
    assert np.array_equal(levels[1].compute(), np.rint(one).astype(np.uint16))
    # the last level fits in one chunk along the spatial axes
    assert levels[-1].numblocks == (2, 1, 1)


def _expected_pyramid(x: np.ndarray, axes: tuple[int, ...], chunks: tuple[int, ...], method: str = "mean") -> list[np.ndarray]:
    out = [x]
    while any(out[-1].shape[a] > chunks[a] for a in axes):
        out.append(downsample_block(out[-1], axes, method))
    return out


@pytest.mark.parametrize(
    "shape, chunks, labels",
    [
        ((3, 45, 37), (1, 8, 8), ("t", "y", "x")),  # even chunks: built while the stream arrives
        ((3, 45, 37), (2, 7, 9), ("t", "y", "x")),  # odd chunks: built from the stored level afterwards
        ((21, 5, 30), (4, 5, 6), ("z", "c", "x")),  # spatial axes from the labels, one of them not last
    ],
)
def test_pyramid_matches_a_whole_array_reduction(client: Client, shape: tuple[int, ...], chunks: tuple[int, ...],
                                                 labels: tuple[str, ...]) -> None:
    x = np.random.default_rng(6).integers(0, 50000, shape).astype(np.uint16)
    sid = client.upload(x, fresh(), chunks=chunks, dim_labels=labels)
    axes = tuple(i for i, lab in enumerate(labels) if lab in "xyz")
    expected = _expected_pyramid(x, axes, chunks)
    got = client.levels(sid)
    assert [g.shape for g in got] == [e.shape for e in expected]
    for g, e in zip(got, expected):
        assert np.array_equal(g.compute(), e)


def test_the_store_is_a_zarr_v3_pyramid(server: PlaneServer, client: Client) -> None:
    """The chunk files the plane writes itself are what zarr reads back, level by level."""
    zarr = pytest.importorskip("zarr")
    x = np.random.default_rng(7).integers(0, 60000, (2, 37, 50)).astype(np.uint16)
    sid = client.upload(x, fresh(), chunks=(1, 16, 16), dim_labels=("t", "y", "x"))
    group = zarr.open_group(store=str(server.arrays_dir / sid), mode="r")
    assert group.attrs["imagebench_plane"]["levels"] == client.describe(sid)["levels"]
    for level, lazy in enumerate(client.levels(sid)):
        stored = group[str(level)]
        assert stored.metadata.dimension_names == ("t", "y", "x")
        assert np.array_equal(stored[...], lazy.compute())
    assert np.array_equal(group["0"][...], x)


def test_zero_chunks_and_edge_chunks_read_back(client: Client) -> None:
    x = np.zeros((40, 40), np.float32)
    x[33:, 33:] = 2.5  # only the edge chunk holds anything; zarr leaves all-zero chunks unwritten
    sid = client.upload(x, fresh(), chunks=(16, 16))
    assert np.array_equal(client.read_chunk(sid, (0, 0)), np.zeros((16, 16), np.float32))
    assert np.array_equal(client.read_chunk(sid, (2, 2)), x[32:, 32:])
    assert np.array_equal(client.get(sid).compute(), x)


def test_labels_pyramid_is_nearest(client: Client) -> None:
    labels = np.random.default_rng(5).integers(0, 5, (40, 40)).astype(np.int32)
    sid = client.upload(labels, fresh(), chunks=(8, 8), downsample="nearest")
    assert np.array_equal(client.get(sid, 1).compute(), labels[::2, ::2])


def test_small_array_has_one_level(client: Client) -> None:
    sid = client.upload(np.ones((8, 8), np.float32), fresh(), chunks=(8, 8))
    assert len(client.levels(sid)) == 1


def test_client_and_lazy_arrays_pickle(client: Client) -> None:
    x = np.arange(100, dtype=np.int16).reshape(10, 10)
    sid = client.upload(x, fresh(), chunks=(5, 5))
    again = pickle.loads(pickle.dumps(client))
    assert again == client
    lazy = pickle.loads(pickle.dumps(client.get(sid)))
    assert np.array_equal(lazy.compute(), x)


def test_list_shows_stored_ids(client: Client, capsys: Any) -> None:
    name = fresh()
    sid = client.upload(np.zeros((4, 6), np.uint8), name, chunks=(2, 2))
    assert sid == source_id(name)
    assert sid in client.list()
    from imagebench.cli import main

    assert main(["plane", "list", client.url]) == 0
    assert f"{sid}  4x6 uint8  chunks [2, 2]  levels 3" in capsys.readouterr().out
    assert main(["plane", "list", "http://nowhere"]) == 2


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "name, why",
    [("a/b", "path separator"), ("a\\b", "path separator"), ("", "empty"), ("x" * (MAX_NAME_LENGTH + 1), "at most"),
     ("..", "not allowed"), ("a\nb", "control")],
)
def test_bad_names_are_refused(server: PlaneServer, client: Client, name: str, why: str) -> None:
    before = client.list()
    with pytest.raises(fl.FlightServerError, match=why):
        client.upload(np.zeros((4, 4), np.uint8), name, chunks=(2, 2))
    assert client.list() == before
    assert_serving(server)


def test_unknown_ids_bad_levels_and_chunks_are_refused(server: PlaneServer, client: Client) -> None:
    sid = client.upload(np.zeros((8, 8), np.uint8), fresh(), chunks=(4, 4))
    with pytest.raises(fl.FlightServerError, match="no array with id"):
        client.get("cache_000000000000")
    with pytest.raises(fl.FlightServerError, match="outside the chunk grid"):
        client.read_chunk(sid, (2, 0))
    with pytest.raises(fl.FlightServerError, match="outside the chunk grid"):
        client.read_chunk(sid, (-1, 0))
    conn = fl.connect(server.url)
    for ticket, why in [
        (ChunkTicket(sid, 5, (0, 0)).encode(), "level"),
        (ChunkTicket("cache_000000000000", 0, (0, 0)).encode(), "no array with id"),
        (b'{"id": "../etc", "level": 0, "chunk": [0, 0]}', "field 'id'"),
        (b"not json", "not valid JSON"),
        (json.dumps({"id": sid, "level": 0}).encode(), "'chunk' is missing"),
    ]:
        with pytest.raises(fl.FlightServerError, match=why):
            conn.do_get(fl.Ticket(ticket)).read_all()
    with pytest.raises(fl.FlightServerError, match="field 'id'"):
        client.describe("../../etc/passwd")
    with pytest.raises(ValueError, match="level"):
        client.get(sid, level=3)
    assert_serving(server)


def test_upload_over_an_existing_id_is_refused(server: PlaneServer, client: Client) -> None:
    name = fresh("fixture")
    original = np.full((8, 8), 7, np.uint8)
    sid = client.upload(original, name, chunks=(4, 4))
    with pytest.raises(fl.FlightServerError, match="already exists"):
        client.upload(np.zeros((8, 8), np.uint8), name, chunks=(4, 4))
    with pytest.raises(fl.FlightServerError, match="already exists"):
        client.upload(np.zeros((2, 2), np.float64), name)  # another shape changes nothing either
    assert np.array_equal(client.get(sid).compute(), original)
    assert_serving(server)


def test_a_second_upload_while_one_is_in_progress_is_refused(server: PlaneServer, client: Client) -> None:
    request = UploadRequest(fresh(), ArrayMeta(shape=(8, 8), dtype="uint8", chunks=(4, 4)))
    conn = fl.connect(server.url)
    writer, reader = conn.do_put(fl.FlightDescriptor.for_command(request.encode()), UPLOAD_SCHEMA)
    writer.write_batch(_batch([0, 0], np.full((4, 4), 1, np.uint8)))
    deadline = time.monotonic() + 60
    while request.id not in server._uploading and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(fl.FlightServerError, match="already in progress"):
        client.upload(np.zeros((8, 8), np.uint8), request.name, chunks=(4, 4))
    for index in ([0, 1], [1, 0], [1, 1]):
        writer.write_batch(_batch(index, np.full((4, 4), 1, np.uint8)))
    writer.done_writing()
    assert json.loads(reader.read().to_pybytes())["id"] == request.id
    writer.close()
    assert np.array_equal(client.get(request.id).compute(), np.ones((8, 8), np.uint8))


def test_ids_isolate_uploads(client: Client) -> None:
    """Holding an id gives no way to write under it: uploading with the id as a name lands elsewhere."""
    secret = fresh("secret-run-name")
    data = np.arange(16, dtype=np.uint8).reshape(4, 4)
    sid = client.upload(data, secret, chunks=(2, 2))
    other = client.upload(np.zeros((4, 4), np.uint8), sid, chunks=(2, 2))
    assert other != sid and other == source_id(sid)
    assert np.array_equal(client.get(sid).compute(), data)


def test_truncated_stream_is_refused_and_nothing_published(server: PlaneServer, client: Client) -> None:
    request = UploadRequest(fresh(), ArrayMeta(shape=(8, 8), dtype="uint8", chunks=(4, 4)))
    with pytest.raises(fl.FlightServerError, match="1 of 4 chunks"):
        raw_put(server.url, request, [_batch([0, 0], np.zeros((4, 4), np.uint8))])
    assert request.id not in client.list()
    with pytest.raises(fl.FlightServerError, match="no array"):
        client.describe(request.id)
    assert not (server.arrays_dir / request.id).exists()
    assert_serving(server)
    # the name is not burnt: a complete upload under it succeeds afterwards
    assert client.upload(np.ones((8, 8), np.uint8), request.name, chunks=(4, 4)) == request.id


@pytest.mark.parametrize(
    "batches, why",
    [
        ([_batch([0, 0], np.zeros((4, 4), np.uint8))] * 2, "arrived twice"),
        ([_batch([0, 2], np.zeros((4, 4), np.uint8))], "outside the chunk grid"),
        ([_batch([0, 0], np.zeros((4, 3), np.uint8))], "has 12 bytes, expected 16"),
        ([_batch([0], np.zeros((4, 4), np.uint8))], "expected 2 integers"),
    ],
)
def test_malformed_streams_are_refused(server: PlaneServer, client: Client, batches: list[Any], why: str) -> None:
    request = UploadRequest(fresh(), ArrayMeta(shape=(8, 8), dtype="uint8", chunks=(4, 4)))
    with pytest.raises(fl.FlightServerError, match=why):
        raw_put(server.url, request, batches)
    assert request.id not in client.list()
    assert_serving(server)


def test_foreign_descriptors_and_schemas_are_refused(server: PlaneServer) -> None:
    conn = fl.connect(server.url)
    writer, _ = conn.do_put(fl.FlightDescriptor.for_path("x"), UPLOAD_SCHEMA)
    with pytest.raises(fl.FlightServerError, match="must be a command"):
        writer.done_writing()
        writer.close()
    bad = {"op": "upload", "version": 99, "name": "n", "shape": [2], "dtype": "uint8", "chunks": [2]}
    writer, _ = conn.do_put(fl.FlightDescriptor.for_command(json.dumps(bad).encode()), UPLOAD_SCHEMA)
    with pytest.raises(fl.FlightServerError, match="version"):
        writer.done_writing()
        writer.close()
    request = UploadRequest(fresh(), ArrayMeta(shape=(2,), dtype="uint8", chunks=(2,)))
    other = pa.schema([("values", pa.int64())])
    writer, _ = conn.do_put(fl.FlightDescriptor.for_command(request.encode()), other)
    with pytest.raises(fl.FlightServerError, match="stream schema"):
        writer.write_batch(pa.record_batch([pa.array([1])], schema=other))
        writer.done_writing()
        writer.close()
    assert_serving(server)


def test_client_that_disconnects_mid_upload(server: PlaneServer, client: Client) -> None:
    """A client process that dies after one chunk: the plane keeps serving and stores nothing."""
    name = fresh("gone")
    code = textwrap.dedent(
        f"""
        import os, numpy as np, pyarrow as pa, pyarrow.flight as fl
        from imagebench.plane.protocol import ArrayMeta, UploadRequest
        from imagebench.plane.server import UPLOAD_SCHEMA, binary_column
        req = UploadRequest({name!r}, ArrayMeta(shape=(64, 64), dtype="uint8", chunks=(32, 32)))
        w, _ = fl.connect({server.url!r}).do_put(fl.FlightDescriptor.for_command(req.encode()), UPLOAD_SCHEMA)
        b = pa.record_batch([pa.array([[0, 0]], type=pa.list_(pa.int64())), binary_column(np.zeros((32, 32), np.uint8))],
                            schema=UPLOAD_SCHEMA)
        w.write_batch(b)
        print("sent", flush=True)
        os._exit(3)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3 and "sent" in proc.stdout, proc.stderr
    # The upload is over once the server releases the id; wait for that (bounded), then check.
    deadline = time.monotonic() + 60
    while source_id(name) in server._uploading and time.monotonic() < deadline:
        time.sleep(0.05)
    assert source_id(name) not in server._uploading
    assert source_id(name) not in client.list()
    assert_serving(server)
    assert client.upload(np.zeros((64, 64), np.uint8), name, chunks=(32, 32)) == source_id(name)


def test_loopback_only(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "192.168.1.10", "example.org", "::"):
        with pytest.raises(NotLoopback):
            PlaneServer(tmp_path, host=host)
    from imagebench.cli import main

    assert main(["plane", "serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)]) == 2


def test_import_is_light() -> None:
    code = (
        "import sys, imagebench, imagebench.plane, imagebench.cli, imagebench.cli.plane; "
        "print(sorted(m for m in ('pyarrow', 'dask', 'zarr') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
