"""Declared cases: a bench-case.json over a fixture tree made a real Case, run by the executor,
its load-time checks naming file and field, and a tree scanned without one bad case hiding others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from user_code import declaration, forget_package, write_tree, write_user_package

from imagebench.case.declared import DeclarationError
from imagebench.cases.declared import TARGETS_META, declared_case, tree_cases
from imagebench.cases.verifiers import NamedVerifier
from imagebench.executor import run_cases
from imagebench.fixtures.tree import verify_tree
from imagebench.runs.fingerprint import case_fingerprint
from imagebench.subjects import BaselineSubject, NopSubject, ReferenceSubject


@pytest.fixture
def user_pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's package ``mybench``, this test's own copy."""
    code = tmp_path / "code"
    write_user_package(code)
    monkeypatch.syspath_prepend(str(code))
    forget_package("mybench")
    yield code
    forget_package("mybench")


def test_a_declared_case_runs_with_its_reference_and_fails_with_nop(tmp_path: Path, user_pkg: Path) -> None:
    root = tmp_path / "tree"
    path = write_tree(root)
    case = declared_case(path, root)
    assert case.label == "my-skill/squares" and case.kind == "curated"
    assert isinstance(case.verify, NamedVerifier) and case.tolerances["f1_shortfall"] == 0.05
    assert case.layers[0].key == "raw" and case.collect[0].like == "image"
    assert set(case.meta[TARGETS_META]) == {"reference", "baseline"}
    assert case.available() == (True, "")
    assert case_fingerprint(case).startswith("sha256:")
    ok = run_cases([case], ReferenceSubject(), out=tmp_path / "ref", progress=False)
    assert ok.verdicts == {case.label: "pass"}
    assert [s.status for s in ok.samples[case.label]] == ["ok"]
    nop = run_cases([case], NopSubject(), out=tmp_path / "nop", progress=False)
    assert nop.verdicts == {case.label: "fail"} and nop.samples[case.label][0].status == "no-result"
    base = run_cases([case], BaselineSubject(), out=tmp_path / "base", progress=False)
    assert base.samples[case.label][0].status == "wrong-answer"
    # the declaration lies beside the layout, and the tree still verifies clean
    assert verify_tree(root) == []


def test_a_declared_case_with_a_user_verifier(tmp_path: Path, user_pkg: Path) -> None:
    root = tmp_path / "tree"
    body = declaration(
        verifier={"name": "mybench.score:verify", "params": {"truth": "nuclei"}}, tolerance={"mismatch": 0.01}
    )
    case = declared_case(write_tree(root, body), root)
    assert case.meta[TARGETS_META]["verifier"]["target"] == "mybench.score:verify"
    assert run_cases([case], ReferenceSubject(), out=tmp_path / "ref", progress=False).verdicts == {case.label: "pass"}
    nop = run_cases([case], NopSubject(), out=tmp_path / "nop", progress=False)
    assert nop.samples[case.label][0].status == "no-result"


def test_a_user_verifier_that_skips_a_leaving_still_fails_a_subject_that_left_nothing(
    tmp_path: Path, user_pkg: Path
) -> None:
    """The user's verifier reads only `labels`; the case also asks for `count`: leaving it out fails."""
    root = tmp_path / "tree"
    body = declaration(
        prompt="Segment every square in `image`; leave `labels` and `count`, the number of squares.",
        leave=[{"name": "labels", "layer": "labels", "like": "image"}, {"name": "count", "what": "scalar"}],
        verifier={"name": "mybench.score:verify"},
        tolerance={"mismatch": 0.01},
    )
    case = declared_case(write_tree(root, body), root)
    result = run_cases([case], ReferenceSubject(), out=tmp_path / "ref", progress=False)
    sample = result.samples[case.label][0]
    assert sample.status == "no-result" and result.verdicts == {case.label: "fail"}
    assert any(m.name == "left:count" for m in sample.metrics)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"layers": [{"name": "image", "key": "nuclei"}]}, "layers.0.key"),  # a truth key shown as a layer
        ({"layers": [{"name": "image", "key": "rawr"}]}, "layers.0.key"),
        ({"verifier": {"name": "label-image", "params": {"data": "raw", "truth": "raw"}}}, "verifier.params.truth"),
        ({"verifier": {"name": "label-image", "params": {"data": "raw"}}}, "verifier.params.truth"),  # default 'labels'
        (
            {"verifier": {"name": "label-image", "params": {"data": "raw", "truth": "nuclei", "leaving": "mask"}}},
            "verifier.params.leaving",
        ),
        ({"verifier": {"name": "segmenter"}}, "verifier.name"),
        ({"verifier": {"name": "label-image", "params": {"radius": 2}}}, "verifier.params"),
        ({"tolerance": {"f1_shortfall": 0.1}}, "tolerance"),  # limits missing
        ({"tolerance": {**declaration()["tolerance"], "f1": 0.1}}, "tolerance.f1"),
        ({"reference": "nowhere_at_all.solve:reference"}, "reference"),
        ({"baseline": "mybench.solve:nothing"}, "baseline"),
        ({"verifier": {"name": "mybench.score:THRESHOLD"}}, "verifier.name"),
        (
            {
                "prompt": "Segment `image`; leave `labels` and `extra`.",
                "leave": [{"name": "labels"}, {"name": "extra"}],
            },
            "leave",
        ),
    ],
)
def test_a_bad_declaration_is_named_by_file_and_field(tmp_path: Path, user_pkg: Path, change: dict, field: str) -> None:
    root = tmp_path / "tree"
    path = write_tree(root, declaration(**change))
    with pytest.raises(DeclarationError) as caught:
        declared_case(path, root)
    message = str(caught.value)
    assert str(path) in message and repr(field) in message, message


def test_a_module_not_on_the_path_says_where_to_put_it(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    path = write_tree(root, declaration(pkg="not_installed_pkg"))
    with pytest.raises(DeclarationError, match="PYTHONPATH"):
        declared_case(path, root)


def test_arrays_scored_on_one_grid_must_agree_in_the_manifest(tmp_path: Path, user_pkg: Path) -> None:
    import numpy as np

    from imagebench.fixtures.tree import write_manifest_entry

    root = tmp_path / "tree"
    path = write_tree(root)
    np.save(path.parent / "raw.npy", np.zeros((40, 48), np.float32))
    write_manifest_entry(root, "my-skill", "squares", provenance="p", citation="c", files=["raw.npy", "nuclei.npy"])
    with pytest.raises(DeclarationError, match="one grid"):
        declared_case(path, root)


def test_tree_cases_gathers_every_declaration_and_names_each_bad_one(tmp_path: Path, user_pkg: Path) -> None:
    root = tmp_path / "tree"
    write_tree(root)
    bad = write_tree(root, declaration(verifier={"name": "nope"}), case_id="broken")
    write_tree(root, case_id="second")
    (root / "my-skill" / "third").mkdir()
    (root / "my-skill" / "third" / "bench-case.json").write_text("{")
    cases, problems = tree_cases(root)
    assert [c.label for c in cases] == ["my-skill/second", "my-skill/squares"]
    assert len(problems) == 2
    assert str(bad) in problems[0] and "not a built-in verifier" in problems[0]
    assert "third" in problems[1] and "not valid JSON" in problems[1]
    assert tree_cases(tmp_path / "missing") == (
        [],
        [f"{tmp_path / 'missing'}: not a folder; a fixture tree root holds <namespace>/<case_id>/bench-case.json"],
    )


def test_a_declared_case_never_shows_the_truth_or_the_code(tmp_path: Path, user_pkg: Path) -> None:
    from imagebench.runs.fingerprint import agent_visible

    root = tmp_path / "tree"
    case = declared_case(write_tree(root), root)
    seen = json.dumps(agent_visible(case))
    assert "nuclei" not in seen and "mybench" not in seen and "raw" in seen
