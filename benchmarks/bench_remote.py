"""Workers that share nothing with the driver: the built-in suite on namespaced workers vs serially.

Two workers each run in a filesystem namespace of their own (``imagebench.executor.namespaced``,
bubblewrap): they see neither the checkout, the fixture tree, the fixture cache nor the outcome
folder. Curated cases' files travel by digest (``executor.shipping``) and each unit's files come
back to the driver. Printed: wall of the serial run (the anchor) and of a first run on fresh
worker caches and a second run on warm ones (their ratio to serial), the bytes and blobs shipped
by each, the blobs every worker already had on the second, and whether the results are the serial
run's field by field. Needs ``bwrap``; the load average is printed beside the figures (the
machine may be shared).

    python benchmarks/bench_remote.py [--samples 2] [--repeats 1] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import _differences  # noqa: E402 - the same field-by-field comparison


def _load() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def bench_remote(samples: int, repeats: int, workers: int, out: Path) -> bool:
    from imagebench import cases
    from imagebench.executor import namespaced, run_cases
    from imagebench.executor.shipping import LAST_SHIPPING
    from imagebench.subjects import ReferenceSubject

    if namespaced.bwrap() is None:
        print("remote: bwrap is not installed; skipped")
        return True
    suite = cases.all_cases()
    subject = ReferenceSubject()
    os.environ["IMAGEBENCH_CACHE"] = str(out / "driver-cache")

    def serial() -> Any:
        return run_cases(suite, subject, samples=samples, out=out / "runs", progress=False)

    serial()  # warm-up: the driver's imports and its fixture cache
    t_serial: list[float] = []
    first_serial = None
    for _ in range(repeats):
        start = time.perf_counter()
        r = serial()
        t_serial.append(time.perf_counter() - start)
        first_serial = first_serial or r
    load_serial = _load()
    load_cold = load_warm = ""
    cold: list[tuple[float, int, int]] = []
    warm: list[tuple[float, int, int, int]] = []
    diffs: list[str] = []
    for i in range(repeats):
        root = out / f"ns-{i}"  # fresh worker caches each repeat
        start = time.perf_counter()
        with namespaced.namespaced_cluster(workers, root) as cluster:
            started = time.perf_counter() - start

            def remote(cluster: Any = cluster) -> Any:
                return run_cases(suite, subject, samples=samples, out=out / "runs", progress=False,
                                 scheduler=cluster.address)  # fmt: skip

            start = time.perf_counter()
            r = remote()
            cold.append((time.perf_counter() - start, LAST_SHIPPING.bytes_shipped, LAST_SHIPPING.blobs_shipped))
            load_cold = _load()
            diffs += _differences(first_serial, r)
            start = time.perf_counter()
            r = remote()
            warm.append(
                (
                    time.perf_counter() - start,
                    LAST_SHIPPING.bytes_shipped,
                    LAST_SHIPPING.blobs_shipped,
                    LAST_SHIPPING.blobs_cached,
                )
            )
            diffs += _differences(first_serial, r)
            load_warm = _load()
        print(f"  (repeat {i + 1}: {workers} namespaced workers started in {started:.1f} s, {_load()})")
    assert first_serial is not None
    units = sum(len(v) for v in first_serial.samples.values())
    s = statistics.median(t_serial)
    c = statistics.median(t for t, _, _ in cold)
    w = statistics.median(t for t, _, _, _ in warm)
    print(f"remote: {len(suite)} case(s) x {samples} sample(s) = {units} units, reference subject, median of {repeats}")
    print(f"  serial (anchor)                                  {s:7.2f} s  1.00x  ({load_serial})")
    print(f"  {workers} namespaced workers, fresh caches         {c:7.2f} s  {s / c:4.2f}x  ({load_cold})")
    print("    (fresh: every procedural fixture is built on a worker; the serial anchor reads the warm driver cache)")
    print(f"  {workers} namespaced workers, second run           {w:7.2f} s  {s / w:4.2f}x  ({load_warm})")
    print(f"  shipped on the first run   {cold[0][1] / 1e6:8.2f} MB in {cold[0][2]} blob sends")
    print(f"  shipped on the second run  {warm[0][1] / 1e6:8.2f} MB in {warm[0][2]} blob sends; "
          f"{warm[0][3]} blob(s) found in every worker's store")  # fmt: skip
    print(f"  results identical to serial: {'yes' if not diffs else 'NO: ' + ', '.join(diffs[:5])}")
    return not diffs and warm[0][1] == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cpu(s), {_load()}")
    out = Path(tempfile.mkdtemp(prefix="imagebench-bench-remote-"))
    try:
        ok = bench_remote(args.samples, max(1, args.repeats), args.workers, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"remote targets {'met' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
