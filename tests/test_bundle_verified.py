"""A bundle case scored by a verifier (a built-in one by name, or the user's pkg.mod:func) instead of
an answer contract, its pixels from the user's own builder, and the errors naming file and field."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_bundle_run import EXAMPLE, edit_case
from user_code import LABEL_TOLERANCE, forget_package, write_user_package

from imagebench.bundle import load_bundle
from imagebench.cases.targets import TargetCall
from imagebench.cases.verifiers import NamedVerifier
from imagebench.executor import run_cases
from imagebench.fixtures.specs import Procedural
from imagebench.subjects import BaselineSubject, NopSubject, ReferenceSubject

CASE = "golden-count"
PROMPT = "Segment every square in `image`; leave `labels`, an integer label image, one label per square.\n"


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    code = tmp_path / "code"
    write_user_package(code)
    monkeypatch.syspath_prepend(str(code))
    forget_package("mybench")
    dest = tmp_path / "segment-nuclei"
    shutil.copytree(EXAMPLE, dest)
    (dest / "evals" / "fixtures" / CASE / "prompt.md").write_text(PROMPT)
    yield dest
    forget_package("mybench")


def _verified(bundle: Path, **change: Any) -> None:
    body: dict[str, Any] = {
        "pixels": {"builder": "mybench.build:build", "seed": 5, "params": {"size": 48}},
        "layers": [{"name": "image", "key": "raw"}],
        "answer": None,
        "verifier": {"name": "label-image", "params": {"data": "raw", "truth": "nuclei", "leaving": "labels"}},
        "leave": [{"name": "labels", "layer": "labels", "like": "image"}],
        "tolerance": dict(LABEL_TOLERANCE),
        "reference": "mybench.solve:reference",
        "baseline": "mybench.solve:baseline",
    }
    body.update(change)
    edit_case(bundle, CASE, **body)


def _case(bundle: Path) -> Any:
    loaded = load_bundle(bundle)
    found = [c for c in loaded.cases if c.case_id == CASE]
    assert found, dict(loaded.skipped).get(CASE)
    return found[0]


def test_a_verified_bundle_case_with_a_user_builder_runs_like_a_built_in_one(bundle: Path, tmp_path: Path) -> None:
    _verified(bundle)
    case = _case(bundle)
    assert isinstance(case.verify, NamedVerifier) and case.answer is None
    assert isinstance(case.fixture, Procedural) and isinstance(case.fixture.builder, TargetCall)
    assert [c.name for c in case.collect] == ["labels"] and set(case.meta["targets"]) == {"reference", "baseline"}
    ok = run_cases([case], ReferenceSubject(), out=tmp_path / "ref", progress=False)
    assert ok.verdicts == {case.label: "pass"}
    nop = run_cases([case], NopSubject(), out=tmp_path / "nop", progress=False)
    assert nop.samples[case.label][0].status == "no-result"
    base = run_cases([case], BaselineSubject(), out=tmp_path / "base", progress=False)
    assert base.samples[case.label][0].status == "wrong-answer"


def test_a_bundle_case_with_the_users_verifier(bundle: Path, tmp_path: Path) -> None:
    _verified(bundle, verifier={"name": "mybench.score:verify"}, tolerance={"mismatch": 0.01})
    case = _case(bundle)
    assert case.meta["targets"]["verifier"]["target"] == "mybench.score:verify"
    assert run_cases([case], ReferenceSubject(), out=tmp_path / "ref", progress=False).verdicts == {case.label: "pass"}
    assert run_cases([case], NopSubject(), out=tmp_path / "nop", progress=False).verdicts == {case.label: "fail"}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"answer": {"task_id": "x"}}, "fields 'answer' and 'verifier'"),
        ({"class": "refusal"}, "field 'verifier': a refusal case is graded by its class"),
        ({"leave": []}, "field 'leave'"),
        ({"tolerance": {"f1_shortfall": 0.1}}, "field 'tolerance': no limit for metric"),
        ({"verifier": {"name": "segmenter"}}, "field 'verifier.name'"),
        ({"verifier": {"name": "mybench.score:nothing"}}, "has no attribute 'nothing'"),
        ({"reference": "absent_pkg_qq.solve:reference"}, "field 'reference'"),
        ({"pixels": {"builder": "absent_pkg_qq.build:build", "seed": 1}}, "field 'pixels.builder'"),
        ({"pixels": {"builder": "no-such-builder", "seed": 1}}, "which is not a built-in builder"),
    ],
)
def test_a_bad_verified_case_is_skipped_naming_its_field(bundle: Path, change: dict, expected: str) -> None:
    _verified(bundle, **change)
    skipped = dict(load_bundle(bundle).skipped)
    assert expected in skipped[CASE], skipped[CASE]
    assert "case.json" in skipped[CASE]
    if "absent_pkg_qq" in str(change):
        assert "PYTHONPATH" in skipped[CASE]
