#!/usr/bin/env python
"""Regenerate the scorer manifest shipped in the package (src/imagebench/data/scorer_manifest.json).

Run after any change to a module behind a score (imagebench.scoring.manifest.SCORER_MODULES:
the answer parser, the canonical forms, the comparator registry and its families, the contract
models and scorer); tests/test_scoring_manifest.py fails until the shipped manifest pins the code
again, and until then every structured answer is blocked. The source revision is left "unknown": the manifest is
committed together with the code it pins, so it cannot name that commit.

    .venv/bin/python tools/write_scorer_manifest.py
"""

from __future__ import annotations

import sys

from imagebench.scoring.manifest import packaged_manifest_path, write_scorer_manifest


def main() -> int:
    path = packaged_manifest_path()
    manifest = write_scorer_manifest(path, revision="unknown")
    print(f"wrote {path.name}: registry {manifest.registry_hash[:16]}, implementation "
          f"{manifest.implementation_hash[:16]}, self-hash {manifest.self_hash[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
