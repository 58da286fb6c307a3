"""``imagebench mcp serve CASE``: one session of one case served to an agent over MCP.

stdio by default (the agent's client starts this command), ``--http`` for streamable HTTP on
loopback. The session ends when the client closes stdio (HTTP: when it calls ``submit``); what
it left through the tools is then scored into a run folder like any other run, with the
transcript in the sample folder and ``report.html`` (``--no-report``: none), and the exit code is
``run``'s. A client that called no tool (a bare ``tools/list`` probe) leaves a ``not-attempted``
sample, excluded from every figure and counted. stdout belongs to the protocol: everything else
goes to stderr.
"""

from __future__ import annotations

import argparse
import sys

from imagebench.cli import UsageError


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve one case's session to an agent over MCP (mcp serve CASE)")
    msub = p.add_subparsers(dest="mcp_command", metavar="ACTION")
    s = msub.add_parser("serve", help="serve one session of CASE: stdio by default, --http for loopback HTTP")
    s.add_argument("label", help="case label, <namespace>/<case_id>")
    from imagebench.cli.catalog import add_catalog_flags

    add_catalog_flags(s)
    s.add_argument("--http", action="store_true", help="streamable HTTP on http://127.0.0.1:PORT/mcp instead of stdio")
    s.add_argument("--port", type=int, default=8765, help="the HTTP port (default 8765)")
    s.add_argument(
        "--workspace", metavar="DIR", help="the agent's folder: .npy files it names are read from here (default: none)"
    )
    s.add_argument("--out", metavar="DIR", help="where the run folder goes (default: the outcome root)")
    s.add_argument("--timeout", type=float, default=3600.0, help="end the session after this many seconds (3600)")
    s.add_argument("--no-report", action="store_true", help="do not write report.html into the run folder at the end")
    s.set_defaults(func=_cmd_serve)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def _cmd_serve(args: argparse.Namespace) -> int:
    from pathlib import Path

    from imagebench.case.model import select_cases
    from imagebench.cli.catalog import catalog_from_args
    from imagebench.executor import run_cases
    from imagebench.subjects.served import ServedSubject

    catalog = catalog_from_args(args)
    pool = catalog.cases
    chosen = [c for c in pool if c.label == args.label] or select_cases(pool, [args.label])[0]
    if len(chosen) != 1:
        raise UsageError(f"{args.label!r} names {len(chosen)} cases; give one case label (imagebench list)")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    workspace = Path(args.workspace).resolve() if args.workspace else None
    if workspace is not None and not workspace.is_dir():
        raise UsageError(f"--workspace {args.workspace}: no such folder")
    protocol = sys.stdout.buffer  # the protocol's; everything printed goes to stderr from here on
    real_stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        import io

        subject = ServedSubject(
            "http" if args.http else "stdio",
            port=args.port,
            workspace=workspace,
            stdout=None if args.http else io.TextIOWrapper(protocol, encoding="utf-8", write_through=True),
        )
        if args.http:
            print(f"serving {chosen[0].label} on http://127.0.0.1:{args.port}/mcp", file=sys.stderr)
        result = run_cases(
            chosen,
            subject,
            out=args.out,
            progress=False,
            timeout=args.timeout,
            sources=catalog.records([c.label for c in chosen]),
        )
    finally:
        sys.stdout = real_stdout
    for label, samples in result.samples.items():
        for s in samples:
            print(f"{label}: {s.status}{' - ' + s.reason if s.reason else ''}", file=sys.stderr)
    if not args.no_report:
        try:
            from imagebench.report import write_html_report

            print(f"report: {write_html_report(result.run_dir, progress=False)}", file=sys.stderr)
        except Exception as exc:  # the run stands; only its page is missing
            print(f"report not written: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(f"run folder: {result.run_dir}", file=sys.stderr)
    import threading

    if any(t.name == "imagebench-mcp-stdio" and t.is_alive() for t in threading.enumerate()):
        # a client that still holds stdin past the limit: its reader cannot be ended, and Python
        # aborts at shutdown over a thread inside a read of stdin; the run is written, so leave now
        import os

        sys.stderr.flush()
        os._exit(result.exit_code)
    return result.exit_code
