"""Cases: one non-decomposable artifact of task, persona, fixture, layers, verifier and tolerances.

A case is keyed by its label ``"<namespace>/<case_id>"``; the namespace is the skill id, or
``tasks`` for a case that names no skill. Every artifact and report is keyed by that label.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from imagebench.fixtures.fixture import Attempt, Fixture, Outcome
from imagebench.fixtures.specs import FixtureSpec, Source, source_of

LayerKind = Literal["image", "labels", "points", "shapes", "tracks"]
Presentation = Literal["array", "tensor"]
CaseClass = Literal["golden", "refusal", "empty", "rerun", "hard-case", "trigger"]

LAYER_KINDS: tuple[str, ...] = ("image", "labels", "points", "shapes", "tracks")
PRESENTATIONS: tuple[str, ...] = ("array", "tensor")
CASE_CLASSES: tuple[str, ...] = ("golden", "refusal", "empty", "rerun", "hard-case", "trigger")
NO_SKILL = "tasks"
FIXTURE_CHOICES: tuple[str, ...] = ("all", "synthetic", "curated")

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class CaseError(ValueError):
    """A case is malformed."""


@dataclass(frozen=True)
class Layer:
    """How one data key of the fixture reaches the subject (and the viewer)."""

    name: str
    key: str
    kind: LayerKind = "image"
    presentation: Presentation = "array"
    chunks: tuple[int, ...] | None = None
    dim_labels: tuple[str, ...] | None = None
    # How a viewer shows it, from the case (the verifier reads the same numbers): the physical size
    # of a pixel per axis and its unit, a colormap and blending (several channels shown together),
    # and, for points whose order carries meaning, their index drawn beside each.
    scale: tuple[float, ...] | None = None
    units: str | None = None
    colormap: str | None = None
    blending: str | None = None
    ordered: bool = False

    def __post_init__(self) -> None:
        if self.kind not in LAYER_KINDS:
            raise CaseError(f"layer {self.name!r}: kind must be one of {LAYER_KINDS}, got {self.kind!r}")
        if self.scale is not None and (not self.scale or any(not (v > 0) for v in self.scale)):
            raise CaseError(f"layer {self.name!r}: scale must be positive numbers, got {self.scale!r}")
        if self.presentation not in PRESENTATIONS:
            raise CaseError(
                f"layer {self.name!r}: presentation must be one of {PRESENTATIONS}, got {self.presentation!r}"
            )


@dataclass(frozen=True)
class Collect:
    """One thing the subject must leave: a name in the session namespace or a layer of that name.

    ``what`` says how a ``command:`` subject writes it: ``array`` -> ``outputs/<name>.npy``,
    ``scalar``/``json`` -> ``outputs/<name>.json``.

    ``recorded``: no subject leaves it; the harness records it from a channel of its own (a
    trigger case's ``trace``: the skills it saw the subject activate, :mod:`imagebench.case.skills`).
    A binding or an ``outputs/`` file under its name is never read as it: it is noted as ignored.
    """

    name: str
    what: Literal["array", "scalar", "json"] = "array"
    description: str = ""
    # How a person at the viewer leaves it: as a layer of this kind (``labels`` painted, ``points``
    # clicked, ``image``), on the grid of the data layer ``like``; ``ordered`` points carry meaning
    # in their order. None: typed (a scalar or a structured answer in the panel's form, or an array
    # computed in the console). ``pairs``: ordered points given one for each point, in order, of
    # this points layer of the case (the panel counts them: "12 of 25 clicked").
    layer: LayerKind | None = None
    like: str | None = None
    ordered: bool = False
    recorded: bool = False
    pairs: str | None = None

    def __post_init__(self) -> None:
        if self.layer is not None and self.layer not in LAYER_KINDS:
            raise CaseError(f"leaving {self.name!r}: layer must be one of {LAYER_KINDS} or None, got {self.layer!r}")


Verifier = Callable[[Fixture, Attempt], Outcome]
# Called with the sample's imagebench.case.session.Session (not named here: the session module
# builds on this one, and a case never needs more of it than a callable taking one argument).
Reference = Callable[[Any], None]


@dataclass(frozen=True)
class Skill:
    """A skill and the checklist of routes it declares it touches (e.g. ``("dask", "tensor")``)."""

    skill_id: str
    checklist: tuple[str, ...] = ()
    about: str = ""


@dataclass(frozen=True)
class Case:
    case_id: str
    namespace: str
    task: str
    persona: str
    fixture: FixtureSpec
    layers: tuple[Layer, ...]
    collect: tuple[Collect, ...]
    verify: Verifier
    reference: Reference | None = None
    # A naive answer a person would try first (identity transform, a global threshold, "no
    # correction"): it must fail, so the limits are known to discriminate (the `baseline` subject).
    baseline: Reference | None = None
    baseline_about: str = ""
    case_class: CaseClass = "golden"
    revision: str = "2026.11.0"
    timeout_s: float = 120.0
    answer: Any = None  # a structured-answer task contract (imagebench.scoring), when the case has one
    about: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for what, value in (("case_id", self.case_id), ("namespace", self.namespace)):
            if not NAME_PATTERN.match(value):
                raise CaseError(f"case {self.namespace}/{self.case_id}: {what} {value!r} is not a lowercase name")
        if self.case_class not in CASE_CLASSES:
            raise CaseError(f"case {self.label}: class must be one of {CASE_CLASSES}, got {self.case_class!r}")
        names = [layer.name for layer in self.layers]
        if len(set(names)) != len(names):
            raise CaseError(f"case {self.label}: duplicate layer names {names}")
        for c in self.collect:
            if c.name not in self.task:
                raise CaseError(f"case {self.label}: the prompt must name what to leave ({c.name!r})")
            if c.like is not None and c.like not in names:
                raise CaseError(
                    f"case {self.label}: leaving {c.name!r} is like {c.like!r}, which is not a layer ({names})"
                )
            points = [layer.name for layer in self.layers if layer.kind == "points"]
            if c.pairs is not None and (c.layer != "points" or not c.ordered or c.pairs not in points):
                raise CaseError(
                    f"case {self.label}: leaving {c.name!r} pairs with {c.pairs!r}: only ordered points pair, "
                    f"with a points layer of the case ({points})"
                )

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.case_id}"

    @property
    def kind(self) -> str:
        return self.fixture.kind

    @property
    def tolerances(self) -> Mapping[str, float]:
        """The metric limits; they live on the fixture spec (one place)."""
        return self.fixture.tolerance

    @property
    def presentations(self) -> set[str]:
        return {layer.presentation for layer in self.layers}

    def available(self) -> tuple[bool, str]:
        try:
            return self.fixture.available(self.namespace, self.case_id)
        except Exception as exc:  # availability is a fact to report, never a crash
            return False, f"{type(exc).__name__}: {exc}"

    def build(self) -> Fixture:
        return self.fixture.build(self.namespace, self.case_id)

    def source(self) -> Source | None:
        """Where the pixels come from (a curated case's provenance and citation), without building."""
        return source_of(self.fixture, self.namespace, self.case_id)


def presentation_warnings(skills: Mapping[str, Skill], cases: Iterable[Case]) -> list[str]:
    """Presentation coverage per skill: a warning (never a failure) for each declared route no case presents."""
    by_skill: dict[str, set[str]] = {}
    for case in cases:
        by_skill.setdefault(case.namespace, set()).update(case.presentations)
    warnings: list[str] = []
    for skill_id, presented in sorted(by_skill.items()):
        skill = skills.get(skill_id)
        if skill is None:
            continue
        declared = list(skill.checklist)
        lazy = [c for c in declared if c in ("dask", "tensor")]
        if lazy and "tensor" not in presented:
            only = ", ".join(f"`{p}`" for p in sorted(presented)) or "nothing"
            warnings.append(
                f"{skill_id} declares {declared}, yet its cases present only {only}: every run hands the "
                "subject `client is None`, so neither the lazy read route nor a step that uploads a "
                "result has been benchmarked for this skill"
            )
    return warnings


def kind_counts(cases: Iterable[Case]) -> dict[str, dict[str, int]]:
    """Per skill (namespace), how many of its cases are synthetic and how many curated."""
    counts: dict[str, dict[str, int]] = {}
    for case in cases:
        per = counts.setdefault(case.namespace, {"synthetic": 0, "curated": 0})
        per[case.kind] = per.get(case.kind, 0) + 1
    return counts


def kind_warnings(cases: Iterable[Case]) -> list[str]:
    """A warning (never a failure) for each skill covered only one way: synthetic content can rank
    methods in the opposite order from real tissue, so a skill is worth a case of each kind."""
    out = []
    for skill, per in sorted(kind_counts(cases).items()):
        if skill == NO_SKILL:
            continue
        missing = [k for k in ("synthetic", "curated") if not per.get(k)]
        if missing:
            out.append(f"{skill} has no {missing[0]} case: it is covered one way only")
    return out


def select_cases(
    cases: Sequence[Case],
    patterns: Sequence[str] | None = None,
    fixtures: str = "all",
    *,
    exclude: Sequence[str] | None = None,
    skills: Sequence[str] | None = None,
) -> tuple[list[Case], list[str]]:
    """The cases a selection picks, in their order, and the patterns or skills that matched no case.

    A case is chosen when it matches any of ``patterns`` (all cases when there is none), is of
    a skill in ``skills`` (its namespace; any when there is none), is of fixture kind ``fixtures``
    (unless ``all``), and matches none of ``exclude``. Each pattern is read by one rule
    (:func:`pattern_matches`): a case's exact label selects that case alone; a pattern with
    ``*?[`` is a glob on the whole label or the whole case id; any other pattern is a substring
    of the label.
    """
    if fixtures not in FIXTURE_CHOICES:
        raise ValueError(f"fixtures must be one of {FIXTURE_CHOICES}, got {fixtures!r}")
    patterns = [p for p in (patterns or []) if p]
    exclude = [p for p in (exclude or []) if p]
    skills = [s for s in (skills or []) if s]
    labels = {c.label for c in cases}
    unmatched = [p for p in patterns if not any(pattern_matches(p, c, labels) for c in cases)]
    unmatched += [f"--exclude {p}" for p in exclude if not any(pattern_matches(p, c, labels) for c in cases)]
    unmatched += [f"--skill {s}" for s in skills if not any(c.namespace == s for c in cases)]
    chosen = [
        c
        for c in cases
        if (not patterns or any(pattern_matches(p, c, labels) for p in patterns))
        and (not skills or c.namespace in skills)
        and (fixtures == "all" or c.kind == fixtures)
        and not any(pattern_matches(p, c, labels) for p in exclude)
    ]
    return chosen, unmatched


GLOB_CHARS = "*?["


def pattern_matches(pattern: str, case: Case, labels: Iterable[str] = ()) -> bool:
    """Whether ``pattern`` picks ``case``: when it is exactly one of ``labels`` (the labels on
    offer) only that case; with ``*?[`` an fnmatch glob over the whole label or the whole case
    id (``segment-nuclei/*``, ``dsb2018*``); otherwise a substring of the label."""
    if pattern in labels or pattern == case.label:
        return case.label == pattern
    if any(ch in pattern for ch in GLOB_CHARS):
        return fnmatch.fnmatchcase(case.label, pattern) or fnmatch.fnmatchcase(case.case_id, pattern)
    return pattern in case.label
