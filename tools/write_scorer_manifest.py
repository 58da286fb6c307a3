#!/usr/bin/env python
"""Regenerate the scorer manifest shipped in the package (src/imagebench/data/scorer_manifest.json).

Run after any change to a module behind a score (imagebench.scoring.manifest.SCORER_MODULES:
the answer parser, the canonical forms, the comparator registry and its families, the contract
models and scorer); tests/test_scoring_manifest.py fails until the shipped manifest pins the code
again, and until then every structured answer is blocked.

The manifest names the last commit that touched the scorer files (``git log -1 --format=%H --
<files>``) and their tree hash, so the order is: commit the scorer change first, then run this and
commit the manifest on its own (a manifest committed with the code it pins could not name that
commit). It refuses while the scorer files hold uncommitted changes (``--allow-dirty`` writes the
hashes anyway, naming the last commit, for a check before committing) and when there is no git
checkout to ask.

    .venv/bin/python tools/write_scorer_manifest.py [--allow-dirty]
"""

from __future__ import annotations

import argparse
import sys

from imagebench.scoring.manifest import (
    checkout_dirty,
    packaged_manifest_path,
    scorer_files,
    scorer_revision,
    write_scorer_manifest,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="write even though the scorer files hold uncommitted changes (run again once they are committed)",
    )
    args = parser.parse_args(argv)
    revision = scorer_revision()
    if revision == "unknown":
        print(
            "write_scorer_manifest: no git history names the scorer files (not a checkout, or git is missing); "
            "run it in the repository",
            file=sys.stderr,
        )
        return 1
    dirty = checkout_dirty(list(scorer_files().values()))
    if dirty and not args.allow_dirty:
        print(
            "write_scorer_manifest: the scorer files hold uncommitted changes; commit them first (the manifest "
            "names the last commit that touched them), or give --allow-dirty and run again after committing",
            file=sys.stderr,
        )
        return 1
    path = packaged_manifest_path()
    manifest = write_scorer_manifest(path, revision=revision)
    print(
        f"wrote {path.name}: revision {manifest.source_revision[:12]}"
        + (" (with uncommitted scorer changes: run again after committing)" if dirty else "")
        + f", tree {(manifest.tree_hash or '')[:16]}, registry {manifest.registry_hash[:16]}, implementation "
        f"{manifest.implementation_hash[:16]}, self-hash {manifest.self_hash[:16]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
