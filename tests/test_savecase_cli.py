"""``imagebench case new``: a curated, declared case written into a fixture tree from files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from savecase_solutions import field

from imagebench.case.declared import DECLARATION, read_declaration
from imagebench.cases.authoring import DEFAULT_TOLERANCES
from imagebench.cli import main
from imagebench.fixtures import tree

WORDS = ["--provenance", "painted in napari over a synthetic field", "--citation", "the imagebench test suite"]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    import tifffile

    image, labels = field()
    tifffile.imwrite(tmp_path / "nuclei.tif", image)
    np.save(tmp_path / "labels.npy", labels)
    np.save(tmp_path / "spots.npy", np.array([[11.0, 13.5], [33.0, 38.0]]))
    (tmp_path / "notes.png").write_bytes(b"\x89PNG not an array")
    return tmp_path


def _new(root: Path, files: Path, *extra: str, case: str = "blobs") -> int:
    argv = ["case", "new", "--tree", str(root), "--skill", "my-skill", "--case", case]
    return main([*argv, "--data", f"nuclei={files / 'nuclei.tif'}", *extra, *WORDS])


def test_case_new_writes_a_case_that_verifies_clean(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = files / "tree"
    assert _new(root, files, "--truth", f"labels={files / 'labels.npy'}", "--tolerance", "f1_shortfall=0.2") == 0
    out = capsys.readouterr().out
    assert f"wrote case my-skill/blobs into {root}" in out
    assert f"imagebench fixtures verify {root}" in out and f"imagebench list --tree {root}" in out
    assert "imagebench calibrate" in out
    declared = read_declaration(root / "my-skill" / "blobs" / DECLARATION)
    assert declared.verifier.name == "label-image" and declared.tolerance["f1_shortfall"] == 0.2
    assert declared.tolerance["missed_fraction"] == DEFAULT_TOLERANCES["label-image"]["missed_fraction"]
    fixture = tree.load_fixture(root, "my-skill", "blobs")
    assert np.array_equal(np.asarray(fixture.data["nuclei"]), field()[0])  # read from the TIFF, kept as .npy
    assert tree.verify_tree(root) == []
    assert main(["fixtures", "verify", str(root), "--quiet"]) == 0


def test_points_are_inferred_and_a_prompt_file_is_read(files: Path) -> None:
    root = files / "tree"
    prompt = files / "prompt.md"
    prompt.write_text("Click the centre of every nucleus in `nuclei`; leave `spots`, (N, 2) coordinates.\n")
    assert _new(root, files, "--truth", f"spots={files / 'spots.npy'}", "--prompt-file", str(prompt)) == 0
    declared = read_declaration(root / "my-skill" / "blobs" / DECLARATION)
    assert declared.verifier.name == "points" and declared.prompt == prompt.read_text()


@pytest.mark.parametrize(
    ("extra", "code", "named"),
    [
        (["--truth", "labels={files}/notes.png"], 2, "notes.png: no reader for suffix '.png'"),
        (["--truth", "labels={files}/absent.npy"], 2, "absent.npy: file is missing"),
        (["--truth", "labels"], 2, "expected KEY=VALUE"),
        (["--truth", "labels={files}/labels.npy", "--truth-kind", "mask"], 2, "expected labels or points"),
        (["--truth", "labels={files}/labels.npy", "--tolerance", "f1_shortfall=low"], 2, "must be a number"),
        (["--truth", "spots={files}/labels.npy", "--truth-kind", "points"], 1, "truth layer 'spots'"),
        (["--truth", "labels={files}/labels.npy", "--reference", "no colon"], 1, "reference"),
    ],
)
def test_bad_input_is_named_and_nothing_is_written(
    files: Path, capsys: pytest.CaptureFixture[str], extra: list[str], code: int, named: str
) -> None:
    root = files / "tree"
    assert _new(root, files, *(e.format(files=files) for e in extra)) == code
    assert named in capsys.readouterr().err
    assert not root.exists()


def test_an_existing_case_is_refused(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = files / "tree"
    truth = ["--truth", f"labels={files / 'labels.npy'}"]
    assert _new(root, files, *truth) == 0
    before = (root / "manifest.json").read_bytes()
    assert _new(root, files, *truth) == 1
    assert "already listed" in capsys.readouterr().err
    assert (root / "manifest.json").read_bytes() == before


def test_the_tree_defaults_to_the_variable(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IMAGEBENCH_FIXTURES", raising=False)
    argv = ["case", "new", "--skill", "s", "--case", "c", "--data", f"x={files / 'nuclei.tif'}"]
    assert main([*argv, "--truth", f"labels={files / 'labels.npy'}", *WORDS]) == 2
    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(files / "env-tree"))
    assert main([*argv, "--truth", f"labels={files / 'labels.npy'}", *WORDS]) == 0
    assert tree.load_manifest(files / "env-tree").entry("s", "c") is not None
