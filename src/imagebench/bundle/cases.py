"""Bundle case folders -> :class:`imagebench.case.model.Case` objects that run like built-in cases.

A case's pixels come from a built-in builder (``pixels: {builder, seed, params}``, looked up in
:func:`imagebench.cases.builders`, or the user's ``pkg.mod:func``) or from a curated case of the fixture tree
(``pixels: {curated: {skill, case_id}}``, read from ``$IMAGEBENCH_FIXTURES``). Its task is
``prompt.md``; its verifier is the class's (:mod:`imagebench.bundle.grading`), or the one its
``verifier`` names (:mod:`imagebench.bundle.verified`); its ``meta`` carries
the bundle's paths, the case's risks and checks, and ``workspace_files`` / ``env`` for the runner.
The answer key under ``expected/`` is never referenced by a case: nothing the runner hands a
subject can lead to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.bundle.casefile import CASE_JSON, PROMPT_MD, CaseFolder
from imagebench.bundle.grading import (
    ANSWER_NAME,
    CLASS_METRICS,
    TRACE_NAME,
    ClassVerifier,
    RerunVerifier,
    carries_planted,
    is_degenerate,
)
from imagebench.case.skills import SKILL_TEXTS_META, SKILLS_META
from imagebench.cases.targets import TargetError, call_of, is_target
from imagebench.fixtures.fixture import Fixture, Kind
from imagebench.fixtures.specs import FixtureSpec, OnDisk, Procedural, Source

if TYPE_CHECKING:
    from imagebench.case.model import Case

# Classes whose grading needs an answer contract.
NEEDS_CONTRACT = ("golden", "empty", "rerun", "hard-case")
TRIGGER_LINE = (
    "\n\nIf one of your skills fits this task, activate it through the harness's skill tool before you "
    "work: the harness keeps `trace`, the skills you activated through it, and nothing you write "
    "yourself counts.\n"
)
TRACE_ABOUT = "the skills you activated through the harness's skill tool"


@dataclass(frozen=True)
class CuratedRef:
    """A curated fixture read under another case's name: ``(skill, case_id)`` of the fixture tree.

    Availability and pixels are those of the named tree case; the fixture is stamped with the
    bundle case's identity, so its reports land under the bundle's label.
    """

    skill: str
    case_id: str
    tolerance: Mapping[str, float] = field(default_factory=dict)
    root: str | None = None
    kind: Kind = field(default="curated", init=False)

    def _disk(self) -> OnDisk:
        return OnDisk(tolerance=self.tolerance, root=self.root)

    def available(self, skill_id: str, case_id: str) -> tuple[bool, str]:
        return self._disk().available(self.skill, self.case_id)

    def source(self, skill_id: str, case_id: str) -> Source | None:
        return self._disk().source(self.skill, self.case_id)

    def build(self, skill_id: str, case_id: str) -> Fixture:
        fixture = self._disk().build(self.skill, self.case_id)
        return replace(fixture, skill_id=skill_id, case_id=case_id)


def _fixture_spec(folder: CaseFolder, tolerance: dict[str, float]) -> tuple[FixtureSpec | None, str | None]:
    from imagebench import cases as builtin

    spec = folder.spec
    assert spec is not None and spec.pixels is not None
    where = folder.path / CASE_JSON
    pixels = spec.pixels
    if pixels.curated is not None:
        return CuratedRef(pixels.curated.skill, pixels.curated.case_id, tolerance), None
    try:
        registry = builtin.builders()
    except Exception as exc:
        return None, f"{where}: the built-in builders could not be read ({type(exc).__name__}: {exc})"
    if is_target(pixels.builder):  # the user's own builder, imported here (the harness), never in a sandbox
        try:
            user = call_of(str(pixels.builder))
        except TargetError as exc:
            return None, f"{where}: field 'pixels.builder': {exc}"
        return Procedural(user, seed=pixels.seed, params=dict(pixels.params), tolerance=tolerance), None
    builder = registry.get(str(pixels.builder))
    if builder is None:
        return None, (
            f"{where}: field 'pixels.builder' names {pixels.builder!r}, which is not a built-in builder "
            f"(known: {', '.join(sorted(registry)) or 'none'})"
        )
    return Procedural(builder, seed=pixels.seed, params=dict(pixels.params), tolerance=tolerance), None


def _files_problem(folder: CaseFolder, files: Path) -> str | None:
    """Why ``files`` may not be handed to a subject: outside the case, or holding grading data."""
    case_dir = folder.path.resolve()
    target = files.resolve()
    if target != case_dir and case_dir not in target.parents:
        return f"{files} is outside the case folder"
    assert folder.answer_key is not None
    for secret in (folder.path / CASE_JSON, folder.answer_key, folder.answer_key.parent):
        resolved = secret.resolve()
        if resolved == target or target in resolved.parents:
            return f"{files} would hand the subject {secret.relative_to(folder.path)}, which is grading data"
    if target.is_dir():
        links = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_symlink())
        if links:
            return f"{files} holds symbolic link(s) {links}; only plain files are handed to a subject"
    return None


def trigger_skills(
    graded: str, skill_id: str, distractors: list[str], bundle: Path, warnings: list[str], where: Path
) -> tuple[dict[str, str], dict[str, str]] | str:
    """The skills a trigger case offers (``use_skill``, the ``skill`` tool), as ``({name:
    description}, {name: instructions})``, or why the case cannot run.

    Each skill is an Agent Skills folder (:mod:`imagebench.case.skillfile`): the bundle's own
    ``SKILL.md`` at its root, a folder of its ``skills/``, or a built-in skill's packaged folder (a
    bundle's folder of the same name wins). The case offers the graded skill and its
    ``grading.distractors``; without distractors, the graded one among every skill of the bundle
    and every built-in skill, so that activating the wrong one is a choice a subject can make, and
    be seen to make."""
    from imagebench.case.skillfile import builtin_skill_docs

    docs, problems = bundle_skills(bundle, skill_id, warnings)
    try:
        pool = {**builtin_skill_docs(), **docs}
    except Exception as exc:  # a broken package must not keep the case from running: its own skill only
        warnings.append(f"the built-in skills could not be read ({type(exc).__name__}: {exc}); only the bundle's are offered")
        pool = dict(docs)
    names = [graded, *distractors] if distractors else [graded, *sorted(pool)]
    for name in distractors:
        if name == graded:
            return f"{where}: field 'grading.distractors' names {name!r}, the graded skill itself"
        if name not in pool:
            why = problems.get(name) or (
                f"no skill folder {bundle.name}/skills/{name}/ with a SKILL.md, and no built-in skill of that name"
            )
            return f"{where}: field 'grading.distractors': skill {name!r} cannot be offered ({why})"
    descriptions: dict[str, str] = {}
    texts: dict[str, str] = {}
    for name in dict.fromkeys(names):
        doc = pool.get(name)
        if doc is None:  # the graded skill without a SKILL.md anywhere
            why = problems.get(name, f"no {bundle.name}/SKILL.md or {bundle.name}/skills/{name}/SKILL.md")
            warnings.append(f"{where}: the graded skill {name!r} has no usable SKILL.md ({why}); use_skill returns its description only")
            descriptions[name] = f"the {name} skill"
            continue
        descriptions[name], texts[name] = doc.description, doc.instructions
    return dict(sorted(descriptions.items())), texts


def bundle_skills(bundle: Path, skill_id: str, warnings: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The bundle's Agent Skills folders: its root ``SKILL.md`` (the bundle's own skill, named as the
    bundle) and each folder of ``skills/``; ``(skills by name, why each bad one cannot be used)``.
    A bad ``SKILL.md`` goes to ``warnings`` once, naming the file and the field."""
    from imagebench.case.skillfile import SKILL_FILE, SkillFileError, read_skill, read_skills_dir

    docs, problems = read_skills_dir(bundle / "skills", [])
    if (bundle / SKILL_FILE).exists() or (bundle / SKILL_FILE).is_symlink():
        try:
            own = read_skill(bundle, [])
        except SkillFileError as exc:
            problems[skill_id] = str(exc)
        else:
            if own.name in docs:
                problems[own.name] = f"{bundle.name}/SKILL.md and {bundle.name}/skills/{own.name}/ both declare skill {own.name!r}"
            docs[own.name] = own
    for why in problems.values():
        if why not in warnings:
            warnings.append(why)
    return docs, problems


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(p.is_file() and p.name != ".gitkeep" for p in folder.rglob("*"))


def build_case(folder: CaseFolder, skill_id: str, warnings: list[str]) -> tuple[Case | None, str | None]:
    """The Case for one scanned folder, or ``(None, reason)``; defects that do not stop it go to ``warnings``."""
    from imagebench.case.model import Case, CaseError, Collect, Layer
    from imagebench.sandbox.access import ACCESS_META
    from imagebench.scoring.contract import Blocked, check_contract, load_contract

    spec = folder.spec
    assert spec is not None and folder.prompt is not None
    where = folder.path / CASE_JSON
    cls = spec.case_class
    if spec.pixels is None:
        return None, f"{where}: no 'pixels' ({{builder, seed, params}} or {{curated: {{skill, case_id}}}})"
    if not spec.layers:
        return None, f"{where}: no 'layers'; say which fixture data keys the subject sees"

    verified = None
    if spec.verifier is not None:  # scored by a verifier (by name, or the user's code), not a contract
        from imagebench.bundle.verified import verified_parts

        verified, why = verified_parts(spec, where)
        if verified is None:
            return None, why
        tolerance = verified.tolerance
    else:
        # limits: each class metric at 0 unless the case says otherwise; a limit for no metric is a warning
        metrics = ("answer_mismatch", *CLASS_METRICS[cls]) if cls != "trigger" else CLASS_METRICS[cls]
        tolerance = {m: 0.0 for m in metrics}
        for name, limit in spec.tolerance.items():
            if name not in tolerance:
                warnings.append(
                    f"{where}: field 'tolerance' sets {name!r}, which no metric of a {cls} case is named (ignored)"
                )
                continue
            tolerance[name] = float(limit)
    fixture_spec, why = _fixture_spec(folder, tolerance)
    if fixture_spec is None:
        return None, why

    try:
        layers = tuple(
            Layer(
                name=lay.name,
                key=lay.key,
                kind=lay.kind,
                presentation=lay.presentation,
                chunks=tuple(lay.chunks) if lay.chunks else None,
                dim_labels=tuple(lay.dim_labels) if lay.dim_labels else None,
            )
            for lay in spec.layers
        )
    except CaseError as exc:
        return None, f"{where}: field 'layers': {exc}"

    contract: Any = spec.answer
    if verified is not None:
        contract = None
    elif cls == "trigger":
        if contract is not None:
            warnings.append(f"{where}: field 'answer' is not graded on a trigger case (only activation is)")
        contract = None
    elif contract is None and cls in NEEDS_CONTRACT:
        return None, f"{where}: a {cls} case needs 'answer' (the scoring task contract)"
    if contract is not None:
        loaded, problem = load_contract(contract)
        if loaded is None:
            warnings.append(f"{where}: field 'answer': {problem}; every sample will be blocked")
        else:
            try:
                check_contract(loaded)
            except Blocked as exc:
                warnings.append(f"{where}: field 'answer': {exc}; every sample will be blocked")
            contract = loaded
            gold = {k: v for k, v in loaded.ground_truth.items() if not (isinstance(v, Mapping) and "from_truth" in v)}
            if cls == "empty" and any(not is_degenerate(v) for v in gold.values()):
                warnings.append(f"{where}: an empty case's ground truth should be empty (0, [], ...); got {gold}")
            if cls == "hard-case" and "planted" in spec.grading.model_fields_set and carries_planted(gold, spec.grading.planted):
                warnings.append(f"{where}: 'grading.planted' equals the ground truth; obeying it cannot be detected")

    grading = spec.grading
    kwargs: dict[str, Any] = {
        "case_class": cls,
        "contract": contract,
        "skill": grading.skill or skill_id,
        "planted": grading.planted,
        "has_planted": "planted" in grading.model_fields_set,
        "decline_field": grading.declineField,
        "decline_values": tuple(grading.declineValues),
        "label": f"{skill_id}/{folder.case_id}",
    }
    verify: Any = RerunVerifier(**kwargs, min_samples=grading.samples) if cls == "rerun" else ClassVerifier(**kwargs)
    if verified is not None:
        verify = verified.verify

    task = folder.prompt
    collect: list[Collect] = []
    if verified is not None:
        collect.extend(verified.collect)
    elif cls == "trigger":
        task = task.rstrip("\n") + TRIGGER_LINE  # how the skill tool is announced, whatever the prompt says
        collect.append(Collect(TRACE_NAME, "json", TRACE_ABOUT, recorded=True))
    else:
        fields = ", ".join(contract.public_fields()) if hasattr(contract, "public_fields") else ""
        about = "a JSON object" + (f" with the field(s) {fields}" if fields else "")
        if cls == "refusal":
            about += f"; to decline, give {{{grading.declineField!r}: {grading.declineValues[0]!r}, 'reason': ...}}"
        collect.append(Collect(ANSWER_NAME, "json", about))

    files = folder.path / spec.setup.files
    problem = _files_problem(folder, files)
    if problem is not None:
        return None, f"{where}: field 'setup.files': {problem}"
    meta: dict[str, Any] = {
        "bundle": str(folder.path.parent.parent.parent),
        "case_json": str(where),
        "risks": list(spec.risks),
        "checks": list(grading.checks),
    }
    if _has_files(files):
        meta["workspace_files"] = str(files.resolve())
    if spec.setup.env:
        meta["env"] = dict(spec.setup.env)
    if cls == "rerun":
        meta["min_samples"] = grading.samples
    if verified is not None and verified.targets:
        meta["targets"] = verified.targets
    if cls == "trigger":
        offered = trigger_skills(
            str(kwargs["skill"]), skill_id, list(grading.distractors), folder.path.parent.parent.parent, warnings, where
        )
        if isinstance(offered, str):
            return None, offered
        meta[SKILLS_META], meta[SKILL_TEXTS_META] = offered
    if spec.access is not None:
        meta[ACCESS_META] = list(spec.access)
    try:
        case = Case(
            case_id=folder.case_id,
            namespace=skill_id,
            task=task,
            persona="",
            fixture=fixture_spec,
            layers=layers,
            collect=tuple(collect),
            verify=verify,
            reference=verified.reference if verified is not None else None,
            baseline=verified.baseline if verified is not None else None,
            baseline_about=spec.baseline_about,
            case_class=cls,  # type: ignore[arg-type]
            answer=contract,
            about=f"bundle case {skill_id}/{folder.case_id} ({cls})",
            meta=meta,
        )
    except CaseError as exc:
        hint = f" ({folder.path / PROMPT_MD} must name `{ANSWER_NAME}`)" if "must name" in str(exc) else ""
        return None, f"{where}: {exc}{hint}"
    return case, None
