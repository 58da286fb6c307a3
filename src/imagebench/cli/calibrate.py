"""``imagebench calibrate``: run reference, baseline and nop on a case set; the calibration table.

The work is :func:`imagebench.executor.calibration.calibrate`; this module selects the cases as
``run`` does (:func:`imagebench.cli.run.selected_cases`) and renders the result: the markdown
table ``tools/calibration_table.py`` writes into docs/cases.md, a line per case whose
calibration does not hold, and ``--json``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from imagebench.cli.catalog import add_catalog_flags
from imagebench.cli.common import FIXTURE_KINDS, add_selection_args

if TYPE_CHECKING:
    from imagebench.executor.calibration import CaseCalibration, SubjectScore


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="run each case's reference, baseline and nop: do its limits pass the one and stop the others?",
        description="Run each selected case once with its reference solution, its naive baseline and nop, print "
        "the calibration table and write calibration.json into a calibration folder. Exit 0 when every case's "
        "calibration holds, 1 when one does not, 4 when one could not run here.",
    )
    add_selection_args(p, kind_choices=FIXTURE_KINDS)  # -k, --exclude, --skill, --kind: as run selects
    p.add_argument("--fixtures", choices=FIXTURE_KINDS, default="all", help="the old spelling of --kind")
    add_catalog_flags(p)  # with --cases/--bundle/--tree, only their cases
    p.add_argument("--out", metavar="DIR", help="outcome root (default: $IMAGEBENCH_OUTCOME_DIR or ./outcomes)")
    p.add_argument("--json", action="store_true", help="print calibration.json instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_calibrate)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from imagebench.cli.common import RUN_DIRS
    from imagebench.cli.run import selected_cases
    from imagebench.executor.calibration import calibrate

    chosen = selected_cases(args)
    selection: dict[str, object] = {"k": list(args.patterns or []), "fixtures": args.fixtures}
    if args.exclude:
        selection["exclude"] = list(args.exclude)
    if args.skills:
        selection["skills"] = list(args.skills)
    if len(args.bundle) == 1:
        selection["bundle"] = str(args.bundle[0])
    result = calibrate(chosen, out=args.out, progress=not (args.quiet or args.json), selection=selection)
    RUN_DIRS.append(result.folder)  # the supervised entry point checks it bears out the exit code
    if args.json:
        print(result.record.model_dump_json(indent=2))
        return result.exit_code
    print(render_table(result.cases))
    print()
    for line in verdict_lines(result.cases):
        print(line)
    print(summary_line(result.cases))
    print(f"calibration folder: {result.folder}")
    return result.exit_code


# --------------------------------------------------------------------------- the table


def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 100 or abs(value) < 0.001:
        return f"{value:.3g}"
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _margin(limit: float, value: float | None) -> str:
    if value is None:
        return "-"
    if value <= 0:
        return "exact" if limit == 0 else "∞"
    return f"{limit / value:.2g}x"


def _value(score: SubjectScore | None, metric: str) -> str:
    """A metric's value; for a structured answer, each field's verdict beside it."""
    if score is None:
        return "-"
    text = _num(score.values.get(metric))
    if score.fields:
        text += " (" + "; ".join(f"{k}: {v}" for k, v in score.fields.items()) + ")"
    return text


def _verdict(score: SubjectScore | None, missing: str = "-") -> str:
    if score is None:
        return missing
    return "pass" if score.passed else score.status


def _holds(row: CaseCalibration) -> str:
    if row.verdict == "ok":
        return "ok"
    return "; ".join(p.split(":", 1)[0] for p in row.problems)


def render_table(rows: Sequence[CaseCalibration]) -> str:
    """The markdown table: one line per metric, the case's cells on its first line."""
    lines = [
        "| skill | case | kind | metric | limit | reference | margin | baseline | baseline verdict | nop | calibration |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: (r.skill, r.kind != "synthetic", r.label)):
        case_id = row.label.split("/", 1)[1]
        if row.verdict == "not-run":
            lines.append(f"| {row.skill} | {case_id} | {row.kind} | (not run here: {row.not_run}) | | | | | | | |")
            continue
        ref, base, nop = (row.scores.get(s) for s in ("reference", "baseline", "nop"))
        for i, (metric, limit) in enumerate(row.limits.items() or [("-", math.nan)]):
            first = i == 0
            cells = [
                row.skill if first else "",
                f"`{case_id}`" if first else "",
                f"{row.kind}, {row.case_class}" if first else "",
                f"`{metric}`",
                _num(limit),
                _value(ref, metric),
                _margin(limit, ref.values.get(metric)) if ref else "-",
                _value(base, metric),
                _verdict(base, "no baseline") if first else "",
                _verdict(nop) if first else "",
                _holds(row) if first else "",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdict_lines(rows: Sequence[CaseCalibration]) -> list[str]:
    """A line per case whose calibration does not hold or did not run, naming why, in full."""
    out = []
    for row in rows:
        if row.verdict == "warning":
            out.append(f"warning: {row.label}: " + "; ".join(row.problems))
        elif row.verdict == "not-run":
            out.append(f"not run: {row.label}: {row.not_run}")
        if row.fingerprint is None:
            out.append(
                f"note: {row.label} is not remembered (its fingerprint cannot be taken: {row.fingerprint_problem})"
            )
    return out


def summary_line(rows: Sequence[CaseCalibration]) -> str:
    ran = [r for r in rows if r.verdict != "not-run"]
    ref_ok = sum(1 for r in ran if r.scores.get("reference") and r.scores["reference"].passed)
    base = [r for r in ran if "baseline" in r.scores]
    base_fail = sum(1 for r in base if r.scores["baseline"].verdict == "fail")
    nop_fail = sum(1 for r in ran if r.scores.get("nop") and not r.scores["nop"].passed)
    ok = sum(1 for r in ran if r.verdict == "ok")
    apart = f", {len(rows) - len(ran)} not run here" if len(rows) != len(ran) else ""
    return (
        f"{len(ran)} cases run{apart}: the reference passes {ref_ok}, the naive baseline fails {base_fail} of "
        f"{len(base)}, nop fails {nop_fail}; the calibration holds for {ok} of {len(ran)}."
    )
