"""Comparable means comparable: each rule of issue 25 proved with a changed or dishonest input.

- a patched verifier helper changes the case's scoring closure and fingerprint, ``suite verify``
  names it and ``compare`` refuses C3;
- a sandboxed and an unsandboxed run refuse C4 and name ``sandbox``;
- an untrusted subject runs sealed by default, so a copy of the public source no longer rebuilds
  its truth, and the run resumes with the secret kept in the state folder;
- a deterministic solver over 3 samples of one fixture is 1 replicate: no p-value;
- summaries and journal rewritten together are named forged by report, compare and resume;
- honest runs of unchanged code stay comparable to themselves.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import helpers
import numpy as np
import pytest
from helpers import make_toy_case, resign_run

from imagebench import cli
from imagebench.case.model import Case
from imagebench.executor import ResumeError, resume_run, run_cases
from imagebench.runs.closure import code_closure, scoring_digest
from imagebench.runs.fingerprint import case_parts
from imagebench.runs.reader import read_run
from imagebench.runs.sealed import Seal
from imagebench.sandbox.policy import SandboxPolicy
from imagebench.subjects import CommandSubject, NopSubject, ReferenceSubject
from imagebench.suite.compare import compare_runs
from imagebench.suite.record import RUN_INFO_KEY, SuiteRunInfo, conditions_now
from imagebench.suite.resolve import pin_suite, verify_suite
from imagebench.suite.sampling import assign

REV = "2026.11.0"
PY = shlex.quote(sys.executable)


def suite_run(out: Path, cases: list[Case], subject: Any, *, samples: int = 1, **kw: Any) -> Path:
    """``imagebench run --suite`` through the API: the suite pinned over ``cases`` as they are now."""
    manifest, problems = pin_suite("core", REV, cases)
    assert manifest is not None, problems
    assignment = assign(manifest, "all", 0)
    info = SuiteRunInfo(
        requested="core", assignment=assignment, conditions=conditions_now(samples=samples, timeout=None, cases=cases)
    )
    result = run_cases(
        cases, subject, samples=samples, out=out, progress=False, record_extra={RUN_INFO_KEY: info.model_dump(mode="json")}, **kw
    )
    return result.run_dir


def failing(result: Any) -> dict[str, list[str]]:
    return {c.id: c.problems for c in result.conditions if not c.holds}


# --------------------------------------------------------------------------- the scoring closure


def test_a_patched_verifier_helper_changes_the_scoring_closure(monkeypatch: pytest.MonkeyPatch) -> None:
    from imagebench import cases as builtin
    from imagebench.cases import drift

    case = next(c for c in builtin.all_cases() if c.label == "drift-correction/beads-subpixel")
    closure = code_closure([case.verify])["code"]
    # the verifier's own source is not all that scores it: the helpers it calls are in its closure
    assert {"imagebench.cases.drift:verify_drift", "imagebench.cases.drift:trajectory_metrics"} <= set(closure)
    before_parts, before = case_parts(case), scoring_digest(case)
    manifest, problems = pin_suite("drift", REV, [case])
    assert manifest is not None and problems == []
    assert verify_suite(manifest, [case]) == []

    original = drift.trajectory_metrics

    def patched(shifts: Any, truth: Any, tol: Any, detail: Any) -> Any:  # errors x0.1, as in the issue
        return [m.__class__(m.name, (m.value or 0.0) * 0.1, m.limit, m.unit) for m in original(shifts, truth, tol, detail)]

    monkeypatch.setattr(drift, "trajectory_metrics", patched)
    after_parts = case_parts(case)
    assert scoring_digest(case) != before
    assert after_parts["verifier"] == before_parts["verifier"]  # verify_drift itself is byte for byte the same
    assert {k for k in after_parts if after_parts[k] != before_parts.get(k)} == {"scoring"}
    found = verify_suite(manifest, [case])
    assert any("scoring closure" in str(p) for p in found), found


def test_a_module_constant_the_verifier_reads_is_in_its_closure(monkeypatch: pytest.MonkeyPatch) -> None:
    import imagebench.fixtures.fixture as fixture_module

    case = make_toy_case()
    before = scoring_digest(case)
    assert "imagebench.fixtures.fixture:BECAUSE" in code_closure([case.verify])["constants"]
    monkeypatch.setattr(fixture_module, "BECAUSE", "patched: ")
    assert scoring_digest(case) != before


def test_compare_refuses_c3_when_a_helper_changed_between_the_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = [make_toy_case("alpha"), make_toy_case("beta", seed=1)]
    a = suite_run(tmp_path, cases, ReferenceSubject())
    same = suite_run(tmp_path, cases, ReferenceSubject())
    honest = compare_runs(a, same)
    assert honest.comparable, failing(honest)  # unchanged code stays comparable to itself
    real = helpers.read_scalar
    monkeypatch.setattr(helpers, "read_scalar", lambda attempt, name: real(attempt, name))  # toy_verify's helper
    b = suite_run(tmp_path, cases, ReferenceSubject())
    result = compare_runs(a, b)
    assert not result.comparable
    c3 = failing(result)["C3"]
    assert any("toy/alpha: the scoring closure differs" in p for p in c3), c3
    # the closure is recorded per case in each case summary and the receipt as well
    receipt = json.loads((b / "receipt.json").read_text())
    assert {c["label"]: c["scoring"] for c in receipt["cases"]}["toy/alpha"] == scoring_digest(cases[0])
    summary = json.loads((b / "reference" / "toy" / "alpha" / "summary.json").read_text())
    assert summary["scoring"] == scoring_digest(cases[0]) != json.loads(
        (a / "reference" / "toy" / "alpha" / "summary.json").read_text()
    )["scoring"]


# --------------------------------------------------------------------------- execution conditions


LEAVE = (
    "import json, numpy as np\n"
    "m = np.load('inputs/image.npy') > 0.5\n"
    "np.save('outputs/mask.npy', m)\n"
    "json.dump(int(m.sum()), open('outputs/area.json', 'w'))\n"
)


def test_a_sandboxed_and_an_unsandboxed_run_refuse_c4_naming_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [make_toy_case("alpha")]
    seal = Seal(b"s" * 32)  # one secret for both: only the confinement differs
    command = f"{PY} -c {shlex.quote(LEAVE)}"
    a = suite_run(tmp_path, cases, CommandSubject(command), sealed=seal)
    b = suite_run(tmp_path, cases, CommandSubject(command, sandbox=SandboxPolicy(enabled=False)), sealed=seal)
    result = compare_runs(a, b)
    assert list(failing(result)) == ["C4"]
    assert any(p.startswith("sandbox: A bubblewrap, B none") for p in failing(result)["C4"])
    assert result.b is not None and result.b.execution is not None and result.b.execution["sandbox"] == "none"
    assert any(p.startswith("limits: ") for p in failing(result)["C4"])  # unconfined: no limits either
    allowed = compare_runs(a, b, allow_conditions=["sandbox", "limits"])
    assert allowed.comparable, failing(allowed)
    assert any("allowed by --allow-conditions sandbox" in n for c in allowed.conditions for n in c.notes)
    assert cli.main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "sandbox: A bubblewrap, B none" in out and "B ran under: sandbox none" in out
    assert cli.main(["compare", str(a), str(b), "--allow-conditions", "sandboxx"]) == 2  # not a condition


# --------------------------------------------------------------------------- sealed by default


def _cheat(tmp_path: Path) -> str:
    """A subject holding a copy of the public source (toy_fixture's lines): it rebuilds the fixture
    from the case's public seed (0) and, when the image it rebuilt is the one it was given, leaves
    the rebuilt truth (the mask) without analysing anything; otherwise nothing."""
    source = tmp_path / "public"
    source.mkdir()
    (source / "cheat.py").write_text(
        "import json, numpy as np\n"
        "rng = np.random.default_rng(0)\n"
        "mask = np.zeros((24, 24), dtype=bool)\n"
        "r, c = int(rng.integers(2, 6)), int(rng.integers(2, 6))\n"
        "mask[r : r + 9, c : c + 11] = True\n"
        "image = (mask.astype(np.float32) + rng.normal(0.0, 0.05, mask.shape)).astype(np.float32)\n"
        "if np.array_equal(image, np.load('inputs/image.npy')):\n"
        "    np.save('outputs/mask.npy', mask)\n"
        "    json.dump(int(mask.sum()), open('outputs/area.json', 'w'))\n"
    )
    return f"{PY} {shlex.quote(str(source / 'cheat.py'))}"


def test_an_untrusted_subject_runs_sealed_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from imagebench.runs.sealed import stored_seal

    case = make_toy_case("rect")
    command = _cheat(tmp_path)
    policy = SandboxPolicy(expose=(tmp_path / "public",))
    unsealed = run_cases([case], CommandSubject(command, sandbox=policy), out=tmp_path / "u", progress=False, unsealed=True)
    (cheated,) = unsealed.samples["toy/rect"]
    assert cheated.status == "ok"  # the public seed rebuilt the fixture, truth and all
    assert json.loads((unsealed.run_dir / "run.json").read_text())["extra"]["unsealed"] is True

    sealed = run_cases([case], CommandSubject(command, sandbox=policy), out=tmp_path / "s", progress=False, samples=2)
    record = json.loads((sealed.run_dir / "run.json").read_text())
    seal = record["extra"]["sealed"]
    assert seal["origin"] == "default" and record["extra"]["execution"]["sealing"] == "sealed by default"
    for sample in sealed.samples["toy/rect"]:
        assert sample.seed != 0 and sample.status == "no-result"  # its rebuild is not what it was given
    # the secret is in the state folder, never in the run folder
    kept = stored_seal(seal["commitment"])
    assert kept is not None and kept.secret.hex() not in "".join(
        p.read_text(errors="replace") for p in sealed.run_dir.rglob("*") if p.is_file()
    )
    # trusted code keeps the public seeds
    ref = run_cases([case], ReferenceSubject(), out=tmp_path / "r", progress=False)
    assert "sealed" not in json.loads((ref.run_dir / "run.json").read_text())["extra"]
    assert ref.samples["toy/rect"][0].seed == 0


def test_a_run_sealed_by_default_resumes_with_the_kept_secret(tmp_path: Path) -> None:
    case = make_toy_case("rect")
    subject = CommandSubject(f"{PY} -c {shlex.quote(LEAVE)}")
    result = run_cases([case], subject, out=tmp_path, progress=False, samples=2)
    seeds = [s.seed for s in result.samples["toy/rect"]]
    sample = result.run_dir / subject.name / "toy" / "rect" / "sample-1"
    for p in sample.iterdir():
        p.unlink()
    sample.rmdir()
    again = resume_run(result.run_dir, cases=[case], subject=subject, progress=False)
    assert [s.seed for s in again.samples["toy/rect"]] == seeds


# --------------------------------------------------------------------------- replicates


def test_three_samples_of_one_fixture_are_one_replicate_and_no_p_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [make_toy_case("alpha")]
    a = suite_run(tmp_path, cases, ReferenceSubject(), samples=3)
    b = suite_run(tmp_path, cases, NopSubject(), samples=3)
    digests = {s.fixture_digest for s in read_run(a).samples("toy/alpha")}
    assert len(digests) == 1 and None not in digests
    result = compare_runs(a, b)
    assert result.comparable, failing(result)
    (case,) = result.cases
    assert (case.pairs, case.fixtures, case.only_a, case.only_b) == (3, 1, 1, 0)
    assert result.overall is not None and result.overall.fixtures == 1 and result.overall.mcnemar_p is None
    assert cli.main(["compare", str(a), str(b)]) == 0
    assert "no test: 1 distinct fixture(s)" in capsys.readouterr().out
    summary = json.loads((a / "reference" / "toy" / "alpha" / "summary.json").read_text())
    assert summary["fixtures"] == 1 and summary["samples"] == 3
    # the aggregates say how many fixtures stand behind each figure
    from imagebench.scoring.aggregates import aggregate

    figures = aggregate(read_run(a).samples("toy/alpha"), 1)
    assert figures.cases[0].fixtures == 1 and figures.figures["pass@1"].fixtures == 1
    assert "over 1 of 1 cases (1 distinct fixtures;" in dict(figures.table())["pass@1"]
    assert cli.main(["report", str(a), "--quiet"]) == 0
    assert "(1 distinct fixtures)" in (a / "report.html").read_text()


def test_a_deterministic_solver_on_a_curated_case_is_one_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's measurement: 3 samples of a curated case (it has no seed: sealed or not, each
    sample sees the same pixels) are one replicate; no McNemar p over 3 pseudo-pairs."""
    from imagebench.fixtures.specs import OnDisk

    helpers.build_tree(tmp_path / "fx")
    curated = make_toy_case("tiny", namespace="seg", spec=OnDisk(tolerance=dict(helpers.TOY_TOLERANCE), root=tmp_path / "fx"))
    a = suite_run(tmp_path, [curated], ReferenceSubject(), samples=3)
    b = suite_run(tmp_path, [curated], NopSubject(), samples=3)
    result = compare_runs(a, b)
    assert result.comparable, failing(result)
    assert result.overall is not None
    assert (result.overall.pairs, result.overall.fixtures, result.overall.mcnemar_p) == (3, 1, None)
    assert cli.main(["compare", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["overall"]["fixtures"] == 1 and data["overall"]["mcnemar_p"] is None


def test_sealed_samples_are_distinct_fixtures(tmp_path: Path) -> None:
    cases = [make_toy_case("alpha")]
    seal = Seal(b"r" * 32)
    a = suite_run(tmp_path, cases, ReferenceSubject(), samples=3, sealed=seal)
    b = suite_run(tmp_path, cases, NopSubject(), samples=3, sealed=seal)
    result = compare_runs(a, b)
    assert result.comparable, failing(result)
    assert result.cases[0].fixtures == 3 and result.overall is not None and result.overall.mcnemar_p == pytest.approx(0.25)


# --------------------------------------------------------------------------- the anchored journal


def _forge_everything(run_dir: Path) -> None:
    """A ``nop`` run rewritten to ``ok``: every sample and case summary, run.json, and each journal
    line's digest recomputed, all together (what the issue measured)."""
    import hashlib

    journal = run_dir / "journal.jsonl"
    lines = []
    for line in journal.read_text().splitlines():
        entry = json.loads(line)
        if entry["event"] == "unit":
            path = run_dir / entry["summary"]
            raw = json.loads(path.read_text())
            raw.update(status="ok", passed=True, reason="")
            path.write_text(json.dumps(raw))
            entry["status"] = "ok"
            entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(json.dumps(entry))
    journal.write_text("\n".join(lines) + "\n")
    for case_summary in run_dir.glob("nop/*/*/summary.json"):
        raw = json.loads(case_summary.read_text())
        raw.update(passed=raw["samples"], counts={"ok": raw["samples"]})
        case_summary.write_text(json.dumps(raw))


def test_summaries_and_journal_rewritten_together_are_named_forged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [make_toy_case("alpha"), make_toy_case("beta", seed=1)]
    a = suite_run(tmp_path, cases, ReferenceSubject(), samples=2)
    b = suite_run(tmp_path, cases, NopSubject(), samples=2)
    assert read_run(b).verified and not read_run(b).forged
    receipt = json.loads((b / "receipt.json").read_text())
    assert receipt["journal"]["key"].startswith("jk-") and receipt["journal"]["lines"] >= 6
    _forge_everything(b)

    contents = read_run(b)
    assert contents.forged and contents.samples("toy/alpha") == []
    assert any("does not verify under the journal key" in p for p in contents.integrity)
    # report: named on the page and exit 1
    assert cli.main(["report", str(b), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "FORGED" in err
    page = (b / "report.html").read_text()
    assert 'id="integrity"' in page and 'data-forged="yes"' in page
    # compare: refused, naming it
    result = compare_runs(a, b, allow_missing=True)
    assert not result.comparable and any("run B is forged" in p for p in result.problems)
    # resume: refused
    with pytest.raises(ResumeError, match="forged"):
        resume_run(b, cases=cases, progress=False)
    assert cli.main(["run", "--resume", str(b), "--quiet"]) != 0


def test_a_case_summary_that_disagrees_with_its_samples_is_named(tmp_path: Path) -> None:
    run = run_cases([make_toy_case("alpha")], NopSubject(), out=tmp_path, progress=False).run_dir
    path = run / "nop" / "toy" / "alpha" / "summary.json"
    raw = json.loads(path.read_text())
    raw.update(passed=1, counts={"ok": 1})
    path.write_text(json.dumps(raw))
    contents = read_run(run)  # its journal line names the edit first
    assert contents.forged and any("changed after it was journaled" in p for p in contents.integrity)
    resign_run(run)  # a holder of the key signing it again: its samples still say otherwise
    contents = read_run(run)
    assert contents.forged and any("disagrees with its samples" in p for p in contents.integrity)


def test_a_journal_cut_short_is_named_against_the_receipt(tmp_path: Path) -> None:
    run = run_cases([make_toy_case("alpha")], NopSubject(), out=tmp_path, progress=False, samples=2).run_dir
    journal = run / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines[:-2]))  # the last unit line and the end line gone
    contents = read_run(run)
    assert contents.forged and any("lines were cut off" in p for p in contents.integrity)


def test_a_journal_signed_elsewhere_cannot_be_verified_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_cases([make_toy_case("alpha")], NopSubject(), out=tmp_path / "out", progress=False).run_dir
    monkeypatch.setenv("IMAGEBENCH_STATE", str(tmp_path / "another-state"))
    contents = read_run(run)
    assert not contents.forged and not contents.verified
    assert any("cannot be verified here" in p for p in contents.integrity)
    assert cli.main(["report", str(run), "--quiet"]) == 1  # the page says so, and so does the exit code
    assert 'data-forged="no"' in (run / "report.html").read_text()
    with pytest.raises(ResumeError, match="cannot be verified"):
        resume_run(run, cases=[make_toy_case("alpha")], progress=False)


def test_the_journal_key_lives_in_the_state_folder_and_is_hidden(tmp_path: Path) -> None:
    from imagebench.sandbox.policy import harness_paths
    from imagebench.state import state_root

    run_cases([make_toy_case("alpha")], NopSubject(), out=tmp_path, progress=False)
    key = state_root() / "journal.key"
    assert key.is_file() and oct(key.stat().st_mode & 0o777) == "0o600"
    assert str(state_root().resolve()) in harness_paths()
    assert not any(p.name == "journal.key" for p in tmp_path.rglob("*"))
    key_text = key.read_text().strip()
    assert all(key_text not in p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())


def test_fixture_digests_name_what_a_sample_saw() -> None:
    from imagebench.runs.runner import fixture_identity

    case = make_toy_case("alpha")
    one = fixture_identity(case, case.build())
    assert one == fixture_identity(case, case.build())
    other = make_toy_case("alpha", seed=5)
    assert fixture_identity(other, other.build()) != one
    assert np.asarray(case.build().data["image"]).shape == (24, 24)


# --------------------------------------------------------------------------- what a red-team pass tried


def test_run_json_copied_from_another_run_is_named(tmp_path: Path) -> None:
    """Conditions, suite and sealing live in run.json: its start line signs them."""
    run = run_cases([make_toy_case("alpha")], NopSubject(), out=tmp_path, progress=False).run_dir
    raw = json.loads((run / "run.json").read_text())
    raw["extra"]["execution"]["sandbox"] = "bubblewrap"
    raw["sandbox"] = "bubblewrap"
    (run / "run.json").write_text(json.dumps(raw))
    contents = read_run(run)
    assert contents.forged
    assert any("run.json's extra.execution, sandbox changed after the run's start line signed them" in p for p in contents.integrity)


def test_cases_cut_from_run_json_are_named(tmp_path: Path) -> None:
    run = run_cases([make_toy_case("alpha"), make_toy_case("beta", seed=1)], NopSubject(), out=tmp_path, progress=False, samples=2).run_dir
    raw = json.loads((run / "run.json").read_text())
    raw.update(cases=["toy/alpha"], samples=1)
    (run / "run.json").write_text(json.dumps(raw))
    contents = read_run(run)
    assert contents.forged and any("run.json does not expect (toy/alpha#1, toy/beta#0" in p for p in contents.integrity)


def test_a_journal_cut_and_anchored_again_by_hand_is_named(tmp_path: Path) -> None:
    run = run_cases([make_toy_case("alpha")], NopSubject(), out=tmp_path, progress=False, samples=3).run_dir
    journal = run / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)[:3]
    journal.write_bytes(b"".join(lines))
    receipt = json.loads((run / "receipt.json").read_text())
    receipt["journal"].update(lines=3, mac=json.loads(lines[-1])["mac"])  # without the key: its sig no longer holds
    (run / "receipt.json").write_text(json.dumps(receipt))
    contents = read_run(run)
    assert contents.forged
    assert any("this state folder anchors" in p for p in contents.integrity)
    assert any("not signed by the journal key" in p for p in contents.integrity)


def test_a_journaled_failure_damaged_is_named_not_dropped(tmp_path: Path) -> None:
    run = run_cases([make_toy_case("alpha")], NopSubject(), out=tmp_path, progress=False, samples=2).run_dir
    (run / "nop" / "toy" / "alpha" / "sample-1" / "summary.json").write_text("{}")
    contents = read_run(run)
    assert contents.forged and any("vouches for a no-result summary" in p for p in contents.integrity)
    assert cli.main(["report", str(run), "--quiet"]) == 1


def test_a_journal_stripped_of_its_signatures_is_named_where_it_was_written(tmp_path: Path) -> None:
    run = run_cases([make_toy_case("alpha")], NopSubject(), out=tmp_path, progress=False).run_dir
    journal = run / "journal.jsonl"
    stripped = []
    for line in journal.read_text().splitlines():
        entry = json.loads(line)
        entry.pop("mac"), entry.pop("key")
        stripped.append(json.dumps(entry))
    journal.write_text("\n".join(stripped) + "\n")
    (run / "receipt.json").unlink()
    contents = read_run(run)
    assert contents.forged and any("signatures were stripped" in p for p in contents.integrity)


def test_the_closure_follows_what_a_verifier_reaches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables, defaults, caches and submodules: a changed value in any moves the closure."""
    package = tmp_path / "rtverify"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from rtverify import sub\n")
    (package / "sub" / "__init__.py").write_text("def scale():\n    return SCALE\n\nSCALE = 1.0\n")
    (package / "v.py").write_text(
        "import functools\n"
        "import rtverify\n"
        "from helpers import toy_verify\n"
        "LIMITS = {0: 0.05}\n"
        "def _err(x, scale=LIMITS[0]):\n    return x * scale\n"
        "@functools.lru_cache\n"
        "def cached():\n    return 2.0\n"
        "TABLE = {'a': _err}\n"
        "def verify(fixture, attempt):\n"
        "    TABLE['a'](cached()) + rtverify.sub.scale()\n"
        "    return toy_verify(fixture, attempt)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    import rtverify.v

    before = code_closure([rtverify.v.verify])
    assert {"rtverify.v", "rtverify.sub"} <= set(before["modules"])
    assert "rtverify.v:cached" in before["code"] and "rtverify.v:_err" in before["code"]
    (package / "sub" / "__init__.py").write_text("def scale():\n    return SCALE\n\nSCALE = 0.1\n")
    import rtverify.sub

    importlib.reload(rtverify.sub)
    from imagebench.runs import closure

    closure._MODULES.clear()  # a new process reads the changed file; this one is told to
    assert code_closure([rtverify.v.verify])["modules"]["rtverify.sub"] != before["modules"]["rtverify.sub"]


def test_the_tool_environment_is_an_execution_condition(tmp_path: Path) -> None:
    from imagebench.subjects import execution_of

    envs = []
    for name, version in (("env-a", "3.11.7"), ("env-b", "3.12.1")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyvenv.cfg").write_text(f"version = {version}\n")
        envs.append(execution_of(CommandSubject("true", sandbox=SandboxPolicy(env_prefix=tmp_path / name)))["tool_env"])
    assert envs[0] != envs[1] and envs[0].startswith("env-a (")
    assert execution_of(CommandSubject("true"))["tool_env"] is None


def test_an_extra_key_added_to_run_json_later_is_named(tmp_path: Path) -> None:
    """A plain run given a suite run's conditions after the fact (a second red-team pass)."""
    suite = suite_run(tmp_path / "a", [make_toy_case("alpha")], ReferenceSubject())
    plain = run_cases([make_toy_case("alpha")], ReferenceSubject(), out=tmp_path / "p", progress=False).run_dir
    raw = json.loads((plain / "run.json").read_text())
    raw["extra"]["suite"] = json.loads((suite / "run.json").read_text())["extra"]["suite"]
    (plain / "run.json").write_text(json.dumps(raw))
    assert any("extra.suite changed after the run's start line" in p for p in read_run(plain).integrity)
    assert not compare_runs(suite, plain).comparable


def test_a_case_summary_s_means_and_limits_are_held_to_its_samples(tmp_path: Path) -> None:
    run = run_cases([make_toy_case("alpha")], NopSubject(), out=tmp_path, progress=False).run_dir
    path = run / "nop" / "toy" / "alpha" / "summary.json"
    honest = path.read_text()
    raw = json.loads(honest)
    raw["metric_means"] = {k: 0.0 for k in raw["metric_means"]}
    path.write_text(json.dumps(raw))
    resign_run(run)  # signed again by a holder of the key: held to its samples all the same
    assert read_run(run).forged
    raw = json.loads(honest)
    raw["extra"]["limits"] = {k: 1.0 for k in raw["extra"]["limits"]}
    path.write_text(json.dumps(raw))
    resign_run(run)
    assert any("limit of 1.0" in p for p in read_run(run).integrity)
