"""The ``suite pin``, ``suite verify`` and ``compare`` commands, and ``imagebench run --suite``.

Heavy imports happen inside the command functions so that ``imagebench --help`` stays fast.
Exit codes: 0 success, 1 a failed check (every failure printed), 2 a usage error.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.cli import UsageError
from imagebench.cli.catalog import add_catalog_flags

if TYPE_CHECKING:
    from imagebench.suite.compare import Comparison
    from imagebench.suite.model import SuiteManifest
    from imagebench.suite.resolve import CaseSource, Problem


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("suite", help="pin a suite of cases, or verify a pinned suite against what is installed")
    ssub = p.add_subparsers(dest="suite_command", metavar="ACTION")
    p.set_defaults(func=lambda args: _no_action(p))

    pin = ssub.add_parser("pin", help="pin the selected cases, in order, as suite NAME at a revision")
    pin.add_argument("name", metavar="NAME", help="the suite id (a lowercase name)")
    from imagebench.cli.common import FIXTURE_KINDS, add_selection_args

    add_selection_args(pin, kind_choices=FIXTURE_KINDS)
    pin.add_argument("--bundle", action="append", default=[], metavar="DIR", help="also offer the cases of this skill bundle; repeatable")
    pin.add_argument("--revision", required=True, metavar="R", help="a pinned revision (e.g. 2026.11.0) or an alias from aliases.json")
    pin.add_argument("--out", metavar="FILE", help="where to write the suite file (default: <suites dir>/NAME.json)")
    pin.add_argument("--suites-dir", metavar="DIR", help="suite files and aliases.json (default: $IMAGEBENCH_SUITES or ./suites)")
    pin.add_argument("--quiet", action="store_true", help="print only failures and the result line")
    add_catalog_flags(pin, bundle=False)
    pin.set_defaults(func=_cmd_pin)

    ver = ssub.add_parser("verify", help="resolve a suite file against installed cases, bundles and fixture bytes")
    ver.add_argument("suite", metavar="SUITE", help="a suite file, or NAME / NAME@REVISION looked up in the suites dir")
    ver.add_argument("--bundle", action="append", default=[], metavar="DIR", help="a skill bundle that provides members; repeatable")
    ver.add_argument("--suites-dir", metavar="DIR", help="suite files and aliases.json (default: $IMAGEBENCH_SUITES or ./suites)")
    ver.add_argument("--quiet", action="store_true", help="no progress bar; failures and the result line only")
    add_catalog_flags(ver, bundle=False)
    ver.set_defaults(func=_cmd_verify)

    cmp_ = sub.add_parser("compare", help="compare two suite runs: check C1-C4, then paired outcomes and statistics")
    cmp_.add_argument("run_a", metavar="RUN_A", help="a run folder (run-<stamp>/) or its run.json")
    cmp_.add_argument("run_b", metavar="RUN_B")
    cmp_.add_argument("--suite", metavar="FILE", help="the suite file to verify both assignments against (default: looked up by the recorded suite id)")
    cmp_.add_argument("--suites-dir", metavar="DIR", help="where to look the suite file up (default: $IMAGEBENCH_SUITES or ./suites)")
    cmp_.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp_.add_argument("--bootstrap-seed", type=int, default=0, metavar="S", help="seed of the bootstrap intervals (default 0)")
    cmp_.add_argument("--resamples", type=int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    cmp_.add_argument(
        "--allow-missing",
        action="store_true",
        help="compare even when a sample summary is missing or was changed after its run journaled it (those pairs are left out and named)",
    )
    cmp_.add_argument(
        "--allow-conditions",
        action="append",
        default=[],
        metavar="NAME",
        help="let the execution condition NAME differ between the runs (sandbox, network, limits, env_pass, "
        "isolate, mcp, tool_env, sealing, harness; repeat for several): the difference is noted, not refused",
    )
    from imagebench.cli.usage import add_prices_flag

    add_prices_flag(cmp_)
    cmp_.set_defaults(func=_cmd_compare)


def _no_action(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _console(stderr: bool = False) -> Any:
    from imagebench.cli.tables import console

    return console(stderr=stderr, soft_wrap=True)


def _usage(message: str) -> Exception:

    return UsageError(message)


def _esc(value: Any) -> str:
    """``value`` as text that rich prints literally (a reason may hold ``[...]``)."""
    from rich.markup import escape

    return escape(str(value))


def _print_problems(problems: list[Problem], console: Any) -> None:
    for p in problems:
        console.print(f"[red]FAIL[/red] {_esc(p)}")


# --------------------------------------------------------------------------- resolving SUITE arguments


def open_suite(arg: str, suites_dir: str | None) -> tuple[SuiteManifest, str | None, str | None, str | None]:
    """Load the suite SUITE names: ``(manifest, asked id, asked revision (resolved), alias used)``.

    SUITE is a path to a suite file, or ``NAME`` / ``NAME@REVISION`` in the suites dir (the revision
    may be an alias of ``aliases.json``). Raises SuiteError for a file that cannot be read and
    UsageError for an unpinned revision.
    """
    from imagebench.suite.model import (
        SuiteError,
        find_suite_file,
        load_aliases,
        load_suite,
        parse_suite_arg,
        resolve_revision,
    )
    from imagebench.suite.model import suites_dir as default_dir

    directory = default_dir(suites_dir)
    name, rev = parse_suite_arg(arg)
    if rev is None and (name.endswith(".json") or "/" in name):
        return load_suite(name), None, None, None
    revision: str | None = None
    alias: str | None = None
    if rev is not None:
        try:
            revision, alias = resolve_revision(rev, load_aliases(directory))
        except SuiteError as exc:
            raise _usage(f"SUITE {arg!r}: {exc}") from None
    path = find_suite_file(name, revision, directory)
    if not path.is_file():
        raise SuiteError(f"suite {name!r}: no suite file {path.name} in {directory} (pin one with `imagebench suite pin {name}`)")
    return load_suite(path), name, revision, alias


def _case_source(args: argparse.Namespace) -> CaseSource:
    """The cases a suite resolves against: the catalog of the command's flags (imagebench.cli.catalog)."""
    from imagebench.cli.catalog import catalog_from_args
    from imagebench.suite.resolve import catalog_source

    return catalog_source(catalog_from_args(args))


def _bundles(args: argparse.Namespace) -> list[str]:
    value = getattr(args, "bundle", None)
    if value is None:
        return []
    if isinstance(value, (str, Path)):
        return [str(value)]
    return [str(v) for v in value]


def verify_with_progress(
    manifest: SuiteManifest, source: CaseSource, *, quiet: bool, **kwargs: Any
) -> list[Problem]:
    """:func:`verify_suite` with a rich progress line on stderr (unless ``quiet``)."""
    from imagebench.suite.resolve import verify_suite

    if quiet:
        return verify_suite(manifest, source, **kwargs)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("verifying {task.description}"), BarColumn(), MofNCompleteColumn(), console=_console(stderr=True), transient=True
    ) as bar:
        task = bar.add_task(manifest.suite_id, total=len(manifest.members))

        def on_member(label: str) -> None:
            bar.update(task, description=label)
            bar.advance(task)

        def on_file(role: str) -> None:
            bar.update(task, description=f"hashing {role}")

        return verify_suite(manifest, source, on_member=on_member, on_file=on_file, **kwargs)


# --------------------------------------------------------------------------- suite pin


def _cmd_pin(args: argparse.Namespace) -> int:
    from imagebench.cli.common import select_from_args
    from imagebench.suite.model import (
        SuiteError,
        load_aliases,
        load_suite,
        resolve_revision,
        write_suite,
    )
    from imagebench.suite.model import suites_dir as default_dir
    from imagebench.suite.resolve import pin_suite

    if not re.match(r"^[a-z0-9][a-z0-9._-]*$", args.name):
        raise _usage(f"suite NAME {args.name!r} must be a lowercase name ([a-z0-9][a-z0-9._-]*)")
    directory = default_dir(args.suites_dir)
    try:
        revision, alias = resolve_revision(args.revision, load_aliases(directory))
    except SuiteError as exc:
        raise _usage(f"--revision: {exc}") from None
    console = _console()
    source = _case_source(args)
    if source.problems:
        _print_problems(source.problems, console)
        console.print(f"suite pin {args.name}: {len(source.problems)} failure(s); nothing written", markup=False)
        return 1
    chosen = select_from_args(list(source.ordered), args)
    manifest, problems = pin_suite(
        args.name, revision, chosen, requested=args.revision if alias else None, aliases={alias: revision} if alias else None
    )
    if manifest is None:
        _print_problems(problems, console)
        console.print(f"suite pin {args.name}@{revision}: {len(problems)} failure(s); nothing written", markup=False)
        return 1
    out = Path(args.out) if args.out else directory / f"{args.name}.json"
    if out.exists():
        try:
            old = load_suite(out)
        except SuiteError:
            old = None
        if old is not None and old.suite_id == manifest.suite_id and old.revision == manifest.revision:
            if old.suite_fingerprint == manifest.suite_fingerprint:
                console.print(f"suite {args.name}@{revision} is already pinned with these members; {out} unchanged", markup=False)
                return 0
            console.print(
                f"[red]FAIL[/red] revision of suite {args.name}: {revision} is already pinned with fingerprint "
                f"{old.suite_fingerprint[:19]}...; these members give {manifest.suite_fingerprint[:19]}.... A pin cannot "
                "move: pin a new revision (or write elsewhere with --out)"
            )
            return 1
    write_suite(out, manifest)
    if not args.quiet:
        for i, m in enumerate(manifest.members, 1):
            console.print(f"  {i:>3}. {m.label} @ {m.revision}  {m.fingerprint[:19]}...", markup=False)
    via = f" (alias {alias!r})" if alias else ""
    console.print(
        f"pinned suite {manifest.suite_id}@{manifest.revision}{via}: {len(manifest.members)} member(s), "
        f"fingerprint {manifest.suite_fingerprint}\nsuite file: {out}",
        markup=False,
    )
    return 0


# --------------------------------------------------------------------------- suite verify


def _cmd_verify(args: argparse.Namespace) -> int:
    from imagebench.suite.model import SuiteError

    console = _console()
    try:
        manifest, name, revision, alias = open_suite(args.suite, args.suites_dir)
    except SuiteError as exc:
        console.print(f"[red]FAIL[/red] suite file: {_esc(exc)}")
        console.print(f"suite verify {args.suite}: 1 failure(s)", markup=False)
        return 1
    source = _case_source(args)
    problems = verify_with_progress(manifest, source, quiet=args.quiet, suite_id=name, revision=revision)
    _print_problems(problems, console)
    via = f" (alias {alias!r})" if alias else ""
    if problems:
        console.print(f"suite verify {manifest.suite_id}@{manifest.revision}{via}: {len(problems)} failure(s)", markup=False)
        return 1
    console.print(
        f"suite {manifest.suite_id}@{manifest.revision}{via} resolves exactly: {len(manifest.members)} member(s), "
        f"fingerprint {manifest.suite_fingerprint}",
        markup=False,
    )
    return 0


# --------------------------------------------------------------------------- compare


def _cmd_compare(args: argparse.Namespace) -> int:
    from imagebench.cli.usage import prices_from_args
    from imagebench.suite.compare import compare_runs, load_run
    from imagebench.suite.model import SuiteError, find_suite_file, load_suite
    from imagebench.suite.model import suites_dir as default_dir

    if args.resamples < 1:
        raise _usage(f"--resamples must be at least 1, got {args.resamples}")
    console = _console()
    suite = None
    explicit = args.suite is not None
    if explicit:
        try:
            suite = load_suite(args.suite)
        except SuiteError as exc:
            console.print(f"[red]FAIL[/red] suite file: {_esc(exc)}")
            return 1
    else:
        # Look the suite file up by what run A recorded (a moved alias is never consulted).
        first, _ = load_run(args.run_a, "A", lean=True)
        if first is not None and first.info is not None:
            ref = first.info.assignment.cohort.suite
            path = find_suite_file(ref.suite_id, ref.revision, default_dir(args.suites_dir))
            if path.is_file():
                try:
                    suite = load_suite(path)
                except SuiteError:
                    suite = None
        del first  # compare_runs reads both runs again: run A is not held twice
    try:
        result = compare_runs(
            args.run_a, args.run_b, suite=suite, suite_explicit=explicit, seed=args.bootstrap_seed,
            resamples=args.resamples, allow_missing=args.allow_missing, allow_conditions=args.allow_conditions,
            prices=prices_from_args(args),
        )
    except ValueError as exc:
        raise _usage(str(exc)) from None
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        render(result, console)
    return 0 if result.comparable and not result.problems else 1


# --------------------------------------------------------------------------- imagebench run --suite


def run_suite(args: argparse.Namespace) -> int:
    """``imagebench run --suite SUITE [--sample POLICY] [--seed S]``: verify, assign, run exactly that."""
    from imagebench.cli.common import checked_run_args, interrupted, print_result, run_from_args, seal_from_args
    from imagebench.suite.model import SuiteError
    from imagebench.suite.record import RUN_INFO_KEY, SuiteRunInfo, conditions_now
    from imagebench.suite.resolve import resolve_members
    from imagebench.suite.sampling import assign, parse_policy

    given = [
        flag
        for flag, value in (
            ("-k", getattr(args, "patterns", None)),
            ("--exclude", getattr(args, "exclude", None)),
            ("--skill", getattr(args, "skills", None)),
        )
        if value
    ]
    if given:
        raise _usage(f"{', '.join(given)} cannot be combined with --suite: the suite and --sample decide which cases run")
    if getattr(args, "fixtures", "all") != "all":
        raise _usage("--kind/--fixtures cannot be combined with --suite: the suite decides which cases run")
    subject = checked_run_args(args)
    seal = seal_from_args(args)
    try:
        policy = parse_policy(args.sample)
    except ValueError as exc:
        raise _usage(f"--sample: {exc}") from None
    err = _console(stderr=True)
    try:
        manifest, name, revision, alias = open_suite(args.suite, getattr(args, "suites_dir", None))
    except SuiteError as exc:
        err.print(f"[red]FAIL[/red] suite file: {_esc(exc)}")
        err.print("refusing to run: the suite does not resolve")
        return 1
    source = _case_source(args)
    problems = verify_with_progress(manifest, source, quiet=args.quiet, suite_id=name, revision=revision)
    if problems:
        _print_problems(problems, err)
        err.print(f"refusing to run: suite {manifest.suite_id}@{manifest.revision} has {len(problems)} failure(s)", markup=False)
        return 1
    try:
        assignment = assign(manifest, policy, args.seed)
    except ValueError as exc:
        raise _usage(f"--sample {policy.key}: {exc}") from None
    cases = resolve_members(manifest, source, assignment.labels)
    info = SuiteRunInfo(
        requested=args.suite,
        alias=alias,
        assignment=assignment,
        conditions=conditions_now(samples=args.samples, timeout=args.timeout, fixtures="all", cases=cases),
    )
    selection: dict[str, Any] = {
        "suite": args.suite,
        "sample": policy.key,
        "seed": args.seed,
        "fixtures": "all",
        "timeout": args.timeout,
    }
    bundles = _bundles(args)
    if len(bundles) == 1:
        selection["bundle"] = bundles[0]  # what `run --resume` reads to find the bundle's cases again
    sources = source.catalog.records(assignment.labels) if source.catalog is not None else None
    from imagebench.executor import RunInterrupted

    try:
        result = run_from_args(
            args, cases, subject, selection, {RUN_INFO_KEY: info.model_dump(mode="json")}, sealed=seal, sources=sources
        )
    except RunInterrupted as exc:
        return interrupted(args, exc.run_dir)
    if isinstance(result, int):
        return result
    a = assignment.cohort
    line = f"suite {a.suite.suite_id}@{a.suite.revision}, {a.policy}, seed {assignment.seed}: {len(cases)} case(s)"
    return print_result(args, result, _console(), (line,))


# --------------------------------------------------------------------------- compare, printed


def _f(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{_f(ci[0])}, {_f(ci[1])}]"


def _code(identity: dict[str, Any] | None) -> str:
    """A run's subject identity as one line: its name and the start of its code digest."""
    if not identity or not isinstance(identity.get("code"), str):
        return "not recorded"
    return f"{identity.get('name', '?')} {identity['code'][:19]}"


def render(result: Comparison, console: Any) -> None:
    """Print a comparison with rich: the conditions, then (when comparable) the per-case table."""
    from rich.markup import escape as esc
    from rich.table import Table

    from imagebench.suite.compare import shown_value

    for p in result.problems:
        console.print(f"[red]cannot compare:[/red] {esc(p)}")
    if result.problems:
        return
    assert result.a is not None and result.b is not None
    console.print(
        f"A: {result.a.run_id} ({result.a.subject})    B: {result.b.run_id} ({result.b.subject})", markup=False
    )
    for side, name in ((result.a, "A"), (result.b, "B")):
        if side.execution:
            shown = ", ".join(f"{k} {shown_value(v)}" for k, v in side.execution.items() if k != "limits")
            console.print(f"  {name} ran under: {shown}", markup=False)
    console.print(f"code A: {_code(result.a.identity)}    code B: {_code(result.b.identity)}", markup=False)
    from imagebench.cli.usage import print_usage_table

    print_usage_table(result, console)
    table = Table(title="comparability")
    for col in ("", "condition", "holds", "why / notes"):
        table.add_column(col)
    for c in result.conditions:
        mark = "[green]yes[/]" if c.holds else "[red]no[/]"
        lines = [f"[red]{esc(p)}[/]" for p in c.problems] + [f"[dim]{esc(n)}[/]" for n in c.notes]
        table.add_row(c.id, esc(c.name), mark, "\n".join(lines) or "-")
    console.print(table)
    if not result.comparable:
        failed = ", ".join(c.id for c in result.conditions if not c.holds)
        console.print(f"[red]not comparable[/red]: {failed} fail; nothing was compared")
        hint = next((p for c in result.conditions for p in c.problems if "imagebench suite pin" in p), None)
        if hint is not None:  # the commands on a line of their own, to copy (a table cell wraps them)
            console.print(hint, markup=False, soft_wrap=True)
        return
    cases = Table(title=f"paired outcomes by case ({result.direction})")
    cases.add_column("case", overflow="fold")
    for col in ("pairs", "fixtures", "pass A", "pass B", "diff", esc("metric: mean A / mean B, diff [95% CI]")):
        cases.add_column(col)
    costed = any(c.cost_a is not None or c.cost_b is not None for c in result.cases)
    if costed:
        cases.add_column("cost/sample A / B")
    for c in result.cases:
        mlines = [f"{m.metric}: {_f(m.mean_a)} / {_f(m.mean_b)}, {_f(m.diff)} {_ci(m.ci)}" for m in c.metrics]
        cost = [f"{_f(c.cost_a)} / {_f(c.cost_b)}"] if costed else []
        cases.add_row(
            esc(c.label),
            str(c.pairs),
            str(c.fixtures),
            f"{c.passed_a}/{c.pairs}",
            f"{c.passed_b}/{c.pairs}",
            f"{c.rate_diff:+.3g}",
            esc("\n".join(mlines)) or "-",
            *cost,
        )
    console.print(cases)
    for u in result.unmatched:
        console.print(f"[yellow]unmatched[/yellow] {esc(u.label)}: {esc(u.reason)} (not pooled)")
    o = result.overall
    if o is None:
        console.print("no case has a scored pair of samples: nothing to compare")
        return
    test = (
        f"McNemar exact p = {o.mcnemar_p:.4g} over {o.fixtures} distinct fixtures"
        if o.mcnemar_p is not None
        else f"no test: {o.fixtures} distinct fixture(s) (samples of one fixture are one replicate)"
    )
    console.print(
        f"overall: {o.cases} case(s), {o.fixtures} distinct fixture(s), {o.pairs} sample pair(s); pass rate A "
        f"{o.rate_a:.3g}, B {o.rate_b:.3g}, diff {o.rate_diff:+.3g}; discordant fixtures: {o.only_a} better in A, "
        f"{o.only_b} better in B; {test}",
        markup=False,
    )
    for m in o.metrics:
        console.print(
            f"  {m.metric}{f' ({m.unit})' if m.unit else ''} over {m.pairs} case(s): mean A {_f(m.mean_a)}, "
            f"B {_f(m.mean_b)}, diff {_f(m.diff)} {_ci(m.ci)} (bootstrap over cases, seed {result.bootstrap.get('seed')})",
            markup=False,
        )
