"""What ``run`` prints: the results table, the tally line, and the console they go to."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.runs.verdict import RunResult


#: The width of a table printed to neither a terminal nor a COLUMNS-sized log: wide enough that
#: labels and reasons stay on one line, so a log reads like the terminal did.
PIPED_WIDTH = 160


def console_width() -> int | None:
    """The columns a table may use: ``$COLUMNS`` when set, the terminal's when stdout (or, when
    stdout is piped, stderr) is one, else :data:`PIPED_WIDTH`; None lets rich ask the terminal."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return None
    for stream in (sys.stderr, sys.stdin):
        try:
            if stream is not None and stream.isatty():
                return os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError):
            continue
    return PIPED_WIDTH


def console(stderr: bool = False, soft_wrap: bool = False) -> Any:
    """The rich console every command prints tables to (:func:`console_width`)."""
    from rich.console import Console

    return Console(highlight=False, soft_wrap=soft_wrap, width=console_width(), stderr=stderr)


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

    from imagebench.runs.columns import flags_of
    from imagebench.runs.verdict import status_counts

    table = Table(title=f"{result.record.subject}: {len(result.samples)} case(s) x {result.record.samples} sample(s)")
    table.add_column("case", overflow="fold")
    table.add_column("status")
    table.add_column("metrics (value / limit)", overflow="fold")
    table.add_column("pass")
    styles = {"pass": "green", "fail": "red", "blocked": "magenta", "error": "red", "skipped": "yellow"}
    verdicts = result.verdicts
    for label, samples in result.samples.items():
        verdict = verdicts[label]
        counts = status_counts(samples)  # a resumed case's kept samples from their columns (runs.columns)
        status = ", ".join(k if v == 1 and len(samples) == 1 else f"{k} x{v}" for k, v in counts.items())
        flagged = sorted(flags_of(samples))
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
        metric_lines += [escape(line) for line in answer_lines(samples, verdict)]
        if not metric_lines:
            metric_lines.append("-")
        passed = counts.get("ok", 0)
        mark = verdict if len(samples) == 1 or verdict == "skipped" else f"{verdict} ({passed}/{len(samples)})"
        table.add_row(label, status, "\n".join(metric_lines), f"[{styles[verdict]}]{mark}[/]")
    return table


def answer_lines(samples: list[Any], verdict: str) -> list[str]:
    """What the subject answered in the first sample that did not pass (the first sample when all
    did), and the scorer's reason for each field it got wrong (:mod:`imagebench.runs.explain`)."""
    from imagebench.runs.columns import first_not_ok
    from imagebench.runs.explain import answered, field_reasons, sample_number

    shown = first_not_ok(samples)
    if shown is None:
        return []
    which = f"sample {sample_number(shown.sample)} " if len(samples) > 1 else ""
    lines = [f"{which}left {name}: {_cut(what)}" for name, what in answered(shown)]
    detail = shown.detail or {}
    answer = detail.get("answer") if isinstance(detail.get("answer"), dict) else shown.answer
    if verdict != "pass":
        lines += [f"  {r.name}: {_cut(r.note)}" for r in field_reasons(answer) if r.verdict == "fail"][:8]
    return lines


def _cut(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def result_json(result: RunResult, report: str | None) -> dict[str, Any]:
    """``imagebench run --json``: the run's result as one JSON object (what the table shows, and
    per sample its status, reason, metrics, what the subject left, per-field reasons and where
    its stdout/stderr are)."""
    from imagebench.runs.explain import answered, field_reasons
    from imagebench.runs.layout import report_dir

    cases = []
    for label, samples in result.samples.items():
        rows = []
        for s in samples:
            detail = s.detail or {}
            answer = detail.get("answer") if isinstance(detail.get("answer"), dict) else s.answer
            folder = report_dir(result.run_dir, s.subject, s.namespace, s.case_id, s.sample)
            rows.append(
                {
                    "sample": s.sample,
                    "status": s.status,
                    "reason": s.reason,
                    "flags": list(s.flags),
                    "metrics": [m.model_dump(mode="json") for m in s.metrics],
                    "left": dict(answered(s)),
                    "fields": [{"field": r.name, "verdict": r.verdict, "why": r.note} for r in field_reasons(answer)],
                    "logs": {n: str(folder / n) for n in ("stdout.txt", "stderr.txt") if (folder / n).is_file()},
                }
            )
        summary = result.summaries.get(label)
        cases.append(
            {
                "label": label,
                "verdict": result.verdicts[label],
                "metric_means": dict(summary.metric_means) if summary is not None else {},
                "samples": rows,
            }
        )
    counts = {v: list(result.verdicts.values()).count(v) for v in ("pass", "fail", "blocked", "error", "skipped")}
    return {
        "run_dir": str(result.run_dir),
        "report": report,
        "subject": result.record.subject,
        "complete": result.record.complete,
        "exit_code": result.exit_code,
        "verdicts": counts,
        "statuses": dict(result.record.counts),
        "cases": cases,
    }
