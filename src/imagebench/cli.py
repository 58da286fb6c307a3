"""The ``imagebench`` command line.

Each feature module registers its own subcommands through ``add_cli(subparsers)``; this
module only wires them together. Feature modules keep heavy imports (dask, pyarrow,
tifffile, ...) inside their command functions so that ``imagebench --help`` stays fast.
Exit codes: 0 success, 1 a failed check or a case that did not pass, 2 a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules that contribute subcommands, in the order they appear in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "imagebench.runner",  # list, show, run
    "imagebench.tree",  # fixtures verify
    "imagebench.scoring",  # score, scorer selftest
    "imagebench.plane",  # plane serve
    "imagebench.bundle",  # case add, reindex, coverage
    "imagebench.suite",  # suite pin/verify, compare
    "imagebench.report",  # report
    "imagebench.records_cli",  # schema
)


class UsageError(Exception):
    """Bad arguments: printed and answered with exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="imagebench",
        description="Benchmark image-analysis skills, algorithms and agents against fixtures with held-out truth.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # a feature not built yet; its commands are simply absent
                continue
            raise
        module.add_cli(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
