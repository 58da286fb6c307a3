"""``python:package.module:function`` or ``python:path/to/file.py:function``: a solver function, in this process or isolated.

In process it is trusted code (it shares the harness's memory). With ``--isolate`` the same
function runs in a sandboxed child Python (:mod:`imagebench.sandbox.isolate`), and the harness never
imports its module: the spec is read as text and the code located without running any of it.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.subjects.base import Confinement, SubjectError, SubjectKind, UnitContext
from imagebench.subjects.registry import subject_kind

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.case.session import Session
    from imagebench.sandbox.policy import SandboxPolicy
    from imagebench.subjects.command import CommandSubject, _BoundCommand

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@subject_kind
@dataclass(frozen=True)
class PythonSubject(SubjectKind):
    """``function(session)`` from an importable module.

    By default it is called in this process: trusted code, which shares the harness's memory
    (truth is read-only and checked after each sample, but nothing stops it reading). With
    ``isolate`` (a :class:`SandboxPolicy`; ``--isolate`` on the command line) the same function
    runs in a sandboxed child Python that gets the session's data as files and returns its
    bindings through files (:mod:`imagebench.sandbox.isolate`).
    """

    prefix = "python:"
    forms = (
        ("python:package.module:function", "calls function(session) in this process (--isolate: a sandboxed child)"),
        ("python:path/to/file.py:function", "the same, with the function of a Python file (its sha256 in the identity)"),
    )
    flags = frozenset({"isolate"})

    target: str  # "package.module:function", or "/absolute/path/file.py:function"
    # None when isolated: the harness never imports the subject's code (it runs in the sandbox only)
    function: Callable[..., Any] | None = field(compare=False, repr=False)
    isolate: SandboxPolicy | None = None
    given_name: str | None = None  # --subject-name

    @classmethod
    def parse(cls, spec: str, *, sandbox: SandboxPolicy | None, isolate: bool, mcp: bool) -> PythonSubject:
        from imagebench.sandbox.policy import SandboxPolicy

        target = spec[len(cls.prefix) :].strip()
        if is_file_target(target):
            target = _resolved_file_target(spec, target)
        if not isolate:
            return cls(target=target, function=_import_function(spec, target))
        if not is_file_target(target):
            _check_target(spec, target)
        subject = cls(target=target, function=None, isolate=sandbox or SandboxPolicy())
        subject.isolated()[0].check_sandbox()
        return subject

    @classmethod
    def describe_spec(cls, spec: str) -> dict[str, Any]:
        import hashlib

        target = spec[len(cls.prefix) :].strip()
        if is_file_target(target):
            module, _, func = target.rpartition(":")
            return {
                "form": "python",
                "file": Path(module.replace("\\", "/")).name,
                "function": func,
                "target_sha256": hashlib.sha256(target.encode("utf-8")).hexdigest(),
            }
        return {"form": "python", "target": target}

    def describe(self) -> dict[str, Any]:
        return self.describe_spec(self.spec())

    def spec(self) -> str:
        return f"python:{self.target}"

    def options(self) -> dict[str, Any]:
        return {} if self.isolate is None else {"sandbox": self.isolate, "isolate": True}

    @property
    def name(self) -> str:
        if self.given_name is not None:
            return self.given_name
        module, _, func = self.target.rpartition(":") if is_file_target(self.target) else self.target.partition(":")
        if is_file_target(self.target):
            module = Path(module).stem
        return f"python-{module}.{func}"

    def identity_parts(self) -> dict[str, Any]:
        """The target, its module's code (the top-level package's tree, or the module's file; found
        without importing it: an isolated subject is never imported here) and, isolated, the trees
        ``--subject-expose`` shows it. A subject made in Python around a function in hand whose
        target names no module (``PythonSubject(target=..., function=f)``) is that function's module."""
        from imagebench.subjects.identity import expose_code, file_code, live_code, module_found, python_code

        if is_file_target(self.target):
            path, func = file_target_parts(self.target)
            parts = {"kind": "python", "target": f"{path.name}:{func}", **file_code(path, self.target)}
            if self.isolate is not None and self.isolate.expose:
                parts["expose"] = expose_code(self.isolate.expose)
            return parts
        if self.function is not None and not module_found(self.target):
            code = live_code(self.function, role=f"the module of python:{self.target}'s function")
        else:
            code = python_code(self.target)
        parts: dict[str, Any] = {"kind": "python", "target": self.target, **code}
        if self.isolate is not None and self.isolate.expose:
            parts["expose"] = expose_code(self.isolate.expose)
        return parts

    @property
    def sandbox_kind(self) -> Confinement:
        return "in-process" if self.isolate is None else self.isolate.kind

    @property
    def limits(self) -> dict[str, int | None] | None:
        return self.isolate.limits.to_record() if self.isolate is not None and self.isolate.enabled else None

    @property
    def out_of_process(self) -> bool:
        return self.isolate is not None

    @property
    def env_pass(self) -> tuple[str, ...]:
        return self.isolate.env_pass if self.isolate is not None else ()

    def isolated(self) -> tuple[CommandSubject, list[Path]]:
        """The command subject that runs this function in a child process (``isolate`` must be
        set), and the folders the child puts on its ``sys.path``."""
        from imagebench.sandbox.isolate import code_paths, isolated_command
        from imagebench.subjects.command import CommandSubject

        assert self.isolate is not None
        if is_file_target(self.target):
            file, _ = file_target_parts(self.target)
            policy = replace(self.isolate, expose=(*self.isolate.expose, file))
            return CommandSubject(command=isolated_command(policy), sandbox=policy), [file.parent]
        try:
            shown, path = code_paths(self.target)
        except ImportError as exc:
            raise SubjectError(f"subject python:{self.target}: cannot find its code to isolate: {exc}") from None
        policy = replace(self.isolate, expose=(*self.isolate.expose, *shown))
        return CommandSubject(command=isolated_command(policy), sandbox=policy), path

    def bind(self, case: Case, context: UnitContext) -> Callable[[Session], None]:
        if self.isolate is None:
            assert self.function is not None
            return self.function
        from imagebench.sandbox.isolate import isolated_env
        from imagebench.subjects.command import _BoundCommand

        subject, path = self.isolated()
        subject.check_sandbox()
        _check_not_withheld(self.target, context.hidden)
        target = self.target
        if is_file_target(target):  # the child imports the file by its name, from its folder
            file, func = file_target_parts(target)
            target = f"{file.stem}:{func}"
        env = {**context.env, **isolated_env(target, path, case.label)}
        return _IsolatedCall(_BoundCommand(subject, replace(context, env=env)))

    def __call__(self, session: Session) -> None:
        if self.function is None:
            raise SubjectError(f"python:{self.target} is isolated: it works through bind(case, context)")
        self.function(session)


class IsolatedRaised(RuntimeError):
    """An isolated ``python:`` function raised in its child process (its traceback is in stderr.txt)."""


@dataclass
class _IsolatedCall:
    """The bound command of an isolated function: a function that raised in its child process is
    a subject error, as it is in process (not a command that merely failed)."""

    bound: _BoundCommand
    enforces_timeout: bool = True

    def cancel(self) -> None:
        self.bound.cancel()

    def __call__(self, session: Session) -> None:
        from imagebench.sandbox.isolate import RAISED_EXIT

        self.bound(session)
        if session.notes.get("exit_code") == RAISED_EXIT:
            raise IsolatedRaised("the function raised in its isolated process; its traceback is in stderr.txt")


def _check_not_withheld(target: str, hidden: tuple[Path, ...]) -> None:
    """An isolated function whose own module is withheld from its sandbox (the case's reference,
    baseline, builder or verifier lives in it) cannot run there: a SubjectError saying so."""
    own = file_target_parts(target)[0] if is_file_target(target) else module_file(target)
    if own is None:
        return
    mine = own.resolve()
    for path in hidden:
        real = path.resolve()
        if mine == real or real in mine.parents:
            raise SubjectError(
                f"subject python:{target} --isolate: its module {own} is withheld from its sandbox ({path} is the "
                "case's own code or data: its builder, verifier, reference or baseline, its tree or its module); "
                "run it without --isolate (trusted code, in process), or move the solver into a module of its own"
            )


def module_file(target: str) -> Path | None:
    """The source file of a ``package.module:function`` target's module, found without importing
    anything (the top-level package's folder, then one folder per part); None when not found."""
    parts = target.partition(":")[0].split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if len(parts) == 1:
        return Path(spec.origin) if spec.origin and spec.origin not in ("built-in", "frozen") else None
    for base in spec.submodule_search_locations or []:
        folder = Path(base).joinpath(*parts[1:-1])
        for candidate in (folder / f"{parts[-1]}.py", folder / parts[-1] / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _check_target(spec: str, target: str) -> None:
    module_name, sep, func_name = target.partition(":")
    if not sep or not _DOTTED.match(module_name) or not _DOTTED.match(func_name):
        raise SubjectError(
            f"subject {spec!r}: expected python:package.module:function, e.g. python:mypkg.solvers:segment"
        )


def is_file_target(target: str) -> bool:
    """Whether ``target`` names a Python file (``path/to/file.py:function``) rather than a module."""
    module = target.rpartition(":")[0] if target.count(":") >= 1 else target
    return module.endswith(".py") or "/" in module or "\\" in module


def file_target_parts(target: str) -> tuple[Path, str]:
    """``(file, function)`` of a file target (split at its last ``:``)."""
    path, _, func = target.rpartition(":")
    return Path(path), func


def _resolved_file_target(spec: str, target: str) -> str:
    """A file target with its file made absolute (a dask worker and a resume find it again); the
    file must exist, be a ``.py`` file, and the function a dotted name."""
    path, sep, func = target.rpartition(":")
    if not sep or not path or not _DOTTED.match(func):
        raise SubjectError(f"subject {spec!r}: expected python:path/to/file.py:function, e.g. python:solvers/seg.py:segment")
    file = Path(path).expanduser()
    if file.suffix != ".py":
        raise SubjectError(f"subject {spec!r}: {path!r} is not a .py file (expected python:path/to/file.py:function)")
    if not file.is_file():
        raise SubjectError(f"subject {spec!r}: no file {str(file)!r} (a path relative to {Path.cwd()})")
    if not _DOTTED.match(file.stem) or "." in file.stem:
        raise SubjectError(f"subject {spec!r}: the file's name {file.name!r} must be a Python identifier plus .py")
    return f"{file.resolve()}:{func}"


def _load_file(spec: str, file: Path) -> Any:
    """The module of a Python file, loaded once under a name unique to its path (so two files
    named alike do not meet in ``sys.modules``)."""
    import hashlib
    import importlib.util
    import sys

    name = f"imagebench_subject_{file.stem}_{hashlib.sha256(str(file).encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    found = importlib.util.spec_from_file_location(name, file)
    if found is None or found.loader is None:
        raise SubjectError(f"subject {spec!r}: cannot load {str(file)!r} as Python")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise SubjectError(f"subject {spec!r}: cannot import {file.name!r} ({type(exc).__name__}: {exc})") from exc
    return module


def _import_function(spec: str, target: str) -> Callable[..., Any]:
    if is_file_target(target):
        file, func_name = file_target_parts(target)
        module_name = file.name
        module = _load_file(spec, file)
        return _attribute(spec, module, module_name, func_name)
    _check_target(spec, target)
    module_name, _sep, func_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise SubjectError(
            f"subject {spec!r}: cannot import module {module_name!r} ({type(exc).__name__}: {exc})"
        ) from exc
    return _attribute(spec, module, module_name, func_name)


def _attribute(spec: str, module: Any, module_name: str, func_name: str) -> Callable[..., Any]:
    obj: Any = module
    for part in func_name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SubjectError(f"subject {spec!r}: module {module_name!r} has no attribute {func_name!r}") from None
    if not callable(obj):
        raise SubjectError(f"subject {spec!r}: {module_name}:{func_name} is a {type(obj).__name__}, not callable")
    return obj
