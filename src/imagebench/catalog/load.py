"""Gathering a :class:`~imagebench.catalog.model.Catalog` from its sources, and opening a run's again.

The sources, in this order: the built-in suite (:mod:`imagebench.cases`); each module an installed
package names in the ``imagebench.cases`` entry-point group; each module given with ``--cases``
(a module name, or a ``.py`` file whose folder is put on ``sys.path``); each skill bundle
(:mod:`imagebench.bundle`); the cases declared by ``bench-case.json`` files in the user's fixture
tree (``--tree DIR``, or ``$IMAGEBENCH_FIXTURES``).

A case module follows the built-in modules' protocol: ``CASES`` (a list of
:class:`~imagebench.case.model.Case`), and optionally ``SKILLS`` (a list of
:class:`~imagebench.case.model.Skill`) and ``BUILDERS`` (a dict name -> builder).

Everything given by name fails loudly: a module that does not import or breaks the protocol, a
bundle or ``--tree`` that cannot be read, and a label two sources provide is a
:class:`~imagebench.catalog.model.CatalogError` naming the source. What arrives by itself is
warned about instead: an entry point of another installed package that is broken is a warning
(the others load), and so is a ``$IMAGEBENCH_FIXTURES`` tree whose declarations cannot be read.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from imagebench.catalog.model import BUILTIN_NAME, ENTRY_POINT_GROUP, Catalog, CatalogError, Source

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.records import CaseSourceRecord

PathLike = str | os.PathLike[str]


def user_tree() -> Path | None:
    """The user's fixture tree: ``$IMAGEBENCH_FIXTURES`` (None when it is not set)."""
    from imagebench.fixtures.fixture import FIXTURES_ENV

    value = os.environ.get(FIXTURES_ENV)
    return Path(value).expanduser() if value else None


def build_catalog(
    *,
    builtin: bool = True,
    entry_points: bool = True,
    modules: Iterable[str] = (),
    bundles: Iterable[PathLike] = (),
    tree: PathLike | None = None,
    env_tree: bool | PathLike = True,
) -> Catalog:
    """The cases of every source asked for, each with its source.

    ``modules``: ``--cases`` values; ``bundles``: bundle folders; ``tree``: a fixture tree whose
    declared cases join (an error when it cannot be read); without it, ``env_tree`` reads the
    user's tree, warnings only: ``True`` the one ``$IMAGEBENCH_FIXTURES`` names, a path that folder
    (the panel's chosen tree), ``False`` none. Raises :class:`CatalogError`.
    """
    catalog = Catalog()
    if builtin:
        open_builtin(catalog)
    if entry_points:
        open_entry_points(catalog)
    for spec in modules:
        source = module_source(spec)
        open_module(catalog, source)
        catalog.named.append(source)
    for folder in bundles:
        catalog.named.append(open_bundle(catalog, folder))
    if tree is not None:
        catalog.named.append(open_tree(catalog, tree, strict=True))
    elif env_tree is not False:
        root = user_tree() if env_tree is True else Path(env_tree)
        if root is not None:
            open_tree(catalog, root, strict=False)
    return catalog


# --------------------------------------------------------------------------- each source


def open_builtin(catalog: Catalog) -> None:
    from imagebench import cases as builtin

    source = Source("builtin", BUILTIN_NAME, module=BUILTIN_NAME)
    try:
        cases = builtin.all_cases()
        catalog.skills.update(builtin.skills())
        catalog.builders.update(builtin.builders())
    except Exception as exc:
        raise CatalogError(f"{source} cannot be listed: {type(exc).__name__}: {exc}") from None
    catalog.add_source(source)
    for case in cases:
        catalog.add(case, source)


def module_source(spec: str) -> Source:
    """The source ``--cases SPEC`` names: a module name, or a path to a ``.py`` file."""
    text = str(spec).strip()
    if not text:
        raise CatalogError("--cases: expected a module name or a .py file, got an empty value")
    if text.endswith(".py") or os.sep in text or (os.altsep and os.altsep in text):
        path = Path(text).expanduser().resolve()
        if not path.is_file():
            raise CatalogError(f"--cases {text}: no such file (expected a Python module: a name, or a .py file)")
        if not path.stem.isidentifier():
            raise CatalogError(f"--cases {text}: {path.name!r} is not a module name (letters, digits and '_')")
        return Source("module", path.stem, module=path.stem, path=str(path))
    if not all(part.isidentifier() for part in text.split(".")):
        raise CatalogError(f"--cases {text!r}: expected a module name (a.b.c) or a .py file")
    return Source("module", text, module=text)


def _import(source: Source) -> ModuleType:
    """Import ``source``'s module (its file's folder on ``sys.path`` first); CatalogError naming it."""
    assert source.module is not None
    if source.path is not None:
        path = Path(source.path)
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)  # dask workers and prefetchers take the driver's sys.path
        loaded = sys.modules.get(source.module)
        if loaded is not None and getattr(loaded, "__file__", None) is not None:
            if Path(loaded.__file__).resolve() != path.resolve():
                raise CatalogError(
                    f"{source}: a module named {source.module} is already imported from {loaded.__file__}; "
                    "rename the file"
                )
    try:
        return importlib.import_module(source.module)
    except Exception as exc:
        raise CatalogError(f"{source}: {type(exc).__name__}: {exc}") from None


def _protocol(source: Source, module: ModuleType) -> tuple[list[Case], list[Any], dict[str, Any]]:
    """The module's ``CASES``, ``SKILLS`` and ``BUILDERS``, checked; CatalogError naming the field."""
    from imagebench.case.model import Case, Skill

    where = f"{source} ({getattr(module, '__file__', None) or 'no file'})"
    cases = getattr(module, "CASES", None)
    if cases is None:
        raise CatalogError(f"{where}: field 'CASES' is missing: a case module defines CASES, a list of Case")
    if not isinstance(cases, (list, tuple)) or not all(isinstance(c, Case) for c in cases):
        bad = next((c for c in cases if not isinstance(c, Case)), cases) if isinstance(cases, (list, tuple)) else cases
        raise CatalogError(f"{where}: field 'CASES' must be a list of imagebench Case, found a {type(bad).__name__}")
    skills = getattr(module, "SKILLS", [])
    if not isinstance(skills, (list, tuple)) or not all(isinstance(s, Skill) for s in skills):
        raise CatalogError(f"{where}: field 'SKILLS' must be a list of imagebench Skill")
    builders = getattr(module, "BUILDERS", {})
    if not isinstance(builders, dict) or not all(isinstance(k, str) and callable(v) for k, v in builders.items()):
        raise CatalogError(f"{where}: field 'BUILDERS' must be a dict of name -> builder (a callable)")
    return list(cases), list(skills), dict(builders)


def open_module(catalog: Catalog, source: Source) -> None:
    """Add the cases (and skills, builders) of ``source``'s module; CatalogError naming it."""
    cases, skills, builders = _protocol(source, _import(source))
    catalog.add_source(source)
    for case in cases:
        catalog.add(case, source)
    for skill in skills:
        known = catalog.skills.get(skill.skill_id)
        if known is not None and known != skill:
            catalog.warnings.append(f"{source}: skill {skill.skill_id} is also declared elsewhere; the first is kept")
            continue
        catalog.skills[skill.skill_id] = skill
    for name, builder in builders.items():
        if name in catalog.builders and catalog.builders[name] is not builder:
            catalog.warnings.append(f"{source}: a builder named {name!r} is already known; the first is kept")
            continue
        catalog.builders[name] = builder


def _entry_points() -> Sequence[Any]:
    """The installed entry points of the ``imagebench.cases`` group."""
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


def entry_point_source(ep: Any) -> Source:
    dist = getattr(ep, "dist", None)
    dist_name = None
    if dist is not None:
        try:
            dist_name = dist.metadata["Name"] or getattr(dist, "name", None)
        except Exception:
            dist_name = None
    return Source("entry-point", ep.name, module=ep.value, dist=dist_name)


def open_entry_points(catalog: Catalog) -> None:
    """Each installed package's case module: a broken one is a warning and the others load; a label
    one of them shares with another source is still an error."""
    seen = {s.module for s in catalog.sources if s.module}
    try:
        points = _entry_points()
    except Exception as exc:  # a broken installation's metadata
        catalog.warnings.append(f"the {ENTRY_POINT_GROUP} entry points cannot be read: {type(exc).__name__}: {exc}")
        return
    for ep in points:
        source = entry_point_source(ep)
        if getattr(ep, "attr", None):
            catalog.warnings.append(
                f"{source}: names an attribute ({ep.value}); an {ENTRY_POINT_GROUP} entry point names a module "
                "(my_pkg.cases); its cases are left out"
            )
            continue
        if source.module in seen:
            continue
        seen.add(source.module)
        try:
            cases, skills, builders = _protocol(source, _import(source))
        except CatalogError as exc:
            catalog.warnings.append(f"{exc}; its cases are left out")
            continue
        catalog.add_source(source)
        for case in cases:
            catalog.add(case, source)
        for skill in skills:
            catalog.skills.setdefault(skill.skill_id, skill)
        for name, builder in builders.items():
            catalog.builders.setdefault(name, builder)


def open_bundle(catalog: Catalog, folder: PathLike) -> Source:
    """A skill bundle's runnable cases; those it cannot build are kept as unavailable, with why."""
    from imagebench.bundle.load import load_bundle

    path = Path(folder).expanduser()
    try:
        bundle = load_bundle(path)
    except Exception as exc:
        raise CatalogError(f"bundle {folder}: cannot be loaded: {type(exc).__name__}: {exc}") from None
    source = Source("bundle", bundle.skill_id, path=str(path.resolve()))
    catalog.add_source(source)
    catalog.warnings.extend(f"bundle {bundle.skill_id}: {w}" for w in bundle.warnings)
    for case in bundle.cases:
        catalog.add(case, source)
    for case_id, why in bundle.skipped:
        catalog.unavailable.setdefault(f"{bundle.skill_id}/{case_id}", str(why))
    return source


def declared_tree_cases(root: Path) -> tuple[list[Case], list[str]]:
    """The cases ``bench-case.json`` files declare in the fixture tree at ``root``, and warnings
    (:func:`imagebench.cases.declared.tree_cases`)."""
    from imagebench.cases.declared import tree_cases  # type: ignore[import-not-found, unused-ignore]

    cases, warnings = tree_cases(root)
    return list(cases), list(warnings)


def open_tree(catalog: Catalog, root: PathLike, *, strict: bool) -> Source:
    """The cases declared in the tree at ``root``. ``strict`` (``--tree``, a resume): a tree that
    cannot be read is a CatalogError; otherwise (``$IMAGEBENCH_FIXTURES``) a warning."""
    path = Path(root).expanduser().resolve()
    source = Source("tree", str(path), path=str(path))
    if source in catalog.sources:
        return source

    def problem(text: str) -> None:
        if strict:
            raise CatalogError(text)
        catalog.warnings.append(text)

    if not path.is_dir():
        problem(f"{source}: no such folder (expected a fixture tree with its manifest.json)")
        return source
    try:
        cases, warnings = declared_tree_cases(path)
    except ModuleNotFoundError as exc:
        if exc.name == "imagebench.cases.declared":
            problem(f"{source}: its declared cases are not read: imagebench.cases.declared is not installed")
            return source
        problem(f"{source}: its declared cases cannot be read: {type(exc).__name__}: {exc}")
        return source
    except Exception as exc:
        problem(f"{source}: its declared cases cannot be read: {type(exc).__name__}: {exc}")
        return source
    catalog.add_source(source)
    catalog.warnings.extend(f"{source}: {w}" for w in warnings)
    for case in cases:
        catalog.add(case, source)
    return source


# --------------------------------------------------------------------------- a run's sources again


def open_source(catalog: Catalog, source: Source) -> None:
    """Open ``source`` again (from a run's record) into ``catalog``, strictly; CatalogError names it."""
    if source.kind == "builtin":
        open_builtin(catalog)
    elif source.kind in ("module", "entry-point"):
        cases, _, _ = _protocol(source, _import(source))
        catalog.add_source(source)
        for case in cases:
            if case.label not in catalog:
                catalog.add(case, source)
    elif source.kind == "bundle":
        open_bundle(catalog, source.path or source.name)
    else:
        open_tree(catalog, source.path or source.name, strict=True)


def reopen(records: Sequence[CaseSourceRecord], given: Catalog | None = None) -> Catalog:
    """A catalog holding every case ``records`` name: ``given``'s cases, then each recorded source
    that gives a label ``given`` lacks, opened again.

    A recorded source that cannot be opened again is a :class:`CatalogError` naming the source,
    the cases it gave and the flag that gives them again (a module moved, a bundle deleted).
    """
    catalog = given if given is not None else Catalog()
    for record in records:
        source = Source.from_record(record)
        lacking = [label for label in record.cases if label not in catalog]
        if not lacking:
            continue
        scratch = Catalog()
        try:
            open_source(scratch, source)
        except CatalogError as exc:
            flag = f"; give {source.flag}" if source.flag else ""
            raise CatalogError(
                f"the run's cases {', '.join(lacking)} came from {source}, which cannot be opened again: {exc}{flag}"
            ) from None
        catalog.add_source(source)
        for label in lacking:
            case = scratch.get(label)
            if case is not None:
                catalog.add(case, source)
        catalog.warnings.extend(scratch.warnings)
        catalog.unavailable.update(scratch.unavailable)
    return catalog
