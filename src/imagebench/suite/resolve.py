"""Resolving a suite: its file against the installed cases, the bundles given and the bytes on disk.

:func:`verify_suite` reports *every* failure, each as a :class:`Problem` whose role is said in
words (``"truth 'labels' of segment-nuclei/dsb2018"``) and never as a local path:

- the suite id, revision or fingerprint differ from what was asked for or recorded;
- the file disagrees with itself (a member reordered or edited by hand; see
  :func:`imagebench.suite.model.structural_problems`);
- a member is not installed, or its revision or any part of its fingerprint changed, including
  the bytes its fixture builds to (each member's fixture is built again and digested);
- a curated member's data or held-out truth file no longer has the digest the fixture manifest
  records (every file is re-hashed);
- a prompt, persona or description is not valid UTF-8 text.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from imagebench.runs.fingerprint import collect_parts, role_of, scrub
from imagebench.suite.model import SuiteManifest, SuiteRef, structural_problems

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.catalog import Catalog


BUILT_CHANGED = (
    "changed since the pin: the fixture builds to other bytes (a helper the builder calls, a library it uses "
    "or a file it reads changed)"
)
NOT_DETERMINISTIC = "two builds gave other bytes: the builder is not deterministic in its seed and params, so it cannot be pinned"


@dataclass(frozen=True)
class Problem:
    """One failure: which role, and what is wrong with it."""

    role: str
    reason: str

    def __str__(self) -> str:
        return f"{self.role}: {self.reason}"


@dataclass
class CaseSource:
    """The cases a suite may resolve against: the built-in ones and those of the bundles given."""

    cases: dict[str, Case] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # label -> "built-in" | "bundle <skill id>"
    unavailable: dict[str, str] = field(default_factory=dict)  # label -> why a bundle could not build it
    problems: list[Problem] = field(default_factory=list)
    catalog: Catalog | None = None  # the catalog it was made from (catalog_source), for a run's sources

    def add(self, case: Case, origin: str) -> None:
        label = case.label
        if label in self.cases:
            self.problems.append(
                Problem(f"case {label}", f"provided twice ({self.origins[label]} and {origin}); a label names one case")
            )
            return
        self.cases[label] = case
        self.origins[label] = origin

    @property
    def ordered(self) -> list[Case]:
        return list(self.cases.values())


def case_source(bundles: Iterable[str | os.PathLike[str]] = (), *, builtin: bool = True) -> CaseSource:
    """Gather the built-in cases and every bundle's runnable cases; problems are collected, not raised."""
    source = CaseSource()
    if builtin:
        from imagebench import cases as builtin_cases

        try:
            for case in builtin_cases.all_cases():
                source.add(case, "built-in")
        except Exception as exc:
            source.problems.append(Problem("built-in cases", f"cannot be listed: {type(exc).__name__}: {scrub(str(exc))}"))
    for folder in bundles:
        name = Path(folder).name or str(folder)
        try:
            from imagebench.bundle import load_bundle

            bundle = load_bundle(folder)
        except Exception as exc:
            source.problems.append(Problem(f"bundle {name}", f"cannot be loaded: {type(exc).__name__}: {scrub(str(exc))}"))
            continue
        for case in bundle.cases:
            source.add(case, f"bundle {bundle.skill_id}")
        for case_id, why in bundle.skipped:
            source.unavailable.setdefault(f"{bundle.skill_id}/{case_id}", scrub(str(why)))
    return source


def catalog_source(catalog: Catalog) -> CaseSource:
    """The cases of a catalog (:mod:`imagebench.catalog`), each with its source as origin."""
    source = CaseSource(catalog=catalog)
    for case in catalog:
        source.add(case, str(catalog.source_of(case.label)))
    for label, why in catalog.unavailable.items():
        source.unavailable.setdefault(label, scrub(why))
    return source


def _as_source(cases: CaseSource | Mapping[str, Case] | Sequence[Case]) -> CaseSource:
    if isinstance(cases, CaseSource):
        return cases
    source = CaseSource()
    for case in cases.values() if isinstance(cases, Mapping) else cases:
        source.add(case, "given")
    return source


def _file_problems(case: Case, on_file: Callable[[str], None] | None) -> list[Problem]:
    """Re-hash every data and truth file of an on-disk member against the manifest's digest."""
    from imagebench.fixtures import tree
    from imagebench.fixtures.fixture import FixtureError
    from imagebench.runs.fingerprint import tree_location

    located = tree_location(case)
    if located is None:
        return []
    label = case.label
    root, ns, case_id = located
    if root is None:
        return []  # the fingerprint already said the tree is unavailable
    try:
        manifest = tree.load_manifest(root)
        layout = tree.load_layout(root, ns, case_id)
    except FixtureError:
        return []  # idem: reported once, by the fingerprint
    entry = manifest.entry(ns, case_id)
    if entry is None:
        return []
    folder = Path(root) / ns / case_id
    problems: list[Problem] = []
    hashed: dict[str, str | None] = {}
    for part in ("data", "truth"):
        for key, name in sorted(getattr(layout, part).items()):
            role = role_of(f"{part}:{key}", label)
            recorded = entry.files.get(name)
            if recorded is None:
                continue  # reported by the fingerprint
            if name not in hashed:
                path = folder / name
                try:
                    real = path.resolve()
                    if not real.is_relative_to(Path(root).resolve()):
                        hashed[name] = None
                        problems.append(Problem(role, "its file resolves outside the fixture tree"))
                        continue
                    if on_file is not None:
                        on_file(role)
                    hashed[name] = tree.sha256_file(real)
                except FileNotFoundError:
                    hashed[name] = None
                    problems.append(Problem(role, "its file is missing"))
                    continue
                except OSError as exc:
                    hashed[name] = None
                    problems.append(Problem(role, f"its file cannot be read ({exc.strerror or type(exc).__name__})"))
                    continue
            digest = hashed[name]
            if digest is not None and digest != recorded.sha256:
                problems.append(
                    Problem(
                        role,
                        f"the bytes on disk hash to {digest[:16]}..., the fixture manifest records "
                        f"{recorded.sha256[:16]}... (the file was swapped or edited)",
                    )
                )
    return problems


def verify_suite(
    manifest: SuiteManifest,
    cases: CaseSource | Mapping[str, Case] | Sequence[Case],
    *,
    expect: SuiteRef | None = None,
    suite_id: str | None = None,
    revision: str | None = None,
    check_bytes: bool = True,
    on_member: Callable[[str], None] | None = None,
    on_file: Callable[[str], None] | None = None,
) -> list[Problem]:
    """Every way ``manifest`` fails to resolve here; empty when it resolves exactly.

    ``expect`` is a recorded pin (a run's suite ref) the file must match; ``suite_id`` and
    ``revision`` are what was asked for (an alias already resolved). ``check_bytes`` re-hashes the
    curated files. ``on_member(label)`` and ``on_file(role)`` report progress.
    """
    source = _as_source(cases)
    sid = manifest.suite_id
    problems: list[Problem] = list(source.problems)
    if suite_id is not None and suite_id != sid:
        problems.append(Problem("suite id", f"asked for {suite_id!r}, the suite file pins {sid!r}"))
    if revision is not None and revision != manifest.revision:
        problems.append(
            Problem(f"revision of suite {sid}", f"asked for {revision!r}, the suite file pins {manifest.revision!r}")
        )
    if expect is not None:
        if expect.suite_id != sid:
            problems.append(Problem("suite id", f"the record names {expect.suite_id!r}, the suite file pins {sid!r}"))
        if expect.revision != manifest.revision:
            problems.append(
                Problem(
                    f"revision of suite {sid}",
                    f"the record pins {expect.revision!r}, the suite file pins {manifest.revision!r}",
                )
            )
        if expect.suite_fingerprint != manifest.suite_fingerprint:
            problems.append(
                Problem(
                    f"suite fingerprint of {sid}",
                    f"the record pins {expect.suite_fingerprint[:19]}..., the suite file has "
                    f"{manifest.suite_fingerprint[:19]}...",
                )
            )
    problems.extend(Problem(role, reason) for role, reason in structural_problems(manifest))

    for member in manifest.members:
        label = member.label
        if on_member is not None:
            on_member(label)
        case = source.cases.get(label)
        if case is None:
            why = source.unavailable.get(label)
            problems.append(
                Problem(
                    f"case {label}",
                    f"a bundle holds it but it cannot be built: {why}"
                    if why
                    else "not installed: no built-in case or bundle given provides it (give the --cases MODULE, "
                    "--bundle DIR or --tree DIR that does)",
                )
            )
            continue
        if case.revision != member.revision:
            problems.append(
                Problem(f"revision of {label}", f"the suite pins {member.revision!r}, the installed case is {case.revision!r}")
            )
        parts, part_problems = collect_parts(case)
        problems.extend(Problem(f"case {label}", p) for p in part_problems)
        if not part_problems:
            for role in sorted(set(member.parts) | set(parts)):
                pinned, now = member.parts.get(role), parts.get(role)
                if pinned == now:
                    continue
                if pinned is None:
                    why = "the installed case has it and the pin does not"
                elif now is None:
                    why = "the pin has it and the installed case does not"
                elif role.startswith("built:"):
                    why = BUILT_CHANGED
                else:
                    why = "changed since the pin"
                problems.append(Problem(role_of(role, label), why))
        if check_bytes:
            problems.extend(_file_problems(case, on_file))
    return problems


def resolve_members(manifest: SuiteManifest, source: CaseSource, labels: Sequence[str]) -> list[Case]:
    """The installed cases for ``labels`` (call :func:`verify_suite` first), in the order given."""
    missing = [label for label in labels if label not in source.cases or manifest.member(label) is None]
    if missing:
        raise KeyError(f"not members of {manifest.suite_id} resolvable here: {', '.join(missing)}")
    return [source.cases[label] for label in labels]


def pin_suite(
    suite_id: str,
    revision: str,
    cases: Sequence[Case],
    *,
    requested: str | None = None,
    aliases: Mapping[str, str] | None = None,
    check_bytes: bool = True,
) -> tuple[SuiteManifest | None, list[Problem]]:
    """Pin ``cases`` (in this order) as suite ``suite_id`` at ``revision``.

    Returns the manifest and no problems, or None and every problem: a case whose revision is not
    pinned, an input that cannot be digested, a curated file whose bytes already differ from the
    fixture manifest. ``revision`` must already be resolved (see ``model.resolve_revision``).
    """
    from imagebench.runs.fingerprint import RevisionError, fingerprint_from_parts
    from imagebench.suite.model import SuiteMember, make_manifest

    problems: list[Problem] = []
    members: list[SuiteMember] = []
    seen: set[str] = set()
    for case in cases:
        label = case.label
        if label in seen:
            problems.append(Problem(f"case {label}", "selected twice"))
            continue
        seen.add(label)
        parts, part_problems = collect_parts(case)
        if part_problems:
            problems.extend(Problem(f"case {label}", p) for p in part_problems)
            continue
        members.append(
            SuiteMember(
                label=label,
                revision=case.revision,
                fingerprint=fingerprint_from_parts(label, case.revision, parts),
                parts=parts,
            )
        )
    if not cases:
        problems.append(Problem(f"members of suite {suite_id}", "no case was selected"))
    if problems:
        return None, problems
    try:
        manifest = make_manifest(suite_id, revision, members, requested=requested, aliases=dict(aliases or {}))
    except RevisionError as exc:
        return None, [Problem(f"revision of suite {suite_id}", str(exc))]
    problems = verify_suite(manifest, list(cases), check_bytes=check_bytes)
    # Nothing changed between pinning and this check but the builds themselves.
    problems = [Problem(p.role, NOT_DETERMINISTIC) if p.reason == BUILT_CHANGED else p for p in problems]
    return (None, problems) if problems else (manifest, [])
