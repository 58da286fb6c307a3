"""The ``imagebench`` command line.

Each feature module registers its own subcommands through ``add_cli(subparsers)``; this
module only wires them together and imports just the module of the command being run. Feature modules keep heavy imports (dask, pyarrow,
tifffile, ...) inside their command functions so that ``imagebench --help`` stays fast.
Exit codes: 0 success, 1 a failed check or a case that did not pass, 2 a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# command -> (module that registers it through add_cli, one-line help). Only the module of the
# command being run is imported, so `imagebench --help` costs no feature module's imports.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("imagebench.cli.run", "list the cases, their availability here and coverage warnings"),
    "show": ("imagebench.cli.run", "show what a subject of one case sees (never its truth)"),
    "run": ("imagebench.cli.run", "run cases with a subject and write a run folder"),
    "fixtures": ("imagebench.cli.fixtures", "check the curated fixture tree by hash (fixtures verify)"),
    "score": ("imagebench.scoring", "score one structured answer against a task contract"),
    "scorer": ("imagebench.scoring", "scorer self-test and manifest"),
    "plane": ("imagebench.cli.plane", "run or inspect a tensor data plane"),
    "case": ("imagebench.bundle", "author cases in a skill bundle (case add)"),
    "reindex": ("imagebench.bundle", "print every warning about a bundle's claims and cases"),
    "coverage": ("imagebench.bundle", "claims coverage of a bundle and validation by graded runs"),
    "suite": ("imagebench.suite", "pin and verify suites"),
    "compare": ("imagebench.suite", "compare two runs case by case, when they are comparable"),
    "report": ("imagebench.report", "write a static HTML report of a run folder"),
    "schema": ("imagebench.cli.schema", "print the JSON schema of an on-disk record"),
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
        return int(func(args) or 0)
    except UsageError as exc:
        print(f"imagebench {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
