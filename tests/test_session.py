"""Sessions: what a subject sees (only data, private copies) and how its leavings are collected."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_toy_case, toy_fixture, truth_leaks

from imagebench.case.model import Case, Collect, Layer
from imagebench.case.session import (
    SessionError,
    SessionLayer,
    case_prompt,
    collect_attempt,
    open_session,
)
from imagebench.fixtures.fixture import Fixture
from imagebench.fixtures.specs import Procedural


def _built(case: Case) -> Fixture:
    return case.build()


def test_session_holds_private_copies_of_data_only() -> None:
    case = make_toy_case()
    fx = _built(case)
    session = open_session(case, fx)
    assert session.label == "toy/rectangle"
    assert set(session.layers) == {"image"}
    image = session.namespace["image"]
    assert isinstance(image, np.ndarray)
    assert np.array_equal(image, fx.data["image"])
    assert image is not fx.data["image"] and not np.shares_memory(image, fx.data["image"])
    image[:] = -1.0  # a subject scribbling on its input
    assert not np.any(np.asarray(fx.data["image"]) == -1.0)
    assert session.layers["image"].data is image
    assert session.client is None and session.workspace is None


def test_truth_never_reaches_the_namespace() -> None:
    case = make_toy_case()
    fx = _built(case)
    session = open_session(case, fx)
    assert not set(fx.truth) & set(session.namespace)
    assert set(session.namespace) == {"image", "prompt"}
    for value in session.namespace.values():
        if isinstance(value, np.ndarray):
            assert truth_leaks(dict(fx.truth), blob=value.tobytes(), array=value) == []
        else:
            assert isinstance(value, str)
    for sl in session.layers.values():
        assert truth_leaks(dict(fx.truth), array=sl.data) == []


def test_prompt_ends_with_a_leave_section() -> None:
    case = make_toy_case()
    prompt = open_session(case, _built(case)).prompt
    assert prompt.startswith(case.task)
    leave = prompt[prompt.index("Leave:") :]
    assert "Inputs:" not in leave  # the Leave section is the last one
    assert "- mask (array)" in leave and "outputs/mask.npy" in leave
    assert "- area (scalar)" in leave and "outputs/area.json" in leave
    assert "inputs/image.npy" in prompt
    assert prompt == case_prompt(case)  # independent of the fixture


def test_tensor_layers_get_plane_ids_and_fixture_tensors() -> None:
    layers = (Layer("image", "image", "image", presentation="tensor"),)
    case = make_toy_case(layers=layers)
    fx = _built(case)
    session = open_session(case, fx, client="a-client", tensors={"image": "cache_0123456789ab"})
    assert session.layers["image"].data == "cache_0123456789ab"
    assert session.namespace["fixture_tensors"] == {"image": "cache_0123456789ab"}
    assert session.client == "a-client"
    assert "fixture_tensors['image']" in session.prompt
    with pytest.raises(SessionError, match="presents as tensor"):
        open_session(case, fx)


def test_points_layer_is_an_array() -> None:
    def builder(seed: int = 0) -> Fixture:
        pts = np.array([[1.0, 2.0], [3.0, 4.0]])
        return Fixture(provenance="pts", data={"pts": pts}, truth={"answer": np.ones(3)})

    case = Case(
        case_id="pts",
        namespace="toy",
        task="Leave `n`.",
        persona="",
        fixture=Procedural(builder, tolerance={"n": 0}),
        layers=(Layer("points", "pts", "points"),),
        collect=(Collect("n", "scalar"),),
        verify=lambda f, a: None,  # type: ignore[arg-type,return-value]
    )
    session = open_session(case, case.build())
    assert isinstance(session.namespace["points"], np.ndarray)
    assert session.namespace["points"].shape == (2, 2)


def test_missing_data_key_is_a_clear_error() -> None:
    case = make_toy_case(layers=(Layer("image", "pixels", "image"),))
    with pytest.raises(SessionError, match=r"data key 'pixels'.*data keys: \['image'\]"):
        open_session(case, _built(case))


def test_a_leaving_named_like_an_input_is_refused() -> None:
    case = make_toy_case(layers=(Layer("mask", "image", "image"),))
    with pytest.raises(SessionError, match="same name as an input layer"):
        open_session(case, _built(case))


def test_collect_attempt_records_why_not() -> None:
    case = make_toy_case()
    session = open_session(case, toy_fixture())
    session.namespace["mask"] = np.zeros((2, 2))
    attempt = collect_attempt(case, "someone", session.lookup)
    assert attempt.subject == "someone"
    assert set(attempt.arrays) == {"mask"}
    assert attempt.notes["why_not"] == {"area": "the subject left nothing named 'area'"}

    def lookup(name: str) -> object:
        raise KeyError("outputs/mask.npy could not be read") if name == "mask" else KeyError(name)

    attempt = collect_attempt(case, "x", lookup)
    assert attempt.arrays == {}
    assert attempt.notes["why_not"]["mask"] == "outputs/mask.npy could not be read"
    assert attempt.notes["why_not"]["area"] == "the subject left nothing named 'area'"


def test_session_why_not_and_added_layers_reach_the_attempt() -> None:
    case = make_toy_case()
    session = open_session(case, toy_fixture())
    session.why_not("area", "outputs/area.json could not be read", unreadable=True)
    session.layers["mask"] = SessionLayer(Layer("mask", "mask", "labels"), np.ones((3, 3), dtype=np.int32))
    attempt = collect_attempt(case, "viewer", session.lookup)
    assert attempt.arrays["mask"].shape == (3, 3)
    assert attempt.notes["why_not"] == {"area": "outputs/area.json could not be read"}
    assert session.notes["unreadable"] == ["area"]
