"""Interrupting a run (issue 30, item 8): a Ctrl-C ends it within seconds, serially, on threads
(``--workers`` for commands) and on a local dask cluster, with no traceback; the run folder and the
exact resume command are printed even with ``--quiet``, and that command works; no ``.lock`` is left."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import make_toy_case

from imagebench.executor import run_cases
from imagebench.records import RunRecord, read_record
from imagebench.runs.journal import LOCK_NAME, RunLock, RunLocked
from imagebench.subjects import parse_subject

SRC = Path(__file__).resolve().parents[1] / "src"
CASE = "segment-nuclei/synthetic-blobs"
#: what "within a few seconds" means here, on a loaded machine: the subjects' processes get a
#: grace of KILL_GRACE_S, then the folder is closed and the cluster stopped
EXIT_WITHIN_S = 15.0

SLOW = textwrap.dedent(
    """
    import time
    from pathlib import Path


    def solve(session):
        if Path(__file__).with_name("slow.flag").exists():
            time.sleep(120)
    """
)


def test_a_finished_run_leaves_no_lock_file_and_the_lock_still_excludes(tmp_path: Path) -> None:
    result = run_cases([make_toy_case()], parse_subject("reference"), out=tmp_path, progress=False)
    assert not (result.run_dir / LOCK_NAME).exists()
    held = RunLock(tmp_path).acquire()
    try:
        with pytest.raises(RunLocked, match="being written by another imagebench process"):
            RunLock(tmp_path).acquire()
    finally:
        held.release()
    assert not (tmp_path / LOCK_NAME).exists()
    # a stale file a killed process left is taken over, and removed again
    (tmp_path / LOCK_NAME).write_text("12345\n")
    RunLock(tmp_path).acquire().release()
    assert not (tmp_path / LOCK_NAME).exists()


def _start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200"}
    env.pop("IMAGEBENCH_SUPERVISED", None)
    return subprocess.Popen(
        [sys.executable, "-m", "imagebench", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: SIGINT to it is a terminal's Ctrl-C
    )


def _interrupt_when_working(proc: subprocess.Popen[bytes], out: Path, settle_s: float) -> tuple[float, str, str]:
    """Wait until the run folder exists and its subjects have had ``settle_s`` to start, SIGINT
    the whole process group, and return (seconds to exit, stdout, stderr)."""
    deadline = time.monotonic() + 240
    while not list(out.glob("run-*/journal.jsonl")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run folder never appeared"
        time.sleep(0.2)
    time.sleep(settle_s)
    assert proc.poll() is None, "the run ended before it was interrupted"
    start = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    return time.monotonic() - start, stdout.decode(), stderr.decode()


def _check_interrupted(proc: subprocess.Popen[bytes], took: float, stderr: str, out: Path) -> Path:
    assert proc.returncode == 130, stderr
    assert took < EXIT_WITHIN_S, f"took {took:.1f} s to end after SIGINT"
    assert "Traceback" not in stderr, stderr
    (run_dir,) = out.glob("run-*")
    assert f"interrupted: run folder {run_dir}" in stderr or "interrupted: run folder out/" in stderr, stderr
    assert "take it up again with: imagebench run --resume " in stderr
    assert not (run_dir / LOCK_NAME).exists()
    record = read_record(run_dir / "run.json", RunRecord)
    assert not record.complete and record.extra.get("interrupted") is True
    return run_dir


def _resume_line(stderr: str) -> list[str]:
    line = next(x for x in stderr.splitlines() if x.startswith("take it up again with: "))
    return shlex.split(line.removeprefix("take it up again with: "))


def test_quiet_serial_interrupt_prints_the_folder_and_a_resume_command_that_works(tmp_path: Path) -> None:
    folder = tmp_path / "my solvers"
    folder.mkdir()
    (folder / "slow_solver.py").write_text(SLOW)
    (folder / "slow.flag").write_text("")
    subject = "python:my solvers/slow_solver.py:solve"  # a path: run.json keeps only its last name
    proc = _start(["run", "-k", CASE, "--subject", subject, "--samples", "2", "--out", "out", "--quiet"], tmp_path)
    took, _, stderr = _interrupt_when_working(proc, tmp_path / "out", settle_s=3.0)
    run_dir = _check_interrupted(proc, took, stderr, tmp_path / "out")
    command = _resume_line(stderr)
    assert command[:4] == ["imagebench", "run", "--resume", "out/" + run_dir.name]
    assert command[4:6] == ["--subject", subject] and "--quiet" in command  # the path as it was given
    (folder / "slow.flag").unlink()  # the same code: the resume's digest check holds
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-m", "imagebench", *command[1:]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr  # it ran: the solver leaves nothing, so the case fails (not 2)
    record = read_record(run_dir / "run.json", RunRecord)
    assert record.complete and not (run_dir / LOCK_NAME).exists()


def test_interrupting_commands_on_worker_threads_ends_them_at_once(tmp_path: Path) -> None:
    proc = _start(
        ["run", "-k", CASE, "--subject", "command:sleep 120", "--workers", "2", "--samples", "2", "--out", "out"],
        tmp_path,
    )
    took, _, stderr = _interrupt_when_working(proc, tmp_path / "out", settle_s=4.0)
    _check_interrupted(proc, took, stderr, tmp_path / "out")
    assert _resume_line(stderr)[-2:] == ["--workers", "2"]


def test_interrupting_a_local_dask_cluster_ends_it_without_worker_tracebacks(tmp_path: Path) -> None:
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "slow_dask_solver.py").write_text(SLOW)
    (mods / "slow.flag").write_text("")
    subject = f"python:{mods / 'slow_dask_solver.py'}:solve"
    proc = _start(
        ["run", "-k", CASE, "--subject", subject, "--workers", "2", "--samples", "2", "--out", "out", "--quiet"],
        tmp_path,
    )
    took, _, stderr = _interrupt_when_working(proc, tmp_path / "out", settle_s=5.0)
    _check_interrupted(proc, took, stderr, tmp_path / "out")


MINE = textwrap.dedent(
    f"""
    from dataclasses import replace

    from imagebench import cases

    CASES = [replace(cases.get_case({CASE!r}), namespace="mine")]
    """
)


def test_an_interrupted_run_of_a_cases_module_resumes_from_its_recorded_sources(tmp_path: Path) -> None:
    """``--cases`` is not printed again: run.json's sources reopen the module by its file; the
    printed command alone takes the run up again."""
    (tmp_path / "my_cases.py").write_text(MINE)
    (tmp_path / "slow_solver.py").write_text(SLOW)
    (tmp_path / "slow.flag").write_text("")
    subject = "python:slow_solver.py:solve"
    args = ["run", "--cases", "my_cases.py", "-k", "mine/", "--subject", subject, "--samples", "2", "--out", "out"]
    proc = _start([*args, "--quiet"], tmp_path)
    took, _, stderr = _interrupt_when_working(proc, tmp_path / "out", settle_s=3.0)
    run_dir = _check_interrupted(proc, took, stderr, tmp_path / "out")
    record = read_record(run_dir / "run.json", RunRecord)
    assert record.cases == ["mine/synthetic-blobs"] and record.sources is not None
    command = _resume_line(stderr)
    assert "--cases" not in command and command[4:6] == ["--subject", subject]
    (tmp_path / "slow.flag").unlink()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-m", "imagebench", *command[1:]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr  # it ran the module's case: the solver leaves nothing
    assert read_record(run_dir / "run.json", RunRecord).complete
