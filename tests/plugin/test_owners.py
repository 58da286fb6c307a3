"""Whose a layer is, without Qt: the tags, the leftovers question, what may stand for an answer,
the "k of N" counter, and how a case's layers are presented (styles, pyramids, axes, units)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imagebench import cases as builtin
from imagebench.case.model import Case, CaseError, Collect, Layer
from napari_imagebench._answers import answer_slots
from napari_imagebench._layers import (
    POINT_STYLES,
    TEXTURE_LIMIT,
    case_axes,
    case_colormaps,
    case_units,
    fixture_layer_data,
    point_styles,
    shown_levels,
)
from napari_imagebench._model import BenchModel
from napari_imagebench._owners import TAG, owner, stamp, tagged
from napari_imagebench._workbench_model import KEEP, REMOVE, Leftovers

LANDMARKS = "align-channels-from-landmarks/synthetic-warp"


def test_a_tag_says_role_case_and_load_and_an_old_tag_still_reads() -> None:
    meta: dict[str, Any] = {TAG: {"key": "image", "array_id": "cache_1"}, "other": 1}
    assert owner(meta).role == "case" and owner(meta).case is None  # written before roles were
    stamp(meta, "case", "toy/rectangle", 3)
    assert meta[TAG] == {"key": "image", "array_id": "cache_1", "role": "case", "case": "toy/rectangle", "load": 3}
    o = owner(meta)
    assert o.panel and not o.persons and o.of_load("toy/rectangle", 3) and not o.of_load("toy/rectangle", 2)
    assert not o.of_load("toy/other", 3) and not o.of_load("toy/rectangle", None)
    assert owner({}).role is None and not tagged({}) and not owner(None).of_load("toy/rectangle", 1)
    mine: dict[str, Any] = {}
    stamp(mine, "person", None, None)  # arrived while no case was loaded: nobody's answer, ever
    assert tagged(mine) and not owner(mine).persons and not owner(mine).of_load(None, None)
    assert owner({TAG: {"result": "reference:mask", "load": True}}).load is None  # a bool is no load


def _loaded(tmp_path: Path, label: str = LANDMARKS) -> BenchModel:
    model = BenchModel(outcome_root=tmp_path)
    model.load(label)
    return model


def test_an_arriving_layer_is_the_person_s_of_this_load_and_the_panel_s_own_keep_their_tag(tmp_path: Path) -> None:
    model = BenchModel(outcome_root=tmp_path)
    before: dict[str, Any] = {}
    assert model.workbench.tag_arrival(before) and owner(before).case is None  # no case loaded yet
    model.load("segment-nuclei/synthetic-blobs")
    first = model.loaded
    assert first is not None and first.number == 1
    painted: dict[str, Any] = {}
    assert model.workbench.tag_arrival(painted)
    assert owner(painted) == owner({TAG: {"role": "person", "case": "segment-nuclei/synthetic-blobs", "load": 1}})
    panel_own: dict[str, Any] = {TAG: {"role": "result", "case": "x/y", "load": 1}}
    assert not model.workbench.tag_arrival(panel_own) and panel_own[TAG]["role"] == "result"
    model.load("segment-nuclei/synthetic-blobs")  # the same case again is another load
    assert model.loaded is not None and model.loaded.number == 2 and not owner(painted).of_load("segment-nuclei/synthetic-blobs", 2)


def test_the_leftovers_question_is_answered_keep_unless_the_person_says_remove(tmp_path: Path) -> None:
    model = BenchModel(outcome_root=tmp_path)
    question = Leftovers("b/two", {"a/one": ("labels", "my points")})
    assert "`labels`, `my points` (made on a/one)" in question.text() and "not offered as an answer to b/two" in question.text()
    assert question.names == ["labels", "my points"]
    assert model.workbench.decide_leftovers(question) == KEEP  # nobody asked: nothing is removed
    asked: list[Leftovers] = []
    for said, got in (("remove", REMOVE), ("keep", KEEP), ("whatever", KEEP)):
        model.workbench.ask_leftovers = lambda q, said=said: (asked.append(q), said)[1]
        assert model.workbench.decide_leftovers(question) == got
    assert asked == [question] * 3
    texts = [m.text for m in model.messages]
    assert any(t.startswith("removed your layers of earlier cases: labels, my points") for t in texts)
    assert any("they come back when you load a/one again" in t for t in texts)


def test_layers_taken_back_bring_the_flags_of_the_load_they_were_made_on(tmp_path: Path) -> None:
    model = _loaded(tmp_path, "segment-nuclei/synthetic-blobs")
    assert model.loaded is not None
    model.loaded.seen.add("saw-artifacts")  # the person looked at the truth, then painted
    model.load("segment-nuclei/dsb2018")
    assert model.loaded.seen == set()
    model.loaded.seen.add("saw-results-reference")
    model.load("segment-nuclei/synthetic-blobs")  # the case's flags stay for the sitting
    assert model.loaded.seen == {"saw-artifacts"}
    # a layer made on dsb2018 brought here (taken back) brings what was seen there
    assert model.workbench.take_back([1, 2]) == {"saw-results-reference"}
    assert model.loaded.seen == {"saw-artifacts", "saw-results-reference"}


def _layer(name: str, kind: str, role: str | None, load: int | None, case: str = LANDMARKS) -> tuple[str, str, dict]:
    meta: dict[str, Any] = {}
    if role is not None:
        stamp(meta, role, case, load)  # type: ignore[arg-type]
    return name, kind, meta


def test_only_layers_of_this_load_are_offered_never_a_result_nor_another_case_s(tmp_path: Path) -> None:
    model = _loaded(tmp_path)
    slot = next(s for s in model.answer_slots() if s.name == "probes_fixed")
    number = model.loaded.number  # type: ignore[union-attr]
    listed = [
        _layer("landmarks_fixed", "Points", "case", number),
        _layer("probes_fixed", "Points", "answer", number),
        _layer("my clicks", "Points", "person", number),
        _layer("reference:probes_fixed", "Points", "result", number),  # a subject's, not the person's
        _layer("old clicks", "Points", "person", number - 1 if number > 1 else 99),  # an earlier load
        _layer("elsewhere", "Points", "answer", number, case="segment-nuclei/dsb2018"),
        _layer("before any case", "Points", None, None),
        _layer("fixed", "Image", "case", number),  # of another kind
    ]
    offered = model.answering.offered(slot, listed)
    assert offered == ["landmarks_fixed", "probes_fixed", "my clicks"]
    assert "elsewhere" not in offered  # the load's number alone (another panel's) does not make it this case's
    model.close()
    assert model.answering.offered(slot, listed) == []


def test_an_ordered_answer_counts_k_of_n_of_the_points_it_pairs_with(tmp_path: Path) -> None:
    model = _loaded(tmp_path)
    assert model.answering.count("probes_fixed", 0) == "0 of 25 clicked"
    assert model.answering.count("probes_fixed", 12) == "12 of 25 clicked"
    assert model.answering.count("probes_fixed", 27) == "27 of 25 clicked: 2 too many"
    unpaired = answer_slots(builtin.get_case(LANDMARKS))[0]
    from napari_imagebench._answers import counted

    assert counted(unpaired, 3, None) == "3 clicked"
    with pytest.raises(CaseError, match="pairs with 'nuclei'"):
        Case(
            case_id="c",
            namespace="toy",
            task="leave pts",
            persona="p",
            fixture=builtin.get_case(LANDMARKS).fixture,
            layers=(Layer("nuclei", "image", "image"),),
            collect=(Collect("pts", layer="points", ordered=True, pairs="nuclei"),),
            verify=lambda f, a: None,  # type: ignore[arg-type,return-value]
        )


def test_a_created_answer_layer_is_tagged_sized_like_the_case_s_points_in_a_style_of_its_own(tmp_path: Path) -> None:
    model = _loaded(tmp_path)
    data, kwargs, kind = model.answer_layer("probes_fixed")
    assert kind == "points" and data.shape == (0, 2)
    assert owner(kwargs["metadata"]).role == "answer" and owner(kwargs["metadata"]).of_load(LANDMARKS, model.loaded.number)  # type: ignore[union-attr]
    shown = {kw["name"]: kw for _, kw, k in fixture_layer_data(model.loaded.case.layers, model.loaded.fixture.data) if k == "points"}  # type: ignore[union-attr]
    assert {kw["size"] for kw in shown.values()} == {kwargs["size"]}  # sized like the case's points
    styles = {(kw["face_color"], kw["symbol"]) for kw in [*shown.values(), kwargs]}
    assert len(styles) == 4  # three case layers and the answer: four colours and symbols
    assert kwargs["text"]["color"] == kwargs["face_color"]
    slot = next(s for s in model.answer_slots() if s.name == "probes_fixed")
    assert slot.mode == "add" and slot.pairs == "probes_moving"
    labels = answer_slots(builtin.get_case("segment-nuclei/dsb2018"))[0]
    assert labels.mode == "paint"


def test_the_landmark_case_s_three_points_layers_are_three_colours_and_symbols() -> None:
    case = builtin.get_case(LANDMARKS)
    assert point_styles(case) == {"landmarks_fixed": 0, "landmarks_moving": 1, "probes_moving": 2, "probes_fixed": 3}
    layers = fixture_layer_data(case.layers, case.build().data)
    points = [(kw["face_color"], kw["symbol"], kw["text"]["color"]) for _, kw, kind in layers if kind == "points"]
    assert points == [(c, s, c) for c, s in POINT_STYLES[:3]]
    assert case_colormaps(case) == {"fixed": "green", "moving": "magenta"}


class _Level:
    def __init__(self, *shape: int) -> None:
        self.shape = shape


def test_a_pyramid_ends_at_its_first_level_that_fits_a_texture() -> None:
    stack = [_Level(31, 61, 57), _Level(16, 31, 29), _Level(8, 16, 15)]
    assert shown_levels(stack, ("z", "y", "x")) == stack[:1]  # fits: full resolution, in 2D and 3D
    big = [_Level(4, 6000, 5000), _Level(4, 3000, 2500), _Level(4, 1500, 1250), _Level(4, 750, 625)]
    assert shown_levels(big, ("t", "y", "x")) == big[:3]  # t is no spatial axis
    assert shown_levels(big, None, limit=800) == big  # none fits: every level
    assert TEXTURE_LIMIT == 2048


def test_cases_declare_their_voxels_axes_and_units() -> None:
    stack = builtin.get_case("segment-nuclei-3d/stardist-3d")
    assert stack.layers[0].scale == (1.0, 0.5, 0.5) and case_units(stack) == "um"
    assert builtin.get_case("pick-a-nucleus/stardist-3d").layers[0].scale == (1.0, 0.5, 0.5)
    assert case_axes(builtin.get_case("drift-correction/drift-vector"), 3) == ("t", "y", "x")
    assert case_axes(builtin.get_case("segment-nuclei/dsb2018"), 2) is None
    assert case_units(builtin.get_case("segment-nuclei/dsb2018")) is None


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


def test_layers_kept_aside_come_back_once_and_a_later_remove_discards_them(tmp_path: Path) -> None:
    model = BenchModel(outcome_root=tmp_path)
    painted, clicked, other = _Named("labels"), _Named("clicks"), _Named("labels")
    model.workbench.keep_aside("a/one", [painted, clicked])
    model.workbench.keep_aside("b/two", [other])
    gone = model.workbench.discard(Leftovers("c/three", {"a/one": ("clicks",)}))
    assert gone == [clicked] and model.workbench.kept_aside == {"a/one": [painted], "b/two": [other]}
    assert model.messages[-1].text == "removed your layers of earlier cases: clicks"
    assert model.workbench.kept("a/one") == [painted] and model.workbench.kept("a/one") == []
    assert model.workbench.discard(Leftovers("c/three", {"a/one": ("labels",)})) == []  # nothing left to remove
    assert model.workbench.kept_aside == {"b/two": [other]}
