"""The bundle commands: ``case add``, ``reindex`` and ``coverage``.

``--bundle DIR`` of ``list``, ``show``, ``run`` and the others is read by the catalog
(:mod:`imagebench.cli.catalog`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from imagebench.cli import UsageError


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("case", help="author cases: in a skill bundle (case add), in a fixture tree (case new)")
    case_sub = p.add_subparsers(dest="case_command", metavar="ACTION")
    add = case_sub.add_parser(
        "add", help="scaffold evals/fixtures/CASE/ (case.json, prompt.md, files/, expected/answer-key.md)"
    )
    add.add_argument("bundle", metavar="BUNDLE", help="the skill's bundle folder (its name is the skill id)")
    add.add_argument("case", metavar="CASE", help="the new case's id (a lowercase name; also its folder name)")
    add.add_argument(
        "--class",
        dest="case_class",
        default="golden",
        metavar="CLASS",
        help="golden (default), refusal, empty, rerun, hard-case or trigger",
    )
    add.add_argument("--risks", default="", metavar="IDS", help="comma-separated claim ids, e.g. IN-1,RE-2")
    add.set_defaults(func=_cmd_case_add)
    from imagebench.cli.casenew import add_new

    add_new(case_sub)  # case new: a curated case in a fixture tree, from files
    p.set_defaults(func=_cmd_case_help, _case_parser=p)

    p = sub.add_parser("reindex", help="check a bundle: print every warning about its claims and cases (exit 0)")
    p.add_argument("bundle", metavar="BUNDLE")
    p.set_defaults(func=_cmd_reindex)

    p = sub.add_parser("coverage", help="per claim: coverage from the bundle's folders, validation from graded runs")
    p.add_argument("bundle", metavar="BUNDLE")
    p.add_argument("--runs", nargs="+", default=[], metavar="RUN", help="run folders (run-<stamp>/) or a panel's sittings (sitting-<stamp>/) to validate against")
    p.add_argument("--subject", metavar="NAME", help="count only this subject's samples (its folder name in the run)")
    p.add_argument("--json", action="store_true", help="print the rows and warnings as JSON")
    p.set_defaults(func=_cmd_coverage)


def _cmd_case_help(args: argparse.Namespace) -> int:
    args._case_parser.print_help()
    return 2


def _cmd_case_add(args: argparse.Namespace) -> int:
    from imagebench.bundle.casefile import (
        FIXTURES_DIR,
        OutsideBundleError,
        scaffold_case,
    )
    from imagebench.bundle.claims import read_claims, risk_band, unbanded_warning
    from imagebench.case.model import CASE_CLASSES, NAME_PATTERN

    bundle = Path(args.bundle)
    if args.case_class not in CASE_CLASSES:
        raise UsageError(f"--class {args.case_class!r} is not a case class; valid: {', '.join(CASE_CLASSES)}")
    if not NAME_PATTERN.match(args.case):
        raise UsageError(f"case id {args.case!r} must be a lowercase name (letters, digits, '.', '_' or '-')")
    skill = bundle.resolve().name
    if not NAME_PATTERN.match(skill):
        raise UsageError(f"bundle folder {bundle} is named {skill!r}; its name is the skill id and must be lowercase")
    if bundle.exists() and not bundle.is_dir():
        raise UsageError(f"{bundle} exists and is not a folder")
    risks = [r.strip() for r in args.risks.split(",") if r.strip()]
    case_dir = bundle / FIXTURES_DIR / args.case
    if case_dir.exists():
        print(f"imagebench case add: {case_dir} already exists; nothing was changed", file=sys.stderr)
        return 1
    new_bundle = not bundle.exists()
    try:
        created = scaffold_case(bundle, args.case, args.case_class, risks)
    except OutsideBundleError as exc:
        print(f"imagebench case add: {exc}; nothing was changed", file=sys.stderr)
        return 1
    if new_bundle:
        print(f"created bundle folder {bundle} (skill {skill})")
    print(f"created case {skill}/{args.case} (class: {args.case_class}) in {case_dir}/")
    for path in created:
        print(f"  {path.relative_to(case_dir)}")
    claims = read_claims(bundle)
    for rid in risks:
        if risk_band(rid) is None:
            print(f"warning: {unbanded_warning('--risks', rid)}", file=sys.stderr)
        elif claims.source != "none" and rid not in claims.ids():
            print(f"warning: --risks names {rid!r}, which is not a claim of this bundle ({claims.source})", file=sys.stderr)
    print("next: write prompt.md and the answer key, add pixels/layers/answer to case.json, then imagebench reindex")
    return 0


def _load(bundle: str) -> Any:
    from imagebench.bundle.load import BundleError, load_bundle

    try:
        return load_bundle(bundle)
    except BundleError as exc:
        raise UsageError(str(exc)) from None


def _cmd_reindex(args: argparse.Namespace) -> int:
    bundle = _load(args.bundle)
    claims = bundle.claims
    if claims.source == "none":
        print(f"bundle {bundle.skill_id}: no claims (no usable evals.json, no evals/risk-map.md)")
    else:
        print(f"bundle {bundle.skill_id}: {len(claims.claims)} claim(s) from {claims.source} ({claims.path})")
    print(f"  {len(bundle.folders)} case folder(s): {len(bundle.cases)} runnable, {len(bundle.skipped)} cannot run")
    for case_id, reason in bundle.skipped:
        print(f"  cannot run {case_id}: {reason}")
    from imagebench.bundle.keys import bundle_key_warnings
    from imagebench.executor.calibrated import calibration_notes

    calibration, summary = calibration_notes(bundle.cases)
    warnings = [*bundle.warnings, *bundle_key_warnings(bundle.cases), *calibration]
    if warnings:
        print(f"{len(warnings)} warning(s):")
        for w in warnings:
            print(f"warning: {w}")
    else:
        print("no warnings")
    if bundle.cases:
        print(summary)
    return 0


def _cmd_coverage(args: argparse.Namespace) -> int:
    from imagebench.bundle.coverage import coverage_report
    from imagebench.bundle.load import BundleError

    try:
        report = coverage_report(args.bundle, args.runs, subject=args.subject)
    except BundleError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    bundle = report.bundle
    title = f"{bundle.skill_id}: {len(report.rows)} claim(s) from {bundle.claims.source}"
    if report.runs:
        title += f", validated against {len(report.runs)} run(s)"
    table = Table(title=title)
    for col in ("claim", "band", "coverage", "cases", "validation", "samples passed"):
        table.add_column(col, overflow="fold")
    styles = {"covered": "green", "partial": "yellow", "gap": "red"}
    vstyles = {"validated": "green", "partial": "yellow", "failed": "red", "unvalidated": "dim"}
    for row in report.rows:
        def shown(case_id: str, row: Any = row) -> str:
            verdict = row.case_verdicts.get(case_id)
            return f"{case_id} ({verdict})" if report.runs and verdict else case_id

        lines = [shown(c) for c in row.realized] + [f"{m} (missing)" for m in row.missing]
        listed = [c for c in row.cases if c not in row.realized]
        lines += [f"{shown(c)} [dim](lists it)[/]" for c in listed]
        if not row.proof_specs:
            lines.insert(0, "[dim](no proof specs)[/]")
        graded = len(row.passed_samples) + len(row.failed_samples)
        table.add_row(
            row.claim_id,
            row.band or "?",
            f"[{styles[row.coverage]}]{row.coverage}[/]",
            "\n".join(lines),
            f"[{vstyles[row.validation]}]{row.validation}[/]",
            f"{len(row.passed_samples)}/{graded}" if graded else "-",
        )
    console = Console(highlight=False)
    console.print(table)
    for w in [*bundle.warnings, *report.warnings]:
        console.print(f"[yellow]warning:[/yellow] {w}", soft_wrap=True)
    return 0
