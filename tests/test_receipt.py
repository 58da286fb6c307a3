"""Run receipts: versions, digests and the scorer's hashes, and nothing private."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from imagebench.fixtures.specs import OnDisk
from imagebench.runs.receipt import (
    RECEIPT_NAME,
    Receipt,
    ReceiptError,
    build_receipt,
    describe_subject,
    fixture_manifest_digests,
    read_receipt,
    scrub,
    write_receipt,
)
from imagebench.scoring.manifest import current_manifest

REAL_HOME = os.path.expanduser("~")
SECRET = "sk-live-0123456789abcdefSECRET"
COMMAND = f"OPENAI_API_KEY={SECRET} /home/someone/bin/my-agent --token {SECRET} --out /tmp/x"


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("IMAGEBENCH_TEST_API_TOKEN", SECRET)
    monkeypatch.setenv("HOME", "/home/someone")
    return SECRET


def _cases(tmp_path: Path):
    from imagebench.cases.structured import CASES

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "manifest.json").write_text('{"schema_version": 1}')
    curated = type("C", (), {"fixture": OnDisk(tolerance={}, root=tree), "label": "x/curated", "kind": "curated"})()
    return [*CASES, curated], tree


def test_receipt_records_what_a_rerun_needs(tmp_path: Path, secret_env) -> None:
    cases, tree = _cases(tmp_path)
    receipt = build_receipt(
        subject=f"command:{COMMAND}",
        samples=3,
        seeds={"fibre-angle/synthetic-lines": 2026},
        selection={"filter": "structured", "fixtures": str(tmp_path / "tree")},
        cases=cases,
    )
    assert receipt.schema_version == 2
    assert receipt.python["version"].count(".") == 2 and receipt.platform["system"]
    assert receipt.packages["numpy"] and "napari" in receipt.packages and "pyarrow" in receipt.packages
    assert receipt.source_revision == "unknown" or len(receipt.source_revision) == 40
    assert receipt.scorer["registry_hash"] == current_manifest(revision="unknown").registry_hash
    assert receipt.scorer["manifest_matches"] is True
    assert receipt.subject == {
        "form": "command",
        "program": "my-agent",
        "command_sha256": __import__("hashlib").sha256(COMMAND.encode()).hexdigest(),
    }
    assert receipt.sampling["samples_per_case"] == 3
    assert list(receipt.fixture_manifests) == ["root-of:x/curated"]
    assert len(receipt.fixture_manifests["root-of:x/curated"]) == 64
    labels = [c["label"] for c in receipt.cases]
    assert "pick-a-nucleus/synthetic-volume" in labels
    pick = next(c for c in receipt.cases if c["label"] == "pick-a-nucleus/synthetic-volume")
    assert pick["seed"] == 2026 and pick["contract"] == "extent_voxel_tolerance_v1"

    path = write_receipt(tmp_path / "run", receipt)
    assert path.name == RECEIPT_NAME
    text = path.read_text()
    local = [p for p in (REAL_HOME, os.getcwd()) if len(p) > 1]
    for private in (SECRET, "/home/someone", "/work", "/tmp", str(tmp_path), *local):
        assert private not in text, private
    assert read_receipt(path) == receipt


def test_package_fixture_roles_are_not_paths() -> None:
    from imagebench.cases import segmentation

    digests = fixture_manifest_digests(segmentation.CASES)
    assert all(not role.startswith("/") for role in digests)
    assert any(role.startswith("package:") for role in digests)


def test_env_tree_role(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "manifest.json").write_text("{}")
    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(tmp_path))
    case = type("C", (), {"fixture": OnDisk(tolerance={}), "label": "a/b"})()
    assert list(fixture_manifest_digests([case])) == ["$IMAGEBENCH_FIXTURES"]
    assert fixture_manifest_digests([case], {"bundle": tmp_path / "absent.json"})["bundle"] == "absent"


@pytest.mark.parametrize(
    "subject, expected",
    [
        ("reference", {"form": "reference"}),
        ("nop", {"form": "nop"}),
        ("python:mypkg.solvers:segment", {"form": "python", "target": "mypkg.solvers:segment"}),
    ],
)
def test_describe_subject(subject: str, expected: dict) -> None:
    assert describe_subject(subject) == expected


def test_python_file_subject_keeps_only_the_file_name() -> None:
    d = describe_subject("python:/home/me/secret/solve.py:run")
    assert d["file"] == "solve.py" and d["function"] == "run" and "/home" not in json.dumps(d)


def test_subject_objects() -> None:
    from imagebench.subjects import CommandSubject

    d = describe_subject(CommandSubject(command="env A=1 python3 agent.py"))
    assert d["program"] == "python3" and "agent.py" not in json.dumps(d)


def test_scrub_replaces_paths_addresses_and_secrets(secret_env) -> None:
    cleaned = scrub({"a": f"--key {SECRET}", "b": ["/home/someone/data", "tcp://10.1.2.3:8786"], "c": 3})
    text = json.dumps(cleaned)
    assert SECRET not in text and "/home" not in text and "10.1.2.3" not in text and cleaned["c"] == 3


def test_write_refuses_a_leaky_receipt(tmp_path: Path, secret_env) -> None:
    receipt = build_receipt(subject="nop", samples=1, seeds=0, selection=None, cases=[])
    leaky = Receipt.model_validate({**receipt.model_dump(), "seeds": {"where": "/home/someone/x"}})
    with pytest.raises(ReceiptError, match="home"):
        write_receipt(tmp_path, leaky)
    assert not (tmp_path / RECEIPT_NAME).exists()


def test_read_receipt_errors(tmp_path: Path) -> None:
    with pytest.raises(ReceiptError, match="missing"):
        read_receipt(tmp_path / "none.json")
    bad = tmp_path / "r.json"
    bad.write_text('{"schema_version": 3}')
    with pytest.raises(ReceiptError, match="schema_version"):
        read_receipt(bad)


# --------------------------------------------------------------------------- which source tree ran


def _tree_hash_by_hand(folders: list[Path]) -> str:
    """The package's tree hash computed here, independently: sorted 'imagebench/<path>' NUL sha256 lines."""
    import hashlib

    entries = []
    for folder in folders:
        for p in folder.rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"):
                entries.append((f"{folder.name}/{p.relative_to(folder).as_posix()}", hashlib.sha256(p.read_bytes()).hexdigest()))
    h = hashlib.sha256()
    for rel, hexdigest in sorted(entries):
        h.update(rel.encode() + b"\0" + hexdigest.encode() + b"\n")
    return h.hexdigest()


def _package_folders() -> list[Path]:
    import importlib.util

    import imagebench

    folders = [Path(imagebench.__file__).resolve().parent]
    plugin = importlib.util.find_spec("napari_imagebench")  # found, not imported
    if plugin is not None:
        folders += [Path(p).resolve() for p in plugin.submodule_search_locations or []]
    return folders


def test_the_receipt_says_which_source_tree_ran_and_whether_it_was_committed() -> None:
    import subprocess

    receipt = build_receipt(subject="nop", samples=1, seeds=0, selection=None, cases=[])
    folders = _package_folders()
    assert [f.name for f in folders] == ["imagebench", "napari_imagebench"]
    assert receipt.source_tree_hash == _tree_hash_by_hand(folders)
    if receipt.source_revision == "unknown":  # installed, or no git: nothing can say it was committed
        assert receipt.source_dirty is None
    else:
        status = subprocess.run(
            ["git", "-C", str(folders[0]), "status", "--porcelain", "--", *map(str, folders)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert receipt.source_dirty is bool(status.stdout.strip())


def test_the_source_tree_hash_changes_with_any_file_and_not_with_bytecode(tmp_path: Path, monkeypatch) -> None:
    from imagebench.runs import receipt as rc
    from imagebench.scoring import manifest as mf

    pkg = tmp_path / "imagebench"
    (pkg / "data").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "data" / "table.csv").write_text("1,2\n")
    monkeypatch.setattr(mf, "package_folders", lambda: [pkg])
    compute = rc.source_tree_hash.__wrapped__  # the cached function, computed afresh
    first = compute()
    assert first == _tree_hash_by_hand([pkg])
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "a.pyc").write_bytes(b"\0")  # bytecode beside its source
    assert compute() == first
    (pkg / "b.pyc").write_bytes(b"\0")  # a sourceless .pyc is code Python imports: it counts
    assert compute() != first
    (pkg / "b.pyc").unlink()
    (pkg / "data" / "table.csv").write_text("1,3\n")  # not only code: every file the package ships
    assert compute() != first
    assert rc.source_tree_hash() == rc.source_tree_hash() and rc.source_tree_hash.cache_info().hits >= 1


def test_a_version_1_receipt_still_reads_and_a_version_2_one_needs_its_tree_hash(tmp_path: Path) -> None:
    receipt = build_receipt(subject="nop", samples=1, seeds=0, selection=None, cases=[])
    old = receipt.model_dump()
    old["schema_version"] = 1
    del old["source_tree_hash"], old["source_dirty"]
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(old))
    read = read_receipt(path)
    assert read.schema_version == 1 and read.source_tree_hash is None and read.source_dirty is None
    new = receipt.model_dump()
    del new["source_tree_hash"]
    path.write_text(json.dumps(new))
    with pytest.raises(ReceiptError, match="source_tree_hash.*schema_version 2"):
        read_receipt(path)
