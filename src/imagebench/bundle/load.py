"""Reading a bundle: its claims, its case folders and every warning about them.

A bundle is one skill's folder::

    <skill id>/
      evals.json                   claims (preferred), or
      evals/risk-map.md            legacy claims
      evals/fixtures/<case>/
        case.json                  classification and wiring (imagebench.bundle.casefile.CaseFile)
        prompt.md                  the task, in prose
        files/                     copied into the subject's workspace
        expected/answer-key.md     grading-only; never reaches a subject

Nothing a subject is handed may lead to grading data: ``reindex`` warns when a file under
``files/`` has the same bytes as one under ``expected/`` (or as the answer key), and when the
prompt points at ``expected/`` or names the answer key. Warnings, like every bundle check here:
authoring is never blocked.

:func:`scan_bundle` reads everything and collects warnings without building anything; it is what
``imagebench reindex`` prints. :func:`load_bundle` goes on to turn each runnable case folder into
an :class:`imagebench.case.model.Case` (see :mod:`imagebench.bundle.cases`); a folder that cannot become
one is listed in ``skipped`` with the reason, never raised.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from imagebench.bundle.casefile import (
    ANSWER_KEY_SCAFFOLD,
    CASE_JSON,
    FIXTURES_DIR,
    PROMPT_MD,
    PROMPT_SCAFFOLD,
    CaseFileError,
    CaseFolder,
    parse_case_file,
    unknown_fields,
)
from imagebench.bundle.claims import Claims, read_claims, risk_band, unbanded_warning
from imagebench.case.model import (  # what a case id or namespace may be
    CASE_CLASSES,
    NAME_PATTERN,
)

if TYPE_CHECKING:
    from imagebench.case.model import Case

# grading fields that mean something for one class only
_CLASS_FIELDS = {
    "planted": "hard-case",
    "samples": "rerun",
    "skill": "trigger",
    "distractors": "trigger",
    "declineField": "refusal",
    "declineValues": "refusal",
}


class BundleError(ValueError):
    """The folder is not a bundle at all (missing, or its name is not a skill id)."""


@dataclass
class Bundle:
    """A skill's bundle: its claims, its cases (runnable), and what could not be used and why."""

    skill_id: str
    path: Path
    claims: Claims
    folders: list[CaseFolder] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def case_ids(self) -> set[str]:
        """Every case folder's name: what proof specs are matched against (runnable or not)."""
        return {f.case_id for f in self.folders}


def _skill_id(root: Path) -> str:
    if not root.is_dir():
        raise BundleError(f"{root}: not a folder; a bundle is a skill's folder holding evals.json and evals/fixtures/")
    name = root.resolve().name
    if not NAME_PATTERN.match(name):
        raise BundleError(
            f"{root}: the bundle folder's name {name!r} is its skill id and must be a lowercase name "
            "(letters, digits, '.', '_' or '-')"
        )
    return name


def _read_prompt(path: Path, warnings: list[str]) -> str | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        warnings.append(f"{path}: cannot be read ({exc.strerror or exc})")
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        warnings.append(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start}); the prompt cannot be used")
        return None


def read_case_folder(path: Path, skill_id: str, claims: Claims, warnings: list[str]) -> CaseFolder:
    """Read one case folder, appending a warning (naming the file) for every defect."""
    folder = CaseFolder(case_id=path.name, path=path)
    if not NAME_PATTERN.match(path.name):
        folder.problem = f"the case folder name {path.name!r} is not a lowercase name"
        warnings.append(f"{path}: {folder.problem}; the case cannot run")
        return folder
    case_json = path / CASE_JSON
    try:
        spec = parse_case_file(case_json)
    except CaseFileError as exc:
        folder.problem = str(exc)
        warnings.append(f"{exc}; the case cannot run")
        return folder
    folder.spec = spec
    for name in unknown_fields(spec):
        warnings.append(f"{case_json}: unknown field {name!r} (ignored)")
    if spec.case != path.name:
        warnings.append(
            f"{case_json}: field 'case' is {spec.case!r} but the folder is {path.name!r}; the folder name is the case id"
        )
    if "case_class" not in spec.model_fields_set:
        warnings.append(f"{case_json}: no 'class' field; the case is treated as golden")
    if spec.case_class not in CASE_CLASSES:
        folder.problem = f"unknown class {spec.case_class!r} (expected one of {', '.join(CASE_CLASSES)})"
        warnings.append(f"{case_json}: field 'class': {folder.problem}; the case cannot run")
    for rid in spec.risks:
        if risk_band(rid) is None:
            warnings.append(unbanded_warning(f"{case_json}: field 'risks'", rid))
        elif claims.source != "none" and rid not in claims.ids():
            warnings.append(f"{case_json}: field 'risks' names {rid!r}, which is not a claim of this bundle ({claims.source})")

    prompt_path = path / PROMPT_MD
    prompt = _read_prompt(prompt_path, warnings)
    if spec.prompt is not None:
        if prompt is None and not prompt_path.exists():
            warnings.append(
                f"{case_json}: legacy field 'prompt' holds the task; move it to {PROMPT_MD} beside case.json "
                "(it is used for now)"
            )
            prompt = spec.prompt
        else:
            warnings.append(
                f"{case_json}: legacy field 'prompt' is ignored because {PROMPT_MD} exists; delete the field"
            )
    elif not prompt_path.exists():
        warnings.append(f"{prompt_path}: missing; every case needs its task in {PROMPT_MD}")
    if prompt is not None and not prompt.strip():
        warnings.append(f"{prompt_path}: empty; the case has no task")
        prompt = None
    if prompt is not None and prompt.strip() == PROMPT_SCAFFOLD.strip():
        warnings.append(f"{prompt_path}: still holds the scaffold text; write the task")
    folder.prompt = prompt
    if prompt is None and folder.problem is None:
        folder.problem = f"no usable prompt ({PROMPT_MD})"

    key = path / spec.grading.answerKey
    if not key.is_file():
        warnings.append(f"{key}: answer key missing (grading.answerKey); a person grading this case has no key")
    elif key.suffix == ".md" and key.read_bytes().strip() == ANSWER_KEY_SCAFFOLD.strip().encode():
        warnings.append(f"{key}: still holds the scaffold text; write the answer key")
    files = path / spec.setup.files
    if "files" in spec.setup.model_fields_set and not files.is_dir():
        warnings.append(f"{case_json}: field 'setup.files' names {spec.setup.files!r}, which is not a folder")
    if spec.case_class == "trigger" and prompt is not None and skill_id.lower() in prompt.lower():
        warnings.append(f"{prompt_path}: a trigger case's prompt names the skill {skill_id!r}; it must not")
    if spec.case_class == "trigger" and prompt is not None and "trace" in prompt.lower():
        warnings.append(
            f"{prompt_path}: a trigger case's prompt mentions a trace; the harness records the activations itself "
            "(its skill tool, or use_skill over MCP) and ignores any trace the subject writes: do not ask for one"
        )
    for name, owner in _CLASS_FIELDS.items():
        if name in spec.grading.model_fields_set and spec.case_class != owner:
            warnings.append(f"{case_json}: field 'grading.{name}' applies to {owner} cases only; it is ignored here")
    if prompt is not None:
        source = prompt_path if prompt_path.exists() else case_json
        warnings.extend(prompt_leaks(prompt, source, path, key))
    warnings.extend(file_leaks(path, files, key))
    if spec.case_class == "hard-case" and "planted" not in spec.grading.model_fields_set:
        if files.is_dir() and any(p.name != ".gitkeep" for p in files.rglob("*") if p.is_file()):
            warnings.append(
                f"{case_json}: a hard-case with files under {spec.setup.files} records no 'grading.planted' value; "
                "whether the subject obeyed planted text cannot be checked"
            )
    return folder


# --------------------------------------------------------------------------- grading data a subject could reach


def _grading_files(case_dir: Path, key: Path) -> list[Path]:
    """The answer key and every file beside it under its folder (``expected/``), links left out."""
    found: list[Path] = []
    folder = key.parent
    if folder.is_dir() and folder.resolve() != case_dir.resolve():  # a key at the case root: the key alone
        found = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    if key.is_file() and not key.is_symlink() and key not in found:
        found.append(key)
    return found


def _sha256(path: Path, cache: dict[Path, str | None]) -> str | None:
    if path not in cache:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            cache[path] = h.hexdigest()
        except OSError:
            cache[path] = None
    return cache[path]


def file_leaks(case_dir: Path, files: Path, key: Path) -> list[str]:
    """A warning for each file under ``files`` that is grading data: the same bytes as the answer
    key or a file beside it, or a symbolic link into them. Only files of equal size are hashed."""
    if not files.is_dir():
        return []
    grading = _grading_files(case_dir, key)
    if not grading:
        return []
    by_size: dict[int, list[Path]] = {}
    for g in grading:
        by_size.setdefault(g.stat().st_size, []).append(g)
    secret_dir = key.parent.resolve() if key.parent.resolve() != case_dir.resolve() else None
    cache: dict[Path, str | None] = {}
    out: list[str] = []
    for path in sorted(files.rglob("*")):
        if path.is_symlink():
            target = path.resolve()
            if target == key.resolve() or (secret_dir is not None and target.is_relative_to(secret_dir)):
                out.append(f"{path}: links to grading data ({_rel(target, case_dir)}); a subject is never handed the answer")
            continue
        if not path.is_file():
            continue
        size = path.stat().st_size
        if size == 0 or size not in by_size:
            continue  # an empty file gives nothing away
        digest = _sha256(path, cache)
        same = [g for g in by_size[size] if digest is not None and _sha256(g, cache) == digest]
        if same:
            out.append(
                f"{path}: the same bytes as {_rel(same[0], case_dir)} (sha256 {digest[:12]}...); files/ reaches the "
                "subject's workspace, so this hands it grading data"
            )
    return out


_POINTS_AT_GRADING = "grading data is never in the subject's workspace, and a prompt must not point at it"


def prompt_leaks(prompt: str, source: Path, case_dir: Path, key: Path) -> list[str]:
    """A warning when the prompt points at the grading folder (``expected/``) or names the answer key."""
    text = prompt.casefold()
    tokens: list[str] = []
    if key.parent.resolve() != case_dir.resolve():
        tokens.append(_rel(key.parent, case_dir).rstrip("/") + "/")
    tokens.append(key.name)
    named = [t for t in tokens if t.casefold() in text]
    if not named:
        return []
    mentioned = " and ".join(repr(t) for t in named)
    return [f"{source}: the prompt mentions {mentioned}; {_POINTS_AT_GRADING}"]


def _rel(path: Path, case_dir: Path) -> str:
    try:
        return path.relative_to(case_dir).as_posix()
    except ValueError:
        try:
            return path.resolve().relative_to(case_dir.resolve()).as_posix()
        except ValueError:
            return path.name


def scan_bundle(bundle_dir: str | Path) -> Bundle:
    """Read a bundle's claims and case folders with every warning, building no case."""
    root = Path(bundle_dir)
    skill_id = _skill_id(root)
    claims = read_claims(root)
    bundle = Bundle(skill_id=skill_id, path=root, claims=claims, warnings=list(claims.warnings))
    fixtures = root / FIXTURES_DIR
    if not fixtures.is_dir():
        bundle.warnings.append(f"{fixtures}: missing; the bundle has no cases (imagebench case add {root} <case>)")
        return bundle
    for path in sorted(p for p in fixtures.iterdir() if p.is_dir() and not p.name.startswith(".")):
        folder = read_case_folder(path, skill_id, claims, bundle.warnings)
        bundle.folders.append(folder)
        if folder.problem is not None:
            bundle.skipped.append((folder.case_id, folder.problem))
    return bundle


def load_bundle(bundle_dir: str | Path) -> Bundle:
    """Scan the bundle, then build a :class:`~imagebench.case.model.Case` for every runnable case folder."""
    from imagebench.bundle.cases import build_case, bundle_skills

    bundle = scan_bundle(bundle_dir)
    bundle_skills(bundle.path, bundle.skill_id, bundle.warnings)  # a bad SKILL.md is named once, trigger case or not
    builtin_labels = _builtin_labels(bundle.warnings)
    for folder in bundle.folders:
        if folder.problem is not None:
            continue
        label = f"{bundle.skill_id}/{folder.case_id}"
        if label in builtin_labels:
            bundle.warnings.append(
                f"{folder.path}: {label} is also a built-in case; their runs share a folder name and "
                "cannot be told apart in coverage; rename the case folder"
            )
        case, problem = build_case(folder, bundle.skill_id, bundle.warnings)
        if case is None:
            bundle.skipped.append((folder.case_id, problem or "it could not be built"))
        else:
            bundle.cases.append(case)
    return bundle


def _builtin_labels(warnings: list[str]) -> set[str]:
    try:
        from imagebench import cases as builtin

        return {c.label for c in builtin.all_cases()}
    except Exception as exc:  # a broken built-in suite must not hide the bundle
        warnings.append(f"the built-in cases could not be listed ({type(exc).__name__}: {exc}); labels are not checked")
        return set()


def bundle_cases(bundle_dir: str | Path) -> list[Case]:
    """The runnable cases of the bundle at ``bundle_dir`` (what ``imagebench run --bundle`` runs)."""
    return load_bundle(bundle_dir).cases
