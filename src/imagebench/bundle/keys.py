"""Whether a bundle case's keys exist in the fixture it would load, checked before any run.

A layer presents a fixture data key (``layers[i].key``) and an answer contract may read a truth
key (``ground_truth[field] = {"from_truth": key}``). A key the fixture lacks fails only at run
time (a harness error, or every sample blocked), so ``reindex`` asks here first and warns naming
the case, the key and the keys that exist. The keys come from the curated tree's ``case.json``
(read, never hashed) for a curated fixture, or from the fixture as built for a generated one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebench.case.model import Case


def fixture_keys(case: Case) -> tuple[set[str], set[str]]:
    """``(data keys, truth keys)`` of the fixture ``case`` would load; raises when it cannot be read."""
    from imagebench.bundle.cases import CuratedRef
    from imagebench.fixtures.specs import OnDisk
    from imagebench.fixtures.tree import load_layout

    spec = case.fixture
    if isinstance(spec, CuratedRef):
        root, skill, case_id = spec._disk().tree_root(), spec.skill, spec.case_id
    elif isinstance(spec, OnDisk):
        root, skill, case_id = spec.tree_root(), case.namespace, case.case_id
    else:
        fixture = case.build()
        return set(fixture.data), set(fixture.truth)
    if root is None:
        raise LookupError("no fixture tree is set ($IMAGEBENCH_FIXTURES)")
    layout = load_layout(Path(root), skill, case_id)
    return set(layout.data), set(layout.truth)


def _listed(keys: set[str]) -> str:
    return ", ".join(repr(k) for k in sorted(keys)) or "none"


def key_warnings(case: Case, where: str | Path) -> list[str]:
    """A warning for each layer key and ``from_truth`` key of ``case`` its fixture does not have.

    ``where`` is the file the keys are written in (the case's ``case.json``). A fixture that cannot
    be read is one warning saying the keys were not checked, and why.
    """
    from imagebench.bundle.grading import truth_keys

    try:
        data, truth = fixture_keys(case)
    except Exception as exc:  # reindex reports, never crashes; the run says the same at its start
        return [
            f"{where}: the keys of {case.label} were not checked: its fixture cannot be read ({type(exc).__name__}: {exc})"
        ]
    out: list[str] = []
    for i, layer in enumerate(case.layers):
        if layer.key not in data:
            out.append(
                f"{where}: field 'layers[{i}].key' of {case.label}: layer {layer.name!r} presents data key "
                f"{layer.key!r}, which the fixture does not have (its data keys: {_listed(data)}); every sample "
                "would end in a harness error"
            )
    for key in sorted(truth_keys(case.answer)):
        if key not in truth:
            out.append(
                f"{where}: field 'answer.ground_truth' of {case.label}: 'from_truth' names truth key {key!r}, "
                f"which the fixture does not have (its truth keys: {_listed(truth)}); every sample would be blocked"
            )
    return out


def bundle_key_warnings(cases: Sequence[Case]) -> list[str]:
    """:func:`key_warnings` of every case (each names its ``case.json``)."""
    out: list[str] = []
    for case in cases:
        out.extend(key_warnings(case, case.meta.get("case_json") or case.label))
    return out


__all__ = ["bundle_key_warnings", "fixture_keys", "key_warnings"]
