"""Curated cases on real acquisitions (imagebench.cases.acquisitions): each reads its tree, the reference
passes, the naive baseline, nop and plausible-but-wrong answers fail, truth stays out of the session, and
the authoring script reproduces the packaged files byte for byte."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import truth_leaks

import imagebench.cases.acquisitions as aq
from imagebench.case.session import Session, collect_attempt, open_session
from imagebench.cases import all_cases, drift, flatfield, skills
from imagebench.cases import landmarks as lm
from imagebench.fixtures.fixture import Attempt, Fixture, Outcome

CASES = {c.label: c for c in aq.CASES}
REPO = Path(__file__).resolve().parent.parent


@cache
def fixture_of(label: str) -> Fixture:
    return CASES[label].build()


def solve(label: str, solver: Callable[[Session], None]) -> Outcome:
    case = CASES[label]
    fixture = fixture_of(label)
    session = open_session(case, fixture)
    solver(session)
    return case.verify(fixture, collect_attempt(case, "test", session.lookup))


def values(outcome: Outcome) -> dict[str, Any]:
    return {m.name: m.value for m in outcome.metrics}


def test_registered_curated_and_available() -> None:
    labels = {c.label for c in all_cases()}
    assert set(CASES) == {
        "drift-correction/cell-qpi",
        "drift-correction/cell-qpi-low-snr",
        "align-channels-from-landmarks/ihc-stains",
        "flatfield/ihc-tiles",
        "fibre-angle/brick-courses",
    }
    assert set(CASES) <= labels
    for case in CASES.values():
        assert case.kind == "curated" and case.namespace in skills()
        assert case.available() == (True, "")
        assert case.baseline is not None and case.baseline_about
        f = fixture_of(case.label)
        assert "scikit-image" in f.provenance and "sha256" in f.provenance and "Transformation" in f.provenance
        assert f.citation and "scikit-image" in f.citation


@pytest.mark.parametrize("label", sorted(CASES))
def test_reference_passes_and_baseline_and_nop_fail(label: str) -> None:
    case = CASES[label]
    ref = solve(label, case.reference)
    assert ref.passed, values(ref)
    base = solve(label, case.baseline)
    assert base.status == "wrong-answer", values(base)
    assert solve(label, lambda session: None).status == "no-result"


def _windowed_xc(session: Session) -> None:
    drift.reference_drift(session)


def _affine_only(session: Session) -> None:
    coef = lm.fit_affine(session.namespace["landmarks_moving"], session.namespace["landmarks_fixed"])
    p = np.asarray(session.namespace["probes_moving"])
    session.namespace["probes_fixed"] = np.hstack([p, np.ones((len(p), 1))]) @ coef


def _dark_only(session: Session) -> None:
    fields = np.asarray(session.namespace["fields"], dtype=np.float64)
    session.namespace["corrected"] = (fields - np.asarray(session.namespace["dark"])).astype(np.float32)


def _flat_without_dark(session: Session) -> None:
    fields = np.asarray(session.namespace["fields"], dtype=np.float64)
    flat = flatfield.smooth_surface(np.median(fields, axis=0))
    session.namespace["corrected"] = (fields / (flat / flat.mean())).astype(np.float32)


def _negated_truth(label: str) -> Callable[[Session], None]:
    def solver(session: Session) -> None:
        truth = np.asarray(fixture_of(label).truth["trajectory"])
        session.namespace["shifts"] = -truth
        session.namespace["corrected"] = np.asarray(session.namespace["movie"], dtype=np.float32)

    return solver


def _angle(value: float) -> Callable[[Session], None]:
    def solver(session: Session) -> None:
        session.namespace["answer"] = {"angle_deg": value}

    return solver


WRONG = [
    # the skill's golden synthetic reference: its Hann window pulls the estimate towards zero on one large object
    ("drift-correction/cell-qpi", "windowed cross-correlation", _windowed_xc),
    ("drift-correction/cell-qpi", "negated shifts", _negated_truth("drift-correction/cell-qpi")),
    ("drift-correction/cell-qpi-low-snr", "negated shifts", _negated_truth("drift-correction/cell-qpi-low-snr")),
    ("align-channels-from-landmarks/ihc-stains", "affine only", _affine_only),
    ("flatfield/ihc-tiles", "dark frame only", _dark_only),
    ("flatfield/ihc-tiles", "flatfield without the dark frame", _flat_without_dark),
    ("fibre-angle/brick-courses", "perpendicular (the head joints)", _angle(127.0)),
    ("fibre-angle/brick-courses", "3 degrees off", _angle(34.0)),
]


@pytest.mark.parametrize("label, name, solver", WRONG, ids=[f"{w[0]}:{w[1]}" for w in WRONG])
def test_plausible_but_wrong_answers_fail(label: str, name: str, solver: Callable[[Session], None]) -> None:
    out = solve(label, solver)
    assert out.status == "wrong-answer", (name, values(out))


@pytest.mark.parametrize("label", sorted(CASES))
def test_truth_stays_out_of_the_session(label: str) -> None:
    case = CASES[label]
    f = fixture_of(label)
    session = open_session(case, f)
    truth = {k: np.asarray(v) for k, v in f.truth.items()}
    for value in session.namespace.values():
        if isinstance(value, np.ndarray):
            assert truth_leaks(truth, array=value) == []
            assert truth_leaks({k: v for k, v in truth.items() if v.nbytes >= 16}, blob=value.tobytes()) == []


def test_fibre_truth_is_read_from_the_tree_as_a_plain_number() -> None:
    assert isinstance(fixture_of("fibre-angle/brick-courses").truth["angle_deg"], float)
    case = CASES["fibre-angle/brick-courses"]
    out = case.verify(fixture_of(case.label), Attempt("t", arrays={"answer": {"angle_deg": 37.4}}))
    assert out.passed and "angle" in out.artifacts


def _load_author() -> Any:
    spec = importlib.util.spec_from_file_location("author_acquisitions", REPO / "tools" / "author_acquisitions.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_the_authoring_script_reproduces_the_packaged_files(tmp_path: Path) -> None:
    author = _load_author()
    assert set(author.CASES) == {tuple(label.split("/")) for label in CASES}
    assert author.main(["--out", str(tmp_path)]) == 0
    packaged = json.loads((aq.FIXTURE_ROOT / "manifest.json").read_text())
    written = json.loads((tmp_path / "manifest.json").read_text())
    entries = {(e["skill"], e["case_id"]): e for e in packaged["fixtures"]}
    for entry in written["fixtures"]:
        assert entry == entries[(entry["skill"], entry["case_id"])]
        for name, spec in entry["files"].items():
            data = (tmp_path / entry["skill"] / entry["case_id"] / name).read_bytes()
            assert hashlib.sha256(data).hexdigest() == spec["sha256"]
