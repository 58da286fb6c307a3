"""The scorer manifest pins the running scorer; the self-test feeds ground truth back (never a result)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_scoring_contract import patch_comparator, run_cli

from imagebench.scoring import comparators as cmp
from imagebench.scoring import manifest as mf
from imagebench.scoring.contract import structured_verifier
from imagebench.scoring.selftest import run_selftest


def test_the_shipped_manifest_pins_this_code() -> None:
    problems = mf.manifest_problems(mf.packaged_manifest_path())
    assert problems == [], (
        f"{problems}: regenerate it with `.venv/bin/python tools/write_scorer_manifest.py` after changing the scorer"
    )
    shipped = mf.read_scorer_manifest(mf.packaged_manifest_path())
    assert shipped.self_hash == mf.self_hash(shipped)
    assert set(shipped.comparators) == set(cmp.COMPARATORS)
    assert shipped.package_version == mf.package_version()


def test_write_and_check(tmp_path: Path) -> None:
    path = tmp_path / "scorer_manifest.json"
    written = mf.write_scorer_manifest(path)
    assert mf.check_scorer_manifest(path) is None
    assert written.source_revision == "unknown" or len(written.source_revision) == 40
    assert mf.require_scorer_manifest(path).registry_hash == written.registry_hash
    assert mf.check_scorer_manifest(written) is None
    assert mf.check_scorer_manifest(written.model_dump()) is None


def test_an_edited_manifest_fails_its_self_hash(tmp_path: Path) -> None:
    data = json.loads(mf.packaged_manifest_path().read_text())
    data["contracts"].append("llm_judge")
    problem = mf.check_scorer_manifest(data)
    assert problem and "self-hash" in problem and "contracts" in problem


def test_a_modified_comparator_cannot_report_as_the_pinned_one(monkeypatch) -> None:
    def lenient_integer_equal(predicted, gold, config=None):
        """Accepts anything."""
        return cmp.FieldResult(True, "matched")

    patch_comparator(monkeypatch, "integer_equal", lenient_integer_equal)
    problem = mf.check_scorer_manifest(mf.packaged_manifest_path())
    assert problem and "integer_equal" in problem
    with pytest.raises(mf.ScorerManifestError, match="registry hash"):
        mf.require_scorer_manifest(mf.packaged_manifest_path())


@pytest.mark.parametrize("module", ["imagebench.scoring.canonical", "imagebench.scoring.comparators.numeric"])
def test_a_changed_helper_changes_the_implementation_hash(monkeypatch, module: str) -> None:
    real = mf.module_source

    def patched(name: str) -> str:
        return real(name) + ("\n# edited\n" if name == module else "")

    mf.clear_caches()
    monkeypatch.setattr(mf, "module_source", patched)
    try:
        problem = mf.check_scorer_manifest(mf.packaged_manifest_path())
        assert problem and "implementation hash" in problem and "registry hash" not in problem
    finally:
        monkeypatch.undo()
        mf.clear_caches()
    assert mf.check_scorer_manifest(mf.packaged_manifest_path()) is None


def test_every_scoring_module_is_hashed_or_said_not_to_be() -> None:
    root = Path(mf.__file__).parent
    found = {
        ".".join(("imagebench", "scoring", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for p in root.rglob("*.py")
    }
    not_behind_a_score = {
        "imagebench.scoring",  # lazy names only
        "imagebench.scoring.aggregates",  # means over summaries, after scoring
        "imagebench.scoring.manifest",  # the pin itself
        "imagebench.scoring.selftest",
    }
    assert found - not_behind_a_score == set(mf.SCORER_MODULES)
    assert len(set(mf.SCORER_MODULES)) == len(mf.SCORER_MODULES)


def test_a_comparator_hash_is_its_definition_not_its_registration() -> None:
    source = mf.definition_source(cmp.integer_equal)
    assert source.startswith("def integer_equal(") and "@comparator" not in source
    assert "@comparator" in mf.inspect.getsource(cmp.integer_equal)  # what is left out is only the decorator
    shipped = mf.read_scorer_manifest(mf.packaged_manifest_path())
    assert shipped.comparators["integer_equal"] == mf.comparator_hash("integer_equal", cmp.integer_equal)


@pytest.mark.parametrize(
    "content, fragment",
    [
        (None, "missing"),
        ("{", "not readable JSON"),
        ("[]", "expected a JSON object"),
        ('{"schema_version": 9}', "schema_version"),
    ],
)
def test_unreadable_manifests(tmp_path: Path, content, fragment: str) -> None:
    path = tmp_path / "m.json"
    if content is not None:
        path.write_text(content)
    problem = mf.check_scorer_manifest(path)
    assert problem and fragment in problem


def test_manifest_missing_field() -> None:
    data = json.loads(mf.packaged_manifest_path().read_text())
    del data["registry_hash"]
    assert "registry_hash" in mf.check_scorer_manifest(data)


def test_cli_manifest_check(capsys, tmp_path: Path) -> None:
    assert run_cli(["scorer", "manifest", "--check", str(mf.packaged_manifest_path())]) == 0
    bad = tmp_path / "bad.json"
    data = json.loads(mf.packaged_manifest_path().read_text())
    data["package_version"] = "9.9.9"
    bad.write_text(json.dumps(data))
    assert run_cli(["scorer", "manifest", "--check", str(bad)]) == 1
    assert "self-hash" in capsys.readouterr().out
    out = tmp_path / "new.json"
    assert run_cli(["scorer", "manifest", "--write", str(out)]) == 0 and mf.check_scorer_manifest(out) is None


def test_selftest_passes_and_says_it_is_not_a_result(capsys) -> None:
    assert run_cli(["scorer", "selftest", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "not a model result" in out and "self-test checks agree" in out


def test_selftest_fails_when_a_comparator_is_broken(capsys, monkeypatch) -> None:
    def never(predicted, gold, config=None):
        return cmp.FieldResult(False, "never matches")

    patch_comparator(monkeypatch, "circular_tolerance", never)
    assert run_cli(["scorer", "selftest", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "circular_tolerance" in out


# --------------------------------------------------------------------------- the self-test as a function


class _Case:
    """Just what the self-test asks of a case."""

    def __init__(self, label: str, answer, *, available=(True, ""), verify=None) -> None:
        from imagebench.fixtures.fixture import Fixture

        self.label, self.answer, self._available = label, answer, available
        self._fixture = Fixture(provenance="test", data={}, truth={"n": 4}, tolerance={"answer_mismatch": 0.0})
        self.verify = verify or structured_verifier(answer)

    def available(self):
        return self._available

    def build(self):
        return self._fixture


COUNT = {
    "answer_schema": {"count": {"comparator": "integer_equal"}},
    "ground_truth": {"count": {"from_truth": "n"}},
    "scorer": {"contract": "deterministic_structured_v2_1"},
    "evaluation_eligible": True,
}


def test_selftest_takes_the_cases_to_test() -> None:
    checks = run_selftest(cases=[_Case("t/count", COUNT), _Case("t/plain", None)])
    assert all(c.ok for c in checks), [c for c in checks if not c.ok]
    assert [c.kind for c in checks][0] == "manifest"
    assert {c.subject for c in checks if c.kind == "comparator"} == set(cmp.REGISTRY)
    case_checks = [c for c in checks if c.subject == "t/count"]
    assert [c.got for c in case_checks] == ["answer_score 1.0", "answer_score 1.0", "answer_score 0.0"]
    assert not [c for c in checks if c.subject == "t/plain"]  # no contract, nothing to feed back


def test_selftest_fails_on_a_case_that_does_not_score_its_own_truth() -> None:
    def wrong(fixture, attempt):
        outcome = structured_verifier(COUNT)(fixture, attempt)
        outcome.detail["answer"]["answer_score"] = 0.0
        return outcome

    ineligible = {**COUNT, "evaluation_eligible": False}
    checks = run_selftest(cases=[_Case("t/wrong", COUNT, verify=wrong), _Case("t/blocked", ineligible)])
    bad = {(c.subject, c.got) for c in checks if not c.ok}
    assert ("t/wrong", "answer_score 0.0") in bad and ("t/blocked", "blocked") in bad
    skipped = run_selftest(cases=[_Case("t/away", COUNT, available=(False, "no data"))])
    assert [c.got for c in skipped if c.subject == "t/away"] == ["skipped"]


def test_selftest_without_structured_cases_or_with_a_broken_suite_fails() -> None:
    assert [c.note for c in run_selftest(cases=[]) if not c.ok] == ["no case carries a task contract"]

    def broken():
        yield _Case("t/count", COUNT)
        raise RuntimeError("suite failed to load")

    failed = [c for c in run_selftest(cases=broken()) if not c.ok]
    assert len(failed) == 1 and failed[0].kind == "cases" and "suite failed to load" in failed[0].note


def test_selftest_reports_progress() -> None:
    seen: list[tuple[int, int]] = []
    run_selftest(cases=[_Case("t/a", COUNT), _Case("t/b", COUNT)], progress=lambda d, n: seen.append((d, n)))
    assert seen == [(1, 2), (2, 2)]


def test_scoring_outside_its_command_line_never_imports_the_case_suite() -> None:
    import subprocess
    import sys

    modules = sorted(set(mf.SCORER_MODULES) | {"imagebench.scoring.manifest", "imagebench.scoring.selftest",
                                               "imagebench.scoring.aggregates"})  # fmt: skip
    code = "\n".join(f"import {m}" for m in modules)
    code += "\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith('imagebench.cases')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- the revision and tree the manifest names


def _scorer_tree_by_hand() -> str:
    import hashlib

    top = Path(mf.__file__).resolve().parent.parent.parent  # the folder holding imagebench/
    entries = []
    for name in mf.SCORER_MODULES:
        path = Path(mf.importlib.util.find_spec(name).origin).resolve()
        entries.append((path.relative_to(top).as_posix(), hashlib.sha256(path.read_bytes()).hexdigest()))
    h = hashlib.sha256()
    for rel, hexdigest in sorted(entries):
        h.update(rel.encode() + b"\0" + hexdigest.encode() + b"\n")
    return h.hexdigest()


def test_the_shipped_manifest_names_the_scorer_files_commit_and_tree() -> None:
    import re
    import shutil
    import subprocess

    shipped = mf.read_scorer_manifest(mf.packaged_manifest_path())
    assert re.fullmatch(r"[0-9a-f]{40}", shipped.source_revision), shipped.source_revision
    assert shipped.tree_hash == mf.scorer_tree_hash() == _scorer_tree_by_hand()
    files = [str(p) for p in mf.scorer_files().values()]
    here = str(Path(mf.__file__).resolve().parent)
    if shutil.which("git") is None:
        pytest.skip("no git: the revision cannot be checked")
    shallow = subprocess.run(["git", "-C", here, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a git checkout with full history: the revision cannot be checked")
    status = subprocess.run(["git", "-C", here, "status", "--porcelain", "--", *files], capture_output=True, text=True)
    if status.stdout.strip():
        pytest.skip("the scorer files hold uncommitted changes: commit them, then run tools/write_scorer_manifest.py")
    last = subprocess.run(["git", "-C", here, "log", "-1", "--format=%H", "--", *files], capture_output=True, text=True)
    assert shipped.source_revision == last.stdout.strip(), (
        "the shipped manifest does not name the last commit that touched the scorer files: run "
        "tools/write_scorer_manifest.py and commit the manifest on its own"
    )


def test_a_manifest_from_before_the_tree_hash_keeps_its_self_hash() -> None:
    data = json.loads(mf.packaged_manifest_path().read_text())
    data.pop("tree_hash", None)
    data.pop("self_hash")
    data["self_hash"] = mf._sha256(mf.canonical_json(data))  # as it was taken before the field existed
    assert mf.check_scorer_manifest(data) is None
    assert mf.read_scorer_manifest(data).tree_hash is None
    data["tree_hash"] = mf.scorer_tree_hash()  # added by hand: the self-hash no longer holds
    assert "self-hash" in (mf.check_scorer_manifest(data) or "")


def _the_tool(monkeypatch, tmp_path: Path, *, revision: str, dirty: bool | None):
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "tools" / "write_scorer_manifest.py"
    spec = importlib.util.spec_from_file_location("write_scorer_manifest", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    out = tmp_path / "scorer_manifest.json"
    monkeypatch.setattr(tool, "packaged_manifest_path", lambda: out)
    monkeypatch.setattr(tool, "scorer_revision", lambda: revision)
    monkeypatch.setattr(tool, "checkout_dirty", lambda paths: dirty)
    return tool, out


def test_the_tool_writes_the_revision_and_tree_and_refuses_uncommitted_scorer_files(monkeypatch, tmp_path, capsys) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    tool, out = _the_tool(monkeypatch, tmp_path, revision=commit, dirty=True)
    assert tool.main([]) == 1 and not out.exists()
    assert "uncommitted changes" in capsys.readouterr().err
    assert tool.main(["--allow-dirty"]) == 0
    assert "run again after committing" in capsys.readouterr().out
    tool, out = _the_tool(monkeypatch, tmp_path, revision=commit, dirty=False)
    assert tool.main([]) == 0
    written = mf.read_scorer_manifest(out)
    assert written.source_revision == commit and written.tree_hash == mf.scorer_tree_hash()
    assert mf.check_scorer_manifest(out) is None
    tool, out = _the_tool(monkeypatch, tmp_path / "none", revision="unknown", dirty=None)
    assert tool.main([]) == 1 and not out.exists()
    assert "no git history" in capsys.readouterr().err
