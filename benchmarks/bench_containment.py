"""The harness's peak memory when a subject tries to exhaust it, against an honest run (issue 23).

Each route runs one sample of ``calibrated-measurements/stardist-3d-volumes`` (or, for the MCP
line, the same case served with ``--subject-mcp``) in a fresh harness process, sandboxed, and
reads that process's peak resident memory (``ru_maxrss`` of the child, which the subject's own
processes do not count towards: they run under bwrap in their own cgroup). The anchor is the same
harness running an honest subject in the same run. Target: every route within 2x the anchor.

Routes: a sparse 1.5 GiB leaving (no disk used), an ``.npy`` header declaring 40000^3 float64
over a 16-byte body, a 200 MB MCP line, and a 1 GiB memory balloon in the subject itself.
Before issue 23 the sparse leaving took the harness to 4.27 GB (81 MB honest).

Usage: python benchmarks/bench_containment.py [--repeats N]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import textwrap

TARGET = 2.0
CASE = "calibrated-measurements/stardist-3d-volumes"
PY = shlex.quote(sys.executable)

_HONEST = "import numpy as np; l = np.load('inputs/labels.npy'); np.save('outputs/volumes.npy', np.bincount(l.ravel())[1:] * 0.25)"
_HEADER = (
    "from numpy.lib import format as f\n"
    "fh = open('outputs/volumes.npy', 'wb')\n"
    "f.write_array_header_1_0(fh, {'descr': '<f8', 'fortran_order': False, 'shape': (40000, 40000, 40000)})\n"
    "fh.write(b'0' * 16)\n"
)
_LINE = (
    "import socket\n"
    "s = socket.socket(socket.AF_UNIX); s.connect('/mcp/server.sock')\n"
    "try:\n"
    "    for _ in range(200):\n"
    "        s.sendall(b'[' * (1 << 20))\n"
    "except OSError:\n"
    "    pass\n"
)
_BALLOON = "x = bytearray(1 << 30); x[::4096] = b'1' * len(x[::4096])"

ROUTES: dict[str, tuple[str, bool]] = {
    "honest (anchor)": (f"{PY} -c {shlex.quote(_HONEST)}", False),
    "sparse 1.5 GiB leaving": ("truncate -s 1536M outputs/volumes.npy", False),
    "npy header of 40000^3 float64": (f"{PY} -c {shlex.quote(_HEADER)}", False),
    "honest over MCP (for scale)": (f"{PY} -c {shlex.quote(_HONEST)}", True),
    "200 MB MCP line": (f"{PY} -c {shlex.quote(_LINE)}", True),
    "1 GiB memory balloon": (f"{PY} -c {shlex.quote(_BALLOON)}", False),
}

# Runs in a fresh process: one sample, then its own peak RSS (KiB) and the sample's status.
_DRIVER = textwrap.dedent(
    """
    import resource, sys
    from imagebench import cases
    from imagebench.sandbox.limits import Limits
    from imagebench.executor import run_cases
    from imagebench.sandbox.policy import SandboxPolicy
    from imagebench.subjects import CommandSubject
    command, mcp, out = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
    subject = CommandSubject(command, mcp=mcp, sandbox=SandboxPolicy(limits=Limits(memory=512 << 20)))
    result = run_cases([cases.get_case(sys.argv[4])], subject, out=out, progress=False)
    (s,) = result.samples[sys.argv[4]]
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, s.status)
    """
)


def _peak(command: str, mcp: bool) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [sys.executable, "-c", _DRIVER, command, "1" if mcp else "0", out, CASE],
            capture_output=True, text=True, timeout=600, check=True,
        )  # fmt: skip
    kib, status = done.stdout.split()[-2:]
    return int(kib) / 1024, status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from imagebench.sandbox.policy import unavailable_reason

    if unavailable_reason() is not None:
        print(f"skipped: {unavailable_reason()}")
        return 0
    rows = []
    for name, (command, mcp) in ROUTES.items():
        runs = [_peak(command, mcp) for _ in range(args.repeats)]
        rows.append((name, statistics.median(r[0] for r in runs), sorted({r[1] for r in runs})))
    anchor = rows[0][1]
    print(f"harness peak RSS per sample (median of {args.repeats}), anchor: an honest subject = {anchor:.0f} MB")
    worst = 0.0
    for name, mb, statuses in rows:
        ratio = mb / anchor
        worst = max(worst, ratio)
        print(f"  {name:32s} {mb:7.0f} MB  {ratio:5.2f}x  status {', '.join(statuses)}")
    print(f"worst route {worst:.2f}x the anchor (target <= {TARGET:g}x): {'met' if worst <= TARGET else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
