"""User code named ``pkg.mod:func``: imported by the harness, and pinned by what it is made of.

A declared case (``bench-case.json``) or a bundle's ``case.json`` may name a builder, a verifier,
a reference or a baseline as ``pkg.mod:func``. :func:`resolve_target` imports it in the harness
process (never inside a subject's sandbox: a subject is never handed the callable, its module or
its path) and records its identity in a :class:`Target`: the module and attribute, the sha256 of
the named module's file and, when the callable is defined elsewhere (a package re-exporting it),
of the file that defines it, and the code closure of the callable over its own top-level package
(:func:`imagebench.runs.closure.code_closure`: every function of the user's package it reaches).
``Target.digest`` is one digest over all of it, so editing the user's code changes the case's
fingerprint, the run's scoring closure and the fixture cache's key.

A module whose file changed since it was first imported here is imported again (``importlib.reload``)
before it is digested, so the code that runs is always the code the digest names.

:class:`TargetCall` wraps a resolved callable for a case (a builder, reference or baseline): a
frozen dataclass whose fields are the target and its digest, which is what the fingerprint's
``source_digest`` pins for a callable object. :class:`TargetVerifier` is a user's verifier, called
``func(fixture, attempt, **params)``, which fails a sample for each declared leaving left absent
whatever the user's code reads.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from imagebench.case.declared import TARGET_PATTERN
from imagebench.fixtures.digest import FingerprintError, digest_json
from imagebench.fixtures.fixture import Attempt, Fixture, Metric, Outcome, WhyNot

_TARGET = re.compile(TARGET_PATTERN)


class _ImportLog:
    """Module name -> sha256 of its file when this process imported (or last reloaded) it. An object,
    not a plain dict at module level: the scoring closure digests plain module constants, and what
    this process happened to import must not enter a case's digest."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}


_IMPORTED = _ImportLog()


class TargetError(ValueError):
    """A ``pkg.mod:func`` that cannot be used; the message names the target and what was wrong."""


def is_target(text: Any) -> bool:
    """Whether ``text`` has the form ``pkg.mod:func`` (a built-in name never holds a colon)."""
    return isinstance(text, str) and _TARGET.match(text) is not None


@dataclass(frozen=True)
class Target:
    """A resolved ``pkg.mod:func``: what it names, the files it comes from, one digest over it all."""

    spec: str
    module: str
    attribute: str
    files: Mapping[str, str]  # module name -> "sha256:<hex>" of its source file
    closure: Mapping[str, Any]  # code_closure of the callable over the user's package
    digest: str
    func: Callable[..., Any] = field(compare=False, repr=False)

    def identity(self) -> dict[str, Any]:
        """The plain record of what was imported (no path): spec, module, attribute, file digests, digest."""
        return {
            "target": self.spec,
            "module": self.module,
            "attribute": self.attribute,
            "files": dict(self.files),
            "digest": self.digest,
        }


def _file_of(module: types.ModuleType) -> Path | None:
    path = getattr(module, "__file__", None)
    return Path(path) if path else None


def _sha256(path: Path, spec: str, name: str) -> str:
    try:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise TargetError(f"{spec}: the source of module {name!r} cannot be read ({exc.strerror or exc})") from None


def _import(name: str, spec: str) -> types.ModuleType:
    if name not in sys.modules:
        importlib.invalidate_caches()  # a module written since the last import is found
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        if missing == name or name.startswith(f"{missing}."):
            raise TargetError(
                f"{spec}: module {name!r} is not importable (no module named {missing!r}); "
                "put the folder holding it on PYTHONPATH or install its package"
            ) from None
        raise TargetError(
            f"{spec}: importing module {name!r} failed: it imports {missing!r}, which is not installed"
        ) from None
    except Exception as exc:
        raise TargetError(f"{spec}: importing module {name!r} raised {type(exc).__name__}: {exc}") from None
    path = _file_of(module)
    if path is None or path.suffix != ".py":
        raise TargetError(f"{spec}: module {name!r} has no Python source file to pin (it is built in or compiled)")
    now = _sha256(path, spec, name)
    seen = _IMPORTED.seen.setdefault(name, now)
    if seen != now:  # edited since imported here: run (and pin) the code as it is now
        importlib.invalidate_caches()
        try:
            module = importlib.reload(module)
        except Exception as exc:
            raise TargetError(
                f"{spec}: module {name!r} changed on disk and re-importing it raised {type(exc).__name__}: {exc}"
            ) from None
        _IMPORTED.seen[name] = now
    return module


def resolve_target(spec: str) -> Target:
    """Import ``pkg.mod:func`` (harness process only) and pin it; :class:`TargetError` says what is wrong."""
    if not is_target(spec):
        raise TargetError(f"{spec!r} is not a target: expected pkg.mod:func (a module path, a colon, an attribute)")
    module_name, _, attribute = spec.partition(":")
    module = _import(module_name, spec)
    value: Any = module
    for i, part in enumerate(attribute.split(".")):
        try:
            value = getattr(value, part)
        except AttributeError:
            where = module_name if i == 0 else f"{module_name}:{'.'.join(attribute.split('.')[:i])}"
            raise TargetError(f"{spec}: {where} has no attribute {part!r}") from None
    if not callable(value):
        raise TargetError(f"{spec}: it is a {type(value).__name__}, not callable")
    files = {module_name: _sha256(_file_of(module), spec, module_name)}  # type: ignore[arg-type]
    defined_in = getattr(value, "__module__", None)
    if isinstance(defined_in, str) and defined_in != module_name and defined_in in sys.modules:
        defining = _import(defined_in, spec)
        files[defined_in] = _sha256(_file_of(defining), spec, defined_in)  # type: ignore[arg-type]
        value = _reget(defining, value, spec)
    from imagebench.runs.closure import code_closure

    try:
        closure = code_closure([value], what=f"target {spec}")
    except FingerprintError as exc:
        raise TargetError(f"{spec}: its code cannot be pinned ({exc})") from None
    digest = digest_json({"target": spec, "files": files, "closure": closure})
    return Target(spec, module_name, attribute, files, closure, digest, value)


def _reget(module: types.ModuleType, value: Any, spec: str) -> Any:
    """The same callable looked up again in its (possibly reloaded) defining module."""
    name = getattr(value, "__qualname__", None)
    found: Any = module
    for part in str(name).split(".") if name else ():
        found = getattr(found, part, None)
        if found is None:
            return value
    return found if callable(found) else value


@dataclass(frozen=True)
class TargetCall:
    """A user callable standing in a case (builder, reference, baseline): called as the target is.

    The fields are what identifies it (``target`` and its ``digest``), so a fingerprint of the
    callable (:func:`imagebench.runs.fingerprint.source_digest`) changes when the user's code does.
    """

    target: str
    digest: str
    func: Callable[..., Any] = field(compare=False, repr=False, init=False)

    @classmethod
    def of(cls, target: Target) -> TargetCall:
        call = cls(target.spec, target.digest)
        object.__setattr__(call, "func", target.func)
        return call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return self.target

    def __reduce__(self) -> tuple[Any, ...]:
        # travels as its name and imports again where it lands (a dask worker: also the harness)
        return (_call_from, (self.target, self.digest))


def _call_from(spec: str, digest: str) -> TargetCall:
    target = resolve_target(spec)
    if target.digest != digest:
        raise TargetError(
            f"{spec}: its code here differs from the code the case was made with (digest {digest[:19]}...)"
        )
    return TargetCall.of(target)


def missing_leavings(attempt: Attempt, names: tuple[str, ...]) -> list[Metric]:
    """One failing metric ``left:<name>`` for each of ``names`` the attempt lacks: a user verifier
    may not read every leaving, yet a subject asked to leave something that left nothing fails."""
    return [
        Metric.missing(f"left:{name}", 0.0, WhyNot(f"the subject left nothing named {name!r}", "absent"))
        for name in names
        if name not in attempt.arrays
    ]


@dataclass(frozen=True)
class TargetVerifier:
    """A user's verifier ``pkg.mod:func``, called ``func(fixture, attempt, **params)`` in the harness.

    Its fields pin it (the target's digest covers the user's code, :mod:`imagebench.cases.targets`).
    Whatever it reads, each of ``leavings`` the subject did not leave fails the sample, and anything
    but an :class:`~imagebench.fixtures.fixture.Outcome` it returns is the harness's error.
    """

    target: str
    digest: str
    params: Mapping[str, Any]
    leavings: tuple[str, ...]
    func: Callable[..., Any] = field(compare=False, repr=False, init=False)

    @classmethod
    def of(cls, spec: str, params: Mapping[str, Any] | None, leavings: tuple[str, ...]) -> TargetVerifier:
        target = resolve_target(spec)
        made = cls(target.spec, target.digest, dict(params or {}), tuple(leavings))
        object.__setattr__(made, "func", target.func)
        return made

    def __call__(self, fixture: Fixture, attempt: Attempt) -> Outcome:
        outcome = self.func(fixture, attempt, **dict(self.params))
        if not isinstance(outcome, Outcome):
            raise TypeError(f"verifier {self.target} returned {type(outcome).__name__}, expected an Outcome")
        absent = missing_leavings(attempt, self.leavings)
        if absent:
            outcome = replace(outcome, metrics=[*outcome.metrics, *absent])
        return outcome

    def scoring_inputs(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "digest": self.digest,
            "params": dict(self.params),
            "leavings": list(self.leavings),
        }

    def __reduce__(self) -> tuple[Any, ...]:
        return (_target_verifier, (self.target, self.digest, dict(self.params), self.leavings))


def _target_verifier(spec: str, digest: str, params: Mapping[str, Any], leavings: tuple[str, ...]) -> TargetVerifier:
    made = TargetVerifier.of(spec, params, leavings)
    if made.digest != digest:
        raise TargetError(
            f"{spec}: its code here differs from the code the case was made with (digest {digest[:19]}...)"
        )
    return made


def call_of(spec: str) -> TargetCall:
    """:func:`resolve_target` wrapped for a case."""
    return TargetCall.of(resolve_target(spec))


__all__ = [
    "Target",
    "TargetCall",
    "TargetError",
    "TargetVerifier",
    "call_of",
    "is_target",
    "missing_leavings",
    "resolve_target",
]
