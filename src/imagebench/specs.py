"""Where a case's pixels come from: a procedure run from a seed, or a curated fixture tree on disk.

Exactly one spec per case, decided when the case is written; there is no fallback between them and
no precedence. Each stamps the fixture it builds with the owning case's identity and tolerance, so
that a case's name and what counts as a pass come from one place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from imagebench import tree
from imagebench.fixture import FIXTURES_ENV, Fixture, FixtureError, Kind


@runtime_checkable
class FixtureSpec(Protocol):
    """Where a case's pixels come from. Exactly one per case; never a fallback."""

    @property
    def kind(self) -> Kind: ...

    @property
    def tolerance(self) -> Mapping[str, float]: ...

    def available(self, skill_id: str, case_id: str) -> tuple[bool, str]: ...

    def build(self, skill_id: str, case_id: str) -> Fixture: ...


@dataclass(frozen=True)
class Source:
    """Where a case's pixels come from, in words a person can cite (never the truth)."""

    kind: Kind
    provenance: str
    citation: str | None = None


def source_of(spec: object, skill_id: str, case_id: str) -> Source | None:
    """The :class:`Source` of a case's fixture spec, read without building the fixture (a curated
    case's comes from the tree's manifest), or None when the spec cannot say (its tree is missing)."""
    describe = getattr(spec, "source", None)
    if describe is None:
        return None
    try:
        return describe(skill_id, case_id)
    except (OSError, ValueError, FixtureError):
        return None


def _stamp(fixture: Fixture, kind: Kind, skill_id: str, case_id: str, tolerance: Mapping[str, float]) -> Fixture:
    # The spec is the one place a case's identity comes from: overwrite whatever the builder set.
    return replace(fixture, kind=kind, skill_id=skill_id, case_id=case_id, tolerance=dict(tolerance))


@dataclass(frozen=True)
class Procedural:
    """A synthetic fixture generated at run time by ``builder(seed=..., **params)``. Always available."""

    builder: Callable[..., Fixture]
    seed: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)
    tolerance: Mapping[str, float] = field(default_factory=dict)
    kind: Kind = field(default="synthetic", init=False)

    @property
    def builder_name(self) -> str:
        b = self.builder
        return f"{getattr(b, '__module__', '?')}:{getattr(b, '__qualname__', repr(b))}"

    def available(self, skill_id: str, case_id: str) -> tuple[bool, str]:
        return True, ""

    def source(self, skill_id: str, case_id: str) -> Source:
        return Source("synthetic", f"generated at run time by {self.builder_name}, seed {self.seed}")

    def build(self, skill_id: str, case_id: str, *, seed: int | None = None) -> Fixture:
        """Build the fixture from ``self.seed``, or from ``seed`` when given (a sealed run's)."""
        fixture = self.builder(seed=self.seed if seed is None else seed, **dict(self.params))
        if not isinstance(fixture, Fixture):
            raise FixtureError(f"builder {self.builder_name} returned {type(fixture).__name__}, expected a Fixture")
        return _stamp(fixture, "synthetic", skill_id, case_id, self.tolerance)


@dataclass(frozen=True)
class OnDisk:
    """A curated fixture read from a fixture tree (``$IMAGEBENCH_FIXTURES`` unless ``root`` is given).

    The tolerance lives here, on the spec, so a machine's copy of the data cannot re-tune
    what counts as a pass.
    """

    tolerance: Mapping[str, float]
    root: str | os.PathLike[str] | None = None
    kind: Kind = field(default="curated", init=False)

    def tree_root(self) -> Path | None:
        if self.root is not None:
            return Path(self.root)
        env = os.environ.get(FIXTURES_ENV)
        return Path(env) if env else None

    def available(self, skill_id: str, case_id: str) -> tuple[bool, str]:
        root = self.tree_root()
        if root is None:
            return False, f"${FIXTURES_ENV} is not set; this curated case reads its pixels from a fixture tree"
        return tree.case_available(root, skill_id, case_id)

    def source(self, skill_id: str, case_id: str) -> Source | None:
        """The manifest entry's provenance and citation (None when no tree is set or it has no entry)."""
        root = self.tree_root()
        if root is None:
            return None
        entry = tree.load_manifest(root).entry(skill_id, case_id)
        return None if entry is None else Source("curated", entry.provenance, entry.citation)

    def build(self, skill_id: str, case_id: str) -> Fixture:
        root = self.tree_root()
        if root is None:
            raise FixtureError(f"${FIXTURES_ENV} is not set; cannot build curated case {skill_id}/{case_id}")
        fixture = tree.load_fixture(root, skill_id, case_id)
        return _stamp(fixture, "curated", skill_id, case_id, self.tolerance)
