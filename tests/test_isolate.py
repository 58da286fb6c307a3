"""``--isolate``: a python: subject's function in a sandboxed child process.

The same function scores the same isolated as in process; isolated, it cannot reach the
fixture through gc or import the harness; run.json, the summaries and the receipt say how
it was confined; the sandbox flags are checked on the command line.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import make_toy_case

from imagebench import cli
from imagebench.executor import run_cases
from imagebench.records import RunRecord, read_record
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.subjects import (
    SubjectError,
    options_from_record,
    options_record,
    parse_subject,
)

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

SOLVERS = textwrap.dedent(
    """
    import sys

    import numpy as np


    def honest(session):
        mask = np.asarray(session.namespace["image"]) > 0.5
        session.namespace["mask"] = mask
        session.namespace["area"] = int(mask.sum())


    def _fixtures_in(frame):
        while frame is not None:
            for value in frame.f_locals.values():
                for candidate in (value, getattr(value, "fixture", None)):
                    if type(candidate).__name__ == "Fixture":
                        yield candidate
            frame = frame.f_back


    def cheat(session):
        # the route an in-process subject has: the harness's own frames (the thread that waits on this
        # turn holds the fixture it is scoring; gc would find any fixture in memory, another test's too)
        image = np.asarray(session.namespace["image"])
        for frame in sys._current_frames().values():
            for fixture in _fixtures_in(frame):
                if not np.array_equal(np.asarray(fixture.data.get("image", ())), image):
                    continue  # a thread of another test's: not the pixels it was given
                session.namespace["mask"] = fixture.truth["mask"]
                session.namespace["area"] = int(fixture.truth["mask"].sum())
                return
        import imagebench  # noqa: F401  (raises in the sandbox: the harness is not there)


    def unreturnable(session):
        session.namespace["mask"] = object()
    """
)


@pytest.fixture
def solvers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "isolated_solvers.py").write_text(SOLVERS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("isolated_solvers", None)
    return folder


def test_an_isolated_function_scores_as_it_does_in_process(solvers: Path, tmp_path: Path) -> None:
    case = make_toy_case()
    inside = run_cases([case], parse_subject("python:isolated_solvers:honest"), out=tmp_path / "a", progress=False)
    apart = run_cases(
        [case], parse_subject("python:isolated_solvers:honest", isolate=True), out=tmp_path / "b", progress=False
    )
    (a,), (b,) = inside.samples["toy/rectangle"], apart.samples["toy/rectangle"]
    assert a.status == b.status == "ok"
    assert [m.value for m in a.metrics] == [m.value for m in b.metrics]
    assert (a.sandbox, b.sandbox) == ("in-process", "bubblewrap")
    record = read_record(apart.run_dir / "run.json", RunRecord)
    assert record.sandbox == "bubblewrap" and record.extra["subject_options"]["isolate"] is True
    receipt = json.loads((apart.run_dir / "receipt.json").read_text())
    assert receipt["subject"]["sandbox"] == "bubblewrap"
    case_summary = json.loads(next(apart.run_dir.glob("*/toy/rectangle/summary.json")).read_text())
    assert case_summary["sandbox"] == "bubblewrap"


def test_in_process_the_cheat_reaches_the_truth_and_isolated_it_does_not(solvers: Path, tmp_path: Path) -> None:
    case = make_toy_case()
    inside = run_cases([case], parse_subject("python:isolated_solvers:cheat"), out=tmp_path / "a", progress=False)
    assert inside.samples["toy/rectangle"][0].status == "ok"  # trusted code: why --isolate exists
    apart = run_cases(
        [case], parse_subject("python:isolated_solvers:cheat", isolate=True), out=tmp_path / "b", progress=False
    )
    (summary,) = apart.samples["toy/rectangle"]
    assert summary.status == "subject-error", summary.reason  # it raised: the harness is not there
    stderr = next(apart.run_dir.rglob("sample-0/stderr.txt")).read_text()
    assert "No module named 'imagebench'" in stderr


def test_a_binding_that_cannot_travel_is_named(solvers: Path, tmp_path: Path) -> None:
    subject = parse_subject("python:isolated_solvers:unreturnable", isolate=True)
    result = run_cases([make_toy_case()], subject, out=tmp_path / "out", progress=False)
    (summary,) = result.samples["toy/rectangle"]
    assert summary.status == "no-result", summary.reason
    assert "exited with code 3" in summary.reason
    stderr = next(result.run_dir.rglob("sample-0/stderr.txt")).read_text()
    assert "'mask' cannot be returned as .npy or .json" in stderr


def test_the_harness_own_code_cannot_be_isolated() -> None:
    with pytest.raises(SubjectError, match="cannot expose .* inside"):
        parse_subject("python:imagebench.cases.segmentation:segment_nuclei_classical", isolate=True)


def test_isolate_is_for_python_subjects_only() -> None:
    with pytest.raises(SubjectError, match="--isolate applies to python: subjects only"):
        parse_subject("command:true", isolate=True)


def test_options_travel_through_run_json() -> None:
    subject = parse_subject("command:true", sandbox=SandboxPolicy(network=True))
    raw = json.loads(json.dumps(options_record(subject)))
    assert options_from_record(raw) == {"sandbox": SandboxPolicy(network=True)}
    with pytest.raises(ValueError, match="field 'sandbox': field 'network' is 'yes'"):
        options_from_record({"sandbox": {**raw["sandbox"], "network": "yes"}})


def test_cli_isolate_records_it_and_the_flags_are_checked(
    solvers: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["run", "--subject", "python:isolated_solvers:honest", "--isolate", "-k", "count-nuclei", "--out", str(out)]
    assert cli.main([*argv, "--quiet", "--no-report"]) in (0, 1)
    record = read_record(next(out.glob("run-*")) / "run.json", RunRecord)
    assert record.sandbox == "bubblewrap"
    assert cli.main(["run", "--subject", "command:true", "--isolate", "--out", str(out)]) == 2
    assert "--isolate applies to python: subjects only" in capsys.readouterr().err
    assert (
        cli.main(["run", "--subject", "command:true", "--no-sandbox", "--subject-env", "/usr", "--out", str(out)]) == 2
    )
    assert "drop them or drop --no-sandbox" in capsys.readouterr().err
    run_dir = next(out.glob("run-*"))
    assert cli.main(["run", "--resume", str(run_dir), "--no-sandbox"]) == 2
    assert "--resume takes the subject, its confinement" in capsys.readouterr().err


def test_cli_no_sandbox_is_recorded_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = cli.main(
        ["run", "--subject", "command:true", "--no-sandbox", "-k", "count-nuclei", "--out", str(out), "--quiet"]
    )
    assert rc == 1
    run_dir = next(out.glob("run-*"))
    assert read_record(run_dir / "run.json", RunRecord).sandbox == "none"
    assert json.loads((run_dir / "receipt.json").read_text())["subject"]["sandbox"] == "none"
    for path in run_dir.rglob("summary.json"):
        assert json.loads(path.read_text())["sandbox"] == "none", path
    assert "could read this whole machine" in (run_dir / "report.html").read_text()


def test_an_isolated_function_that_raises_is_a_subject_error_as_in_process(
    solvers: Path, tmp_path: Path
) -> None:
    (solvers / "raising_solver.py").write_text("def solve(session):\n    raise ValueError('no nuclei here')\n")
    sys.modules.pop("raising_solver", None)
    case = make_toy_case()
    inside = run_cases([case], parse_subject("python:raising_solver:solve"), out=tmp_path / "a", progress=False)
    apart = run_cases([case], parse_subject("python:raising_solver:solve", isolate=True), out=tmp_path / "b", progress=False)
    assert inside.samples["toy/rectangle"][0].status == apart.samples["toy/rectangle"][0].status == "subject-error"
    stderr = next(apart.run_dir.rglob("sample-0/stderr.txt")).read_text()
    assert "ValueError: no nuclei here" in stderr
