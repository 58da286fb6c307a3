"""What a unit carries to a worker that shares no files with the driver: the files its case reads, by digest.

A curated case reads its pixels and truth from a fixture tree on the driver (its ``manifest.json``,
its ``case.json`` and the files the manifest lists for it). With shipping on (``--scheduler``,
:attr:`imagebench.executor.Parallel.ship`), the driver describes those files as a
:class:`Shipment` (each file's path in the tree, sha256 and size: the manifest's recorded digest for
a listed file, the bytes' own for ``manifest.json`` and ``case.json``) and, before the case's units
go out, asks every worker which blobs it lacks (:func:`imagebench.executor.remote.lacking`).
Those are read here, checked against their digest, and sent to the workers that lack them
(``client.run``), each of which verifies a blob before it keeps it in its blob store
(:mod:`imagebench.fixtures.blobs`); a second run ships nothing. A procedural
fixture needs no file: it is built on the worker from the case's definition (and cached there).

A file whose bytes here do not match the digest the manifest records is not shipped: the case's
units end ``harness-error``, naming the file (a serial run checks sizes and headers only; bytes that
travel are checked whole). A worker that joins after a case's blobs went out lacks them: its units
of that case end ``harness-error`` (the blob is not in its store); it never reads the driver's paths.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.executor.shipment import Shipment, ShippedFile

if TYPE_CHECKING:
    from imagebench.case.model import Case

__all__ = ["LAST_SHIPPING", "ShippedFile", "Shipment", "Shipper", "ShippingError", "shipment_of", "subject_shipment"]


class ShippingError(RuntimeError):
    """A case's files cannot be shipped (a file that does not match its recorded digest, or cannot be read)."""


def _sha_of(path: Path) -> str:
    from imagebench.fixtures.tree import sha256_file

    return sha256_file(path)


def shipment_of(case: Case) -> tuple[Shipment, dict[str, Path]] | None:
    """The shipment of a curated case and where each of its blobs lies here (``{sha256: path}``);
    None for a case that reads no tree. Raises :class:`ShippingError` (or the tree's own
    :class:`~imagebench.fixtures.fixture.FixtureError`) when the tree cannot describe it: such a
    case is prepared here, where its failure reads as it does serially."""
    from imagebench.fixtures import tree
    from imagebench.runs.fingerprint import tree_location

    located = tree_location(case)
    if located is None:
        return None
    root, ns, case_id = located
    if root is None:
        raise ShippingError(f"{case.label}: no fixture tree is set for this curated case")
    base = Path(root).resolve()
    manifest = tree.load_manifest(base)
    entry = manifest.entry(ns, case_id)
    if entry is None:
        raise ShippingError(f"{base / tree.MANIFEST}: no entry for {ns}/{case_id}")
    sources: dict[str, Path] = {}
    files: list[ShippedFile] = []

    def add(rel: str, sha: str | None) -> None:
        path = (base / rel).resolve()
        if not path.is_relative_to(base) or not path.is_file():
            raise ShippingError(f"{base / rel}: not a regular file inside the fixture tree {base}")
        digest = sha or _sha_of(path)
        files.append(ShippedFile(rel, digest, path.stat().st_size))
        sources[digest] = path

    add(tree.MANIFEST, None)
    add(f"{ns}/{case_id}/{tree.LAYOUT}", None)
    for name, spec in sorted(entry.files.items()):
        add(f"{ns}/{case_id}/{name}", spec.sha256)
    return Shipment.of(files), sources


def subject_shipment(subject: object) -> tuple[Shipment, dict[str, Path]] | None:
    """The code of a ``python:path/to/file.py:function`` subject as a one-file shipment (the file is
    all a file target loads: its folder is not put on ``sys.path``); None for any other subject,
    whose code the workers must already have (an installed package, the programs a command calls)."""
    from imagebench.subjects.python import PythonSubject, file_target_parts, is_file_target

    if not isinstance(subject, PythonSubject) or not is_file_target(subject.target):
        return None
    path, _ = file_target_parts(subject.target)
    if not path.is_file():
        raise ShippingError(f"{path}: the subject's file is not a regular file")
    sha = _sha_of(path)
    return Shipment.of([ShippedFile(path.name, sha, path.stat().st_size)]), {sha: path}


def read_blob(path: Path, sha: str) -> bytes:
    """The bytes of ``path``, checked against ``sha`` (:class:`ShippingError` when they differ)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ShippingError(f"{path}: cannot be read to ship it ({exc.strerror or exc})") from None
    got = hashlib.sha256(data).hexdigest()
    if got != sha:
        raise ShippingError(
            f"{path}: its bytes hash to sha256 {got}, but the fixture tree records {sha}; "
            "this is not the file the case was written against, and it is not shipped"
        )
    return data


@dataclass
class ShippingStats:
    """What the last run shipped (for benchmarks and tests): blob sends and bytes sent (a blob sent to two workers counts twice), blobs every worker had."""

    blobs_shipped: int = 0
    bytes_shipped: int = 0
    blobs_cached: int = 0
    cases: int = 0
    keys: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.blobs_shipped = self.bytes_shipped = self.blobs_cached = self.cases = 0
        self.keys.clear()


LAST_SHIPPING = ShippingStats()


class Shipper:
    """The driver's side of one run: sends each case's blobs to the workers that lack them."""

    def __init__(self, client: Any, stats: ShippingStats | None = None) -> None:
        self.client = client
        self.stats = stats if stats is not None else LAST_SHIPPING

    def offer(self, label: str, shipment: Shipment, sources: Mapping[str, Path]) -> None:
        """Send the blobs of ``shipment`` to each worker that lacks them, which verifies and keeps
        them (:func:`imagebench.executor.remote.receive`); raises :class:`ShippingError`, or the
        worker's :class:`~imagebench.fixtures.blobs.BlobError` for bytes it refused."""
        from imagebench.executor.remote import lacking, receive

        wanted = [(f.sha256, f.size) for f in shipment.files]
        answers: Mapping[str, Sequence[str]] = self.client.run(lacking, wanted)
        missing: dict[str, list[str]] = {}
        for worker, shas in answers.items():
            for sha in shas:
                missing.setdefault(sha, []).append(worker)
        self.stats.cases += 1
        self.stats.blobs_cached += len({f.sha256 for f in shipment.files} - set(missing))
        for sha in sorted(missing):
            data = read_blob(sources[sha], sha)
            workers = sorted(missing[sha])
            self.client.run(receive, sha, data, workers=workers)
            self.stats.blobs_shipped += len(workers)
            self.stats.bytes_shipped += len(data) * len(workers)
            self.stats.keys.append(sha)
