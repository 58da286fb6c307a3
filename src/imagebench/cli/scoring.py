"""``imagebench score`` and ``imagebench scorer selftest|manifest``: argument parsing and printing only.

``score`` grades one answer file against one task contract with literal ground truth and prints
the per-field result as JSON, with the scorer the shipped manifest pins (as ``run`` does): a
modified comparator, parser or scorer, or a tampered manifest, blocks. Exit codes: 0 scored
(whether or not it matched), 1 the answer could not be read, 3 blocked (the contract cannot be
graded, or the scorer is not the pinned one), 2 usage (a file missing or not JSON).

``scorer selftest`` runs :func:`imagebench.scoring.selftest.run_selftest` over the cases (imagebench.cli.catalog):
a consistency check of the scorer against its own ground truth, never a result.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from imagebench.cli import UsageError

EXIT_SCORED, EXIT_UNREADABLE, EXIT_USAGE, EXIT_BLOCKED = 0, 1, 2, 3


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help="score one structured answer against a task contract (prints per-field matches as JSON)",
        description="Score ANSWER against the contract in TASK.json (literal ground truth). Exit 0 scored, "
        "1 unreadable answer, 2 usage error, 3 blocked.",
    )
    p.add_argument("--task", required=True, metavar="TASK.json", help="a task contract with literal ground truth")
    p.add_argument(
        "--answer", required=True, metavar="FILE", help="the answer: a JSON object or a final message ('-' reads stdin)"
    )
    p.set_defaults(func=_cmd_score)

    s = sub.add_parser("scorer", help="scorer self-test and manifest")
    ssub = s.add_subparsers(dest="scorer_command", metavar="SUBCOMMAND")
    t = ssub.add_parser("selftest", help="feed ground truth back into the scorer (a consistency check, never a result)")
    t.add_argument("--quiet", action="store_true", help="print only failures and the summary line")
    from imagebench.cli.catalog import add_catalog_flags

    add_catalog_flags(t)
    t.set_defaults(func=_cmd_selftest)
    m = ssub.add_parser("manifest", help="print the running scorer's manifest, write it, or check one")
    group = m.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="PATH", help="write scorer_manifest.json for the running scorer")
    group.add_argument(
        "--check", metavar="PATH", help="check a manifest against the running scorer (exit 1 on mismatch)"
    )
    m.set_defaults(func=_cmd_manifest)
    s.set_defaults(func=lambda args: _no_subcommand(s))


def _no_subcommand(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE


def _read_text(path: str, what: str) -> str:

    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{what} {path}: file is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{what} {path}: cannot be read ({exc})") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _cmd_score(args: argparse.Namespace) -> int:
    from imagebench.scoring.contract import score_pinned

    text = _read_text(args.task, "task")
    try:
        task: Any = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise UsageError(f"task {args.task}: not valid JSON ({exc})") from None
    answer = _read_text(args.answer, "answer")
    score = score_pinned(task, answer, None)
    print(json.dumps(score.to_json(), indent=2, ensure_ascii=False))
    if score.blocked is not None:
        print(f"imagebench score: blocked: {score.blocked}", file=sys.stderr)
        return EXIT_BLOCKED
    if score.unscorable is not None:
        print(f"imagebench score: unreadable answer: {score.unscorable}", file=sys.stderr)
        return EXIT_UNREADABLE
    return EXIT_SCORED


def _cmd_manifest(args: argparse.Namespace) -> int:
    from imagebench.scoring.manifest import (
        current_manifest,
        manifest_problems,
        write_scorer_manifest,
    )

    if args.write:
        manifest = write_scorer_manifest(args.write)
        print(f"wrote {args.write} (registry {manifest.registry_hash[:12]}, self-hash {manifest.self_hash[:12]})")
        return 0
    if args.check:
        problems = manifest_problems(args.check)
        if problems:
            for p in problems:
                print(f"mismatch: {p}")
            return 1
        print(f"{args.check}: intact, and it pins the running scorer")
        return 0
    print(json.dumps(current_manifest().model_dump(), indent=2, sort_keys=True))
    return 0


# --------------------------------------------------------------------------- selftest


def _builtin_cases(args: argparse.Namespace) -> Iterator[Any]:
    # The one place the scoring commands reach the cases: the catalog of the command's flags
    # (imagebench.cli.catalog). Lazy, so that cases that fail to load are a failed check.
    from imagebench.cli.catalog import catalog_from_args

    yield from catalog_from_args(args).offered()


def _cmd_selftest(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from imagebench.scoring.selftest import NOTE, run_selftest

    console = Console()
    if args.quiet:
        checks = run_selftest(cases=_builtin_cases(args))
    else:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("self-test", total=None)
            checks = run_selftest(
                cases=_builtin_cases(args),
                progress=lambda done, total: progress.update(task, completed=done, total=total),
            )
    failed = [c for c in checks if not c.ok]
    groups: dict[tuple[str, str], list[Any]] = {}
    for c in checks:
        groups.setdefault((c.kind, c.subject), []).append(c)
    shown = [(key, cs) for key, cs in groups.items() if not args.quiet or any(not c.ok for c in cs)]
    if shown:
        table = Table(title=NOTE, title_justify="left")
        for col in ("kind", "name", "agree", "verdict", "first disagreement"):
            table.add_column(col, overflow="fold")
        for (kind, name), cs in shown:
            bad = [c for c in cs if not c.ok]
            note = f"{bad[0].check}: expected {bad[0].expected}, got {bad[0].got} ({bad[0].note})" if bad else ""
            table.add_row(kind, name, f"{len(cs) - len(bad)}/{len(cs)}", "FAIL" if bad else "ok", note)
        console.print(table)
    summary = f"{len(checks) - len(failed)} of {len(checks)} self-test checks agree"
    print(f"{summary}; {NOTE}" if args.quiet else summary)
    return 0 if not failed else 1
