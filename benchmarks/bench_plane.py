"""The data plane against the transport it runs on, and against local zarr, in the same run.

Each figure is a median over repeats, each beside its anchor measured here:

1. read: all of an N x N uint16 array from the plane. The anchor is raw Arrow Flight: a bare
   Flight server in its own process holding the same chunks in memory, streaming them to one
   ``do_get`` (the transport's limit on this loopback: no disk, no index, no checks). The plane's
   ``Client.read`` (batched: a stream per band of chunks) must reach >= 0.5x of it. Printed beside:
   the lazy per-chunk ``Client.get(id).compute()`` (a request per chunk, dask threads), the same
   with ``span`` blocks, and ``dask.array.from_zarr`` over the plane's own store on local disk.
2. upload: ``Client.upload`` (streaming, plus the pyramid the plane builds) vs writing the same
   array to a local zarr v3 store with the same chunks and layout (level 0 only). Target: >= 0.3x.
3. first chunk: from ``Client.get(id)`` to the first level-0 chunk of a B x B upload in memory,
   read as a viewer reads it (a slice of the lazy array turned into numpy);
   target <= 5 ms, shown beside one raw Flight ``do_get`` of one chunk of the same size.

The plane runs as its own process (``start_plane``), as in a real run.

    .venv/bin/python benchmarks/bench_plane.py            # 8192 and 16384, 4 threads
    .venv/bin/python benchmarks/bench_plane.py --size 2048 --big 4096 --repeats 3   # quick
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


RAW_SERVER = r"""
import sys, numpy as np, pyarrow as pa, pyarrow.flight as fl
image = np.load(sys.argv[1]); c = int(sys.argv[2])
chunks = [np.ascontiguousarray(image[i:i + c, j:j + c]) for i in range(0, image.shape[0], c)
          for j in range(0, image.shape[1], c)]
schema = pa.schema([("data", pa.large_binary())])
def batch(a):
    buf = pa.py_buffer(a)
    offsets = pa.py_buffer(np.array([0, buf.size], dtype=np.int64))
    return pa.record_batch([pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, buf])], schema=schema)
class Raw(fl.FlightServerBase):
    def do_get(self, context, ticket):
        if ticket.ticket == b"all":
            return fl.GeneratorStream(schema, (batch(a) for a in chunks))
        return fl.RecordBatchStream(pa.Table.from_batches([batch(chunks[int(ticket.ticket)])]))
server = Raw("grpc://127.0.0.1:0")
print(server.port, flush=True)
server.serve()
"""


def start_raw(image: np.ndarray, chunk: int, scratch: Path) -> tuple[subprocess.Popen[str], str]:
    """A bare Flight server in its own process holding ``image``'s chunks in memory (the anchor)."""
    path = scratch / "raw.npy"
    np.save(path, image)
    proc = subprocess.Popen([sys.executable, "-c", RAW_SERVER, str(path), str(chunk)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, f"grpc://127.0.0.1:{int(proc.stdout.readline())}"


def make_image(n: int, seed: int = 0) -> np.ndarray:
    """A 12-bit camera-like image: a smooth gradient plus shot-like noise (compressible, not trivially)."""
    rng = np.random.default_rng(seed)
    y = np.linspace(0.0, 1.0, n, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, n, dtype=np.float32)[None, :]
    base = 800.0 + 1500.0 * y * x
    noise = rng.integers(0, 256, (n, n), dtype=np.uint16)
    return (base.astype(np.uint16) + noise).astype(np.uint16)


def report(name: str, plane_s: float, anchor_s: float, *, higher_is_better: bool, target: str,
           unit_mb: float | None, anchor: str) -> None:
    if higher_is_better:
        what = f"{anchor_s / plane_s:.2f}x the throughput of {anchor}"
    else:
        what = f"{plane_s / anchor_s:.1f}x the latency of {anchor}"
    rates = ""
    if unit_mb is not None:
        rates = f"  ({unit_mb / plane_s:6.0f} vs {unit_mb / anchor_s:6.0f} MB/s)"
    print(f"{name:<30} {plane_s * 1e3:8.1f} ms vs {anchor_s * 1e3:8.1f} ms  {what:<42} target {target}{rates}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=8192, help="side of the read/upload array (default 8192)")
    parser.add_argument("--big", type=int, default=16384, help="side of the first-chunk array (default 16384)")
    parser.add_argument("--chunk", type=int, default=256, help="chunk side (default 256)")
    parser.add_argument("--threads", type=int, default=4, help="dask threads for reads (default 4)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per measurement (default 5)")
    args = parser.parse_args(argv)

    import dask
    import dask.array as da
    import zarr

    from imagebench.plane import start_plane
    from imagebench.plane.server import STORE_LAYOUT

    chunks = (args.chunk, args.chunk)
    scratch = Path(tempfile.mkdtemp(prefix="imagebench-bench-"))
    try:
        with start_plane() as plane:
            client = plane.client
            assert plane.data_dir is not None
            print(f"plane {plane.url}  data dir {plane.data_dir}", file=sys.stderr)
            image = make_image(args.size)
            mb = image.nbytes / 1e6
            print(f"# {args.size}x{args.size} uint16 ({mb:.0f} MB), chunks {chunks}, {args.threads} threads, "
                  f"median of {args.repeats}")

            # 2. upload vs local zarr write (measured first: it also gives the read test its store)
            sid = ""

            def upload() -> None:
                nonlocal sid
                sid = client.upload(image, secrets.token_hex(8), chunks=chunks)

            def local_write() -> None:
                target = scratch / secrets.token_hex(4)
                arr = zarr.create_array(
                    store=str(target), shape=image.shape, chunks=chunks, dtype=image.dtype, fill_value=0, **STORE_LAYOUT
                )
                arr[:] = image

            up_repeats = max(1, min(args.repeats, 3))
            t_up = median_time(upload, up_repeats)
            t_write = median_time(local_write, up_repeats)

            # 1. read everything: the plane vs raw Flight (the anchor) and vs its own store on local disk
            import pyarrow.flight as fl

            raw, raw_url = start_raw(image, args.chunk, scratch)
            try:
                conn = fl.connect(raw_url)
                assert conn.do_get(fl.Ticket(b"all")).read_all().num_rows == len(range(0, args.size, args.chunk)) ** 2
                t_raw = median_time(lambda: conn.do_get(fl.Ticket(b"all")).read_all(), args.repeats)
                conn.do_get(fl.Ticket(b"0")).read_all()
                lat_raw = median_time(lambda: conn.do_get(fl.Ticket(b"0")).read_all(), max(args.repeats, 9))
                conn.close()
            finally:
                raw.terminate()
                raw.wait()
            store = plane.data_dir / "arrays" / sid / "0"
            assert np.array_equal(client.read(sid), image)
            t_batched = median_time(lambda: client.read(sid), args.repeats)
            with dask.config.set(scheduler="threads", num_workers=args.threads):
                lazy = client.get(sid)
                spanned = client.get(sid, span=(4, 4))
                local = da.from_zarr(str(store))
                assert np.array_equal(lazy.compute(), image)  # warm-up and correctness
                t_read = median_time(lambda: lazy.compute(), args.repeats)
                t_span = median_time(lambda: spanned.compute(), args.repeats)
                t_local = median_time(lambda: local.compute(), args.repeats)
            anchor = "raw Flight"
            report("read all (Client.read)", t_batched, t_raw, higher_is_better=True, target=">= 0.5x",
                   unit_mb=mb, anchor=anchor)
            report("read all chunks (get, lazy)", t_read, t_raw, higher_is_better=True, target="(shown)",
                   unit_mb=mb, anchor=anchor)
            report("read all (get, span 4x4)", t_span, t_raw, higher_is_better=True, target="(shown)",
                   unit_mb=mb, anchor=anchor)
            report("read all (Client.read)", t_batched, t_local, higher_is_better=True, target="(shown)",
                   unit_mb=mb, anchor="local zarr")
            report("upload (incl. pyramid)", t_up, t_write, higher_is_better=True, target=">= 0.3x", unit_mb=mb,
                   anchor="local zarr")

            # 3. first-chunk latency on a big upload
            big = make_image(args.big, seed=1)
            t0 = time.perf_counter()
            big_id = client.upload(big, secrets.token_hex(8), chunks=chunks)
            t_big = time.perf_counter() - t0
            del big
            print(f"# {args.big}x{args.big} uint16 uploaded in {t_big:.1f} s "
                  f"({args.big * args.big * 2 / 1e6 / t_big:.0f} MB/s incl. pyramid, "
                  f"{len(client.describe(big_id)['levels'])} levels)")
            big_store = plane.data_dir / "arrays" / big_id / "0"
            grid = args.big // args.chunk
            picks = [(k * 7 % grid, k * 13 % grid) for k in range(max(args.repeats, 9))]
            lat_plane: list[float] = []
            lat_local: list[float] = []
            for i, j in picks:
                t0 = time.perf_counter()
                arr = client.get(big_id)  # as a viewer reads it: a slice of the lazy array, made concrete
                np.asarray(arr[i * args.chunk : (i + 1) * args.chunk, j * args.chunk : (j + 1) * args.chunk])
                lat_plane.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                z = zarr.open_array(store=str(big_store), mode="r")
                z[i * args.chunk : (i + 1) * args.chunk, j * args.chunk : (j + 1) * args.chunk]
                lat_local.append(time.perf_counter() - t0)
            first = statistics.median(lat_plane)
            report("first chunk of level 0 (get)", first, lat_raw, higher_is_better=False,
                   target=f"<= 5 ms: {'met' if first <= 0.005 else 'missed'}", unit_mb=None, anchor="raw Flight")
            report("first chunk of level 0 (get)", first, statistics.median(lat_local), higher_is_better=False,
                   target="(shown)", unit_mb=None, anchor="local zarr")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
