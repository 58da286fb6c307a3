"""The scoring closure: a digest of everything of the project's code that decides a case's score.

A verifier's own source says little: ``verify_drift`` calls ``trajectory_metrics``, which a patch
can change while ``verify_drift`` stays byte for byte the same. :func:`code_closure` follows the
calls. From each root (the verifier; a callable object's class and its fields) it reads the
bytecode of every function it reaches and resolves the names it loads (globals, attributes of
modules it loads, names it imports) in that function's own module. Every function and class of
the *project* reached that way is recorded by its qualified name and the sha256 of its source,
every plain module-level constant (a number, text, a tuple of them, an array) by the digest of its
value, every project module the walk enters by the digest of its whole file (its tables, class
attributes, default arguments and closure factories decide scores as much as its functions), and
the walk goes on into them: through wrappers (``__wrapped__``: ``functools.wraps``, ``lru_cache``;
``pyfunc``: ``np.vectorize``), tables of functions (a dispatch dict), and submodules reached as
attributes (``pkg.sub.f``). The project is the ``imagebench`` package and the top-level
package of each root (a bundle's own verifier module). Code of other libraries is not followed:
their versions are in the run's receipt.

The walk over-approximates (an attribute name is looked up in every project module the function
loads, whether or not that is the attribute's object, and a module is digested whole): a closure
may hold code that never runs. A call made through ``getattr`` or ``globals()`` with a computed
name lands in a module the walk entered, whose whole file is digested; only a function reached
through data of another module (a registry looked up by string) is beyond it. The structured answers' comparators are such a
registry, so a case with an answer contract also records the scorer's registry and implementation
hashes (:mod:`imagebench.scoring.manifest`).

:func:`scoring_parts` is the closure of one case with its limits (and what a verifier configured by
data names through ``scoring_inputs()``: its keys, a user's code digest); :func:`scoring_digest` the one
digest the fingerprint's ``scoring`` part, each case's summary, the receipt and a suite run's
conditions carry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import dis
import functools
import importlib
import importlib.util
import inspect
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from imagebench.fixtures.digest import FingerprintError, digest_bytes, digest_json, digest_text, plain

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.runs.closurecache import ClosureCache

PROJECT = "imagebench"
_IMPORTS = ("IMPORT_NAME",)
_ATTRS = ("LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "IMPORT_FROM")
_GLOBALS = ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF")


def _top(name: str | None) -> str:
    return (name or "").partition(".")[0]


class _Walk:
    def __init__(self, projects: set[str], what: str) -> None:
        self.projects, self.what = projects, what
        self.code: dict[str, str] = {}
        self.constants: dict[str, str] = {}
        self.modules: dict[str, str] = {}
        self._seen: set[int] = set()
        self._stack: list[Any] = []
        from imagebench.runs.closurecache import current  # pydantic: imported by a walk, not by this module

        self.cache = current()  # sources and loaded names kept across runs

    # ------------------------------------------------------------------ what counts
    def mine(self, obj: Any) -> bool:
        if isinstance(obj, types.ModuleType):
            return _top(obj.__name__) in self.projects
        module = getattr(obj, "__module__", None)
        return isinstance(module, str) and _top(module) in self.projects

    def push(self, obj: Any) -> None:
        if id(obj) not in self._seen:
            self._stack.append(obj)

    def run(self, roots: Iterable[Any]) -> None:
        for root in roots:
            self.push(root)
        while self._stack:
            obj = self._stack.pop()
            if id(obj) in self._seen:
                continue
            self._seen.add(id(obj))
            self._visit(obj)

    # ------------------------------------------------------------------ one object
    def _visit(self, obj: Any) -> None:
        # a wrapper (functools.wraps, lru_cache, np.vectorize) keeps what it wraps
        for attr in ("__wrapped__", "pyfunc"):
            inner = getattr(obj, attr, None) if not isinstance(obj, type) else None
            if inner is not None and callable(inner):
                self.push(inner)
        if isinstance(obj, (dict, list, tuple, set, frozenset)):
            for value in obj.values() if isinstance(obj, dict) else obj:  # a dispatch table of functions
                if callable(value) or isinstance(value, (dict, list, tuple, set, frozenset)):
                    self.push(value)
            return
        if isinstance(obj, functools.partial):
            for value in (obj.func, *obj.args, *obj.keywords.values()):
                self.push(value)
        elif isinstance(obj, (staticmethod, classmethod)):
            self.push(obj.__func__)
        elif isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    self.push(f)
        elif inspect.ismethod(obj):
            self.push(obj.__func__)
            self.push(obj.__self__)
        elif inspect.isfunction(obj):
            self._function(obj)
        elif inspect.isclass(obj):
            self._class(obj)
        elif isinstance(obj, types.ModuleType):
            pass  # a module is reached through the names loaded from it, never as a whole
        elif callable(obj) or dataclasses.is_dataclass(obj):
            if self.mine(type(obj)):
                self.push(type(obj))
            if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
                for f in dataclasses.fields(obj):
                    self.push(getattr(obj, f.name, None))

    def _module(self, name: str) -> None:
        """The whole source of a project module the walk entered: its constants, tables, class
        attributes and default arguments decide scores as much as its functions do."""
        if name in self.modules:
            return
        digest = _MODULES.get(name)
        if digest is None:
            module = sys.modules.get(name)
            path = getattr(module, "__file__", None)
            if not path:
                raise FingerprintError(f"{self.what}: module {name} has no source file to digest")
            try:
                with open(path, "rb") as fh:
                    digest = _MODULES[name] = digest_bytes(fh.read())
            except OSError as exc:
                raise FingerprintError(f"{self.what}: module {name} cannot be read ({exc.strerror})") from None
        self.modules[name] = digest

    def _record(self, obj: Any) -> None:
        name = f"{obj.__module__}:{obj.__qualname__}"
        self._module(obj.__module__)
        digest = _SOURCES.get(obj)
        if digest is None:
            try:
                digest = _SOURCES[obj] = self.cache.source_digest(obj, lambda: digest_text(inspect.getsource(obj)))
            except (OSError, TypeError) as exc:
                raise FingerprintError(f"{self.what}: the source of {name} cannot be read ({exc})") from None
        self.code[name] = digest

    def _function(self, func: types.FunctionType) -> None:
        if not self.mine(func):
            return
        self._record(func)
        for value in (*(func.__defaults__ or ()), *(func.__kwdefaults__ or {}).values()):
            self.push(value)
        for cell in func.__closure__ or ():
            try:
                self.push(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        self._code(func.__code__, func.__globals__)

    def _class(self, cls: type) -> None:
        if not self.mine(cls):
            return
        self._record(cls)
        for base in cls.__mro__[1:]:
            self.push(base)
        for value in vars(cls).values():
            target = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if inspect.isfunction(target):
                # a method's source is in its class's; what it calls is followed from here
                for v in (*(target.__defaults__ or ()), *(target.__kwdefaults__ or {}).values()):
                    self.push(v)
                self._code(target.__code__, target.__globals__)
            elif isinstance(value, property):
                for f in (value.fget, value.fset, value.fdel):
                    if inspect.isfunction(f):
                        self._code(f.__code__, f.__globals__)

    # ------------------------------------------------------------------ names in code
    def _code(self, code: types.CodeType, scope: Mapping[str, Any]) -> None:
        imports, attrs, globals_ = _names(code, self.cache)
        package = scope.get("__package__") or _top(scope.get("__name__"))
        modules = [m for name, level in imports if (m := self._import(name, level, package)) is not None]
        for name in globals_:
            if name not in scope:
                continue  # a builtin, or a name the code never reaches
            value = scope[name]
            if isinstance(value, types.ModuleType):
                if self.mine(value):
                    modules.append(value)
            elif self._followed(value):
                self.push(value)
            else:
                self._constant(str(scope.get("__name__", "?")), name, value)
                if isinstance(value, (dict, list, tuple, set, frozenset)):
                    self.push(value)  # a table may hold the functions it dispatches to
        seen = {id(m) for m in modules}
        for module in modules:  # grows as attributes name submodules (pkg.sub.f)
            self._module(module.__name__)
            for name in attrs:
                value = getattr(module, name, None)
                if value is None:
                    continue
                if isinstance(value, types.ModuleType):
                    if self.mine(value) and id(value) not in seen:
                        seen.add(id(value))
                        modules.append(value)
                    continue
                if self._followed(value):
                    self.push(value)
                else:
                    self._constant(module.__name__, name, value)

    def _followed(self, value: Any) -> bool:
        if inspect.isfunction(value) or inspect.isclass(value):
            return self.mine(value)
        if isinstance(value, (functools.partial, staticmethod, classmethod)):
            return True
        if callable(value) and (
            getattr(value, "__wrapped__", None) is not None or getattr(value, "pyfunc", None) is not None
        ):
            return True  # a wrapper around a function (lru_cache, np.vectorize)
        if not callable(value) or inspect.isbuiltin(value):
            return False
        return self.mine(type(value)) or self.mine(value)  # an instance of the project's, a method of one

    def _import(self, name: str, level: int, package: str | None) -> types.ModuleType | None:
        try:
            full = importlib.util.resolve_name("." * level + name, package) if level else name
        except (ImportError, ValueError):
            return None
        if _top(full) not in self.projects:
            return None
        module = sys.modules.get(full)
        if module is None:
            try:
                module = importlib.import_module(full)
            except Exception as exc:  # a project module that cannot be imported cannot be digested
                raise FingerprintError(
                    f"{self.what}: module {full} cannot be imported ({type(exc).__name__})"
                ) from None
        return module

    def _constant(self, module: str, name: str, value: Any) -> None:
        """A plain module-level value (a tolerance, a table) decides a score as much as code does."""
        if callable(value) or isinstance(value, types.ModuleType) or value is None:
            return
        if value is _MODULES:  # the walk's own cache (a user target's pinning reaches it): process state
            return
        key = f"{module}:{name}"
        try:
            self.constants[key] = digest_json(plain(value, key))
        except FingerprintError:
            pass  # not plain data (an object, a lock): not a number that decides a score


# What never changes in a process: a project object's source digest, the names a code object loads.
_SOURCES: dict[Any, str] = {}
_MODULES: dict[str, str] = {}
_NAMES: dict[types.CodeType, tuple[list[tuple[str, int]], list[str], list[str]]] = {}


def _names(
    code: types.CodeType, cache: ClosureCache | None = None
) -> tuple[list[tuple[str, int]], list[str], list[str]]:
    """``(imports as (name, level), attribute names, global names)`` that ``code`` and the code
    nested in it load (kept across runs in ``cache``)."""
    found = _NAMES.get(code)
    if found is None:
        found = _NAMES[code] = _scan(code) if cache is None else cache.names(code, lambda: _scan(code))
    return found


def _scan(code: types.CodeType) -> tuple[list[tuple[str, int]], list[str], list[str]]:
    imports: list[tuple[str, int]] = []
    attrs: set[str] = set()
    globals_: set[str] = set()
    level = 0
    for code_obj in _all_code(code):
        for ins in dis.get_instructions(code_obj):
            if ins.opname == "LOAD_CONST" and isinstance(ins.argval, int):
                level = ins.argval  # the relative level an IMPORT_NAME pops
            elif ins.opname in _IMPORTS:
                imports.append((str(ins.argval), level))
            elif ins.opname in _ATTRS:
                attrs.add(str(ins.argval))
            elif ins.opname in _GLOBALS:
                globals_.add(str(ins.argval))
    return imports, sorted(attrs), sorted(globals_)


def _all_code(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _all_code(const)


# One run's closures, kept while :func:`memoized_closures` is entered (by the executor, for one run).
_MEMO_LOCK = threading.Lock()
_MEMO_DEPTH = 0
_MEMO: dict[tuple[Any, ...], tuple[Any, Any]] = {}


@contextlib.contextmanager
def memoized_closures() -> Iterator[None]:
    """Within it, :func:`code_closure` walks each list of roots (the same objects) once.

    A run asks for one verifier's closure several times (its fixture's cache key, the receipt,
    each case summary), and the code it runs does not change under it: the closure it recorded
    first is the one of the run. Outside it every call walks again, so a patched module is seen
    at once. The roots are held while it lasts, so an id is never reused for another object."""
    global _MEMO_DEPTH
    with _MEMO_LOCK:
        _MEMO_DEPTH += 1
    try:
        yield
    finally:
        with _MEMO_LOCK:
            _MEMO_DEPTH -= 1
            last = _MEMO_DEPTH == 0
            if last:
                _MEMO.clear()
        if last:
            from imagebench.runs.closurecache import current

            current().flush()  # what the run's walks computed, kept for the next run


def within_run(kind: str, obj: Any, compute: Callable[[], str]) -> str:
    """``compute()`` (a digest of ``obj``), taken once per ``(kind, obj)`` inside :func:`memoized_closures`."""
    if not _MEMO_DEPTH:
        return compute()
    key = (kind, id(obj))
    with _MEMO_LOCK:
        kept = _MEMO.get(key)
    if kept is not None:
        return kept[1]
    found = compute()
    with _MEMO_LOCK:
        if _MEMO_DEPTH:
            _MEMO[key] = (obj, found)
    return found


def code_closure(roots: Iterable[Any], *, what: str = "scoring closure") -> dict[str, dict[str, str]]:
    """``{"code": {module:qualname: sha256 of its source}, "constants": {module:name: digest},
    "modules": {module: sha256 of its file}}`` of every function, class, plain constant and module
    of the project reached from ``roots`` (walked once per run inside :func:`memoized_closures`).

    Raises :class:`~imagebench.fixtures.digest.FingerprintError` (naming ``what``) when a project
    function's source cannot be read or a project module it imports cannot be imported.
    """
    roots = list(roots)
    key = ("closure", *(id(root) for root in roots))
    if _MEMO_DEPTH:
        with _MEMO_LOCK:
            kept = _MEMO.get(key)
        if kept is not None:
            return {part: dict(names) for part, names in kept[1].items()}
    found = _walk_closure(roots, what)
    with _MEMO_LOCK:
        if _MEMO_DEPTH:
            _MEMO[key] = (roots, {part: dict(names) for part, names in found.items()})
    return found


def _walk_closure(roots: list[Any], what: str) -> dict[str, dict[str, str]]:
    projects = {PROJECT}
    for root in roots:
        target = root.func if isinstance(root, functools.partial) else root
        module = getattr(target, "__module__", None) or type(target).__module__
        if isinstance(module, str) and _top(module) not in ("builtins", ""):
            projects.add(_top(module))
    walk = _Walk(projects, what)
    walk.run(roots)
    if not _MEMO_DEPTH:
        walk.cache.flush()  # inside a run: once, when it ends (memoized_closures)
    return {
        "code": dict(sorted(walk.code.items())),
        "constants": dict(sorted(walk.constants.items())),
        "modules": dict(sorted(walk.modules.items())),
    }


def scoring_parts(case: Case) -> dict[str, Any]:
    """What decides ``case``'s score: its verifier's code closure, its limits and, for a case with an
    answer contract, the scorer's registry and implementation hashes."""
    what = f"scoring closure of {case.label}"
    parts: dict[str, Any] = {
        "closure": code_closure([case.verify], what=what),
        "limits": plain(dict(case.tolerances), f"tolerances of {case.label}"),
    }
    # A verifier configured by data (a built-in one by name with its keys, a user's pkg.mod:func with
    # its code's digest: imagebench.cases.verifiers) says what else decides its scores.
    inputs = getattr(case.verify, "scoring_inputs", None)
    if callable(inputs):
        parts["inputs"] = plain(inputs(), f"scoring inputs of {case.label}")
    if case.answer is not None:
        from imagebench.scoring.manifest import implementation_hash, registry_hashes

        _, registry = registry_hashes()
        parts["scorer"] = {"registry_hash": registry, "implementation_hash": implementation_hash()}
    return parts


def scoring_digest(case: Case) -> str:
    """``"sha256:<hex>"`` of :func:`scoring_parts`: two runs scored a case alike only when it is the same."""
    return digest_json(scoring_parts(case))


def scoring_digests(cases: Iterable[Case]) -> tuple[dict[str, str], dict[str, str]]:
    """``({label: scoring digest}, {label: why it cannot be taken})`` for ``cases``."""
    found: dict[str, str] = {}
    problems: dict[str, str] = {}
    for case in cases:
        try:
            found[case.label] = scoring_digest(case)
        except Exception as exc:  # recorded as a problem; a comparison then fails closed on C3
            problems[case.label] = f"{type(exc).__name__}: {exc}"
    return found, problems


__all__ = ["code_closure", "memoized_closures", "scoring_digest", "within_run", "scoring_digests", "scoring_parts"]
