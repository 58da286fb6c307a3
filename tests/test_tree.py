"""The fixture tree: manifest + case.json, availability, load_fixture, verify and its CLI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import tifffile

from imagebench import cli
from imagebench.fixtures import tree
from imagebench.fixtures.fixture import FIXTURES_ENV, FixtureError
from imagebench.fixtures.refs import FileRef, NpzRef

DOCS = Path(__file__).resolve().parents[1] / "docs" / "fixtures.md"
NS, CASE = "seg", "tiny"


def _build(root: Path) -> Path:
    """A valid one-case tree: an .npy image as data, an archive with two truth arrays."""
    folder = root / NS / CASE
    folder.mkdir(parents=True)
    np.save(folder / "image.npy", np.arange(24, dtype=np.float32).reshape(4, 6))
    np.savez(folder / "truth.npz", labels=np.ones((4, 6), np.int32), count=np.array(3))
    (folder / "CITATION.txt").write_text("cite the tests\n")
    tree.write_case_layout(
        root, NS, CASE, about="tiny", data={"image": "image.npy"}, truth={"labels": "truth.npz", "count": "truth.npz"}
    )
    tree.write_manifest_entry(root, NS, CASE, provenance="made in a test", citation="the test suite")
    return folder


@pytest.fixture
def root(tmp_path) -> Path:
    r = tmp_path / "fx"
    r.mkdir()
    _build(r)
    return r


def _manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


def _set_manifest(root: Path, raw) -> None:
    (root / "manifest.json").write_text(raw if isinstance(raw, str) else json.dumps(raw))


def _set_layout(root: Path, raw) -> None:
    (root / NS / CASE / "case.json").write_text(raw if isinstance(raw, str) else json.dumps(raw))


def _unavailable(root: Path, *patterns: str) -> str:
    ok, why = tree.case_available(root, NS, CASE)
    assert not ok
    for p in patterns:
        assert re.search(p, why), (p, why)
    with pytest.raises(FixtureError) as err:
        tree.load_fixture(root, NS, CASE)
    assert str(err.value) == why
    return why


# --------------------------------------------------------------------------- the happy path


def test_load_fixture_gives_refs_checked_against_the_manifest(root):
    assert tree.case_available(root, NS, CASE) == (True, "")
    fx = tree.load_fixture(root, NS, CASE)
    assert (fx.kind, fx.skill_id, fx.case_id, fx.about) == ("curated", NS, CASE, "tiny")
    assert fx.provenance == "made in a test" and fx.citation == "the test suite"
    assert fx.data == {"image": FileRef(root / NS / CASE / "image.npy")}
    assert fx.truth == {
        "labels": NpzRef(root / NS / CASE / "truth.npz", "labels"),
        "count": NpzRef(root / NS / CASE / "truth.npz", "count"),
    }
    assert int(np.asarray(fx.truth["count"])) == 3
    assert np.asarray(fx.data["image"]).sum() == sum(range(24))


def test_the_manifest_written_by_the_helpers(root):
    m = tree.load_manifest(root)
    (entry,) = m.fixtures
    files = entry.files
    assert sorted(files) == ["CITATION.txt", "image.npy", "truth.npz"]
    assert files["CITATION.txt"].arrays == {}
    assert files["image.npy"].arrays == {"image": tree.ArraySpec(shape=[4, 6], dtype="float32")}
    assert files["truth.npz"].arrays["count"].shape == []
    assert files["image.npy"].bytes == (root / NS / CASE / "image.npy").stat().st_size
    assert files["image.npy"].sha256 == tree.sha256_file(root / NS / CASE / "image.npy")


def test_write_manifest_entry_replaces_and_keeps_other_entries(root):
    folder = root / "other" / "b"
    folder.mkdir(parents=True)
    np.save(folder / "x.npy", np.zeros(2))
    tree.write_manifest_entry(root, "other", "b", provenance="p", citation="c", files={"x.npy": ["x"]})
    tree.write_manifest_entry(root, NS, CASE, provenance="revised", citation="the test suite")
    m = tree.load_manifest(root)
    assert [e.label for e in m.fixtures] == ["other/b", f"{NS}/{CASE}"]
    assert m.entry(NS, CASE).provenance == "revised"


def test_file_entry_rules(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(3))
    with pytest.raises(FixtureError, match="exactly one array spec"):
        tree.file_entry(tmp_path / "a.npy", ["x", "y"])
    (tmp_path / "notes.md").write_text("hi")
    with pytest.raises(FixtureError, match="not a fixture array format"):
        tree.file_entry(tmp_path / "notes.md", ["x"])
    np.savez(tmp_path / "s.npz", a=np.zeros(1), b=np.ones(2))
    assert sorted(tree.file_entry(tmp_path / "s.npz", ["b"]).arrays) == ["b"]


def test_schemas_are_exported_for_the_schema_command():
    assert set(tree.SCHEMAS) == {"manifest", "fixture-case"}
    assert "citation" in json.dumps(tree.SCHEMAS["manifest"].model_json_schema())
    assert "truth" in json.dumps(tree.SCHEMAS["fixture-case"].model_json_schema())


# --------------------------------------------------------------------------- bad trees


def test_no_tree_no_manifest(tmp_path):
    ok, why = tree.case_available(tmp_path / "absent", NS, CASE)
    assert not ok and "does not exist" in why
    (tmp_path / "file").write_text("")
    assert "not a directory" in tree.case_available(tmp_path / "file", NS, CASE)[1]
    ok, why = tree.case_available(tmp_path, NS, CASE)
    assert not ok and why.endswith("manifest.json: manifest is missing")


def test_manifest_bad_json(root):
    _set_manifest(root, "{ not json")
    _unavailable(root, r"manifest\.json: not valid JSON")


def test_manifest_duplicate_json_keys(root):
    _set_manifest(root, '{"version": 1, "version": 1, "fixtures": []}')
    _unavailable(root, r"manifest\.json: not valid JSON.*'version' appears twice")


@pytest.mark.parametrize(
    "edit, pattern",
    [
        (lambda m: m.pop("version"), r"field 'version' is missing"),
        (lambda m: m.update(version=2), r"field 'version' is 2; this imagebench reads manifest version 1"),
        (lambda m: m.update(version=True), r"field 'version' is True"),
        (lambda m: m["fixtures"][0].pop("citation"), r"field fixtures\[0\]\.citation: Field required"),
        (lambda m: m["fixtures"][0].update(citation=""), r"fixtures\[0\]\.citation: String should have at least 1"),
        (lambda m: m["fixtures"][0].update(citation="  "), r"fixtures\[0\]\.citation: must not be blank"),
        (
            lambda m: m["fixtures"][0]["files"]["image.npy"].update(bytes="many"),
            r"fixtures\[0\]\.files\['image\.npy'\]\.bytes: Input should be a valid integer",
        ),
        (
            lambda m: m["fixtures"][0]["files"]["image.npy"].update(sha256="abc"),
            r"\.files\['image\.npy'\]\.sha256: expected 64 lowercase hex",
        ),
        (
            lambda m: m["fixtures"][0]["files"]["image.npy"]["arrays"]["image"].update(dtype="float33"),
            r"\.arrays\.image\.dtype: 'float33' is not a numpy dtype",
        ),
        (lambda m: m["fixtures"][0].update(colour="red"), r"fixtures\[0\]\.colour: Extra inputs are not permitted"),
        (lambda m: m["fixtures"].append(dict(m["fixtures"][0])), r"listed twice"),
        (lambda m: m["fixtures"][0].update(skill="Seg"), r"fixtures\[0\]\.skill: 'Seg' is not a lowercase name"),
        (lambda m: m.update(fixtures={}), r"field fixtures: Input should be a valid list"),
    ],
)
def test_manifest_fields_are_checked_and_named(root, edit, pattern):
    m = _manifest(root)
    edit(m)
    _set_manifest(root, m)
    why = _unavailable(root, pattern)
    assert "manifest.json" in why


def test_manifest_top_level_must_be_an_object(root):
    _set_manifest(root, "[1, 2]")
    _unavailable(root, r"manifest\.json: expected a JSON object, got list")


def test_no_manifest_entry(root):
    m = _manifest(root)
    m["fixtures"] = []
    _set_manifest(root, m)
    _unavailable(root, r"manifest\.json: no entry for seg/tiny")


def test_case_folder_without_case_json(root):
    (root / NS / CASE / "case.json").unlink()
    _unavailable(root, r"case\.json: case layout is missing")


@pytest.mark.parametrize(
    "layout, pattern",
    [
        ("{", r"case\.json: not valid JSON"),
        ({"data": {"image": "image.npy"}}, r"case\.json: field truth: Field required"),
        ({"data": {"image": 3}, "truth": {}}, r"field data\.image: Input should be a valid string"),
        ({"version": 7, "data": {}, "truth": {}}, r"case\.json: field 'version' is 7"),
        ({"data": {}, "truth": {}, "extra": 1}, r"field extra: Extra inputs are not permitted"),
        (
            {"data": {"labels": "image.npy"}, "truth": {"labels": "truth.npz"}},
            r"\['labels'\] appear in both data and truth",
        ),
        ({"data": {"image": "truth.npz"}, "truth": {"labels": "truth.npz"}}, r"back both a data key and a truth key"),
        (
            {"data": {"image": "../tiny/image.npy"}, "truth": {}},
            r"field data\.image: '\.\./tiny/image\.npy' may not contain '\.\.'",
        ),
        (
            {"data": {"image": "/etc/passwd"}, "truth": {}},
            r"field data\.image: '/etc/passwd' must be a relative POSIX path",
        ),
        ({"data": {"image": "a\\b.npy"}, "truth": {}}, r"relative POSIX path"),
    ],
)
def test_case_layout_is_checked_and_named(root, layout, pattern):
    _set_layout(root, layout)
    why = _unavailable(root, pattern)
    assert "case.json" in why


def test_layout_names_a_file_the_manifest_does_not_list(root):
    np.save(root / NS / CASE / "stray.npy", np.zeros(2))
    _set_layout(root, {"data": {"image": "stray.npy"}, "truth": {}})
    _unavailable(root, r"case\.json: data\['image'\] -> 'stray\.npy': the manifest entry seg/tiny does not list")


def test_absent_file(root):
    (root / NS / CASE / "image.npy").unlink()
    _unavailable(root, r"image\.npy: file is missing \(.*manifest\.json: fixtures\[seg/tiny\]\.files\['image\.npy'\]\)")


def test_wrong_size_is_caught_without_hashing(root):
    with open(root / NS / CASE / "CITATION.txt", "a") as fh:
        fh.write("more")
    _unavailable(root, r"CITATION\.txt: 19 bytes on disk, but .*\.bytes says 15")


def test_missing_npz_member(root):
    _set_layout(root, {"data": {"image": "image.npy"}, "truth": {"mask": "truth.npz"}})
    m = _manifest(root)
    m["fixtures"][0]["files"]["truth.npz"]["arrays"]["mask"] = {"shape": [4, 6], "dtype": "int32"}
    _set_manifest(root, m)
    _unavailable(
        root,
        r"truth\['mask'\] -> 'truth\.npz'.*truth\.npz: the archive has no array named 'mask' \(it holds: count, labels\)",
    )


def test_manifest_without_a_spec_for_a_member(root):
    m = _manifest(root)
    del m["fixtures"][0]["files"]["truth.npz"]["arrays"]["count"]
    _set_manifest(root, m)
    _unavailable(root, r"truth\['count'\].*lists no array 'count' for this archive")


@pytest.mark.parametrize(
    "spec, pattern",
    [
        ({"shape": [6, 4], "dtype": "float32"}, r"shape \[4, 6\] \(manifest: \[6, 4\]\)"),
        ({"shape": [4, 6], "dtype": "float64"}, r"dtype float32 \(manifest: float64\)"),
    ],
)
def test_header_must_agree_with_the_manifest(root, spec, pattern):
    m = _manifest(root)
    m["fixtures"][0]["files"]["image.npy"]["arrays"] = {"image": spec}
    _set_manifest(root, m)
    _unavailable(root, r"data\['image'\] -> 'image\.npy': the header reports " + pattern)


def test_single_array_file_needs_exactly_one_spec(root):
    m = _manifest(root)
    m["fixtures"][0]["files"]["image.npy"]["arrays"] = {}
    _set_manifest(root, m)
    _unavailable(root, r"files\['image\.npy'\]\.arrays must hold exactly one spec")


def test_unknown_format_is_an_availability_fact(root):
    folder = root / NS / CASE
    (folder / "image.png").write_bytes(b"\x89PNG....")
    _set_layout(root, {"data": {"image": "image.png"}, "truth": {}})
    m = _manifest(root)
    m["fixtures"][0]["files"]["image.png"] = {
        "sha256": tree.sha256_file(folder / "image.png"),
        "bytes": 8,
        "arrays": {"image": {"shape": [1], "dtype": "uint8"}},
    }
    _set_manifest(root, m)
    _unavailable(root, r"image\.png: no reader for suffix '\.png'")


def _replace_with_recorded(root: Path, name: str, payload: bytes, spec: dict) -> None:
    """Put a (corrupt) file in the tree and record it faithfully, as a careless author would."""
    folder = root / NS / CASE
    (folder / name).write_bytes(payload)
    _set_layout(root, {"data": {"image": name}, "truth": {"labels": "truth.npz"}})
    m = _manifest(root)
    m["fixtures"][0]["files"][name] = {
        "sha256": tree.sha256_file(folder / name),
        "bytes": len(payload),
        "arrays": {"image": spec},
    }
    _set_manifest(root, m)


def test_truncated_tiff(root, tmp_path):
    tifffile.imwrite(tmp_path / "a.tif", np.ones((8, 16, 16), np.uint16))
    raw = (tmp_path / "a.tif").read_bytes()
    _replace_with_recorded(root, "cut.tif", raw[: len(raw) // 2], {"shape": [8, 16, 16], "dtype": "uint16"})
    why = _unavailable(root, r"data\['image'\] -> 'cut\.tif'.*cut\.tif: TIFF image data is truncated")
    assert "Traceback" not in why


def test_corrupt_tiff_header(root):
    _replace_with_recorded(root, "bad.tif", b"II*\x00\xff\xff\xff\x7f" + b"\x00" * 32, {"shape": [1], "dtype": "uint8"})
    _unavailable(root, r"bad\.tif: cannot read the TIFF header")


def test_truncated_nifti(root, tmp_path):
    nib.save(nib.Nifti1Image(np.ones((6, 6, 6), np.int16), np.eye(4)), tmp_path / "a.nii")
    raw = (tmp_path / "a.nii").read_bytes()
    _replace_with_recorded(root, "cut.nii", raw[:-50], {"shape": [6, 6, 6], "dtype": "int16"})
    _unavailable(root, r"cut\.nii: NIfTI image data is truncated")
    _replace_with_recorded(root, "head.nii", raw[:120], {"shape": [6, 6, 6], "dtype": "int16"})
    _unavailable(root, r"head\.nii: cannot read the NIfTI header")


def test_truncated_nifti_gz_fails_when_read_naming_the_file(root, tmp_path):
    data = np.random.default_rng(1).integers(0, 30000, (8, 32, 32), dtype=np.int16)
    nib.save(nib.Nifti1Image(data, np.eye(4)), tmp_path / "a.nii.gz")
    raw = (tmp_path / "a.nii.gz").read_bytes()
    _replace_with_recorded(root, "cut.nii.gz", raw[: len(raw) // 2], {"shape": [8, 32, 32], "dtype": "int16"})
    fx = tree.load_fixture(root, NS, CASE)  # the header is intact: the loss shows at read time
    with pytest.raises(FixtureError, match=r"cut\.nii\.gz: cannot read the array"):
        np.asarray(fx.data["image"])


# --------------------------------------------------------------------------- path escapes


def test_manifest_paths_cannot_escape(root):
    m = _manifest(root)
    m["fixtures"][0]["files"]["../../outside.npy"] = m["fixtures"][0]["files"]["image.npy"]
    _set_manifest(root, m)
    _unavailable(
        root,
        r"field fixtures\[0\]\.files\['\.\./\.\./outside\.npy'\] \(the name\): '\.\./\.\./outside\.npy' may not contain '\.\.'",
    )
    m["fixtures"][0]["files"].pop("../../outside.npy")
    m["fixtures"][0]["files"]["/abs.npy"] = m["fixtures"][0]["files"]["image.npy"]
    _set_manifest(root, m)
    _unavailable(root, r"relative POSIX path")


def test_symlinked_file_resolving_outside_is_refused(root, tmp_path):
    outside = tmp_path / "outside.npy"
    os.replace(root / NS / CASE / "image.npy", outside)
    (root / NS / CASE / "image.npy").symlink_to(outside)
    _unavailable(root, r"image\.npy resolves to .*outside\.npy, outside the fixture tree")
    findings = tree.verify_tree(root)
    assert [(f.problem, f.file) for f in findings] == [("path", f"{NS}/{CASE}/image.npy")]


def test_symlinked_case_folder_resolving_outside_is_refused(root, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    os.replace(root / NS / CASE, elsewhere)
    (root / NS / CASE).symlink_to(elsewhere, target_is_directory=True)
    _unavailable(root, r"outside the fixture tree")


def test_symlink_inside_the_tree_is_fine(root):
    folder = root / NS / CASE
    os.replace(folder / "image.npy", root / NS / "shared-image.npy")
    (folder / "image.npy").symlink_to(Path("..") / "shared-image.npy")
    assert tree.case_available(root, NS, CASE) == (True, "")


def test_case_names_cannot_address_outside(root):
    ok, why = tree.case_available(root, "..", CASE)
    assert not ok and "not a lowercase name" in why


# --------------------------------------------------------------------------- verify


def test_verify_clean_tree(root):
    assert tree.verify_tree(root) == []
    assert tree.verify_tree(root, workers=1) == []


def test_verify_reports_every_kind_of_drift(root):
    folder = root / NS / CASE
    raw = bytearray((folder / "image.npy").read_bytes())
    raw[-1] ^= 0xFF  # same size, different content
    (folder / "image.npy").write_bytes(bytes(raw))
    (folder / "CITATION.txt").write_text("shorter")
    (folder / "truth.npz").unlink()
    (folder / "notes.txt").write_text("stray")
    (folder / "scratch").mkdir()
    (folder / "scratch" / "x.npy").write_bytes(b"")
    (root / NS / "unlisted-case").mkdir()
    (root / "unknown-skill").mkdir()
    (root / "README.md").write_text("hi")
    got = {(f.problem, f.case, f.file) for f in tree.verify_tree(root, workers=3)}
    label = f"{NS}/{CASE}"
    assert got == {
        ("sha256", label, f"{label}/image.npy"),
        ("size", label, f"{label}/CITATION.txt"),
        ("missing", label, f"{label}/truth.npz"),
        ("unlisted", label, f"{label}/notes.txt"),
        ("unlisted", label, f"{label}/scratch"),
        ("unlisted", "", f"{NS}/unlisted-case"),
        ("unlisted", "", "unknown-skill"),
        ("unlisted", "", "README.md"),
    }


def test_verify_reports_an_absent_case_folder_once(root, tmp_path):
    os.replace(root / NS / CASE, tmp_path / "moved")
    findings = tree.verify_tree(root)
    assert [(f.problem, f.case, f.file) for f in findings] == [("missing", f"{NS}/{CASE}", f"{NS}/{CASE}")]


def test_verify_reports_a_broken_layout(root):
    _set_layout(root, {"data": {}})
    (finding,) = tree.verify_tree(root)
    assert finding.problem == "layout" and finding.file == f"{NS}/{CASE}/case.json"
    assert "field truth: Field required" in finding.detail


def test_verify_accepts_listed_subfolders(root):
    folder = root / NS / CASE
    (folder / "raw" / "deep").mkdir(parents=True)
    np.save(folder / "raw" / "deep" / "x.npy", np.zeros(3))
    (folder / "raw" / "stray.txt").write_text("?")
    tree.write_manifest_entry(
        root,
        NS,
        CASE,
        provenance="p",
        citation="c",
        files=["image.npy", "truth.npz", "CITATION.txt", "raw/deep/x.npy"],
    )
    got = [(f.problem, f.file) for f in tree.verify_tree(root)]
    assert got == [("unlisted", f"{NS}/{CASE}/raw/stray.txt")]


def test_verify_progress_hooks_see_every_byte(root):
    seen = {"bytes": 0}
    starts = []
    tree.verify_tree(
        root,
        on_start=lambda n, total: starts.append((n, total)),
        on_bytes=lambda n: seen.__setitem__("bytes", seen["bytes"] + n),
    )
    ((files, total),) = starts
    entry = tree.load_manifest(root).fixtures[0]
    assert files == 3 and total == sum(f.bytes for f in entry.files.values()) == seen["bytes"]


def test_verify_on_a_tree_without_manifest_raises(tmp_path):
    with pytest.raises(FixtureError, match="manifest is missing"):
        tree.verify_tree(tmp_path)


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def run_cli():
    """``imagebench ...`` in process, through the real ``cli.main``."""
    assert cli.COMMANDS["fixtures"][0] == "imagebench.cli.fixtures"

    def run(*argv: str) -> int:
        return cli.main(list(argv))

    return run


def test_cli_clean_exit_0(root, run_cli, capsys):
    assert run_cli("fixtures", "verify", str(root)) == 0
    out, err = capsys.readouterr()
    assert out == "" and "clean" in err


def test_cli_drift_exit_1_one_line_per_finding(root, run_cli, capsys):
    (root / NS / CASE / "image.npy").unlink()
    (root / "stray.txt").write_text("x")
    assert run_cli("fixtures", "verify", "--quiet", str(root)) == 1
    out, err = capsys.readouterr()
    assert (
        out.splitlines()
        == [
            "unlisted: (tree): stray.txt: a file no manifest entry names",
            f"missing: {NS}/{CASE}: {NS}/{CASE}/image.npy: listed in the manifest, absent on disk",
        ]
        and err == ""
    )


def test_cli_root_from_env(root, run_cli, monkeypatch, capsys):
    monkeypatch.setenv(FIXTURES_ENV, str(root))
    assert run_cli("fixtures", "verify", "-q") == 0


def test_cli_usage_errors_exit_2(tmp_path, run_cli, monkeypatch, capsys):
    monkeypatch.delenv(FIXTURES_ENV, raising=False)
    assert run_cli("fixtures", "verify", "-q") == 0  # no root, no $IMAGEBENCH_FIXTURES: the packaged tree
    assert run_cli("fixtures", "verify", str(tmp_path / "absent")) == 2
    assert run_cli("fixtures", "verify", "--workers", "0", str(tmp_path)) == 2
    assert run_cli("fixtures") == 2  # no action given
    with pytest.raises(SystemExit) as exc:
        run_cli("fixtures", "verify", "--bogus")
    assert exc.value.code == 2


def test_cli_unreadable_manifest_is_drift(tmp_path, run_cli, capsys):
    (tmp_path / "manifest.json").write_text("{")
    assert run_cli("fixtures", "verify", "-q", str(tmp_path)) == 1
    assert "not valid JSON" in capsys.readouterr().err


# --------------------------------------------------------------------------- docs, and the real tree


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOCS.read_text(), flags=re.S)


def test_docs_worked_example(tmp_path, run_cli):
    (script,) = _blocks("python")
    root = tmp_path / "docs-tree"
    root.mkdir()
    exec(compile(script, str(DOCS), "exec"), {"root": str(root)})
    layout_doc, manifest_doc = (json.loads(b) for b in _blocks("json"))
    assert json.loads((root / "segment-nuclei" / "two-cells" / "case.json").read_text()) == layout_doc

    def strip(m: dict) -> dict:
        for e in m["fixtures"]:
            for f in e["files"].values():
                f["sha256"], f["bytes"] = "…", 0
        return m

    assert strip(_manifest(root)) == manifest_doc
    fx = tree.load_fixture(root, "segment-nuclei", "two-cells")
    assert isinstance(fx.data["image"], FileRef) and set(fx.truth) == {"labels", "centroids"}
    assert run_cli("fixtures", "verify", "-q", str(root)) == 0
    tif = root / "segment-nuclei" / "two-cells" / "field.tif"
    raw = bytearray(tif.read_bytes())
    raw[-1] ^= 1
    tif.write_bytes(bytes(raw))
    (tif.parent / "notes.txt").write_text("x")
    assert sorted(f.problem for f in tree.verify_tree(root)) == ["sha256", "unlisted"]


@pytest.mark.fixtures
def test_real_fixture_tree_matches_its_manifest():
    root = os.environ.get(FIXTURES_ENV)
    if not root:
        pytest.skip(f"${FIXTURES_ENV} is not set: no fixture tree on this machine")
    findings = tree.verify_tree(root)
    assert not findings, "\n".join(str(f) for f in findings)
