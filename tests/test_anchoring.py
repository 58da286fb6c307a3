"""What the run journal anchors beyond the sample summaries: each case's ``summary.json`` (its check
across samples can turn a pass into a fail) and every artifact beside a sample's summary (the PNGs
and ``.npy`` values a person looks at). Found by a red-team run: editing a rerun-class case's
``extra.consistency`` or deleting its summary flipped fail to pass, and a wrong answer's ``truth``
copied over its ``mask`` showed as the subject's, each in a folder still called verified."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import ToyAcrossThree, make_toy_case, resign_run

from imagebench import cli
from imagebench.executor import resume_run, run_cases
from imagebench.records import SCHEMA_VERSION, RunRecord, read_record
from imagebench.report import read_page
from imagebench.runs.journal import JOURNAL_NAME, Journal, JournalEntry, read_journal
from imagebench.runs.layout import artifact_digests, artifacts_problem
from imagebench.runs.reader import read_run
from imagebench.runs.verdict import checked_verdict
from imagebench.subjects import NopSubject, ReferenceSubject
from imagebench.suite.compare import compare_runs

TOY = "toy/rectangle"


def _rerun_run(tmp_path: Path) -> Path:
    """A reference run of a case judged across samples: its one sample passes, the case fails."""
    result = run_cases([make_toy_case(verify=ToyAcrossThree())], ReferenceSubject(), out=tmp_path / "out", progress=False)
    assert result.verdicts == {TOY: "fail"} and read_run(result.run_dir).verified
    return result.run_dir


def _case_summary(run: Path) -> Path:
    return run / "reference" / "toy" / "rectangle" / "summary.json"


def _verdict(run: Path) -> str:
    contents = read_run(run)
    return checked_verdict(contents.samples(TOY), contents.case_summaries.get(TOY))


# --------------------------------------------------------------------------- case summaries


def test_each_case_summary_is_journaled_with_its_digest(tmp_path: Path) -> None:
    run = _rerun_run(tmp_path)
    lines = [e for e in read_journal(run / JOURNAL_NAME) if e.event == "case"]
    assert [(e.label, e.summary) for e in lines] == [(TOY, "reference/toy/rectangle/summary.json")]
    assert lines[0].sha256 == hashlib.sha256(_case_summary(run).read_bytes()).hexdigest()
    assert lines[0].detail == {"verdict": "fail", "samples": 1}
    kinds = [e.event for e in read_journal(run / JOURNAL_NAME)]
    assert kinds == ["start", "unit", "case", "end"]  # after its samples, before the pass ends


@pytest.mark.parametrize("forgery", ["consistent", "deleted"])
def test_a_case_summary_changed_or_deleted_after_the_run_is_forged(tmp_path: Path, forgery: str) -> None:
    run = _rerun_run(tmp_path)
    summary = _case_summary(run)
    if forgery == "consistent":
        raw = json.loads(summary.read_text())
        raw["extra"]["consistency"]["consistent"] = True
        raw["extra"]["verdict"] = "pass"
        summary.write_text(json.dumps(raw))
        named = "changed after it was journaled (digest mismatch)"
    else:
        summary.unlink()
        named = "but summary.json is missing"
    contents = read_run(run)
    assert contents.forged and not contents.verified
    assert any(p.startswith(f"{TOY}: the journal (line 3) vouches for its case summary (fail), but") for p in contents.integrity)
    assert any(named in p for p in contents.integrity), contents.integrity
    assert TOY not in contents.case_summaries and TOY in contents.case_forged  # never believed
    assert cli.main(["report", str(run), "--quiet"]) == 1  # the page names it, the exit code too
    assert 'data-forged="yes"' in (run / "report.html").read_text()
    page = read_page(run)
    assert page.contents is not None and page.contents.forged
    honest = run_cases([make_toy_case(verify=ToyAcrossThree())], ReferenceSubject(), out=tmp_path / "b", progress=False)
    compared = compare_runs(honest.run_dir, run)
    assert not compared.comparable and any("is forged" in p and named in p for p in compared.problems)


def test_a_resume_writes_a_forged_case_summary_again_and_says_so(tmp_path: Path) -> None:
    run = _rerun_run(tmp_path)
    summary = _case_summary(run)
    raw = json.loads(summary.read_text())
    raw["extra"]["consistency"]["consistent"] = True
    summary.write_text(json.dumps(raw))
    result = resume_run(run, cases=[make_toy_case(verify=ToyAcrossThree())], progress=False)
    assert result.verdicts == {TOY: "fail"}
    contents = read_run(run)
    assert contents.verified, contents.integrity
    assert contents.case_summaries[TOY].extra["consistency"]["consistent"] is False and _verdict(run) == "fail"
    resume = next(e for e in read_journal(run / JOURNAL_NAME) if e.event == "resume")
    assert resume.detail is not None and "digest mismatch" in resume.detail["case_summaries"][TOY]
    record = read_record(run / "run.json", RunRecord)
    assert "digest mismatch" in record.extra["resumes"][-1]["case_summaries"][TOY]


def _sign_again(run: Path, *, version: int, case_lines: bool, end: bool = True) -> None:
    """The journal signed again (by this test, which holds the key) as a harness of journal
    ``version`` would have written it, with or without its case lines (and its end line)."""
    from imagebench.runs.journal import ANCHORS_DIR
    from imagebench.runs.receipt import anchor_receipt
    from imagebench.state import state_root

    path = run / JOURNAL_NAME
    entries = [JournalEntry.model_validate_json(line) for line in path.read_bytes().splitlines()]
    for old in (state_root() / ANCHORS_DIR).glob(f"{run.name}-*.json"):
        old.unlink()
    path.unlink()
    with Journal.open(run) as journal:
        for entry in entries:
            if (entry.event == "case" and not case_lines) or (entry.event == "end" and not end):
                continue
            fields = entry.model_dump(exclude={"schema_version", "event", "time", "pid", "key", "mac"}, exclude_none=True)
            journal.append(entry.event, schema_version=version, **fields)
        anchor_receipt(run, journal.anchor())


def test_a_folder_from_before_case_lines_is_read_as_before(tmp_path: Path) -> None:
    run = _rerun_run(tmp_path)
    _sign_again(run, version=1, case_lines=False)  # a journal written before case summaries were journaled
    contents = read_run(run)
    assert contents.verified, contents.integrity
    assert contents.case_summaries[TOY].extra["consistency"]["consistent"] is False and _verdict(run) == "fail"
    # a journal of this version lacking them is forged: its harness journals every case summary
    _sign_again(run, version=2, case_lines=False)
    contents = read_run(run)
    assert contents.forged and TOY not in contents.case_summaries
    assert any("its case summary was never journaled (the run ended complete)" in p for p in contents.integrity)
    _case_summary(run).unlink()
    assert any("summary.json is missing: its case summary was never journaled" in p for p in read_run(run).integrity)


def test_a_run_cut_off_before_its_case_summary_was_journaled_is_not_forged(tmp_path: Path) -> None:
    """A kill between a case's summary and its journal line (or before the summary): the summary is
    left out, not believed, and the folder is not called forged; a resume journals it."""
    run = _rerun_run(tmp_path)
    assert [e.event for e in read_journal(run / JOURNAL_NAME)] == ["start", "unit", "case", "end"]
    raw = json.loads((run / "run.json").read_text())
    raw["complete"] = False  # killed: the pass never closed run.json, nor ended its journal
    (run / "run.json").write_text(json.dumps(raw))
    _sign_again(run, version=2, case_lines=False, end=False)
    contents = read_run(run)
    assert not contents.forged and TOY not in contents.case_summaries, contents.integrity
    assert any("never journaled" in p for p in contents.case_problems[TOY])
    resume_run(run, cases=[make_toy_case(verify=ToyAcrossThree())], progress=False)
    contents = read_run(run)
    assert contents.verified and contents.case_summaries[TOY].extra["verdict"] == "fail", contents.integrity


# --------------------------------------------------------------------------- artifacts


def _empty_mask(session: Any) -> None:
    """A wrong answer: an empty mask (so its ``mask`` artifacts differ from its ``truth``)."""
    import numpy as np

    session.namespace["mask"] = np.zeros(np.asarray(session.namespace["image"]).shape, bool)
    session.namespace["area"] = 3


def _wrong_case() -> Any:
    return make_toy_case(reference=_empty_mask)


def _reference_run(tmp_path: Path) -> Path:
    result = run_cases([_wrong_case()], ReferenceSubject(), out=tmp_path / "out", progress=False)
    assert result.verdicts == {TOY: "fail"}
    return result.run_dir


def _sample(run: Path) -> Path:
    return run / "reference" / "toy" / "rectangle" / "sample-0"


def test_a_sample_summary_records_every_file_beside_it(tmp_path: Path) -> None:
    sample = _sample(_reference_run(tmp_path))
    raw = json.loads((sample / "summary.json").read_text())
    assert raw["schema_version"] == SCHEMA_VERSION == 8
    assert raw["artifacts"] == ["mask.png", "truth.png"]
    digests = raw["artifact_digests"]
    assert sorted(digests) == ["mask.npy", "mask.png", "truth.npy", "truth.png"]
    for name, want in digests.items():
        assert hashlib.sha256((sample / name).read_bytes()).hexdigest() == want
    nop = run_cases([_wrong_case()], NopSubject(), out=tmp_path / "nop", progress=False).run_dir
    assert json.loads((nop / "nop/toy/rectangle/sample-0/summary.json").read_text())["artifact_digests"] == {}


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        ("truth over mask", "mask.npy changed after the run (digest mismatch); mask.png changed after the run"),
        ("npy removed", "mask.npy is missing"),
        ("npy planted", "extra.npy was put beside it after the run"),
        ("png linked", "mask.png is no longer a regular file"),
    ],
)
def test_an_artifact_changed_removed_or_added_after_the_run_is_forged(tmp_path: Path, tamper: str, named: str) -> None:
    run = _reference_run(tmp_path)
    sample = _sample(run)
    if tamper == "truth over mask":
        for ext in (".png", ".npy"):
            shutil.copyfile(sample / f"truth{ext}", sample / f"mask{ext}")
    elif tamper == "npy removed":
        (sample / "mask.npy").unlink()
    elif tamper == "npy planted":
        shutil.copyfile(sample / "truth.npy", sample / "extra.npy")
    else:
        (sample / "mask.png").unlink()
        (sample / "mask.png").symlink_to(sample / "truth.png")
    contents = read_run(run)
    (entry,) = contents.entries(TOY)
    assert not entry.usable and entry.problem.startswith("its artifacts are not what its summary recorded: ")
    assert named in entry.problem, entry.problem
    vouched = f"{TOY}#0: the journal (line 2) vouches for a wrong-answer summary, but its artifacts"
    assert contents.forged and any(p.startswith(vouched) for p in contents.integrity), contents.integrity
    assert contents.samples(TOY) == []
    assert cli.main(["report", str(run), "--quiet"]) == 1


def test_a_resume_runs_a_sample_with_a_changed_artifact_again(tmp_path: Path) -> None:
    run = _reference_run(tmp_path)
    sample = _sample(run)
    shutil.copyfile(sample / "truth.png", sample / "mask.png")
    resume_run(run, cases=[_wrong_case()], progress=False)
    contents = read_run(run)
    assert contents.verified, contents.integrity
    assert "mask.png changed" in read_record(run / "run.json", RunRecord).extra["resumes"][-1]["discarded"][f"{TOY}#0"]
    assert contents.reruns and contents.entries(TOY)[0].usable


def test_older_sample_summaries_without_digests_are_read_as_before(tmp_path: Path) -> None:
    run = _reference_run(tmp_path)
    path = _sample(run) / "summary.json"
    raw = json.loads(path.read_text())
    raw.pop("artifact_digests")
    raw["schema_version"] = 5  # as a version-5 harness wrote it
    path.write_text(json.dumps(raw))
    resign_run(run)
    assert read_run(run).verified
    raw["schema_version"] = 6  # but a version-6 summary without them is not believed
    path.write_text(json.dumps(raw))
    resign_run(run)
    (entry,) = read_run(run).entries(TOY)
    assert not entry.usable and "records no artifact digests" in entry.problem


def test_artifact_digests_cover_the_folders_files_only(tmp_path: Path) -> None:
    folder = tmp_path / "sample-0"
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / "kept.txt").write_text("a kept workspace is not covered")
    (folder / "summary.json").write_text("{}")
    (folder / ".mask.png.tmp.png").write_bytes(b"a temporary")
    (folder / "stdout.txt").write_text("out\n")
    (folder / "stderr.txt").write_text("")
    digests = artifact_digests(folder)
    assert digests == {
        "stderr.txt": hashlib.sha256(b"").hexdigest(),
        "stdout.txt": hashlib.sha256(b"out\n").hexdigest(),
    }
    assert artifacts_problem(folder, digests) == ""
    (folder / "stdout.txt").write_text("OUT\n")
    (folder / "stderr.txt").unlink()
    assert artifacts_problem(folder, digests) == (
        "its artifacts are not what its summary recorded: stderr.txt is missing; stdout.txt changed after the run "
        "(digest mismatch)"
    )
    assert artifact_digests(tmp_path / "absent") == {}


def test_a_digest_remembered_by_this_process_never_hides_a_later_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading a run twice in one process hashes each settled artifact once, keyed by its inode,
    size, mtime and ctime: a change in place (same size, its mtime set back) still changes its
    ctime, so it is caught on the next read."""
    import os
    import time

    from imagebench.runs import layout

    monkeypatch.setattr(layout, "_DIGESTS", {})
    monkeypatch.setattr(layout, "_SETTLED_NS", -1)  # remember even a file written just now
    run = _reference_run(tmp_path)
    mask = _sample(run) / "mask.npy"
    assert read_run(run).verified and len(layout._DIGESTS) == 4  # the sample's four artifacts
    assert read_run(run).verified and len(layout._DIGESTS) == 4  # the second read hashes nothing new
    before = mask.stat()
    time.sleep(0.05)
    data = bytearray(mask.read_bytes())
    data[-1] ^= 0xFF
    with open(mask, "r+b") as fh:  # in place: the same inode and size
        fh.write(data)
    os.utime(mask, ns=(before.st_atime_ns, before.st_mtime_ns))  # and its mtime set back
    (entry,) = read_run(run).entries(TOY)
    assert not entry.usable and "mask.npy changed after the run (digest mismatch)" in entry.problem
