"""``--workers N`` for a subject that works in a child process: threads here, no dask cluster."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from helpers import make_toy_case

from imagebench import cli
from imagebench.executor import Parallel, run_cases
from imagebench.records import RunRecord, read_record
from imagebench.sandbox.policy import unavailable_reason
from imagebench.subjects import CommandSubject, ReferenceSubject, runs_out_of_process

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

PY = shlex.quote(sys.executable)
SOLVE = (
    "import json, time, numpy as np\n"
    "print('start', time.time())\n"
    "time.sleep(0.5)\n"
    "print('end', time.time())\n"
    "m = np.load('inputs/image.npy') > 0.5\n"
    "np.save('outputs/mask.npy', m)\n"
    "json.dump(int(m.sum()), open('outputs/area.json', 'w'))\n"
)


def test_the_choice_follows_the_subject() -> None:
    command = CommandSubject("true")
    assert runs_out_of_process(command) and not runs_out_of_process(ReferenceSubject())
    assert Parallel(workers=4).threads_for(command) == 4
    assert Parallel(workers=4).threads_for(ReferenceSubject()) is None
    assert "4 thread(s) here" in Parallel(workers=4).describe_for(command)
    assert Parallel().threads_for(command) is None  # serial stays serial


def test_sleeping_commands_overlap_on_threads_with_the_serial_results(tmp_path: Path) -> None:
    cases = [make_toy_case(f"t{i}") for i in range(4)]
    subject = CommandSubject(f"{PY} -c {shlex.quote(SOLVE)}")
    serial = run_cases(cases, subject, out=tmp_path / "serial", progress=False, samples=2)
    threaded = run_cases(cases, subject, out=tmp_path / "threads", progress=False, samples=2, workers=8)
    for label, samples in serial.samples.items():
        got = threaded.samples[label]
        assert [(s.sample, s.status, [m.value for m in s.metrics]) for s in samples] == [
            (s.sample, s.status, [m.value for m in s.metrics]) for s in got
        ]
    assert {s.status for ss in threaded.samples.values() for s in ss} == {"ok"}
    record = read_record(threaded.run_dir / "run.json", RunRecord)
    assert "8 thread(s) here" in record.extra["executor"] and record.complete
    # the units' own clocks: serially none overlaps another; on threads they run side by side
    assert _most_at_once(serial.run_dir) == 1
    assert _most_at_once(threaded.run_dir) >= 2


def _most_at_once(run_dir: Path) -> int:
    """The most units whose [start, end] (printed by the command) overlap at one moment."""
    spans = []
    for stdout in run_dir.rglob("stdout.txt"):
        times = dict(line.split() for line in stdout.read_text().splitlines() if line.startswith(("start", "end")))
        spans.append((float(times["start"]), float(times["end"])))
    return max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)


def test_the_cli_says_what_workers_chose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = cli.main(["run", "-k", "count-nuclei", "--subject", "command:true", "--workers", "3", "--out", str(out), "--quiet"])
    assert rc == 1
    run = json.loads(next(out.glob("run-*/run.json")).read_text())
    assert "3 thread(s) here" in run["extra"]["executor"]
