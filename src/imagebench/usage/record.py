"""The usage record of one sample: tokens in and out, turns, tool calls, model id, wall time and
a cost the agent reported, each figure labelled ``measured`` (the harness counted it: the wall
time of the turn, the MCP tool calls it dispatched, the tokens an agent loop it drives counted)
or ``reported`` (the agent's own output said so: a CLI's JSON envelope).

A subject kind that parses an agent's report calls :func:`reported_usage`; the harness builds
what it measured with :func:`measured_usage`; :func:`merge_usage` keeps a measured figure over a
reported one and the reported value beside it (``UsageFigure.reported``), so a reader sees
where the agent's own account differs from the harness's.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Where a figure came from: counted by the harness, or said by the agent.
Source = Literal["measured", "reported"]
SOURCES: tuple[str, ...] = ("measured", "reported")

#: The figures a usage record holds, in the order a table shows them.
FIGURES: tuple[str, ...] = ("tokens_in", "tokens_out", "turns", "tool_calls", "wall_s", "cost_usd")
#: The figures that are counts (whole numbers); the others are seconds and dollars.
COUNTS: frozenset[str] = frozenset({"tokens_in", "tokens_out", "turns", "tool_calls"})


def _non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"usage figure {name!r}: expected a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"usage figure {name!r}: expected a finite number >= 0, got {value!r}")
    return number


class UsageFigure(BaseModel):
    """One figure and its source; ``reported``: what the agent said when the harness measured it too."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(ge=0)
    source: Source
    reported: float | None = Field(default=None, ge=0)

    @field_validator("value", "reported")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("expected a finite number")
        return v


class ModelFigure(BaseModel):
    """The model an agent ran, and who said so; ``reported``: the agent's own id when it differs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    source: Source
    reported: str | None = Field(default=None, max_length=200)


class Usage(BaseModel):
    """What one sample's subject spent. A figure nobody measured or reported is None (unknown,
    never a zero)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens_in: UsageFigure | None = None
    tokens_out: UsageFigure | None = None
    turns: UsageFigure | None = None
    tool_calls: UsageFigure | None = None
    wall_s: UsageFigure | None = None
    # a cost in US dollars the agent itself reported (a CLI's envelope); the cost a price table
    # gives is computed where it is shown (imagebench.usage.prices), never stored here
    cost_usd: UsageFigure | None = None
    model: ModelFigure | None = None

    def figure(self, name: str) -> UsageFigure | None:
        """The figure ``name`` (one of :data:`FIGURES`)."""
        if name not in FIGURES:
            raise KeyError(f"usage has no figure {name!r}; expected one of {', '.join(FIGURES)}")
        return getattr(self, name)

    def value(self, name: str) -> float | None:
        """The value of figure ``name``, None when unknown."""
        got = self.figure(name)
        return None if got is None else got.value

    @property
    def tokens(self) -> float | None:
        """Tokens in plus out; None when neither is known (one known: that one)."""
        parts = [f.value for f in (self.tokens_in, self.tokens_out) if f is not None]
        return sum(parts) if parts else None

    @property
    def empty(self) -> bool:
        return all(self.figure(n) is None for n in FIGURES) and self.model is None


def _usage(source: Source, model: str | None, figures: dict[str, Any]) -> Usage:
    values: dict[str, Any] = {}
    for name, raw in figures.items():
        if raw is None:
            continue
        number = _non_negative(name, raw)
        if name in COUNTS and number != int(number):
            raise ValueError(f"usage figure {name!r}: expected a whole number, got {raw!r}")
        values[name] = UsageFigure(value=number, source=source)
    if model is not None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"usage model: expected a non-empty model id, got {model!r}")
        values["model"] = ModelFigure(id=model.strip(), source=source)
    return Usage(**values)


def reported_usage(
    *,
    tokens_in: int | None = None,
    tokens_out: int | None = None,
    turns: int | None = None,
    tool_calls: int | None = None,
    wall_s: float | None = None,
    cost_usd: float | None = None,
    model: str | None = None,
) -> Usage:
    """What an agent's own output said it spent (every figure ``reported``). ValueError naming the
    figure when one is negative, not finite, not a number, or a count that is not whole."""
    return _usage(
        "reported",
        model,
        dict(
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            turns=turns,
            tool_calls=tool_calls,
            wall_s=wall_s,
            cost_usd=cost_usd,
        ),
    )


def measured_usage(
    *,
    tokens_in: int | None = None,
    tokens_out: int | None = None,
    turns: int | None = None,
    tool_calls: int | None = None,
    wall_s: float | None = None,
    model: str | None = None,
) -> Usage:
    """What the harness itself counted (every figure ``measured``); ValueError as :func:`reported_usage`."""
    return _usage(
        "measured",
        model,
        dict(tokens_in=tokens_in, tokens_out=tokens_out, turns=turns, tool_calls=tool_calls, wall_s=wall_s),
    )


def _merge_figure(a: UsageFigure | None, b: UsageFigure | None) -> UsageFigure | None:
    if a is None or b is None:
        return a if b is None else b
    if a.source == b.source:
        return b  # the later account of the same source
    measured, reported = (a, b) if a.source == "measured" else (b, a)
    return measured.model_copy(update={"reported": reported.value})


def _merge_model(a: ModelFigure | None, b: ModelFigure | None) -> ModelFigure | None:
    if a is None or b is None:
        return a if b is None else b
    if a.source == b.source:
        return b
    measured, reported = (a, b) if a.source == "measured" else (b, a)
    return measured.model_copy(update={"reported": reported.id if reported.id != measured.id else None})


def merge_usage(*accounts: Usage | None) -> Usage | None:
    """One usage from several accounts (None ones skipped): a measured figure wins over a reported
    one, which it keeps as ``reported``; of two of the same source, the later. None when no account."""
    got = [a for a in accounts if a is not None]
    if not got:
        return None
    out = got[0]
    for other in got[1:]:
        values: dict[str, Any] = {n: _merge_figure(out.figure(n), other.figure(n)) for n in FIGURES}
        values["model"] = _merge_model(out.model, other.model)
        out = Usage(**values)
    return out


#: The key of ``session.notes`` under which a subject's turn hands its usage to the harness: a
#: subject kind that parses an agent's report calls :func:`note_usage` with :func:`reported_usage`;
#: the runner merges it with what it measured into the sample summary's ``usage``.
USAGE_NOTE = "usage"


def note_usage(notes: dict[str, Any], usage: Usage) -> Usage:
    """Add ``usage`` to the account under ``notes[USAGE_NOTE]`` (merged, :func:`merge_usage`) and
    return the account. TypeError when ``usage`` is not a :class:`Usage`."""
    if not isinstance(usage, Usage):
        raise TypeError(f"note_usage: expected a Usage, got {type(usage).__name__}")
    held = notes.get(USAGE_NOTE)
    merged = merge_usage(held if isinstance(held, Usage) else None, usage)
    assert merged is not None
    notes[USAGE_NOTE] = merged
    return merged
