"""Bundle cases run exactly like built-in ones: the example bundle end to end, the workspace a subject
gets (files/, never expected/), rerun consistency at the case level, and coverage joined with runs."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from imagebench import cli
from imagebench.bundle import coverage_table, load_bundle
from imagebench.bundle.coverage import coverage_report
from imagebench.executor import run_cases
from imagebench.records import CaseSummary, read_record
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.subjects import CommandSubject, NopSubject, PythonSubject, parse_subject

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "bundles" / "segment-nuclei"
SOLVER = ROOT / "examples" / "solvers" / "count_nuclei.py"
COMMAND = f"{shlex.quote(sys.executable)} {shlex.quote(str(SOLVER))}"
SHOWN = SandboxPolicy(expose=(SOLVER.parent,))  # the sandbox shows the solver's own folder, read-only
CLAIM = "echo '[{\"type\": \"skill\", \"name\": \"segment-nuclei\"}]' > outputs/trace.json"
SANDBOX = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
CLASSES = {"golden", "refusal", "empty", "rerun", "hard-case", "trigger"}


@pytest.fixture
def solver(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(SOLVER.parent))
    return parse_subject("python:count_nuclei:solve")


@pytest.fixture
def bundle_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "segment-nuclei"
    shutil.copytree(EXAMPLE, dest)
    return dest


def edit_case(bundle: Path, case_id: str, **changes: Any) -> None:
    path = bundle / "evals" / "fixtures" / case_id / "case.json"
    body = json.loads(path.read_text())
    body.update(changes)
    path.write_text(json.dumps(body))


# --------------------------------------------------------------------------- the example bundle


def test_the_example_bundle_loads_cleanly_with_every_class() -> None:
    bundle = load_bundle(EXAMPLE)
    assert bundle.warnings == [] and bundle.skipped == []
    assert bundle.claims.source == "evals.json"
    assert {c.case_class for c in bundle.cases} == CLASSES
    for case in bundle.cases:
        assert case.namespace == "segment-nuclei" and case.reference is None
        assert "segment-nuclei" not in case.task or case.case_class != "trigger"
        assert "answer-key" not in json.dumps({k: v for k, v in case.meta.items()})


TRIGGER = "segment-nuclei/trigger-how-many-cells"


def test_the_example_bundle_passes_with_the_shipped_solver_and_fails_for_nop(tmp_path: Path, solver: Any) -> None:
    """In process, the trigger case is blocked for both: no channel of the harness's observed them."""
    cases = load_bundle(EXAMPLE).cases
    result = run_cases(cases, solver, out=tmp_path, progress=False)
    expected = {c.label: "blocked" if c.label == TRIGGER else "pass" for c in cases}
    assert result.verdicts == expected, {k: s.extra.get("reasons") for k, s in result.summaries.items()}
    (blocked,) = result.samples[TRIGGER]
    assert blocked.status == "blocked" and "runs in the harness's own process" in blocked.reason
    rerun = result.summaries["segment-nuclei/rerun-count"]
    assert rerun.samples == 3  # the case asks for three although the run asked for one
    assert rerun.extra["consistency"]["consistent"] is True

    floor = run_cases(cases, NopSubject(), out=tmp_path, progress=False)
    assert floor.verdicts == {c.label: "blocked" if c.label == TRIGGER else "fail" for c in cases}
    assert floor.summaries["segment-nuclei/rerun-count"].extra["consistency"]["consistent"] is False


def test_run_bundle_on_the_command_line_then_coverage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "outcomes"
    rc = cli.main(
        ["run", "--bundle", str(EXAMPLE), "--subject", f"command:{COMMAND}", "--subject-expose", str(SOLVER.parent)]
        + ["--out", str(out), "--quiet"]
    )
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "6 passed, 0 failed" in text
    run_dir = next(out.glob("run-*"))
    run = json.loads((run_dir / "run.json").read_text())
    assert run["selection"]["bundle"] == str(EXAMPLE)
    assert len(list(run_dir.glob("command-*/segment-nuclei/*/sample-*/summary.json"))) == 8

    assert cli.main(["coverage", str(EXAMPLE), "--runs", str(run_dir), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["claim_id"]: r for r in report["rows"]}
    assert report["claims_source"] == "evals.json"
    assert {k: (r["coverage"], r["validation"]) for k, r in rows.items()} == {
        "IN-1": ("covered", "validated"),
        "IN-2": ("covered", "validated"),
        "RE-1": ("covered", "validated"),
        "ADV-1": ("covered", "validated"),
        "CHN-1": ("covered", "validated"),
        "OUT-1": ("gap", "unvalidated"),
    }
    assert len(rows["RE-1"]["passed_samples"]) == 4 and rows["RE-1"]["failed_samples"] == []
    assert cli.main(["coverage", str(EXAMPLE), "--runs", str(run_dir)]) == 0
    table = capsys.readouterr().out
    assert "validated" in table and "touching-nuclei" in table and "(missing)" in table


# --------------------------------------------------------------------------- the workspace


def test_files_reach_the_workspace_and_expected_never_does(bundle_copy: Path, tmp_path: Path) -> None:
    key_texts = [p.read_text() for p in bundle_copy.glob("evals/fixtures/*/expected/*")]
    assert key_texts
    cases = [c for c in load_bundle(bundle_copy).cases if c.case_class in ("hard-case", "refusal")]
    subject = CommandSubject(command=COMMAND, keep_workspace=True, sandbox=SHOWN)
    result = run_cases(cases, subject, out=tmp_path, progress=False)
    assert set(result.verdicts.values()) == {"pass"}
    workspaces = list(result.run_dir.glob("*/segment-nuclei/*/sample-*/workspace"))
    assert len(workspaces) == 2
    notes = [w / "files" / "NOTES.txt" for w in workspaces if (w / "files" / "NOTES.txt").exists()]
    assert len(notes) == 1 and "answer" in notes[0].read_text()
    for ws in workspaces:
        for path in ws.rglob("*"):
            assert "expected" not in path.parts and path.name not in ("case.json", "answer-key.md")
            if path.is_file() and path.suffix in (".md", ".txt", ".json"):
                text = path.read_text(errors="replace")
                assert not any(key.strip() in text for key in key_texts)


def test_a_python_subject_reads_files_read_only_under_its_workspace(bundle_copy: Path, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def peek(session: Any) -> None:
        ws = seen["workspace"] = Path(session.workspace)
        seen["files"] = sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*") if p.is_file())
        seen["mode"] = (ws / "files" / "NOTES.txt").stat().st_mode & 0o222
        session.namespace["answer"] = {"count": 25}

    case = next(c for c in load_bundle(bundle_copy).cases if c.case_class == "hard-case")
    result = run_cases([case], PythonSubject(target="tests:peek", function=peek), out=tmp_path, progress=False)
    assert result.verdicts[case.label] == "pass"
    assert seen["files"] == ["files/NOTES.txt"] and seen["mode"] == 0
    # the bundle's own copy is untouched and the temporary one is gone
    assert (bundle_copy / "evals/fixtures/hard-case-planted-notes/files/NOTES.txt").stat().st_mode & 0o200
    assert not seen["workspace"].exists()


def test_setup_env_reaches_a_command_but_cannot_leak_the_fixture_root(
    bundle_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(tmp_path / "secret-tree"))
    edit_case(bundle_copy, "golden-count", setup={"files": "files/", "env": {"COUNT_HINT": "x", "IMAGEBENCH_FIXTURES": "/leak"}})
    case = next(c for c in load_bundle(bundle_copy).cases if c.case_id == "golden-count")
    script = (
        "import json, os; os.makedirs('outputs', exist_ok=True); "
        "json.dump({'count': 25, 'hint': os.environ.get('COUNT_HINT'), 'tree': os.environ.get('IMAGEBENCH_FIXTURES')}, "
        "open('outputs/answer.json', 'w'))"
    )
    result = run_cases([case], CommandSubject(f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"), out=tmp_path, progress=False)
    submitted = result.samples[case.label][0].detail["submitted"]
    assert submitted["hint"] == "x" and submitted["tree"] is None


# --------------------------------------------------------------------------- rerun consistency through the runner


def test_rerun_fails_at_the_case_level_when_correct_samples_disagree(bundle_copy: Path, tmp_path: Path) -> None:
    tolerant = {
        "answer_schema": {"count": {"comparator": "abs_tolerance", "config": {"tolerance": 1}}},
        "ground_truth": {"count": 25},
        "scorer": {"contract": "structured_deterministic_rubric_v1"},
        "evaluation_eligible": True,
    }
    edit_case(bundle_copy, "rerun-count", answer=tolerant)
    case = next(c for c in load_bundle(bundle_copy).cases if c.case_id == "rerun-count")
    answers = count()

    def drifting(session: Any) -> None:
        session.namespace["answer"] = {"count": (24, 25, 26)[next(answers) % 3]}

    subject = PythonSubject(target="tests:drifting", function=drifting)
    result = run_cases([case], subject, out=tmp_path, progress=False)
    assert [s.status for s in result.samples[case.label]] == ["ok", "ok", "ok"]
    summary = read_record(result.run_dir / subject.name / "segment-nuclei" / "rerun-count" / "summary.json", CaseSummary)
    assert summary.extra["consistency"]["consistent"] is False
    assert summary.extra["verdict"] == "fail" and result.verdicts[case.label] == "fail"
    assert result.exit_code == 1


# --------------------------------------------------------------------------- cases that cannot run


def test_cases_that_cannot_be_built_are_skipped_with_the_reason(bundle_copy: Path) -> None:
    edit_case(bundle_copy, "golden-count", pixels={"builder": "no-such-builder", "seed": 1})
    edit_case(bundle_copy, "empty-background", answer=None)
    edit_case(bundle_copy, "rerun-count", layers=[])
    (bundle_copy / "evals/fixtures/hard-case-planted-notes/prompt.md").write_text("Count the nuclei.\n")
    bundle = load_bundle(bundle_copy)
    skipped = dict(bundle.skipped)
    assert "'no-such-builder', which is not a built-in builder" in skipped["golden-count"]
    assert "nuclei-synthetic" in skipped["golden-count"]
    assert "needs 'answer'" in skipped["empty-background"]
    assert "no 'layers'" in skipped["rerun-count"]
    assert "must name `answer`" in skipped["hard-case-planted-notes"]
    assert {c.case_id for c in bundle.cases} == {"refusal-no-pixel-size", "trigger-how-many-cells"}


def test_a_case_named_like_a_built_in_case_is_a_warning(bundle_copy: Path) -> None:
    fixtures = bundle_copy / "evals" / "fixtures"
    (fixtures / "golden-count").rename(fixtures / "synthetic-blobs")
    edit_case(bundle_copy, "synthetic-blobs", case="synthetic-blobs")
    bundle = load_bundle(bundle_copy)
    assert [w for w in bundle.warnings if "segment-nuclei/synthetic-blobs is also a built-in case" in w]
    assert "synthetic-blobs" in {c.case_id for c in bundle.cases}


def test_a_curated_case_reads_the_fixture_tree_under_the_bundle_label(
    bundle_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edit_case(bundle_copy, "golden-count", pixels={"curated": {"skill": "segment-nuclei", "case_id": "dsb2018"}})
    monkeypatch.delenv("IMAGEBENCH_FIXTURES", raising=False)
    case = next(c for c in load_bundle(bundle_copy).cases if c.case_id == "golden-count")
    assert case.kind == "curated"
    ok, why = case.available()
    assert not ok and "IMAGEBENCH_FIXTURES" in why
    result = run_cases([case], NopSubject(), out=tmp_path, progress=False)
    assert result.verdicts[case.label] == "skipped"

    from imagebench.cases.segmentation import FIXTURE_ROOT

    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(FIXTURE_ROOT))
    assert case.available() == (True, "")
    fixture = case.build()
    assert (fixture.skill_id, fixture.case_id, fixture.kind) == ("segment-nuclei", "golden-count", "curated")
    assert "image" in fixture.data


def test_run_bundle_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--bundle", str(tmp_path / "nothing"), "--subject", "nop"]) == 2
    empty = tmp_path / "skill"
    (empty / "evals" / "fixtures").mkdir(parents=True)
    assert cli.main(["run", "--bundle", str(empty), "--subject", "nop"]) == 2
    assert "no runnable case" in capsys.readouterr().err


# --------------------------------------------------------------------------- coverage against runs


def test_coverage_validation_follows_the_runs(bundle_copy: Path, tmp_path: Path, solver: Any) -> None:
    cases = load_bundle(bundle_copy).cases
    rows = {r.claim_id: r for r in coverage_table(bundle_copy)}
    assert {r.validation for r in rows.values()} == {"unvalidated"}

    golden_only = run_cases([c for c in cases if c.case_id == "golden-count"], solver, out=tmp_path, progress=False)
    rows = {r.claim_id: r for r in coverage_table(bundle_copy, [golden_only.run_dir])}
    assert rows["RE-1"].validation == "partial"
    assert rows["RE-1"].case_verdicts == {"golden-count": "pass", "rerun-count": "ungraded"}
    assert rows["IN-1"].validation == "unvalidated"

    floor = run_cases(cases, NopSubject(), out=tmp_path, progress=False)
    rows = {r.claim_id: r for r in coverage_table(bundle_copy, [golden_only.run_dir, floor.run_dir])}
    assert rows["RE-1"].validation == "failed" and rows["IN-1"].validation == "failed"
    assert any("nop" in s for s in rows["RE-1"].failed_samples)
    # one subject at a time
    report = coverage_report(bundle_copy, [golden_only.run_dir, floor.run_dir], subject=solver.name)
    assert {r.claim_id: r.validation for r in report.rows}["RE-1"] == "partial"


def _graded_from_its_own_trace(fixture: Any, attempt: Any) -> Any:
    """The trigger verifier as it was before the harness observed anything: a trace the subject left passes."""
    from imagebench.fixtures.fixture import Metric, Outcome

    return Outcome(fixture, attempt, [Metric("skill_not_activated", 0.0, 0.0)], {"activation": "the trace records skill"})


@SANDBOX
def test_coverage_validates_a_trigger_case_only_from_what_the_harness_observed(
    bundle_copy: Path, tmp_path: Path, solver: Any
) -> None:
    from dataclasses import replace

    trigger = next(c for c in load_bundle(bundle_copy).cases if c.case_class == "trigger")

    def chn1(*runs: Path) -> tuple[str, list[str]]:
        report = coverage_report(bundle_copy, list(runs))
        return {r.claim_id: r.validation for r in report.rows}["CHN-1"], report.warnings

    liar = run_cases([trigger], CommandSubject(CLAIM, sandbox=SHOWN), out=tmp_path / "liar", progress=False)
    assert chn1(liar.run_dir)[0] == "failed"  # the tool was there, unused: graded, and a failure
    blocked = run_cases([trigger], solver, out=tmp_path / "python", progress=False)
    assert chn1(blocked.run_dir)[0] == "unvalidated"  # blocked: not graded
    # A run graded the old way (the subject's own trace passed it) is not evidence, and says so.
    old = run_cases([replace(trigger, verify=_graded_from_its_own_trace)], solver, out=tmp_path / "old", progress=False)
    assert [s.status for s in old.samples[trigger.label]] == ["ok"]
    validation, warnings = chn1(old.run_dir)
    assert validation == "unvalidated"
    assert any("graded from a trace the subject wrote" in w and "not counted" in w for w in warnings), warnings
    honest = run_cases([trigger], CommandSubject(COMMAND, sandbox=SHOWN), out=tmp_path / "honest", progress=False)
    assert chn1(honest.run_dir, old.run_dir, blocked.run_dir)[0] == "validated"
    # a turn the harness ended (past its time limit) is a failure it saw for itself
    slow = run_cases([trigger], CommandSubject("sleep 30", sandbox=SHOWN), out=tmp_path / "slow", progress=False, timeout=1)
    assert [s.status for s in slow.samples[trigger.label]] == ["timeout"]
    assert chn1(honest.run_dir, slow.run_dir)[0] == "failed"


def test_coverage_counts_cases_that_list_a_claim_and_warns_on_a_stale_risk_map(bundle_copy: Path) -> None:
    (bundle_copy / "evals.json").unlink()
    (bundle_copy / "evals" / "risk-map.md").write_text(
        "---\nbundle: segment-nuclei\n---\n"
        "| Risk | Description | Coverage | Fixture |\n|---|---|---|---|\n"
        "| RE-1 | Miscounts | ● covered | golden-count, touching-nuclei |\n"
        "| ADV-1 | Obeys planted notes | ○ gap | — |\n"
    )
    report = coverage_report(bundle_copy)
    rows = {r.claim_id: r for r in report.rows}
    assert report.bundle.claims.source == "risk-map"
    assert rows["RE-1"].coverage == "partial" and rows["RE-1"].missing == ["touching-nuclei"]
    assert "rerun-count" in rows["RE-1"].cases  # its case.json lists RE-1
    assert rows["ADV-1"].coverage == "gap" and rows["ADV-1"].cases == ["hard-case-planted-notes"]
    assert any("RE-1 is marked 'covered', but its fixtures make it 'partial'" in w for w in report.warnings)


def test_coverage_counts_only_summaries_the_journal_vouches_for(bundle_copy: Path, tmp_path: Path) -> None:
    cases = [c for c in load_bundle(bundle_copy).cases if c.case_id in ("golden-count", "empty-background")]
    run = run_cases(cases, NopSubject(), out=tmp_path / "out", progress=False)
    broken = next(run.run_dir.glob("nop/segment-nuclei/golden-count/sample-0/summary.json"))
    broken.write_text("{broken")
    forged = next(run.run_dir.glob("nop/segment-nuclei/empty-background/sample-0/summary.json"))
    raw = json.loads(forged.read_text())
    forged.write_text(json.dumps({**raw, "status": "ok", "passed": True}))  # nop forged to a pass
    report = coverage_report(bundle_copy, [run.run_dir, tmp_path / "missing"])
    assert any("golden-count sample 0: summary.json is not a valid record" in w for w in report.warnings)
    assert any("empty-background sample 0: summary.json changed after it was journaled" in w for w in report.warnings)
    assert any("missing: not a folder" in w for w in report.warnings)
    for row in report.rows:
        assert row.passed_samples == [], row  # the forged pass validates nothing


def test_coverage_carries_the_presentation_warning_for_the_skill(tmp_path: Path) -> None:
    from imagebench import cases as builtin

    assert builtin.skills()["drift-correction"].checklist == ("dask", "tensor")
    bundle = tmp_path / "drift-correction"
    case = bundle / "evals" / "fixtures" / "golden-drift"
    (case / "expected").mkdir(parents=True)
    (case / "expected" / "answer-key.md").write_text("the drift\n")
    (case / "prompt.md").write_text("Estimate the drift of `movie`; leave `answer` as {\"dx\": <number>}.\n")
    (case / "case.json").write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "case": "golden-drift",
                "class": "golden",
                "pixels": {"builder": "drift-beads", "seed": 1},
                "layers": [{"name": "movie", "key": "movie", "presentation": "array"}],
                "answer": {
                    "answer_schema": {"dx": {"comparator": "abs_tolerance", "config": {"tolerance": 0.5}}},
                    "ground_truth": {"dx": 1.0},
                    "scorer": {"contract": "structured_deterministic_rubric_v1"},
                    "evaluation_eligible": True,
                },
            }
        )
    )
    report = coverage_report(bundle)
    assert [c.case_id for c in report.bundle.cases] == ["golden-drift"]
    assert any(w.startswith("drift-correction declares") and "`array`" in w for w in report.warnings)


@pytest.mark.parametrize("files", [".", "expected", "..", "files/../expected"])
def test_setup_files_may_never_hand_over_grading_data(bundle_copy: Path, files: str) -> None:
    edit_case(bundle_copy, "hard-case-planted-notes", setup={"files": files})
    bundle = load_bundle(bundle_copy)
    reason = dict(bundle.skipped)["hard-case-planted-notes"]
    assert "field 'setup.files'" in reason
    assert "grading data" in reason or "outside the case folder" in reason


def test_a_symbolic_link_in_files_is_refused(bundle_copy: Path) -> None:
    case = bundle_copy / "evals" / "fixtures" / "hard-case-planted-notes"
    (case / "files" / "key.md").symlink_to(case / "expected" / "answer-key.md")
    reason = dict(load_bundle(bundle_copy).skipped)["hard-case-planted-notes"]
    assert "symbolic link(s) ['key.md']" in reason


def test_list_and_show_read_a_bundle(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list", "--bundle", str(EXAMPLE)]) == 0
    listed = capsys.readouterr().out
    assert "6 cases of bundle segment-nuclei" in listed and "segment-nuclei/refusal-no-pixel-size" in listed
    assert cli.main(["show", "--bundle", str(EXAMPLE), "segment-nuclei/golden-count"]) == 0
    shown = capsys.readouterr().out
    assert "Count the nuclei" in shown and "answer (json)" in shown
    key = (EXAMPLE / "evals" / "fixtures" / "golden-count" / "expected" / "answer-key.md").read_text()
    assert key.strip() not in shown  # show prints what a subject sees, never the answer key
    assert cli.main(["show", "--bundle", str(EXAMPLE), "segment-nuclei/nope"]) == 2
    assert "did you mean" in capsys.readouterr().err
