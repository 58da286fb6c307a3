"""What a suite run records in ``run.json`` (under ``extra["suite"]``): its assignment and its conditions.

The assignment (cohort, replicate seed, labels) is what C1 and C2 of a comparison check; the
declared conditions are what C3 (scoring code) and C4 (execution) check. See ``docs/suites.md``.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError

from imagebench.records import FrozenRecord
from imagebench.suite.sampling import Assignment

RUN_INFO_SCHEMA_VERSION = 1
RUN_INFO_KEY = "suite"  # run.json: extra["suite"]


class Scoring(FrozenRecord):
    """The scoring code that produced the metrics: hashes of the running comparators and scorer, and
    each case's scoring closure (:func:`imagebench.runs.closure.scoring_digest`: its verifier, the
    project code it calls, its limits)."""

    registry_hash: str | None = None
    implementation_hash: str | None = None
    unavailable: str | None = None
    cases: dict[str, str] = Field(default_factory=dict)
    case_problems: dict[str, str] = Field(default_factory=dict)


class Conditions(FrozenRecord):
    """Declared execution conditions (C4) and the scoring code (C3) of one run."""

    samples: int
    timeout: float | None = None
    fixtures: str = "all"
    platform: str
    scoring: Scoring
    imagebench: str = ""  # informational: the package version
    python: str = ""  # informational


class SuiteRunInfo(FrozenRecord):
    """``run.json`` ``extra["suite"]``: how the suite was asked for, the assignment run and the conditions."""

    schema_version: Literal[1] = RUN_INFO_SCHEMA_VERSION
    requested: str
    alias: str | None = Field(default=None, description="the alias that resolved to the pinned revision, if any")
    assignment: Assignment
    conditions: Conditions


def platform_class() -> str:
    """``<os>-<machine>``, e.g. ``linux-x86_64`` (machine names normalised across platforms)."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{sys.platform.lower()}-{machine or 'unknown'}"


def scoring_now(cases: Iterable[Any] = ()) -> Scoring:
    """The hashes of the scoring code running in this process, and the scoring closure of each case."""
    from imagebench.runs.closure import scoring_digests

    found, problems = scoring_digests(cases)
    try:
        from imagebench.scoring.manifest import implementation_hash, registry_hashes

        _, registry = registry_hashes()
        return Scoring(
            registry_hash=registry, implementation_hash=implementation_hash(), cases=found, case_problems=problems
        )
    except Exception as exc:  # recorded as unknown; a comparison then fails closed on C3
        return Scoring(unavailable=f"{type(exc).__name__}: {exc}", cases=found, case_problems=problems)


def conditions_now(
    *, samples: int, timeout: float | None, fixtures: str = "all", cases: Iterable[Any] = ()
) -> Conditions:
    from imagebench import __version__

    return Conditions(
        samples=samples,
        timeout=timeout,
        fixtures=fixtures,
        platform=platform_class(),
        scoring=scoring_now(cases),
        imagebench=str(__version__),
        python=platform.python_version(),
    )


def run_info(extra: Mapping[str, Any]) -> SuiteRunInfo | None:
    """The suite info of a run record's ``extra`` (None when the run was not a suite run).

    Raises ValueError naming the field when it is present but malformed.
    """
    raw = extra.get(RUN_INFO_KEY)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError(f"field 'extra.{RUN_INFO_KEY}': expected an object, got {type(raw).__name__}")
    try:
        return SuiteRunInfo.model_validate(dict(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ValueError(f"field 'extra.{RUN_INFO_KEY}.{where}': {first['msg']}") from None
