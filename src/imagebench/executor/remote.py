"""A worker's side of shipping: which blobs it lacks, the blobs the driver sends verified and kept,
and the case pointed at its own copy of the files (:mod:`imagebench.executor.shipping` is the driver's side).

Nothing here opens a path the driver named: a shipped case's tree root is replaced by the folder
this worker laid out from verified blobs (:meth:`imagebench.fixtures.blobs.BlobStore.folder`), so a
worker that cannot see the driver's files never falls back to them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from imagebench.fixtures.blobs import BlobStore

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.executor.shipment import Shipment


@functools.lru_cache(maxsize=4)
def _store(root: str) -> BlobStore:
    return BlobStore(root)


def worker_store() -> BlobStore:
    """This process's blob store (one per root, so a blob is hashed once per process)."""
    from imagebench.fixtures.blobs import shipped_root

    return _store(str(shipped_root()))


def lacking(wanted: Sequence[tuple[str, int]]) -> list[str]:
    """On a worker: which of ``wanted`` (``(sha256, size)``) its store does not hold, verified."""
    store = worker_store()
    return [sha for sha, size in wanted if not store.has(sha, size)]


def receive(sha: str, data: bytes) -> str:
    """On a worker: keep blob ``sha`` (refused, :class:`~imagebench.fixtures.blobs.BlobError`, when
    ``data`` does not hash to it); returns where it is kept."""
    return str(worker_store().put(sha, data))


def localized_spec(spec: str, code: Shipment) -> str:
    """A ``python:/driver/path/file.py:function`` spec naming this worker's copy of the file instead,
    laid out from its verified blob (:func:`imagebench.fixtures.blobs.subject_code_root`)."""
    from imagebench.fixtures.blobs import BlobError, subject_code_root

    prefix = "python:"
    if not spec.startswith(prefix) or len(code.files) != 1:
        raise BlobError(f"subject {spec!r}: only a python: file target travels as shipped code")
    func = spec[len(prefix) :].rpartition(":")[2]
    folder = worker_store().folder(code.digest, code.layout(), base=subject_code_root())
    return f"{prefix}{folder / code.files[0].rel}:{func}"


def localize(case: Case, shipment: Shipment) -> Case:
    """``case`` reading its tree from this worker's own copy of the shipped files, laid out from the
    verified blobs of its store; :class:`~imagebench.fixtures.blobs.BlobError` when one is missing."""
    store = worker_store()
    folder = store.folder(shipment.digest, shipment.layout())
    spec = case.fixture
    return dataclasses.replace(case, fixture=dataclasses.replace(spec, root=str(folder)))  # type: ignore[type-var]
