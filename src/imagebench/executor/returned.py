"""What comes back from a worker: a unit's sample folder as bytes with their digests, written here.

A worker runs its unit in a private temporary folder and never sees the run folder. It sends back
every regular file of the unit's sample folder (no link is followed, nothing outside the folder is
read) with the sha256 of each (:func:`pack`). The driver checks each name (a relative path of plain
names: nothing lands outside the sample folder) and each file's bytes against its digest before it
writes any of them (:func:`write_returned`), ``summary.json`` last and atomically; the journal line
follows, written by the driver as for a serial unit.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from imagebench.fixtures.blobs import BlobError, check_relpath

SUMMARY = "summary.json"


class ReturnError(RuntimeError):
    """What a worker sent back for a unit cannot be written: a name outside its folder, bytes that do
    not match their digest, no ``summary.json``."""


def pack(folder: Path) -> tuple[dict[str, bytes], dict[str, str]]:
    """On a worker: ``({relative path: bytes}, {relative path: sha256})`` of every regular file
    beneath ``folder``, walked without following a link."""
    files: dict[str, bytes] = {}
    digests: dict[str, str] = {}
    for top, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            path = Path(top) / name
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue  # a link, or gone
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                with os.fdopen(fd, "rb", closefd=False) as fh:
                    data = fh.read()
            finally:
                os.close(fd)
            rel = path.relative_to(folder).as_posix()
            files[rel] = data
            digests[rel] = hashlib.sha256(data).hexdigest()
    return files, digests


def check_returned(files: Mapping[str, bytes], digests: Mapping[str, str] | None, where: str) -> None:
    """:class:`ReturnError` unless every name is a plain relative path, every file matches its digest
    (when digests came) and ``summary.json`` is among them."""
    if SUMMARY not in files:
        raise ReturnError(f"{where}: the worker sent back no {SUMMARY}")
    for rel, data in files.items():
        try:
            check_relpath(rel, f"{where}: file")
        except BlobError as exc:
            raise ReturnError(str(exc)) from None
        if digests is None:
            continue
        want = digests.get(rel)
        got = hashlib.sha256(data).hexdigest()
        if want != got:
            raise ReturnError(
                f"{where}: {rel} came back as {len(data)} bytes hashing to sha256 {got}, "
                f"not the {want} the worker sent with it; nothing of this unit was written"
            )


def write_returned(
    folder: Path, files: Mapping[str, bytes], digests: Mapping[str, str] | None = None, *, where: str = "unit"
) -> bytes:
    """Write a unit's files into its sample folder (checked first, :func:`check_returned`), each
    atomically, ``summary.json`` last; returns the summary's bytes."""
    from imagebench.records import _UMASK, atomic_write_text

    check_returned(files, digests, where)
    if folder.exists():
        shutil.rmtree(folder)  # what an interrupted attempt left
    folder.mkdir(parents=True)
    for rel, data in files.items():
        if rel == SUMMARY:
            continue
        path = folder.joinpath(*rel.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; artifacts are for people to read
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    data = files[SUMMARY]
    atomic_write_text(folder / SUMMARY, data.decode("utf-8"))
    return data
