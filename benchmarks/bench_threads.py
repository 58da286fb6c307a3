"""Long subjects on ``--workers N``: units of a ``command:`` subject that sleeps, against the ideal.

The workload the threads are for: an agent takes minutes per unit, mostly waiting. Here each unit
is a sandboxed command sleeping ``--sleep`` seconds. The anchor is measured in the same run: the
serial time per unit (a serial run of ``--serial-units`` units, median per unit), so the serial
time of all units is that times their number; the ideal speed-up on N threads is N (as long as
there are at least N units). Reported: the speed-up and its share of the ideal, and the per-unit
cost the harness adds to the sleep.

Usage: python benchmarks/bench_threads.py [--units 64] [--workers 16] [--sleep 2] [--serial-units 4]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

TARGET_SHARE = 12 / 16  # the bar: 12x of the ideal 16x


def _cases(n: int) -> list:
    """``n`` copies of a tiny built-in-like case (one array layer, one leaving)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from conftest import make_toy_case

    return [make_toy_case(f"sleep{i:03d}") for i in range(n)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=64)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--serial-units", type=int, default=4)
    args = parser.parse_args()

    from imagebench.executor import run_cases
    from imagebench.subjects import CommandSubject

    subject = CommandSubject(f"sleep {shlex.quote(str(args.sleep))}")
    out = Path(tempfile.mkdtemp(prefix="imagebench-bench-threads-"))
    run_cases(_cases(1), subject, out=out / "warm", progress=False)

    start = time.perf_counter()
    serial = run_cases(_cases(args.serial_units), subject, out=out / "serial", progress=False)
    serial_wall = time.perf_counter() - start
    per_unit = statistics.median(s.times.get("total_s", 0.0) for ss in serial.samples.values() for s in ss)
    per_unit = max(per_unit, serial_wall / args.serial_units)

    start = time.perf_counter()
    threaded = run_cases(_cases(args.units), subject, out=out / "threads", progress=False, workers=args.workers)
    wall = time.perf_counter() - start
    statuses = {s.status for ss in threaded.samples.values() for s in ss}

    serial_all = per_unit * args.units
    speedup = serial_all / wall
    ideal = min(args.workers, args.units)
    share = speedup / ideal
    print(f"{args.units} units of a command sleeping {args.sleep:g} s, statuses {sorted(statuses)}")
    print(
        f"  serial, per unit (anchor, measured over {args.serial_units})  {per_unit:.3f} s "
        f"(+{per_unit - args.sleep:.3f} s of harness per unit)"
    )
    print(f"  serial, all units (anchor x units)                 {serial_all:.1f} s")
    print(f"  --workers {args.workers} (threads driving the sandboxes)        {wall:.1f} s")
    print(
        f"  speed-up {speedup:.2f}x of the ideal {ideal}x ({share:.0%}); "
        f"target {TARGET_SHARE * ideal:.0f}x: {'met' if share >= TARGET_SHARE else 'missed'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
