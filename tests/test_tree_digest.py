"""The digest of a file tree: relative paths and bytes, never where it lies, never through a link."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from imagebench.fixtures.digest import TreeError, TreeTooLarge, tree_digest


def _tree(root: Path) -> Path:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "solve.py").write_text("def solve(s):\n    return 1\n")
    (root / "pkg" / "weights.bin").write_bytes(b"\x00\x01\x02")
    return root / "pkg"


def test_the_digest_is_of_relative_paths_and_bytes(tmp_path: Path) -> None:
    a = _tree(tmp_path / "a")
    b = _tree(tmp_path / "elsewhere" / "b")
    first = tree_digest(a)
    assert first == tree_digest(b)  # where the tree lies changes nothing
    assert first.files == 3 and first.size == 3 + len("def solve(s):\n    return 1\n")
    by_hand = hashlib.sha256()
    for rel in ("__init__.py", "sub/solve.py", "weights.bin"):
        by_hand.update(rel.encode() + b"\0" + hashlib.sha256((a / rel).read_bytes()).hexdigest().encode() + b"\n")
    assert first.digest == "sha256:" + by_hand.hexdigest()
    (b / "sub" / "solve.py").write_text("def solve(s):\n    return 2\n")
    assert tree_digest(b) != first
    (b / "sub" / "solve.py").write_text("def solve(s):\n    return 1\n")
    assert tree_digest(b) == first
    (b / "sub" / "solve.py").rename(b / "sub" / "solved.py")  # the same bytes under another name
    assert tree_digest(b) != first
    assert tree_digest({"pkg": a}).digest != first.digest  # a prefix is part of every path


def test_bytecode_is_left_out_and_keep_chooses_files(tmp_path: Path) -> None:
    a = _tree(tmp_path)
    first = tree_digest(a)
    (a / "__pycache__").mkdir()
    (a / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert tree_digest(a) == first
    (a / "sub" / "old.pyc").write_bytes(b"\0")  # no old.py beside it: Python imports it as it is
    assert tree_digest(a) != first
    (a / "sub" / "old.pyc").unlink()
    code = tree_digest(a, keep=lambda rel: rel.endswith(".py"))
    assert code.files == 2
    (a / "weights.bin").write_bytes(b"other")
    assert tree_digest(a, keep=lambda rel: rel.endswith(".py")) == code and tree_digest(a) != first


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_a_link_is_digested_by_its_target_text_and_never_followed(tmp_path: Path) -> None:
    a = _tree(tmp_path / "t")
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret 1")
    (a / "link").symlink_to(outside)
    (a / "dirlink").symlink_to(tmp_path, target_is_directory=True)  # a loop, were it followed
    first = tree_digest(a)
    assert first.files == 5
    outside.write_text("host secret 2")  # what the link points at is never read
    assert tree_digest(a) == first
    (a / "link").unlink()
    (a / "link").symlink_to(tmp_path / "other.txt")
    assert tree_digest(a) != first


def test_bounds_and_errors_name_the_tree_never_its_place(tmp_path: Path) -> None:
    a = _tree(tmp_path)
    with pytest.raises(TreeTooLarge, match="the agent holds more than 2 files"):
        tree_digest(a, what="the agent", max_files=2)
    with pytest.raises(TreeTooLarge, match="more than 10 bytes"):
        tree_digest(a, what="the agent", max_bytes=10)
    with pytest.raises(TreeError, match="the agent: its root is missing") as caught:
        tree_digest(tmp_path / "gone", what="the agent")
    assert str(tmp_path) not in str(caught.value)
    if os.geteuid() != 0:  # root reads anything
        (a / "sub" / "solve.py").chmod(0)
        try:
            with pytest.raises(TreeError, match=r"cannot read sub/solve.py") as caught:
                tree_digest(a, what="the agent")
            assert str(tmp_path) not in str(caught.value)
        finally:
            (a / "sub" / "solve.py").chmod(0o644)


def test_a_single_file_is_a_tree_of_one(tmp_path: Path) -> None:
    one = tmp_path / "solver.py"
    one.write_text("x = 1\n")
    digest = tree_digest(one)
    assert digest.files == 1
    moved = tmp_path / "d"
    moved.mkdir()
    (moved / "solver.py").write_text("x = 1\n")
    assert tree_digest(moved / "solver.py") == digest == tree_digest(moved)
