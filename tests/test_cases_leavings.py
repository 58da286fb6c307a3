"""Every leaving a built-in case asks for is required: the reference's answer with any of them
held back (or replaced by junk) never passes, however good the rest is."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pytest
from helpers import build_case

from imagebench.case.model import Case
from imagebench.case.session import collect_attempt, open_session
from imagebench.cases import all_cases
from imagebench.fixtures.fixture import Attempt, Fixture
from imagebench.fixtures.specs import Procedural
from imagebench.records import SampleSummary, read_record
from imagebench.runs.artifacts import write_report


def _several() -> list[Case]:
    return [
        c
        for c in all_cases()
        if len(c.collect) > 1
        and (isinstance(c.fixture, Procedural) or c.available()[0])
        and c.reference is not None
        and all(layer.presentation == "array" for layer in c.layers)
    ]


SEVERAL = {c.label: c for c in _several()}


def test_the_cases_that_ask_for_several_leavings_are_all_covered() -> None:
    every = {c.label for c in all_cases() if len(c.collect) > 1}
    assert every == set(SEVERAL)  # none skipped for being curated, tensor-presented or reference-less
    assert {
        "drift-correction/beads-subpixel",
        "drift-correction/low-snr-distractor",
        "segmentation-qc-metrics/annotation-vs-model",
    } <= every


_REFERENCE: dict[str, tuple[Fixture, dict[str, Any]]] = {}


def _reference(case: Case) -> tuple[Fixture, dict[str, Any]]:
    if case.label not in _REFERENCE:
        fixture = build_case(case) if isinstance(case.fixture, Procedural) else case.build()
        session = open_session(case, fixture)
        case.reference(session)
        attempt = collect_attempt(case, "reference", session.lookup)
        _REFERENCE[case.label] = (fixture, dict(attempt.arrays))
    return _REFERENCE[case.label]


def _subsets(case: Case) -> list[tuple[str, tuple[str, ...]]]:
    names = [c.name for c in case.collect]
    return [
        (case.label, kept) for k in range(1, len(names)) for kept in combinations(names, k)
    ]


@pytest.mark.parametrize("label", sorted(SEVERAL))
def test_the_reference_leaving_everything_passes(label: str) -> None:
    case = SEVERAL[label]
    fixture, left = _reference(case)
    outcome = case.verify(fixture, Attempt("reference", dict(left)))
    assert outcome.passed and outcome.status == "ok"


@pytest.mark.parametrize(("label", "kept"), [p for c in SEVERAL.values() for p in _subsets(c)])
def test_leaving_only_some_of_what_the_case_asks_for_never_passes(label: str, kept: tuple[str, ...], tmp_path) -> None:
    case = SEVERAL[label]
    fixture, left = _reference(case)
    held_back = [c.name for c in case.collect if c.name not in kept]
    attempt = Attempt("partial", {n: left[n] for n in kept}, notes={"why_not": {}})
    outcome = case.verify(fixture, attempt)
    # what it did leave is as good as the reference's; a lineage table (a `tracks` leaving) without
    # its label movie names no object, so nothing of it alone can be scored
    if not all(c.layer == "tracks" for c in case.collect if c.name in kept):
        assert any(m.passed for m in outcome.metrics)
    assert not outcome.passed and outcome.status == "no-result"
    missing = [m for m in outcome.metrics if m.value is None]
    assert missing and {m.unavailable_because for m in missing} == {"absent"}
    assert all(any(repr(n) in (m.unavailable or "") for n in held_back) for m in missing)
    summary = read_record(write_report(outcome, tmp_path), SampleSummary)
    assert summary.status == "no-result" and not summary.passed
    assert {m.unavailable_because for m in summary.metrics if m.value is None} == {"absent"}


@pytest.mark.parametrize("label", sorted(SEVERAL))
def test_junk_in_place_of_one_leaving_is_unscorable_never_ok(label: str) -> None:
    case = SEVERAL[label]
    fixture, left = _reference(case)
    for c in case.collect:
        arrays = dict(left)
        arrays[c.name] = np.array(["not", "numbers"])
        outcome = case.verify(fixture, Attempt("junk", arrays))
        assert not outcome.passed and outcome.status == "unscorable-result", c.name
        assert {m.unavailable_because for m in outcome.metrics if m.value is None} == {"unusable"}


@pytest.mark.parametrize("label", sorted(c.label for c in all_cases()))
def test_every_case_gives_a_number_and_an_artifact_even_for_nothing(label: str) -> None:
    from imagebench.cases import get_case

    case = get_case(label)
    ok, why = case.fixture.available(case.namespace, case.case_id)
    if not ok:
        pytest.skip(why)
    fixture = case.fixture.build(case.namespace, case.case_id)
    outcome = case.verify(fixture, Attempt("nop", {}, notes={"why_not": {}}))
    assert outcome.metrics and outcome.status == "no-result"
    assert all(m.unavailable_because == "absent" for m in outcome.metrics)
    assert outcome.artifacts and all(np.asarray(a).size for a in outcome.artifacts.values())
