"""How much of a run is the harness itself, and how fast ``imagebench --help`` starts.

1. Runs the built-in suite with the ``reference`` subject exactly as ``imagebench run`` does
   (after one warm-up run that pays the one-off imports) and splits the wall time (the anchor)
   into the reference solutions (``times.subject_s``), the verifiers (``times.verify_s``), the
   time units spend outside them, and the time between units. The 20 % target is checked on the
   share outside reference solutions and verifiers, everything counted.
2. Runs ``make bench`` as a person does (``imagebench run --subject reference --samples 1`` in a
   fresh process, a fresh fixture cache, and with it a fresh closure cache: its ``closure-v1/``),
   twice: the first run fills the caches, the second reuses them. Each run's wall time (the anchor) is split the same way from its sample summaries.
   Targets: outside reference solutions and verifiers < 40 % on the first, < 20 % on the second,
   and the second's wall at most 0.8x the first's.
3. Times ``imagebench --help`` in a fresh process, median of 5, against ``python -c pass``
   measured the same way in the same run. Target: under 0.5 s.

Usage: python benchmarks/bench_overhead.py [--repeats N] [--modules a.b,c.d]
(``--modules`` names case modules to use instead of ``imagebench.cases.CASE_MODULES``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OVERHEAD_TARGET = 0.20
COLD_TARGET = 0.40
WARM_RATIO_TARGET = 0.8  # issue 29: the second make bench at most 0.8x the first
HELP_TARGET_S = 0.5


def _suite(modules: str | None) -> list:
    if modules:
        return [case for name in modules.split(",") if name for case in importlib.import_module(name).CASES]
    from imagebench import cases

    return cases.all_cases()


def _one_run(suite: list, out: Path) -> dict[str, float]:
    """One run of the suite as ``imagebench run`` does it (the runner starts its own plane)."""
    from imagebench.executor import run_cases
    from imagebench.runs.runner import presents_tensor
    from imagebench.subjects import ReferenceSubject

    start = time.perf_counter()
    result = run_cases(suite, ReferenceSubject(), out=out, progress=False)
    wall = time.perf_counter() - start
    tensor = {c.label for c in suite if presents_tensor(c)}
    t = dict.fromkeys(("subject", "verify", "units", "tensor_units", "array_units", "not_ok"), 0.0)
    for label, samples in result.samples.items():
        for s in samples:
            sub, ver, tot = (s.times.get(k, 0.0) for k in ("subject_s", "verify_s", "total_s"))
            t["subject"] += sub
            t["verify"] += ver
            t["units"] += tot
            t["tensor_units" if label in tensor else "array_units"] += tot - sub - ver
            t["not_ok"] += s.status != "ok"
            if s.status != "ok":
                print(f"  ({label}: {s.status}: {s.reason[:160]})")
    t["build"] = sum(cs.extra.get("build_s", 0.0) for cs in result.summaries.values())
    t["wall"] = wall
    # Wall time no unit covers: fixture builds not hidden by the prefetch, waiting for the data
    # plane, reports (PNGs, summaries), run.json, the receipt and the HTML report.
    t["between"] = wall - t["units"]
    return t


def bench_overhead(repeats: int, modules: str | None) -> bool:
    suite = _suite(modules)
    if not suite:
        print("overhead: no built-in cases are registered (imagebench.cases.CASE_MODULES is empty); nothing to measure")
        return True
    tmp = Path(tempfile.mkdtemp(prefix="imagebench-bench-"))
    try:
        _one_run(suite, tmp)  # warm-up: one-off imports (scipy, imageio, ...) land here
        runs = [_one_run(suite, tmp) for _ in range(repeats)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    wall = med["wall"]
    outside = (wall - med["subject"] - med["verify"]) / wall

    def share(key: str) -> str:
        return f"{med[key]:.3f} s ({med[key] / wall:.1%})"

    print(f"overhead: {len(suite)} case(s), reference subject, median of {repeats} run(s) after a warm-up")
    print(f"  wall (anchor)                           {wall:.3f} s")
    print(f"  reference solutions                     {share('subject')}")
    print(f"  verifiers                               {share('verify')}")
    print(f"  tensor units outside subject/verifier   {share('tensor_units')}  (uploads, sessions, overwrite checks)")
    print(f"  array units outside subject/verifier    {share('array_units')}  (sessions, copies, reports)")
    print(f"  between units                           {share('between')}  (builds not prefetched, plane, run records)")
    print(f"  fixture builders, total CPU (overlapped by the prefetch where it can) {med['build']:.3f} s")
    print(f"  outside reference solutions and verifiers: {outside:.1%}  target < {OVERHEAD_TARGET:.0%}")
    if med["not_ok"]:
        print(f"  note: {int(med['not_ok'])} sample(s) did not end ok with the reference subject")
    return outside < OVERHEAD_TARGET


def _cli_run(out: Path, cache: Path) -> dict[str, float]:
    """``imagebench run --subject reference --samples 1`` in a fresh process; its wall and its split."""
    import json
    import os

    script = Path(sys.executable).with_name("imagebench")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "imagebench"]
    cmd += ["run", "--subject", "reference", "--samples", "1", "--out", str(out), "--quiet"]
    env = {**os.environ, "IMAGEBENCH_CACHE": str(cache)}
    before = set(out.glob("run-*"))
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    (run_dir,) = set(out.glob("run-*")) - before
    t = {"wall": wall, "subject": 0.0, "verify": 0.0}
    for summary in run_dir.glob("reference/*/*/sample-*/summary.json"):
        times = json.loads(summary.read_text()).get("times", {})
        t["subject"] += times.get("subject_s", 0.0)
        t["verify"] += times.get("verify_s", 0.0)
    return t


def bench_make_bench(repeats: int) -> bool:
    """First (cold cache) and second (warm cache) ``make bench``, medians over ``repeats`` pairs."""
    firsts, seconds = [], []
    for _ in range(repeats):
        tmp = Path(tempfile.mkdtemp(prefix="imagebench-bench-"))
        try:
            firsts.append(_cli_run(tmp / "out", tmp / "cache"))
            seconds.append(_cli_run(tmp / "out", tmp / "cache"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    ok = True
    print(f"make bench: imagebench run --subject reference --samples 1, fresh process, median of {repeats}")
    for name, runs, target in (
        ("first (cold cache)", firsts, COLD_TARGET),
        ("second (warm cache)", seconds, OVERHEAD_TARGET),
    ):
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        outside = (med["wall"] - med["subject"] - med["verify"]) / med["wall"]
        ok &= outside < target
        print(
            f"  {name:<20} wall {med['wall']:.2f} s (anchor), references {med['subject']:.2f} s, verifiers "
            f"{med['verify']:.2f} s: outside them {outside:.1%}  target < {target:.0%}"
        )
    first = statistics.median(r["wall"] for r in firsts)
    second = statistics.median(r["wall"] for r in seconds)
    ok &= second / first <= WARM_RATIO_TARGET
    print(f"  second / first wall: {second / first:.2f}x  target <= {WARM_RATIO_TARGET:g}x")
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"  (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cpu(s) after the runs)")
    return ok


def _median_start(cmd: list[str], n: int = 5) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
            raise RuntimeError(f"{' '.join(cmd)} exited with code {proc.returncode}: {tail[0]}")
    return statistics.median(times)


def bench_help() -> bool:
    script = Path(sys.executable).with_name("imagebench")
    cmd = [str(script), "--help"] if script.exists() else [sys.executable, "-m", "imagebench", "--help"]
    anchor = _median_start([sys.executable, "-c", "pass"])
    try:
        cli = _median_start(cmd)
    except RuntimeError as exc:
        print(f"startup: {exc}")
        return False
    print("startup: median of 5 fresh processes")
    print(f"  python -c pass       {anchor * 1000:7.1f} ms (anchor)")
    print(
        f"  imagebench --help    {cli * 1000:7.1f} ms = {cli / anchor:.1f}x the anchor, "
        f"+{(cli - anchor) * 1000:.1f} ms  target < {HELP_TARGET_S:g} s"
    )
    return cli < HELP_TARGET_S


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modules", help="comma-separated case modules instead of the registry")
    args = parser.parse_args(argv)
    ok_overhead = bench_overhead(max(1, args.repeats), args.modules)
    ok_make = args.modules is not None or bench_make_bench(max(1, args.repeats))
    ok_help = bench_help()
    print(
        f"overhead target {'met' if ok_overhead else 'MISSED'}; make bench targets {'met' if ok_make else 'MISSED'}; "
        f"startup target {'met' if ok_help else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
