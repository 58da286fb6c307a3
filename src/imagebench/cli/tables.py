"""What ``run`` prints: the results table, the tally line, and the console they go to."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.runs.verdict import RunResult


def console() -> Any:

    from rich.console import Console

    # In a log (not a terminal) rich would assume 80 columns and squeeze the labels; allow more.
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120
    return Console(highlight=False, soft_wrap=False, width=width)


def tally_line(result: RunResult) -> str:
    """One line of case verdicts (blocked and errored cases apart from failed ones) and sample statuses."""
    verdicts = list(result.verdicts.values())
    counts = {v: verdicts.count(v) for v in ("pass", "fail", "blocked", "error", "skipped")}
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(result.record.counts.items()))
    if not any(v != "skipped" for v in verdicts):
        return f"nothing was scored: {counts['skipped']} case(s) skipped ({statuses})"
    apart = "".join(f", {counts[v]} {v}" for v in ("blocked", "error") if counts[v])
    return f"{counts['pass']} passed, {counts['fail']} failed{apart}, {counts['skipped']} skipped ({statuses})"


#: The most of one reason the results table shows; summary.json keeps it whole.
REASON_SHOWN = 600


def shown_reason(reason: str, limit: int = REASON_SHOWN) -> str:
    """``reason`` whole when it fits, else its head and its tail around " ... ": a reason often
    ends with what it is about (the keys that exist, the file, the exit code), so the end stays."""
    if len(reason) <= limit:
        return reason
    tail = limit // 3
    return reason[: limit - tail - 5] + " ... " + reason[-tail:]


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4g}"


def results_table(result: RunResult) -> Any:
    """A rich table: one row per case with its status, each metric as value/limit, the first reason
    when it did not pass, and the verdict."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{result.record.subject}: {len(result.samples)} case(s) x {result.record.samples} sample(s)")
    table.add_column("case", overflow="fold")
    table.add_column("status")
    table.add_column("metrics (value / limit)", overflow="fold")
    table.add_column("pass")
    styles = {"pass": "green", "fail": "red", "blocked": "magenta", "error": "red", "skipped": "yellow"}
    verdicts = result.verdicts
    for label, samples in result.samples.items():
        verdict = verdicts[label]
        counts: dict[str, int] = {}
        for s in samples:
            counts[s.status] = counts.get(s.status, 0) + 1
        status = ", ".join(k if v == 1 and len(samples) == 1 else f"{k} x{v}" for k, v in counts.items())
        flagged = sorted({flag for s in samples for flag in s.flags})
        if flagged:
            status += "".join(f"\n[magenta]{flag}[/]" for flag in flagged)
        summary = result.summaries.get(label)
        metric_lines = []
        if summary is not None:
            limits = summary.extra.get("limits", {})
            for metric, mean in summary.metric_means.items():
                metric_lines.append(f"{metric} {_fmt(mean)} / {_fmt(limits.get(metric))}")
        reasons = summary.extra.get("reasons", []) if summary is not None else []
        if reasons and (verdict != "pass" or not metric_lines):
            metric_lines.append(f"[dim]{escape(shown_reason(reasons[0]))}[/dim]")
        if not metric_lines:
            metric_lines.append("-")
        passed = sum(1 for s in samples if s.status == "ok")
        mark = verdict if len(samples) == 1 or verdict == "skipped" else f"{verdict} ({passed}/{len(samples)})"
        table.add_row(label, status, "\n".join(metric_lines), f"[{styles[verdict]}]{mark}[/]")
    return table
