"""Case fingerprints: one digest over everything that makes a case the case it is.
Long because every part of a case's identity is pinned here, beside the one canonical JSON they share.

A case's fingerprint is taken over its label, its pinned revision and a map of *parts*, one
digest per role: the prompt, the persona, the layers, what it collects, its class and time
limit, the verifier (qualified name and a digest of its source), the scoring closure (the
verifier with every function of the project it calls, its limits and the scorer's hashes:
:mod:`imagebench.runs.closure`), the tolerances, the answer contract, and the fixture's inputs. For a :class:`~imagebench.fixtures.fixture.Procedural` fixture those
are the builder (qualified name and source digest), the seed and the params; for an
:class:`~imagebench.fixtures.fixture.OnDisk` fixture they are the digest of the case's ``case.json`` and,
for every data key and every truth key, the file's sha256 *as the tree manifest records it*
(the bytes themselves are re-hashed only by ``imagebench suite verify``).

Source digests cannot see what a builder reaches beyond its own source (a helper it calls, a
library's random numbers, a file it reads), so every fixture that is not read from a fixture tree
is also *built*, and each of its data and truth values digested as built (parts
``built:data:<key>`` and ``built:truth:<key>``; see :mod:`imagebench.fixtures.fixture_digest`). A curated
fixture is identified by the manifest digests above instead, which ``suite verify`` re-hashes.

Keeping the parts, not only their digest, lets a suite say *which* role of a case changed
("prompt of segment-nuclei/dsb2018", "truth 'labels' of segment-nuclei/dsb2018") without ever
naming a local path. All JSON hashed here is canonical: sorted keys, no whitespace, ASCII.

A fixture spec of another type must say what its inputs are through
``fingerprint_inputs() -> {role: JSON value}``; one that does not is refused (it is built too).
A case may add digests of further inputs in ``case.meta["digests"]`` (``{role: "sha256:<hex>"}``).

:func:`agent_visible` is the other half: what a subject may see of a case. It never holds the
reference solution, the truth, the verifier or the tolerances.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.fixtures.digest import (
    FingerprintError,
    canonical_json,
    digest_bytes,
    digest_json,
    digest_text,
    is_digest,
    plain,
    scrub,
)
from imagebench.runs.closure import scoring_digest, within_run

if TYPE_CHECKING:
    from imagebench.case.model import Case


# Names that move: a revision must never be one of these (an alias file may map some to a pin).
FLOATING_REVISIONS: frozenset[str] = frozenset(
    {
        "latest",
        "main",
        "master",
        "head",
        "tip",
        "trunk",
        "stable",
        "dev",
        "devel",
        "develop",
        "development",
        "nightly",
        "current",
        "edge",
        "next",
        "release",
        "unstable",
        "canary",
        "beta",
        "alpha",
        "default",
        "unknown",
        "none",
        "null",
    }
)
_VERSION = re.compile(r"^v?\d+(?:\.\d+){1,3}(?:[-+.][0-9A-Za-z]+)*$")
_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


class RevisionError(ValueError):
    """A revision is not pinned (empty, a moving name such as ``latest``, or not a version/commit)."""


# --------------------------------------------------------------------------- revisions


def revision_problem(revision: Any) -> str | None:
    """None when ``revision`` is pinned, else why not (in words)."""
    if not isinstance(revision, str):
        return f"expected a string, got {type(revision).__name__}"
    if not revision.strip():
        return "is empty; a revision must be pinned (a version such as 2026.11.0 or a 40-hex commit)"
    if revision != revision.strip():
        return f"{revision!r} has surrounding whitespace"
    if revision.lower() in FLOATING_REVISIONS:
        return (
            f"{revision!r} is a moving name, not a pin; give a version such as 2026.11.0 or a 40-hex commit"
            " (an alias must be resolved through an alias file first)"
        )
    if _VERSION.match(revision) or _COMMIT.match(revision):
        return None
    return (
        f"{revision!r} is neither a version (digits and dots, e.g. 2026.11.0, optionally with a suffix such as -rc1)"
        " nor a 40- or 64-hex commit"
    )


def is_pinned(revision: Any) -> bool:
    return revision_problem(revision) is None


def check_revision(revision: Any, what: str = "revision") -> str:
    """Return ``revision`` when it is pinned; raise :class:`RevisionError` (naming ``what``) otherwise."""
    problem = revision_problem(revision)
    if problem is not None:
        raise RevisionError(f"{what} {problem}")
    return revision


def qualified_name(func: Any) -> str:
    module = getattr(func, "__module__", None) or type(func).__module__
    name = getattr(func, "__qualname__", None) or type(func).__qualname__
    return f"{module}:{name}"


def source_digest(func: Any, what: str) -> dict[str, Any]:
    """``{"name": module:qualname, "source": sha256 of its source}`` (a partial also records its arguments)."""
    if isinstance(func, functools.partial):
        return {
            "partial": source_digest(func.func, what),
            "args": plain(list(func.args), f"{what} arguments"),
            "keywords": plain(dict(func.keywords), f"{what} keywords"),
        }
    if inspect.isfunction(func) or inspect.ismethod(func) or inspect.isclass(func):
        return {"name": qualified_name(func), "source": _source(func, func, what)}
    # A callable object: its code is its class and every base it inherits from, its
    # configuration is its dataclass fields (anything else cannot be told apart, so it is refused).
    cls = type(func)
    classes = [c for c in cls.__mro__ if c.__module__ not in ("builtins", "abc", "typing")]
    out: dict[str, Any] = {
        "name": qualified_name(func),
        "classes": [{"name": qualified_name(c), "source": _source(c, func, what)} for c in classes],
    }
    if dataclasses.is_dataclass(func):
        out["fields"] = {
            f.name: plain(getattr(func, f.name), f"{what} field {f.name!r}") for f in dataclasses.fields(func) if f.init
        }
    elif getattr(func, "__dict__", None):
        raise FingerprintError(
            f"{what} {qualified_name(func)}: a callable object with state must be a dataclass so its configuration can be pinned"
        )
    return out


def _source(target: Any, func: Any, what: str) -> str:
    from imagebench.runs.closurecache import current  # kept across runs, keyed by what inspect reads

    def digest() -> str:
        return current().source_digest(target, lambda: digest_text(inspect.getsource(target)))

    try:
        return within_run("source", target, digest)
    except (OSError, TypeError) as exc:
        raise FingerprintError(f"{what} {qualified_name(func)}: its source cannot be read ({exc})") from None


# --------------------------------------------------------------------------- parts


PART_ROLES: dict[str, str] = {
    "prompt": "prompt",
    "persona": "persona",
    "layers": "layers",
    "collect": "collected names",
    "class": "case class",
    "timeout": "time limit",
    "verifier": "verifier",
    "scoring": "scoring closure (the verifier, the project code it calls, its limits, the scorer)",
    "tolerance": "tolerances",
    "answer": "answer contract",
    "fixture": "fixture kind",
    "builder": "fixture builder",
    "seed": "fixture seed",
    "params": "fixture params",
    "case.json": "fixture layout (case.json)",
    "curated": "curated fixture it reads",
    "checks": "grading checks",
    "min_samples": "fewest rerun samples",
    "skills": "skills offered",
    "built fixture": "built fixture",
}


def role_of(part: str, label: str) -> str:
    """A part's role in words: ``"truth 'labels' of segment-nuclei/dsb2018"``, ``"prompt of tasks/x"``."""
    head, sep, key = part.partition(":")
    if sep and head == "built":
        which, _, name = key.partition(":")
        return f"built {which} {name!r} of {label}"
    if sep and head in ("data", "truth", "input"):
        return f"{head} {key!r} of {label}"
    if sep and head == "spec":
        return f"fixture input {key!r} of {label}"
    return f"{PART_ROLES.get(part, part)} of {label}"


def _text_part(text: Any, what: str, label: str) -> str:
    if not isinstance(text, str):
        raise FingerprintError(f"{what} of {label}: expected text, got {type(text).__name__}")
    try:
        return digest_text(text)
    except FingerprintError as exc:
        raise FingerprintError(f"{what} of {label}: {exc}") from None


def tree_location(case: Case) -> tuple[Path | None, str, str] | None:
    """Where a curated case's pixels live: ``(tree root or None, namespace, case id)``.

    An :class:`~imagebench.fixtures.fixture.OnDisk` case reads its own label from the tree; a bundle's
    ``CuratedRef`` reads another tree case under its own label. None for any other fixture.
    """
    from imagebench.fixtures.specs import OnDisk

    spec = case.fixture
    if isinstance(spec, OnDisk):
        return spec.tree_root(), case.namespace, case.case_id
    curated = _curated_ref_type()
    if curated is not None and isinstance(spec, curated):
        return OnDisk(tolerance=spec.tolerance, root=spec.root).tree_root(), spec.skill, spec.case_id
    return None


def _curated_ref_type() -> type | None:
    """``imagebench.bundle.cases.CuratedRef`` when that module is loaded (a bundle case can only exist then)."""
    module = sys.modules.get("imagebench.bundle.cases")
    return getattr(module, "CuratedRef", None) if module is not None else None


def _on_disk_parts(label: str, root: Path | None, ns: str, case_id: str) -> dict[str, str]:
    from imagebench.fixtures import tree
    from imagebench.fixtures.fixture import FIXTURES_ENV, FixtureError
    from imagebench.fixtures.refs import suffix_of

    where = f"{ns}/{case_id}"
    if root is None:
        raise FingerprintError(f"fixture tree of {label}: ${FIXTURES_ENV} is not set and the case names no root")
    try:
        manifest = tree.load_manifest(root)
        layout = tree.load_layout(root, ns, case_id)
    except FixtureError as exc:
        raise FingerprintError(f"fixture tree of {label}: {scrub(str(exc))}") from None
    entry = manifest.entry(ns, case_id)
    if entry is None:
        raise FingerprintError(f"fixture manifest of {label}: it has no entry for {where}")
    try:
        layout_bytes = (Path(root) / ns / case_id / tree.LAYOUT).read_bytes()
    except OSError as exc:
        raise FingerprintError(
            f"fixture layout (case.json) of {label}: cannot be read ({exc.strerror or exc})"
        ) from None
    parts: dict[str, str] = {"case.json": digest_bytes(layout_bytes)}
    for part in ("data", "truth"):
        for key, name in sorted(getattr(layout, part).items()):
            spec_file = entry.files.get(name)
            if spec_file is None:
                raise FingerprintError(
                    f"{part} {key!r} of {label}: the fixture manifest does not list its file {name!r}"
                )
            if suffix_of(name) == ".npz":
                array = spec_file.arrays.get(key)
            else:
                array = next(iter(spec_file.arrays.values()), None)
            parts[f"{part}:{key}"] = digest_json(
                {
                    "file": name,
                    "sha256": spec_file.sha256,
                    "bytes": spec_file.bytes,
                    "array": array.model_dump(mode="json") if array is not None else None,
                }
            )
    return parts


def curated_parts(case: Case) -> dict[str, str] | None:
    """The parts naming a curated case's pixels (its ``case.json`` and each data and truth file as
    the tree manifest records it), None for a case whose fixture is not read from a tree.
    Raises FingerprintError when the tree cannot be read."""
    located = tree_location(case)
    if located is None:
        return None
    root, ns, case_id = located
    return _on_disk_parts(case.label, root, ns, case_id)


def _fixture_parts(case: Case) -> dict[str, str]:
    from imagebench.fixtures.specs import Procedural

    spec = case.fixture
    label = case.label
    if isinstance(spec, Procedural):
        return {
            "builder": digest_json(source_digest(spec.builder, f"fixture builder of {label}")),
            "seed": digest_json(plain(spec.seed, f"fixture seed of {label}")),
            "params": digest_json(plain(dict(spec.params), f"fixture params of {label}")),
        }
    located = tree_location(case)
    if located is not None:
        root, ns, case_id = located
        parts = _on_disk_parts(label, root, ns, case_id)
        if (ns, case_id) != (case.namespace, case.case_id):
            parts["curated"] = digest_json([ns, case_id])
        return parts
    hook = getattr(spec, "fingerprint_inputs", None)
    if not callable(hook):
        raise FingerprintError(
            f"fixture of {label}: a {type(spec).__name__} is neither Procedural nor OnDisk and defines no "
            "fingerprint_inputs(); nothing says what its inputs are, so it cannot be pinned"
        )
    try:
        inputs = hook()
    except Exception as exc:
        raise FingerprintError(f"fixture inputs of {label}: {type(exc).__name__}: {scrub(str(exc))}") from None
    if not isinstance(inputs, Mapping) or not inputs:
        raise FingerprintError(f"fixture inputs of {label}: fingerprint_inputs() must return a non-empty mapping")
    return {
        f"spec:{role}": digest_json(plain(value, f"fixture input {role!r} of {label}"))
        for role, value in inputs.items()
    }


def _built_parts(case: Case) -> dict[str, str]:
    """``built:data:<key>`` / ``built:truth:<key>``: the fixture as built now (none for a curated one)."""
    if tree_location(case) is not None:
        return {}  # identified by the tree manifest's digests; verify re-hashes the files
    from imagebench.fixtures.fixture_digest import built_parts

    label = case.label
    spec = case.fixture
    try:
        ok, why = spec.available(case.namespace, case.case_id)
    except Exception as exc:
        ok, why = False, f"{type(exc).__name__}: {exc}"
    if not ok:
        raise FingerprintError(f"built fixture of {label}: cannot be built here ({scrub(str(why))})")
    try:
        fixture = spec.build(case.namespace, case.case_id)
    except Exception as exc:
        raise FingerprintError(
            f"built fixture of {label}: cannot be built ({type(exc).__name__}: {scrub(str(exc))})"
        ) from None
    return {f"built:{role}": digest for role, digest in built_parts(fixture, label).items()}


def _layers_doc(case: Case) -> list[dict[str, Any]]:
    return [
        {
            "name": layer.name,
            "key": layer.key,
            "kind": layer.kind,
            "presentation": layer.presentation,
            "chunks": list(layer.chunks) if layer.chunks is not None else None,
            "dim_labels": list(layer.dim_labels) if layer.dim_labels is not None else None,
        }
        for layer in case.layers
    ]


def _collect_doc(case: Case) -> list[dict[str, Any]]:
    for c in case.collect:
        _text_part(c.description, f"description of collected name {c.name!r}", case.label)
    return [_collected(c) for c in case.collect]


def _collected(c: Any) -> dict[str, Any]:
    """A collected name as the fingerprint reads it; ``recorded`` only when set (a trigger case's
    ``trace``), so no other case's digest moved when it came."""
    doc: dict[str, Any] = {"name": c.name, "what": c.what, "description": c.description}
    if getattr(c, "recorded", False):
        doc["recorded"] = True
    return doc


# Keys of ``Case.meta`` that reach a subject or decide a verdict (a bundle case sets them).
META_INPUTS: tuple[str, ...] = ("workspace_files", "env", "checks", "min_samples", "skills")


def _folder_digest(folder: Path, label: str) -> str:
    """Digest over every file under ``folder``: relative POSIX path and sha256 of its bytes."""
    if not folder.is_dir():
        raise FingerprintError(f"input 'workspace_files' of {label}: the folder is missing")
    listing: list[list[str]] = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            raise FingerprintError(f"input 'workspace_files' of {label}: it holds a symbolic link")
        if path.is_file():
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise FingerprintError(
                    f"input 'workspace_files' of {label}: a file cannot be read ({exc.strerror or type(exc).__name__})"
                ) from None
            listing.append([path.relative_to(folder).as_posix(), hashlib.sha256(data).hexdigest()])
    return digest_json(listing)


def _meta_parts(case: Case) -> dict[str, str]:
    label = case.label
    meta = case.meta if isinstance(case.meta, Mapping) else {}
    parts: dict[str, str] = {}
    for key in META_INPUTS:
        if key not in meta:
            continue
        if key == "workspace_files":
            parts["input:workspace_files"] = _folder_digest(Path(meta[key]), label)
        elif key == "env":
            parts["input:env"] = digest_json(plain(meta[key], f"input 'env' of {label}"))
        else:
            parts[key] = digest_json(plain(meta[key], f"{PART_ROLES[key]} of {label}"))
    extra = meta.get("digests")
    if extra is None:
        return parts
    if not isinstance(extra, Mapping):
        raise FingerprintError(f"meta['digests'] of {label}: expected a mapping of role -> sha256 digest")
    for role, value in extra.items():
        if not is_digest(value):
            raise FingerprintError(f"input {role!r} of {label}: {value!r} is not a 'sha256:<64 hex>' digest")
        parts[f"input:{role}"] = value
    return parts


def collect_parts(case: Case, *, built: bool = True) -> tuple[dict[str, str], list[str]]:
    """Every role of ``case`` -> its digest, and every problem met on the way (each naming its role).

    Each role is computed on its own, so one unreadable input does not hide another. With
    ``built=False`` the fixture is not built and the ``built:*`` parts are left out.
    """
    label = case.label
    parts: dict[str, str] = {}
    problems: list[str] = []
    why = revision_problem(case.revision)
    if why is not None:
        problems.append(f"revision of {label} {why}")
    groups: list[tuple[str, Any]] = [
        ("prompt", lambda: {"prompt": _text_part(case.task, "prompt", label)}),
        ("persona", lambda: {"persona": _text_part(case.persona, "persona", label)}),
        ("layers", lambda: {"layers": digest_json(_layers_doc(case))}),
        ("collect", lambda: {"collect": digest_json(_collect_doc(case))}),
        ("class", lambda: {"class": digest_json(case.case_class)}),
        ("timeout", lambda: {"timeout": digest_json(plain(float(case.timeout_s), f"time limit of {label}"))}),
        ("verifier", lambda: {"verifier": digest_json(source_digest(case.verify, f"verifier of {label}"))}),
        ("scoring", lambda: {"scoring": scoring_digest(case)}),
        ("tolerance", lambda: {"tolerance": digest_json(plain(dict(case.tolerances), f"tolerances of {label}"))}),
        ("fixture", lambda: {"fixture": digest_json(case.fixture.kind)}),
        (
            "answer",
            lambda: (
                {}
                if case.answer is None
                else {"answer": digest_json(plain(case.answer, f"answer contract of {label}"))}
            ),
        ),
        ("fixture inputs", lambda: _fixture_parts(case)),
        ("built fixture", lambda: _built_parts(case) if built else {}),
        ("inputs", lambda: _meta_parts(case)),
    ]
    for role, compute in groups:
        try:
            parts.update(compute())
        except FingerprintError as exc:
            problems.append(str(exc))
        except Exception as exc:  # an input that cannot even be read is a problem to report, never a crash
            problems.append(f"{role_of(role, label)}: {type(exc).__name__}: {scrub(str(exc))}")
    return parts, problems


def case_parts(case: Case) -> dict[str, str]:
    """Every role of ``case`` -> its digest (``"sha256:<hex>"``).

    Raises :class:`RevisionError` for an unpinned revision and :class:`FingerprintError` (listing
    every problem) when an input cannot be digested.
    """
    check_revision(case.revision, f"revision of {case.label}")
    parts, problems = collect_parts(case)
    if problems:
        raise FingerprintError("; ".join(problems))
    return parts


def fingerprint_from_parts(label: str, revision: str, parts: Mapping[str, str]) -> str:
    """The fingerprint of a case given its label, revision and parts (what a suite file can recheck)."""
    return digest_json({"label": label, "revision": revision, "parts": dict(parts)})


def case_fingerprint(case: Case) -> str:
    """``"sha256:<hex>"`` over the case's label, pinned revision and every input by digest."""
    return fingerprint_from_parts(case.label, case.revision, case_parts(case))


#: Parts a definition fingerprint leaves out: the fixture's seed and the fixture as built from it.
SEED_PARTS: tuple[str, ...] = ("seed",)


def definition_parts(case: Case) -> dict[str, str]:
    """Every part of :func:`case_parts` that does not depend on the fixture's seed.

    That is all of them but the ``seed`` part and the ``built:*`` parts (the fixture is not built).
    Raises as :func:`case_parts` does.
    """
    check_revision(case.revision, f"revision of {case.label}")
    parts, problems = collect_parts(case, built=False)
    if problems:
        raise FingerprintError("; ".join(problems))
    return {role: digest for role, digest in parts.items() if role not in SEED_PARTS}


def definition_fingerprint(case: Case) -> str:
    """``"sha256:<hex>"`` over the case's label, pinned revision and :func:`definition_parts`.

    It identifies what the case *is* (prompt, layers, verifier, tolerances, builder and params,
    ...) but not the seed it is built from, so a seed derived from it (a sealed run's, see
    :mod:`imagebench.runs.sealed`) does not feed back into it. Nothing is built to compute it.
    """
    return fingerprint_from_parts(case.label, case.revision, definition_parts(case))


# --------------------------------------------------------------------------- what a subject may see


def agent_visible(case: Case) -> dict[str, Any]:
    """What a subject of ``case`` may see: its prompt, persona, layers, what to leave and the data keys.

    Never the reference solution, the truth, the verifier or the tolerances; the fixture is not
    built (so no pixels are read either).
    """
    from imagebench.case.session import case_prompt
    from imagebench.case.skills import SKILL_TEXTS_META, SKILLS_META, offered_skills, skill_instructions

    seen: dict[str, Any] = {
        "label": case.label,
        "revision": case.revision,
        "prompt": case_prompt(case),
        "persona": case.persona,
        "layers": [
            {
                "name": layer.name,
                "kind": layer.kind,
                "presentation": layer.presentation,
                "chunks": list(layer.chunks) if layer.chunks is not None else None,
                "dim_labels": list(layer.dim_labels) if layer.dim_labels is not None else None,
            }
            for layer in case.layers
        ],
        "collect": [_collected(c) for c in case.collect],
        "data_keys": sorted({layer.key for layer in case.layers}),
    }
    if isinstance(case.meta, Mapping) and SKILLS_META in case.meta:  # a trigger case's skills to choose from
        seen["skills"] = offered_skills(case)
        if SKILL_TEXTS_META in case.meta:  # what activating each returns: a new SKILL.md is a new case
            seen["skill_texts"] = skill_instructions(case)
    return seen


__all__ = [
    "FLOATING_REVISIONS",
    "FingerprintError",
    "META_INPUTS",
    "RevisionError",
    "agent_visible",
    "canonical_json",
    "case_fingerprint",
    "case_parts",
    "collect_parts",
    "curated_parts",
    "check_revision",
    "definition_fingerprint",
    "definition_parts",
    "digest_bytes",
    "digest_json",
    "digest_text",
    "fingerprint_from_parts",
    "is_digest",
    "is_pinned",
    "plain",
    "qualified_name",
    "revision_problem",
    "role_of",
    "scrub",
    "source_digest",
    "tree_location",
]
