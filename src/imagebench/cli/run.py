"""``imagebench list``, ``show`` and ``run`` (with ``--resume``): arguments in, domain calls, tables out."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import TYPE_CHECKING

from imagebench.cli import UsageError
from imagebench.cli.catalog import (
    add_catalog_flags,
    catalog_from_args,
    find_case,
    refuse_empty_sources,
    sources_given,
    trees_line,
)
from imagebench.cli.common import (
    FIXTURE_KINDS,
    RUN_DIRS,
    add_sealed_args,
    add_selection_args,
    add_subject_flags,
    checked_run_args,
    interrupted,
    parallel_from_args,
    print_result,
    run_from_args,
    sandbox_flags_given,
    seal_from_args,
    select_from_args,
    selection_text,
)
from imagebench.cli.tables import console as _console

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from imagebench.catalog import Catalog


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        help="list the cases (built-in, installed packages', the user's tree's; or only those of the sources given), "
        "each with its source and fixture tree, their availability here and coverage warnings",
    )
    add_catalog_flags(p)
    add_selection_args(p, kind_choices=FIXTURE_KINDS)
    p.add_argument(
        "--json",
        action="store_true",
        help="print the cases as JSON (label, skill, kind, class, source, tree, available)",
    )
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("show", help="show what a subject of one case sees (never its truth)")
    p.add_argument("label", help="case label, <namespace>/<case_id>")
    add_catalog_flags(p)
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("run", help="run cases with a subject and write a run folder")
    add_selection_args(p, kind_choices=FIXTURE_KINDS)
    p.add_argument(
        "--subject",
        help="reference | nop | baseline | python:package.module:function | command:<shell command> | claude-code[:MODEL] | "
        "codex[:MODEL] | gemini-cli[:MODEL] | agent-cli:<shell command> (default: reference; "
        "with --resume, only when run.json keeps the subject without its paths)",
    )
    p.add_argument("--samples", type=int, default=1, metavar="N", help="samples per case (default 1)")
    p.add_argument("--fixtures", choices=FIXTURE_KINDS, default="all", help="the old spelling of --kind")
    p.add_argument("--out", metavar="DIR", help="outcome root (default: $IMAGEBENCH_OUTCOME_DIR or ./outcomes)")
    p.add_argument("--timeout", type=float, metavar="S", help="subject time limit in seconds (default: each case's)")
    from imagebench.cli.usage import add_budget_flags

    add_budget_flags(p)  # --max-tokens, --max-cost, --prices
    p.add_argument(
        "--quiet", action="store_true", help="no progress bar and no table; the tally and the run folder only"
    )
    add_catalog_flags(p)  # with --cases/--bundle/--tree, run selects among their cases only
    p.add_argument(
        "--suite",
        metavar="SUITE",
        help="run a pinned suite (a suite file, or NAME / NAME@REVISION in ./suites); verified first (imagebench.suite)",
    )
    p.add_argument(
        "--sample", default="all", metavar="POLICY", help="with --suite: all | first:N | seeded:N (default all)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="with --suite: the replicate seed of the assignment (default 0)",
    )
    p.add_argument(
        "--suites-dir",
        metavar="DIR",
        help="with --suite: suite files and aliases.json (default: $IMAGEBENCH_SUITES or ./suites)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run the units on a local dask cluster of N processes (imagebench.executor)",
    )
    p.add_argument(
        "--scheduler", metavar="ADDR", help="run the units on the workers of an existing dask cluster, tcp://HOST:PORT"
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="take up an interrupted run: run only its units without a complete summary (subject, cases and samples from run.json)",
    )
    p.add_argument("--no-report", action="store_true", help="do not write report.html into the run folder at the end")
    p.add_argument(
        "--artifacts",
        choices=("auto", "all", "failures", "none"),
        default="auto",
        help="which samples keep their images: all, failures (those that did not pass, and the first 3 of each case), "
        "none; auto (default): all for a run of up to 1000 units, failures above (imagebench.runs.keep)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the result as one JSON object on stdout (cases, samples, what the subject left, per-field reasons) "
        "instead of the table",
    )
    add_sealed_args(p)
    add_subject_flags(p)
    p.set_defaults(func=_cmd_run)


def _cmd_list(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from imagebench.case.model import (
        NO_SKILL,
        kind_counts,
        kind_warnings,
        presentation_warnings,
    )
    from imagebench.catalog import tree_read
    from imagebench.runs.runner import presents_tensor

    catalog = catalog_from_args(args)
    offered = catalog.offered()
    where = ", ".join(s.short for s in catalog.named) if catalog.named else "known"
    console = _console()
    if not offered:
        if args.json:
            print("[]")
            return 0
        console.print(escape(trees_line()), soft_wrap=True)
        console.print(f"no cases of {escape(where)}" if catalog.named else "no cases are registered")
        return 0
    selected = bool(args.patterns or args.exclude or args.skills or args.fixtures != "all")
    all_cases = select_from_args(offered, args) if selected else offered
    if args.json:
        import json

        rows = []
        for case in all_cases:
            ok, why = case.available()
            tree = _tree_word(tree_read(case))
            rows.append(
                {"label": case.label, "skill": case.namespace, "case_id": case.case_id, "kind": case.kind,
                 "class": case.case_class, "source": catalog.source_of(case.label).short,
                 "tree": None if tree == "-" else tree, "available": ok, "why": why, "tensor": presents_tensor(case)}
            )  # fmt: skip
        print(json.dumps(rows, indent=2))
        return 0
    console.print(escape(trees_line()), soft_wrap=True)
    per_skill = {k: v for k, v in kind_counts(all_cases).items() if k != NO_SKILL}
    n_curated = sum(1 for c in all_cases if c.kind == "curated")
    both = sum(1 for per in per_skill.values() if per.get("synthetic") and per.get("curated"))
    table = Table(
        title=escape(
            f"{len(all_cases)}"
            + (f" of {len(offered)}" if selected else "")
            + " cases"
            + (f" of {where}" if catalog.named else "")
            + (f" ({selection_text(args)})" if selected else "")
        ),
        caption=(
            f"{len(all_cases) - n_curated} synthetic, {n_curated} curated, over {len(per_skill)} skills; "
            f"{both} of {len(per_skill)} skills have both kinds"
        ),
    )
    for col in ("label", "kind", "class", "source", "tree", "available"):
        table.add_column(col, overflow="fold")
    for case in all_cases:
        ok, why = case.available()
        if presents_tensor(case):
            why = f"{why}; needs a data plane" if why else "needs a data plane (tensor presentation)"
        table.add_row(
            escape(case.label),
            case.kind,
            case.case_class,
            escape(catalog.source_of(case.label).short),
            escape(_tree_word(tree_read(case))),
            escape(("yes" + (f"; {why}" if why else "")) if ok else f"no: {why}"),
        )
    console.print(table)
    warnings = presentation_warnings(catalog.skills, offered) + kind_warnings(offered)
    for w in warnings:
        console.print(f"[yellow]coverage warning:[/yellow] {escape(w)}")
    from imagebench.executor.calibrated import calibration_notes

    calibration, summary = calibration_notes(all_cases)
    for w in calibration:
        console.print(f"[yellow]calibration warning:[/yellow] {escape(w)}", soft_wrap=True)
    console.print(summary, soft_wrap=True)
    return 0


def _tree_word(read: object) -> str:
    """The tree column of ``list``: packaged, yours, a folder, or '-' for a generated case."""
    kind = getattr(read, "kind", "none")
    if kind == "packaged":
        return "packaged"
    if kind == "user":
        return "yours"
    if kind == "unset":
        return "yours (unset)"
    if kind == "folder":
        return str(getattr(read, "root", ""))
    return "-"


def selected_cases(args: argparse.Namespace, catalog: Catalog | None = None) -> list[Case]:
    """The cases ``run`` and ``calibrate`` work: those the catalog offers (:func:`catalog_from_args`:
    the named sources' cases when any is named, else all) that the selection flags pick
    (:func:`~imagebench.cli.common.select_from_args`: ``-k``, ``--exclude``, ``--skill``, ``--kind``).
    A named source with no runnable case, a pattern or skill that matches nothing, or an empty
    selection, is a UsageError."""
    catalog = catalog if catalog is not None else catalog_from_args(args)
    refuse_empty_sources(catalog)
    return select_from_args(catalog.offered(), args)


def _find_case(args: argparse.Namespace) -> tuple[Case, str, str]:
    """The case ``args.label``, its source and the tree it reads, in words."""
    from imagebench.catalog import tree_read

    catalog = catalog_from_args(args)
    case = find_case(catalog, args.label)
    return case, str(catalog.source_of(case.label)), str(tree_read(case))


def _cmd_show(args: argparse.Namespace) -> int:
    from imagebench.case.session import case_prompt

    case, source, tree = _find_case(args)
    ok, why = case.available()
    lines = [
        f"label:     {case.label}",
        f"source:    {source}",
        f"tree:      {tree}",
        f"class:     {case.case_class}",
        f"kind:      {case.kind}" + (f" ({_spec_about(case)})" if _spec_about(case) else ""),
        f"available: {'yes' if ok else 'no: ' + why}",
        f"timeout:   {case.timeout_s:g} s",
        f"revision:  {case.revision}",
        "",
        "persona:",
        *(f"  {line}" for line in (case.persona or "(none)").splitlines()),
        "",
        "prompt:",
        *(f"  {line}" for line in case_prompt(case).rstrip().splitlines()),
        "",
        "layers:",
    ]
    for layer in case.layers:
        extra = []
        if layer.chunks:
            extra.append(f"chunks={tuple(layer.chunks)}")
        if layer.dim_labels:
            extra.append(f"dims={tuple(layer.dim_labels)}")
        lines.append(
            f"  {layer.name}: {layer.kind}, presented as {layer.presentation}, data key {layer.key!r}"
            + (f", {', '.join(extra)}" if extra else "")
        )
    source = case.source()
    if source is not None and source.kind == "curated":
        # The citation only: a curated fixture's provenance may state the perturbation it was made
        # with, which a subject must not be told; the report shows it once the case is scored.
        lines += ["", "cite:", *(f"  {line}" for line in textwrap.wrap(source.citation or "(none recorded)", 100))]
    lines.append("")
    lines.append("collect:")
    for c in case.collect:
        lines.append(f"  {c.name} ({c.what})" + (f": {c.description}" if c.description else ""))
    lines.append("")
    lines.append("metrics (pass when value <= limit):")
    limits = dict(case.tolerances)
    if limits:
        for metric, limit in limits.items():
            lines.append(f"  {metric} <= {limit:g}")
    else:
        lines.append("  (no limits declared on the fixture spec)")
    print("\n".join(lines))
    return 0


def _spec_about(case: Case) -> str:
    spec = case.fixture
    name = getattr(spec, "builder_name", None)
    if name:
        return f"builder {name}, seed {getattr(spec, 'seed', '?')}"
    return ""


def _cmd_run(args: argparse.Namespace) -> int:
    if getattr(args, "resume", None):
        return cmd_resume(args)
    if getattr(args, "suite", None):
        from imagebench.cli.suite import run_suite

        return run_suite(args)
    if getattr(args, "sample", "all") != "all" or getattr(args, "seed", 0) != 0:
        raise UsageError("--sample and --seed choose cases from a pinned suite; give --suite too")

    subject = checked_run_args(args)
    seal = seal_from_args(args)
    catalog = catalog_from_args(args)
    chosen = selected_cases(args, catalog)
    selection: dict[str, object] = {"k": list(args.patterns or []), "fixtures": args.fixtures, "timeout": args.timeout}
    if args.exclude:
        selection["exclude"] = list(args.exclude)
    if args.skills:
        selection["skills"] = list(args.skills)
    if len(args.bundle) == 1:
        selection["bundle"] = str(args.bundle[0])  # read by a resume of an older imagebench
    from imagebench.executor import RunInterrupted

    try:
        result = run_from_args(
            args, chosen, subject, selection, sealed=seal, sources=catalog.records([c.label for c in chosen])
        )
    except RunInterrupted as exc:
        return interrupted(args, exc.run_dir)
    if isinstance(result, int):
        return result
    return print_result(args, result, _console())


def cmd_resume(args: argparse.Namespace) -> int:
    """``imagebench run --resume RUN_DIR``."""
    from imagebench.executor import ExecutorError, ResumeError, RunInterrupted, resume_run
    from imagebench.runs.journal import JournalError, RunLocked

    given = [
        flag
        for flag, value, default in (
            ("-k", getattr(args, "patterns", None), None),
            ("--exclude", getattr(args, "exclude", None), None),
            ("--skill", getattr(args, "skills", None), None),
            ("--samples", getattr(args, "samples", 1), 1),
            ("--kind", getattr(args, "fixtures", "all"), "all"),
            ("--timeout", getattr(args, "timeout", None), None),
            ("--out", getattr(args, "out", None), None),
            ("--suite", getattr(args, "suite", None), None),
            ("--unsealed", getattr(args, "unsealed", False), False),
            ("--max-tokens", getattr(args, "max_tokens", None), None),  # a resume keeps the run's budget
            ("--max-cost", getattr(args, "max_cost", None), None),
        )
        if value not in (default, [], ())
    ]
    if getattr(args, "subject", None) is None:
        given += sandbox_flags_given(args)
    if given:
        raise UsageError(
            f"--resume takes the subject, its confinement, cases, samples and time limit from run.json; "
            f"drop {', '.join(given)}"
        )
    parallel = parallel_from_args(args)
    seal = seal_from_args(args)
    # run.json keeps a subject without machine paths: then it is given again, and checked by digest
    subject = checked_run_args(args) if getattr(args, "subject", None) is not None else None
    # the sources run.json recorded are opened again; --cases/--bundle/--tree stand in for one that moved
    catalog = catalog_from_args(args) if sources_given(args) else None
    try:
        result = resume_run(
            args.resume,
            subject=subject,
            catalog=catalog,
            progress=not args.quiet,
            parallel=parallel,
            sealed=seal,
        )
    except (ResumeError, JournalError) as exc:
        raise UsageError(str(exc)) from None
    except ExecutorError as exc:
        if exc.usage:
            raise UsageError(str(exc)) from None
        print(f"imagebench run: {exc}", file=sys.stderr)
        return 1
    except RunLocked as exc:
        print(f"imagebench run: {exc}", file=sys.stderr)
        return 1
    except RunInterrupted as exc:
        return interrupted(args, exc.run_dir)
    RUN_DIRS.append(result.run_dir)
    console = _console(stderr=bool(getattr(args, "json", False)))  # --json: stdout holds the JSON alone
    note = (result.record.extra.get("resumes") or [{}])[-1]
    discarded = note.get("discarded") or {}
    console.print(
        f"resumed {result.run_dir.name}: kept {note.get('kept', 0)} finished unit(s), ran {note.get('run', 0)}"
        + (f" ({len(discarded)} had an unusable summary)" if discarded else "")
    )
    for unit, why in list(discarded.items())[:10]:
        console.print(f"  re-ran {unit}: {why}", soft_wrap=True)
    return print_result(args, result, console)
