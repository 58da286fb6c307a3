"""What of a case no sandboxed subject is shown, however the case arrived (docs/integrity.md).

:func:`case_withheld` names, for one case: the fixture tree it reads (its truth files; the
packaged tree, ``--tree DIR``, ``$IMAGEBENCH_FIXTURES`` or a bundle's curated reference's
``root``), the source files of the user's code that builds, scores or solves it (its builder,
verifier, reference and baseline, a declaration's ``pkg.mod:func`` targets included, with every
module of their own package their code reaches, :func:`imagebench.runs.closure.code_closure`,
and those modules' cached bytecode), and the module that defines it (a ``--cases`` file, an
entry point's module). The runner adds them to :attr:`imagebench.subjects.UnitContext.hidden`: the
sandbox masks each where it lies inside something the subject is shown (an exposed folder, an
isolated function's package, the tool environment), and refuses to show a folder inside one.

The harness's own packages are masked anyway (:func:`imagebench.sandbox.policy.harness_paths`)
and the standard library is never the case's own code, so neither is named here.
"""

from __future__ import annotations

import functools
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.case.model import Case

#: top-level packages whose files are masked by the sandbox already (never the user's code)
_HARNESS = ("imagebench", "napari_imagebench")


class _Found:
    """The files found for each code root, by its identity (the walk is not free: once a process).
    An object, not a plain dict at module level: the scoring closure digests plain module constants."""

    def __init__(self) -> None:
        self.files: dict[int, tuple[Any, tuple[Path, ...]]] = {}


_FOUND = _Found()


def case_withheld(case: Case) -> tuple[Path, ...]:
    """The paths of ``case`` a sandboxed subject must not see (absolute, not resolved)."""
    out: list[Path] = []
    tree = _tree_root(case)
    if tree is not None:
        out.append(tree)
    for root in code_roots(case):
        out += code_files(root)
    out += case_module_files(case)
    seen: set[Path] = set()
    return tuple(p for p in out if not (p in seen or seen.add(p)))  # type: ignore[func-returns-value]


def _tree_root(case: Case) -> Path | None:
    from imagebench.runs.fingerprint import tree_location

    try:
        located = tree_location(case)
    except Exception:  # a spec that cannot say where it reads has nothing to hide
        return None
    if located is None or located[0] is None:
        return None
    return Path(located[0]).expanduser().absolute()


def code_roots(case: Case) -> list[Any]:
    """The user's callables of ``case``: builder, verifier, reference, baseline, each unwrapped
    (a ``functools.partial``, a :class:`~imagebench.cases.targets.TargetCall` or
    :class:`~imagebench.cases.targets.TargetVerifier` stands for the function it calls)."""
    found = [getattr(case.fixture, "builder", None), case.verify, case.reference, case.baseline]
    return [_unwrap(f) for f in found if f is not None]


def _unwrap(obj: Any) -> Any:
    for _ in range(16):  # a chain of wrappers, never a cycle
        if isinstance(obj, functools.partial):
            obj = obj.func
        elif inspect.ismethod(obj):
            obj = obj.__func__
        elif not inspect.isfunction(obj) and callable(getattr(obj, "func", None)):
            obj = obj.func  # a target's wrapper
        elif callable(getattr(obj, "__wrapped__", None)):
            obj = obj.__wrapped__
        else:
            break
    return obj


def _module_of(obj: Any) -> str | None:
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str) and not inspect.isfunction(obj) and not inspect.isclass(obj):
        module = type(obj).__module__
    return module if isinstance(module, str) else None


def _foreign(module: str) -> bool:
    """Whether ``module`` is not the user's code: the harness, the standard library, built-ins."""
    top = module.partition(".")[0]
    return top in _HARNESS or top in sys.stdlib_module_names or top in ("builtins", "__main__", "")


def code_files(root: Any) -> tuple[Path, ...]:
    """The source files of ``root``'s module and of every module of its own top-level package its
    code reaches, with their cached bytecode; none for the harness's or the standard library's."""
    cached = _FOUND.files.get(id(root))
    if cached is not None and cached[0] is root:
        return cached[1]
    module = _module_of(root)
    files: tuple[Path, ...] = ()
    if module is not None and not _foreign(module):
        names = {module}
        from imagebench.runs.closure import code_closure

        try:
            names |= set(code_closure([root], what=f"the code of {module}")["modules"])
        except Exception:  # a closure that cannot be taken still hides the root's own module
            pass
        top = module.partition(".")[0]
        paths: list[Path] = []
        for name in sorted(names):
            if name.partition(".")[0] == top:
                paths += _files_of_module(name)
        files = tuple(paths)
    _FOUND.files[id(root)] = (root, files)
    return files


def _files_of_module(name: str) -> list[Path]:
    loaded = sys.modules.get(name)
    path = getattr(loaded, "__file__", None) if loaded is not None else None
    return with_bytecode(Path(path)) if isinstance(path, str) else []


def with_bytecode(source: Path) -> list[Path]:
    """``source`` and the bytecode Python cached for it (``__pycache__/<stem>.*.pyc``, a legacy
    ``<stem>.pyc``): the code can be read back from either."""
    source = source.absolute()
    out = [source]
    cache = source.parent / "__pycache__"
    if cache.is_dir():
        out += sorted(cache.glob(f"{source.stem}.*.pyc"))
    legacy = source.with_suffix(".pyc")
    if source.suffix == ".py" and legacy.exists():
        out.append(legacy)
    return out


def case_module_files(case: Case) -> list[Path]:
    """The file of each loaded module whose ``CASES`` gives ``case``'s label (a ``--cases``
    module, an entry point's module), with its bytecode. Read from each module's ``__dict__``:
    a lazy module's ``__getattr__`` is never called."""
    from imagebench.case.model import Case as CaseType

    out: list[Path] = []
    for name, module in list(sys.modules.items()):
        space = getattr(module, "__dict__", None)
        given = space.get("CASES") if isinstance(space, dict) else None
        if not isinstance(given, (list, tuple)) or _foreign(name):  # the cheap test first: ~2,000 modules a unit
            continue
        if any(isinstance(c, CaseType) and c.label == case.label for c in given):
            path = space.get("__file__")
            if isinstance(path, str):
                out += with_bytecode(Path(path))
    return out


__all__ = ["case_module_files", "case_withheld", "code_files", "code_roots", "with_bytecode"]
