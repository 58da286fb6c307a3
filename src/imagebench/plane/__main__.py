"""``python -m imagebench.plane serve ...``: the plane's own commands, without the rest of the CLI.

The plane process is started this way so that it depends on nothing but the plane package.
"""

import argparse
import sys

from imagebench.plane import add_cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m imagebench.plane")
    add_cli(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    args = parser.parse_args(["plane", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
