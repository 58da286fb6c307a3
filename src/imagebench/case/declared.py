"""A case declared in a file, not in Python: ``bench-case.json``, beside the data it runs on.

A person's own case (saved from the viewer, written by ``imagebench case new``, or by hand) is
the curated fixture of a tree (``<namespace>/<case_id>/case.json`` says which file is data and
which is truth; ``manifest.json`` pins their bytes) plus this declaration: the prompt a subject
reads, the layers it is shown, what it must leave, the verifier that scores it (a built-in one by
name, or ``pkg.mod:func``) with its limits, and optionally the reference and baseline solutions
that calibrate those limits.

This module holds the format only: a versioned pydantic record with a JSON schema
(``imagebench schema case-declaration``) and :func:`read_declaration`, whose errors name the
file and the field. Turning a declaration into a :class:`imagebench.case.model.Case` needs the
verifiers and builders of the cases floor and lives there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from imagebench.case.model import CASE_CLASSES, LAYER_KINDS, NAME_PATTERN, CaseClass, LayerKind, Presentation
from imagebench.records import FrozenRecord

DECLARATION = "bench-case.json"
DECLARATION_VERSION = 1
DEFAULT_PERSONA = "a bio-image analyst with a Python session and napari"

#: ``pkg.mod:func``: a callable named by its module path and attribute (imported only by the harness)
TARGET_PATTERN = (
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
)


class DeclarationError(ValueError):
    """A declaration that cannot be used; the message names the file and the field."""


class DeclaredLayer(FrozenRecord):
    """One data key of the fixture shown to the subject (and the viewer) as a layer."""

    name: str = Field(description="the layer's name, and the session namespace's name for it")
    key: str = Field(description="the fixture data key it shows (a key of case.json's `data`)")
    kind: LayerKind = "image"
    presentation: Presentation = "array"
    scale: list[float] | None = Field(default=None, description="physical size of a pixel per axis")
    units: str | None = None
    colormap: str | None = None
    blending: str | None = None


class DeclaredLeaving(FrozenRecord):
    """One thing the subject must leave (:class:`imagebench.case.model.Collect`)."""

    name: str
    what: Literal["array", "scalar", "json"] = "array"
    description: str = ""
    layer: LayerKind | None = Field(
        default=None, description="how a person at the viewer leaves it: a layer of this kind (None: typed)"
    )
    like: str | None = Field(default=None, description="the data layer whose grid a layer leaving shares")
    ordered: bool = False

    @field_validator("layer")
    @classmethod
    def _kind(cls, value: str | None) -> str | None:
        if value is not None and value not in LAYER_KINDS:
            raise ValueError(f"must be one of {LAYER_KINDS} or null")
        return value


class DeclaredVerifier(FrozenRecord):
    """The verifier: a built-in one by name (``imagebench.cases.verifiers``) or ``pkg.mod:func``."""

    name: str = Field(min_length=1, description="a built-in verifier's name, or pkg.mod:func (trusted code)")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="the verifier's own settings: which data, truth and leaving keys it reads, a matching threshold",
    )


class CaseDeclaration(FrozenRecord):
    """The whole ``bench-case.json``."""

    version: Literal[1] = DECLARATION_VERSION
    skill: str = Field(description="the namespace: the skill id (the folder above the case's)")
    case_id: str = Field(description="the case's id (its folder's name)")
    prompt: str = Field(min_length=1, description="the task as the subject reads it; it names every leaving")
    persona: str = DEFAULT_PERSONA
    case_class: CaseClass = Field(default="golden", alias="class")
    about: str = ""
    layers: list[DeclaredLayer] = Field(min_length=1)
    leave: list[DeclaredLeaving] = Field(min_length=1)
    verifier: DeclaredVerifier
    tolerance: dict[str, float] = Field(description="metric name -> limit (a metric passes at or under it)")
    reference: str | None = Field(default=None, pattern=TARGET_PATTERN, description="pkg.mod:func solving the case")
    baseline: str | None = Field(default=None, pattern=TARGET_PATTERN, description="pkg.mod:func, the naive answer")
    baseline_about: str = ""
    timeout_s: float = Field(default=120.0, gt=0)

    model_config = FrozenRecord.model_config | {"populate_by_name": True}

    @field_validator("skill", "case_id")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_PATTERN.match(value):
            raise ValueError(f"{value!r} is not a lowercase name ({NAME_PATTERN.pattern})")
        return value

    @field_validator("case_class")
    @classmethod
    def _class(cls, value: str) -> str:
        if value not in CASE_CLASSES:
            raise ValueError(f"must be one of {CASE_CLASSES}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> CaseDeclaration:
        names = [layer.name for layer in self.layers]
        if len(set(names)) != len(names):
            raise ValueError(f"layers: duplicate names {names}")
        for leaving in self.leave:
            if leaving.name not in self.prompt:
                raise ValueError(f"leave: the prompt must name what to leave ({leaving.name!r})")
            if leaving.like is not None and leaving.like not in names:
                raise ValueError(f"leave: {leaving.name!r} is like {leaving.like!r}, which is not a layer ({names})")
        return self


def read_declaration(path: str | Path) -> CaseDeclaration:
    """Read and validate ``path``; a :class:`DeclarationError` names the file and the first bad field."""
    path = Path(path)
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise DeclarationError(f"{path}: file is missing") from None
    except UnicodeDecodeError as exc:
        raise DeclarationError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DeclarationError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(raw, dict):
        raise DeclarationError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    if raw.get("version") != DECLARATION_VERSION:
        raise DeclarationError(f"{path}: field 'version' is {raw.get('version')!r}, expected {DECLARATION_VERSION}")
    try:
        declaration = CaseDeclaration.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise DeclarationError(f"{path}: field {where!r}: {first['msg']}{more}") from None
    folder = path.parent
    if (declaration.skill, declaration.case_id) != (folder.parent.name, folder.name):
        raise DeclarationError(
            f"{path}: fields 'skill'/'case_id' are {declaration.skill!r}/{declaration.case_id!r}, expected "
            f"{folder.parent.name!r}/{folder.name!r} (the folders it lies in)"
        )
    return declaration


def declaration_json(declaration: CaseDeclaration) -> str:
    """The file's text: the fields by their aliases, two-space indented, a final newline."""
    return json.dumps(declaration.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2) + "\n"
