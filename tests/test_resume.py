"""Resumable runs: the journal, the lock, and a run killed with SIGKILL then resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import make_toy_case

from imagebench import cli
from imagebench import executor as ex
from imagebench.executor import run_cases
from imagebench.records import CaseSummary, RunRecord, SampleSummary, read_record
from imagebench.runs.journal import (
    JOURNAL_NAME,
    Journal,
    JournalError,
    RunLock,
    RunLocked,
    read_journal,
)
from imagebench.runs.reader import read_run
from imagebench.runs.verdict import RunResult
from imagebench.subjects import ReferenceSubject, parse_subject

# Fast built-in cases whose verifiers write PNGs: a resumed run must match them byte for byte.
CASES = ("segment-nuclei/empty-field", "calibrated-measurements/anisotropic-volumes", "flatfield/vignetted-field")
SAMPLES = 3
SLOW_SUBJECT = '''
import os
import time

from imagebench import cases


def solve(session):
    """The case's own reference solution, after a pause (IMAGEBENCH_TEST_DELAY seconds)."""
    time.sleep(float(os.environ.get("IMAGEBENCH_TEST_DELAY", "0")))
    cases.get_case(session.label).reference(session)
'''


def _unit_files(run_dir: Path) -> dict[str, bytes]:
    """Everything a run left below its subject folder (summaries, PNGs), by relative path."""
    return {
        p.relative_to(run_dir).as_posix(): p.read_bytes()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and len(p.relative_to(run_dir).parts) > 1
    }


def _comparable(rel: str, data: bytes) -> Any:
    if not rel.endswith("summary.json"):
        return data
    raw = json.loads(data)
    raw.pop("times", None)
    if isinstance(raw.get("usage"), dict):
        raw["usage"].pop("wall_s", None)  # a measured time, like ``times``
    if isinstance(raw.get("extra"), dict):
        raw["extra"].pop("build_s", None)
    return raw


def assert_same_folders(a: Path, b: Path) -> None:
    fa, fb = _unit_files(a), _unit_files(b)
    assert sorted(fa) == sorted(fb), "the two runs left different files"
    for rel in fa:
        assert _comparable(rel, fa[rel]) == _comparable(rel, fb[rel]), rel


def _journal_units(run_dir: Path) -> list[tuple[str, int]]:
    return [(e.label, e.sample) for e in read_journal(run_dir / JOURNAL_NAME) if e.event == "unit"]  # type: ignore[misc]


# --------------------------------------------------------------------------- SIGKILL, then --resume


def test_sigkill_mid_run_then_resume_matches_an_uninterrupted_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "slow_reference.py").write_text(SLOW_SUBJECT)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    spec = "python:slow_reference:solve"
    from imagebench import cases as builtin

    chosen = [c for c in builtin.all_cases() if c.label in CASES]
    total = len(chosen) * SAMPLES
    monkeypatch.setenv("IMAGEBENCH_TEST_DELAY", "0")
    clean = run_cases(chosen, parse_subject(spec), samples=SAMPLES, out=tmp_path / "clean", progress=False)
    assert all(s.status == "ok" for ss in clean.samples.values() for s in ss)

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "mods"), os.environ.get("PYTHONPATH", "")])}
    env["IMAGEBENCH_TEST_DELAY"] = "0.4"
    out = tmp_path / "killed"
    argv = [sys.executable, "-m", "imagebench", "run", "--subject", spec, "--samples", str(SAMPLES), "--out", str(out)]
    argv += [arg for label in CASES for arg in ("-k", label)] + ["--quiet", "--no-report"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        run_dir: Path | None = None
        while time.monotonic() < deadline:
            found = list(out.glob("run-*/" + JOURNAL_NAME))
            if found and len(_journal_units(found[0].parent)) >= 3:
                run_dir = found[0].parent
                break
            assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read()!r}"  # type: ignore[union-attr]
            time.sleep(0.05)
        assert run_dir is not None, "the run never finished three units"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    killed_at = _journal_units(run_dir)
    assert 3 <= len(killed_at) < total, "the kill did not land mid-run"
    record = read_record(run_dir / "run.json", RunRecord)
    assert not record.complete and record.finished is None

    resumed = subprocess.run(
        [sys.executable, "-m", "imagebench", "run", "--resume", str(run_dir), "--quiet"],
        env={**env, "IMAGEBENCH_TEST_DELAY": "0"},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    import re

    said = re.search(r"kept (\d+) finished unit\(s\), ran (\d+)", resumed.stdout)
    assert said, resumed.stdout
    kept, ran = int(said.group(1)), int(said.group(2))
    # a kill between a summary and its journal line leaves one more complete unit than the journal shows
    assert kept + ran == total and kept >= len(killed_at)

    assert_same_folders(clean.run_dir, run_dir)
    units = _journal_units(run_dir)
    assert len(units) == len(set(units)) == total, "a unit was journaled twice or not at all"
    assert set(killed_at) <= set(units)
    record = read_record(run_dir / "run.json", RunRecord)
    assert record.complete and record.counts == {"ok": total}
    assert record.extra["resumes"][-1]["kept"] >= len(killed_at)
    assert not [p for p in run_dir.rglob(".*") if p.name != ".lock"], "a temporary file was left behind"
    assert (run_dir / "report.html").is_file()


# --------------------------------------------------------------------------- what a resume keeps and what it throws away


def _toy_run(tmp_path: Path, samples: int = 3) -> tuple[list[Any], RunResult]:
    cases = [make_toy_case("rectangle"), make_toy_case("second", seed=1)]
    return cases, run_cases(cases, ReferenceSubject(), samples=samples, out=tmp_path, progress=False)


def test_resume_reruns_exactly_the_units_it_cannot_keep(tmp_path: Path) -> None:
    cases, first = _toy_run(tmp_path / "a")
    _, clean = _toy_run(tmp_path / "b")
    run = first.run_dir
    sample = run / "reference" / "toy" / "rectangle"
    (sample / "sample-0" / "summary.json").unlink()  # missing
    (sample / "sample-1" / "summary.json").write_text('{"schema_version": 1, "label": "toy/rect')  # half a file
    tampered = json.loads((sample / "sample-2" / "summary.json").read_text())
    tampered["reason"] = "edited by hand"
    (sample / "sample-2" / "summary.json").write_text(json.dumps(tampered))  # valid, but not what was journaled
    (sample / "sample-0" / "mask.png").write_bytes(b"not a png")  # a leftover of the lost attempt
    (run / "reference" / "toy" / "second" / ".summary.json.abc123.tmp").write_text("{")  # an interrupted write
    other = run / "reference" / "toy" / "second" / "sample-0" / "summary.json"
    moved = json.loads(other.read_text())
    moved["sample"] = 7
    other.write_text(json.dumps(moved))  # a summary of another sample
    with open(run / JOURNAL_NAME, "ab") as fh:
        fh.write(b'{"schema_version":1,"event":"unit","ti')  # a torn last line

    seen: list[SampleSummary] = []
    resumed = ex.resume_run(run, cases=cases, progress=False, on_sample=seen.append)
    rerun = sorted((s.label, s.sample) for s in seen)
    assert rerun == [("toy/rectangle", 0), ("toy/rectangle", 1), ("toy/rectangle", 2), ("toy/second", 0)]
    note = resumed.record.extra["resumes"][-1]
    assert note["kept"] == 2 and note["run"] == 4
    assert "digest mismatch" in note["discarded"]["toy/rectangle#2"]
    assert "not valid JSON" in note["discarded"]["toy/rectangle#1"]
    assert "sample is 7, expected 0" in note["discarded"]["toy/second#0"]
    assert note["discarded"]["toy/rectangle#0"] == "missing"  # journaled, then gone: said, not hidden
    assert_same_folders(clean.run_dir, run)
    # the folder checks out again, and says which samples a resume ran again
    contents = read_run(run)
    assert not contents.forged and len(contents.reruns) == 4
    units = _journal_units(run)
    assert len(units) == 6 + 4  # the first pass's six lines, then one per re-run unit
    assert not list(run.rglob(".*.tmp"))
    cs = read_record(run / "reference" / "toy" / "rectangle" / "summary.json", CaseSummary)
    assert cs.samples == 3 and cs.counts == {"ok": 3}


def test_a_summary_whose_journal_line_was_cut_off_is_run_again(tmp_path: Path) -> None:
    """Killed between a summary and its journal line: the journal never vouched for that summary, so
    the resume runs the unit again rather than sign what it finds (it could have been put there)."""
    from helpers import resign_run

    cases, first = _toy_run(tmp_path, samples=2)
    record = json.loads((first.run_dir / "run.json").read_text())
    record["complete"] = False
    (first.run_dir / "run.json").write_text(json.dumps(record))
    resign_run(first.run_dir, unjournal={("toy/second", 1)})  # the state a kill at that moment leaves
    assert (first.run_dir / "reference" / "toy" / "second" / "sample-1" / "summary.json").is_file()
    assert not read_run(first.run_dir).forged
    seen: list[SampleSummary] = []
    resumed = ex.resume_run(first.run_dir, cases=cases, progress=False, on_sample=seen.append)
    assert [(s.label, s.sample) for s in seen] == [("toy/second", 1)] and resumed.record.complete
    units = _journal_units(first.run_dir)
    assert sorted(units) == sorted(set(units)) and ("toy/second", 1) in units


def test_resuming_a_complete_run_runs_nothing(tmp_path: Path) -> None:
    cases, first = _toy_run(tmp_path, samples=2)
    before = _unit_files(first.run_dir)
    seen: list[SampleSummary] = []
    resumed = ex.resume_run(first.run_dir, cases=cases, progress=False, on_sample=seen.append)
    assert seen == [] and resumed.passed and resumed.record.extra["resumes"][-1]["run"] == 0
    after = _unit_files(first.run_dir)
    assert {k: _comparable(k, v) for k, v in before.items()} == {k: _comparable(k, v) for k, v in after.items()}


# --------------------------------------------------------------------------- refusals


def test_resume_refuses_a_locked_or_foreign_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases, first = _toy_run(tmp_path / "runs", samples=1)
    with RunLock(first.run_dir), pytest.raises(RunLocked, match=f"pid {os.getpid()}"):
        ex.resume_run(first.run_dir, cases=cases, progress=False)
    with pytest.raises(ex.ResumeError, match="not a folder"):
        ex.resume_run(tmp_path / "nowhere", cases=cases)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ex.ResumeError, match="run.json: file is missing"):
        ex.resume_run(empty, cases=cases)
    with pytest.raises(ex.ResumeError, match=r"the subject given \('nop', no sandbox options\) is not the run's \('reference'"):
        ex.resume_run(first.run_dir, cases=cases, subject=parse_subject("nop"))
    with pytest.raises(ex.ResumeError, match="do not hold"):
        ex.resume_run(first.run_dir, cases=cases[:1])
    # a subject with no spec string: run.json cannot say how to rebuild it
    record = json.loads((first.run_dir / "run.json").read_text())
    del record["extra"]["subject_spec"]
    (first.run_dir / "run.json").write_text(json.dumps(record))
    with pytest.raises(ex.ResumeError, match="extra.subject_spec"):
        ex.resume_run(first.run_dir, cases=cases)
    # the CLI: labels run.json names that no registry holds; flags that clash with run.json
    assert cli.main(["run", "--resume", str(first.run_dir)]) == 2
    assert "subject_spec" in capsys.readouterr().err
    assert cli.main(["run", "--resume", str(first.run_dir), "-k", "toy", "--samples", "3"]) == 2
    assert "drop -k, --samples" in capsys.readouterr().err
    assert cli.main(["run", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_resume_from_the_cli_resolves_builtin_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "-k", "count-nuclei", "--samples", "2", "--out", str(tmp_path), "--quiet"]) == 0
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    (run_dir / "reference" / "segment-nuclei" / "count-nuclei" / "sample-1" / "summary.json").unlink()
    assert cli.main(["run", "--resume", str(run_dir), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "kept 1 finished unit(s), ran 1" in text and "1 passed" in text


# --------------------------------------------------------------------------- the journal itself


def test_journal_lines_torn_tails_and_bad_lines(tmp_path: Path) -> None:
    with Journal.open(tmp_path) as journal:
        journal.append("start", detail={"run_id": "x"})
    path = tmp_path / JOURNAL_NAME
    with open(path, "ab") as fh:
        fh.write(b'{"schema_version":1,"event":"unit","lab')
    assert [e.event for e in read_journal(path)] == ["start"]  # the torn tail is not a line
    with Journal.open(tmp_path) as journal:  # reopening cuts it off before appending
        journal.append("end", detail={"complete": True})
    assert [e.event for e in read_journal(path)] == ["start", "end"]
    assert path.read_bytes().endswith(b"\n") and path.read_bytes().count(b"\n") == 2
    path.write_bytes(b'{"schema_version":1,"event":"start","time":"t"}\nnot json\n{"schema_version":1,"event":"end","time":"t"}\n')
    with pytest.raises(JournalError, match="line 2"):
        read_journal(path)
    path.write_bytes(b'{"schema_version":4,"event":"start","time":"t"}\n')
    with pytest.raises(JournalError, match="schema_version"):
        read_journal(path)
