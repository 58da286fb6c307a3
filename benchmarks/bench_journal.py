"""What the anchored journal costs per line, against the physical limit of an unsigned one (issue 25).

A journal line is a JSON record appended and fsync'd; an anchored one is also HMAC-chained to the
line before it and its anchor replaced in the state folder (:mod:`imagebench.runs.journal`). The
anchor is the same-size line written and fsync'd to a file in the same folder, with nothing else:
no JSON, no MAC, no anchor. The figure is the ratio of medians. The verification the reader does
(:func:`imagebench.runs.journal.check_journal`) is timed per line against reading the lines.

Usage: python benchmarks/bench_journal.py [--lines N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["IMAGEBENCH_STATE"] = str(root / "state")
        from imagebench.runs.journal import JOURNAL_NAME, Journal, check_journal, read_journal_lines

        run = root / "run-x"
        run.mkdir()
        (run / "run.json").write_text(json.dumps({"run_id": "run-x"}))
        signed: list[float] = []
        with Journal.open(run) as journal:
            for i in range(args.lines):
                start = time.perf_counter()
                journal.append("unit", label="seg/case", sample=i, status="ok", summary=f"s/{i}", sha256="0" * 64)
                signed.append(time.perf_counter() - start)
        line = (run / JOURNAL_NAME).read_bytes().splitlines()[0] + b"\n"
        plain: list[float] = []
        fd = os.open(root / "plain.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for _ in range(args.lines):
                start = time.perf_counter()
                os.write(fd, line)
                os.fsync(fd)
                plain.append(time.perf_counter() - start)
        finally:
            os.close(fd)
        reads: list[float] = []
        checks: list[float] = []
        for _ in range(5):
            start = time.perf_counter()
            lines = read_journal_lines(run / JOURNAL_NAME)
            reads.append(time.perf_counter() - start)
            start = time.perf_counter()
            check = check_journal(lines, "run-x")
            checks.append(time.perf_counter() - start)
            assert check.verified, check.problems
    a, p = statistics.median(signed), statistics.median(plain)
    r, c = statistics.median(reads), statistics.median(checks)
    print(f"append, signed and anchored: {a * 1e3:.3f} ms a line (median of {args.lines})")
    print(f"anchor, the same line written and fsync'd: {p * 1e3:.3f} ms")
    print(f"ratio: {a / p:.2f}x")
    print(f"verify {args.lines} lines: {c * 1e3:.2f} ms, reading them {r * 1e3:.2f} ms ({c / r:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
