"""Agent Skills folders: a skill as a folder holding ``SKILL.md``, YAML front matter then instructions.

The format is the Agent Skills one (agentskills.io)::

    segment-nuclei/
      SKILL.md         ---
                       name: segment-nuclei
                       description: What the skill does and when to use it.
                       ---
                       # Instructions in Markdown (what use_skill returns)

Front matter fields: ``name`` (required: 1 to 64 lowercase letters, digits and hyphens, no leading,
trailing or doubled hyphen, the folder's own name), ``description`` (required: 1 to 1024
characters), and the optional ``license``, ``compatibility`` (at most 500 characters),
``metadata`` (a mapping of text to text) and ``allowed-tools``; another field is a warning. The
front matter is read as the YAML the format uses: ``key: value`` lines, a value plain, single- or
double-quoted, or a folded (``>``) or literal (``|``) block on the indented lines below, and
``metadata:`` with indented ``key: value`` lines. Anything else is an error naming the file, the
line and the field. ``SKILL.md`` is read as UTF-8, at most :data:`MAX_SKILL_BYTES`, never through a
symbolic link; the instructions must not be empty.

The built-in skills' folders are packaged under ``imagebench/data/skills/`` (:func:`builtin_skill_docs`).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ConfigDict, Field, ValidationError

from imagebench.records import FrozenRecord

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 256 * 1024
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
KNOWN_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
NAME_RULE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
BUILTIN_ROOT = Path(__file__).resolve().parent.parent / "data" / "skills"
_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):(?:\s+(.*?))?\s*$")


class SkillFrontMatter(FrozenRecord):
    """The front matter of a ``SKILL.md``, as the Agent Skills format (agentskills.io) specifies it.
    Not one of the bench's own formats (``imagebench schema`` lists those, each versioned): the
    format has no version field, and a skill folder written for any agent must read here as it is."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(
        min_length=1, max_length=MAX_NAME, pattern=NAME_RULE.pattern, description="the skill's name: its folder's"
    )
    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION, description="what it does and when to use it")
    license: str | None = None
    compatibility: str | None = Field(default=None, max_length=MAX_COMPATIBILITY)
    metadata: dict[str, str] = Field(default_factory=dict)
    allowed_tools: str | None = Field(
        default=None, alias="allowed-tools", description="pre-approved tools (experimental)"
    )


class SkillFileError(ValueError):
    """A ``SKILL.md`` that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class SkillDoc:
    """One skill as its ``SKILL.md`` declares it."""

    name: str
    description: str
    instructions: str
    source: str  # where it was read from, for messages: "<folder>/SKILL.md" or "built-in"
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: str | None = None

    def digest_parts(self) -> dict[str, str]:
        """What a subject is shown of the skill (the case fingerprint hashes it)."""
        return {"name": self.name, "description": self.description, "instructions": self.instructions}


def read_skill(folder: Path, warnings: list[str] | None = None) -> SkillDoc:
    """The skill in ``folder`` (its ``SKILL.md``); :class:`SkillFileError` naming file and field.
    An unknown front-matter field goes to ``warnings``."""
    path = Path(folder) / SKILL_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SkillFileError(f"{path}: file is missing (a skill folder holds SKILL.md)") from None
    except OSError as exc:
        raise SkillFileError(f"{path}: cannot be read ({exc.strerror or exc}; a symbolic link is refused)") from None
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(MAX_SKILL_BYTES + 1)
    if len(raw) > MAX_SKILL_BYTES:
        raise SkillFileError(f"{path}: larger than {MAX_SKILL_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFileError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    doc = parse_skill_text(text, str(path), warnings=warnings)
    if doc.name != Path(folder).name:
        raise SkillFileError(
            f"{path}: field 'name' is {doc.name!r}, but the folder is {Path(folder).name!r}; they must match"
        )
    return doc


def parse_skill_text(text: str, where: str, *, warnings: list[str] | None = None) -> SkillDoc:
    """A ``SKILL.md``'s text as a :class:`SkillDoc` (``where`` names it in every message)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillFileError(
            f"{where}: must start with YAML front matter ('---' on the first line, then name and description)"
        )
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillFileError(f"{where}: the front matter is never closed (a second '---' line)") from None
    fields = _front_matter(lines[1:end], where)
    for name in sorted(set(fields) - set(KNOWN_FIELDS)):
        if warnings is not None:
            warnings.append(f"{where}: unknown front-matter field {name!r} (known: {', '.join(KNOWN_FIELDS)})")
    name = _text_field(fields, "name", where, required=True)
    assert name is not None
    if len(name) > MAX_NAME or not NAME_RULE.match(name):
        raise SkillFileError(
            f"{where}: field 'name' is {name!r}; expected 1 to {MAX_NAME} lowercase letters, digits and hyphens, "
            "not starting or ending with a hyphen, no two hyphens together"
        )
    description = _text_field(fields, "description", where, required=True)
    assert description is not None
    if len(description) > MAX_DESCRIPTION:
        raise SkillFileError(
            f"{where}: field 'description' has {len(description)} characters; at most {MAX_DESCRIPTION}"
        )
    compatibility = _text_field(fields, "compatibility", where)
    if compatibility is not None and len(compatibility) > MAX_COMPATIBILITY:
        raise SkillFileError(
            f"{where}: field 'compatibility' has {len(compatibility)} characters; at most {MAX_COMPATIBILITY}"
        )
    metadata = fields.get("metadata", {})
    if not isinstance(metadata, dict):
        raise SkillFileError(
            f"{where}: field 'metadata' must be a mapping of text to text (indented 'key: value' lines)"
        )
    instructions = "\n".join(lines[end + 1 :]).strip()
    if not instructions:
        raise SkillFileError(f"{where}: no instructions after the front matter (what use_skill returns)")
    known = {k: v for k, v in fields.items() if k in KNOWN_FIELDS}
    known.update(name=name, description=description)
    try:
        front = SkillFrontMatter.model_validate(known)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SkillFileError(f"{where}: field {'.'.join(str(p) for p in first['loc'])!r}: {first['msg']}") from None
    return SkillDoc(
        name=front.name,
        description=front.description,
        instructions=instructions,
        source=where,
        license=_text_field(fields, "license", where),
        compatibility=front.compatibility,
        metadata=dict(front.metadata),
        allowed_tools=_text_field(fields, "allowed-tools", where),
    )


def _text_field(fields: Mapping[str, object], name: str, where: str, *, required: bool = False) -> str | None:
    value = fields.get(name)
    if value is None:
        if required:
            raise SkillFileError(f"{where}: field {name!r} is missing from the front matter (required)")
        return None
    if not isinstance(value, str):
        raise SkillFileError(f"{where}: field {name!r} must be text, not a mapping")
    if required and not value.strip():
        raise SkillFileError(f"{where}: field {name!r} is empty")
    return value.strip()


def _front_matter(lines: list[str], where: str) -> dict[str, object]:
    """The YAML subset of the format: ``key: value``, quoted values, ``>``/``|`` blocks, one nested mapping."""
    out: dict[str, object] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        number = i + 2  # the file's line number (line 1 is the opening '---')
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        if line[0] in " \t":
            raise SkillFileError(f"{where}: line {number}: an indented line belongs to no field")
        m = _KEY.match(line)
        if m is None:
            raise SkillFileError(f"{where}: line {number}: expected 'field: value', got {line.strip()[:60]!r}")
        key, value = m.group(1), m.group(2) or ""
        if key in out:
            raise SkillFileError(f"{where}: line {number}: field {key!r} is given twice")
        block: list[str] = []
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or lines[j][0] in " \t"):
            block.append(lines[j])
            j += 1
        while block and not block[-1].strip():
            block.pop()
        if value in (">", "|", ">-", "|-", ">+", "|+"):
            stripped = [b.strip() for b in block]
            if value.startswith(">"):
                out[key] = " ".join(s for s in stripped if s)
            else:
                out[key] = "\n".join(stripped)
        elif value == "" and block:
            nested: dict[str, str] = {}
            for k, b in enumerate(block):
                if not b.strip():
                    continue
                n = _KEY.match(b.strip())
                if n is None:
                    raise SkillFileError(f"{where}: line {i + k + 3}: field {key!r}: expected indented 'key: value'")
                nested[n.group(1)] = _scalar(n.group(2) or "", where, f"{key}.{n.group(1)}", i + k + 3)
            out[key] = nested
        else:
            if block:
                raise SkillFileError(
                    f"{where}: line {i + 3}: field {key!r}: a value continues on an indented line; use '>' or '|'"
                )
            out[key] = _scalar(value, where, key, number)
        i = j
    return out


def _scalar(value: str, where: str, key: str, number: int) -> str:
    if value[:1] == '"':
        try:
            parsed = json.loads(value)
        except ValueError:
            raise SkillFileError(
                f"{where}: line {number}: field {key!r}: a double-quoted value must close on its line"
            ) from None
        if not isinstance(parsed, str):
            raise SkillFileError(f"{where}: line {number}: field {key!r}: expected text")
        return parsed
    if value[:1] == "'":
        if len(value) < 2 or not value.endswith("'"):
            raise SkillFileError(f"{where}: line {number}: field {key!r}: a single-quoted value must close on its line")
        return value[1:-1].replace("''", "'")
    if value[:1] in ("[", "{", "&", "*", "!", "@", "`"):
        raise SkillFileError(
            f"{where}: line {number}: field {key!r}: {value[:1]!r} starts YAML this reader does not take; quote the text"
        )
    return value


def read_skills_dir(root: Path, warnings: list[str]) -> tuple[dict[str, SkillDoc], dict[str, str]]:
    """Every skill folder under ``root`` (a bundle's ``skills/``): ``(skills by name, problems by
    folder name)``; a folder whose ``SKILL.md`` cannot be used is a problem, never a skill."""
    skills: dict[str, SkillDoc] = {}
    problems: dict[str, str] = {}
    if not root.is_dir():
        return skills, problems
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            skills[folder.name] = read_skill(folder, warnings)
        except SkillFileError as exc:
            problems[folder.name] = str(exc)
    return skills, problems


@functools.cache
def _builtin() -> tuple[tuple[str, SkillDoc], ...]:
    warnings: list[str] = []
    skills, problems = read_skills_dir(BUILTIN_ROOT, warnings)
    if problems or warnings:  # the package's own files: a defect is the package's, never a subject's
        raise SkillFileError("; ".join([*problems.values(), *warnings]))
    return tuple(skills.items())


def builtin_skill_docs() -> dict[str, SkillDoc]:
    """The built-in skills' ``SKILL.md`` folders (``imagebench/data/skills/<id>/``), by name."""
    return dict(_builtin())


__all__ = [
    "BUILTIN_ROOT",
    "MAX_SKILL_BYTES",
    "SKILL_FILE",
    "SkillDoc",
    "SkillFileError",
    "SkillFrontMatter",
    "builtin_skill_docs",
    "parse_skill_text",
    "read_skill",
    "read_skills_dir",
]
