"""``imagebench schema``: print the JSON schema of each on-disk record."""

from __future__ import annotations

import argparse
import json


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the JSON schema of an on-disk record (summary, run, ...)")
    p.add_argument("record", nargs="?", help="record name; omit to list them")
    p.set_defaults(func=_cmd_schema)


def _cmd_schema(args: argparse.Namespace) -> int:
    from imagebench.cli import UsageError
    from imagebench.records import RECORDS

    schemas = dict(RECORDS)
    try:
        from imagebench.tree import SCHEMAS as tree_schemas

        schemas.update(tree_schemas)
    except ImportError:
        pass
    if not args.record:
        print("\n".join(sorted(schemas)))
        return 0
    if args.record not in schemas:
        raise UsageError(f"unknown record {args.record!r}; valid: {', '.join(sorted(schemas))}")
    print(json.dumps(schemas[args.record].model_json_schema(), indent=2))
    return 0
