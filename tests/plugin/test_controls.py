"""The panel's enabling rules without Qt: which buttons are enabled when, and why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers import UnavailableSpec, make_toy_case

from napari_imagebench._controls import PanelState
from napari_imagebench._model import INTERACTIVE, BenchModel

TOY = "toy/rectangle"
AWAY = "toy/away"
NOREF = "toy/noref"


def make_model(tmp_path: Path) -> BenchModel:
    cases = [
        make_toy_case(),
        make_toy_case("away", spec=UnavailableSpec()),
        make_toy_case("noref", reference=None),
    ]
    return BenchModel(cases=lambda: cases, outcome_root=tmp_path)


def test_before_anything_is_selected_only_nothing_is_enabled(tmp_path: Path) -> None:
    c = make_model(tmp_path).controls(PanelState())
    assert not any([c.load, c.run, c.score, c.stop, c.serve, c.artifacts, c.back, c.folder])
    assert c.load.why == "select a case to load"
    assert c.missing == ()


def test_load_wants_an_available_case_and_no_work_under_way(tmp_path: Path) -> None:
    model = make_model(tmp_path)
    assert model.controls(PanelState(selected=TOY)).load.enabled
    away = model.controls(PanelState(selected=AWAY)).load
    assert not away and "cannot run here: the toy tree is not on this machine" in away.why
    assert not model.controls(PanelState(selected=TOY, busy=True)).load


def test_run_wants_a_loaded_case_a_subject_that_can_work_it_and_no_work(tmp_path: Path) -> None:
    model = make_model(tmp_path)
    assert not model.controls(PanelState(selected=TOY, subject="reference")).run
    model.load(TOY)
    assert model.controls(PanelState(selected=TOY, subject="reference")).run.enabled
    assert not model.controls(PanelState(subject=INTERACTIVE)).run  # you are worked at the viewer, not Run
    assert not model.controls(PanelState(subject="reference", busy=True)).run
    # the subject list greys reference where the case in view has no reference solution
    c = model.controls(PanelState(selected=NOREF, subject="reference"))
    assert c.subjects["reference"] == ""  # the loaded case (toy/rectangle) is the one in view
    model.load(NOREF)
    c = model.controls(PanelState(subject="reference"))
    assert not c.run and "no reference solution" in c.run.why and c.run.why == c.subjects["reference"]
    assert c.subjects[INTERACTIVE] == ""


def test_score_waits_for_every_leaving_of_the_person(tmp_path: Path) -> None:
    model = make_model(tmp_path)
    assert not model.controls(PanelState(subject=INTERACTIVE)).score
    loaded = model.load(TOY)
    c = model.controls(PanelState(subject=INTERACTIVE))
    assert not c.score and c.missing == ("mask", "area") and "leave mask, area first" in c.score.why
    mask = (loaded.session.namespace["image"] > 0.5).astype(np.uint8)
    c = model.controls(PanelState(subject=INTERACTIVE, layers={"mask": mask}, console={"area": 3.0}))
    assert c.score.enabled and c.missing == () and c.score.why == "score the leavings as a sample"
    assert not model.controls(PanelState(subject=INTERACTIVE, layers={"mask": mask}, console={"area": 3.0}, busy=True)).score
    # another subject's Score is enabled once loaded: the model says when nothing was run yet
    assert model.controls(PanelState(subject="reference")).score.enabled


def test_stop_wants_a_run_under_way_that_was_not_stopped_yet(tmp_path: Path) -> None:
    model = make_model(tmp_path)
    assert model.controls(PanelState(busy=True, stoppable=True)).stop.enabled
    assert not model.controls(PanelState(busy=True, stoppable=False)).stop
    assert not model.controls(PanelState(busy=False, stoppable=True)).stop


def test_serving_an_agent_holds_load_and_scores_the_agent(tmp_path: Path) -> None:
    model = make_model(tmp_path)
    assert not model.controls(PanelState(selected=TOY)).serve
    model.load(TOY)
    assert model.controls(PanelState(selected=TOY)).serve.enabled
    assert not model.controls(PanelState(selected=TOY, busy=True)).serve
    model.serve_agent()
    try:
        c = model.controls(PanelState(selected=TOY, subject=INTERACTIVE))
        assert c.serve.enabled  # Stop serving
        assert not c.load and "Score or stop it first" in c.load.why
        assert c.score.enabled and c.missing == () and "score what the agent left" in c.score.why
    finally:
        model.stop_agent()
    assert model.controls(PanelState(selected=TOY)).load.enabled


def test_the_artifact_buttons_want_a_result_and_back_wants_the_panes_up(tmp_path: Path) -> None:
    model = make_model(tmp_path)
    model.load(TOY)
    c = model.controls(PanelState())
    assert not c.artifacts and not c.folder and not c.back
    job = model.prepare_run("reference")
    model.finish_run(job, job.work())
    model.score("reference")
    c = model.controls(PanelState())
    assert c.artifacts.enabled and c.folder.enabled and not c.back
    assert model.controls(PanelState(reviewing=True)).back.enabled
