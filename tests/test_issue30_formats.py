"""Fixture formats the readers cannot open (issue 30, item 6): the authoring helpers refuse them
with the readers' own reason, a load names that reason, and ``fixtures verify`` fails."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import build_tree

from imagebench import cli
from imagebench.fixtures import tree
from imagebench.fixtures.fixture import FixtureError
from imagebench.fixtures.refs import FileRef, format_problem, ref_missing


@pytest.mark.parametrize("name", ["mask.png", "truth.h5", "labels.zarr"])
def test_the_authoring_helpers_refuse_a_format_no_reader_opens_with_the_readers_reason(
    tmp_path: Path, name: str
) -> None:
    folder = tmp_path / "seg" / "odd"
    folder.mkdir(parents=True)
    np.save(folder / "image.npy", np.zeros((4, 4), np.float32))
    if name.endswith(".zarr"):
        (folder / name).mkdir()
        (folder / name / ".zarray").write_text("{}")
    else:
        (folder / name).write_bytes(b"not an array")
    with pytest.raises(FixtureError) as raised:
        tree.write_case_layout(tmp_path, "seg", "odd", about="odd", data={"image": "image.npy"}, truth={"mask": name})
    text = str(raised.value)
    # the same words a load through the readers gives (refs.ref_missing)
    if not name.endswith(".zarr"):  # (a folder is not a regular file to ref_missing; its suffix is still the reason)
        assert ref_missing(FileRef(folder / name)) in text
    assert f"truth['mask'] -> {name!r}" in text and "no reader for suffix" in text and "fixture formats are" in text
    assert not (folder / "case.json").exists()
    # a hand-written layout: write_manifest_entry refuses it too, and the folder given by name
    (folder / "case.json").write_text(
        json.dumps({"about": "odd", "data": {"image": "image.npy"}, "truth": {"mask": name}})
    )
    with pytest.raises(FixtureError, match="no reader for suffix"):
        tree.write_manifest_entry(tmp_path, "seg", "odd", provenance="p", citation="c")
    assert not (tmp_path / "manifest.json").exists()


def test_a_tree_with_such_a_file_loads_with_that_reason_and_verify_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "fx"
    folder = build_tree(root)
    assert cli.main(["fixtures", "verify", str(root), "--quiet"]) == 0
    (folder / "held_out.png").write_bytes(b"\x89PNG not really")
    raw = json.loads((folder / "case.json").read_text())
    raw["truth"]["mask"] = "held_out.png"
    (folder / "case.json").write_text(json.dumps(raw))
    # a manifest forged past the helpers: it lists the file with a hash that matches
    manifest = json.loads((root / "manifest.json").read_text())
    entry = manifest["fixtures"][0]
    entry["files"]["held_out.png"] = {
        "sha256": tree.sha256_file(folder / "held_out.png"),
        "bytes": (folder / "held_out.png").stat().st_size,
        "arrays": {},
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FixtureError, match=r"no reader for suffix '\.png'; fixture formats are"):
        tree.load_fixture(root, "seg", "tiny")
    assert cli.main(["fixtures", "verify", str(root), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "format: seg/tiny: seg/tiny/case.json: truth['mask'] -> 'held_out.png':" in out
    assert "no reader for suffix '.png'" in out


def test_format_problem_is_none_for_every_reader_and_an_archive() -> None:
    for name in ("a.npy", "a.TIF", "a.tiff", "a.nii", "a.nii.gz", "a.npz"):
        assert format_problem(name) is None, name
    assert "no reader for suffix '.zarr'" in (format_problem("labels.zarr") or "")
