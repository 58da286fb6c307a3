"""The Compare tab's model without Qt: two run folders read as ``imagebench compare`` reads them,
a forged or unverifiable one refused with its reason, both samples' artifacts in rows of A, B and
A - B under one contrast range, and the compare table as ``compare_runs`` gives it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case
from suite_runs import Shifted, pin, suite_run

from imagebench.subjects import NopSubject, ReferenceSubject
from imagebench.suite.compare import compare_runs
from napari_imagebench._artifacts import ARTIFACT_KEY
from napari_imagebench._compare_model import (
    COMPARE_KEY,
    DIFFERENCE,
    DIFFERENCE_COLORMAP,
    CompareModel,
)
from napari_imagebench._model import INTERACTIVE, BenchModel


@pytest.fixture
def toys(tmp_path: Path) -> dict[str, Any]:
    cases = [make_toy_case("alpha"), make_toy_case("beta", seed=1)]
    suites = tmp_path / "suites"
    suites.mkdir()
    manifest = pin(cases, suites)
    return {"cases": cases, "suite": manifest, "suites": suites, "out": tmp_path / "out"}


def model_of(toys: dict[str, Any], **kwargs: Any) -> CompareModel:
    return CompareModel(suites_dir=toys["suites"], resamples=200, **kwargs)


def test_the_compare_model_imports_no_qt_and_no_napari() -> None:
    code = (
        "import sys, napari_imagebench._compare_model\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('qtpy', 'PyQt5', 'PyQt6', 'napari', 'vispy'))\n"
        "print(bad)\nsys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_two_suite_runs_side_by_side_with_the_compare_table(toys: dict[str, Any]) -> None:
    run_a = suite_run(toys["out"], toys["suite"], toys["cases"], ReferenceSubject())
    run_b = suite_run(toys["out"], toys["suite"], toys["cases"], Shifted())
    shown: list[Any] = []
    model = model_of(toys, shown=shown.append)
    assert model.controls(False, None)["show"].enabled is False
    assert model.set_run("A", run_a) is not None
    assert model.set_run("B", run_b / "run.json") is not None  # its run.json names it as well
    assert model.status() == [f"A: reference ({run_a.name})", f"B: shifted ({run_b.name})"]
    assert model.cases() == ["toy/alpha", "toy/beta"] and model.samples("toy/alpha") == [0, 1]
    assert model.controls(False, "toy/alpha")["show"].enabled and not model.controls(False, "toy/alpha")["back"].enabled

    view = model.side_by_side("toy/alpha", 0)
    assert [(p.side, p.artifact, p.present) for p in view.panes] == [
        ("A", "mask", True), ("B", "mask", True), (DIFFERENCE, "mask", True),
        ("A", "truth", True), ("B", "truth", True), (DIFFERENCE, "truth", True),
    ]  # fmt: skip
    assert view.rows == 2 and view.columns == 3
    assert [d[1]["name"] for d in view.layers] == [
        "A reference s1: mask", "B shifted s1: mask", "A − B s1: mask",
        "A reference s1: truth", "B shifted s1: truth", "A − B s1: truth (identical)",
    ]  # fmt: skip
    # every grey pane of both sides under ONE contrast range; each a panel artifact pane, never a leaving
    ranges = {d[1]["contrast_limits"] for d, p in zip(view.layers, view.panes, strict=True) if p.side != DIFFERENCE}
    assert ranges == {view.contrast}
    assert all(ARTIFACT_KEY in d[1]["metadata"] and COMPARE_KEY in d[1]["metadata"] for d in view.layers)
    # A - B from the values the verifier kept: the column the shifted subject got wrong, both signs
    sample_a = run_a / "reference" / "toy" / "alpha" / "sample-0"
    sample_b = run_b / "shifted" / "toy" / "alpha" / "sample-0"
    want = np.load(sample_a / "mask.npy") - np.load(sample_b / "mask.npy")
    diff = view.layers[2]
    np.testing.assert_array_equal(diff[0], want)
    assert set(np.unique(diff[0])) == {-1.0, 0.0, 1.0}
    assert diff[1]["colormap"] == DIFFERENCE_COLORMAP and diff[1]["contrast_limits"] == (-1.0, 1.0)
    assert "green where A is higher, magenta where B is higher" in view.legend
    assert "truth: identical in A and B" in view.notes
    assert "B shifted s1: wrong-answer" in " ".join(view.notes)
    # the façade hears each sample shown (a person working that case has now seen its truth)
    assert [(r.subject, r.label, r.sample) for r in shown] == [("reference", "toy/alpha", 0), ("shifted", "toy/alpha", 0)]

    # the compare table: compare_runs' own result, the suite file found by what run A recorded
    assert [(row[0], row[2]) for row in model.condition_rows()] == [("C1", "yes"), ("C2", "yes"), ("C3", "yes"), ("C4", "yes")]
    assert "assignment verified against the suite file" in model.condition_rows()[1][3]
    result = compare_runs(run_a, run_b, suite=model._recorded_suite(model.runs["A"].run), resamples=200)
    assert result.comparable and model.comparison() == result
    rows = model.case_rows()
    assert [r[:8] for r in rows] == [
        ("toy/alpha", "2", "1", "2/2", "1/2", "-0.5", "1", "0"),
        ("toy/beta", "2", "1", "2/2", "1/2", "-0.5", "1", "0"),
        ("overall", "4", "2", "4/4", "2/4", "-0.5", "2", "0"),
    ]
    assert rows[0][8].startswith("area_error: 0 / 0.1") and "mask_error" in rows[0][8]
    assert model.summary_lines()[-1].endswith(
        "discordant fixtures: 2 better in A, 0 better in B; McNemar exact p = 0.5 over 2 distinct fixtures"
    )
    with pytest.raises(ValueError, match="not a sample both runs hold"):
        model.side_by_side("toy/alpha", 2)


def test_a_forged_run_is_refused_with_its_reason_as_compare_refuses_it(toys: dict[str, Any]) -> None:
    run_a = suite_run(toys["out"], toys["suite"], toys["cases"], ReferenceSubject())
    run_b = suite_run(toys["out"], toys["suite"], toys["cases"], NopSubject())
    summary = run_b / "nop" / "toy" / "alpha" / "sample-0" / "summary.json"
    raw = json.loads(summary.read_text())
    raw.update(status="ok", passed=True, reason="")  # a nop forged to ok, by hand
    summary.write_text(json.dumps(raw))
    told: list[tuple[str, str]] = []
    model = model_of(toys, notify=lambda level, text: told.append((level, text)))
    assert model.set_run("A", run_a) is not None
    assert model.set_run("B", run_b) is None
    assert "B" not in model.runs and not model.ready and model.cases() == []
    refused = model.refused["B"]
    assert refused[0].startswith("run B is forged: toy/alpha#0: the journal (line")
    assert "summary.json changed after it was journaled (digest mismatch)" in refused[0]
    assert refused[-1] == "run B is refused: a run folder that does not check out is never shown"
    # the same words `imagebench compare` refuses it with
    assert compare_runs(run_a, run_b).problems[0] == refused[0]
    assert told and told[-1][0] == "warning" and refused[0] in told[-1][1]
    assert model.status()[1:] == refused
    assert "pick run folder B first" in model.controls(False, None)["show"].why
    assert model.condition_rows() == [] and model.case_rows() == []


def test_a_run_this_state_folder_cannot_verify_is_refused(toys: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_a = suite_run(toys["out"], toys["suite"], toys["cases"], ReferenceSubject())
    monkeypatch.setenv("IMAGEBENCH_STATE", str(tmp_path / "another-state"))  # not the key that signed it
    model = model_of(toys)
    assert model.set_run("A", run_a) is None
    assert model.refused["A"][0].startswith("run A cannot be verified: ")
    assert model.set_run("A", tmp_path / "nowhere") is None
    assert model.refused["A"][0] == "run A (nowhere): not a run folder"


def test_a_refused_condition_is_shown_with_its_reason(toys: dict[str, Any]) -> None:
    run_a = suite_run(toys["out"], toys["suite"], toys["cases"], ReferenceSubject(), samples=2)
    run_b = suite_run(toys["out"], toys["suite"], toys["cases"], Shifted(), samples=1)
    model = model_of(toys)
    model.set_run("A", run_a)
    model.set_run("B", run_b)
    conditions = {row[0]: row for row in model.condition_rows()}
    assert conditions["C4"][2] == "no" and "samples per case: A 2, B 1" in conditions["C4"][3]
    assert conditions["C3"][2] == "yes"
    assert model.case_rows() == []
    assert model.summary_lines() == ["not comparable: C4 fail; nothing was compared"]
    # side by side still shows the sample both hold: the refusal is the table's, the pixels are the runs'
    assert model.samples("toy/alpha") == [0]
    assert len(model.side_by_side("toy/alpha", 0).panes) == 6


def test_a_subject_that_left_nothing_gets_empty_panes_named_so(toys: dict[str, Any]) -> None:
    run_a = suite_run(toys["out"], toys["suite"], toys["cases"], ReferenceSubject(), samples=1)
    run_b = suite_run(toys["out"], toys["suite"], toys["cases"], NopSubject(), samples=1)
    model = model_of(toys)
    model.set_run("A", run_a)
    model.set_run("B", run_b)
    view = model.side_by_side("toy/beta", 0)
    assert [(p.side, p.present) for p in view.panes] == [("A", True), ("B", False), (DIFFERENCE, False)] * 2
    assert view.panes[1].name == "B nop s1: mask (none: no-result)"
    assert view.panes[2].name == "A − B s1: mask (only A has it)"
    assert view.layers[1][2] == "points" and len(view.layers[1][0]) == 0  # an empty pane, no pixel made up
    assert "B nop s1: no-result" in " ".join(view.notes) and "it left no images" in " ".join(view.notes)
    assert {row[0]: row[2] for row in model.condition_rows()} == {"C1": "yes", "C2": "yes", "C3": "yes", "C4": "yes"}
    assert model.case_rows()[-1][:8] == ("overall", "2", "2", "2/2", "0/2", "-1", "2", "0")


def test_two_runs_of_the_panel_s_sitting(tmp_path: Path) -> None:
    bench = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    loaded = bench.load("toy/rectangle")
    job = bench.prepare_run("reference")
    bench.finish_run(job, job.work())
    bench.score("reference")
    bright = loaded.session.namespace["image"] > 0.5
    bench.score(INTERACTIVE, layers={"mask": np.roll(bright, 2, axis=0)}, console={"area": float(bright.sum())})
    folders = [f.path for f in bench.run_folders.values()]
    model = CompareModel(sitting=lambda: folders, shown=bench.artifacts_shown)
    assert [text.split(" · ")[0] for text, _ in model.choices()] == ["reference", "interactive"]
    model.set_run("A", folders[0])
    model.set_run("B", folders[1])
    assert model.cases() == ["toy/rectangle"]
    view = model.side_by_side("toy/rectangle", 0)
    assert [p.name for p in view.panes][:3] == ["A reference s1: mask", "B interactive s1: mask", "A − B s1: mask"]
    assert "saw-artifacts" in loaded.seen  # the person has now seen the truth of the case they work
    # the panel's runs were not run with --suite: compare refuses all four, as the command does
    rows = model.condition_rows()
    assert [(r[0], r[2]) for r in rows] == [("C1", "no"), ("C2", "no"), ("C3", "no"), ("C4", "no")]
    assert "run A records no cohort (it was not run with --suite)" in rows[0][3]
    assert model.summary_lines() == ["not comparable: C1, C2, C3, C4 fail; nothing was compared"]
