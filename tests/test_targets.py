"""User code named pkg.mod:func: imported by the harness, pinned by digest, so a change to it
changes the case's fingerprint, the scoring closure (compare's C3 refuses the pair) and the
fixture cache's key."""

from __future__ import annotations

import os
import pickle
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from user_code import SCORE, declaration, write_tree, write_user_package

from imagebench.cases.declared import declared_case
from imagebench.cases.targets import TargetCall, TargetError, call_of, resolve_target
from imagebench.fixtures.specs import Procedural
from imagebench.runs.closure import scoring_digest
from imagebench.runs.fingerprint import case_fingerprint, definition_fingerprint
from imagebench.runs.runner import prepare_fixture
from imagebench.subjects import ReferenceSubject
from imagebench.suite.compare import compare_runs


def _forget(name: str) -> None:
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


@pytest.fixture
def code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's package ``userpkg``, this test's own copy (none imported from an earlier test)."""
    folder = tmp_path / "code"
    write_user_package(folder, "userpkg")
    monkeypatch.syspath_prepend(str(folder))
    _forget("userpkg")
    yield folder
    _forget("userpkg")


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    # a later mtime and another size: the import system never serves the old bytecode
    later = time.time() + 5
    os.utime(path, (later, later))


def test_a_target_records_its_module_its_files_and_one_digest(code: Path) -> None:
    target = resolve_target("userpkg.score:verify")
    assert (target.module, target.attribute) == ("userpkg.score", "verify")
    assert list(target.files) == ["userpkg.score"] and target.digest.startswith("sha256:")
    assert "userpkg.score:verify" in target.closure["code"]
    assert target.identity()["files"] == dict(target.files)
    assert str(code) not in repr(target.identity())  # no path
    # a package re-exporting a callable defined in another of its files pins both files
    package = resolve_target("userpkg:reference")
    assert set(package.files) == {"userpkg", "userpkg.solve"}


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("userpkg.score", "expected pkg.mod:func"),
        ("no_such_pkg_anywhere.mod:func", "PYTHONPATH"),
        ("userpkg.nothing:func", "PYTHONPATH"),
        ("userpkg.score:missing", "has no attribute 'missing'"),
        ("userpkg.score:THRESHOLD", "not callable"),
        ("userpkg.broken:func", "raised ZeroDivisionError"),
        ("userpkg.needs:func", "imports 'absent_dependency_xyz', which is not installed"),
    ],
)
def test_a_bad_target_says_what_is_wrong(code: Path, spec: str, match: str) -> None:
    (code / "userpkg" / "broken.py").write_text("1 / 0\n")
    (code / "userpkg" / "needs.py").write_text("import absent_dependency_xyz\n")
    with pytest.raises(TargetError, match=match) as caught:
        resolve_target(spec)
    assert spec in str(caught.value)


def test_an_edited_module_is_imported_again_and_its_digest_moves(code: Path) -> None:
    first = resolve_target("userpkg.score:verify")
    _edit(code / "userpkg" / "score.py", "THRESHOLD = 0.5", "THRESHOLD = 0.25  # tuned")
    second = resolve_target("userpkg.score:verify")
    assert second.digest != first.digest and second.files != first.files
    import userpkg.score

    assert userpkg.score.THRESHOLD == 0.25  # the code that runs is the code pinned


def test_a_target_call_travels_by_name_and_refuses_other_code(code: Path) -> None:
    call = call_of("userpkg.solve:baseline")
    again = pickle.loads(pickle.dumps(call))
    assert isinstance(again, TargetCall) and again == call and repr(again) == "userpkg.solve:baseline"
    blob = pickle.dumps(call)
    _edit(code / "userpkg" / "solve.py", "np.ones(image.shape, np.int32)", "np.ones(image.shape, np.int32) * 2")
    with pytest.raises(TargetError, match="differs from the code the case was made with"):
        pickle.loads(blob)


def test_changing_the_user_verifier_changes_fingerprint_closure_and_comparability(tmp_path: Path, code: Path) -> None:
    from suite_runs import pin, suite_run

    root = tmp_path / "tree"
    body = declaration(pkg="userpkg", verifier={"name": "userpkg.score:verify"}, tolerance={"mismatch": 0.01})
    path = write_tree(root, body)
    before = declared_case(path, root)
    suites = tmp_path / "suites"
    suites.mkdir()
    manifest = pin([before], suites)
    run_a = suite_run(tmp_path / "a", manifest, [before], ReferenceSubject(), samples=1)
    run_b = suite_run(tmp_path / "b", manifest, [declared_case(path, root)], ReferenceSubject(), samples=1)
    same = compare_runs(run_a, run_b)
    assert next(c for c in same.conditions if c.id == "C3").holds, same.conditions

    _edit(
        code / "userpkg" / "score.py",
        "float(np.mean((labels > 0) != true))",
        "float(np.mean((labels > 0) != true)) * 1.0",
    )
    after = declared_case(path, root)
    assert case_fingerprint(after) != case_fingerprint(before)
    assert scoring_digest(after) != scoring_digest(before)
    run_c = suite_run(tmp_path / "c", manifest, [after], ReferenceSubject(), samples=1)
    differ = compare_runs(run_a, run_c)
    assert not differ.comparable
    c3 = next(c for c in differ.conditions if c.id == "C3")
    assert any("scoring closure differs" in p for p in c3.problems), c3


def test_changing_a_named_verifiers_keys_changes_the_scoring_closure(tmp_path: Path, code: Path) -> None:
    root = tmp_path / "tree"
    path = write_tree(root, declaration(pkg="userpkg"))
    a = declared_case(path, root)
    body = declaration(pkg="userpkg")
    body["verifier"]["params"]["metrics"] = ["f1_shortfall"]
    body["tolerance"] = {"f1_shortfall": 0.05}
    path.write_text(__import__("json").dumps(body))
    b = declared_case(path, root)
    assert scoring_digest(a) != scoring_digest(b)


def test_a_user_builder_keys_the_fixture_cache_on_its_code(
    tmp_path: Path, code: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers import make_toy_case

    monkeypatch.setenv("IMAGEBENCH_CACHE", str(tmp_path / "cache"))

    def case() -> object:
        spec = Procedural(call_of("userpkg.build:build"), seed=4, params={"size": 40}, tolerance={"mask_error": 0.1})
        return make_toy_case(spec=spec)

    first = case()
    built = prepare_fixture(first).fixture  # type: ignore[arg-type]
    assert built is not None and any((tmp_path / "cache").iterdir())
    again = prepare_fixture(case()).fixture  # type: ignore[arg-type]
    assert np.array_equal(np.asarray(again.data["raw"]), np.asarray(built.data["raw"]))

    _edit(code / "userpkg" / "build.py", "labels > 0).astype(np.float32)", "labels > 0).astype(np.float32) * 3")
    changed = case()
    assert definition_fingerprint(changed) != definition_fingerprint(first)  # type: ignore[arg-type]
    fresh = prepare_fixture(changed).fixture  # type: ignore[arg-type]
    assert not np.array_equal(np.asarray(fresh.data["raw"]), np.asarray(built.data["raw"]))
    assert float(np.asarray(fresh.data["raw"]).max()) > 2.5  # the pixels of the edited builder, not the cached ones


def test_the_score_module_text_is_the_one_the_helper_writes() -> None:
    assert "THRESHOLD = 0.5" in SCORE
