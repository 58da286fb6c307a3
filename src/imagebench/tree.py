"""The fixture tree: curated pixels on disk, and the one manifest that says what they are.

Layout under a root (normally ``$IMAGEBENCH_FIXTURES``)::

    manifest.json                     every curated case this machine has: provenance,
                                      citation, and each file's sha256, size and array specs
    <namespace>/<case_id>/case.json   which file (or archive member) is data, which is truth
    <namespace>/<case_id>/<files>     the files the manifest lists, paths relative to the case folder

Two checks, split by cost. In-band, at build time: every referenced file exists, has the size
the manifest records and a header whose shape and dtype agree with it (O(1) per file).
Out-of-band: ``verify_tree`` / ``imagebench fixtures verify`` hashes every listed file and
reports drift, including files and folders that no manifest entry names. Hashing is never
part of a run.

Every problem is a ``FixtureError`` (or, from ``case_available``, a reason string) naming the
file and the field.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from imagebench.fixture import FixtureError
from imagebench.records import FrozenRecord

if TYPE_CHECKING:
    import numpy as np

    from imagebench.fixture import Fixture

MANIFEST = "manifest.json"
LAYOUT = "case.json"
# The curated fixtures shipped in the package (the built-in curated cases read them).
PACKAGED_ROOT = Path(__file__).resolve().parent / "data" / "fixtures"
TREE_VERSION = 1
HASH_BLOCK = 1 << 20  # bytes read per hashlib.update call while verifying

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

__all__ = [
    "ArraySpec",
    "CaseLayout",
    "FileEntry",
    "Finding",
    "Manifest",
    "ManifestEntry",
    "SCHEMAS",
    "case_available",
    "file_entry",
    "load_fixture",
    "load_layout",
    "load_manifest",
    "sha256_file",
    "verify_tree",
    "write_case_layout",
    "write_manifest_entry",
]


# --------------------------------------------------------------------------- models


def _check_relpath(value: str) -> str:
    """A file path inside a case folder: relative, POSIX, no '..', no empty parts."""
    if not isinstance(value, str) or not value:
        raise FixtureError("expected a non-empty relative path")
    if "\\" in value or value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        raise FixtureError(f"{value!r} must be a relative POSIX path inside the case folder")
    parts = value.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise FixtureError(f"{value!r} may not contain '..', '.' or empty parts (it must stay inside the tree)")
    if value == LAYOUT:
        raise FixtureError(f"{LAYOUT!r} is the case layout, not a data file")
    return value


RelPath = Annotated[str, AfterValidator(_check_relpath)]
Key = Annotated[str, Field(min_length=1)]


class ArraySpec(FrozenRecord):
    """The shape and dtype a header must report (byte order is not part of the comparison)."""

    shape: list[int]
    dtype: str

    @field_validator("shape")
    @classmethod
    def _shape(cls, v: list[int]) -> list[int]:
        if any(n < 0 for n in v):
            raise ValueError("dimensions must be >= 0")
        return v

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str) -> str:
        import numpy as np

        try:
            dt = np.dtype(v)
        except TypeError:
            raise ValueError(f"{v!r} is not a numpy dtype") from None
        if dt.hasobject:
            raise ValueError("object dtypes are not fixture data")
        return v

    @classmethod
    def of(cls, shape: Iterable[int], dtype: Any) -> ArraySpec:
        import numpy as np

        return cls(shape=[int(n) for n in shape], dtype=_dtype_name(np.dtype(dtype)))

    def agrees(self, shape: tuple[int, ...], dtype: np.dtype) -> str | None:
        """None when a header agrees with this spec, else what differs."""
        import numpy as np

        problems = []
        if tuple(self.shape) != tuple(shape):
            problems.append(f"shape {list(shape)} (manifest: {self.shape})")
        if _native(np.dtype(self.dtype)) != _native(np.dtype(dtype)):
            problems.append(f"dtype {_dtype_name(np.dtype(dtype))} (manifest: {self.dtype})")
        return ", ".join(problems) or None


class FileEntry(FrozenRecord):
    sha256: str
    bytes: int = Field(ge=0)
    arrays: dict[str, ArraySpec] = Field(default_factory=dict)

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str) -> str:
        if not _SHA256.match(v):
            raise ValueError("expected 64 lowercase hex digits")
        return v


class ManifestEntry(FrozenRecord):
    skill: str
    case_id: str
    provenance: str = Field(min_length=1)
    citation: str = Field(min_length=1)
    files: dict[RelPath, FileEntry]

    @field_validator("skill", "case_id")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"{v!r} is not a lowercase name ([a-z0-9][a-z0-9._-]*)")
        return v

    @field_validator("citation", "provenance")
    @classmethod
    def _text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank: a curated fixture says where it came from and whose it is")
        return v

    @property
    def label(self) -> str:
        return f"{self.skill}/{self.case_id}"


class Manifest(FrozenRecord):
    """``$IMAGEBENCH_FIXTURES/manifest.json``: every curated case the tree holds."""

    version: Literal[1] = TREE_VERSION
    fixtures: list[ManifestEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> Manifest:
        seen: set[tuple[str, str]] = set()
        for e in self.fixtures:
            key = (e.skill, e.case_id)
            if key in seen:
                raise ValueError(f"{e.label} is listed twice")
            seen.add(key)
        return self

    def entry(self, skill: str, case_id: str) -> ManifestEntry | None:
        for e in self.fixtures:
            if e.skill == skill and e.case_id == case_id:
                return e
        return None


class CaseLayout(FrozenRecord):
    """``<namespace>/<case_id>/case.json``: the data/truth partition, and nothing else."""

    version: Literal[1] = TREE_VERSION
    about: str = ""
    data: dict[Key, RelPath]
    truth: dict[Key, RelPath]

    @model_validator(mode="after")
    def _disjoint(self) -> CaseLayout:
        shared = sorted(set(self.data) & set(self.truth))
        if shared:
            raise ValueError(f"key(s) {shared} appear in both data and truth; truth must never be reachable as data")
        both = sorted(set(self.data.values()) & set(self.truth.values()))
        if both:
            raise ValueError(
                f"file(s) {both} back both a data key and a truth key; a subject handed the data "
                "file could read the truth out of it"
            )
        return self


SCHEMAS: dict[str, type[BaseModel]] = {"manifest": Manifest, "fixture-case": CaseLayout}


def _native(dt: np.dtype) -> np.dtype:
    return dt.newbyteorder("=") if dt.byteorder in "<>" else dt


def _dtype_name(dt: np.dtype) -> str:
    dt = _native(dt)
    return dt.name if dt.fields is None and dt.subdtype is None else dt.str


# --------------------------------------------------------------------------- reading JSON


def _loc(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for a bad mapping key rather than its value
            out += " (the name)"
        elif isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", part):
            out += f".{part}" if out else part
        else:
            out += f"[{str(part)!r}]"
    return out or "(top level)"


def _msg(msg: str) -> str:
    return msg.removeprefix("Value error, ")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def _read_json(path: Path, model: type[BaseModel], what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FixtureError(f"{path}: {what} is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FixtureError(f"{path}: cannot read the {what} ({exc})") from None
    try:
        raw = json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as exc:
        raise FixtureError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise FixtureError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    if "version" not in raw and model is not CaseLayout:
        raise FixtureError(f"{path}: field 'version' is missing; this imagebench reads {what} version {TREE_VERSION}")
    version = raw.get("version", TREE_VERSION)
    if type(version) is not int or version != TREE_VERSION:
        raise FixtureError(
            f"{path}: field 'version' is {version!r}; this imagebench reads {what} version {TREE_VERSION}"
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        lines = [f"field {_loc(e['loc'])}: {_msg(e['msg'])}" for e in exc.errors()[:5]]
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise FixtureError(f"{path}: " + "; ".join(lines) + more) from None


def _root(root: str | os.PathLike[str]) -> Path:
    path = Path(root)
    if not path.exists():
        raise FixtureError(f"fixture tree {path} does not exist")
    if not path.is_dir():
        raise FixtureError(f"fixture tree {path} is not a directory")
    return path


def load_manifest(root: str | os.PathLike[str]) -> Manifest:
    """Read and validate ``<root>/manifest.json``."""
    return _read_json(_root(root) / MANIFEST, Manifest, "manifest")


def _case_dir(root: Path, skill: str, case_id: str) -> Path:
    for what, value in (("namespace", skill), ("case_id", case_id)):
        if not _NAME.match(value or ""):
            raise FixtureError(f"{what} {value!r} is not a lowercase name; it cannot address a folder of the tree")
    return root / skill / case_id


def load_layout(root: str | os.PathLike[str], skill: str, case_id: str) -> CaseLayout:
    """Read and validate ``<root>/<skill>/<case_id>/case.json``."""
    return _read_json(_case_dir(_root(root), skill, case_id) / LAYOUT, CaseLayout, "case layout")


def _inside(root: Path, path: Path, where: str) -> Path:
    """``path`` with symlinks resolved, refusing anything that lands outside ``root``."""
    real_root = root.resolve()
    real = path.resolve()
    if not real.is_relative_to(real_root):
        raise FixtureError(f"{where}: {path} resolves to {real}, outside the fixture tree {real_root}")
    return real


# --------------------------------------------------------------------------- building a fixture


@dataclass(frozen=True)
class _Resolved:
    entry: ManifestEntry
    layout: CaseLayout
    data: dict[str, Any]
    truth: dict[str, Any]


def _resolve(root: str | os.PathLike[str], skill: str, case_id: str) -> _Resolved:
    from imagebench.refs import FileRef, NpzRef, suffix_of

    tree = _root(root)
    folder = _case_dir(tree, skill, case_id)
    manifest_path = tree / MANIFEST
    manifest = load_manifest(tree)
    entry = manifest.entry(skill, case_id)
    if entry is None:
        raise FixtureError(
            f"{manifest_path}: no entry for {skill}/{case_id}; a fixture nobody wrote down is not one to score"
        )
    if not folder.is_dir():
        raise FixtureError(f"{folder}: the case folder is missing (listed in {manifest_path})")
    _inside(tree, folder, f"{manifest_path}: {skill}/{case_id}")
    layout_path = folder / LAYOUT
    layout = _read_json(layout_path, CaseLayout, "case layout")

    # Every file the manifest lists must be present with its recorded size (a stat, not a read).
    for name, spec in entry.files.items():
        where = f"{manifest_path}: fixtures[{skill}/{case_id}].files[{name!r}]"
        path = folder / name
        real = _inside(tree, path, where)
        if not real.exists():
            raise FixtureError(f"{path}: file is missing ({where})")
        if not real.is_file():
            raise FixtureError(f"{path}: not a regular file ({where})")
        size = real.stat().st_size
        if size != spec.bytes:
            raise FixtureError(
                f"{path}: {size} bytes on disk, but {where}.bytes says {spec.bytes}; "
                "this is not the file the case was written against"
            )

    parts: dict[str, dict[str, Any]] = {"data": {}, "truth": {}}
    for part in ("data", "truth"):
        for key, name in getattr(layout, part).items():
            where = f"{layout_path}: {part}[{key!r}] -> {name!r}"
            spec_file = entry.files.get(name)
            if spec_file is None:
                raise FixtureError(f"{where}: the manifest entry {skill}/{case_id} does not list this file")
            path = folder / name
            if suffix_of(name) == ".npz":
                ref: Any = NpzRef(path, key)
                spec = spec_file.arrays.get(key)
                if spec is None:
                    raise FixtureError(
                        f"{where}: {manifest_path} lists no array {key!r} for this archive "
                        f"(files[{name!r}].arrays has {sorted(spec_file.arrays)})"
                    )
            else:
                ref = FileRef(path)
                if len(spec_file.arrays) != 1:
                    raise FixtureError(
                        f"{where}: {manifest_path} files[{name!r}].arrays must hold exactly one spec for a "
                        f"single-array file, found {len(spec_file.arrays)}"
                    )
                spec = next(iter(spec_file.arrays.values()))
            problem = ref.missing()
            if problem:
                raise FixtureError(f"{where}: {problem}")
            try:
                shape, dtype = ref.shape, ref.dtype
            except FixtureError as exc:
                raise FixtureError(f"{where}: {exc}") from None
            differs = spec.agrees(shape, dtype)
            if differs:
                raise FixtureError(
                    f"{where}: the header reports {differs}; this is not the file the case was written against"
                )
            parts[part][key] = ref
    return _Resolved(entry, layout, parts["data"], parts["truth"])


def case_available(root: str | os.PathLike[str], skill_id: str, case_id: str) -> tuple[bool, str]:
    """Whether this machine can build ``skill_id/case_id`` from the tree, and if not, why.

    Checks, without reading pixels: the tree and its manifest, the entry, ``case.json``, every
    listed file's presence and size, a reader for every referenced file, and each header's
    shape and dtype against the manifest.
    """
    try:
        _resolve(root, skill_id, case_id)
    except FixtureError as exc:
        return False, str(exc)
    except Exception as exc:  # availability is a fact to report, never a crash
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


def load_fixture(root: str | os.PathLike[str], skill_id: str, case_id: str) -> Fixture:
    """The curated fixture ``skill_id/case_id``: refs for data and truth, checked by header."""
    from imagebench.fixture import Fixture

    resolved = _resolve(root, skill_id, case_id)
    return Fixture(
        provenance=resolved.entry.provenance,
        data=resolved.data,
        truth=resolved.truth,
        about=resolved.layout.about,
        citation=resolved.entry.citation,
        kind="curated",
        skill_id=skill_id,
        case_id=case_id,
    )


# --------------------------------------------------------------------------- authoring helpers


def sha256_file(
    path: str | os.PathLike[str], block: int = HASH_BLOCK, on_bytes: Callable[[int], None] | None = None
) -> str:
    """Hex sha256 of a file, streamed in ``block``-sized reads (hashlib releases the GIL)."""
    h = hashlib.sha256()
    buf = bytearray(block)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        if hasattr(os, "posix_fadvise"):
            try:
                os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            except OSError:
                pass
        while True:
            n = fh.readinto(buf)
            if not n:
                break
            h.update(view[:n])
            if on_bytes is not None:
                on_bytes(n)
    return h.hexdigest()


def _default_key(path: Path) -> str:
    from imagebench.refs import suffix_of

    suffix = suffix_of(path)
    name = path.name
    return name[: -len(suffix)] if suffix and name.lower().endswith(suffix) else path.stem


def file_entry(path: str | os.PathLike[str], arrays: Iterable[str] | None = None) -> FileEntry:
    """A manifest ``FileEntry`` for ``path``: its sha256, size and array specs read from headers.

    ``arrays`` names the arrays to record. For an ``.npz`` archive they are member names
    (default: every member). For a single-array file it is one name (default: the file name
    without its suffix). A file in no fixture format (a README, a citation text) records no
    arrays unless some are asked for, which is an error.
    """
    from imagebench.refs import READERS, FileRef, NpzRef, npz_keys, suffix_of

    path = Path(path)
    specs: dict[str, ArraySpec] = {}
    suffix = suffix_of(path)
    if suffix == ".npz":
        keys = list(arrays) if arrays is not None else npz_keys(path)
        for key in keys:
            ref = NpzRef(path, key)
            specs[key] = ArraySpec.of(ref.shape, ref.dtype)
    elif suffix in READERS:
        keys = list(arrays) if arrays is not None else [_default_key(path)]
        if len(keys) != 1:
            raise FixtureError(f"{path}: a single-array file records exactly one array spec, asked for {keys}")
        ref = FileRef(path)
        specs[keys[0]] = ArraySpec.of(ref.shape, ref.dtype)
    elif arrays is not None and list(arrays):
        raise FixtureError(
            f"{path}: not a fixture array format ({suffix or 'no suffix'}); it cannot hold {list(arrays)}"
        )
    return FileEntry(sha256=sha256_file(path), bytes=path.stat().st_size, arrays=specs)


def write_case_layout(
    root: str | os.PathLike[str],
    skill: str,
    case_id: str,
    *,
    about: str,
    data: Mapping[str, str],
    truth: Mapping[str, str],
) -> Path:
    """Write ``<root>/<skill>/<case_id>/case.json`` (validated, atomically)."""
    from imagebench.records import atomic_write_text

    layout = CaseLayout(about=about, data=dict(data), truth=dict(truth))
    path = _case_dir(Path(root), skill, case_id) / LAYOUT
    return atomic_write_text(path, layout.model_dump_json(indent=2) + "\n")


def write_manifest_entry(
    root: str | os.PathLike[str],
    skill: str,
    case_id: str,
    *,
    provenance: str,
    citation: str,
    files: Iterable[str] | Mapping[str, Iterable[str] | None] | None = None,
) -> ManifestEntry:
    """Record (or replace) the manifest entry for ``skill/case_id`` from the files on disk.

    ``files`` are paths relative to the case folder; a mapping gives each file's array names
    (see ``file_entry``). Default: every file in the case folder except ``case.json``.
    The manifest is created if absent and written atomically, entries sorted by label.
    """
    from imagebench.records import atomic_write_text

    tree = Path(root)
    folder = _case_dir(tree, skill, case_id)
    if files is None:
        names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != LAYOUT)
        wanted: dict[str, Iterable[str] | None] = {n: None for n in names}
    elif isinstance(files, Mapping):
        wanted = dict(files)
    else:
        wanted = {n: None for n in files}
    entries = {}
    for name, arrays in wanted.items():
        _check_relpath(name)
        _inside(tree, folder / name, f"{folder}: {name}")
        entries[name] = file_entry(folder / name, arrays)
    entry = ManifestEntry(skill=skill, case_id=case_id, provenance=provenance, citation=citation, files=entries)
    path = tree / MANIFEST
    manifest = load_manifest(tree) if path.exists() else Manifest()
    others = [e for e in manifest.fixtures if (e.skill, e.case_id) != (skill, case_id)]
    fixtures = sorted([*others, entry], key=lambda e: (e.skill, e.case_id))
    atomic_write_text(path, Manifest(fixtures=fixtures).model_dump_json(indent=2) + "\n")
    return entry


# --------------------------------------------------------------------------- out-of-band verify

Problem = Literal["missing", "size", "sha256", "unlisted", "layout", "path", "unreadable"]


@dataclass(frozen=True)
class Finding:
    """One way the tree has drifted from its manifest."""

    problem: Problem
    case: str  # "<namespace>/<case_id>", or "" for something at the tree level
    file: str  # path relative to the tree root
    detail: str

    def __str__(self) -> str:
        return f"{self.problem}: {self.case or '(tree)'}: {self.file}: {self.detail}"


def _default_workers() -> int:
    return max(2, min(16, os.cpu_count() or 2))


def _unlisted(tree: Path, manifest: Manifest) -> list[Finding]:
    """Folders and files on disk that no manifest entry names (case.json/manifest.json are layout)."""
    findings: list[Finding] = []
    listed: dict[str, dict[str, set[str]]] = {}
    for e in manifest.fixtures:
        listed.setdefault(e.skill, {})[e.case_id] = set(e.files)

    def rel(p: Path) -> str:
        return p.relative_to(tree).as_posix()

    for top in sorted(tree.iterdir()):
        if top.name == MANIFEST and top.is_file():
            continue
        if top.is_dir() and not top.is_symlink() and top.name in listed:
            for case_dir in sorted(top.iterdir()):
                files = listed[top.name].get(case_dir.name)
                if files is None or not case_dir.is_dir():
                    kind = "folder" if case_dir.is_dir() else "file"
                    findings.append(Finding("unlisted", "", rel(case_dir), f"a {kind} no manifest entry names"))
                    continue
                label = f"{top.name}/{case_dir.name}"
                # every folder on the way to a listed file is named by that file
                prefixes = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}
                for dirpath, dirnames, filenames in os.walk(case_dir):
                    here = Path(dirpath)
                    for d in sorted(dirnames):
                        r = (here / d).relative_to(case_dir).as_posix()
                        if r not in prefixes:
                            findings.append(
                                Finding("unlisted", label, rel(here / d), "a folder the manifest entry does not name")
                            )
                    dirnames[:] = sorted(d for d in dirnames if (here / d).relative_to(case_dir).as_posix() in prefixes)
                    for f in sorted(filenames):
                        r = (here / f).relative_to(case_dir).as_posix()
                        if r == LAYOUT or r in files:
                            continue
                        findings.append(
                            Finding("unlisted", label, rel(here / f), "a file the manifest entry does not list")
                        )
            continue
        kind = "folder" if top.is_dir() else "file"
        findings.append(Finding("unlisted", "", rel(top), f"a {kind} no manifest entry names"))
    return findings


def verify_tree(
    root: str | os.PathLike[str],
    workers: int | None = None,
    *,
    on_start: Callable[[int, int], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> list[Finding]:
    """Hash every file the manifest lists and report drift from it.

    Reports files that are missing, of the wrong size (not hashed) or the wrong sha256, listed
    paths that escape the tree, case folders whose ``case.json`` is missing or invalid, and
    folders/files on disk that no entry names. Files are hashed in parallel on ``workers``
    threads, largest first. ``on_start(files, bytes)`` is called once with the work to do and
    ``on_bytes(n)`` as bytes are hashed (from worker threads). Raises ``FixtureError`` when the
    tree or its manifest cannot be read at all.
    """
    tree = _root(root)
    manifest = load_manifest(tree)
    findings: list[Finding] = []
    jobs: list[tuple[str, str, Path, FileEntry]] = []
    for e in manifest.fixtures:
        folder = tree / e.skill / e.case_id
        layout_path = folder / LAYOUT
        if not folder.is_dir():
            findings.append(Finding("missing", e.label, f"{e.skill}/{e.case_id}", "the case folder is absent"))
            continue
        try:
            _read_json(layout_path, CaseLayout, "case layout")
        except FixtureError as exc:
            findings.append(Finding("layout", e.label, layout_path.relative_to(tree).as_posix(), str(exc)))
        for name, spec in sorted(e.files.items()):
            path = folder / name
            rel = f"{e.skill}/{e.case_id}/{name}"
            if not path.exists():
                why = (
                    "a symlink whose target is missing"
                    if path.is_symlink()
                    else "listed in the manifest, absent on disk"
                )
                findings.append(Finding("missing", e.label, rel, why))
                continue
            try:
                real = _inside(tree, path, rel)
            except FixtureError as exc:
                findings.append(Finding("path", e.label, rel, str(exc)))
                continue
            if not real.is_file():
                findings.append(Finding("missing", e.label, rel, "not a regular file"))
                continue
            size = real.stat().st_size
            if size != spec.bytes:
                findings.append(Finding("size", e.label, rel, f"{size} bytes on disk, manifest says {spec.bytes}"))
                continue
            jobs.append((e.label, rel, real, spec))
    findings.extend(_unlisted(tree, manifest))

    jobs.sort(key=lambda j: j[3].bytes, reverse=True)  # largest first balances the threads
    if on_start is not None:
        on_start(len(jobs), sum(j[3].bytes for j in jobs))
    if jobs:
        n = max(1, min(workers or _default_workers(), len(jobs)))
        with ThreadPoolExecutor(max_workers=n, thread_name_prefix="imagebench-verify") as pool:
            futures = {pool.submit(sha256_file, j[2], HASH_BLOCK, on_bytes): j for j in jobs}
            for fut in as_completed(futures):
                label, rel, _path, spec = futures[fut]
                try:
                    digest = fut.result()
                except OSError as exc:
                    findings.append(Finding("unreadable", label, rel, f"cannot read ({exc.strerror or exc})"))
                    continue
                if digest != spec.sha256:
                    findings.append(
                        Finding("sha256", label, rel, f"sha256 {digest[:16]}..., manifest says {spec.sha256[:16]}...")
                    )
    order = {"path": 0, "missing": 1, "size": 2, "sha256": 3, "unreadable": 4, "layout": 5, "unlisted": 6}
    findings.sort(key=lambda f: (f.case, f.file, order[f.problem]))
    return findings
