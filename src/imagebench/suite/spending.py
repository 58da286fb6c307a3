"""What each side of a comparison spent: its samples' usage summed (:class:`UsageSide`), and the
cost-normalised figures ``compare`` shows beside the pass rates: the cost of a sample and of a
pass, under a price table (``--prices FILE``) or, without one, what the agents reported. A cost
is given only when every sample's cost is known: a sum over some samples is never shown as the
run's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from imagebench.suite.comparison import Comparison, UsageSide
from imagebench.usage import FIGURES, PriceTable, cost_of

if TYPE_CHECKING:
    from imagebench.records import SampleSummary
    from imagebench.runs.brief import ScoredBrief


class LoadedRun(Protocol):
    """What the usage of a side reads of a loaded run (:class:`imagebench.suite.compare.LoadedRun`):
    its samples by case label and sample number; named here, so that compare's own helper never
    imports compare."""

    @property
    def samples(self) -> Mapping[str, Mapping[int, Any]]: ...


def usage_side(samples: Iterable[SampleSummary | ScoredBrief], prices: PriceTable | None = None) -> UsageSide:
    """The usage of ``samples`` (a run's usable ones) as one side of a comparison."""
    got = list(samples)
    side = UsageSide(samples=len(got), currency=prices.currency if prices is not None else "USD")
    sources: dict[str, set[str]] = {}
    models: set[str] = set()
    costs: list[float] = []
    cost_sources: set[str] = set()
    for s in got:
        side.passed += int(s.status == "ok" and s.passed)
        usage = s.usage
        if usage is None:
            continue
        for name in FIGURES:
            fig = usage.figure(name)
            if fig is not None:
                side.totals[name] = side.totals.get(name, 0.0) + fig.value
                side.known[name] = side.known.get(name, 0) + 1
                sources.setdefault(name, set()).add(fig.source)
        if usage.model is not None:
            models.add(usage.model.id)
        cost = cost_of(usage, prices)
        if cost is not None:
            costs.append(cost[0])
            cost_sources.add(cost[1])
    side.sources = {k: sorted(v) for k, v in sources.items()}
    side.models = sorted(models)
    if got and len(costs) == len(got):
        side.cost = sum(costs)
        side.cost_source = sorted(cost_sources)
        side.cost_per_sample = side.cost / len(got)
        side.cost_per_pass = side.cost / side.passed if side.passed else None
    tokens_known = min(side.known.get("tokens_in", 0), side.known.get("tokens_out", 0))
    if got and tokens_known == len(got) and side.passed:
        side.tokens_per_pass = (side.totals["tokens_in"] + side.totals["tokens_out"]) / side.passed
    return side


def _case_cost(run: LoadedRun, label: str, prices: PriceTable | None) -> float | None:
    samples = list(run.samples.get(label, {}).values())
    costs = [cost_of(s.usage, prices) for s in samples]
    if not samples or any(c is None for c in costs):
        return None
    return sum(c[0] for c in costs if c is not None) / len(samples)


def with_usage(result: Comparison, a: LoadedRun, b: LoadedRun, prices: PriceTable | None) -> Comparison:
    """``result`` with each side's usage and each compared case's mean cost per sample."""
    for run, side in ((a, result.a), (b, result.b)):
        if side is not None:
            side.usage = usage_side((s for got in run.samples.values() for s in got.values()), prices)
    for case in result.cases:
        case.cost_a = _case_cost(a, case.label, prices)
        case.cost_b = _case_cost(b, case.label, prices)
    return result


def usage_rows(result: Comparison) -> list[tuple[str, ...]]:
    """The usage table ``compare`` prints: one row a side (figures with their sources, cost, cost per pass)."""
    rows: list[tuple[str, ...]] = []
    for name, side in (("A", result.a), ("B", result.b)):
        u = side.usage if side is not None else None
        if u is None:
            continue
        figures = []
        for fig in ("tokens_in", "tokens_out", "turns", "tool_calls", "wall_s"):
            if fig in u.totals:
                value = f"{u.totals[fig]:.2f} s" if fig == "wall_s" else f"{u.totals[fig]:.0f}"
                label = "wall" if fig == "wall_s" else fig.replace("_", " ")
                figures.append(f"{label} {value} ({'/'.join(u.sources.get(fig, []))}, {u.known[fig]}/{u.samples})")
        money: Any = "-" if u.cost is None else f"{u.cost:.4f} {u.currency} ({'/'.join(u.cost_source)})"
        per_pass = "-" if u.cost_per_pass is None else f"{u.cost_per_pass:.4f}"
        rows.append(
            (name, ", ".join(u.models) or "-", "\n".join(figures) or "-", f"{u.passed}/{u.samples}", money, per_pass)
        )
    return rows
