"""Run receipts: what a run needs to be reproduced or compared, and nothing private.

``receipt.json`` (beside ``run.json`` in a run folder) records the platform, the Python and
dependency versions, the source revision with whether that checkout's package folders held
uncommitted changes (``source_dirty``; None when installed), the digest of the package's source
tree (``source_tree_hash``: every file of the ``imagebench`` and ``napari_imagebench`` folders, what
ran whether or not it was committed), the digest of every fixture manifest the run read
(named by its role, never by its path), the scorer's registry and implementation hashes, the
subject (a ``command:`` subject only by its program name and the sha256 of its command line, with
its identity: ``subject.identity``, the digest of the code it ran, :func:`imagebench.subjects.identity_of`),
the sampling configuration, the seeds and the cases with their revisions. A sealed run
(:mod:`imagebench.runs.sealed`) is marked ``sealed: true`` with the commitment to its secret
(``sealed_commitment``); its procedural seeds are recorded as ``"sealed"`` (each sample's seed is
in its summary, written once the sample is scored).

It never holds tokens, credentials, environment values or local paths: every string given by
the caller is scrubbed (absolute paths and the home folder become placeholders, URLs and IP
addresses ``<address>``, values of secret-looking environment variables ``<redacted>``), and
:func:`write_receipt` refuses a receipt that still contains any of them.

Schema version 2 added ``source_tree_hash`` (required there), ``source_dirty`` and
``subject.identity``; a version 1 receipt still reads, without them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from imagebench.records import Record

#: the version written; :func:`read_receipt` reads 1 too (before the source tree hash, the dirty
#: flag and the subject's identity: ``Receipt.schema_version``)
RECEIPT_SCHEMA_VERSION = 2
RECEIPT_NAME = "receipt.json"

#: distributions whose versions a receipt records (importlib.metadata: nothing is imported)
PACKAGES: tuple[str, ...] = (
    "napari-imagebench",
    "numpy",
    "scipy",
    "scikit-image",
    "dask",
    "distributed",
    "pyarrow",
    "zarr",
    "tifffile",
    "pydantic",
    "napari",
)

_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL|AUTH|SESSION|COOKIE)", re.IGNORECASE
)
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*")
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
_ABS_PATH = re.compile(r"(?<![\w.:/>-])(?:~/|/(?=[\w.-]))[^\s'\"]*|\b[A-Za-z]:\\[^\s'\"]*")


class ReceiptError(ValueError):
    """A receipt cannot be built or would leak something private (names what and where)."""


class Receipt(Record):
    """``receipt.json`` (``schema_version`` 2; version 1 still reads)."""

    schema_version: Literal[1, 2] = RECEIPT_SCHEMA_VERSION
    created: str
    platform: dict[str, str]
    python: dict[str, str]
    packages: dict[str, str | None]
    source_revision: str
    # sha256 over the package's source files (source_tree_hash()); None only in a version 1 receipt
    source_tree_hash: str | None = None
    # whether the checkout's package folders held uncommitted changes; None: installed, or git could not say
    source_dirty: bool | None = None
    fixture_manifests: dict[str, str] = Field(default_factory=dict)
    scorer: dict[str, Any] = Field(default_factory=dict)
    subject: dict[str, Any]
    sampling: dict[str, Any] = Field(default_factory=dict)
    seeds: Any = None
    cases: list[dict[str, Any]] = Field(default_factory=list)
    sealed: bool = False
    sealed_commitment: str | None = None
    # The run's journal as the harness left it after its last pass (imagebench.runs.journal):
    # {"key": key id, "mac": the last line's MAC, "lines": how many}; None until a pass ends.
    journal: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _version_fields(self) -> Receipt:
        if self.schema_version >= 2 and not (
            isinstance(self.source_tree_hash, str)
            and len(self.source_tree_hash) == 64
            and all(c in "0123456789abcdef" for c in self.source_tree_hash)
        ):
            raise ValueError(
                f"field 'source_tree_hash' is {self.source_tree_hash!r}: schema_version {self.schema_version} "
                "needs the sha256 (64 hex digits) of the package's source tree"
            )
        return self


# --------------------------------------------------------------------------- what is private


def _secret_values() -> list[str]:
    values = []
    for name, value in os.environ.items():
        if _SECRET_NAME.search(name) and value and len(value) >= 6:
            values.append(value)
    return sorted(set(values), key=len, reverse=True)


def _private_prefixes() -> list[tuple[str, str]]:
    """(prefix, placeholder) pairs, longest first: the home folder, the working folder, temp, /work."""
    pairs = []
    for path, label in (
        (os.path.expanduser("~"), "<home>"),
        (os.getcwd(), "<cwd>"),
        (tempfile.gettempdir(), "<tmp>"),
        ("/tmp", "<tmp>"),
        ("/work", "<local>"),
    ):
        if path and path not in ("/", "."):
            pairs.append((os.path.normpath(path), label))
    return sorted(set(pairs), key=lambda p: len(p[0]), reverse=True)


def scrub(value: Any) -> Any:
    """A copy of ``value`` (JSON data) with secrets and local paths replaced by placeholders."""
    secrets = _secret_values()
    prefixes = _private_prefixes()

    def clean(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, "<redacted>")
        for prefix, label in prefixes:
            text = text.replace(prefix, label)
        text = _IPV4.sub("<address>", _URL.sub("<address>", text))
        return _ABS_PATH.sub(lambda m: "<path>" if not m.group(0).startswith("<") else m.group(0), text)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return clean(v)
        if isinstance(v, Mapping):
            return {clean(str(k)): walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)


def leaks(receipt: Receipt | Mapping[str, Any]) -> list[str]:
    """What in the receipt looks private: secret values, the home/working/temp folders, /work."""
    data = receipt.model_dump() if isinstance(receipt, Receipt) else receipt
    text = json.dumps(data, ensure_ascii=False)
    found = []
    for secret in _secret_values():
        if secret in text:
            found.append("the value of a secret-looking environment variable")
    for prefix, label in _private_prefixes():
        if prefix in text:
            found.append(f"a local path under {label}")
    return sorted(set(found))


# --------------------------------------------------------------------------- parts


@functools.cache
def _version(dist: str) -> str | None:
    """The installed version of ``dist``, read once a process: the code a process runs is the
    code it imported, whatever is installed afterwards (each read costs a scan of sys.path)."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def describe_subject(subject: Any, identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The subject as a receipt records it: what its kind says (never a command's arguments,
    environment or paths; :func:`imagebench.subjects.describe`), with how it was confined
    (``sandbox``), its limits, the names of the variables passed to it and its ``identity`` (the
    digest of its code: given, as ``run.json`` recorded it, or :func:`imagebench.subjects.identity_of`),
    when it is a subject object."""
    from imagebench.subjects import SubjectError, confinement_of, describe, env_pass_of, identity_of, limits_of

    try:
        described = describe(subject)
    except SubjectError as exc:
        raise ReceiptError(str(exc)) from None
    if not isinstance(subject, str):
        described["sandbox"] = confinement_of(subject)
        limits = limits_of(subject)
        if limits is not None:
            described["limits"] = limits
        passed = env_pass_of(subject)
        if passed:
            described["env_pass"] = list(passed)  # the names given to the subject, never their values
        from imagebench.subjects.registry import access_of

        access = access_of(subject, mounts=True)
        if access is not None:  # the setting and its evidence: what was mounted, what could execute, the tools
            described["access"] = access
        try:
            described["identity"] = dict(identity) if identity is not None else identity_of(subject)
        except SubjectError as exc:
            raise ReceiptError(str(exc)) from None
    return described


@functools.cache
def source_tree_hash() -> str:
    """sha256 (hex) over every file of the ``imagebench`` package folder and the ``napari_imagebench``
    one (``__pycache__`` and ``.pyc`` left out): their sorted paths relative to the folder above them
    (``imagebench/records.py``), each with the sha256 of its bytes. Computed once per process."""
    from imagebench.fixtures.digest import tree_digest
    from imagebench.scoring.manifest import package_folders

    roots = {folder.name: folder for folder in package_folders()}
    return tree_digest(roots, what="the package's source tree").digest.removeprefix("sha256:")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fixture_manifest_digests(
    cases: Iterable[Any], extra: Mapping[str, str | os.PathLike[str]] | None = None
) -> dict[str, str]:
    """sha256 of each fixture-tree ``manifest.json`` the cases read, keyed by role.

    Roles: ``$IMAGEBENCH_FIXTURES`` for the tree named by that variable, ``package:<folder>`` for a
    tree shipped inside the package, ``root-of:<first case label>`` for any other explicit root.
    ``extra`` adds ``{role: manifest path}`` pairs. A manifest that is absent is recorded as
    ``"absent"``.
    """
    from imagebench.fixtures.fixture import FIXTURES_ENV
    from imagebench.fixtures.specs import OnDisk

    package_dir = Path(__file__).resolve().parent.parent  # imagebench/, holding data/
    roles: dict[str, Path] = {}
    for case in cases:
        spec = getattr(case, "fixture", None)
        if not isinstance(spec, OnDisk):
            continue
        root = spec.tree_root()
        if root is None:
            continue
        if spec.root is None:
            role = f"${FIXTURES_ENV}"
        else:
            resolved = Path(root).resolve()
            try:
                role = f"package:{resolved.relative_to(package_dir).as_posix()}"
            except ValueError:
                role = f"root-of:{case.label}"
        roles.setdefault(role, Path(root) / "manifest.json")
    for role, path in (extra or {}).items():
        roles[str(role)] = Path(path)
    out = {}
    for role, path in sorted(roles.items()):
        out[role] = _digest(path) if path.is_file() else "absent"
    return out


def _case_entry(case: Any, sealed: bool = False) -> dict[str, Any]:
    if isinstance(case, str):
        return {"label": case}
    entry: dict[str, Any] = {"label": case.label, "revision": getattr(case, "revision", ""), "kind": case.kind}
    spec = getattr(case, "fixture", None)
    seed = getattr(spec, "seed", None)
    if seed is not None:
        entry["seed"] = "sealed" if sealed else seed
        entry["builder"] = getattr(spec, "builder_name", "")
    contract = getattr(case, "answer", None)
    if contract is not None:
        entry["contract"] = getattr(getattr(contract, "scorer", None), "contract", None)
    from imagebench.runs.closure import scoring_digest

    try:
        entry["scoring"] = scoring_digest(case)  # its scoring closure: what decided its score
    except Exception as exc:
        entry["scoring_error"] = f"{type(exc).__name__}: {exc}"
    return entry


def _scorer_entry() -> dict[str, Any]:
    try:
        from imagebench.scoring.manifest import (
            check_scorer_manifest,
            current_manifest,
            packaged_manifest_path,
        )

        running = current_manifest(revision="unknown")
        problem = check_scorer_manifest(packaged_manifest_path())
    except Exception as exc:  # the receipt records that the scorer could not be identified
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "registry_hash": running.registry_hash,
        "implementation_hash": running.implementation_hash,
        "tree_hash": running.tree_hash,
        "contract_schema_hash": running.contract_schema_hash,
        "contracts": running.contracts,
        "manifest_matches": problem is None,
    }


def build_receipt(
    *,
    subject: Any,
    samples: int | Mapping[str, Any],
    seeds: Any,
    selection: Mapping[str, Any] | None,
    cases: Iterable[Any],
    manifests: Mapping[str, str | os.PathLike[str]] | None = None,
    sealed: str | None = None,
    identity: Mapping[str, Any] | None = None,
) -> Receipt:
    """Build a run's receipt (scrubbed of secrets and local paths).

    ``subject``: the subject spec or object; ``samples``: samples per case (or a sampling-config
    mapping); ``seeds``: whatever seeds the run used (an int, a list or ``{label: seed}``);
    ``selection``: how the cases were chosen (filters, flags); ``cases``: the Case objects run
    (or their labels); ``manifests``: extra fixture manifests ``{role: path}``; ``sealed``: a
    sealed run's commitment to its secret (then every seed of ``seeds`` and of the cases is
    recorded as ``"sealed"``: none of them built the run's procedural fixtures); ``identity``: the
    subject's identity as ``run.json`` recorded it (default: taken now from the subject object).
    """
    from imagebench.records import json_safe
    from imagebench.scoring.manifest import checkout_dirty, source_revision

    cases = list(cases)
    if sealed is not None:
        seeds = {k: "sealed" for k in seeds} if isinstance(seeds, Mapping) else "sealed"
    sampling: dict[str, Any] = dict(samples) if isinstance(samples, Mapping) else {"samples_per_case": samples}
    if selection:
        sampling["selection"] = dict(selection)
    receipt = Receipt(
        created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        platform={
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "platform": platform.platform(),
        },
        python={
            "implementation": platform.python_implementation(),
            "version": platform.python_version(),
            "byteorder": sys.byteorder,
        },
        packages={name: _version(name) for name in PACKAGES},
        source_revision=source_revision(),
        source_tree_hash=source_tree_hash(),
        source_dirty=checkout_dirty(),
        fixture_manifests=scrub(fixture_manifest_digests(cases, manifests)),
        scorer=scrub(_scorer_entry()),
        sampling=scrub(json_safe(sampling)),
        seeds=scrub(json_safe(seeds)),
        cases=scrub([json_safe(_case_entry(c, sealed is not None)) for c in cases]),
        subject=scrub(describe_subject(subject, identity)),
        sealed=sealed is not None,
        sealed_commitment=sealed,
    )
    return receipt


def write_receipt(run_dir: str | os.PathLike[str], receipt: Receipt) -> Path:
    """Write ``<run_dir>/receipt.json`` atomically; raise ReceiptError if anything private remains."""
    from imagebench.records import atomic_write_text

    found = leaks(receipt)
    if found:
        raise ReceiptError(f"receipt for {Path(run_dir).name} not written: it contains {', '.join(found)}")
    return atomic_write_text(Path(run_dir) / RECEIPT_NAME, receipt.model_dump_json(indent=2) + "\n")


def anchor_receipt(run_dir: str | os.PathLike[str], anchor: Mapping[str, Any]) -> Path | None:
    """Record the journal's ``anchor`` (:meth:`imagebench.runs.journal.Journal.anchor`) in the run's
    ``receipt.json`` (rewritten atomically); None when the run has no receipt to anchor it in."""
    path = Path(run_dir) / RECEIPT_NAME
    if not path.is_file():
        return None
    receipt = read_receipt(path)
    return write_receipt(run_dir, receipt.model_copy(update={"journal": dict(anchor)}))


def anchor_from_journal(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The anchor of the journal as it lies on disk now (the panel's, whose journal is opened for
    each line): its last line's key and MAC and its line count. None for an empty journal."""
    from imagebench.runs.journal import JOURNAL_NAME, iter_journal_lines, journal_key, signed_anchor

    count, last = 0, None
    for _, entry in iter_journal_lines(Path(run_dir) / JOURNAL_NAME):  # one line held at a time
        count, last = count + 1, entry
    if last is None or last.mac is None:
        return None
    key, key_id = journal_key()
    return signed_anchor(key, key_id, str(last.mac), count)


def read_receipt(path: str | os.PathLike[str]) -> Receipt:
    """Read and validate a receipt; a bad file raises ReceiptError naming the file and the field."""
    from imagebench.records import RecordError, read_record

    try:
        return read_record(path, Receipt)
    except RecordError as exc:
        raise ReceiptError(str(exc)) from None
