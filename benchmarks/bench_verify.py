"""Out-of-band hashing throughput: ``imagebench fixtures verify`` against one ``openssl dgst -sha256``.

Writes a fixture tree of several files of random bytes (default 8 x 272 MiB, about 2.1 GiB)
with a manifest, reads every file once so both tools start from a warm page cache, then runs
``imagebench fixtures verify ROOT --quiet`` and one ``openssl dgst -sha256 FILES...`` process
alternately and prints the median wall time of each, the throughput, and the ratio. The anchor
is openssl on one core (it uses the CPU's SHA extensions where coreutils' ``sha256sum`` may not,
so it is the honest single-core limit); the target is verify >= 1.7x its throughput with two
cores. ``sha256sum`` is printed beside it when installed. verify runs as a fresh process, so its
Python start-up is inside the number. The tree is deleted afterwards.

Usage: python benchmarks/bench_verify.py [--files N] [--mib M] [--repeats R] [--workers W] [--dir TMPDIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from imagebench.fixtures import tree

MIB = 1 << 20


def write_tree(root: Path, files: int, mib: int) -> list[Path]:
    folder = root / "bench" / "verify"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(files):
        path = folder / f"part-{i:02d}.bin"
        with open(path, "wb") as fh:
            for _ in range(mib // 16):
                fh.write(rng.bytes(16 * MIB))
            rest = mib % 16
            if rest:
                fh.write(rng.bytes(rest * MIB))
        paths.append(path)
    tree.write_case_layout(root, "bench", "verify", about="hashing benchmark", data={}, truth={})
    tree.write_manifest_entry(root, "bench", "verify", provenance="random bytes, seed 0", citation="benchmark")
    return paths


def verify_command(root: Path, workers: int | None) -> list[str]:
    """``imagebench fixtures verify --quiet ROOT``, through the console script when installed."""
    script = Path(sys.executable).with_name("imagebench")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "imagebench"]
    extra = ["--workers", str(workers)] if workers else []
    return [*cmd, "fixtures", "verify", "--quiet", *extra, str(root)]


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} ... exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
    return elapsed


def measure(verify: list[str], baseline: list[str], repeats: int) -> tuple[list[float], list[float]]:
    timed(verify)  # warm the page cache and imports
    timed(baseline)
    t_verify, t_sum = [], []
    for _ in range(repeats):
        t_verify.append(timed(verify))
        t_sum.append(timed(baseline))
    return t_verify, t_sum


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--mib", type=int, default=272)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    openssl = shutil.which("openssl")
    if openssl is None:
        print("openssl is not installed; nothing to compare against")
        return 2
    sha256sum = shutil.which("sha256sum")

    tmp = Path(tempfile.mkdtemp(prefix="imagebench-bench-verify-", dir=args.dir))
    try:
        total = args.files * args.mib * MIB
        print(f"writing {args.files} x {args.mib} MiB ({total / (1 << 30):.2f} GiB) into {tmp}", flush=True)
        paths = write_tree(tmp, args.files, args.mib)
        baseline = [openssl, "dgst", "-sha256", *map(str, paths)]
        print(f"cores: {os.cpu_count()}, verify workers: {args.workers or 'default'}", flush=True)
        t_verify, t_ssl = measure(verify_command(tmp, args.workers), baseline, args.repeats)
        mv, mo = statistics.median(t_verify), statistics.median(t_ssl)
        gib = total / (1 << 30)
        print(f"openssl dgst -sha256, one process (anchor) median {mo:7.2f} s  {gib / mo:6.2f} GiB/s")
        if sha256sum is not None:
            _, t_sum = measure(verify_command(tmp, args.workers), [sha256sum, *map(str, paths)], 1)
            print(f"sha256sum (for reference)                  once   {t_sum[0]:7.2f} s  {gib / t_sum[0]:6.2f} GiB/s")
        print(f"imagebench fixtures verify                  median {mv:7.2f} s  {gib / mv:6.2f} GiB/s")
        print(f"ratio verify throughput / openssl: {mo / mv:.2f}x (target >= 1.7x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
