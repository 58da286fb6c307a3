"""A bundle case scored by a verifier instead of an answer contract.

A bundle's ``case.json`` may give ``verifier: {name, params}`` (a built-in verifier by name,
:mod:`imagebench.cases.verifiers`, or the user's ``pkg.mod:func``) with its ``tolerance``,
``leave`` (what the subject leaves, as in ``bench-case.json``) and optionally ``reference`` and
``baseline`` (``pkg.mod:func``). User code is imported here, when the harness builds the case,
never in a subject's sandbox. Errors name the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagebench.bundle.casefile import CaseFile
from imagebench.case.model import Collect, Reference, Verifier
from imagebench.cases.targets import TargetError, TargetVerifier, call_of, is_target
from imagebench.cases.verifiers import VerifierError, limit_problems, named_kind

#: the classes a verifier may grade (the others are graded by their class: imagebench.bundle.grading)
VERIFIED_CLASSES = ("golden", "hard-case", "empty")


@dataclass(frozen=True)
class Verified:
    """What a verifier-scored bundle case is made of."""

    verify: Verifier
    collect: tuple[Collect, ...]
    tolerance: dict[str, float]
    reference: Reference | None
    baseline: Reference | None
    targets: dict[str, Any]


def verified_parts(spec: CaseFile, where: Path) -> tuple[Verified | None, str | None]:
    """The verifier, leavings, limits and solutions of ``spec``, or ``(None, why)`` naming file and field."""
    assert spec.verifier is not None
    if spec.answer is not None:
        return None, f"{where}: fields 'answer' and 'verifier': give one (a contract or a verifier), not both"
    if spec.case_class not in VERIFIED_CLASSES:
        return (
            None,
            f"{where}: field 'verifier': a {spec.case_class} case is graded by its class; a verifier grades {VERIFIED_CLASSES}",
        )
    if not spec.leave:
        return None, f"{where}: field 'leave': a case with a 'verifier' says what the subject leaves"
    name, params = spec.verifier.name, spec.verifier.params
    leavings = tuple(leaving.name for leaving in spec.leave)
    tolerance = {k: float(v) for k, v in spec.tolerance.items()}
    targets: dict[str, Any] = {}
    if is_target(name):
        try:
            verify: Any = TargetVerifier.of(name, params, leavings)
        except TargetError as exc:
            return None, f"{where}: field 'verifier.name': {exc}"
        targets["verifier"] = {"target": verify.target, "digest": verify.digest}
    else:
        try:
            kind = named_kind(name)
            settled = kind.settle(params)
        except VerifierError as exc:
            field = "verifier.name" if "not a built-in verifier" in str(exc) else "verifier.params"
            return None, f"{where}: field {field!r}: {exc}"
        for field, problem in limit_problems(name, settled, tolerance):
            return None, f"{where}: field {field!r}: {problem}"
        read = kind.keys(settled, "leaving")
        if sorted(read.values()) != sorted(leavings):
            return (
                None,
                f"{where}: field 'leave': {list(leavings)}, yet verifier {name!r} reads {sorted(read.values())}",
            )
        verify = kind.make(params)
    solutions: dict[str, Any] = {}
    for role in ("reference", "baseline"):
        target = getattr(spec, role)
        if target is None:
            solutions[role] = None
            continue
        try:
            solutions[role] = call_of(target)
        except TargetError as exc:
            return None, f"{where}: field {role!r}: {exc}"
        targets[role] = {"target": solutions[role].target, "digest": solutions[role].digest}
    collect = tuple(
        Collect(
            name=leaving.name,
            what=leaving.what,
            description=leaving.description,
            layer=leaving.layer,
            like=leaving.like,
            ordered=leaving.ordered,
        )
        for leaving in spec.leave
    )
    return Verified(verify, collect, tolerance, solutions["reference"], solutions["baseline"], targets), None


__all__ = ["VERIFIED_CLASSES", "Verified", "verified_parts"]
