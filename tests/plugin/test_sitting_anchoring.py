"""A panel's sitting anchored whole, without Qt: a case summary and a sample's artifacts changed after
the panel wrote them are named (in the run, the sitting, the report's exit code and the Compare
tab), and so is what ``sitting.json`` says of the sitting itself (its start, source, each run's
joining time, a run listed twice) against the sitting's signed journal. Found by a red-team run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import ToyAcrossThree, make_toy_case

from imagebench.cli import main
from imagebench.report import read_sitting_page, sitting_view
from imagebench.runs.reader import read_run
from imagebench.runs.sitting import SITTING_RECORD, read_sitting
from napari_imagebench._compare_model import CompareModel
from napari_imagebench._model import INTERACTIVE, BenchModel

TOY = "toy/rectangle"


def _verdicts(sitting: Path) -> dict[str, str]:
    page = read_sitting_page(sitting)
    return {f"{subject}:{v.label}": v.verdict for subject, run in page.runs for v in run.cases}


def _empty_mask(model: BenchModel) -> Any:
    image = np.asarray(model.loaded.session.namespace["image"])  # type: ignore[union-attr]
    return model.score(INTERACTIVE, console={"mask": np.zeros(image.shape, bool), "area": 3})


@pytest.mark.parametrize("forgery", ["consistency edited", "case summary deleted"])
def test_a_case_summary_changed_in_a_sitting_is_named(tmp_path: Path, forgery: str) -> None:
    model = BenchModel(cases=lambda: [make_toy_case(verify=ToyAcrossThree())], outcome_root=tmp_path / "out")
    model.load(TOY)
    job = model.prepare_run("reference")
    model.finish_run(job, job.work())
    row = model.score("reference")  # the sample passes; one sample of three: the case fails
    sitting = model.ledger.sitting_dir
    assert sitting is not None and read_sitting(sitting).verified
    assert _verdicts(sitting) == {f"reference:{TOY}": "fail"}

    summary = row.run_dir / "reference" / "toy" / "rectangle" / "summary.json"
    if forgery == "consistency edited":
        raw = json.loads(summary.read_text())
        raw["extra"]["consistency"]["consistent"] = True
        summary.write_text(json.dumps(raw))
    else:
        summary.unlink()
    contents = read_sitting(sitting)
    assert contents.forged
    vouched = f"reference: {TOY}: the journal (line "
    assert any(p.startswith(vouched) and "vouches for its case summary" in p for p in contents.integrity)
    assert read_run(row.run_dir).forged
    assert main(["report", str(sitting), "--quiet"]) == 1
    assert main(["report", str(row.run_dir), "--quiet"]) == 1


def test_an_artifact_replaced_in_a_sitting_is_named_and_never_compared(tmp_path: Path) -> None:
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    model.load(TOY)
    job = model.prepare_run("reference")
    model.finish_run(job, job.work())
    reference = model.score("reference")
    mine = _empty_mask(model)
    assert mine.status == "wrong-answer"
    compare = CompareModel()
    assert compare.set_run("A", reference.run_dir) is not None and compare.set_run("B", mine.run_dir) is not None
    assert "mask: identical in A and B" not in compare.side_by_side(TOY, 0).notes  # honest: they differ

    for ext in (".png", ".npy"):  # the person's empty mask would draw as the true rectangle
        shutil.copyfile(mine.sample_dir / f"truth{ext}", mine.sample_dir / f"mask{ext}")
    run = read_run(mine.run_dir)
    (entry,) = run.entries(TOY)
    assert not entry.usable and "mask.npy changed after the run" in entry.problem and "mask.png changed" in entry.problem
    assert run.forged
    sitting = model.ledger.sitting_dir
    assert sitting is not None
    read = read_sitting(sitting)
    assert read.forged and any(p.startswith(f"interactive: {TOY}#0: the journal") for p in read.integrity)
    compare = CompareModel()
    assert compare.set_run("A", reference.run_dir) is not None
    assert compare.set_run("B", mine.run_dir) is None  # a forged run folder is never laid side by side


def _sitting(tmp_path: Path) -> Path:
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    model.load(TOY)
    _empty_mask(model)
    assert model.ledger.sitting_dir is not None and read_sitting(model.ledger.sitting_dir).verified
    return model.ledger.sitting_dir


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("started", "1999-01-01T00:00:00+00:00", "sitting.json's started is '1999-01-01T00:00:00+00:00'"),
        ("source", "imagebench run --suite pinned", "sitting.json's source is 'imagebench run --suite pinned'"),
        ("joined", "1999-01-01T00:00:01+00:00", "joined at 1999-01-01T00:00:01+00:00, the sitting's journal signed"),
    ],
)
def test_what_sitting_json_says_of_the_sitting_is_held_to_its_journal(
    tmp_path: Path, field: str, value: str, named: str
) -> None:
    sitting = _sitting(tmp_path)
    raw = json.loads((sitting / SITTING_RECORD).read_text())
    if field == "joined":
        for run in raw["runs"]:
            run["joined"] = value
    else:
        raw[field] = value
    (sitting / SITTING_RECORD).write_text(json.dumps(raw))
    rows = dict(sitting_view(read_sitting_page(sitting))["sitting"]["rows"])
    assert field == "joined" or rows[field] == value  # the page prints what sitting.json says ...
    read = read_sitting(sitting)
    assert read.forged and any(named in p for p in read.integrity), read.integrity  # ... and names it
    assert main(["report", str(sitting), "--quiet"]) == 1


def test_a_run_listed_twice_in_sitting_json_is_named(tmp_path: Path) -> None:
    sitting = _sitting(tmp_path)
    raw = json.loads((sitting / SITTING_RECORD).read_text())
    raw["runs"].append(dict(raw["runs"][0]))
    (sitting / SITTING_RECORD).write_text(json.dumps(raw))
    read = read_sitting(sitting)
    run = raw["runs"][0]["run"]
    assert read.forged and f"sitting.json lists run {run} more than once" in read.integrity
    assert list(read.runs) == ["interactive"]  # read once


def test_runs_listed_in_another_order_than_they_joined_are_named(tmp_path: Path) -> None:
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    model.load(TOY)
    job = model.prepare_run("reference")
    model.finish_run(job, job.work())
    model.score("reference")
    _empty_mask(model)
    sitting = model.ledger.sitting_dir
    assert sitting is not None and read_sitting(sitting).verified
    raw = json.loads((sitting / SITTING_RECORD).read_text())
    raw["runs"].reverse()  # the person first, on the page
    (sitting / SITTING_RECORD).write_text(json.dumps(raw))
    read = read_sitting(sitting)
    assert read.forged and any("in another order than they joined" in p for p in read.integrity)


def test_the_join_lines_sign_when_each_run_joined(tmp_path: Path) -> None:
    from imagebench.runs.journal import JOURNAL_NAME, read_journal

    sitting = _sitting(tmp_path)
    record = json.loads((sitting / SITTING_RECORD).read_text())
    first, *joins = read_journal(sitting / JOURNAL_NAME)
    assert first.detail is not None and first.detail["started"] == record["started"]
    assert first.detail["mode"] == record["source"] and first.detail["sitting_id"] == record["sitting_id"]
    assert [(j.detail or {}).get("at") for j in joins] == [r["joined"] for r in record["runs"]]
