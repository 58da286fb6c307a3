"""A subject's identity: its name and the digest of the code it ran, as a run records it.

:func:`identity_of` asks the subject's kind what it runs (:meth:`~imagebench.subjects.base.SubjectKind.identity_parts`)
and hashes that into ``code``::

    {"name": "python-mypkg.solve.run", "code": "sha256:<hex>", "parts": {...}}

``parts`` hold digests, counts and last names only, never a machine path: a ``python:`` subject's
package tree (every ``.py`` and extension module under the top-level package's folder, found
without importing anything of it), a ``command:`` subject's command line and every
``--subject-expose`` tree (:func:`code_tree`: each file's relative path and the sha256 of its
bytes; a symbolic link by its target's text, never followed; at most :data:`MAX_TREE_FILES` files
and :data:`MAX_TREE_BYTES` bytes, or the subject is refused naming the tree). ``run.json`` keeps
the identity in ``extra.subject_identity`` and the receipt in ``subject.identity``; a resume
refuses a subject whose code changed since the run started (:func:`identity_change`).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from imagebench.subjects.base import SubjectError, SubjectKind

#: the most files, and bytes, one tree of a subject's code may hold for its digest to be taken
MAX_TREE_FILES = 10_000
MAX_TREE_BYTES = 1 << 30
#: the suffixes of the files a Python package's code is (its sources and extension modules)
CODE_SUFFIXES = (*importlib.machinery.SOURCE_SUFFIXES, *importlib.machinery.EXTENSION_SUFFIXES)


def identity_of(subject: object) -> dict[str, Any]:
    """``{"name", "code", "parts"}`` of ``subject`` (a subject object): ``code`` is the sha256 of
    ``parts`` in canonical JSON. SubjectError when its code cannot be digested (a tree too large,
    a file that cannot be read), naming the tree."""
    from imagebench.fixtures.digest import digest_json

    name = getattr(subject, "name", None)
    if not isinstance(name, str):
        raise SubjectError(f"subject {type(subject).__name__} has no name")
    parts = subject.identity_parts() if isinstance(subject, SubjectKind) else _object_parts(subject)
    return {"name": name, "code": digest_json(parts), "parts": parts}


def code_tree(path: str | os.PathLike[str], *, role: str, python: bool = False) -> dict[str, Any]:
    """The digest of the file tree (or file) at ``path``, by its last name: ``{"name", "files",
    "bytes", "digest"}``. ``python`` keeps only code files (:data:`CODE_SUFFIXES`). ``role`` names
    it in errors (``--subject-expose tree 'agent'``)."""
    from imagebench.fixtures.digest import TreeError, TreeTooLarge, tree_digest

    root = Path(path).resolve()  # the tree the run was given; nothing inside it is followed
    keep = (lambda rel: rel.endswith(CODE_SUFFIXES)) if python else None
    what = f"{role} {root.name!r}"
    try:
        digest = tree_digest(root, what=what, keep=keep, max_files=MAX_TREE_FILES, max_bytes=MAX_TREE_BYTES)
    except TreeTooLarge as exc:
        raise SubjectError(
            f"{exc}: a subject's identity digests its code, at most {MAX_TREE_FILES} files and "
            f"{MAX_TREE_BYTES >> 30} GiB a tree; show the subject only its code"
        ) from None
    except TreeError as exc:
        raise SubjectError(f"cannot digest the subject's code: {exc}") from None
    return {"name": root.name, "files": digest.files, "bytes": digest.size, "digest": digest.digest}


def python_code(target: str) -> dict[str, Any]:
    """What a ``python:package.module:function`` subject runs: the tree of its top-level package
    (every code file under its folder) or, for a module outside any package, its file. Found with
    :func:`importlib.util.find_spec` on the top-level name only, which imports nothing."""
    top = target.partition(":")[0].split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError) as exc:
        raise SubjectError(f"subject python:{target}: cannot find module {top!r} ({exc})") from None
    if spec is None:
        raise SubjectError(f"subject python:{target}: no module named {top!r}")
    parts: dict[str, Any] = {"module": top}
    locations = list(spec.submodule_search_locations or [])
    if locations:
        # every file of the package: its code, a sourceless .pyc, the data it reads at import
        parts["package"] = [code_tree(p, role=f"the package of python:{target}") for p in locations]
    elif spec.origin and spec.origin not in ("built-in", "frozen") and Path(spec.origin).is_file():
        parts["file"] = code_tree(spec.origin, role=f"the module of python:{target}")
        # a module outside any package imports its neighbours as top-level modules: their code too
        parts["beside"] = _neighbours(Path(spec.origin), target)
    else:
        parts["origin"] = str(spec.origin or "none")  # built-in or frozen: the interpreter's own
    return parts


def file_code(path: Path, target: str) -> dict[str, Any]:
    """What a ``python:path/to/file.py:function`` subject runs: the file (its sha256 among the
    tree digest's fields) and the code files beside it, which it can import as top-level modules."""
    import hashlib

    if not path.is_file():
        raise SubjectError(f"subject python:{target}: no file {path.name!r} to digest")
    try:
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise SubjectError(f"subject python:{target}: cannot read {path.name!r}: {exc}") from None
    return {
        "file": {**code_tree(path, role=f"the file of python:{path.name}"), "sha256": f"sha256:{sha}"},
        "beside": _neighbours(path, f"{path.name}:{target.rpartition(':')[2]}"),
    }


def _neighbours(origin: Path, target: str) -> dict[str, Any]:
    """The code files beside a single-file module (what it can import as top-level modules), by
    name, without descending into folders: a folder of scripts stays a folder of scripts."""
    from imagebench.fixtures.digest import TreeError, tree_digest

    folder = origin.resolve().parent
    names = {
        p.name
        for p in folder.iterdir()
        if p.name != origin.name and p.is_file() and not p.is_symlink() and p.name.endswith(CODE_SUFFIXES)
    } if folder.is_dir() else set()
    if len(names) > MAX_TREE_FILES:
        raise SubjectError(f"the folder of python:{target} holds more than {MAX_TREE_FILES} code files")
    try:
        digest = tree_digest(folder, what=f"the folder of python:{target}", keep=lambda rel: rel in names, max_bytes=MAX_TREE_BYTES)
    except TreeError as exc:
        raise SubjectError(f"cannot digest the code beside python:{target}: {exc}") from None
    return {"files": digest.files, "digest": digest.digest}


def module_found(target: str) -> bool:
    """Whether the top-level module of ``target`` (``package.module:function``) can be found (nothing is imported)."""
    try:
        return importlib.util.find_spec(target.partition(":")[0].split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def expose_code(paths: tuple[Path, ...] | list[Path]) -> list[dict[str, Any]]:
    """The digest of every ``--subject-expose`` tree, in the order given."""
    return [code_tree(p, role="--subject-expose tree") for p in paths]


def live_code(obj: object, *, role: str) -> dict[str, Any]:
    """The code of a live object (a function, or an instance's class), already imported: the file
    of the module that defines it, or only its qualified name when that module has no file."""
    target = obj if callable(obj) and hasattr(obj, "__code__") else type(obj)
    module = getattr(target, "__module__", None) or ""
    parts: dict[str, Any] = {"defined": f"{module}:{getattr(target, '__qualname__', type(obj).__name__)}"}
    origin = getattr(sys.modules.get(module), "__file__", None)
    if origin and Path(origin).is_file():
        parts["file"] = code_tree(origin, role=role)
    return parts


def _object_parts(subject: object) -> dict[str, Any]:
    """A subject object of no registered kind (a Python API caller's): the file of the module that
    defines its class (or it, a function)."""
    return {"kind": "other", **live_code(subject, role=f"the module of subject {getattr(subject, 'name', '?')!r}")}


def identity_change(recorded: Any, current: dict[str, Any]) -> str | None:
    """What differs between a recorded identity's code and ``current``'s (``parts.package[0].digest:
    sha256:1a2b... -> sha256:3c4d...``), or None when the code is the same."""
    if not isinstance(recorded, dict) or recorded.get("code") == current.get("code"):
        return None
    changes: list[str] = []

    def walk(old: Any, new: Any, where: str) -> None:
        if isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new)):
                walk(old.get(key), new.get(key), f"{where}.{key}")
        elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
            for i, (a, b) in enumerate(zip(old, new, strict=True)):
                walk(a, b, f"{where}[{i}]")
        elif old != new:
            changes.append(f"{where}: {_short(old)} -> {_short(new)}")

    walk(recorded.get("parts"), current.get("parts"), "parts")
    return "; ".join(changes[:6]) + ("; ..." if len(changes) > 6 else "") if changes else (
        f"code {_short(recorded.get('code'))} -> {_short(current.get('code'))}"
    )


def _short(value: Any) -> str:
    text = "absent" if value is None else str(value)
    return text[:19] + "..." if text.startswith("sha256:") and len(text) > 22 else text
