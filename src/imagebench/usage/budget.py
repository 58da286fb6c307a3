"""The budget of one sample (``--max-tokens``, ``--max-cost``) and whether a usage exceeds it.

A budget is checked against what the harness can count: the tokens an agent loop it drives
measured, or what the agent reported (a figure of either source counts). A sample that spent
more ends ``budget-exceeded`` (a failure, like a timeout). A budget nothing measured cannot be
checked: :func:`unchecked` says which, and the summary flags it (``budget-unmeasured``), never
a pass of the budget by default.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, field_validator

from imagebench.usage.prices import PriceTable, cost_of
from imagebench.usage.record import Usage

#: the flag of a sample whose budget could not be checked (nothing measured or reported it)
UNMEASURED_FLAG = "budget-unmeasured"


class Budget(BaseModel):
    """What one sample may spend: tokens in plus out, and a cost (a price table's, else the agent's report)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(default=None, gt=0)
    max_cost: float | None = Field(default=None, gt=0)
    prices: PriceTable | None = None

    @field_validator("max_cost")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("expected a finite cost")
        return v

    @property
    def empty(self) -> bool:
        return self.max_tokens is None and self.max_cost is None

    def exceeded(self, usage: Usage | None) -> str | None:
        """Why ``usage`` is over this budget (the budget and the figure, with its source), or None."""
        if usage is None:
            return None
        if self.max_tokens is not None and usage.tokens is not None and usage.tokens > self.max_tokens:
            sources = sorted({f.source for f in (usage.tokens_in, usage.tokens_out) if f is not None})
            return f"budget-exceeded: {usage.tokens:.0f} tokens ({'/'.join(sources)}) > --max-tokens {self.max_tokens}"
        if self.max_cost is not None:
            cost = cost_of(usage, self.prices)
            if cost is not None and cost[0] > self.max_cost:
                return f"budget-exceeded: cost {cost[0]:.4g} ({cost[1]}) > --max-cost {self.max_cost:g}"
        return None

    def unchecked(self, usage: Usage | None) -> list[str]:
        """The limits of this budget that ``usage`` gives nothing to check against."""
        out: list[str] = []
        if self.max_tokens is not None and (usage is None or usage.tokens is None):
            out.append("max_tokens")
        if self.max_cost is not None and cost_of(usage, self.prices) is None:
            out.append("max_cost")
        return out
