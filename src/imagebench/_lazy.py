"""Lazy exports for a package: names load their module on first use (PEP 562).

The packages of the core re-export their public names this way so that importing a package
(``imagebench``, ``imagebench.scoring``, ...) costs nothing until a name is used.
"""

from __future__ import annotations

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
