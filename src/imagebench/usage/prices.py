"""A price table (``--prices FILE``): what a token in and a token out cost, per model id, and the
cost of a sample's usage under it.

The file is JSON, ``imagebench schema prices`` prints its schema::

    {"schema_version": 1, "currency": "USD",
     "models": {"anthropic/claude-sonnet-4-5": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}}

Prices are per million tokens. A model id is looked up as written, then without its provider
prefix (``anthropic/claude-x`` finds ``claude-x`` and the other way round), so a table written
for inspect's ids serves an agent CLI's report too.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from imagebench.usage.record import Usage

PRICES_VERSION = 1


class ModelPrice(BaseModel):
    """What one model's tokens cost, per million, in the table's currency."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: float = Field(ge=0, description="the price of a million input (prompt) tokens")
    output_per_mtok: float = Field(ge=0, description="the price of a million output (completion) tokens")

    @field_validator("input_per_mtok", "output_per_mtok")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("expected a finite price")
        return v


class PriceTable(BaseModel):
    """``--prices FILE``: the price of tokens per model id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = PRICES_VERSION
    currency: str = Field(default="USD", min_length=1, max_length=8)
    models: dict[str, ModelPrice] = Field(default_factory=dict)

    def price_of(self, model: str) -> ModelPrice | None:
        """The price of ``model``: its own entry, else the one its id names without (or with) a provider."""
        if model in self.models:
            return self.models[model]
        bare = model.rsplit("/", 1)[-1]
        for key, price in self.models.items():
            if key.rsplit("/", 1)[-1] == bare:
                return price
        return None


class PricesError(ValueError):
    """A price table file is missing or malformed (names the file and the field)."""


def read_prices(path: str | os.PathLike[str]) -> PriceTable:
    """The price table in ``path``; PricesError naming the file and the field."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PricesError(f"{path}: no such price table") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PricesError(f"{path}: not a JSON price table ({exc})") from None
    try:
        return PriceTable.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise PricesError(
            f"{path}: field {where!r}: {first['msg']} (expected "
            '{"schema_version": 1, "currency": "USD", "models": {ID: {"input_per_mtok": N, "output_per_mtok": N}}})'
        ) from None


CostSource = Literal["prices", "reported"]


def cost_of(usage: Usage | None, prices: PriceTable | None) -> tuple[float, CostSource] | None:
    """The cost of ``usage``: from ``prices`` when its model and both token counts are known and
    the table prices that model (``"prices"``); else the cost the agent reported (``"reported"``);
    else None (not known, never a zero)."""
    if usage is None:
        return None
    if prices is not None and usage.model is not None and usage.tokens_in is not None and usage.tokens_out is not None:
        price = prices.price_of(usage.model.id)
        if price is not None:
            cost = (usage.tokens_in.value * price.input_per_mtok + usage.tokens_out.value * price.output_per_mtok) / 1e6
            return cost, "prices"
    if usage.cost_usd is not None:
        return usage.cost_usd.value, "reported"
    return None
