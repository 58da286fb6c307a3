"""The headless half of the Answer tab: slots from the case, typed forms, empty answer layers."""

from __future__ import annotations

import numpy as np
import pytest

from imagebench import cases as builtin
from napari_imagebench._answers import (
    AnswerError,
    answer_layer_data,
    answer_slots,
    form_value,
)


def _slots(label: str) -> dict:
    return {s.name: s for s in answer_slots(builtin.get_case(label))}


def test_each_leaving_becomes_a_slot_of_the_kind_the_case_declares() -> None:
    assert {n: (s.kind, s.layer, s.like) for n, s in _slots("segment-nuclei/dsb2018").items()} == {
        "labels": ("layer", "labels", "nuclei")
    }
    probes = _slots("align-channels-from-landmarks/synthetic-warp")["probes_fixed"]
    assert (probes.kind, probes.layer, probes.ordered) == ("layer", "points", True)
    assert [f.kind for f in _slots("segmentation-qc-metrics/annotation-vs-model")["f1"].fields] == ["float"]
    assert _slots("calibrated-measurements/anisotropic-volumes")["volumes"].kind == "console"
    fields = {f.name: (f.kind, f.length) for f in _slots("drift-correction/drift-vector")["answer"].fields}
    assert fields == {"shift": ("vector", 2)}
    fields = {f.name: (f.kind, f.length) for f in _slots("pick-a-nucleus/synthetic-volume")["answer"].fields}
    assert fields == {"voxel": ("voxel", 3)}
    assert [f.kind for f in _slots("fibre-angle/synthetic-lines")["answer"].fields] == ["float"]


def test_a_form_becomes_the_leaving_and_a_bad_value_is_named() -> None:
    count = _slots("segment-nuclei/count-nuclei")["answer"]
    assert form_value(count, {"count": 12}) == {"count": 12}
    with pytest.raises(AnswerError, match="field 'count' is 12.5; expected an integer"):
        form_value(count, {"count": 12.5})
    with pytest.raises(AnswerError, match="field 'count' is empty"):
        form_value(count, {})
    shift = _slots("drift-correction/drift-vector")["answer"]
    assert form_value(shift, {"shift": ["1.5", "-2"]}) == {"shift": [1.5, -2.0]}
    with pytest.raises(AnswerError, match="expected 2 numbers"):
        form_value(shift, {"shift": ["1"]})
    f1 = _slots("segmentation-qc-metrics/annotation-vs-model")["f1"]
    assert form_value(f1, {"f1": "0.75"}) == 0.75
    with pytest.raises(AnswerError, match="expected a number"):
        form_value(f1, {"f1": "nan"})


def test_an_empty_answer_layer_is_shaped_typed_and_scaled_like_its_data_layer() -> None:
    case = builtin.get_case("segment-nuclei/synthetic-blobs")
    fx = case.build()
    data, kwargs, kind = answer_layer_data(_slots(case.label)["labels"], case.layers, {"nuclei": fx.data["image"]})
    assert kind == "labels" and data.shape == fx.data["image"].shape and data.dtype == np.int32 and not data.any()
    assert kwargs["name"] == "labels"
    landmarks = builtin.get_case("align-channels-from-landmarks/synthetic-warp")
    lfx = landmarks.build()
    points, pkw, pkind = answer_layer_data(
        _slots(landmarks.label)["probes_fixed"], landmarks.layers, {"fixed": lfx.data["fixed"]}
    )
    assert pkind == "points" and points.shape == (0, 2) and pkw["text"]["string"] == "{index}"
