"""Suite files: an ordered, pinned membership and the references that name it.

A :class:`SuiteManifest` (``suites/<suite id>.json``) pins a suite id at a revision and lists its
members in order, each a case label with the case's revision, its fingerprint and the digest of
every part the fingerprint was taken over. ``suite_fingerprint`` is a digest over the suite id, its
revision and the ordered ``(label, revision, fingerprint)`` triples: reordering the members makes
another suite, and a file whose id or revision was edited no longer matches its own fingerprint.
``requested`` and ``aliases`` only note how the pin was asked for; nothing reads them back.

A :class:`SuiteRef` (id, pinned revision, suite fingerprint) is what a run records. An alias file
(``suites/aliases.json``) maps moving names such as ``stable`` to a pinned revision; it is read
only when a suite is asked for by alias, never when a recorded pin is checked, so an alias that
moves later cannot change what a run was pinned to.

Loading a suite file checks its structure only (:func:`load_suite`); :func:`structural_problems`
rechecks its digests and :mod:`imagebench.suite.resolve` checks it against the installed cases
and the bytes on disk.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from imagebench.records import FrozenRecord
from imagebench.runs.fingerprint import (
    RevisionError,
    check_revision,
    digest_json,
    fingerprint_from_parts,
    is_digest,
    revision_problem,
)

# 2: the suite fingerprint covers the suite id and revision, members their built fixtures.
SUITE_SCHEMA_VERSION = 2
ALIASES_SCHEMA_VERSION = 1
ALIASES_NAME = "aliases.json"
SUITES_DIR = "suites"
SUITES_ENV = "IMAGEBENCH_SUITES"

_SUITE_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class SuiteError(ValueError):
    """A suite file, reference or alias file is missing, malformed or cannot be resolved."""


def _digest(value: str) -> str:
    if not is_digest(value):
        raise ValueError("expected 'sha256:' followed by 64 lowercase hex digits")
    return value


class SuiteRef(FrozenRecord):
    """Which suite, exactly: its id, its pinned revision and its fingerprint."""

    suite_id: str
    revision: str
    suite_fingerprint: str

    @field_validator("suite_fingerprint")
    @classmethod
    def _fp(cls, value: str) -> str:
        return _digest(value)

    def __str__(self) -> str:
        return f"{self.suite_id}@{self.revision} ({self.suite_fingerprint[:19]}...)"


class SuiteMember(FrozenRecord):
    label: str
    revision: str
    fingerprint: str
    parts: dict[str, str] = Field(default_factory=dict)

    @field_validator("fingerprint")
    @classmethod
    def _fp(cls, value: str) -> str:
        return _digest(value)

    @field_validator("parts")
    @classmethod
    def _parts(cls, value: dict[str, str]) -> dict[str, str]:
        for role, digest in value.items():
            if not is_digest(digest):
                raise ValueError(f"part {role!r}: expected 'sha256:' followed by 64 lowercase hex digits")
        return value

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if value.count("/") != 1 or not all(value.split("/")):
            raise ValueError(f"{value!r} is not a case label '<namespace>/<case_id>'")
        return value


class SuiteManifest(FrozenRecord):
    """``suites/<suite id>.json``: a suite pinned at a revision, members in order (order is identity)."""

    schema_version: Literal[2] = SUITE_SCHEMA_VERSION
    suite_id: str
    revision: str
    requested: str | None = Field(default=None, description="what was asked for when pinning, e.g. an alias")
    members: list[SuiteMember]
    suite_fingerprint: str
    aliases: dict[str, str] = Field(default_factory=dict, description="aliases that resolved to this revision when pinned")

    @field_validator("suite_fingerprint")
    @classmethod
    def _fp(cls, value: str) -> str:
        return _digest(value)

    @field_validator("suite_id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _SUITE_ID.match(value):
            raise ValueError(f"{value!r} is not a lowercase name ([a-z0-9][a-z0-9._-]*)")
        return value

    @property
    def ref(self) -> SuiteRef:
        return SuiteRef(suite_id=self.suite_id, revision=self.revision, suite_fingerprint=self.suite_fingerprint)

    @property
    def labels(self) -> list[str]:
        return [m.label for m in self.members]

    def member(self, label: str) -> SuiteMember | None:
        for m in self.members:
            if m.label == label:
                return m
        return None


class AliasFile(FrozenRecord):
    """``suites/aliases.json``: moving names -> pinned revisions (``{"aliases": {"stable": "2026.11.0"}}``)."""

    schema_version: Literal[1] = ALIASES_SCHEMA_VERSION
    aliases: dict[str, str] = Field(default_factory=dict)


# --------------------------------------------------------------------------- digests


def suite_fingerprint(suite_id: str, revision: str, members: list[SuiteMember] | list[tuple[str, str, str]]) -> str:
    """Digest over the suite id, its revision and the ordered ``(label, revision, fingerprint)`` of each member."""
    rows = [
        [m.label, m.revision, m.fingerprint] if isinstance(m, SuiteMember) else [m[0], m[1], m[2]] for m in members
    ]
    return digest_json({"schema_version": SUITE_SCHEMA_VERSION, "suite_id": suite_id, "revision": revision, "members": rows})


def structural_problems(manifest: SuiteManifest) -> list[tuple[str, str]]:
    """Every way the file disagrees with itself, as ``(role, reason)``: pins, duplicates and digests.

    Needs no case and no byte on disk: what a loaded file can check on its own.
    """
    sid = manifest.suite_id
    problems: list[tuple[str, str]] = []
    why = revision_problem(manifest.revision)
    if why is not None:
        problems.append((f"revision of suite {sid}", why))
    seen: set[str] = set()
    for i, m in enumerate(manifest.members):
        if m.label in seen:
            problems.append((f"member {i + 1} of suite {sid}", f"{m.label} is listed twice"))
        seen.add(m.label)
        why = revision_problem(m.revision)
        if why is not None:
            problems.append((f"revision of {m.label}", why))
        if not m.parts:
            problems.append((f"fingerprint of {m.label}", "the member records no parts to recheck it against"))
        elif fingerprint_from_parts(m.label, m.revision, m.parts) != m.fingerprint:
            problems.append(
                (f"fingerprint of {m.label}", "does not match the label, revision and parts recorded with it (edited by hand?)")
            )
    if not manifest.members:
        problems.append((f"members of suite {sid}", "the suite has no members"))
    recomputed = suite_fingerprint(sid, manifest.revision, manifest.members)
    if recomputed != manifest.suite_fingerprint:
        problems.append(
            (
                f"suite fingerprint of {sid}",
                f"the file records {manifest.suite_fingerprint[:19]}..., its id, revision and members give "
                f"{recomputed[:19]}... (the suite id or revision was edited, or a member edited, added, removed or reordered)",
            )
        )
    return problems


# --------------------------------------------------------------------------- reading and writing


def _fmt_error(exc: ValidationError) -> str:
    lines = []
    for e in exc.errors()[:5]:
        where = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"field {where!r}: {e['msg'].removeprefix('Value error, ')}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(lines) + more


def _read_model(path: Path, model: type[BaseModel], what: str, version: int, older: str = "") -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteError(f"{path}: {what} is missing") from None
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{path}: {what} is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SuiteError(f"{path}: {what} is not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise SuiteError(f"{path}: {what} must be a JSON object, got {type(raw).__name__}")
    found = raw.get("schema_version")
    if found != version:
        hint = older if isinstance(found, int) and not isinstance(found, bool) and found < version else ""
        raise SuiteError(f"{path}: field 'schema_version' is {found!r}; this imagebench reads {what} version {version}{hint}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise SuiteError(f"{path}: {_fmt_error(exc)}") from None


_OLDER_SUITE = (
    " (an older file's fingerprints cover neither the suite id and revision nor what each fixture builds to;"
    " pin the suite again)"
)


def load_suite(path: str | os.PathLike[str]) -> SuiteManifest:
    """Read a suite file, checking its structure (not its digests: see :func:`structural_problems`)."""
    return _read_model(Path(path), SuiteManifest, "suite file", SUITE_SCHEMA_VERSION, _OLDER_SUITE)


def write_suite(path: str | os.PathLike[str], manifest: SuiteManifest) -> Path:
    from imagebench.records import atomic_write_text

    return atomic_write_text(path, manifest.model_dump_json(indent=2) + "\n")


def suites_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where suite files live: ``explicit``, else ``$IMAGEBENCH_SUITES``, else ``./suites``."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(SUITES_ENV)
    return Path(env) if env else Path(SUITES_DIR)


def load_aliases(directory: str | os.PathLike[str]) -> dict[str, str]:
    """The alias map of ``<directory>/aliases.json`` (empty when there is none)."""
    path = Path(directory) / ALIASES_NAME
    if not path.exists():
        return {}
    aliases: AliasFile = _read_model(path, AliasFile, "alias file", ALIASES_SCHEMA_VERSION)
    for name, target in aliases.aliases.items():
        problem = revision_problem(target)
        if problem is not None:
            raise SuiteError(f"{path}: field 'aliases.{name}': the target {problem}")
    return dict(aliases.aliases)


def resolve_revision(requested: str, aliases: dict[str, str]) -> tuple[str, str | None]:
    """``(pinned revision, alias used or None)``: a pin passes through, an alias is looked up once.

    Raises SuiteError for a moving name no alias maps, or an unpinned revision.
    """
    if requested in aliases:
        return aliases[requested], requested
    try:
        return check_revision(requested, "revision"), None
    except RevisionError as exc:
        known = f" (the alias file defines {', '.join(sorted(aliases))})" if aliases else " (no alias file defines it)"
        raise SuiteError(f"{exc}{known}") from None


def make_manifest(
    suite_id: str,
    revision: str,
    members: list[SuiteMember],
    *,
    requested: str | None = None,
    aliases: dict[str, str] | None = None,
) -> SuiteManifest:
    """A suite manifest with its fingerprint filled in (the revision must be pinned)."""
    check_revision(revision, f"revision of suite {suite_id}")
    return SuiteManifest(
        suite_id=suite_id,
        revision=revision,
        requested=requested,
        members=list(members),
        suite_fingerprint=suite_fingerprint(suite_id, revision, members),
        aliases=dict(aliases or {}),
    )


def parse_suite_arg(value: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME@REVISION`` -> ``(name, revision or None)``; a path is returned unchanged."""
    if value.endswith(".json") or "/" in value or os.sep in value:
        return value, None
    name, sep, rev = value.partition("@")
    return name, (rev if sep else None)


def find_suite_file(name: str, revision: str | None, directory: Path) -> Path:
    """The file for suite ``name``: ``NAME@REVISION.json`` when a revision is given and it exists, else ``NAME.json``."""
    if revision is not None:
        pinned = directory / f"{name}@{revision}.json"
        if pinned.is_file():
            return pinned
    return directory / f"{name}.json"
