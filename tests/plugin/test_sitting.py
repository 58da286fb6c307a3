"""One sitting at the panel, without Qt: one folder holding a run folder per subject and one report
over them, each run checked sample by sample, a sitting that was tampered with named, and the
sitting's folder and report as the panel opens them (issue 26, item 9)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import make_toy_case

from imagebench.executor import run_cases
from imagebench.records import RunRecord, read_record
from imagebench.report import read_sitting_page, sitting_view, write_html_report
from imagebench.runs.reader import read_run
from imagebench.runs.sitting import SITTING_RECORD, read_sitting, run_folders_under
from imagebench.subjects import ReferenceSubject
from imagebench.suite.compare import compare_runs
from napari_imagebench._folder_model import open_command
from napari_imagebench._model import INTERACTIVE, BenchModel, PanelError

TOY = "toy/rectangle"


def _solver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "sitting_solver_mod.py").write_text(
        "import numpy as np\n"
        "def solve(session):\n"
        "    m = np.asarray(session.namespace['image']) > 0.5\n"
        "    session.namespace['mask'] = m\n"
        "    session.namespace['area'] = 1\n"  # a wrong area: wrong-answer
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "python:sitting_solver_mod:solve"


def _sitting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BenchModel:
    """A sitting of three subjects on the toy case: the reference, a solver, and the person."""
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    loaded = model.load(TOY)
    for spec in ("reference", model.add_subject(_solver(tmp_path, monkeypatch))):
        job = model.prepare_run(spec)
        model.finish_run(job, job.work())
        model.score(spec)
    bright = loaded.session.namespace["image"] > 0.5
    model.score(INTERACTIVE, layers={"mask": bright}, console={"area": float(bright.sum())})
    return model


def test_one_sitting_holds_every_subject_and_one_report_over_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _sitting(tmp_path, monkeypatch)
    sitting = model.ledger.sitting_dir
    assert sitting is not None and sitting.parent == tmp_path / "out" and sitting.name.startswith("sitting-")
    assert [p.name for p in (tmp_path / "out").iterdir()] == [sitting.name]  # one folder for the whole sitting
    names = {name: f.path for name, f in model.run_folders.items()}
    assert set(names) == {"reference", "python-sitting_solver_mod.solve", "interactive"}
    assert {p.parent for p in names.values()} == {sitting}
    assert {r.run_dir for r in model.results} == set(names.values())
    # each subject's run is a run folder like any other: verified sample by sample, bound to its sitting
    for name, path in names.items():
        contents = read_run(path)
        assert contents.verified, contents.integrity
        assert contents.record.subject == name and contents.record.extra["sitting"].rpartition(".")[0] == sitting.name
    assert not any(p.name == "report.html" for p in sitting.glob("run-*/*"))  # one report, the sitting's
    read = read_sitting(sitting)
    assert read.verified, read.integrity
    assert list(read.runs) == ["reference", "python-sitting_solver_mod.solve", "interactive"]
    assert run_folders_under(tmp_path / "out") == sorted(names.values())

    # the page: every subject, each held as it truly was, each with its own cases and images
    view = sitting_view(read_sitting_page(sitting))
    rows = {s["subject"]: s for s in view["subjects"]}
    assert rows["interactive"]["sandbox"].startswith("none (a person at the viewer")
    assert rows["reference"]["sandbox"].startswith("in-process")
    assert rows["python-sitting_solver_mod.solve"]["sandbox"].startswith("in-process")
    assert {s["checked"] for s in view["subjects"]} == {"verified"}
    assert rows["python-sitting_solver_mod.solve"]["cases"] == "1 (1 failed, 0 passed)"
    page = write_html_report(sitting)
    assert page == sitting / "report.html"
    text = page.read_text()
    for name, path in names.items():
        assert f'data-subject="{name}"' in text and f"{path.name}/{name}/toy/rectangle/sample-0/" in text
    assert text.count("id=\"s1-results\"") == 1 and text.count("id=\"s3-results\"") == 1  # ids per subject


def test_compare_reads_a_sittings_runs_like_any_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _sitting(tmp_path, monkeypatch)
    panel_ref = model.run_folders["reference"].path
    headless = run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path / "headless", progress=False).run_dir
    result = compare_runs(headless, panel_ref)
    assert result.a is not None and result.b is not None and result.b.subject == "reference"
    assert not any("forged" in p or "cannot be verified" in p for p in result.problems), result.problems
    assert result.conditions, "compare checked its conditions"
    whole = compare_runs(headless, model.ledger.sitting_dir)
    assert whole.b is None and "a sitting, one run folder per subject" in whole.problems[0]
    assert panel_ref.name in whole.problems[0]


def test_a_sitting_that_was_tampered_with_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _sitting(tmp_path, monkeypatch)
    sitting = model.ledger.sitting_dir
    assert sitting is not None
    solver = model.run_folders["python-sitting_solver_mod.solve"].path
    # a wrong answer forged to ok: the run's own check names it, and so does the sitting
    summary = next(solver.rglob("sample-0/summary.json"))
    raw = json.loads(summary.read_text())
    raw["status"] = "ok"
    summary.write_text(json.dumps(raw))
    read = read_sitting(sitting)
    assert read.forged and any(p.startswith("python-sitting_solver_mod.solve: ") and "digest" in p for p in read.integrity)
    # the failing subject dropped from sitting.json, its folder left: named
    record = json.loads((sitting / SITTING_RECORD).read_text())
    record["runs"] = [r for r in record["runs"] if r["run"] != solver.name]
    (sitting / SITTING_RECORD).write_text(json.dumps(record))
    read = read_sitting(sitting)
    assert any("sitting.json does not list" in p for p in read.integrity), read.integrity
    assert "python-sitting_solver_mod.solve" not in read.runs
    # ... and its folder removed too: the sitting's signed journal still names it
    shutil.rmtree(solver)
    read = read_sitting(sitting)
    assert read.forged and any(solver.name in p and "does not list" in p for p in read.integrity)
    # a run moved in from another sitting: its signed run.json says where it belongs
    other = _sitting(tmp_path / "other", monkeypatch).run_folders["reference"].path
    moved = sitting / "run-20990101T000000Z"
    shutil.copytree(other, moved)
    record["runs"].append({"subject": "reference-2", "run": moved.name, "joined": "2026-01-01T00:00:00+00:00"})
    (sitting / SITTING_RECORD).write_text(json.dumps(record))
    problems = read_sitting(sitting).integrity
    assert any(f"run folder {moved.name} lies in the sitting, but its journal never signed it" == p for p in problems)
    assert any("belongs to sitting" in p for p in problems)


def test_the_sittings_folder_and_report_as_the_panel_opens_them(tmp_path: Path) -> None:
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    with pytest.raises(PanelError, match="score a sample first"):
        model.folders.folder()
    with pytest.raises(PanelError, match="score a sample first"):
        model.folders.report()
    loaded = model.load(TOY)
    bright = loaded.session.namespace["image"] > 0.5
    model.score(INTERACTIVE, layers={"mask": bright}, console={"area": float(bright.sum())})
    assert model.folders.folder() == model.ledger.sitting_dir
    report = model.folders.report()
    assert report == model.ledger.sitting_dir / "report.html" and "interactive" in report.read_text()
    model.folders.open_failed("the report", report, "xdg-open exited 3: no method available")
    last = model.messages[-1]
    assert last.level == "error" and str(report) in last.text and "xdg-open exited 3" in last.text
    # what the folder holds may show the loaded case's truth: the person's next sample says they saw it
    model.folders.handed_out()  # Open run folder, Open report or Copy path
    row = model.score(INTERACTIVE, layers={"mask": bright}, console={"area": float(bright.sum())})
    assert "saw-artifacts" in json.loads((row.sample_dir / "summary.json").read_text())["flags"]
    argv = open_command(report)
    assert argv is None or (Path(argv[0]).name == "xdg-open" and argv[1] == str(report))


def test_the_sittings_runs_record_how_each_subject_was_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _sitting(tmp_path, monkeypatch)
    person = read_record(model.run_folders["interactive"].path / "run.json", RunRecord)
    assert person.sandbox is None and "subject_identity" not in person.extra
    solver = read_record(model.run_folders["python-sitting_solver_mod.solve"].path / "run.json", RunRecord)
    assert solver.sandbox == "in-process" and solver.extra["subject_spec"] == "python:sitting_solver_mod:solve"
    assert solver.extra["subject_identity"]["name"] == "python-sitting_solver_mod.solve"
    assert solver.extra["execution"]["sandbox"] == "in-process" and solver.extra["execution"]["sealing"] == "public seeds"


def test_the_sittings_page_is_written_by_the_cli_and_every_image_loads_in_a_browser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import re
    import subprocess

    from imagebench.cli import main

    model = _sitting(tmp_path, monkeypatch)
    sitting = model.ledger.sitting_dir
    assert sitting is not None
    (sitting / "report.html").unlink()
    assert main(["report", str(sitting), "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == str(sitting / "report.html")
    text = (sitting / "report.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', text)
    assert len(images) >= 6 and all((sitting / src).is_file() for src in images)  # each subject's, by its run folder
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium binary on this machine")
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    url = (sitting / "report.html").as_uri()
    dom = subprocess.run([*argv, "--virtual-time-budget=5000", "--dump-dom", url], capture_output=True, text=True, timeout=90).stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None and 'data-images="loaded"' in body.group(0), body
    assert f'data-images-total="{len(images)}"' in body.group(0)
    shot = Path("/tmp/sitting-report.png")
    subprocess.run([*argv, "--window-size=1280,1400", f"--screenshot={shot}", url], capture_output=True, timeout=90, check=False)


def test_a_sitting_given_where_run_folders_are_asked_for_stands_for_each_of_its_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imagebench.runs.sitting import expand_sittings

    model = _sitting(tmp_path, monkeypatch)
    sitting = model.ledger.sitting_dir
    assert sitting is not None
    runs = sorted(folder.path for folder in model.run_folders.values())
    plain = tmp_path / "run-20990101T000000Z"  # a run folder given as it is stays as it is
    assert expand_sittings([sitting, plain]) == [*runs, plain]
    # a run dropped from sitting.json still counts where it lies (coverage never loses a failure)
    record = json.loads((sitting / SITTING_RECORD).read_text())
    record["runs"] = record["runs"][:1]
    (sitting / SITTING_RECORD).write_text(json.dumps(record))
    assert expand_sittings([sitting]) == runs


def test_the_reader_opens_a_sitting_as_one_review_and_names_what_does_not_check_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from napari_imagebench._reader import napari_get_reader, sitting_layers

    model = _sitting(tmp_path, monkeypatch)
    sitting = model.ledger.sitting_dir
    assert sitting is not None
    assert napari_get_reader(str(sitting / SITTING_RECORD)) is sitting_layers
    assert napari_get_reader(str(sitting)) is sitting_layers  # the folder itself, as a script passes it
    names = [kw["name"] for _, kw, _ in sitting_layers(str(sitting / SITTING_RECORD))]
    subjects = {name.split(" · ")[0] for name in names}
    assert subjects == set(model.run_folders) and all(" s1 [" in name for name in names)
    # a sample forged after its run is named and not shown; the others still are
    summary = next(model.run_folders["reference"].path.rglob("sample-0/summary.json"))
    raw = json.loads(summary.read_text())
    raw["reason"] = "forged"
    summary.write_text(json.dumps(raw))
    with pytest.warns(UserWarning, match="not shown"):
        names = [kw["name"] for _, kw, _ in sitting_layers(str(sitting))]
    assert not any(name.startswith("reference · ") for name in names) and names
    # somebody else's sitting.json is declined
    foreign = tmp_path / "elsewhere"
    foreign.mkdir()
    (foreign / SITTING_RECORD).write_text('{"chairs": 4}')
    assert napari_get_reader(str(foreign / SITTING_RECORD)) is None
