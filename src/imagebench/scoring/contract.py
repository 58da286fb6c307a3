"""Task contracts and the fail-closed scorer: what an answer must hold and how each field is judged.

A :class:`TaskContract` (modelled in :mod:`~imagebench.scoring.contract_schema`) declares the
answer's fields (each with a comparator and its config), the ground truth per field (a literal, or a reference ``{"from_truth": key}`` resolved from the
fixture's held-out truth at scoring time), the scoring contract and whether the task is
eligible for evaluation at all.

:func:`score_answer` is fail-closed: an ineligible, unknown or malformed contract, a field
without a known comparator, or a gold/config its comparator refuses gives a *blocked* result,
never a score. Blocked is not zero: it says the bench cannot grade this, not that the subject
got it wrong. :func:`score_pinned` grades only with the scorer the shipped manifest pins (what
``imagebench score`` uses); :func:`structured_verifier`, the bridge to the runner, checks the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from imagebench.scoring import comparators as _cmp
from imagebench.scoring import manifest as _manifest
from imagebench.scoring.answer import parse_answer
from imagebench.scoring.contract_schema import (
    CONTRACT_SCHEMA_VERSION,
    CONTRACTS,
    NEVER_GRADED,
    SCORER_CONFIG_KEYS,
    VOXEL_COMPARATOR,
    VOXEL_CONTRACT,
    FieldRule,
    ScorerSpec,
    TaskContract,
)

if TYPE_CHECKING:
    from imagebench.fixture import Attempt, Fixture, Outcome

METRIC = "answer_mismatch"

__all__ = [  # the models and names of contract_schema are part of this module's face too
    "CONTRACTS",
    "CONTRACT_SCHEMA_VERSION",
    "METRIC",
    "NEVER_GRADED",
    "SCORER_CONFIG_KEYS",
    "VOXEL_COMPARATOR",
    "VOXEL_CONTRACT",
    "AnswerScore",
    "Blocked",
    "FieldRule",
    "ScorerSpec",
    "TaskContract",
    "check_contract",
    "exemplar",
    "load_contract",
    "prepare",
    "read_leaving",
    "resolve_ground_truth",
    "score_answer",
    "score_pinned",
    "scorer_problem",
    "structured_verifier",
]


class Blocked(Exception):
    """The contract cannot be graded; the message is the reason."""


@dataclass(frozen=True)
class AnswerScore:
    """The result of scoring one answer against one contract.

    Exactly one of three shapes: ``blocked`` set (no score at all); ``unscorable`` set (the
    answer could not be read; ``answer_score`` 0.0, ``fields`` empty); or scored, with one
    :class:`FieldResult` per declared field and ``answer_score`` 1.0 only when every field
    matched (and, with ``extra_fields: "mismatch"``, nothing undeclared was given).
    """

    contract: str
    fields: dict[str, _cmp.FieldResult] = field(default_factory=dict)
    answer_score: float | None = None
    blocked: str | None = None
    unscorable: str | None = None
    extra_fields: tuple[str, ...] = ()
    extra_policy: str = "ignore"

    @property
    def scored(self) -> bool:
        return self.blocked is None and self.unscorable is None

    @property
    def matched(self) -> int:
        return sum(1 for r in self.fields.values() if r.matched)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "contract": self.contract,
            "answer_score": self.answer_score,
            "fields": {name: r.to_json() for name, r in self.fields.items()},
            "matched": self.matched,
            "total": len(self.fields),
            "extra_fields": list(self.extra_fields),
            "extra_policy": self.extra_policy,
        }
        if self.blocked is not None:
            out["blocked"] = self.blocked
        if self.unscorable is not None:
            out["unscorable"] = self.unscorable
        return out


# --------------------------------------------------------------------------- validating


def load_contract(obj: Any) -> tuple[TaskContract | None, str | None]:
    """A TaskContract from a model or a mapping: ``(contract, None)`` or ``(None, why)``. Never raises."""
    if isinstance(obj, TaskContract):
        return obj, None
    if obj is None:
        return None, "the task has no scoring contract"
    if not isinstance(obj, Mapping):
        return None, f"the scoring contract is a {type(obj).__name__}, expected an object"
    version = obj.get("schema_version", CONTRACT_SCHEMA_VERSION)
    if version != CONTRACT_SCHEMA_VERSION:
        return None, f"contract field 'schema_version' is {version!r}, expected {CONTRACT_SCHEMA_VERSION}"
    try:
        return TaskContract.model_validate(dict(obj)), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        return None, f"the scoring contract is malformed: field {where!r}: {first['msg']}"


def _contract_name(contract: TaskContract | None, raw: Any) -> str:
    if contract is not None:
        return contract.scorer.contract
    try:
        return str(raw["scorer"]["contract"])
    except (TypeError, KeyError, IndexError):
        return "?"


def check_contract(contract: TaskContract) -> None:
    """Raise :class:`Blocked` unless the contract is eligible, known and well formed (answer-independent)."""
    if contract.evaluation_eligible is not True:
        raise Blocked(
            f"evaluation_eligible is {contract.evaluation_eligible!r}; a task is graded only when it is exactly true"
        )
    name = contract.scorer.contract
    if name in NEVER_GRADED:
        raise Blocked(f"contract {name!r} asks for {NEVER_GRADED[name]}, which this release never grades automatically")
    if name not in CONTRACTS:
        raise Blocked(f"unknown scoring contract {name!r}; known: {', '.join(sorted(CONTRACTS))}")
    for key, value in contract.scorer.config.items():
        if key not in SCORER_CONFIG_KEYS:
            raise Blocked(f"scorer config key {key!r} is unknown; valid keys: {', '.join(sorted(SCORER_CONFIG_KEYS))}")
        if value not in SCORER_CONFIG_KEYS[key]:
            raise Blocked(f"scorer config {key!r} is {value!r}; valid values: {', '.join(SCORER_CONFIG_KEYS[key])}")
    if not contract.answer_schema:
        raise Blocked("the answer schema declares no fields")
    schema, truth = set(contract.answer_schema), set(contract.ground_truth)
    if schema - truth:
        raise Blocked(f"field(s) {sorted(schema - truth)} have no ground truth")
    if truth - schema:
        raise Blocked(f"ground truth names field(s) {sorted(truth - schema)} that the answer schema does not declare")
    voxel_fields = []
    for fname, rule in contract.answer_schema.items():
        if not rule.comparator:
            raise Blocked(f"field {fname!r} names no comparator")
        if rule.comparator not in _cmp.COMPARATORS:
            raise Blocked(f"field {fname!r} names unknown comparator {rule.comparator!r}")
        if rule.comparator == VOXEL_COMPARATOR:
            voxel_fields.append(fname)
    if name == VOXEL_CONTRACT and not voxel_fields:
        raise Blocked(f"contract {name!r} needs at least one field judged by {VOXEL_COMPARATOR}")
    if name != VOXEL_CONTRACT and voxel_fields:
        raise Blocked(f"field(s) {voxel_fields} use {VOXEL_COMPARATOR}, which only contract {VOXEL_CONTRACT!r} grades")


def _is_reference(value: Any) -> bool:
    return isinstance(value, Mapping) and "from_truth" in value


def resolve_ground_truth(contract: TaskContract, truth: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each field's gold: literals as they are, ``{"from_truth": key, "path": [...]}`` looked up in
    ``truth``. Raise :class:`Blocked` when a reference is malformed or cannot be resolved."""
    resolved: dict[str, Any] = {}
    for fname, value in contract.ground_truth.items():
        if not _is_reference(value):
            resolved[fname] = value
            continue
        if set(value) - {"from_truth", "path"}:
            raise Blocked(
                f"ground truth of {fname!r} mixes 'from_truth' with other keys "
                f"{sorted(set(value) - {'from_truth', 'path'})}"
            )
        key, path = value["from_truth"], value.get("path", [])
        if not isinstance(key, str) or not isinstance(path, list):
            raise Blocked(f"ground truth of {fname!r}: 'from_truth' must be a key and 'path' a list")
        if truth is None:
            raise Blocked(f"ground truth of {fname!r} refers to truth key {key!r}, and no fixture truth was given")
        if key not in truth:
            raise Blocked(f"ground truth of {fname!r} refers to truth key {key!r}, which the fixture does not have")
        item = truth[key]
        for step in path:
            try:
                item = item[step]
            except (KeyError, IndexError, TypeError):
                raise Blocked(f"ground truth of {fname!r}: truth {key!r} has nothing at {step!r}") from None
        resolved[fname] = item
    return resolved


def prepare(contract: Any, truth: Mapping[str, Any] | None) -> tuple[TaskContract, dict[str, Any]]:
    """Validate a contract and resolve and check its gold values, before any answer is seen.

    Returns ``(contract, gold)``; raises :class:`Blocked` with the reason otherwise.
    """
    loaded, why = load_contract(contract)
    if loaded is None:
        raise Blocked(why or "the scoring contract is malformed")
    check_contract(loaded)
    gold = resolve_ground_truth(loaded, truth)
    for fname, rule in loaded.answer_schema.items():
        try:
            _cmp.PREPARERS[rule.comparator](gold[fname], rule.config)
        except _cmp.ContractError as exc:
            raise Blocked(f"field {fname!r}: {exc}") from None
        except Exception as exc:  # a preparer that breaks is a broken scorer: never a score
            raise Blocked(f"field {fname!r}: checking the gold raised {type(exc).__name__}: {exc}") from None
    return loaded, gold


def score_answer(contract: Any, answer: Any, truth: Mapping[str, Any] | None = None) -> AnswerScore:
    """Score ``answer`` (a dict, or text to parse) against ``contract``; never raises.

    A missing field is a mismatch. Fields the schema does not declare are listed in
    ``extra_fields`` and ignored, unless the scorer config sets ``extra_fields: "mismatch"``
    (then any extra field makes ``answer_score`` 0.0).
    """
    try:
        loaded, gold = prepare(contract, truth)
    except Blocked as exc:
        loaded_only, _ = load_contract(contract)
        return AnswerScore(contract=_contract_name(loaded_only, contract), blocked=str(exc))
    name = loaded.scorer.contract
    policy = loaded.scorer.config.get("extra_fields", "ignore")
    parsed, why = parse_answer(answer)
    if parsed is None:
        why = why or "the answer is unreadable"
        return AnswerScore(contract=name, answer_score=0.0, unscorable=why, extra_policy=policy)
    results: dict[str, _cmp.FieldResult] = {}
    for fname, rule in loaded.answer_schema.items():
        if fname not in parsed:
            results[fname] = _cmp.FieldResult(False, "missing from the answer")
            continue
        comparator: Callable[..., _cmp.FieldResult] = _cmp.COMPARATORS[rule.comparator]
        try:
            result = comparator(parsed[fname], gold[fname], rule.config)
        except _cmp.ContractError as exc:
            return AnswerScore(contract=name, blocked=f"field {fname!r}: {exc}", extra_policy=policy)
        except Exception as exc:  # a comparator bug must never turn into a score
            return AnswerScore(
                contract=name,
                blocked=f"field {fname!r}: comparator {rule.comparator} raised {type(exc).__name__}: {exc}",
                extra_policy=policy,
            )
        if not isinstance(result, _cmp.FieldResult):
            return AnswerScore(
                contract=name,
                blocked=f"field {fname!r}: comparator {rule.comparator} returned {type(result).__name__}",
                extra_policy=policy,
            )
        results[fname] = result
    extra = tuple(sorted(set(parsed) - set(loaded.answer_schema)))
    all_matched = all(r.matched for r in results.values())
    if policy == "mismatch" and extra:
        all_matched = False
    return AnswerScore(
        contract=name,
        fields=results,
        answer_score=1.0 if all_matched else 0.0,
        extra_fields=extra,
        extra_policy=policy,
    )


# --------------------------------------------------------------------------- the pinned scorer


def scorer_problem(manifest: Any = None) -> str | None:
    """Why the running scorer may not score (``None`` when it may): the scorer manifest (the
    shipped one unless ``manifest`` names another) is tampered with or does not pin the running
    code. The reason names every changed comparator."""
    problem = _manifest.check_scorer_manifest(_manifest.packaged_manifest_path() if manifest is None else manifest)
    return f"scorer manifest check failed: {problem}" if problem else None


def score_pinned(
    contract: Any, answer: Any, truth: Mapping[str, Any] | None = None, *, manifest: Any = None
) -> AnswerScore:
    """As :func:`score_answer`, but only with the scorer the manifest pins: blocked, naming what
    changed, when :func:`scorer_problem` finds any. What ``imagebench score`` grades with; the
    structured verifier makes the same check before it reads an answer."""
    problem = scorer_problem(manifest)
    if problem:
        loaded, _ = load_contract(contract)
        return AnswerScore(contract=_contract_name(loaded, contract), blocked=problem)
    return score_answer(contract, answer, truth)


# --------------------------------------------------------------------------- the runner bridge


def read_leaving(attempt: Attempt, leaving: str = "answer") -> tuple[Any, str, str | None]:
    """Where the answer is: ``(value, source, why_not)``.

    ``attempt.arrays[leaving]`` when the subject left it (a dict, or text to parse), else the
    subject's final message ``attempt.notes["final_message"]`` when it is text.
    """
    if leaving in attempt.arrays:
        return attempt.arrays[leaving], "leaving", None
    notes = attempt.notes if isinstance(attempt.notes, dict) else {}
    message = notes.get("final_message")
    if isinstance(message, (str, bytes)) and message:
        return message, "final_message", None
    why = notes.get("why_not", {}).get(leaving) if isinstance(notes.get("why_not"), dict) else None
    return None, "none", why or f"the subject left nothing named {leaving!r} and no final message"


def structured_verifier(contract: Any, *, leaving: str = "answer") -> Callable[[Fixture, Attempt], Outcome]:
    """A case verifier for a structured answer scored under ``contract``.

    Before scoring it checks the shipped scorer manifest against the running comparator code
    (a mismatch blocks). The outcome has one metric, ``answer_mismatch`` = 1 - answer_score with
    limit 0, unavailable (with the reason) when the answer is unreadable;
    ``detail["answer"]`` holds the per-field results; ``detail["blocked"]`` is set when blocked,
    and the outcome's status is then ``blocked``.
    """

    def verify(fixture: Fixture, attempt: Attempt) -> Outcome:
        from imagebench.fixture import Metric, Outcome

        def blocked(reason: str, name: str) -> Outcome:
            return Outcome(
                fixture=fixture,
                attempt=attempt,
                metrics=[Metric.missing(METRIC, 0.0, f"blocked: {reason}")],
                detail={"blocked": reason, "answer": {"contract": name, "answer_score": None, "blocked": reason}},
            )

        loaded, _ = load_contract(contract)
        name = _contract_name(loaded, contract)
        problem = scorer_problem()
        if problem:
            return blocked(problem, name)
        limit = fixture.tolerance.get(METRIC, 0.0) if fixture.tolerance else 0.0
        if limit != 0.0:
            why = f"the {METRIC} limit is fixed at 0 for a structured answer; the fixture sets {limit!r}"
            return blocked(why, name)
        value, source, why = read_leaving(attempt, leaving)
        if why is not None:
            try:  # the contract decides first: an ungradable task is blocked even without an answer
                prepare(contract, fixture.truth)
            except Blocked as exc:
                return blocked(str(exc), name)
            return Outcome(
                fixture=fixture,
                attempt=attempt,
                metrics=[Metric.missing(METRIC, 0.0, why)],
                detail={"answer": {"contract": name, "answer_score": None, "source": source, "unscorable": why}},
            )
        score = score_answer(contract, value, fixture.truth)
        if score.blocked is not None:
            return blocked(score.blocked, score.contract)
        detail = {"answer": {**score.to_json(), "source": source}}
        if score.unscorable is not None:
            metric = Metric.missing(METRIC, 0.0, f"unreadable answer: {score.unscorable}")
        else:
            metric = Metric(METRIC, 1.0 - float(score.answer_score or 0.0), 0.0)
        return Outcome(fixture=fixture, attempt=attempt, metrics=[metric], detail=detail)

    verify.contract = contract  # type: ignore[attr-defined]
    verify.__qualname__ = f"structured_verifier[{_contract_name(load_contract(contract)[0], contract)}]"
    return verify


def exemplar(contract: Any, truth: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An answer that must score 1.0: each field's gold fed back (a member voxel for a region).

    Raises :class:`Blocked` when the contract cannot be graded. Used by ``imagebench scorer selftest``.
    """
    loaded, gold = prepare(contract, truth)
    return {f: _cmp.exemplar_answer(rule.comparator, gold[f]) for f, rule in loaded.answer_schema.items()}
