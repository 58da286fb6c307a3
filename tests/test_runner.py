"""The headless runner: one status per sample, the run folder, and the list/show/run commands."""

from __future__ import annotations

import base64
import io
import json
import shlex
import sys
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import CountingSpec, UnavailableSpec, make_toy_case, truth_leaks

from imagebench import cli
from imagebench.case.model import Layer, select_cases
from imagebench.executor import run_cases
from imagebench.fixtures.fixture import Outcome
from imagebench.records import CaseSummary, RunRecord, SampleSummary, read_record
from imagebench.runs.runner import TENSOR_SKIP_REASON, prepare_fixture, run_unit
from imagebench.subjects import (
    CommandSubject,
    NopSubject,
    ReferenceSubject,
    parse_subject,
)

PY = shlex.quote(sys.executable)


def _solver_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> None:
    (tmp_path / f"{name}.py").write_text("import numpy as np\n\n" + body)
    monkeypatch.syspath_prepend(str(tmp_path))


def _sample_summary(run_dir: Path, subject: str, label: str, n: int = 0) -> SampleSummary:
    return read_record(run_dir / subject / label / f"sample-{n}" / "summary.json", SampleSummary)


# --------------------------------------------------------------------------- statuses


def test_reference_passes_the_toy_case_and_writes_the_run_folder(tmp_path: Path) -> None:
    case = make_toy_case()
    result = run_cases([case], ReferenceSubject(), out=tmp_path, progress=False)
    assert result.run_dir.parent == tmp_path and result.run_dir.name.startswith("run-")
    assert result.passed and result.exit_code == 0
    (summary,) = result.samples["toy/rectangle"]
    assert summary.status == "ok" and summary.passed
    assert {m.name: m.verdict for m in summary.metrics} == {"mask_error": "pass", "area_error": "pass"}
    assert {"build_s", "subject_s", "verify_s", "total_s"} <= set(summary.times)
    assert summary.seed == 0
    on_disk = _sample_summary(result.run_dir, "reference", "toy/rectangle")
    assert on_disk == summary
    record = read_record(result.run_dir / "run.json", RunRecord)
    assert record.complete and record.finished and record.counts == {"ok": 1}
    assert record.cases == ["toy/rectangle"] and record.subject == "reference"
    cs = read_record(result.run_dir / "reference" / "toy" / "rectangle" / "summary.json", CaseSummary)
    assert cs.counts == {"ok": 1} and cs.passed == 1 and cs.scored == 1
    assert cs.metric_means["mask_error"] == pytest.approx(0.0)
    pngs = sorted(p.name for p in (result.run_dir / "reference" / "toy" / "rectangle" / "sample-0").glob("*.png*"))
    assert pngs, "the verifier's artifacts were not written"


def test_nop_never_passes(tmp_path: Path) -> None:
    result = run_cases([make_toy_case()], NopSubject(), out=tmp_path, progress=False, samples=2)
    assert [s.status for s in result.samples["toy/rectangle"]] == ["no-result", "no-result"]
    assert not any(s.passed for s in result.samples["toy/rectangle"])
    assert result.exit_code == 1
    assert "left nothing named 'mask'" in result.samples["toy/rectangle"][0].reason


def test_python_solver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _solver_module(
        tmp_path,
        monkeypatch,
        "toy_runner_solver",
        "def solve(session):\n"
        "    m = session.namespace['image'] > 0.5\n"
        "    session.namespace['mask'] = m\n"
        "    session.namespace['area'] = float(m.sum())\n",
    )
    subject = parse_subject("python:toy_runner_solver:solve")
    result = run_cases([make_toy_case()], subject, out=tmp_path / "out", progress=False)
    assert result.samples["toy/rectangle"][0].status == "ok"
    assert (result.run_dir / "python-toy_runner_solver.solve" / "toy" / "rectangle" / "summary.json").is_file()


def test_wrong_shape_is_unscorable_with_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _solver_module(
        tmp_path,
        monkeypatch,
        "toy_runner_wrong",
        "def solve(session):\n    session.namespace['mask'] = np.zeros((3, 3))\n    session.namespace['area'] = 'big'\n",
    )
    result = run_cases([make_toy_case()], parse_subject("python:toy_runner_wrong:solve"), out=tmp_path, progress=False)
    (summary,) = result.samples["toy/rectangle"]
    assert summary.status == "unscorable-result"
    assert "shape (3, 3), expected (24, 24)" in summary.reason
    assert "expected a number" in summary.reason


def test_wrong_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _solver_module(
        tmp_path,
        monkeypatch,
        "toy_runner_bad",
        "def solve(session):\n"
        "    session.namespace['mask'] = np.ones(session.namespace['image'].shape, bool)\n"
        "    session.namespace['area'] = 1\n",
    )
    result = run_cases([make_toy_case()], parse_subject("python:toy_runner_bad:solve"), out=tmp_path, progress=False)
    (summary,) = result.samples["toy/rectangle"]
    assert summary.status == "wrong-answer" and not summary.passed
    assert "mask_error = " in summary.reason and "> limit 0.05" in summary.reason


def test_subject_exception_is_recorded_and_the_run_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _solver_module(tmp_path, monkeypatch, "toy_runner_raise", "def solve(session):\n    raise RuntimeError('gave up')\n")
    cases = [make_toy_case("a"), make_toy_case("b")]
    result = run_cases(cases, parse_subject("python:toy_runner_raise:solve"), out=tmp_path, progress=False)
    for label in ("toy/a", "toy/b"):
        (summary,) = result.samples[label]
        assert summary.status == "subject-error"  # a failure in every denominator, whatever it left
        assert "the subject raised RuntimeError: gave up" in summary.reason


def test_skipped_fixture(tmp_path: Path) -> None:
    skipped = make_toy_case("elsewhere", spec=UnavailableSpec("no tree here"))
    result = run_cases([skipped], ReferenceSubject(), out=tmp_path, progress=False, samples=2)
    assert [s.status for s in result.samples["toy/elsewhere"]] == ["skipped", "skipped"]
    assert result.samples["toy/elsewhere"][0].reason == "no tree here"
    assert result.verdicts == {"toy/elsewhere": "skipped"}
    assert result.exit_code == 4  # nothing was scored at all: incomplete, never a pass
    mixed = run_cases([skipped, make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False)
    assert mixed.verdicts == {"toy/elsewhere": "skipped", "toy/rectangle": "pass"}
    assert mixed.exit_code == 4  # a skipped case fails nothing, but the run is incomplete: never exit 0


def test_tensor_case_without_a_plane_is_skipped(tmp_path: Path) -> None:
    spec = CountingSpec()
    case = make_toy_case("lazy", spec=spec, layers=(Layer("image", "image", "image", presentation="tensor"),))
    summary = run_unit(case, ReferenceSubject(), 0, tmp_path)
    assert summary.status == "skipped" and summary.reason == TENSOR_SKIP_REASON
    assert spec.builds == 0


def test_harness_errors(tmp_path: Path) -> None:
    broken = make_toy_case("broken", spec=CountingSpec(fail=True))
    summary = run_unit(broken, ReferenceSubject(), 0, tmp_path)
    assert summary.status == "harness-error" and "toy builder exploded" in summary.reason

    def crashing_verifier(fixture: Any, attempt: Any) -> Outcome:
        raise ZeroDivisionError("verifier bug")

    summary = run_unit(make_toy_case("vcrash", verify=crashing_verifier), ReferenceSubject(), 0, tmp_path)
    assert summary.status == "harness-error" and "ZeroDivisionError: verifier bug" in summary.reason

    summary = run_unit(make_toy_case("noref", reference=None), ReferenceSubject(), 0, tmp_path)
    assert summary.status == "harness-error" and "has no reference solution" in summary.reason
    assert _sample_summary(tmp_path, "reference", "toy/noref").status == "harness-error"


def test_python_subject_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _solver_module(tmp_path, monkeypatch, "toy_runner_slow", "import time\ndef solve(session):\n    time.sleep(3)\n")
    summary = run_unit(make_toy_case(), parse_subject("python:toy_runner_slow:solve"), 0, tmp_path, timeout=0.2)
    assert summary.status == "timeout" and "0.2 s limit" in summary.reason


# --------------------------------------------------------------------------- samples and fixtures


def test_fixture_built_once_and_samples_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _solver_module(
        tmp_path,
        monkeypatch,
        "toy_runner_vandal",
        "def solve(session):\n"
        "    image = session.namespace['image']\n"
        "    m = image > 0.5\n"
        "    session.namespace['mask'] = m\n"
        "    session.namespace['area'] = int(m.sum())\n"
        "    image[:] = 0.0  # scribble over the input\n"
        "    session.layers['image'].data[...] = 0.0\n",
    )
    spec = CountingSpec()
    case = make_toy_case(spec=spec)
    result = run_cases([case], parse_subject("python:toy_runner_vandal:solve"), out=tmp_path, progress=False, samples=3)
    assert spec.builds == 1
    assert [s.status for s in result.samples["toy/rectangle"]] == ["ok", "ok", "ok"]
    cs = result.summaries["toy/rectangle"]
    assert cs.samples == 3 and cs.passed == 3 and cs.counts == {"ok": 3}


def test_run_json_is_written_first_incomplete(tmp_path: Path) -> None:
    seen: list[RunRecord] = []

    def peek(summary: SampleSummary) -> None:
        run_dirs = list(tmp_path.glob("run-*"))
        seen.append(read_record(run_dirs[0] / "run.json", RunRecord))

    result = run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False, on_sample=peek)
    assert len(seen) == 1 and seen[0].complete is False and seen[0].finished is None
    assert result.record.complete is True


def test_two_runs_in_one_second_get_distinct_folders(tmp_path: Path) -> None:
    a = run_cases([make_toy_case()], NopSubject(), out=tmp_path, progress=False)
    b = run_cases([make_toy_case()], NopSubject(), out=tmp_path, progress=False)
    assert a.run_dir != b.run_dir and a.run_dir.is_dir() and b.run_dir.is_dir()


def test_outcome_dir_environment_is_the_default_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))
    result = run_cases([make_toy_case()], ReferenceSubject(), progress=False)
    assert result.run_dir.parent == tmp_path / "outcomes"


def test_prepare_fixture_never_raises() -> None:
    assert prepare_fixture(make_toy_case(spec=CountingSpec(fail=True))).status == "harness-error"
    assert prepare_fixture(make_toy_case(spec=UnavailableSpec())).status == "skipped"
    ok = prepare_fixture(make_toy_case())
    assert ok.fixture is not None and ok.status is None


# --------------------------------------------------------------------------- command subjects in a run


def test_command_statuses_and_the_run_goes_on(tmp_path: Path) -> None:
    # the solver is in the command line: a file under tmp_path is outside the subject's sandbox
    script = (
        "import json, numpy as np\n"
        "m = np.load('inputs/image.npy') > 0.5\n"
        "np.save('outputs/mask.npy', m)\n"
        "json.dump(int(m.sum()), open('outputs/area.json', 'w'))\n"
    )
    commands = {
        "good": f"{PY} -c {shlex.quote(script)}",
        "crash": "echo bye >&2; exit 7",
        "hang": "sleep 30",
        "garbage": "echo junk > outputs/mask.npy; echo '[1,' > outputs/area.json",
    }
    statuses = {}
    for key, command in commands.items():
        case = make_toy_case(key, timeout_s=1.0 if key == "hang" else 30.0)
        result = run_cases([case], CommandSubject(command), out=tmp_path / "out", progress=False)
        (summary,) = result.samples[f"toy/{key}"]
        statuses[key] = summary
        sdir = result.run_dir / CommandSubject(command).name / "toy" / key / "sample-0"
        assert (sdir / "summary.json").is_file()
        assert (sdir / "stdout.txt").is_file() and (sdir / "stderr.txt").is_file()
    assert statuses["good"].status == "ok"
    assert statuses["crash"].status == "no-result" and "exited with code 7" in statuses["crash"].reason
    assert statuses["hang"].status == "timeout"
    assert statuses["garbage"].status == "unscorable-result"
    assert "outputs/mask.npy could not be read" in statuses["garbage"].reason


def test_truth_never_reaches_the_workspace(tmp_path: Path) -> None:
    # the sandbox lets nothing out but stdout: the command sends its whole workspace there as a tar
    command = 'tar -cf - -C "$IMAGEBENCH_WORKSPACE" . | base64 -w0'
    case = make_toy_case()
    result = run_cases([case], CommandSubject(command), out=tmp_path / "out", progress=False)
    (sample,) = result.samples["toy/rectangle"]
    assert sample.status == "no-result"
    (stdout,) = result.run_dir.rglob("sample-0/stdout.txt")
    copy = tmp_path / "seen"
    copy.mkdir()
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(stdout.read_bytes()))) as tar:
        tar.extractall(copy, filter="data")
    assert sample.seed is not None and sample.seed != 0  # an untrusted subject runs sealed by default
    fx = case.fixture.build(case.namespace, case.case_id, seed=sample.seed)
    files = [p for p in copy.rglob("*") if p.is_file()]
    assert sorted(p.relative_to(copy).as_posix() for p in files) == ["inputs/image.npy", "prompt.md"]
    for path in files:
        blob = path.read_bytes()
        assert truth_leaks(dict(fx.truth), blob=blob) == [], path
        if path.suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
            assert truth_leaks(dict(fx.truth), array=arr) == [], path
            assert np.array_equal(arr, fx.data["image"])
    assert "secret" not in (copy / "prompt.md").read_text()


# --------------------------------------------------------------------------- selection and CLI


def test_select_cases_by_substring_glob_and_kind() -> None:
    cases = [make_toy_case("alpha"), make_toy_case("beta"), make_toy_case("gamma", spec=UnavailableSpec())]
    chosen, unmatched = select_cases(cases, ["alp"])
    assert [c.label for c in chosen] == ["toy/alpha"] and unmatched == []
    chosen, _ = select_cases(cases, ["toy/*a"])
    assert [c.label for c in chosen] == ["toy/alpha", "toy/beta", "toy/gamma"]
    chosen, _ = select_cases(cases, None, "curated")
    assert [c.label for c in chosen] == ["toy/gamma"]
    _, unmatched = select_cases(cases, ["alpha", "zeta*"])
    assert unmatched == ["zeta*"]


@pytest.fixture
def builtin_toys(monkeypatch: pytest.MonkeyPatch) -> CountingSpec:
    """Pretend the built-in suite is two toy cases; returns the spec of the available one."""
    from imagebench import cases as builtin
    from imagebench.case.model import Skill

    spec = CountingSpec()
    toys = [make_toy_case("rectangle", spec=spec), make_toy_case("offsite", spec=UnavailableSpec("tree missing"))]
    monkeypatch.setattr(builtin, "all_cases", lambda: list(toys))
    monkeypatch.setattr(builtin, "skills", lambda: {"toy": Skill("toy", ("dask",))})
    # Only this module's commands: other feature modules are not under test here.
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("imagebench.cli.run",))
    return spec


def test_cli_run_exit_codes(tmp_path: Path, builtin_toys: CountingSpec, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path)
    assert cli.main(["run", "--subject", "reference", "--out", out]) == 4  # one case could not run here
    text = capsys.readouterr().out
    assert "toy/rectangle" in text and "toy/offsite" in text and "mask_error" in text
    assert "run folder: " in text
    run_dir = Path(text.split("run folder: ")[1].split()[0])
    assert (run_dir / "run.json").is_file()

    assert cli.main(["run", "--subject", "reference", "--out", out, "-k", "rectangle"]) == 0
    capsys.readouterr()
    assert cli.main(["run", "--subject", "nop", "--out", out, "--quiet"]) == 1
    text = capsys.readouterr().out
    assert "run folder: " in text and "0 passed, 1 failed, 1 skipped" in text

    assert cli.main(["run", "-k", "nothing-like-this", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "matched no case" in err and "toy/rectangle" in err

    assert cli.main(["run", "--subject", "robot", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "command:<shell command>" in err and "python:package.module:function" in err

    assert cli.main(["run", "--samples", "0", "--out", out]) == 2
    capsys.readouterr()

    assert cli.main(["run", "-k", "rect*", "--samples", "2", "--out", out, "--quiet", "--timeout", "5"]) == 0
    record = json.loads(sorted(tmp_path.glob("run-*/run.json"))[-1].read_text())
    assert record["samples"] == 2 and record["selection"]["k"] == ["rect*"]


def test_cli_list_and_show_never_build_truth(builtin_toys: CountingSpec, capsys: pytest.CaptureFixture[str]) -> None:
    spec = builtin_toys
    assert cli.main(["list"]) == 0
    text = capsys.readouterr().out
    assert "toy/rectangle" in text and "no: tree missing" in text
    assert "coverage warning" in text and "toy declares" in text
    assert cli.main(["show", "toy/rectangle"]) == 0
    text = capsys.readouterr().out
    for needle in ("Leave:", "image: image, presented as array", "mask (array)", "mask_error <= 0.05", "persona:"):
        assert needle in text
    assert "secret" not in text
    assert spec.builds == 0
    assert cli.main(["show", "toy/rectangl"]) == 2
    assert "did you mean toy/rectangle" in capsys.readouterr().err


# --------------------------------------------------------------------------- the built-in suite


def test_builtin_suite_reference_passes_golden_and_nop_passes_none(tmp_path: Path) -> None:
    """One pass over the whole built-in suite with each floor/ceiling subject (skips until cases exist)."""
    from imagebench import cases as builtin

    if not builtin.CASE_MODULES:
        pytest.skip("no built-in case modules are registered yet")
    suite = builtin.all_cases()
    assert suite, "CASE_MODULES is set but lists no cases"
    from imagebench.runs.runner import presents_tensor

    plane = None
    if any(presents_tensor(c) for c in suite):  # one data plane for both runs (when it can start here)
        from imagebench.plane import RunPlane

        plane, _ = RunPlane.try_start()
    try:
        ref = run_cases(suite, ReferenceSubject(), out=tmp_path, progress=False, plane=plane)
        nop = run_cases(suite, NopSubject(), out=tmp_path, progress=False, plane=plane)
    finally:
        if plane is not None:
            plane.close()
    problems = []
    for case in suite:
        (r,) = ref.samples[case.label]
        (n,) = nop.samples[case.label]
        if r.status == "skipped" and case.kind == "curated":
            continue  # its data is not on this machine: not a verdict either way
        if case.case_class == "golden" and r.status != "ok":
            problems.append(f"reference on {case.label}: {r.status} ({r.reason})")
        if r.status == "harness-error":
            problems.append(f"reference on {case.label}: harness-error ({r.reason})")
        if n.status == "ok" or n.passed:
            problems.append(f"nop passed {case.label}: the case measures nothing")
        if n.status == "harness-error":
            problems.append(f"nop on {case.label}: harness-error ({n.reason})")
    assert not problems, "\n".join(problems)
