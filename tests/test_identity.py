"""A subject's identity is what it ran (issue 25, part 7): the digest of its code, recorded in
run.json and the receipt, checked by a resume, shown by compare; ``--subject-name`` names it."""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import make_toy_case

from imagebench import cli
from imagebench import executor as ex
from imagebench.executor import run_cases
from imagebench.records import RunRecord, read_record
from imagebench.runs.receipt import read_receipt
from imagebench.sandbox.policy import SandboxPolicy
from imagebench.subjects import (
    CommandSubject,
    PythonSubject,
    SubjectError,
    identity_change,
    identity_of,
    options_from_record,
    options_record,
    parse_subject,
)
from imagebench.subjects import identity as ident

SOLVER = textwrap.dedent(
    """
    from helpers import toy_reference


    def solve(session):
        toy_reference(session)  # {note}
    """
)


@pytest.fixture
def solver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A solver module of its own name in a folder on sys.path: ``(module name, its file)``."""
    name = f"ident_solver_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "mods"
    folder.mkdir()
    path = folder / f"{name}.py"
    path.write_text(SOLVER.format(note="first"))
    monkeypatch.syspath_prepend(str(folder))
    yield name, path
    sys.modules.pop(name, None)


def _identity(run_dir: Path) -> dict[str, Any]:
    return read_record(run_dir / "run.json", RunRecord).extra["subject_identity"]


# --------------------------------------------------------------------------- python: subjects


def test_an_edited_python_module_is_a_new_identity_and_the_same_code_the_same(
    solver: tuple[str, Path], tmp_path: Path
) -> None:
    name, path = solver
    case = make_toy_case()
    spec = f"python:{name}:solve"
    first = run_cases([case], parse_subject(spec), out=tmp_path / "runs", progress=False)
    again = run_cases([case], parse_subject(spec), out=tmp_path / "runs", progress=False)
    a, b = _identity(first.run_dir), _identity(again.run_dir)
    assert a == b and a["code"].startswith("sha256:") and len(a["code"]) == 71
    assert a["name"] == f"python-{name}.solve"
    assert a["parts"]["kind"] == "python" and a["parts"]["target"] == f"{name}:solve"
    assert a["parts"]["file"]["name"] == f"{name}.py" and a["parts"]["file"]["files"] == 1
    path.write_text(SOLVER.format(note="edited"))
    edited = run_cases([case], parse_subject(spec), out=tmp_path / "runs", progress=False)
    c = _identity(edited.run_dir)
    assert c["code"] != a["code"] and c["name"] == a["name"]  # the same name: only the code says it changed
    change = identity_change(a, c)
    assert change is not None and "parts.file.digest: sha256:" in change
    # the receipt records the same identity, and neither holds a machine path
    receipt = read_receipt(edited.run_dir / "receipt.json")
    assert receipt.subject["identity"] == c
    assert str(tmp_path) not in json.dumps(c) and "/" not in json.dumps(c["parts"]).replace("sha256:", "")


def test_a_module_in_a_package_is_identified_by_the_whole_package_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = f"ident_pkg_{uuid.uuid4().hex[:8]}"
    pkg = tmp_path / top
    (pkg / "inner").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('imported!')\n")  # importing it would say so
    (pkg / "inner" / "__init__.py").write_text("")
    (pkg / "inner" / "solve.py").write_text("def run(session):\n    pass\n")
    (pkg / "helper.py").write_text("K = 1\n")
    (pkg / "notes.txt").write_text("not code")
    monkeypatch.syspath_prepend(str(tmp_path))
    # an isolated subject is never imported in the harness: its identity is read from its files
    subject = PythonSubject(target=f"{top}.inner.solve:run", function=None, isolate=SandboxPolicy())
    first = identity_of(subject)
    assert top not in sys.modules
    (tree,) = first["parts"]["package"]
    assert tree["name"] == top and tree["files"] == 5  # every file of the top-level package: its data too
    assert identity_of(subject) == first
    (pkg / "notes.txt").write_text("read at import, it can change what runs")
    assert identity_of(subject)["code"] != first["code"]
    (pkg / "notes.txt").write_text("not code")
    (pkg / "helper.py").write_text("K = 2\n")  # a module the function does not name, in its package
    changed = identity_of(subject)
    assert changed["code"] != first["code"] and top not in sys.modules
    assert identity_change(first, changed).startswith("parts.package[0].digest:")
    with pytest.raises(SubjectError, match="no module named 'no_such_module_here'"):
        identity_of(PythonSubject(target="no_such_module_here:run", function=None, isolate=SandboxPolicy()))


# --------------------------------------------------------------------------- command: subjects


def test_an_edited_exposed_tree_changes_a_command_subjects_identity(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    (agent / "lib").mkdir(parents=True)
    (agent / "run.sh").write_text("echo 1\n")
    (agent / "lib" / "tool.py").write_text("X = 1\n")
    subject = CommandSubject(command=f"bash {agent}/run.sh", sandbox=SandboxPolicy(expose=(agent,)))
    first = identity_of(subject)
    assert first == identity_of(subject)
    (expose,) = first["parts"]["expose"]
    assert expose["name"] == "agent" and expose["files"] == 2 and str(tmp_path) not in json.dumps(first)
    (agent / "lib" / "tool.py").write_text("X = 2\n")
    changed = identity_of(subject)
    assert changed["code"] != first["code"] and changed["name"] == first["name"]
    assert "parts.expose[0].digest" in identity_change(first, changed)
    other = CommandSubject(command=f"bash {agent}/run.sh --fast", sandbox=SandboxPolicy(expose=(agent,)))
    assert "parts.command_sha256" in identity_change(changed, identity_of(other))


def test_an_exposed_tree_too_large_to_digest_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "models"
    big.mkdir()
    for n in range(4):
        (big / f"w{n}.bin").write_bytes(b"x" * 10)
    subject = CommandSubject(command="true", sandbox=SandboxPolicy(expose=(big,)))
    monkeypatch.setattr(ident, "MAX_TREE_FILES", 3)
    with pytest.raises(SubjectError, match=r"--subject-expose tree 'models' holds more than 3 files") as caught:
        identity_of(subject)
    assert str(tmp_path) not in str(caught.value)
    monkeypatch.setattr(ident, "MAX_TREE_FILES", 10_000)
    monkeypatch.setattr(ident, "MAX_TREE_BYTES", 39)
    with pytest.raises(SubjectError, match="'models' holds more than 39 bytes"):
        identity_of(subject)
    # refused before the run folder exists: nothing ran
    with pytest.raises(SubjectError, match="models"):
        run_cases([make_toy_case()], subject, out=tmp_path / "runs", progress=False)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_link_in_an_exposed_tree_is_not_followed(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    secret = tmp_path / "host-only.txt"
    secret.write_text("one")
    (agent / "config").symlink_to(secret)
    subject = CommandSubject(command="true", sandbox=SandboxPolicy(expose=(agent,)))
    first = identity_of(subject)
    secret.write_text("two")  # the link's target is the host's, never digested through the link
    assert identity_of(subject) == first
    assert "host-only" not in json.dumps(first)


# --------------------------------------------------------------------------- the built-in kinds and others


def test_reference_nop_and_baseline_are_their_kind() -> None:
    for spec in ("reference", "nop", "baseline"):
        identity = identity_of(parse_subject(spec))
        assert identity["name"] == spec and identity["parts"]["kind"] == spec
        assert identity == identity_of(parse_subject(spec))
    assert identity_of(parse_subject("nop"))["code"] != identity_of(parse_subject("reference"))["code"]


def test_a_subject_object_of_no_kind_is_its_module(tmp_path: Path) -> None:
    class Plain:
        name = "plain"

        def __call__(self, session: Any) -> None:
            pass

    identity = identity_of(Plain())
    assert identity["parts"]["kind"] == "other" and identity["parts"]["file"]["name"] == "test_identity.py"


# --------------------------------------------------------------------------- resume


def test_resume_refuses_a_subject_whose_code_changed_since_the_run_started(
    solver: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, path = solver
    cases = [make_toy_case()]
    first = run_cases(cases, parse_subject(f"python:{name}:solve"), samples=2, out=tmp_path, progress=False)
    sample = first.run_dir / f"python-{name}.solve" / "toy" / "rectangle" / "sample-1" / "summary.json"
    sample.unlink()
    path.write_text(SOLVER.format(note="edited after the run started"))
    with pytest.raises(ex.ResumeError, match=r"the subject's code changed since the run started.*parts\.file\.digest"):
        ex.resume_run(first.run_dir, cases=cases, progress=False)
    assert not sample.exists()  # nothing ran
    assert cli.main(["run", "--resume", str(first.run_dir)]) == 2
    assert "the subject's code changed since the run started" in capsys.readouterr().err
    path.write_text(SOLVER.format(note="first"))  # the code the run started with: it resumes
    resumed = ex.resume_run(first.run_dir, cases=cases, progress=False)
    assert resumed.record.complete and sample.is_file()
    assert _identity(first.run_dir)["code"] == identity_of(parse_subject(f"python:{name}:solve"))["code"]


def test_resume_refuses_a_malformed_recorded_identity(tmp_path: Path) -> None:
    cases = [make_toy_case()]
    first = run_cases(cases, parse_subject("reference"), samples=1, out=tmp_path, progress=False)
    raw = json.loads((first.run_dir / "run.json").read_text())
    raw["extra"]["subject_identity"] = "sha256:abc"
    (first.run_dir / "run.json").write_text(json.dumps(raw))
    with pytest.raises(ex.ResumeError, match="field 'extra.subject_identity' is 'sha256:abc', expected an object"):
        ex.resume_run(first.run_dir, cases=cases, progress=False)


# --------------------------------------------------------------------------- --subject-name


def test_subject_name_names_the_folder_the_record_and_the_identity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = cli.main(["run", "-k", "count-nuclei", "--subject", "nop", "--subject-name", "my-floor_1",
                     "--out", str(out), "--quiet", "--no-report"])  # fmt: skip
    assert code == 1  # nop never passes
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    record = read_record(run_dir / "run.json", RunRecord)
    assert record.subject == "my-floor_1" and (run_dir / "my-floor_1").is_dir()
    assert record.extra["subject_identity"]["name"] == "my-floor_1"
    assert record.extra["subject_options"] == {"name": "my-floor_1"}
    assert read_receipt(run_dir / "receipt.json").subject["identity"]["name"] == "my-floor_1"
    summary = next((run_dir / "my-floor_1").rglob("sample-0/summary.json"))
    assert json.loads(summary.read_text())["subject"] == "my-floor_1"
    # a resume takes the name from run.json (giving it again without the subject is refused)
    summary.unlink()
    assert cli.main(["run", "--resume", str(run_dir), "--subject-name", "other", "--quiet"]) == 2
    assert "drop --subject-name" in capsys.readouterr().err
    assert cli.main(["run", "--resume", str(run_dir), "--quiet", "--no-report"]) == 1
    assert "kept 0 finished unit(s), ran 1" in capsys.readouterr().out and summary.is_file()


@pytest.mark.parametrize("bad", ["../up", "a/b", "", ".hidden", "trailing-", "x" * 65, "run.json", "sp ace", "ü"])
def test_a_bad_subject_name_is_refused_clearly(bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", "-k", "count-nuclei", "--subject", "nop", "--subject-name", bad, "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "--subject-name" in err and repr(bad) in err
    assert not list(tmp_path.iterdir())  # no run folder
    with pytest.raises(SubjectError, match="subject name"):
        parse_subject("nop", name=bad)


def test_the_name_travels_with_the_subject_options() -> None:
    named = parse_subject("reference", name="ref-a")
    assert named.name == "ref-a" and options_record(named) == {"name": "ref-a"}
    assert parse_subject("reference", **options_from_record(options_record(named))) == named
    with pytest.raises(ValueError, match="field 'name'"):
        options_from_record({"name": "../x"})
    command = CommandSubject(command="true", sandbox=SandboxPolicy(enabled=False)).named("agent-v2")
    record = options_record(command)
    assert record["name"] == "agent-v2" and "sandbox" in record
    rebuilt = options_from_record(record)
    assert rebuilt["name"] == "agent-v2" and rebuilt["sandbox"] == command.sandbox
    assert identity_of(command)["name"] == "agent-v2"


def test_a_named_subject_runs_on_dask_workers_under_its_name(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    subject = parse_subject("reference", name="ref-on-workers")
    result = run_cases([make_toy_case()], subject, out=tmp_path, progress=False, samples=2, workers=2)
    assert [s.status for s in result.samples["toy/rectangle"]] == ["ok", "ok"]
    assert {s.subject for s in result.samples["toy/rectangle"]} == {"ref-on-workers"}
    assert (result.run_dir / "ref-on-workers" / "toy" / "rectangle" / "sample-1" / "summary.json").is_file()


# --------------------------------------------------------------------------- compare


def test_compare_shows_both_identities(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_compare import Sloppy, pinned, suite_run, toy_cases

    from imagebench.subjects import ReferenceSubject
    from imagebench.suite.compare import compare_runs

    cases = toy_cases()
    manifest = pinned(cases)
    a = suite_run(tmp_path / "out", manifest, cases, ReferenceSubject())
    b = suite_run(tmp_path / "out", manifest, cases, Sloppy())
    result = compare_runs(a, b)
    assert result.a is not None and result.b is not None
    assert result.a.identity == _identity(a) and result.a.identity["name"] == "reference"
    assert result.b.identity == _identity(b) and result.b.identity["parts"]["file"]["name"] == "test_compare.py"
    cli.main(["compare", str(a), str(b)])
    text = capsys.readouterr().out
    assert f"code A: reference {result.a.identity['code'][:19]}" in text
    assert f"code B: sloppy {result.b.identity['code'][:19]}" in text


def test_a_python_subject_made_around_a_function_in_hand_is_that_functions_module() -> None:
    def solve(session: Any) -> None:
        pass

    identity = identity_of(PythonSubject(target="not_a_module_anywhere:solve", function=solve))
    assert identity["parts"]["file"]["name"] == "test_identity.py"
    assert identity["parts"]["defined"].startswith("test_identity:")
    # without the function in hand (isolated) there is nothing to digest: refused
    with pytest.raises(SubjectError, match="no module named 'not_a_module_anywhere'"):
        identity_of(PythonSubject(target="not_a_module_anywhere:solve", function=None, isolate=SandboxPolicy()))


def test_resume_refuses_a_command_whose_exposed_tree_changed(tmp_path: Path) -> None:
    from imagebench.sandbox.policy import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(str(unavailable_reason()))
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "run.sh").write_text("exit 0\n")
    subject = parse_subject(f"command:bash {agent}/run.sh", sandbox=SandboxPolicy(expose=(agent,)), name="agent-1")
    cases = [make_toy_case()]
    first = run_cases(cases, subject, samples=2, out=tmp_path / "runs", progress=False)
    assert _identity(first.run_dir)["parts"]["expose"][0]["name"] == "agent"
    summary = first.run_dir / "agent-1" / "toy" / "rectangle" / "sample-1" / "summary.json"
    summary.unlink()
    (agent / "run.sh").write_text("exit 1\n")
    with pytest.raises(ex.ResumeError, match=r"code changed since the run started.*parts\.expose\[0\]\.digest"):
        ex.resume_run(first.run_dir, cases=cases, subject=subject, progress=False)
    assert not summary.exists()


def test_a_single_file_module_is_identified_with_the_code_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module outside any package imports its neighbours as top-level modules: editing one is
    editing what the subject runs (a red-team pass changed ``rtsolvelib.py`` unseen)."""
    folder = tmp_path / "solver"
    folder.mkdir()
    (folder / "rtsolve_x.py").write_text("import rtsolvelib_x\n\ndef run(session):\n    rtsolvelib_x.go(session)\n")
    (folder / "rtsolvelib_x.py").write_text("def go(session):\n    pass\n")
    monkeypatch.syspath_prepend(str(folder))
    subject = PythonSubject(target="rtsolve_x:run", function=None, isolate=SandboxPolicy())
    first = identity_of(subject)
    assert first["parts"]["beside"]["files"] == 1
    (folder / "rtsolvelib_x.py").write_text("def go(session):\n    raise RuntimeError('edited')\n")
    changed = identity_of(subject)
    assert changed["code"] != first["code"] and identity_change(first, changed).startswith("parts.beside.digest:")
