"""Which fixture tree a case reads its pixels from, in words: the tree packaged inside imagebench,
the user's (``$IMAGEBENCH_FIXTURES``), another named folder, or none (a generated case).

A built-in curated case reads the packaged tree, whatever ``$IMAGEBENCH_FIXTURES`` says; a case
whose spec names no root (``OnDisk()``, a bundle's curated reference) reads the user's tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from imagebench.catalog.load import user_tree

if TYPE_CHECKING:
    from imagebench.case.model import Case

TreeKind = Literal["packaged", "user", "folder", "unset", "none"]


@dataclass(frozen=True)
class TreeRead:
    """The tree a case reads: its kind and root (None for ``unset`` and ``none``)."""

    kind: TreeKind
    root: Path | None = None

    def __str__(self) -> str:
        if self.kind == "packaged":
            return f"packaged ({self.root})"
        if self.kind == "user":
            return f"yours, $IMAGEBENCH_FIXTURES ({self.root})"
        if self.kind == "folder":
            return str(self.root)
        if self.kind == "unset":
            return "yours, but $IMAGEBENCH_FIXTURES is not set"
        return "-"


def packaged_tree() -> Path:
    from imagebench.fixtures.tree import PACKAGED_ROOT

    return PACKAGED_ROOT


def tree_read(case: Case) -> TreeRead:
    """Which tree ``case`` reads (``none`` for a case whose pixels are generated)."""
    from imagebench.runs.fingerprint import tree_location

    located = tree_location(case)
    if located is None:
        return TreeRead("none")
    root = located[0]
    if root is None:
        return TreeRead("unset")
    real = Path(root).expanduser().resolve()
    if real == packaged_tree().resolve():
        return TreeRead("packaged", real)
    mine = user_tree()
    if mine is not None and real == mine.resolve():
        return TreeRead("user", real)
    return TreeRead("folder", real)
