"""parse_answer: one JSON object or a final marker line; nothing out of prose; types kept; never raises."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imagebench.scoring.answer import (
    MARKER,
    MAX_DEPTH,
    MAX_NODES,
    MAX_TEXT_CHARS,
    final_json_message,
    parse_answer,
    to_json_value,
)


def ok(value):
    answer, why = parse_answer(value)
    assert why is None, why
    return answer


def refused(value) -> str:
    answer, why = parse_answer(value)
    assert answer is None
    assert isinstance(why, str) and why
    return why


# --------------------------------------------------------------------------- accepted


def test_plain_object_text() -> None:
    assert ok('  {"count": 3, "name": "x"}\n') == {"count": 3, "name": "x"}


def test_dict_taken_as_is() -> None:
    assert ok({"shift": (1.5, -2)}) == {"shift": [1.5, -2]}


def test_marker_line_after_prose() -> None:
    text = "I counted carefully.\nThe answer is below.\n" + MARKER + ' {"count": 7}\n'
    assert ok(text) == {"count": 7}


def test_marker_object_may_span_lines() -> None:
    text = 'thinking...\n  IMAGEBENCH_FINAL_JSON: {\n  "a": [1,\n 2]\n}  \n\n'
    assert ok(text) == {"a": [1, 2]}


def test_prose_may_hold_json_before_the_marker() -> None:
    text = 'first guess {"count": 1}\n' + MARKER + ' {"count": 2}'
    assert ok(text) == {"count": 2}


def test_types_are_kept() -> None:
    answer = ok('{"i": 3, "s": "3", "f": 3.0, "b": true, "n": null}')
    assert type(answer["i"]) is int and type(answer["s"]) is str and type(answer["f"]) is float
    assert answer["b"] is True and answer["n"] is None


def test_numpy_values_become_python() -> None:
    answer = ok({"count": np.int64(4), "v": np.array([1.5, 2.5]), "flag": np.bool_(True)})
    assert answer == {"count": 4, "v": [1.5, 2.5], "flag": True}
    assert type(answer["count"]) is int and type(answer["flag"]) is bool


def test_bytes_are_decoded() -> None:
    assert ok(b'{"a": 1}') == {"a": 1}


def test_final_json_message_round_trips() -> None:
    message = final_json_message({"voxel": [1, 2, 3]}, "done")
    assert message.splitlines()[0] == "done"
    assert ok(message) == {"voxel": [1, 2, 3]}


# --------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("The count is 7.", "nothing is read out of prose"),
        ('```json\n{"count": 7}\n```', "nothing is read out of prose"),
        ('{"a": 1} {"b": 2}', "more than one JSON value"),
        ('{"a": 1} and that is all', "more than one JSON value"),
        ("[1, 2, 3]", "expected a JSON object"),
        ('"just a string"', "expected a JSON object"),
        ("42", "expected a JSON object"),
        ('{"a": NaN}', "NaN"),
        ('{"a": Infinity}', "Infinity"),
        ('{"a": -Infinity}', "-Infinity"),
        ('{"a": 1e400}', "finite"),
        ('{"a": 1, "a": 2}', "repeats the key"),
        ("", "empty"),
        ("   \n ", "empty"),
        ('{"a": 1', "not valid JSON"),
        (MARKER + ' {"a": 1}\n' + MARKER + ' {"a": 2}', "2 lines"),
        (MARKER + ' {"a": 1}\nthanks!', "text after the JSON object"),
        (MARKER + ' {"a": 1} {"b": 2}', "text after the JSON object"),
        ("prose\n" + MARKER + "\n{\"a\": 1}", "not followed by a JSON object on the same line"),
        ("prose\n" + MARKER + " [1, 2]", "not followed by a JSON object"),
        ("prose\n" + MARKER + ' {"a": NaN}', "NaN"),
        ("answer " + MARKER + ' {"a": 1}', "nothing is read out of prose"),
    ],
)
def test_refused_text(text: str, fragment: str) -> None:
    assert fragment in refused(text)


def test_not_utf8() -> None:
    assert "UTF-8" in refused(b"\xff\xfe{}")


@pytest.mark.parametrize(
    "value, fragment",
    [
        (None, "no answer"),
        (3, "expected a JSON object"),
        ([{"a": 1}], "expected a JSON object"),
        ({"a": float("nan")}, "finite"),
        ({"a": math.inf}, "finite"),
        ({1: "x"}, "keys are strings"),
        ({"a": {1, 2}}, "set"),
        ({"a": object()}, "object"),
        ({"a": b"raw"}, "bytes"),
        ({"a": 2**70}, "outside"),
        ({"a": np.array(["x"])}, "dtype"),
        ({"a": np.array([1.0, np.nan])}, "finite"),
    ],
)
def test_refused_objects(value, fragment: str) -> None:
    assert fragment in refused(value)


def test_too_deep() -> None:
    deep: dict = {}
    node = deep
    for _ in range(MAX_DEPTH + 5):
        node["x"] = {}
        node = node["x"]
    assert "nested deeper" in refused(deep)
    text = '{"x": ' * 5000 + "1" + "}" * 5000
    assert refused(text)  # absurd nesting in text: a reason, never a RecursionError


def test_too_many_values() -> None:
    assert "more than" in refused({"v": list(range(MAX_NODES + 1))})


def test_too_long_text() -> None:
    text = '{"a": "' + "x" * (MAX_TEXT_CHARS + 10) + '"}'
    assert "characters long" in refused(text)


def test_huge_integer_text_is_refused() -> None:
    assert refused('{"a": ' + "9" * 5000 + "}")


def test_to_json_value_names_the_place() -> None:
    with pytest.raises(ValueError, match=r"answer\['a'\]\[1\]"):
        to_json_value({"a": [1, float("nan")]})


# --------------------------------------------------------------------------- properties

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**62), max_value=2**62)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=5)


@settings(max_examples=150, deadline=None)
@given(json_objects)
def test_round_trips_dumped_objects(obj: dict) -> None:
    assert ok(json.dumps(obj)) == obj
    assert ok(json.dumps(obj, indent=2)) == obj
    assert ok(obj) == obj


@settings(max_examples=150, deadline=None)
@given(json_objects, st.text(max_size=40).filter(lambda t: MARKER not in t))
def test_round_trips_after_prose(obj: dict, prose: str) -> None:
    assert ok(final_json_message(obj, prose)) == obj


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=100) | json_values)
def test_never_raises(value) -> None:
    answer, why = parse_answer(value)
    assert (answer is None) != (why is None)
    if answer is not None:
        assert isinstance(answer, dict)


@settings(max_examples=100, deadline=None)
@given(json_objects, st.text(min_size=1, max_size=20).filter(lambda t: t.strip()))
def test_trailing_text_after_marker_object_is_refused(obj: dict, tail: str) -> None:
    text = final_json_message(obj, "prose").rstrip("\n") + "\n" + tail
    answer, why = parse_answer(text)
    assert answer is None and why
