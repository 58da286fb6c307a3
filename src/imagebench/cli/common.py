"""What ``run`` and ``run --suite`` share: the checks of their arguments and what they print at the end."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from imagebench.cli import UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from imagebench.case.model import Case
    from imagebench.executor import Parallel
    from imagebench.runs.sealed import Seal
    from imagebench.runs.verdict import RunResult
    from imagebench.sandbox.policy import SandboxPolicy
    from imagebench.subjects import Subject


# imagebench.case.model.FIXTURE_CHOICES, spelled here so that parsing `run` (which the supervising
# process does before it starts the run) imports no numpy (tests/test_boundary.py holds them equal).
FIXTURE_KINDS: tuple[str, ...] = ("all", "synthetic", "curated")

#: Run folders the commands of this process wrote, last last (the supervised entry point reads it).
RUN_DIRS: list[Path] = []


def add_subject_flags(p: argparse.ArgumentParser) -> None:
    """How ``run``'s subject is named and confined: ``--subject-name`` and the sandbox flags (docs/integrity.md)."""
    p.add_argument(
        "--subject-name",
        metavar="NAME",
        help="the subject's display name: its folder in the run and run.json's subject (letters, digits, '.', '_', "
        "'-'; default: its kind's, e.g. python-<module>.<function>); the run records it with the digest of the code",
    )
    g = p.add_argument_group("subject confinement (docs/integrity.md)")
    g.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run a command: subject without the bubblewrap sandbox: it can read this whole machine, truth "
        "included (recorded as sandbox: none)",
    )
    g.add_argument(
        "--subject-network",
        action="store_true",
        help="give a sandboxed subject the host's network (an agent that calls a model API needs it)",
    )
    g.add_argument(
        "--subject-env",
        metavar="PREFIX",
        help="the Python environment a sandboxed subject gets, read-only (default: this one, without imagebench)",
    )
    g.add_argument(
        "--subject-expose",
        action="append",
        metavar="PATH",
        help="show PATH (a subject's own code) to the sandboxed subject, read-only at its own path; repeatable",
    )
    g.add_argument(
        "--isolate",
        action="store_true",
        help="run a python: subject's function in a sandboxed child process instead of in this one",
    )
    g.add_argument(
        "--subject-mcp",
        action="store_true",
        help="serve a command: subject the case's tools over MCP while it works (mcp.json in its workspace; "
        "what it leaves through them is scored; docs/agents.md)",
    )
    g.add_argument(
        "--access",
        metavar="SETTING",
        help="the evidence the subject may obtain, enforced: files+code (inputs on disk and a shell), "
        "files+code+tools (and the MCP tools; with --subject-mcp), tools (the MCP tools only: no shell, no inputs "
        "on disk; with --subject-mcp), views-N (N fixed rendered views as PNGs, no arrays). Recorded and part of "
        "compare's C4; a case not meaningful under it is skipped (docs/agents.md, Access settings)",
    )
    g.add_argument(
        "--subject-env-pass",
        action="append",
        metavar="NAME",
        help="give the subject the host's variable NAME (an agent's API key); repeatable. A subject otherwise "
        "sees only PATH, HOME, the locale, TZ, TERM and the bench's own variables; the run records the names "
        "passed, never their values",
    )
    ag = p.add_argument_group("agent CLI subjects: claude-code, codex, gemini-cli, agent-cli: (docs/agents.md)")
    ag.add_argument(
        "--retries",
        type=int,
        metavar="N",
        help="work a sample again, fresh, up to N times when the agent's CLI reported an infrastructure failure "
        "(network, login, rate limit: infra-error); 0 to 10, default 0",
    )
    ag.add_argument(
        "--subject-home",
        metavar="DIR",
        help="a template HOME (config that is not a secret) copied into the agent's private HOME before it "
        "starts; links in it are left out; the run records its digest",
    )
    lim = p.add_argument_group("limits of a sandboxed subject (docs/integrity.md; hitting one ends it: resource-limit)")
    for flag, about in _LIMIT_FLAGS:
        lim.add_argument(flag, metavar="N", help=about)


#: The ``--limit-*`` flags: (flag, help). Sizes take 4G, 512M or bytes; the rest whole numbers.
_LIMIT_FLAGS: tuple[tuple[str, str], ...] = (
    ("--limit-memory", "memory of all its processes together (default 4G)"),
    ("--limit-processes", "processes and threads at once (default 512)"),
    ("--limit-open-files", "open files per process (default 1024)"),
    ("--limit-cpu", "CPU seconds per process (default 3600)"),
    ("--limit-tmp", "size of its /tmp (default 1G)"),
    ("--limit-workspace", "size of its workspace, and of any one file it writes (default 2G)"),
    ("--limit-leaving", "bytes the bench reads of one leaving (default: from the case's inputs, at least 64M)"),
    ("--limit-leavings", "bytes the bench reads of one sample's leavings in all (default: their sum)"),
)
_LIMIT_FIELDS = {
    "--limit-memory": ("memory", True), "--limit-processes": ("processes", False),
    "--limit-open-files": ("open_files", False), "--limit-cpu": ("cpu_s", False), "--limit-tmp": ("tmp", True),
    "--limit-workspace": ("workspace", True), "--limit-leaving": ("leaving", True),
    "--limit-leavings": ("leavings", True),
}  # fmt: skip


def limits_from_args(args: argparse.Namespace) -> Any:
    """The ``--limit-*`` flags over the default :class:`~imagebench.sandbox.limits.Limits`; UsageError naming a bad one."""
    from imagebench.sandbox.limits import Limits, parse_size

    given: dict[str, int] = {}
    for flag, (name, size) in _LIMIT_FIELDS.items():
        raw = getattr(args, flag[2:].replace("-", "_"), None)
        if raw is None:
            continue
        try:
            value = parse_size(raw, flag) if size else int(raw)
        except ValueError as exc:
            raise UsageError(str(exc) if size else f"{flag}: expected a whole number, got {raw!r}") from None
        if value < 1:
            raise UsageError(f"{flag}: expected a positive value, got {raw!r}")
        given[name] = value
    return Limits().with_overrides(**given)


def sandbox_from_args(args: argparse.Namespace) -> SandboxPolicy:
    """The sandbox flags as a policy; a flag that needs the sandbox beside --no-sandbox is a UsageError."""
    from pathlib import Path

    from imagebench.sandbox.policy import SandboxPolicy

    enabled = not getattr(args, "no_sandbox", False)
    env = getattr(args, "subject_env", None)
    expose = tuple(Path(p).expanduser().resolve() for p in (getattr(args, "subject_expose", None) or []))
    network = bool(getattr(args, "subject_network", False))
    if not enabled:
        needs = [flag for flag, given in (("--subject-env", env), ("--subject-expose", expose)) if given]
        if needs:
            raise UsageError(f"{', '.join(needs)} say what the sandbox shows; drop them or drop --no-sandbox")
    from imagebench.sandbox.policy import valid_env_name

    passed = tuple(dict.fromkeys(getattr(args, "subject_env_pass", None) or []))
    bad = [n for n in passed if not valid_env_name(n)]
    if bad:
        raise UsageError(f"--subject-env-pass {bad[0]!r}: expected the name of an environment variable")
    limits = limits_from_args(args)
    if not enabled:
        given = [flag for flag in _LIMIT_FIELDS if getattr(args, flag[2:].replace("-", "_"), None) is not None]
        if given:
            raise UsageError(f"{', '.join(given)} limit the sandbox; drop them or drop --no-sandbox")
    access = getattr(args, "access", None)
    if access is not None:
        from imagebench.sandbox.access import AccessError, parse_access

        try:
            access = parse_access(access).name
        except AccessError as exc:
            raise UsageError(f"--access: {exc}") from None
    return SandboxPolicy(
        enabled=enabled,
        network=network,
        env_prefix=Path(env).expanduser().resolve() if env else None,
        expose=expose,
        limits=limits,
        env_pass=passed,
        access=access,
    )


def checked_run_args(args: argparse.Namespace) -> Subject:
    """The checks every ``imagebench run`` makes of ``--samples``, ``--timeout``, ``--subject`` and
    the sandbox flags; returns the parsed subject. Bad values are a UsageError (exit 2)."""
    from imagebench.subjects import SubjectError, check_subject_name, parse_subject

    name = getattr(args, "subject_name", None)
    if name is not None:
        try:
            check_subject_name(name)
        except SubjectError as exc:
            raise UsageError(f"--subject-name: {exc}") from None
    if args.samples < 1:
        raise UsageError(f"--samples must be at least 1, got {args.samples}")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    policy = sandbox_from_args(args)
    try:
        subject = parse_subject(
            args.subject or "reference",
            sandbox=policy,
            isolate=bool(getattr(args, "isolate", False)),
            mcp=bool(getattr(args, "subject_mcp", False)),
            name=name,
            agent=agent_from_args(args),
        )
    except SubjectError as exc:
        raise UsageError(str(exc)) from None
    if policy.access is not None and not hasattr(subject, "access"):  # a kind no sandbox around a command holds
        from imagebench.sandbox.access import parse_access, subject_problem

        why = subject_problem(parse_access(policy.access), sandboxed=policy.enabled, mcp=False, command=None)
        if why is not None:
            raise UsageError(why)
    return subject


def agent_from_args(args: argparse.Namespace) -> Any:
    """``--retries`` and ``--subject-home`` as :class:`~imagebench.subjects.base.AgentOptions` (None: neither given)."""
    from pathlib import Path

    from imagebench.subjects import AgentOptions, SubjectError

    retries, home = getattr(args, "retries", None), getattr(args, "subject_home", None)
    if retries is None and home is None:
        return None
    try:
        return AgentOptions(retries=retries or 0, home=Path(home).expanduser().resolve() if home else None)
    except SubjectError as exc:
        raise UsageError(str(exc)) from None


def sandbox_flags_given(args: argparse.Namespace) -> list[str]:
    """The sandbox flags and ``--subject-name`` given (``--resume`` takes the subject's confinement
    and name from run.json)."""
    return [flag for flag, dest in _SUBJECT_FLAGS if getattr(args, dest, None)]


def run_from_args(
    args: argparse.Namespace,
    cases: list[Case],
    subject: Subject,
    selection: dict[str, Any],
    record_extra: dict[str, Any] | None = None,
    *,
    sealed: Seal | None = None,
    sources: list[Any] | None = None,
) -> RunResult | int:
    """``run_cases`` with the run flags; a cluster problem is a UsageError or exit 1 (printed).
    ``sources``: where the cases came from (:meth:`imagebench.catalog.Catalog.records`), kept in run.json."""
    import sys

    from imagebench.cli.usage import budget_from_args
    from imagebench.executor import ExecutorError, run_cases
    from imagebench.runs.sealed import SealedError
    from imagebench.subjects import SubjectError

    parallel = parallel_from_args(args)
    if getattr(args, "unsealed", False):
        from imagebench.subjects import is_trusted

        if not is_trusted(subject):
            print(
                f"imagebench run: warning: {subject.name} is not trusted code and runs --unsealed: its procedural "
                "fixtures use the public seeds, so a subject holding the public source can rebuild their truth",
                file=sys.stderr,
            )
    try:
        result = run_cases(
            cases,
            subject,
            samples=args.samples,
            out=args.out,
            progress=not args.quiet,
            timeout=args.timeout,
            selection=selection,
            record_extra=record_extra,
            parallel=parallel,
            sealed=sealed,
            unsealed=bool(getattr(args, "unsealed", False)),
            sources=sources,
            budget=budget_from_args(args),
            artifacts=getattr(args, "artifacts", None),
        )
        RUN_DIRS.append(result.run_dir)
        return result
    except SealedError as exc:
        raise UsageError(f"--sealed: {exc}") from None
    except ValueError as exc:
        if str(exc).startswith("--artifacts"):
            raise UsageError(str(exc)) from None
        raise
    except SubjectError as exc:  # its code cannot be digested (imagebench.subjects.identity): nothing ran
        raise UsageError(str(exc)) from None
    except ExecutorError as exc:
        if exc.usage:
            raise UsageError(str(exc)) from None
        print(f"imagebench run: {exc}", file=sys.stderr)
        return 1


def parallel_from_args(args: argparse.Namespace) -> Parallel:
    """``--workers`` / ``--scheduler`` as a :class:`Parallel`; a bad combination is a UsageError."""
    from imagebench.executor import ExecutorError, Parallel

    workers = getattr(args, "workers", None)
    scheduler = getattr(args, "scheduler", None)
    try:
        return Parallel(workers=workers, scheduler=scheduler)
    except ExecutorError as exc:
        raise UsageError(f"--workers/--scheduler: {exc}") from None


def add_sealed_args(p: argparse.ArgumentParser) -> None:
    """``--sealed SECRET`` and ``--sealed-file PATH`` (imagebench.runs.sealed), for ``run`` and ``run --resume``."""
    p.add_argument(
        "--sealed",
        metavar="SECRET",
        help="seal the run: build each sample of a procedural case from a seed derived from SECRET "
        "(other processes may read a command line: prefer --sealed-file)",
    )
    p.add_argument(
        "--sealed-file",
        metavar="PATH",
        help="seal the run with the secret held in PATH (its contents, surrounding whitespace stripped)",
    )
    p.add_argument(
        "--unsealed",
        action="store_true",
        help="run an untrusted subject (a command, an MCP agent, --isolate) on the public seeds instead of "
        "sealing it by default with a fresh secret; recorded in run.json, and compare names it",
    )


def seal_from_args(args: argparse.Namespace) -> Seal | None:
    """The run's :class:`~imagebench.runs.sealed.Seal` from ``--sealed`` / ``--sealed-file``, or None.

    Both at once, an empty secret, or a file that is missing, unreadable or empty is a UsageError.
    """
    from imagebench.runs.sealed import Seal, SealedError

    text = getattr(args, "sealed", None)
    path = getattr(args, "sealed_file", None)
    if text is not None and path is not None:
        raise UsageError("give either --sealed or --sealed-file, not both")
    if getattr(args, "unsealed", False) and (text is not None or path is not None):
        raise UsageError("--unsealed cannot be combined with --sealed or --sealed-file")
    try:
        if path is not None:
            _check_secret_hidden(args, path)
            return Seal.from_file(path)
        if text is not None:
            return Seal(text.encode("utf-8"))
    except SealedError as exc:
        raise UsageError(f"--sealed{'-file' if path is not None else ''}: {exc}") from None
    return None


def _check_secret_hidden(args: argparse.Namespace, path: str) -> None:
    """A secret file a sandboxed subject would be shown is refused (it would unseal the run)."""
    from imagebench.sandbox.policy import SandboxUnavailable, shown_tree

    if getattr(args, "no_sandbox", False):
        return  # recorded as sandbox: none; the subject could read anything anyway
    try:
        tree = shown_tree(sandbox_from_args(args), path)
    except SandboxUnavailable:
        return  # the subject is refused for that reason elsewhere
    if tree is not None:
        raise UsageError(
            f"--sealed-file {path}: it lies inside {tree}, which a sandboxed subject is shown read-only; "
            "keep the secret outside the system folders, the Python environment and --subject-expose paths"
        )


def print_result(args: argparse.Namespace, result: RunResult, console: Any, before: tuple[str, ...] = ()) -> int:
    """What every ``run`` prints at its end: the results table (unless ``--quiet``), ``before``
    (lines such as the suite's), the tally, the report and the run folder; with ``--json`` one
    JSON object on stdout instead (:func:`imagebench.cli.tables.result_json`). Returns the exit code."""
    from imagebench.cli.tables import result_json, results_table, tally_line

    if getattr(args, "json", False):
        import json

        report = None
        if not getattr(args, "no_report", False):
            try:
                from imagebench.report import write_html_report

                report = str(write_html_report(result.run_dir, progress=False))
            except Exception as exc:  # the run stands; only its page is missing
                import sys

                print(f"imagebench run: report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(json.dumps(result_json(result, report), indent=2))
        return result.exit_code
    if not args.quiet:
        console.print(results_table(result))
    for line in before:
        console.print(line, markup=False)
    console.print(tally_line(result), markup=False)
    finish_cli(args, result, console)
    return result.exit_code


def finish_cli(args: argparse.Namespace, result: RunResult, console: Any) -> None:
    """After ``run``: the report (unless ``--no-report``), then the run folder."""
    if not getattr(args, "no_report", False):
        try:
            from imagebench.report import write_html_report

            path = write_html_report(result.run_dir, progress=False)
            console.print(f"report: {path}", soft_wrap=True)
        except Exception as exc:  # the run stands; only its page is missing
            console.print(f"[yellow]report not written:[/yellow] {type(exc).__name__}: {exc}", soft_wrap=True)
    console.print(f"run folder: {result.run_dir}", soft_wrap=True)


# --------------------------------------------------------------------------- choosing cases

SELECTION_RULE = (
    "a case's exact label selects it alone; a PATTERN with *?[ is a glob on the whole label or case id; "
    "any other PATTERN is a substring of the label"
)


def add_selection_args(
    p: argparse.ArgumentParser, *, kind_choices: tuple[str, ...], kind_dest: str = "fixtures"
) -> None:
    """``-k``, ``--exclude``, ``--skill`` and ``--kind``: how ``run``, ``list`` and ``suite pin`` choose
    cases (:func:`imagebench.case.model.select_cases`, one rule for all three)."""
    p.add_argument(
        "-k", dest="patterns", action="append", metavar="PATTERN", help=f"select cases: {SELECTION_RULE}; repeatable"
    )
    p.add_argument(
        "--exclude",
        action="append",
        metavar="PATTERN",
        help="leave out the cases PATTERN picks (as -k reads it); repeatable",
    )
    p.add_argument(
        "--skill",
        dest="skills",
        action="append",
        metavar="SKILL",
        help="only the cases of skill SKILL (the label's part before /); repeatable",
    )
    p.add_argument(
        "--kind",
        dest=kind_dest,
        choices=kind_choices,
        default="all",
        help="only synthetic or only curated cases (default all)",
    )


def select_from_args(cases: list[Case], args: argparse.Namespace) -> list[Case]:
    """The cases the selection flags pick; a pattern or skill that matched nothing, or an empty
    selection, is a UsageError that lists the labels on offer."""
    from imagebench.case.model import select_cases

    kind = getattr(args, "fixtures", "all") or "all"
    chosen, unmatched = select_cases(
        cases,
        getattr(args, "patterns", None),
        kind,
        exclude=getattr(args, "exclude", None),
        skills=getattr(args, "skills", None),
    )
    if unmatched:
        labels = "\n".join(f"  {c.label}" for c in cases) or "  (none registered)"
        skills = ", ".join(sorted({c.namespace for c in cases})) or "(none)"
        shown = ", ".join(u if u.startswith("--") else f"-k {u!r}" for u in unmatched)
        raise UsageError(f"{shown} matched no case ({SELECTION_RULE}); skills: {skills}; valid labels:\n{labels}")
    if not chosen:
        raise UsageError(f"no case selected ({selection_text(args)})")
    return chosen


def selection_text(args: argparse.Namespace) -> str:
    """The selection flags given, as a user would type them."""
    parts = [f"-k {p}" for p in getattr(args, "patterns", None) or []]
    parts += [f"--exclude {p}" for p in getattr(args, "exclude", None) or []]
    parts += [f"--skill {s}" for s in getattr(args, "skills", None) or []]
    kind = getattr(args, "fixtures", "all")
    if kind and kind != "all":
        parts.append(f"--kind {kind}")
    return " ".join(parts) or "no selection flags"


# --------------------------------------------------------------------------- an interrupted run


def interrupted(args: argparse.Namespace, run_dir: Path) -> int:
    """What ``run`` prints when it is interrupted after its folder was written, ``--quiet`` or not
    (on stderr): the run folder and the exact command that takes it up again. Exit 130."""
    import shlex
    import sys

    RUN_DIRS.append(run_dir)
    command = resume_command(args, run_dir)
    print(f"interrupted: run folder {run_dir}", file=sys.stderr)
    print(f"take it up again with: {shlex.join(command)}", file=sys.stderr)
    return 130


def resume_command(args: argparse.Namespace, run_dir: Path) -> list[str]:
    """``imagebench run --resume RUN_DIR`` and the flags that resume needs, as the user gave them:
    the subject and its confinement when ``run.json`` keeps the subject without its paths (its
    digest is checked), the catalog flags when the sources ``run.json`` recorded do not find its
    cases again by themselves (:func:`imagebench.cli.catalog.source_flags_needed`), the secret file
    of a run sealed with one, the workers asked for."""
    from imagebench.cli.catalog import source_flags_needed
    from imagebench.executor.run import SUBJECT_DIGEST_KEY
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.reader import read_record_of_run

    command = ["imagebench", "run", "--resume", str(run_dir)]
    try:
        record = read_record_of_run(run_dir)
    except RunFolderError:
        record = None
    needs_subject = (
        record.extra.get(SUBJECT_DIGEST_KEY) is not None
        if record is not None
        else getattr(args, "subject", None) is not None
    )
    if needs_subject and getattr(args, "subject", None):
        command += ["--subject", args.subject]
        for flag, dest in _SUBJECT_FLAGS:
            value = getattr(args, dest, None)
            if value is True:
                command.append(flag)
            elif isinstance(value, list):
                for item in value:
                    command += [flag, str(item)]
            elif value:
                command += [flag, str(value)]
    command += source_flags_needed(args, record)  # --cases/--bundle/--tree, when run.json's sources do not suffice
    if getattr(args, "sealed_file", None):
        command += ["--sealed-file", args.sealed_file]
    elif getattr(args, "sealed", None):
        command += ["--sealed", "SECRET"]  # the secret given; not echoed into a terminal or a log
    for flag, dest in (("--workers", "workers"), ("--scheduler", "scheduler")):
        if getattr(args, dest, None) is not None:
            command += [flag, str(getattr(args, dest))]
    for flag, dest in (("--quiet", "quiet"), ("--no-report", "no_report")):
        if getattr(args, dest, False):
            command.append(flag)
    return command


#: The subject's flags a resume is given again with ``--subject`` (as :func:`sandbox_flags_given` lists them).
_SUBJECT_FLAGS: tuple[tuple[str, str], ...] = (
    ("--subject-name", "subject_name"),
    ("--no-sandbox", "no_sandbox"),
    ("--subject-network", "subject_network"),
    ("--subject-env", "subject_env"),
    ("--subject-expose", "subject_expose"),
    ("--isolate", "isolate"),
    ("--subject-mcp", "subject_mcp"),
    ("--subject-env-pass", "subject_env_pass"),
    ("--access", "access"),
    ("--retries", "retries"),
    ("--subject-home", "subject_home"),
    *((flag, flag[2:].replace("-", "_")) for flag in _LIMIT_FIELDS),
)
