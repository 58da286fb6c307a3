"""The command line's usage and cost flags: ``--prices FILE`` (``compare``, ``report``),
``--max-tokens`` and ``--max-cost`` (``run``), and the usage table ``compare`` prints."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from imagebench.cli import UsageError

if TYPE_CHECKING:
    from imagebench.suite.comparison import Comparison
    from imagebench.usage import Budget, PriceTable


def add_prices_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prices",
        metavar="FILE",
        help="a price table (JSON: imagebench schema prices) per model id, per million tokens in and out: adds the cost",
    )


def prices_from_args(args: argparse.Namespace) -> PriceTable | None:
    """The table ``--prices`` names (None without it); UsageError naming the file and the field."""
    from imagebench.usage import PricesError, read_prices

    path = getattr(args, "prices", None)
    if not path:
        return None
    try:
        return read_prices(path)
    except PricesError as exc:
        raise UsageError(f"--prices {exc}") from None


def add_budget_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("budget of each sample (docs/running.md#usage-and-cost; past it: budget-exceeded)")
    g.add_argument(
        "--max-tokens", type=int, metavar="N", help="tokens in plus out a sample may spend, as measured or reported"
    )
    g.add_argument(
        "--max-cost",
        type=float,
        metavar="X",
        help="what a sample may cost (with --prices, else the agent's own report)",
    )
    add_prices_flag(g)  # type: ignore[arg-type]


def budget_from_args(args: argparse.Namespace) -> Budget | None:
    """The budget ``--max-tokens``/``--max-cost`` give (None without either); UsageError saying what is wrong."""
    from pydantic import ValidationError

    from imagebench.usage import Budget

    max_tokens, max_cost = getattr(args, "max_tokens", None), getattr(args, "max_cost", None)
    prices = prices_from_args(args)
    if max_tokens is None and max_cost is None:
        return None
    try:
        return Budget(max_tokens=max_tokens, max_cost=max_cost, prices=prices)
    except ValidationError as exc:
        first = exc.errors()[0]
        flag = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "--max-tokens/--max-cost"
        raise UsageError(f"{flag}: {first['msg']}, got {first.get('input')!r}") from None


def print_usage_table(result: Comparison, console: Any) -> None:
    """What each side spent, with the cost-normalised columns when a cost is known."""
    from rich.markup import escape as esc
    from rich.table import Table

    from imagebench.suite.spending import usage_rows

    rows = usage_rows(result)
    if not rows:
        return
    table = Table(title="usage (each figure: total (sources, samples that know it))")
    for col in ("run", "model", "figures", "passed", "cost", "cost per pass"):
        table.add_column(col)
    for row in rows:
        table.add_row(*(esc(c) for c in row))
    console.print(table)
