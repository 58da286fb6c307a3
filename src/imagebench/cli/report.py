"""``imagebench report RUN_DIR``: write the run's static HTML page."""

from __future__ import annotations

import argparse
import sys

from imagebench.cli import UsageError
from imagebench.report import ReportError, read_page, read_sitting_page, write_page


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write a static HTML report of a run folder",
        description=(
            "Write RUN_DIR/report.html: figures, coverage, one row per case (failures first) and each "
            "sample's images side by side. It needs no server and opens from disk."
        ),
    )
    p.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        help="a run folder (run-<UTC timestamp>) holding run.json, or a bench panel's sitting (sitting-<UTC timestamp>): one page over its subjects",
    )
    p.add_argument("--out", metavar="FILE", help="write the page here instead of RUN_DIR/report.html")
    p.add_argument("--quiet", action="store_true", help="no progress bar; print only the page's path")
    p.add_argument(
        "--case",
        metavar="LABEL",
        help="write one case's samples as pages of their own (report-<case>-p<N>.html, 200 samples a page) instead "
        "of the run's page, which shows a few samples of a case with many",
    )
    p.add_argument(
        "--page", type=int, default=1, metavar="N", help="with --case: which page of its samples (default 1)"
    )
    p.add_argument(
        "--check-all",
        action="store_true",
        help="read every sample summary whole and check it (its digest, its journal line's brief, the files beside "
        "it); without it the samples the page does not show are counted from their signed journal lines, their "
        "summaries' sizes checked",
    )
    p.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    """Write the page; exit 1 when the run folder is forged or cannot be verified here (the page
    says which, at its top)."""
    from imagebench.runs.sitting import is_sitting

    read = read_sitting_page if is_sitting(args.run_dir) else read_page
    try:
        if args.case is not None:  # one case's samples, a page of them (written on demand)
            from imagebench.report import case_report_name, read_case_page

            run = read_case_page(args.run_dir, args.case, page=args.page, check_all=args.check_all)
            path = write_page(run, out=args.out or run.run_dir / case_report_name(args.case, args.page))
        else:
            run = (
                read(args.run_dir, progress=not args.quiet)
                if read is read_sitting_page
                else read_page(args.run_dir, progress=not args.quiet, check_all=args.check_all)
            )
            path = write_page(run, out=args.out)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        print(f"imagebench report: could not write the page: {exc}", file=sys.stderr)
        return 1
    print(path)
    contents = run.contents
    for problem in contents.integrity if contents is not None else []:
        print(f"imagebench report: {problem}", file=sys.stderr)
    if contents is not None and contents.forged:
        print(f"imagebench report: {run.run_dir.name} is FORGED: do not trust its figures", file=sys.stderr)
        return 1
    if contents is not None and contents.integrity:
        print(
            f"imagebench report: {run.run_dir.name} cannot be verified here: its figures are unchecked",
            file=sys.stderr,
        )
        return 1
    return 0
