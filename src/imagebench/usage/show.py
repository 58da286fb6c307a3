"""Usage for people: one line per sample, and the totals over a run's samples (the report, the
CLI's tables and ``compare`` print these). Every figure says its source; an unknown one is left
out, never shown as a zero."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from imagebench.usage.prices import PriceTable, cost_of
from imagebench.usage.record import FIGURES, Usage

_LABELS = {
    "tokens_in": "tokens in",
    "tokens_out": "tokens out",
    "turns": "turns",
    "tool_calls": "tool calls",
    "wall_s": "wall",
    "cost_usd": "cost (reported)",
}


def _number(name: str, value: float) -> str:
    if name == "wall_s":
        return f"{value:.2f} s"
    if name == "cost_usd":
        return f"${value:.4f}"
    return f"{value:.0f}"


def usage_text(usage: Usage | None, prices: PriceTable | None = None) -> str:
    """``tokens in 500 (measured), tokens out 50 (measured), ..., model m (measured)``; ``-`` when
    nothing is known. A measured figure the agent also reported shows what it reported."""
    if usage is None or usage.empty:
        return "-"
    parts: list[str] = []
    for name in FIGURES:
        fig = usage.figure(name)
        if fig is None:
            continue
        said = f", it reported {_number(name, fig.reported)}" if fig.reported is not None else ""
        parts.append(f"{_LABELS[name]} {_number(name, fig.value)} ({fig.source}{said})")
    if usage.model is not None:
        said = f", it reported {usage.model.reported}" if usage.model.reported else ""
        parts.append(f"model {usage.model.id} ({usage.model.source}{said})")
    if prices is not None:
        cost = cost_of(usage, prices)
        if cost is not None and cost[1] == "prices":
            parts.append(f"cost {cost[0]:.4f} {prices.currency} (prices)")
    return ", ".join(parts)


@dataclass
class UsageTotals:
    """Sums over samples: each figure's total over the samples that know it, and how many do."""

    samples: int = 0
    totals: dict[str, float] = field(default_factory=dict)
    known: dict[str, int] = field(default_factory=dict)
    models: set[str] = field(default_factory=set)
    cost: float = 0.0
    costed: int = 0

    def add(self, usage: Usage | None, prices: PriceTable | None = None) -> None:
        self.samples += 1
        if usage is None:
            return
        for name in FIGURES:
            value = usage.value(name)
            if value is not None:
                self.totals[name] = self.totals.get(name, 0.0) + value
                self.known[name] = self.known.get(name, 0) + 1
        if usage.model is not None:
            self.models.add(usage.model.id)
        got = cost_of(usage, prices)
        if got is not None:
            self.cost += got[0]
            self.costed += 1

    def mean(self, name: str) -> float | None:
        n = self.known.get(name, 0)
        return self.totals[name] / n if n else None

    def text(self) -> str:
        """``tokens in 1000 over 2 of 2 samples, ...``; ``-`` when no sample knows any figure."""
        parts = [
            f"{_LABELS[n]} {_number(n, self.totals[n])} over {self.known[n]} of {self.samples} samples"
            for n in FIGURES
            if n in self.totals
        ]
        if self.models:
            parts.append("model " + ", ".join(sorted(self.models)))
        if self.costed:
            parts.append(f"cost {self.cost:.4f} over {self.costed} of {self.samples} samples")
        return ", ".join(parts) or "-"


def totals(usages: Iterable[Usage | None], prices: PriceTable | None = None) -> UsageTotals:
    out = UsageTotals()
    for usage in usages:
        out.add(usage, prices)
    return out
