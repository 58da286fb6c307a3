"""``imagebench fixtures verify``: hash every file of the curated fixture tree against its manifest."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from imagebench.cli import UsageError
from imagebench.fixtures.fixture import FIXTURES_ENV, FixtureError
from imagebench.fixtures.tree import verify_tree
from imagebench.runs.progress import Bar


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fixtures", help="work with the curated fixture tree ($IMAGEBENCH_FIXTURES)")
    fsub = p.add_subparsers(dest="fixtures_command", metavar="ACTION")
    v = fsub.add_parser(
        "verify",
        help="hash every file the manifest lists and report drift (exit 0 clean, 1 drift, 2 usage)",
    )
    v.add_argument(
        "root", nargs="?", help=f"the fixture tree (default: ${FIXTURES_ENV}, else the tree shipped in the package)"
    )
    v.add_argument("--workers", type=int, default=None, help="hashing threads (default: one per core, 2..16)")
    v.add_argument("--quiet", "-q", action="store_true", help="print only the findings")
    v.set_defaults(func=_cmd_verify)


def _cmd_verify(args: argparse.Namespace) -> int:
    from imagebench.fixtures.tree import PACKAGED_ROOT

    root = args.root or os.environ.get(FIXTURES_ENV) or str(PACKAGED_ROOT)
    if not Path(root).is_dir():
        raise UsageError(f"fixture tree {root} is not a directory")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")

    bar: Bar | None = None

    def on_start(files: int, total: int) -> None:
        nonlocal bar
        bar = Bar(total, description="hashing", in_bytes=True, enabled=not args.quiet)

    def on_bytes(n: int) -> None:
        if bar is not None:
            bar.advance(n)

    try:
        findings = verify_tree(root, args.workers, on_start=on_start, on_bytes=on_bytes)
    except FixtureError as exc:
        print(f"imagebench fixtures verify: {exc}", file=sys.stderr)
        return 1
    finally:
        if bar is not None:
            bar.stop()
    for finding in findings:
        print(finding)
    if not args.quiet:
        verdict = f"{len(findings)} finding(s)" if findings else "clean"
        print(f"fixtures verify {root}: {verdict}", file=sys.stderr)
    return 1 if findings else 0
