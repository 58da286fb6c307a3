"""The usage record: figures labelled by source, merged measured over reported, bad figures refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from imagebench.usage import USAGE_NOTE, Usage, measured_usage, merge_usage, note_usage, reported_usage


def test_reported_figures_are_labelled_reported() -> None:
    u = reported_usage(tokens_in=100, tokens_out=20, turns=3, tool_calls=4, cost_usd=0.5, model="claude-x")
    assert {u.figure(n).source for n in ("tokens_in", "tokens_out", "turns", "tool_calls", "cost_usd")} == {"reported"}
    assert u.model is not None and (u.model.id, u.model.source) == ("claude-x", "reported")
    assert u.tokens == 120 and u.wall_s is None and not u.empty


def test_measured_wins_over_reported_and_keeps_what_the_agent_said() -> None:
    said = reported_usage(tokens_in=999, tool_calls=1, model="gpt-a")
    counted = measured_usage(tokens_in=100, tool_calls=5, wall_s=2.5, model="gpt-b")
    for merged in (merge_usage(said, counted), merge_usage(counted, said)):
        assert merged is not None
        assert merged.tokens_in is not None and merged.tokens_in.source == "measured"
        assert (merged.tokens_in.value, merged.tokens_in.reported) == (100, 999)
        assert merged.tool_calls is not None and (merged.tool_calls.value, merged.tool_calls.reported) == (5, 1)
        assert merged.model is not None and (merged.model.id, merged.model.reported) == ("gpt-b", "gpt-a")
    assert merge_usage(None, None) is None


@pytest.mark.parametrize(
    ("figure", "value"),
    [("tokens_in", -1), ("turns", 1.5), ("wall_s", float("nan")), ("tool_calls", "3"), ("cost_usd", True)],
)
def test_a_bad_figure_is_refused_naming_it(figure: str, value: object) -> None:
    with pytest.raises(ValueError, match=figure):
        reported_usage(**{figure: value})  # type: ignore[arg-type]


def test_an_unknown_field_on_disk_is_an_error() -> None:
    with pytest.raises(ValidationError):
        Usage.model_validate({"tokens": {"value": 1, "source": "measured"}})
    with pytest.raises(ValidationError):
        Usage.model_validate({"turns": {"value": 1, "source": "guessed"}})


def test_note_usage_accumulates_under_the_note() -> None:
    notes: dict[str, object] = {}
    note_usage(notes, reported_usage(tokens_in=10))
    note_usage(notes, measured_usage(wall_s=1.0))
    held = notes[USAGE_NOTE]
    assert isinstance(held, Usage) and held.value("tokens_in") == 10 and held.value("wall_s") == 1.0
    with pytest.raises(TypeError):
        note_usage(notes, {"tokens_in": 3})  # type: ignore[arg-type]
