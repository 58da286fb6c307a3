"""The panel's model without any Qt: the same actions the widget calls, driven directly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import make_toy_case

from imagebench.records import CaseSummary, SampleSummary, read_record
from napari_imagebench._model import INTERACTIVE, BenchModel, PanelError


def test_the_model_imports_no_qt_and_no_napari() -> None:
    code = (
        "import sys, napari_imagebench._model, napari_imagebench._controls, napari_imagebench._viewer, napari_imagebench._layers\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('qtpy', 'PyQt5', 'napari', 'vispy'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_model_runs_scores_and_accumulates_samples_without_a_viewer(tmp_path: Path) -> None:
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path)
    seen: list[str] = []
    model.events.result.connect(lambda row: seen.append(row.status))
    with pytest.raises(PanelError, match="load a case first"):
        model.prepare_run("reference")
    loaded = model.load("toy/rectangle")
    assert set(loaded.session.namespace) == {"image", "prompt"}

    job = model.prepare_run("reference")
    assert job.session is not loaded.session  # each Run works a fresh session, like each sample of a run
    left = model.finish_run(job, job.work())
    assert set(left) == {"mask", "area"} and "mask" not in loaded.session.namespace
    assert model.score("reference").status == "ok"

    # the interactive subject: a viewer layer, then the console, then the panel's session
    bright = loaded.session.namespace["image"] > 0.5
    row = model.score(INTERACTIVE, layers={"mask": bright.astype(np.uint8)}, console={"area": float(bright.sum())})
    assert row.status == "ok" and row.subject == "interactive"
    # the person had the reference's answer on screen: the sample says so (a headless run never has it)
    summary = read_record(row.sample_dir / "summary.json", SampleSummary)
    assert summary.flags == ["saw-results-reference"]
    loaded.session.namespace["area"] = 1.0
    row = model.score(INTERACTIVE, layers={"mask": bright}, console=None)
    assert row.status == "wrong-answer"
    assert seen == ["ok", "ok", "wrong-answer"]

    folders = {name: f.path for name, f in model.run_folders.items()}
    assert set(folders) == {"reference", "interactive"} and len(set(folders.values())) == 2
    cs = read_record(folders["interactive"] / "interactive" / "toy" / "rectangle" / "summary.json", CaseSummary)
    assert cs.samples == 2 and cs.counts == {"ok": 1, "wrong-answer": 1}
    # both run folders check out, and their pages say how each subject was held
    from imagebench.report import page_view, read_page
    from imagebench.runs.reader import read_run

    assert read_run(folders["interactive"]).verified and read_run(folders["reference"]).verified
    person = dict(page_view(read_page(folders["interactive"]))["head"]["rows"])["sandbox"]
    assert person.startswith("none (a person at the viewer")
    program = dict(page_view(read_page(folders["reference"]))["head"]["rows"])["sandbox"]
    assert program.startswith("in-process")


def test_a_subject_that_raises_is_scored_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "model_raising_mod.py").write_text("def solve(session):\n    raise RuntimeError('no idea')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    model = BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "out")
    model.load("toy/rectangle")
    spec = model.add_subject("python:model_raising_mod:solve")
    job = model.prepare_run(spec)
    model.finish_run(job, job.work())
    assert any("raised RuntimeError: no idea" in m.text for m in model.messages)
    row = model.score(spec)
    assert row.status == "subject-error" and "the subject raised RuntimeError: no idea" in row.reason


def test_the_detail_speaks_to_the_person_beside_the_program() -> None:
    from imagebench import cases as builtin
    from napari_imagebench._model import BenchModel

    model = BenchModel(cases=builtin.all_cases)
    text = model.detail("segment-nuclei/synthetic-blobs").text()
    assert "You, at the viewer (the Answer tab):" in text
    assert "labels: paint labels into the layer `labels` on the grid of `nuclei`" in text
    assert text.count("\nLeave:") == 1  # the prompt's own section, once
    form = model.detail("segment-nuclei/count-nuclei").text()
    assert "answer: fill the form for `answer` and press Set" in form


def test_each_case_says_where_its_pixels_come_from(monkeypatch) -> None:
    from imagebench import cases as builtin
    from napari_imagebench._model import BenchModel

    monkeypatch.delenv("IMAGEBENCH_FIXTURES", raising=False)
    model = BenchModel(cases=builtin.all_cases)
    assert "pixels: the data shipped in the package" in model.detail("segment-nuclei/dsb2018").text()
    assert "pixels: generated by imagebench.cases.structured:build_count_nuclei (seed" in model.detail(
        "segment-nuclei/count-nuclei"
    ).text()


def test_a_curated_case_is_cited_in_the_detail_pane() -> None:
    from imagebench import cases as builtin
    from napari_imagebench._model import BenchModel

    model = BenchModel(cases=builtin.all_cases)
    for case in builtin.all_cases():
        text = model.detail(case.label).text()
        source = case.source()
        if case.kind == "curated":
            assert source is not None and f"cite: {source.citation}" in text, case.label
            assert source.provenance not in text  # it may state the perturbation: the report shows it
        else:
            assert "cite:" not in text
