"""How much of a run is the harness itself, and how fast ``imagebench --help`` starts.

1. Runs the built-in suite with the ``reference`` subject (after one warm-up run that pays the
   one-off imports) and splits the wall time into the reference solutions (``times.subject_s``),
   the verifiers (``times.verify_s``), the fixture builders (once per case), the data plane's
   start and stop (only when a tensor case is selected), the time tensor and array units spend
   outside subject and verifier, and the reports and records. It prints the share outside
   reference solutions and verifiers with everything counted, and the harness proper (array units
   plus reports): the 20 % target is checked on the latter, since builders are case code and the
   plane is the declared cost of the tensor presentation.
2. Times ``imagebench --help`` in a fresh process, median of 5, against ``python -c pass``
   measured the same way in the same run. Target: under 0.5 s.

Usage: python benchmarks/bench_overhead.py [--repeats N] [--modules a.b,c.d]
(``--modules`` names case modules to use instead of ``imagebench.cases.CASE_MODULES``).
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OVERHEAD_TARGET = 0.20
HELP_TARGET_S = 0.5


def _suite(modules: str | None) -> list:
    if modules:
        return [case for name in modules.split(",") if name for case in importlib.import_module(name).CASES]
    from imagebench import cases

    return cases.all_cases()


def _one_run(suite: list, out: Path) -> dict[str, float]:
    """One run of the suite; the data plane is started and closed here so its cost is measured apart."""
    from imagebench.runner import presents_tensor, run_cases
    from imagebench.subjects import ReferenceSubject

    start = time.perf_counter()
    plane, plane_s = None, 0.0
    if any(presents_tensor(c) for c in suite):
        from imagebench.plane import RunPlane

        plane, why = RunPlane.try_start()
        plane_s = time.perf_counter() - start
        if plane is None:
            print(f"  (no data plane here: {why}; tensor cases are skipped)")
    try:
        result = run_cases(suite, ReferenceSubject(), out=out, progress=False, plane=plane)
    finally:
        if plane is not None:
            closing = time.perf_counter()
            plane.close()
            plane_s += time.perf_counter() - closing
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
    t["plane"] = plane_s
    t["wall"] = wall
    # What no unit's total covers: the reports (PNGs, summaries), run.json and the case summaries.
    t["reports"] = wall - plane_s - t["build"] - t["units"]
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
    harness = (med["array_units"] + med["reports"]) / wall

    def share(key: str) -> str:
        return f"{med[key]:.3f} s ({med[key] / wall:.1%})"

    print(f"overhead: {len(suite)} case(s), reference subject, median of {repeats} run(s) after a warm-up")
    print(f"  wall                                    {wall:.3f} s")
    print(f"  reference solutions                     {share('subject')}")
    print(f"  verifiers                               {share('verify')}")
    print(f"  fixture builders (case code, once/case) {share('build')}")
    print(f"  data plane start + stop (tensor cases)  {share('plane')}")
    print(f"  tensor units outside subject/verifier   {share('tensor_units')}  (uploads, sessions)")
    print(f"  array units outside subject/verifier    {share('array_units')}  (sessions, copies, subject plumbing)")
    print(f"  reports, PNGs and records               {share('reports')}")
    print(f"  outside reference solutions and verifiers, everything counted: {outside:.1%}")
    print(
        f"  harness proper (array units + reports; builders and the data plane apart): {harness:.1%}"
        f"  target < {OVERHEAD_TARGET:.0%}"
    )
    if med["not_ok"]:
        print(f"  note: {int(med['not_ok'])} sample(s) did not end ok with the reference subject")
    return harness < OVERHEAD_TARGET


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
    ok_help = bench_help()
    print(f"overhead target {'met' if ok_overhead else 'MISSED'}; startup target {'met' if ok_help else 'MISSED'}")
    return 0 if ok_overhead and ok_help else 1


if __name__ == "__main__":
    sys.exit(main())
