"""The ``imagebench`` command line.

Each feature module registers its own subcommands through ``add_cli(subparsers)``; this
module only wires them together and imports just the module of the command being run. Feature modules keep heavy imports (dask, pyarrow,
tifffile, ...) inside their command functions so that ``imagebench --help`` stays fast.
Exit codes: 0 success, 1 a failed check or a case that failed, 2 a usage error; ``run`` also uses
3 (blocked), 4 (incomplete), 5 (the run died) and 130 (interrupted):
:data:`imagebench.runs.verdict.EXIT_MEANINGS`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Iterator, Sequence

# command -> (module that registers it through add_cli, one-line help). Only the module of the
# command being run is imported, so `imagebench --help` costs no feature module's imports.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("imagebench.cli.run", "list the cases, their availability here and coverage warnings"),
    "show": ("imagebench.cli.run", "show what a subject of one case sees (never its truth)"),
    "run": ("imagebench.cli.run", "run cases with a subject and write a run folder"),
    "calibrate": ("imagebench.cli.calibrate", "run reference, baseline and nop on cases: the calibration table"),
    "fixtures": ("imagebench.cli.fixtures", "check the curated fixture tree by hash (fixtures verify)"),
    "score": ("imagebench.cli.scoring", "score one structured answer against a task contract"),
    "scorer": ("imagebench.cli.scoring", "scorer self-test and manifest"),
    "plane": ("imagebench.cli.plane", "run or inspect a tensor data plane"),
    "case": ("imagebench.cli.bundle", "author cases: in a bundle (case add), in a fixture tree (case new)"),
    "reindex": ("imagebench.cli.bundle", "print every warning about a bundle's claims and cases"),
    "coverage": ("imagebench.cli.bundle", "claims coverage of a bundle and validation by graded runs"),
    "suite": ("imagebench.cli.suite", "pin and verify suites"),
    "compare": ("imagebench.cli.suite", "compare two runs case by case, when they are comparable"),
    "report": ("imagebench.cli.report", "write a static HTML report of a run folder"),
    "schema": ("imagebench.cli.schema", "print the JSON schema of an on-disk record"),
    "cache": ("imagebench.cli.cache", "the cache of built fixtures: where it is, how big, clear it"),
    "mcp": ("imagebench.cli.mcp", "serve one case's session to an agent over MCP (mcp serve CASE)"),
    "metrics": ("imagebench.cli.metrics", "measures outside a run: CTC tracking, instance segmentation, images"),
}
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(module for module, _ in COMMANDS.values()))


class UsageError(Exception):
    """Bad arguments: printed and answered with exit code 2."""


def _chosen_command(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv`` only the chosen command's module is imported (all when None)."""
    parser = argparse.ArgumentParser(
        prog="imagebench",
        description="Benchmark image-analysis skills, algorithms and agents against fixtures with held-out truth.",
    )
    parser.add_argument("--version", action="version", version=f"imagebench {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _chosen_command(argv) if argv is not None else None
    modules = COMMAND_MODULES if argv is None else ((COMMANDS[chosen][0],) if chosen else ())
    registered: set[str] = set()
    for name in modules:
        before = set(sub.choices)
        importlib.import_module(name).add_cli(sub)
        registered |= set(sub.choices) - before
    for command, (_, help_text) in COMMANDS.items():
        if command not in registered:  # listed for --help; its module loads when it is chosen
            sub.add_parser(command, help=help_text, add_help=False)
    return parser


def _version() -> str:
    from imagebench import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        if args.command in SUPERVISED_COMMANDS:
            with _one_interrupt():
                return int(func(args) or 0)
        return int(func(args) or 0)
    except UsageError as exc:
        print(f"imagebench {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


#: Further SIGINTs this soon after the first are the same Ctrl-C arriving again (a terminal's
#: reaches the whole process group, and the supervising process passes its own on): ignored, so
#: the run's folder is closed in order rather than cut off halfway through.
INTERRUPT_DEBOUNCE_S = 3.0


@contextlib.contextmanager
def _one_interrupt() -> Iterator[None]:
    """While ``run`` works: the first SIGINT raises KeyboardInterrupt, repeats within
    :data:`INTERRUPT_DEBOUNCE_S` are ignored (a later one interrupts the winding down too)."""
    import signal
    import threading
    import time

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    first: list[float] = []

    def handler(signum: int, frame: object) -> None:
        now = time.monotonic()
        if first and now - first[0] < INTERRUPT_DEBOUNCE_S:
            return
        first[:] = [now]
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread of the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# --------------------------------------------------------------------------- the supervised entry point

SUPERVISED_ENV = "IMAGEBENCH_SUPERVISED"  # set in the child: the file its exit code is written to
SUPERVISED_COMMANDS = frozenset({"run", "calibrate"})  # commands that run subjects in this process


def entry() -> int:
    """The ``imagebench`` console script.

    ``run`` puts subjects in front of fixtures, and an in-process ``python:`` subject can end the
    process itself (``os._exit(0)``) before any result exists. So ``run`` works in a child process
    (on Linux a fork of this one, its imports already done: one interpreter's start-up; else a fresh
    ``python -m imagebench``) that reports its exit code and run folder in a file just before it returns; a child that ends
    without reporting (or by a signal) ends the command with 5, never with the 0 it may have exited
    with, and a reported 0 stands only when the run folder bears it out (:func:`_borne_out`).
    The arguments are parsed here first, so ``--help`` and a usage error end here as argparse
    says. Every other command runs here, as :func:`main`.
    """
    import os

    argv = sys.argv[1:]
    marker = os.environ.pop(SUPERVISED_ENV, None)  # out of reach of what the child runs in-process
    if marker:
        code = main(argv)
        _report(marker, code)
        return code
    if _chosen_command(argv) not in SUPERVISED_COMMANDS:
        return main(argv)
    build_parser(argv).parse_args(argv)  # --help, a bad flag: argparse exits here (0 or 2)
    return _supervise(argv)


def _supervise(argv: list[str]) -> int:
    import os
    import signal
    import subprocess
    import tempfile

    from imagebench.runs.verdict import EXIT_DIED, EXIT_PASSED

    fd, marker = tempfile.mkstemp(prefix="imagebench-exit-")
    os.close(fd)
    try:
        if _can_fork():
            _import_the_check()  # then asked again: the fork still needs this process to hold one thread
        if _can_fork():
            pid = _fork_child(argv, marker)

            def forward(signum: int, _frame: object) -> None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)

            def wait() -> int:
                while True:
                    try:
                        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                    except InterruptedError:  # pragma: no cover - PEP 475 retries waitpid itself
                        continue
        else:
            child = subprocess.Popen(
                [sys.executable, "-m", "imagebench", *argv], env={**os.environ, SUPERVISED_ENV: marker}
            )

            def forward(signum: int, _frame: object) -> None:
                child.send_signal(signum)

            wait = child.wait

        # A terminal's Ctrl-C reaches the child too (same process group); a signal sent to this
        # process alone is passed on, so the child stops its run in order either way.
        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            rc = wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        with open(marker, encoding="utf-8") as fh:
            written, _, run_dir = fh.read().strip().partition("\t")
    finally:
        os.unlink(marker)
    if rc < 0:
        return 128 - rc  # ended by a signal, as a shell reports it
    command = argv[0] if argv else ""
    if written != str(rc):
        print(
            f"imagebench {command}: the run ended without finishing (its process exited with {rc} "
            "before the command returned, e.g. a python: subject ended it); treat its run folder as incomplete",
            file=sys.stderr,
        )
        return EXIT_DIED
    if rc == EXIT_PASSED:
        why = _borne_out(run_dir)
        if why:
            print(f"imagebench {command}: its process reported success, but {why}; exit {EXIT_DIED}", file=sys.stderr)
            return EXIT_DIED
    return rc


def _report(marker: str, code: int) -> None:
    """The child's report to its supervisor, written just before the command returns."""
    from imagebench.cli.common import RUN_DIRS

    with open(marker, "w", encoding="utf-8") as fh:
        fh.write(f"{code}\t{RUN_DIRS[-1] if RUN_DIRS else ''}")


def _can_fork() -> bool:
    """Whether the child can be this process forked (Linux, one thread so far): it then starts with
    the parser's imports done, and a run costs one interpreter's start-up, not two."""
    import os
    import threading

    return sys.platform == "linux" and hasattr(os, "fork") and threading.active_count() == 1


def _fork_child(argv: list[str], marker: str) -> int:
    """The supervised child as a fork of this process; returns its pid. The child runs the command
    exactly as ``python -m imagebench`` with the marker in its environment would (:func:`entry`):
    the marker is written only when the command returns, an exception is printed and exits 1, and
    it never returns into the supervisor's frames."""
    import os

    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        code = main(argv)
        _report(marker, code)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        import atexit

        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()  # what an interpreter's exit runs
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def _import_the_check() -> None:
    """Import here, before the fork, what :func:`_borne_out` reads the run folder with (the records,
    pydantic, the checked reader): the child needs them too and inherits them, so they are paid
    once, not again in this process after the run (about as long as the check itself). Nothing
    is checked or trusted any less: the check still reads the folder afresh, after the child ended."""
    import imagebench.executor.calibration
    import imagebench.fixtures.digest
    import imagebench.runs.journal
    import imagebench.runs.reader
    import imagebench.runs.verdict
    import imagebench.runs.writer
    import imagebench.state  # noqa: F401


def _borne_out(run_dir: str) -> str:
    """Why the run folder does not bear out a reported success ('' when it does): it must be
    complete, every summary must match its journal line, and every case must pass when its
    verdict is computed again from the checked samples."""
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.reader import read_run
    from imagebench.runs.verdict import checked_verdict

    if not run_dir:
        return "it named no run folder"
    from imagebench.executor.calibration import borne_out, is_calibration

    if is_calibration(run_dir):  # imagebench calibrate: its record and its three runs
        return borne_out(run_dir)
    try:
        contents = read_run(run_dir)
    except RunFolderError as exc:
        return f"its run folder cannot be read ({exc})"
    if not contents.record.complete:
        return f"{run_dir}/run.json says the run is not complete"
    if contents.problems:
        return (
            f"{len(contents.problems)} sample(s) of {run_dir} are not what the run journaled ({contents.problems[0]})"
        )
    for label in contents.record.cases:
        verdict = checked_verdict(contents.samples(label), contents.case_summaries.get(label))
        if verdict != "pass":
            return f"case {label} is {verdict} in {run_dir}"
    return ""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
