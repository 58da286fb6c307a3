"""The supervisor's check of a reported success (imagebench.cli._borne_out) with its modules
imported before the fork: a child that patches its own copies of them still cannot make the
supervisor believe a run its folder does not bear out."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import imagebench
from imagebench.runs.verdict import EXIT_DIED, EXIT_FAILED, EXIT_PASSED

LIAR = """
import imagebench.cli
import imagebench.runs.reader
import imagebench.runs.verdict as verdict

def solve(session):
    # leave nothing (the sample fails), then make this process report a pass and believe it
    verdict.run_exit_code = lambda verdicts: 0
    verdict.checked_verdict = lambda samples, summary: "pass"
    imagebench.cli._borne_out = lambda run_dir: ""
    imagebench.runs.reader.read_run = None
"""


def run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(imagebench.__file__).resolve().parents[1])  # the package under test, not an installed copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(tmp_path)]), "IMAGEBENCH_CACHE": "off"}
    return subprocess.run(
        [sys.executable, "-m", "imagebench", "run", *argv, "--out", str(tmp_path / "out"), "--quiet", "--no-report"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_a_child_that_patches_the_check_in_its_own_process_still_exits_5(tmp_path: Path) -> None:
    (tmp_path / "liar.py").write_text(textwrap.dedent(LIAR), encoding="utf-8")
    proc = run(tmp_path, "--subject", "python:liar:solve", "-k", "segment-nuclei/count-nuclei")
    assert proc.returncode == EXIT_DIED, proc.stdout + proc.stderr
    assert "its process reported success, but case" in proc.stderr and "is fail" in proc.stderr, proc.stderr


def test_an_honest_failure_and_an_honest_pass_exit_as_they_are(tmp_path: Path) -> None:
    (tmp_path / "idle.py").write_text("def solve(session):\n    pass\n", encoding="utf-8")
    failed = run(tmp_path, "--subject", "python:idle:solve", "-k", "segment-nuclei/count-nuclei")
    assert failed.returncode == EXIT_FAILED, failed.stdout + failed.stderr
    passed = run(tmp_path, "--subject", "reference", "-k", "segment-nuclei/count-nuclei")
    assert passed.returncode == EXIT_PASSED, passed.stdout + passed.stderr
