"""The built-in suite: real imaging skills, each with a seeded procedural builder (or a curated
fixture shipped in the package), a verifier, a reference solution and calibrated tolerances.

Each module listed in ``CASE_MODULES`` defines three names:

- ``CASES``: a list of :class:`imagebench.case.model.Case`;
- ``SKILLS``: a list of :class:`imagebench.case.model.Skill` (the skills it covers, with their checklist);
- ``BUILDERS``: a dict ``name -> builder`` of its procedural builders, so that a bundle's
  case.json can name a builder and a seed without writing Python.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any

from imagebench.case.model import Case, Skill

CASE_MODULES: tuple[str, ...] = (
    "imagebench.cases.segmentation",
    "imagebench.cases.segmentation3d",
    "imagebench.cases.drift",
    "imagebench.cases.drift_tensor",
    "imagebench.cases.landmarks",
    "imagebench.cases.measure",
    "imagebench.cases.flatfield",
    "imagebench.cases.structured",
    "imagebench.cases.pick",
    "imagebench.cases.stack",
    "imagebench.cases.acquisitions",
    "imagebench.cases.tracking",
    "imagebench.cases.spots",
    "imagebench.cases.restoration",
    "imagebench.cases.deconvolution",
)


@cache
def _modules() -> tuple[ModuleType, ...]:
    return tuple(importlib.import_module(name) for name in CASE_MODULES)


def all_cases() -> list[Case]:
    """Every built-in case, in a stable order (module order, then as each module lists them)."""
    cases = [case for module in _modules() for case in module.CASES]
    labels = [c.label for c in cases]
    duplicated = sorted({x for x in labels if labels.count(x) > 1})
    if duplicated:
        raise ValueError(f"built-in cases with duplicate labels: {duplicated}")
    return cases


def skills() -> dict[str, Skill]:
    return {s.skill_id: s for module in _modules() for s in module.SKILLS}


def builders() -> dict[str, Callable[..., Any]]:
    out: dict[str, Callable[..., Any]] = {}
    for module in _modules():
        for name, builder in module.BUILDERS.items():
            if name in out:
                raise ValueError(f"two built-in builders are named {name!r}")
            out[name] = builder
    return out


def get_case(label: str) -> Case:
    for case in all_cases():
        if case.label == label:
            return case
    raise KeyError(label)
