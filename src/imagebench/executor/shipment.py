"""What a shipment is: the files a unit's case reads, named by digest (the driver's
:mod:`imagebench.executor.shipping` makes them, the worker's :mod:`imagebench.executor.remote`
lays them out); plain data both sides share, so neither imports the other."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ShippedFile:
    """One file of a shipment: where it lies in the worker's folder, its sha256 and size."""

    rel: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Shipment:
    """The files a case reads, by digest: laid out on the worker as a fixture tree of its own."""

    files: tuple[ShippedFile, ...]
    digest: str  # of the sorted (rel, sha256, size): the worker's folder name

    @staticmethod
    def of(files: Iterable[ShippedFile]) -> Shipment:
        ordered = tuple(sorted(files, key=lambda f: f.rel))
        h = hashlib.sha256()
        for f in ordered:
            h.update(f"{f.rel}\0{f.sha256}\0{f.size}\n".encode())
        return Shipment(ordered, h.hexdigest())

    def layout(self) -> dict[str, tuple[str, int]]:
        return {f.rel: (f.sha256, f.size) for f in self.files}

    @property
    def nbytes(self) -> int:
        return sum(f.size for f in self.files)
