"""Where a command's cases come from: the flags ``--cases``, ``--bundle`` and ``--tree``, the one
function that builds the catalog from them (:func:`catalog_from_args`), and the words for a case's
source and tree that ``list`` and ``show`` print. Every command that looks cases up calls it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.cli import UsageError

if TYPE_CHECKING:
    from imagebench.catalog import Catalog
    from imagebench.records import RunRecord


def add_catalog_flags(p: argparse.ArgumentParser, *, bundle: bool = True) -> None:
    """``--cases MODULE`` and ``--tree DIR`` (and ``--bundle DIR`` unless the command has its own)."""
    g = p.add_argument_group("where cases come from (besides the built-in cases and installed packages')")
    g.add_argument(
        "--cases",
        dest="case_modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="a Python module of cases (a name, or a .py file) defining CASES, and optionally SKILLS and "
        "BUILDERS, as the built-in case modules do; repeatable",
    )
    if bundle:
        g.add_argument(
            "--bundle", action="append", default=[], metavar="DIR", help="a skill bundle's cases; repeatable"
        )
    g.add_argument(
        "--tree",
        metavar="DIR",
        help="a fixture tree whose bench-case.json files declare cases (default: $IMAGEBENCH_FIXTURES's)",
    )


def bundles_of(args: argparse.Namespace) -> list[str]:
    value = getattr(args, "bundle", None)
    if not value:
        return []
    if isinstance(value, (str, Path)):
        return [str(value)]
    return [str(v) for v in value]


def sources_given(args: argparse.Namespace) -> list[str]:
    """The catalog flags given, as typed (``--resume`` says which it needs)."""
    words = source_flags(args)
    return [f"{flag} {value}" for flag, value in zip(words[::2], words[1::2], strict=True)]


def source_flags(args: argparse.Namespace) -> list[str]:
    """The catalog flags given, as command-line words (each flag, then its value as typed)."""
    words: list[str] = []
    for module in getattr(args, "case_modules", None) or []:
        words += ["--cases", str(module)]
    for folder in bundles_of(args):
        words += ["--bundle", folder]
    if getattr(args, "tree", None):
        words += ["--tree", str(args.tree)]
    return words


def source_flags_needed(args: argparse.Namespace, record: RunRecord | None) -> list[str]:
    """The catalog flags (:func:`source_flags`) a ``run --resume`` of ``record``'s run must be given
    again: none when the sources ``run.json`` recorded find its cases again by themselves
    (:func:`imagebench.catalog.cases_of_run` without a catalog, as a resume given no flags does),
    all of them when they do not (an older run.json without ``sources``, a source that moved and
    the flags stand in for) or when ``record`` could not be read."""
    words = source_flags(args)
    if not words or record is None:
        return words
    from imagebench.catalog import cases_of_run

    try:
        cases_of_run(record)
    except Exception:  # CatalogError, or a source that breaks while it is opened: the flags are needed
        return words
    return []


def catalog_from_args(args: argparse.Namespace, *, warn: bool = True) -> Catalog:
    """The catalog of the built-in cases, installed packages' entry points, ``--cases``,
    ``--bundle`` and ``--tree`` (or ``$IMAGEBENCH_FIXTURES``); a source that cannot be opened is
    a UsageError naming it. Warnings, and the cases a bundle cannot build, go to stderr."""
    from imagebench.catalog import CatalogError, build_catalog

    try:
        catalog = build_catalog(
            modules=list(getattr(args, "case_modules", None) or []),
            bundles=bundles_of(args),
            tree=getattr(args, "tree", None),
        )
    except CatalogError as exc:
        raise UsageError(str(exc)) from None
    if warn:
        for w in catalog.warnings:
            print(f"warning: {w}", file=sys.stderr)
        for label, why in catalog.unavailable.items():
            print(f"cannot run {label}: {why}", file=sys.stderr)
    return catalog


def refuse_empty_sources(catalog: Catalog) -> None:
    """A source given by name that holds no runnable case is a UsageError (what ``run`` was asked to run)."""
    for source in catalog.named:
        if not any(catalog.source_of(label) == source for label in catalog.labels):
            prefix = f"{source.name}/"
            cannot = (
                sum(1 for label in catalog.unavailable if label.startswith(prefix)) if source.kind == "bundle" else 0
            )
            raise UsageError(
                f"{source} has no runnable case" + (f" ({cannot} cannot run; see above)" if cannot else "")
            )


def find_case(catalog: Catalog, label: str) -> Any:
    """The case labelled ``label``; a UsageError with the closest labels otherwise."""
    import difflib

    case = catalog.get(label)
    if case is not None:
        return case
    why = catalog.unavailable.get(label)
    if why:
        raise UsageError(f"case {label} cannot be built: {why}")
    close = difflib.get_close_matches(label, catalog.labels, n=5, cutoff=0.4)
    hint = (
        f"; did you mean {', '.join(close)}?" if close else f"; known labels: {', '.join(catalog.labels) or '(none)'}"
    )
    raise UsageError(f"no case labelled {label!r}{hint}")


def trees_line() -> str:
    """Both fixture trees, for the top of ``list``: the packaged one and the user's."""
    from imagebench.catalog import packaged_tree, user_tree

    mine = user_tree()
    yours = f"{mine} ($IMAGEBENCH_FIXTURES)" if mine is not None else "none ($IMAGEBENCH_FIXTURES is not set)"
    return (
        f"fixture trees: packaged {packaged_tree()} (the built-in curated cases read it); yours: {yours} "
        "(cases whose spec names no tree read it)"
    )
