"""Sampling a suite, cohorts and assignments.

A sampling policy picks member labels from a suite and always returns them in *manifest order*:

- :class:`AllTasks`: every member;
- :class:`FirstTasks` ``(n)``: the first n members;
- :class:`SeededSample` ``(n)``: the n members whose ``sha256(f"{seed}:{label}")`` is smallest
  (ties broken by label). No pseudo-random generator is involved, so the same seed gives the
  same labels on any machine and in any Python, forever.

A :class:`Cohort` is a suite reference (id, pinned revision, suite fingerprint) plus a policy: two
runs can only be compared inside one cohort. An :class:`Assignment` adds the replicate seed and the
labels that seed selects; it never depends on who is being evaluated, so two subjects run with the
same seed get the same assignment and can be paired case for case.

A stored assignment is only a claim: :func:`verify_assignment` recomputes it from the suite file,
the policy and the record's seed and refuses any difference. :func:`assignment_mismatches` compares
two records and nothing else (two fabricated records can agree), so verify each one first.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from imagebench.records import FrozenRecord
from imagebench.runs.fingerprint import digest_json
from imagebench.suite.model import SuiteManifest, SuiteRef, structural_problems

ASSIGNMENT_SCHEMA_VERSION = 1


class AssignmentError(ValueError):
    """A recorded assignment does not match what the suite, policy and seed give (lists every difference)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


# --------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class AllTasks:
    """Every member of the suite."""

    @property
    def key(self) -> str:
        return "all"

    def select(self, labels: Sequence[str], seed: int) -> tuple[str, ...]:
        return tuple(labels)


@dataclass(frozen=True)
class FirstTasks:
    """The first ``count`` members, in manifest order."""

    count: int

    def __post_init__(self) -> None:
        _check_count(self.count, "first")

    @property
    def key(self) -> str:
        return f"first:{self.count}"

    def select(self, labels: Sequence[str], seed: int) -> tuple[str, ...]:
        _check_size(self.count, labels, self.key)
        return tuple(labels[: self.count])


@dataclass(frozen=True)
class SeededSample:
    """``count`` members ranked by ``sha256(f"{seed}:{label}")``, returned in manifest order."""

    count: int

    def __post_init__(self) -> None:
        _check_count(self.count, "seeded")

    @property
    def key(self) -> str:
        return f"seeded:{self.count}"

    def select(self, labels: Sequence[str], seed: int) -> tuple[str, ...]:
        _check_size(self.count, labels, self.key)
        ranked = sorted(labels, key=lambda label: (rank(seed, label), label))
        chosen = set(ranked[: self.count])
        return tuple(label for label in labels if label in chosen)


Policy = AllTasks | FirstTasks | SeededSample


def rank(seed: int, label: str) -> str:
    """The hex sha256 of ``"<seed>:<label>"``: a seeded sample takes the smallest."""
    return hashlib.sha256(f"{int(seed)}:{label}".encode()).hexdigest()


def _check_count(count: Any, name: str) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"{name}:N needs a whole number N >= 1, got {count!r}")


def _check_size(count: int, labels: Sequence[str], key: str) -> None:
    if count > len(labels):
        raise ValueError(f"{key} asks for {count} members, the suite has {len(labels)}")


_POLICY = re.compile(r"^(all|first:(\d+)|seeded:(\d+))$")


def parse_policy(text: str) -> Policy:
    """``all``, ``first:N`` or ``seeded:N`` -> a policy; anything else raises ValueError."""
    m = _POLICY.match(text.strip() if isinstance(text, str) else "")
    if not m:
        raise ValueError(f"sampling policy {text!r}: expected all, first:N or seeded:N (N >= 1)")
    if m.group(1) == "all":
        return AllTasks()
    if m.group(2) is not None:
        return FirstTasks(int(m.group(2)))
    return SeededSample(int(m.group(3)))


def _policy(policy: Policy | str) -> Policy:
    return parse_policy(policy) if isinstance(policy, str) else policy


# --------------------------------------------------------------------------- cohorts and assignments


class Cohort(FrozenRecord):
    """The suite (id, pinned revision, fingerprint) and the sampling policy: C1 of comparability."""

    suite: SuiteRef
    policy: str

    @field_validator("policy")
    @classmethod
    def _policy_key(cls, value: str) -> str:
        try:
            return parse_policy(value).key
        except ValueError as exc:
            raise ValueError(str(exc)) from None

    @property
    def key(self) -> str:
        """A digest naming the cohort."""
        return digest_json(self.model_dump(mode="json"))


class Assignment(FrozenRecord):
    """A cohort, a replicate seed and the labels they select (manifest order)."""

    schema_version: Literal[1] = ASSIGNMENT_SCHEMA_VERSION
    cohort: Cohort
    seed: int
    labels: list[str] = Field(default_factory=list)


def benchmark_cohort(ref: SuiteRef, policy: Policy | str) -> Cohort:
    return Cohort(suite=ref, policy=_policy(policy).key)


def assign(suite: SuiteManifest, policy: Policy | str, seed: int) -> Assignment:
    """The assignment ``policy`` and ``seed`` give on ``suite`` (the same on any machine)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    p = _policy(policy)
    labels = p.select(suite.labels, seed)
    return Assignment(cohort=benchmark_cohort(suite.ref, p), seed=seed, labels=list(labels))


def _as_assignment(record: Any) -> Assignment:
    """An Assignment from an Assignment, a RunRecord (``extra.suite.assignment``) or a mapping."""
    if isinstance(record, Assignment):
        return record
    from imagebench.records import RunRecord

    if isinstance(record, RunRecord):
        info = record.extra.get("suite")
        if not isinstance(info, Mapping) or "assignment" not in info:
            raise AssignmentError([f"run {record.run_id} records no suite assignment (it was not run with --suite)"])
        record = info["assignment"]
    if isinstance(record, Mapping):
        try:
            return Assignment.model_validate(dict(record))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise AssignmentError([f"the recorded assignment is malformed: field {where!r}: {first['msg']}"]) from None
    raise AssignmentError([f"a {type(record).__name__} is not an assignment record"])


def verify_assignment(suite: SuiteManifest, policy: Policy | str, record: Any) -> Assignment:
    """Recompute the assignment from ``suite``, ``policy`` and the record's seed; return it when the
    record says exactly that, else raise :class:`AssignmentError` listing every difference.

    The suite file must agree with itself (its fingerprints recomputed) before it can vouch for anything.
    """
    claimed = _as_assignment(record)
    problems = [f"suite file: {role}: {reason}" for role, reason in structural_problems(suite)]
    p = _policy(policy)
    try:
        expected = assign(suite, p, claimed.seed)
    except ValueError as exc:
        raise AssignmentError([*problems, f"the policy cannot be applied to this suite: {exc}"]) from None
    problems.extend(assignment_mismatches(expected, claimed, names=("the suite gives", "the record says")))
    if problems:
        raise AssignmentError(problems)
    return claimed


def assignment_mismatches(
    a: Assignment, b: Assignment, *, names: tuple[str, str] = ("A", "B")
) -> tuple[str, ...]:
    """Every way two assignments differ; ``()`` only when they pair task for task.

    Compares the records and nothing else: verify each one against the suite first.
    """
    na, nb = names
    out: list[str] = []
    sa, sb = a.cohort.suite, b.cohort.suite
    if sa.suite_id != sb.suite_id:
        out.append(f"suite id: {na} {sa.suite_id!r}, {nb} {sb.suite_id!r}")
    if sa.revision != sb.revision:
        out.append(f"suite revision: {na} {sa.revision!r}, {nb} {sb.revision!r}")
    if sa.suite_fingerprint != sb.suite_fingerprint:
        out.append(f"suite fingerprint: {na} {sa.suite_fingerprint[:19]}..., {nb} {sb.suite_fingerprint[:19]}...")
    if a.cohort.policy != b.cohort.policy:
        out.append(f"sampling policy: {na} {a.cohort.policy}, {nb} {b.cohort.policy}")
    if a.seed != b.seed:
        out.append(f"replicate seed: {na} {a.seed}, {nb} {b.seed}")
    if a.labels != b.labels:
        only_a = [x for x in a.labels if x not in b.labels]
        only_b = [x for x in b.labels if x not in a.labels]
        if only_a:
            out.append(f"tasks only {na}: {', '.join(only_a)}")
        if only_b:
            out.append(f"tasks only {nb}: {', '.join(only_b)}")
        if not only_a and not only_b:
            out.append(f"task order differs: {na} {a.labels}, {nb} {b.labels}")
    return tuple(out)
