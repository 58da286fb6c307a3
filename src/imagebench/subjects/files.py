"""A bundle case's files for a subject working in this process: a read-only copy of its own."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from imagebench.subjects.base import SubjectHarnessError


def readonly_files(files: Path) -> Path:
    """A fresh temporary folder holding a copy of ``files`` as ``files/``, write permission removed.

    This is ``session.workspace`` for a subject working in this process (a command gets its own
    writable copy in its workspace instead). Remove it with :func:`remove_readonly_files`.
    """
    root = Path(tempfile.mkdtemp(prefix="imagebench-files-"))
    try:
        shutil.copytree(files, root / "files", ignore=shutil.ignore_patterns(".gitkeep"))
        for path in [*sorted(root.rglob("*"), reverse=True), root]:
            path.chmod(0o555 if path.is_dir() else 0o444)
    except OSError as exc:
        remove_readonly_files(root)
        raise SubjectHarnessError(f"could not copy the case's files from {files}: {exc}") from exc
    return root


def remove_readonly_files(root: Path) -> None:
    """Undo :func:`readonly_files`: give write permission back and delete the folder."""
    for path in [root, *root.rglob("*")]:
        try:
            path.chmod(0o755 if path.is_dir() else 0o644)
        except OSError:
            pass
    shutil.rmtree(root, ignore_errors=True)


