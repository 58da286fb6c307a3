"""What ``run`` and ``run --suite`` share: the checks of their arguments and what they print at the end."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from imagebench.cli import UsageError

if TYPE_CHECKING:
    from imagebench.executor import Parallel
    from imagebench.runfolder import RunResult
    from imagebench.sealed import Seal
    from imagebench.subjects import Subject


def checked_run_args(args: argparse.Namespace) -> Subject:
    """The checks every ``imagebench run`` makes of ``--samples``, ``--timeout`` and ``--subject``;
    returns the parsed subject. Bad values are a UsageError (exit 2)."""
    from imagebench.subjects import SubjectError, parse_subject

    if args.samples < 1:
        raise UsageError(f"--samples must be at least 1, got {args.samples}")
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    try:
        return parse_subject(args.subject)
    except SubjectError as exc:
        raise UsageError(str(exc)) from None


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
    """``--sealed SECRET`` and ``--sealed-file PATH`` (imagebench.sealed), for ``run`` and ``run --resume``."""
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


def seal_from_args(args: argparse.Namespace) -> Seal | None:
    """The run's :class:`~imagebench.sealed.Seal` from ``--sealed`` / ``--sealed-file``, or None.

    Both at once, an empty secret, or a file that is missing, unreadable or empty is a UsageError.
    """
    from imagebench.sealed import Seal, SealedError

    text = getattr(args, "sealed", None)
    path = getattr(args, "sealed_file", None)
    if text is not None and path is not None:
        raise UsageError("give either --sealed or --sealed-file, not both")
    try:
        if path is not None:
            return Seal.from_file(path)
        if text is not None:
            return Seal(text.encode("utf-8"))
    except SealedError as exc:
        raise UsageError(f"--sealed{'-file' if path is not None else ''}: {exc}") from None
    return None


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
