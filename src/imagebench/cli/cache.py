"""``imagebench cache info|clear``: the cache of built procedural fixtures (imagebench.fixtures.cache)."""

from __future__ import annotations

import argparse
import json


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="the cache of built fixtures: info (where, how many, how big) or clear")
    p.add_argument("action", choices=("info", "clear"), help="info: where it is and its size; clear: remove every entry")
    p.add_argument("--json", action="store_true", help="info as JSON")
    p.set_defaults(func=_cmd_cache)


def _cmd_cache(args: argparse.Namespace) -> int:
    from imagebench.fixtures.cache import CACHE_ENV, clear, info

    if args.action == "clear":
        removed = clear()
        print(f"removed {removed} entr{'y' if removed == 1 else 'ies'}")
        return 0
    facts = info()
    if args.json:
        print(json.dumps(facts))
    elif facts["root"] is None:
        print(f"the fixture cache is off (${CACHE_ENV})")
    else:
        print(f"{facts['root']}: {facts['entries']} entries, {facts['bytes'] / 1e6:.1f} MB")
    return 0
