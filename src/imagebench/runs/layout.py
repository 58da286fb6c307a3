"""The run folder's layout: its names, its paths, where runs go, a fresh run folder.

A run folder is ``run-<UTC timestamp>/`` holding ``run.json`` (:class:`~imagebench.records.RunRecord`),
``receipt.json``, ``journal.jsonl`` (:mod:`imagebench.runs.journal`), ``report.html`` and, per
subject and case, ``<subject>/<namespace>/<case_id>/summary.json`` over
``sample-<n>/summary.json`` with the sample's artifacts beside it. Every path into it is built
here; :mod:`imagebench.runs.writer` is its one writer and :mod:`imagebench.runs.reader` its one
checked reader.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

RUN_RECORD = "run.json"
RECEIPT = "receipt.json"
REPORT = "report.html"
SUMMARY = "summary.json"

OUTCOME_ENV = "IMAGEBENCH_OUTCOME_DIR"
MARKER = "outcomes.marker"


class RunFolderError(ValueError):
    """A run folder cannot be read (names the file, the field and what was expected)."""


class _Labelled(Protocol):
    namespace: str
    case_id: str


def artifact_root() -> Path:
    """Where outcomes go: ``$IMAGEBENCH_OUTCOME_DIR``; else ``outcomes/`` beside the checkout's
    ``outcomes.marker`` (found by walking up from this file); else ``./outcomes``."""
    env = os.environ.get(OUTCOME_ENV)
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        if (parent / MARKER).is_file():
            return parent / "outcomes"
    return Path.cwd() / "outcomes"


def safe_name(text: str, fallback: str = "unnamed") -> str:
    """A folder/file name for ``text``: runs of characters outside ``[A-Za-z0-9._-]`` become ``-``.

    ``python:pkg.mod:solve`` -> ``python-pkg.mod-solve``; a name that would be empty, ``.`` or
    ``..`` becomes ``fallback``.
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-")
    if name in ("", ".", "..") or set(name) == {"."}:
        return fallback
    return name


def report_dir(
    root: str | os.PathLike[str], subject: str, namespace: str, case_id: str, sample: int | None = None
) -> Path:
    """The folder ``write_report`` uses for one case (and sample) of one subject."""
    folder = Path(root) / safe_name(subject, "subject") / safe_name(namespace) / safe_name(case_id)
    return folder / f"sample-{int(sample)}" if sample is not None else folder


# --------------------------------------------------------------------------- images


def sample_dir(run_dir: str | os.PathLike[str], subject_name: str, case: _Labelled, sample: int) -> Path:
    """``<run>/<subject>/<namespace>/<case_id>/sample-<n>`` (the folder ``write_report`` uses)."""
    return report_dir(run_dir, subject_name, case.namespace, case.case_id, sample)


def case_dir(run_dir: str | os.PathLike[str], subject_name: str, case: _Labelled) -> Path:
    return report_dir(run_dir, subject_name, case.namespace, case.case_id)


def label_dir(run_dir: str | os.PathLike[str], subject_name: str, label: str) -> Path:
    """:func:`case_dir` for a case known only by its label ``<namespace>/<case_id>``."""
    namespace, _, case_id = label.partition("/")
    return report_dir(run_dir, subject_name, namespace, case_id)


def utc_stamp() -> tuple[str, str]:
    """``(folder stamp, ISO time)`` of now."""
    now = datetime.now(UTC)
    return now.strftime("%Y%m%dT%H%M%SZ"), now.isoformat(timespec="seconds")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


#: the name :func:`new_run_dir` gives a run folder: ``run-<UTC stamp>``, ``-<n>`` when that was taken
RUN_FOLDER_NAME = re.compile(r"run-\d{8}T\d{6}Z(?:-\d+)?")


def is_run_folder_name(name: str) -> bool:
    """Whether ``name`` is a name :func:`new_run_dir` gives (``run-20250101T120000Z``, ``...Z-2``)."""
    return RUN_FOLDER_NAME.fullmatch(name) is not None


def new_stamped_dir(root: str | os.PathLike[str], prefix: str, what: str) -> tuple[Path, str]:
    """A fresh ``<prefix>-<UTC timestamp>`` folder under ``root`` (``-<n>`` appended while the name
    is taken) and its start time; RunFolderError naming ``what`` when 1000 such names are taken."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    stamp, started = utc_stamp()
    for n in range(1000):
        path = root / (f"{prefix}-{stamp}" if n == 0 else f"{prefix}-{stamp}-{n}")
        try:
            path.mkdir()
            return path, started
        except FileExistsError:
            continue
    raise RunFolderError(f"{root}: could not create a {what} (1000 {prefix}-{stamp}* folders exist)")


def new_run_dir(root: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """A fresh ``run-<UTC timestamp>`` folder under ``root`` (default ``artifact_root()``) and its start time."""
    return new_stamped_dir(root if root is not None else artifact_root(), "run", "run folder")


def artifact_digests(folder: str | os.PathLike[str]) -> dict[str, str]:
    """``{name: sha256 of its bytes}`` of every regular file directly in a sample folder except its
    ``summary.json`` and hidden temporaries (``.<name>...``): the artifacts' PNGs (or their
    ``.png.error``), their ``.npy`` values, ``stdout.txt``, ``stderr.txt``, a transcript. What a
    sample summary records (:attr:`imagebench.records.SampleSummary.artifact_digests`) when it is
    written, the sample folder's last file; an absent folder has none. Subfolders (a kept
    ``workspace/``) are not covered."""
    import hashlib

    out: dict[str, str] = {}
    try:
        found = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return out
    for item in found:
        if item.name == SUMMARY or item.name.startswith(".") or not item.is_file(follow_symlinks=False):
            continue
        with open(item.path, "rb") as fh:
            out[item.name] = hashlib.file_digest(fh, "sha256").hexdigest()
    return out


#: Digests this process already took of files that have not changed since (see :func:`_checked_digest`).
_DIGESTS: dict[tuple[int, int, int, int, int], str] = {}
_DIGESTS_MAX = 200_000
#: A file changed this recently may change again within the same timestamp tick: never remembered.
_SETTLED_NS = 2_000_000_000


def _checked_digest(path: str) -> str:
    """sha256 of the file at ``path`` (never a link: ``O_NOFOLLOW``). A digest is remembered for the
    file as its descriptor's ``fstat`` names it (device, inode, size, mtime and ctime, to the
    nanosecond), and only once it was last changed more than two seconds before it was hashed, so
    reading a big run twice in one process (the panel, a run's exit check and its report) hashes
    each artifact once. Any write since changes its ctime, which no user can set back."""
    import hashlib
    import time

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        known = _DIGESTS.get(key)
        if known is not None:
            return known
        taken = time.time_ns()
        value = hashlib.file_digest(fh, "sha256").hexdigest()
    if taken - max(st.st_mtime_ns, st.st_ctime_ns) > _SETTLED_NS:
        if len(_DIGESTS) >= _DIGESTS_MAX:
            _DIGESTS.clear()
        _DIGESTS[key] = value
    return value


def artifacts_problem(folder: str | os.PathLike[str], digests: dict[str, str]) -> str:
    """Why the files beside a sample's summary are not those it recorded (:func:`artifact_digests`):
    one changed, gone or put there since; '' when every one is as it was."""
    wrong: list[str] = []
    try:
        present = {
            e.name: e for e in os.scandir(folder)
            if e.name != SUMMARY and not e.name.startswith(".") and not e.is_dir(follow_symlinks=False)
        }  # fmt: skip
    except OSError as exc:
        return f"its folder could not be listed ({exc.strerror or exc})"
    for name, want in sorted(digests.items()):
        item = present.get(name)
        if item is None:
            wrong.append(f"{name} is missing")
            continue
        if not item.is_file(follow_symlinks=False):
            wrong.append(f"{name} is no longer a regular file")
            continue
        try:
            got = _checked_digest(item.path)
        except OSError as exc:
            wrong.append(f"{name} could not be read ({exc.strerror or exc})")
            continue
        if got != want:
            wrong.append(f"{name} changed after the run (digest mismatch)")
    added = sorted(set(present) - set(digests))
    if added:
        were = "was" if len(added) == 1 else "were"
        wrong.append(f"{', '.join(added)} {were} put beside it after the run (not in its artifact digests)")
    return f"its artifacts are not what its summary recorded: {'; '.join(wrong)}" if wrong else ""


def sample_index(path: Path) -> int | None:
    try:
        return int(path.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return None


# --------------------------------------------------------------------------- verdicts and summaries


def remove_stale_temporaries(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Delete the temporary files an interrupted atomic write leaves (``.<name>.<random>.tmp``,
    ``.<name>.tmp.png``, ``.<name>.tmp.npy``); return what was removed."""
    from imagebench.runs.journal import LOCK_NAME

    removed: list[Path] = []
    for path in Path(run_dir).rglob(".*"):
        name = path.name
        if path.is_file() and name.endswith((".tmp", ".tmp.png", ".tmp.npy")) and name != LOCK_NAME:
            try:
                path.unlink()
                removed.append(path)
            except OSError:
                pass
    return removed
