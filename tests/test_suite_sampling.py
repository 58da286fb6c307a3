"""Seeded sampling (golden ids), cohorts, assignments and their verification."""

from __future__ import annotations

import hashlib
import random

import pytest

from imagebench.records import RunRecord
from imagebench.runs.fingerprint import digest_json, fingerprint_from_parts
from imagebench.suite.model import SuiteManifest, SuiteMember, make_manifest
from imagebench.suite.sampling import (
    AllTasks,
    Assignment,
    AssignmentError,
    FirstTasks,
    SeededSample,
    assign,
    assignment_mismatches,
    benchmark_cohort,
    parse_policy,
    rank,
    verify_assignment,
)

LABELS = [f"ns-{i % 3}/case-{i:02d}" for i in range(12)]

# Computed once (sha256 of "<seed>:<label>", four smallest, manifest order) and pinned here forever.
GOLDEN = {
    0: ["ns-0/case-03", "ns-1/case-04", "ns-2/case-05", "ns-2/case-11"],
    7: ["ns-2/case-02", "ns-2/case-05", "ns-0/case-06", "ns-2/case-08"],
    2026: ["ns-0/case-00", "ns-2/case-02", "ns-2/case-08", "ns-2/case-11"],
    123456789: ["ns-1/case-01", "ns-2/case-02", "ns-0/case-03", "ns-0/case-09"],
}


def fake_suite(labels: list[str] = LABELS, suite_id: str = "core", revision: str = "2026.11.0") -> SuiteManifest:
    members = []
    for label in labels:
        parts = {"prompt": digest_json(label)}
        members.append(
            SuiteMember(label=label, revision=revision, fingerprint=fingerprint_from_parts(label, revision, parts), parts=parts)
        )
    return make_manifest(suite_id, revision, members)


# --------------------------------------------------------------------------- policies


@pytest.mark.parametrize("seed", sorted(GOLDEN))
def test_seeded_sample_golden_ids(seed: int) -> None:
    assert list(SeededSample(4).select(LABELS, seed)) == GOLDEN[seed]
    assert assign(fake_suite(), SeededSample(4), seed).labels == GOLDEN[seed]


def test_seeded_sample_is_sha256_ranked_and_ignores_python_random(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("Python's random must not be used")

    for name in ("random", "shuffle", "sample", "seed", "choice", "randrange"):
        monkeypatch.setattr(random, name, boom)
    chosen = SeededSample(3).select(LABELS, 42)
    by_hash = sorted(LABELS, key=lambda x: hashlib.sha256(f"42:{x}".encode()).hexdigest())[:3]
    assert set(chosen) == set(by_hash)
    assert list(chosen) == [x for x in LABELS if x in by_hash]  # manifest order, not rank order
    assert rank(42, LABELS[0]) == hashlib.sha256(f"42:{LABELS[0]}".encode()).hexdigest()


def test_sampling_returns_manifest_order_and_depends_on_the_seed() -> None:
    assert SeededSample(12).select(LABELS, 5) == tuple(LABELS)
    assert SeededSample(1).select(LABELS, 0) == ("ns-2/case-11",)
    assert FirstTasks(3).select(LABELS, 99) == tuple(LABELS[:3])
    assert AllTasks().select(LABELS, 1) == tuple(LABELS)
    draws = {SeededSample(4).select(LABELS, s) for s in range(20)}
    assert len(draws) > 10  # the seed matters
    reordered = list(reversed(LABELS))
    assert set(SeededSample(4).select(reordered, 7)) == set(GOLDEN[7])  # membership does not depend on order
    assert list(SeededSample(4).select(reordered, 7)) == [x for x in reordered if x in GOLDEN[7]]


def test_policy_parsing_and_bounds() -> None:
    assert parse_policy("all") == AllTasks()
    assert parse_policy("first:3") == FirstTasks(3)
    assert parse_policy(" seeded:20 ") == SeededSample(20)
    for bad in ("", "some", "first", "first:0", "seeded:-1", "seeded:x", "ALL", "first:1:2"):
        with pytest.raises(ValueError, match=r"(all, first:N or seeded:N|N >= 1)"):
            parse_policy(bad)
    with pytest.raises(ValueError, match="N >= 1"):
        SeededSample(0)
    with pytest.raises(ValueError, match="asks for 13 members, the suite has 12"):
        SeededSample(13).select(LABELS, 0)
    with pytest.raises(ValueError, match="asks for 13 members"):
        FirstTasks(13).select(LABELS, 0)


# --------------------------------------------------------------------------- cohorts and assignments


def test_assignment_never_depends_on_the_candidate() -> None:
    suite = fake_suite()
    a = assign(suite, "seeded:4", 7)
    b = assign(fake_suite(), SeededSample(4), 7)
    assert a == b and assignment_mismatches(a, b) == ()
    assert a.cohort == benchmark_cohort(suite.ref, "seeded:4")
    assert a.cohort.key == b.cohort.key and a.cohort.key.startswith("sha256:")
    assert a.cohort.key != benchmark_cohort(suite.ref, "seeded:5").key
    # a round trip through JSON keeps it
    assert Assignment.model_validate_json(a.model_dump_json()) == a


def test_verify_assignment_recomputes_and_refuses_every_difference() -> None:
    suite = fake_suite()
    good = assign(suite, "seeded:4", 7)
    assert verify_assignment(suite, "seeded:4", good) == good
    assert verify_assignment(suite, "seeded:4", good.model_dump(mode="json")) == good

    forged = good.model_copy(update={"labels": GOLDEN[0]})
    with pytest.raises(AssignmentError) as info:
        verify_assignment(suite, "seeded:4", forged)
    assert any("tasks only the suite gives" in p for p in info.value.problems)
    assert any("tasks only the record says" in p for p in info.value.problems)

    other_suite = fake_suite(LABELS[:-1])
    with pytest.raises(AssignmentError, match="suite fingerprint"):
        verify_assignment(other_suite, "seeded:4", good)
    with pytest.raises(AssignmentError, match="sampling policy: the suite gives first:4, the record says seeded:4"):
        verify_assignment(suite, "first:4", good)
    reordered = good.model_copy(update={"labels": list(reversed(good.labels))})
    with pytest.raises(AssignmentError, match="task order differs"):
        verify_assignment(suite, "seeded:4", reordered)


def test_two_fabricated_records_agree_but_verification_refuses_both() -> None:
    suite = fake_suite()
    good = assign(suite, "seeded:4", 7)
    fake = good.model_copy(update={"labels": LABELS[:4]})
    assert assignment_mismatches(fake, fake.model_copy()) == ()
    for record in (fake, fake.model_copy()):
        with pytest.raises(AssignmentError):
            verify_assignment(suite, "seeded:4", record)


def test_a_hand_edited_suite_cannot_vouch_for_a_record() -> None:
    suite = fake_suite()
    good = assign(suite, "first:2", 0)
    members = list(suite.members)
    members[0], members[1] = members[1], members[0]
    edited = suite.model_copy(update={"members": members})  # reordered, fingerprint left as it was
    with pytest.raises(AssignmentError) as info:
        verify_assignment(edited, "first:2", good)
    assert any(p.startswith("suite file: suite fingerprint of core") for p in info.value.problems)


def test_verify_assignment_reads_run_records() -> None:
    suite = fake_suite()
    good = assign(suite, "all", 1)
    record = RunRecord(run_id="run-x", started="now", subject="nop", samples=1, cases=good.labels,
                       extra={"suite": {"assignment": good.model_dump(mode="json")}})
    assert verify_assignment(suite, "all", record) == good
    plain = RunRecord(run_id="run-y", started="now", subject="nop", samples=1)
    with pytest.raises(AssignmentError, match="run run-y records no suite assignment"):
        verify_assignment(suite, "all", plain)
    broken = RunRecord(run_id="run-z", started="now", subject="nop", samples=1, extra={"suite": {"assignment": {"seed": 1}}})
    with pytest.raises(AssignmentError, match="malformed: field 'cohort'"):
        verify_assignment(suite, "all", broken)


def test_assignment_mismatches_names_each_difference() -> None:
    a = assign(fake_suite(), "seeded:4", 7)
    b = assign(fake_suite(revision="2026.12.0"), "seeded:4", 0)
    diffs = assignment_mismatches(a, b)
    assert any(d.startswith("suite revision: A '2026.11.0', B '2026.12.0'") for d in diffs)
    assert any(d.startswith("suite fingerprint") for d in diffs)
    assert "replicate seed: A 7, B 0" in diffs
    assert any(d.startswith("tasks only A") for d in diffs) and any(d.startswith("tasks only B") for d in diffs)
    c = assign(fake_suite(suite_id="other"), "first:4", 7)
    diffs = assignment_mismatches(a, c)
    assert "suite id: A 'core', B 'other'" in diffs and "sampling policy: A seeded:4, B first:4" in diffs
