"""Declared cases: a ``bench-case.json`` over a fixture tree's curated case, made a real :class:`Case`.

The declaration's format is :mod:`imagebench.case.declared`. Here it meets the tree it lies in:
``<root>/<namespace>/<case_id>/case.json`` (which file is data, which is truth) and
``<root>/manifest.json`` (their bytes, shape and dtype). :func:`declared_case` builds the case
over ``OnDisk(root=...)`` as the built-in curated cases are, its verifier a built-in one by name
(:mod:`imagebench.cases.verifiers`) or the user's ``pkg.mod:func``, its reference and baseline
``pkg.mod:func`` (:mod:`imagebench.cases.targets`, imported in the harness only). What can be
checked without reading pixels is checked when it loads, and an error names the file and the
field: every layer's key is a data key of ``case.json``, every key the verifier reads is a data
or truth key as it must be, every leaving the verifier reads is declared and every declared one
is read, every metric the verifier produces has a limit and no limit names another metric,
arrays the verifier scores on one grid have one shape in the manifest, and a declared pixel
``spacing`` gives one size per axis of the array it measures.

:func:`tree_cases` reads every declaration under a tree root and never raises for one bad case.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from imagebench.case.declared import DECLARATION, CaseDeclaration, DeclarationError, read_declaration
from imagebench.case.model import Case, CaseError, Collect, Layer
from imagebench.cases.targets import TargetError, TargetVerifier, call_of, is_target
from imagebench.cases.verifiers import VerifierError, limit_problems, named_kind
from imagebench.fixtures import tree
from imagebench.fixtures.fixture import FixtureError
from imagebench.fixtures.specs import OnDisk

#: ``Case.meta`` key: the declaration a case was made from (its path)
DECLARED_META = "declaration"
#: ``Case.meta`` key: the identity of each user target a case calls ({role: Target.identity()})
TARGETS_META = "targets"


def _fail(path: Path, where: str, problem: str) -> DeclarationError:
    return DeclarationError(f"{path}: field {where!r}: {problem}")


def _shapes(
    root: Path, declaration: CaseDeclaration, layout: tree.CaseLayout
) -> dict[tuple[str, str], tuple[int, ...]]:
    """``{(part, key): shape}`` as the manifest records it (nothing is read but the manifest)."""
    try:
        entry = tree.load_manifest(root).entry(declaration.skill, declaration.case_id)
    except FixtureError:
        return {}
    if entry is None:
        return {}
    out: dict[tuple[str, str], tuple[int, ...]] = {}
    for part in ("data", "truth"):
        for key, name in getattr(layout, part).items():
            spec_file = entry.files.get(name)
            if spec_file is None or not spec_file.arrays:
                continue
            spec = spec_file.arrays.get(key) if len(spec_file.arrays) > 1 else next(iter(spec_file.arrays.values()))
            if spec is not None:
                out[(part, key)] = tuple(spec.shape)
    return out


def _named_checks(path: Path, root: Path, declaration: CaseDeclaration, layout: tree.CaseLayout) -> None:
    name, params = declaration.verifier.name, declaration.verifier.params
    try:
        kind = named_kind(name)
        settled = kind.settle(params)
    except VerifierError as exc:
        field = "verifier.name" if "not a built-in verifier" in str(exc) else "verifier.params"
        raise _fail(path, field, str(exc)) from None
    for role, keys in (("data", layout.data), ("truth", layout.truth)):
        for param, key in kind.keys(settled, role).items():
            if key not in keys:
                other = "truth" if role == "data" else "data"
                also = (
                    f" (it is a {other} key: the verifier reads it as {role})" if key in getattr(layout, other) else ""
                )
                raise _fail(
                    path,
                    f"verifier.params.{param}",
                    f"{role} key {key!r} is not a {role} key of {tree.LAYOUT} ({sorted(keys)}){also}",
                )
    declared = [leaving.name for leaving in declaration.leave]
    read = kind.keys(settled, "leaving")
    for param, key in read.items():
        if key not in declared:
            raise _fail(
                path,
                f"verifier.params.{param}",
                f"the verifier reads leaving {key!r}, which 'leave' does not ask for ({declared})",
            )
    unread = [n for n in declared if n not in read.values()]
    if unread:
        raise _fail(
            path,
            "leave",
            f"{unread} would be asked for but never scored by verifier {name!r} (it reads {sorted(read.values())})",
        )
    for where, problem in limit_problems(name, settled, declaration.tolerance):
        raise _fail(path, where, problem)
    shapes = _shapes(root, declaration, layout)
    grid = {}
    for param in kind.same_grid:
        p = next(p for p in kind.params if p.name == param)
        key = settled.get(param)
        if key is not None and (p.role, key) in shapes:
            grid[f"{p.role} {key!r}"] = shapes[(p.role, key)]
    if len(set(grid.values())) > 1:
        shown = ", ".join(f"{k} {v}" for k, v in grid.items())
        raise _fail(
            path, "verifier.params", f"verifier {name!r} scores these on one grid, yet the manifest records {shown}"
        )
    spacing, sized = settled.get("spacing"), kind.spacing_of
    if spacing is not None and sized is not None and ("truth", settled.get(sized)) in shapes:
        shape = shapes[("truth", settled[sized])]
        if len(spacing) != len(shape):
            raise _fail(
                path,
                "verifier.params.spacing",
                f"{spacing} gives {len(spacing)} pixel sizes, but truth {settled[sized]!r} has {len(shape)} "
                f"dimensions {shape} in the manifest: one size per axis, in the array's order",
            )


def _target(path: Path, where: str, spec: str) -> Any:
    try:
        return call_of(spec)
    except TargetError as exc:
        raise _fail(path, where, str(exc)) from None


def declared_case(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> Case:
    """The :class:`Case` of the declaration at ``path`` over the fixture tree ``root``.

    Raises :class:`~imagebench.case.declared.DeclarationError` naming the file and the field.
    User code it names is imported here (the harness), never in a subject's sandbox.
    """
    path, root = Path(path), Path(root)
    declaration = read_declaration(path)
    layout_path = path.parent / tree.LAYOUT
    try:
        layout = tree.load_layout(root, declaration.skill, declaration.case_id)
    except FixtureError as exc:
        raise DeclarationError(f"{path}: the case's {tree.LAYOUT} cannot be used: {exc}") from None
    for i, layer in enumerate(declaration.layers):
        if layer.key not in layout.data:
            hint = " (it is a truth key: truth never reaches a subject)" if layer.key in layout.truth else ""
            raise _fail(
                path,
                f"layers.{i}.key",
                f"{layer.key!r} is not a data key of {layout_path} ({sorted(layout.data)}){hint}",
            )
    targets: dict[str, Any] = {}
    leavings = tuple(leaving.name for leaving in declaration.leave)
    if is_target(declaration.verifier.name):
        try:
            verify: Any = TargetVerifier.of(declaration.verifier.name, declaration.verifier.params, leavings)
        except TargetError as exc:
            raise _fail(path, "verifier.name", str(exc)) from None
        targets["verifier"] = {"target": verify.target, "digest": verify.digest}
    else:
        _named_checks(path, root, declaration, layout)
        verify = named_kind(declaration.verifier.name).make(declaration.verifier.params)
    reference = _target(path, "reference", declaration.reference) if declaration.reference else None
    baseline = _target(path, "baseline", declaration.baseline) if declaration.baseline else None
    for role, call in (("reference", reference), ("baseline", baseline)):
        if call is not None:
            targets[role] = {"target": call.target, "digest": call.digest}
    try:
        layers = tuple(
            Layer(
                name=layer.name,
                key=layer.key,
                kind=layer.kind,
                presentation=layer.presentation,
                scale=tuple(layer.scale) if layer.scale is not None else None,
                units=layer.units,
                colormap=layer.colormap,
                blending=layer.blending,
            )
            for layer in declaration.layers
        )
        collect = tuple(
            Collect(
                name=leaving.name,
                what=leaving.what,
                description=leaving.description,
                layer=leaving.layer,
                like=leaving.like,
                ordered=leaving.ordered,
            )
            for leaving in declaration.leave
        )
        return Case(
            case_id=declaration.case_id,
            namespace=declaration.skill,
            task=declaration.prompt,
            persona=declaration.persona,
            fixture=OnDisk(tolerance=dict(declaration.tolerance), root=str(root)),
            layers=layers,
            collect=collect,
            verify=verify,
            reference=reference,
            baseline=baseline,
            baseline_about=declaration.baseline_about,
            case_class=declaration.case_class,
            timeout_s=declaration.timeout_s,
            about=declaration.about or layout.about,
            meta={DECLARED_META: str(path), TARGETS_META: targets},
        )
    except CaseError as exc:
        raise DeclarationError(f"{path}: {exc}") from None


def tree_cases(root: str | os.PathLike[str]) -> tuple[list[Case], list[str]]:
    """The cases of every ``<namespace>/<case_id>/bench-case.json`` under ``root`` (sorted by label),
    and one message per declaration that could not be made a case (naming its file). Never raises
    for one bad case; a root that is not a folder is one message."""
    root = Path(root)
    if not root.is_dir():
        return [], [f"{root}: not a folder; a fixture tree root holds <namespace>/<case_id>/{DECLARATION}"]
    cases: list[Case] = []
    problems: list[str] = []
    for path in sorted(root.glob(f"*/*/{DECLARATION}")):
        try:
            cases.append(declared_case(path, root))
        except DeclarationError as exc:
            problems.append(str(exc))
        except Exception as exc:  # one bad case never hides the others
            problems.append(f"{path}: {type(exc).__name__}: {exc}")
    return cases, problems


__all__ = ["DECLARED_META", "TARGETS_META", "declared_case", "tree_cases"]
