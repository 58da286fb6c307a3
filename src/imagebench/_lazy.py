"""Lazy exports for a package: names load their module on first use (PEP 562).

The packages of the core re-export their public names this way so that importing a package
(``imagebench``, ``imagebench.scoring``, ...) costs nothing until a name is used. A package
declares its public names once, as the imports of its ``if TYPE_CHECKING:`` block (what a type
checker and a reader see); :func:`declared_exports` reads that block from the package's source
(nothing is imported), and :func:`lazy_exports` serves the names from it.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose ``exports`` map a public name to its module.

    A module is written in full (``imagebench.plane.client``) or relative to the package
    (``client``). A loaded name is cached on the package, so the lookup happens once.
    """

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = target if target.startswith("imagebench") else f"{package}.{target}"
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__


def declared_exports(package: str, source_file: str) -> dict[str, str]:
    """The names a package's ``if TYPE_CHECKING:`` block imports, each with its module (absolute).

    That block is the package's one declaration of its public surface; an import under any other
    condition, or a relative one, is not an export."""
    tree = ast.parse(open(source_file, encoding="utf-8").read(), source_file)  # noqa: SIM115
    exports: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for item in node.body:
            if isinstance(item, ast.ImportFrom) and item.module and item.level == 0:
                for alias in item.names:
                    exports[alias.asname or alias.name] = item.module
    if not exports:
        raise ImportError(f"{package}: its `if TYPE_CHECKING:` block declares no export ({source_file})")
    return exports


def lazy_package(package: str, source_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` of a package whose public names are the imports of its
    ``if TYPE_CHECKING:`` block (:func:`declared_exports`)."""
    exports = declared_exports(package, source_file)
    getattr_, dir_ = lazy_exports(package, exports)
    return getattr_, dir_, sorted(exports)

