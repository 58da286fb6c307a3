"""``imagebench score`` and ``imagebench scorer selftest|manifest``.

``score`` grades one answer file against one task contract with literal ground truth and prints
the per-field result as JSON. Exit codes: 0 scored (whether or not it matched), 1 the answer
could not be read, 3 blocked (the contract cannot be graded), 2 usage (a file missing or not JSON).

``scorer selftest`` is a consistency check of the scorer against its own ground truth: it feeds
each built-in structured case's truth back as the answer, and each comparator its worked
example. It is never a result and does not belong in a leaderboard.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_SCORED, EXIT_UNREADABLE, EXIT_USAGE, EXIT_BLOCKED = 0, 1, 2, 3
SELFTEST_NOTE = (
    "scorer self-test: a consistency check that feeds ground truth back into the scorer; "
    "it is not a model result and never belongs in a leaderboard"
)


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
    from imagebench.cli import UsageError

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
    from imagebench.cli import UsageError
    from imagebench.scoring.contract import score_answer

    text = _read_text(args.task, "task")
    try:
        task: Any = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise UsageError(f"task {args.task}: not valid JSON ({exc})") from None
    answer = _read_text(args.answer, "answer")
    score = score_answer(task, answer, None)
    print(json.dumps(score.to_json(), indent=2, ensure_ascii=False))
    if score.blocked is not None:
        print(f"imagebench score: blocked: {score.blocked}", file=sys.stderr)
        return EXIT_BLOCKED
    if score.unscorable is not None:
        print(f"imagebench score: unreadable answer: {score.unscorable}", file=sys.stderr)
        return EXIT_UNREADABLE
    return EXIT_SCORED


def _cmd_manifest(args: argparse.Namespace) -> int:
    from imagebench.scoring.manifest import current_manifest, manifest_problems, write_scorer_manifest

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


def selftest_rows(progress: Any = None) -> list[dict[str, Any]]:
    """Every self-test check as a row ``{check, subject, expected, got, ok, note}``."""
    from imagebench.scoring.comparators import COMPARATORS, EXAMPLES
    from imagebench.scoring.manifest import check_scorer_manifest, packaged_manifest_path

    rows: list[dict[str, Any]] = []
    problem = check_scorer_manifest(packaged_manifest_path())
    rows.append(
        {
            "check": "manifest",
            "subject": "imagebench/data/scorer_manifest.json",
            "expected": "pins the running scorer",
            "got": "intact" if problem is None else "mismatch",
            "ok": problem is None,
            "note": problem or "",
        }
    )
    for name in sorted(COMPARATORS):
        rows.extend(_comparator_rows(name, EXAMPLES.get(name)))
    try:
        from imagebench.cases import all_cases

        cases = [c for c in all_cases() if c.answer is not None]
    except Exception as exc:
        rows.append(
            {"check": "cases", "subject": "built-in suite", "expected": "loads", "got": "error", "ok": False,
             "note": f"{type(exc).__name__}: {exc}"}
        )  # fmt: skip
        return rows
    if not cases:
        rows.append(
            {"check": "cases", "subject": "built-in suite", "expected": "structured cases", "got": "none",
             "ok": False, "note": "no built-in case carries a task contract"}
        )  # fmt: skip
    task = progress.add_task("self-test", total=len(cases)) if progress is not None else None
    for case in cases:
        rows.extend(_case_rows(case))
        if progress is not None:
            progress.advance(task)
    return rows


def _comparator_rows(name: str, example: Any) -> list[dict[str, Any]]:
    from imagebench.scoring.comparators import COMPARATORS, ContractError, exemplar_answer

    if example is None:
        return [{"check": "comparator", "subject": name, "expected": "a worked example", "got": "none",
                 "ok": False, "note": "every comparator needs an entry in EXAMPLES"}]  # fmt: skip
    gold, config, good, bad = example
    func = COMPARATORS[name]
    out = []
    for label, pred, want in (("gold fed back", exemplar_answer(name, gold), True), ("example match", good, True),
                              ("example mismatch", bad, False)):  # fmt: skip
        try:
            result = func(pred, gold, config)
            got, note = result.matched, result.reason
        except ContractError as exc:
            got, note = None, f"blocked: {exc}"
        out.append(
            {"check": f"comparator: {label}", "subject": name, "expected": "match" if want else "mismatch",
             "got": {True: "match", False: "mismatch", None: "blocked"}[got], "ok": got is want, "note": note}
        )  # fmt: skip
    return out


def _case_rows(case: Any) -> list[dict[str, Any]]:
    from imagebench.fixture import Attempt
    from imagebench.scoring.answer import final_json_message
    from imagebench.scoring.contract import Blocked, exemplar

    ok, why = case.available()
    if not ok:
        return [{"check": "case", "subject": case.label, "expected": "answer_score 1.0", "got": "skipped",
                 "ok": True, "note": f"not available here: {why}"}]  # fmt: skip
    try:
        fixture = case.build()
        answer = exemplar(case.answer, fixture.truth)
    except Blocked as exc:
        return [{"check": "case", "subject": case.label, "expected": "answer_score 1.0", "got": "blocked",
                 "ok": False, "note": str(exc)}]  # fmt: skip
    except Exception as exc:
        return [{"check": "case", "subject": case.label, "expected": "answer_score 1.0", "got": "error",
                 "ok": False, "note": f"{type(exc).__name__}: {exc}"}]  # fmt: skip
    rows = []
    trials = (
        ("truth as the answer", Attempt("selftest", arrays={"answer": answer}), 1.0),
        ("truth as a final message", Attempt("selftest", notes={"final_message": final_json_message(answer)}), 1.0),
        ("empty answer", Attempt("selftest", arrays={"answer": {}}), 0.0),
    )
    for label, attempt, want in trials:
        try:
            outcome = case.verify(fixture, attempt)
            info = outcome.detail.get("answer", {})
            got = info.get("answer_score")
            note = outcome.detail.get("blocked") or info.get("unscorable") or ""
            if not note and got != want:
                note = "; ".join(f"{f}: {r['reason']}" for f, r in info.get("fields", {}).items() if not r["matched"])
        except Exception as exc:
            got, note = None, f"{type(exc).__name__}: {exc}"
        rows.append(
            {"check": f"case: {label}", "subject": case.label, "expected": f"answer_score {want:.1f}",
             "got": "blocked" if got is None else f"answer_score {got:.1f}", "ok": got == want, "note": note}
        )  # fmt: skip
    return rows


def _cmd_selftest(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    console = Console()
    if args.quiet:
        rows = selftest_rows()
    else:
        with Progress(console=console, transient=True) as progress:
            rows = selftest_rows(progress)
    failed = [r for r in rows if not r["ok"]]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["check"].split(":")[0], r["subject"]), []).append(r)
    shown = [(key, rs) for key, rs in groups.items() if not args.quiet or any(not r["ok"] for r in rs)]
    if shown:
        table = Table(title=SELFTEST_NOTE, title_justify="left")
        for col in ("kind", "name", "agree", "verdict", "first disagreement"):
            table.add_column(col, overflow="fold")
        for (kind, name), rs in shown:
            bad = [r for r in rs if not r["ok"]]
            note = ""
            if bad:
                note = f"{bad[0]['check']}: expected {bad[0]['expected']}, got {bad[0]['got']} ({bad[0]['note']})"
            table.add_row(kind, name, f"{len(rs) - len(bad)}/{len(rs)}", "FAIL" if bad else "ok", note)
        console.print(table)
    summary = f"{len(rows) - len(failed)} of {len(rows)} self-test checks agree"
    print(f"{summary}; {SELFTEST_NOTE}" if args.quiet else summary)
    return 0 if not failed else 1
