"""Dishonest subjects against the harness's own rules: each route ends in a named non-ok status.

In-process (``python:``) subjects are trusted code (docs/integrity.md), but what they can reach
without trying hard is still closed: the truth they would be scored against cannot change
unnoticed, and a run they end from inside never reports success. The sandboxed ``command:``
routes are in test_sandbox.py; the run folder's own checks in test_runfolder.py.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case

from imagebench.executor import run_cases
from imagebench.fixtures.fixture import Fixture
from imagebench.runs.verdict import EXIT_DIED, EXIT_PASSED
from imagebench.subjects import PythonSubject


def _fixtures_in_memory() -> list[Fixture]:
    return [o for o in gc.get_objects() if isinstance(o, Fixture)]


def rewrite_truth(session: Any) -> None:
    """Find the fixture through gc and swap its truth for the answer it is about to give."""
    for fixture in _fixtures_in_memory():
        if "mask" in fixture.truth:
            object.__setattr__(fixture, "truth", {**fixture.truth, "mask": np.zeros_like(fixture.truth["mask"])})
    session.namespace["mask"] = np.zeros((24, 24), dtype=bool)
    session.namespace["area"] = 0


def write_into_truth(session: Any) -> None:
    """Write into the truth arrays themselves (read-only, or caught by the digest)."""
    for fixture in _fixtures_in_memory():
        if "mask" in fixture.truth:
            try:
                fixture.truth["mask"][...] = False
            except (ValueError, TypeError):
                pass
            try:
                fixture.truth["mask"] = np.zeros((24, 24), dtype=bool)  # type: ignore[index]
            except TypeError:
                pass
    session.namespace["mask"] = np.zeros((24, 24), dtype=bool)
    session.namespace["area"] = 0


@pytest.mark.parametrize("cheat", [rewrite_truth, write_into_truth], ids=["swap-truth", "write-truth"])
def test_a_subject_that_changes_truth_never_scores_ok(tmp_path: Path, cheat: Any) -> None:
    subject = PythonSubject(target=f"test_integrity:{cheat.__name__}", function=cheat)
    result = run_cases([make_toy_case()], subject, out=tmp_path, progress=False, samples=2)
    statuses = [s.status for s in result.samples["toy/rectangle"]]
    assert "ok" not in statuses
    assert set(statuses) <= {"truth-tampered", "wrong-answer"}
    assert result.verdicts["toy/rectangle"] == "fail" and result.exit_code == 1
    if cheat is rewrite_truth:
        assert statuses == ["truth-tampered", "truth-tampered"]
        assert "truth changed" in result.samples["toy/rectangle"][0].reason


def test_an_honest_subject_is_not_flagged(tmp_path: Path) -> None:
    from imagebench.subjects import ReferenceSubject

    result = run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False, samples=2)
    assert [s.status for s in result.samples["toy/rectangle"]] == ["ok", "ok"]


SOLVER = """
import os

def solve(session):
    os._exit(0)  # end the harness's own process with success
"""


def test_a_subject_that_exits_the_harness_never_leaves_exit_0(tmp_path: Path) -> None:
    (tmp_path / "quitter.py").write_text(textwrap.dedent(SOLVER), encoding="utf-8")
    env_path = f"{tmp_path}"
    script = Path(sys.executable).with_name("imagebench")
    assert script.is_file(), "the imagebench console script is installed with the package"
    proc = subprocess.run(
        [str(script), "run", "--subject", "python:quitter:solve", "-k", "count-nuclei", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**_env(), "PYTHONPATH": env_path},
    )
    assert proc.returncode == EXIT_DIED != EXIT_PASSED, proc.stdout + proc.stderr
    assert "ended without finishing" in proc.stderr


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_a_corrupt_curated_fixture_never_leaves_exit_0(tmp_path: Path) -> None:
    """A curated case whose truth file is damaged is not run, and the run says it is incomplete."""
    import shutil
    from dataclasses import replace

    from imagebench import cases as builtin
    from imagebench.runs.verdict import EXIT_INCOMPLETE
    from imagebench.subjects import ReferenceSubject

    case = builtin.get_case("segment-nuclei/dsb2018")
    root = tmp_path / "tree"
    shutil.copytree(case.fixture.tree_root(), root)
    mask = root / "segment-nuclei" / "dsb2018" / "mask2d.tif"
    mask.write_bytes(mask.read_bytes()[: mask.stat().st_size // 2])  # truncated
    damaged = replace(case, fixture=replace(case.fixture, root=root))
    subject = ReferenceSubject() if case.reference is not None else PythonSubject(target="x:y", function=lambda s: None)
    result = run_cases([damaged], subject, out=tmp_path / "out", progress=False)
    (summary,) = result.samples[case.label]
    assert summary.status in ("skipped", "harness-error") and "mask2d.tif" in summary.reason, summary.reason
    assert result.exit_code == EXIT_INCOMPLETE != EXIT_PASSED


FORGER = """
import os

def solve(session):
    # write the success the supervisor waits for, then end the harness's process
    marker = os.environ.get("IMAGEBENCH_SUPERVISED")
    for line in open("/proc/self/environ", "rb").read().split(b"\\0"):
        if line.startswith(b"IMAGEBENCH_SUPERVISED="):
            marker = line.split(b"=", 1)[1].decode()
    if marker:
        open(marker, "w").write("0\\t")
    os._exit(0)
"""


def test_a_subject_that_forges_the_exit_report_still_leaves_exit_5(tmp_path: Path) -> None:
    (tmp_path / "forger.py").write_text(textwrap.dedent(FORGER), encoding="utf-8")
    script = Path(sys.executable).with_name("imagebench")
    proc = subprocess.run(
        [str(script), "run", "--subject", "python:forger:solve", "-k", "count-nuclei", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**_env(), "PYTHONPATH": str(tmp_path)},
    )
    assert proc.returncode == EXIT_DIED, proc.stdout + proc.stderr
    # a forked child (Linux) never learns the report's path from its environment: it just ended;
    # a child started afresh finds it there and forges it: its success names no run folder
    assert (
        "reported success, but it named no run folder" in proc.stderr or "the run ended without finishing" in proc.stderr
    ), proc.stderr


@pytest.mark.parametrize(("argv", "code"), [(["run", "--help"], 0), (["run", "--samples", "x"], 2), (["run", "--bogus"], 2)])
def test_help_and_usage_errors_of_run_exit_as_argparse_says(tmp_path: Path, argv: list[str], code: int) -> None:
    script = Path(sys.executable).with_name("imagebench")
    proc = subprocess.run([str(script), *argv], capture_output=True, text=True, timeout=120, env=_env(), cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert "ended without finishing" not in proc.stderr and not (tmp_path / "outcomes").exists()


def test_an_honest_supervised_run_exits_0_and_names_its_folder(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("imagebench")
    out = tmp_path / "out"
    proc = subprocess.run(
        [str(script), "run", "-k", "count-nuclei", "--out", str(out), "--quiet", "--no-report"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    assert proc.returncode == EXIT_PASSED, proc.stdout + proc.stderr
    (run_dir,) = out.glob("run-*")
    # a summary forged after the run: the supervisor's check of a reported 0 reads the journal
    from imagebench.cli import _borne_out

    assert _borne_out(str(run_dir)) == ""
    summary = next(run_dir.rglob("sample-0/summary.json"))
    summary.write_text(summary.read_text().replace('"reason": ""', '"reason": "edited"'))
    assert "not what the run journaled" in _borne_out(str(run_dir))
