"""``python:path/to/file.py:function`` (issue 30, item 6): a solver named by its file, its sha256
in the subject's identity, no machine path recorded, an edited file a new identity."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from helpers import make_toy_case

from imagebench.executor import run_cases
from imagebench.records import RunRecord, read_record
from imagebench.subjects import SubjectError, identity_change, identity_of, parse_subject

SOLVER = textwrap.dedent(
    """
    from helpers import toy_reference


    def solve(session):
        toy_reference(session)  # {note}
    """
)


@pytest.fixture
def solver_file(tmp_path: Path) -> Path:
    folder = tmp_path / "my solvers"
    folder.mkdir()
    path = folder / "seg_file.py"
    path.write_text(SOLVER.format(note="first"))
    return path


def test_a_file_subject_runs_and_its_identity_holds_the_files_sha256(solver_file: Path, tmp_path: Path) -> None:
    import hashlib

    subject = parse_subject(f"python:{solver_file}:solve")
    assert subject.name == "python-seg_file.solve"
    result = run_cases([make_toy_case()], subject, out=tmp_path / "runs", progress=False)
    assert list(result.verdicts.values()) == ["pass"]
    record = read_record(result.run_dir / "run.json", RunRecord)
    identity = record.extra["subject_identity"]
    sha = hashlib.sha256(solver_file.read_bytes()).hexdigest()
    assert identity["parts"]["file"]["sha256"] == f"sha256:{sha}"
    assert identity["parts"]["target"] == "seg_file.py:solve"
    # no machine path in the identity or the recorded spec (the folder's name is not kept either)
    assert str(tmp_path) not in json.dumps(identity) and "my solvers" not in json.dumps(identity)
    assert str(tmp_path) not in json.dumps(record.extra.get("subject_spec"))
    solver_file.write_text(SOLVER.format(note="edited"))
    edited = identity_of(parse_subject(f"python:{solver_file}:solve"))
    assert edited["code"] != identity["code"]
    assert "parts.file" in (identity_change(identity, edited) or "")


def test_a_relative_file_target_resolves_from_the_working_folder(
    solver_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(solver_file.parent.parent)
    subject = parse_subject("python:my solvers/seg_file.py:solve")
    assert subject.target == f"{solver_file.resolve()}:solve"  # a worker and a resume find it again
    assert parse_subject(subject.spec()).target == subject.target


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nowhere/absent.py:solve", "no file"),
        ("my solvers/seg_file.txt:solve", "not a .py file"),
        ("my solvers/seg_file.py:", "expected python:path/to/file.py:function"),
        ("my solvers/seg_file.py:no_such", "has no attribute 'no_such'"),
    ],
)
def test_a_bad_file_target_is_refused_naming_what_is_wrong(
    solver_file: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    (solver_file.parent / "seg_file.txt").write_text("x")
    monkeypatch.chdir(solver_file.parent.parent)
    with pytest.raises(SubjectError, match=message):
        parse_subject(f"python:{target}")


def test_a_file_that_raises_at_import_is_a_subject_error(tmp_path: Path) -> None:
    bad = tmp_path / "boom.py"
    bad.write_text("raise RuntimeError('at import')\n")
    with pytest.raises(SubjectError, match="cannot import 'boom.py'.*at import"):
        parse_subject(f"python:{bad}:solve")
