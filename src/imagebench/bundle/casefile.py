"""``case.json``: the classification and wiring of one authored case, as a lenient pydantic model.

The inherited fields (``schemaVersion``, ``case``, ``class``, ``risks``, ``setup``, ``grading``)
classify the case; ours say where its pixels come from (``pixels``), how they reach the subject
(``layers``), how its answer is scored (``answer``, a scoring task contract; or ``verifier``, a
built-in verifier by name or ``pkg.mod:func``, with ``leave``, ``reference`` and ``baseline``) and
within what limits (``tolerance``). Unknown fields are kept and reported as warnings (file and field named), never a
failure; a field of the wrong type is an error that keeps the case from running.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from imagebench.case.declared import TARGET_PATTERN, DeclaredLeaving, DeclaredVerifier
from imagebench.case.model import CASE_CLASSES, LayerKind, Presentation

CASE_JSON = "case.json"
PROMPT_MD = "prompt.md"
FILES_DIR = "files"
ANSWER_KEY = "expected/answer-key.md"
FIXTURES_DIR = "evals/fixtures"
CASE_SCHEMA_VERSION = 1
DEFAULT_RERUN_SAMPLES = 3


class _Lenient(BaseModel):
    """Keeps unknown fields (``model_extra``) so they can be reported instead of refused."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class SetupSpec(_Lenient):
    """What the run gets besides pixels: files copied into its workspace, environment variables."""

    files: str = Field(default="files/", description="folder (relative to the case) copied into the subject's workspace")
    env: dict[str, str] = Field(default_factory=dict, description="environment variables for a command: subject")


class GradingSpec(_Lenient):
    """Grading-only data: never shown to a subject."""

    answerKey: str = Field(default=ANSWER_KEY, description="the human answer key (never copied to a workspace)")
    checks: list[str] = Field(default_factory=list, description="a checklist a person grades by (shown in the viewer)")
    planted: Any = Field(
        default=None,
        description="hard-case: the value an untrusted file under files/ tries to make the subject answer",
    )
    samples: int = Field(
        default=DEFAULT_RERUN_SAMPLES,
        ge=2,
        description="rerun: the fewest samples the consistency check needs",
    )
    skill: str | None = Field(
        default=None, description="trigger: the skill whose activation is graded (default: the bundle's skill)"
    )
    distractors: list[str] = Field(
        default_factory=list,
        description="trigger: the other skills offered beside the graded one, by name: skill folders of the "
        "bundle's skills/ (SKILL.md) or built-in skills",
    )
    declineField: str = Field(default="decision", description="refusal: the answer field that carries the decision")
    declineValues: list[str] = Field(
        default_factory=lambda: ["decline"], description="refusal: the values of declineField that mean 'declined'"
    )


class CuratedRef(_Lenient):
    skill: str
    case_id: str


class PixelsSpec(_Lenient):
    """Where the pixels come from: a built-in builder and a seed, or a curated case of the fixture tree."""

    builder: str | None = Field(
        default=None, description="a name from imagebench.cases.builders(), or pkg.mod:func (the user's builder)"
    )
    seed: int = 0
    params: dict[str, Any] = Field(default_factory=dict)
    curated: CuratedRef | None = Field(
        default=None, description="a curated case read from $IMAGEBENCH_FIXTURES: {skill, case_id}"
    )

    @model_validator(mode="after")
    def _one_source(self) -> PixelsSpec:
        if (self.builder is None) == (self.curated is None):
            raise ValueError("give exactly one of 'builder' (with 'seed' and 'params') or 'curated' ({skill, case_id})")
        return self


class LayerSpec(_Lenient):
    name: str
    key: str
    kind: LayerKind = "image"
    presentation: Presentation = "array"
    chunks: list[int] | None = None
    dim_labels: list[str] | None = None


class CaseFile(_Lenient):
    """The whole ``case.json``."""

    schemaVersion: Literal[1]
    case: str
    case_class: str = Field(default="golden", alias="class", description=f"one of {', '.join(CASE_CLASSES)}")
    risks: list[str] = Field(default_factory=list, description="claim ids this case bears on (e.g. IN-1)")
    prompt: str | None = Field(default=None, description="legacy: the prompt now lives in prompt.md")
    setup: SetupSpec = Field(default_factory=SetupSpec)
    grading: GradingSpec = Field(default_factory=GradingSpec)
    pixels: PixelsSpec | None = None
    layers: list[LayerSpec] = Field(default_factory=list)
    answer: dict[str, Any] | None = Field(default=None, description="the scoring task contract (imagebench.scoring)")
    tolerance: dict[str, float] = Field(default_factory=dict)
    # instead of `answer`: a verifier (a built-in one by name, or pkg.mod:func), what to leave, the solutions
    verifier: DeclaredVerifier | None = Field(
        default=None, description="a built-in verifier by name (imagebench.cases.verifiers) or pkg.mod:func"
    )
    leave: list[DeclaredLeaving] = Field(default_factory=list, description="with 'verifier': what the subject leaves")
    reference: str | None = Field(default=None, pattern=TARGET_PATTERN, description="pkg.mod:func solving the case")
    baseline: str | None = Field(default=None, pattern=TARGET_PATTERN, description="pkg.mod:func, the naive answer")
    baseline_about: str = ""
    access: list[str] | None = Field(
        default=None,
        description="the access settings the case is meaningful under (files+code, files+code+tools, tools, "
        "views-N or views-<n>); a run under another skips it (default: every setting its inputs allow)",
    )

    @field_validator("access")
    @classmethod
    def _settings(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        from imagebench.sandbox.access import parse_access

        return [v if v == "views-N" else parse_access(v).name for v in value]

    @field_validator("risks")
    @classmethod
    def _strip(cls, value: list[str]) -> list[str]:
        return [r.strip() for r in value]


class CaseFileError(ValueError):
    """A case.json that cannot be used (names the file and the field)."""


def unknown_fields(model: BaseModel, prefix: str = "") -> list[str]:
    """Dotted paths of every field the model kept without knowing it, nested models included."""
    found = [f"{prefix}{key}" for key in sorted(model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        values = value if isinstance(value, list) else [value]
        for i, item in enumerate(values):
            if isinstance(item, BaseModel):
                where = f"{prefix}{name}[{i}]." if isinstance(value, list) else f"{prefix}{name}."
                found.extend(unknown_fields(item, where))
    return found


def parse_case_file(path: Path) -> CaseFile:
    """Read and validate ``path``; raises CaseFileError naming the file and the first bad field."""
    import json

    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise CaseFileError(f"{path}: file is missing") from None
    except UnicodeDecodeError as exc:
        raise CaseFileError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise CaseFileError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(raw, dict):
        raise CaseFileError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    if raw.get("schemaVersion") != CASE_SCHEMA_VERSION:
        raise CaseFileError(
            f"{path}: field 'schemaVersion' is {raw.get('schemaVersion')!r}, expected {CASE_SCHEMA_VERSION}"
        )
    try:
        return CaseFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise CaseFileError(f"{path}: field {where!r}: {first['msg']}{more}") from None


# --------------------------------------------------------------------------- scaffolding

PROMPT_SCAFFOLD = """\
Describe the task for the subject here, in prose: what it is given, what it must find, and the
exact form of its answer. A trigger case must not name the skill.
"""

ANSWER_KEY_SCAFFOLD = """\
# Answer key

Write what a correct answer looks like and why. This file is grading-only: it is never copied
into a subject's workspace.
"""


def scaffold_case_json(case_id: str, case_class: str, risks: list[str]) -> str:
    import json

    body = {"schemaVersion": CASE_SCHEMA_VERSION, "case": case_id, "class": case_class, "risks": risks}
    return json.dumps(body, indent=2) + "\n"


class OutsideBundleError(ValueError):
    """Authoring would write outside the bundle (a folder on the way is a link leading elsewhere)."""


def outside_bundle(bundle_dir: Path, case_id: str) -> str | None:
    """Why writing ``evals/fixtures/<case_id>/`` would leave the bundle, or None when it stays inside.

    Every folder on the way below the bundle is checked: one that is a symbolic link resolving
    outside the bundle (or not resolving at all) would carry the new files elsewhere.
    """
    root = bundle_dir.resolve()
    step = bundle_dir
    for part in (*Path(FIXTURES_DIR).parts, case_id):
        step = step / part
        if not step.is_symlink():
            continue
        try:
            target = step.resolve(strict=True)
        except (OSError, RuntimeError):
            return f"{step} is a symbolic link that does not resolve; case add writes only inside the bundle {bundle_dir}"
        if target != root and root not in target.parents:
            return f"{step} is a symbolic link to {target}, outside the bundle {bundle_dir}; case add writes only inside the bundle"
    return None


def scaffold_case(bundle_dir: Path, case_id: str, case_class: str, risks: list[str]) -> list[Path]:
    """Create ``evals/fixtures/<case_id>/`` with case.json, prompt.md, files/.gitkeep and the answer key.

    Refuses when the case folder exists (FileExistsError) or when a folder on the way is a link
    leading out of the bundle (:class:`OutsideBundleError`, naming it). Returns the files it created.
    """
    from imagebench.records import atomic_write_text

    case_dir = bundle_dir / FIXTURES_DIR / case_id
    why = outside_bundle(bundle_dir, case_id)
    if why is not None:
        raise OutsideBundleError(why)
    if case_dir.exists():
        raise FileExistsError(f"{case_dir} already exists; a case is never overwritten")
    case_dir.mkdir(parents=True)
    created = [
        atomic_write_text(case_dir / CASE_JSON, scaffold_case_json(case_id, case_class, risks)),
        atomic_write_text(case_dir / PROMPT_MD, PROMPT_SCAFFOLD),
        atomic_write_text(case_dir / FILES_DIR / ".gitkeep", ""),
        atomic_write_text(case_dir / ANSWER_KEY, ANSWER_KEY_SCAFFOLD),
    ]
    return created


@dataclass
class CaseFolder:
    """One ``evals/fixtures/<case>/`` folder as read from disk.

    ``problem`` says why it cannot run (no usable case.json, no prompt, an unknown class); it is
    None for a folder that may become a case.
    """

    case_id: str
    path: Path
    spec: CaseFile | None = None
    prompt: str | None = None
    problem: str | None = None

    @property
    def risks(self) -> list[str]:
        return list(self.spec.risks) if self.spec is not None else []

    @property
    def answer_key(self) -> Path | None:
        if self.spec is None:
            return None
        return self.path / self.spec.grading.answerKey
