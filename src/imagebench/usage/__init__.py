"""Usage and cost of a sample: what a subject spent (tokens, turns, tool calls, model, wall time),
each figure labelled by where it came from; what a token costs (a price table); the budget a
sample may spend (``--max-tokens``, ``--max-cost``).

The lowest floor of the core with :mod:`imagebench.records` (whose sample summary holds a
:class:`Usage`), so that a subject kind (``imagebench.subjects``) that reads an agent's own
report of its usage can build one: :func:`reported_usage`.
"""

from __future__ import annotations

from imagebench.usage.budget import UNMEASURED_FLAG, Budget
from imagebench.usage.prices import ModelPrice, PricesError, PriceTable, cost_of, read_prices
from imagebench.usage.record import (
    FIGURES,
    SOURCES,
    USAGE_NOTE,
    ModelFigure,
    Source,
    Usage,
    UsageFigure,
    measured_usage,
    merge_usage,
    note_usage,
    reported_usage,
)

__all__ = [
    "UNMEASURED_FLAG",
    "Budget",
    "ModelPrice",
    "PriceTable",
    "PricesError",
    "cost_of",
    "read_prices",
    "FIGURES",
    "SOURCES",
    "USAGE_NOTE",
    "ModelFigure",
    "Source",
    "Usage",
    "UsageFigure",
    "measured_usage",
    "merge_usage",
    "note_usage",
    "reported_usage",
]
