"""``imagebench plane serve`` and ``imagebench plane list``: the tensor data plane's own commands.

``python -m imagebench.plane`` runs the same parser (a plane process is started that way)."""

from __future__ import annotations

import argparse
from typing import Any


def _serve(args: argparse.Namespace) -> int:
    from imagebench.plane.process import flight_missing

    missing = flight_missing()
    if missing:
        import sys

        print(f"imagebench plane serve: {missing}", file=sys.stderr)
        return 1
    from imagebench.plane.server import serve

    return serve(host=args.host, port=args.port, data_dir=args.data_dir, watch_parent=args.watch_parent)


def _list(args: argparse.Namespace) -> int:
    import sys

    from imagebench.plane.client import Client, clean_message

    try:
        client = Client(args.url)
        ids = client.list()
        for sid in ids:
            d = client.describe(sid)
            print(f"{sid}  {'x'.join(map(str, d['shape']))} {d['dtype']}  chunks {d['chunks']}  levels {len(d['levels'])}")
    except ValueError as exc:
        print(f"imagebench plane list: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"imagebench plane list: {clean_message(exc)}", file=sys.stderr)
        return 1
    return 0


def add_cli(subparsers: Any) -> None:
    plane = subparsers.add_parser(
        "plane", help="the tensor data plane (Arrow Flight)", description="The tensor data plane (Arrow Flight)."
    )
    sub = plane.add_subparsers(dest="plane_command", metavar="SUBCOMMAND", required=True)
    serve = sub.add_parser(
        "serve",
        help="run a plane server until SIGTERM/SIGINT",
        description=(
            "Serve the data plane on loopback. Prints its URL (grpc://HOST:PORT) on the first line of stdout "
            "and 'data-dir PATH' on the second, then serves until SIGTERM or SIGINT. Without --data-dir it "
            "uses a temporary folder that it removes when it stops."
        ),
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="a loopback address (default 127.0.0.1); another address of this machine only with a read key "
        "in $IMAGEBENCH_PLANE_READ_KEY (every call then carries a token)",
    )
    serve.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    serve.add_argument("--data-dir", default=None, help="keep the store here instead of a temporary folder")
    serve.add_argument(
        "--watch-parent", action="store_true", help="stop when the process that started this one goes away"
    )
    serve.set_defaults(func=_serve)
    lister = sub.add_parser(
        "list",
        help="list what a running plane stores",
        description="List a plane's ids (what $IMAGEBENCH_TENSOR_TOKEN reads, on a plane that asks for a token).",
    )
    lister.add_argument("url", help="the plane's URL, e.g. grpc://127.0.0.1:PORT")
    lister.set_defaults(func=_list)


