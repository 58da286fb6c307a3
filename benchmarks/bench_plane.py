"""Data-plane throughput and latency against local zarr on the same machine, in the same run.

Three measurements, each a median over repeats, each with its own anchor measured here:

1. read: every chunk of an N x N uint16 array through ``Client.get(id)`` (dask, threaded
   scheduler, T threads) vs ``dask.array.from_zarr`` over the very store the plane wrote
   (level 0 in its data directory), same threads. Target: plane >= 0.5x local.
2. upload: ``Client.upload`` (streaming, plus the pyramid the plane builds) vs writing the same
   array to a local zarr v3 store with the same chunks and layout (level 0 only). Target: >= 0.3x.
3. first chunk: from ``Client.get(id)`` to the first level-0 chunk of a B x B upload in memory,
   vs opening the local store and reading one chunk. Target: < 10x.

The plane runs as its own process (``start_plane``), as in a real run.

    .venv/bin/python benchmarks/bench_plane.py            # 8192 and 16384, 4 threads
    .venv/bin/python benchmarks/bench_plane.py --size 2048 --big 4096 --repeats 3   # quick
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import statistics
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


def make_image(n: int, seed: int = 0) -> np.ndarray:
    """A 12-bit camera-like image: a smooth gradient plus shot-like noise (compressible, not trivially)."""
    rng = np.random.default_rng(seed)
    y = np.linspace(0.0, 1.0, n, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, n, dtype=np.float32)[None, :]
    base = 800.0 + 1500.0 * y * x
    noise = rng.integers(0, 256, (n, n), dtype=np.uint16)
    return (base.astype(np.uint16) + noise).astype(np.uint16)


def report(name: str, plane_s: float, local_s: float, *, higher_is_better: bool, target: str, unit_mb: float | None) -> None:
    if higher_is_better:
        ratio = local_s / plane_s  # plane throughput relative to local
        what = f"plane/local throughput {ratio:.2f}x"
    else:
        ratio = plane_s / local_s
        what = f"plane/local latency {ratio:.1f}x"
    rates = ""
    if unit_mb is not None:
        rates = f"  ({unit_mb / plane_s:7.0f} MB/s vs {unit_mb / local_s:7.0f} MB/s)"
    print(f"{name:<34} plane {plane_s * 1e3:9.1f} ms   local {local_s * 1e3:9.1f} ms   {what}  target {target}{rates}")


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

            # 1. read every chunk: plane vs the same store on local disk
            store = plane.data_dir / "arrays" / sid / "0"
            with dask.config.set(scheduler="threads", num_workers=args.threads):
                lazy = client.get(sid)
                local = da.from_zarr(str(store))
                assert np.array_equal(lazy.compute(), image)  # warm-up and correctness
                t_read = median_time(lambda: lazy.compute(), args.repeats)
                t_local = median_time(lambda: local.compute(), args.repeats)
            report("read all chunks (get)", t_read, t_local, higher_is_better=True, target=">= 0.5x", unit_mb=mb)
            report("upload (incl. pyramid)", t_up, t_write, higher_is_better=True, target=">= 0.3x", unit_mb=mb)

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
                arr = client.get(big_id)
                arr.blocks[i, j].compute(scheduler="sync")
                lat_plane.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                z = zarr.open_array(store=str(big_store), mode="r")
                z[i * args.chunk : (i + 1) * args.chunk, j * args.chunk : (j + 1) * args.chunk]
                lat_local.append(time.perf_counter() - t0)
            report("first chunk of level 0 (get)", statistics.median(lat_plane), statistics.median(lat_local),
                   higher_is_better=False, target="< 10x", unit_mb=None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
