"""Which cases share a file: what shows one of them may show another's truth. Qt-free.

Curated cases are cut from a few real images, and some share files: ``segment-nuclei/dsb2018``
and ``segment-nuclei/dsb2018-dim`` score against one mask, which
``segmentation-qc-metrics/dsb2018-watershed`` shows as its data. So a person who saw one case's
artifacts, or opened another case's data, may have seen the loaded case's truth. The panel's
flags are therefore kept per case and read over a case's *kin*: every case of the fixture tree
whose manifest lists a file with the same sha256 as one of its files (data or truth: the
manifest does not say which, so the test is the conservative one). A case outside the tree
(procedural, a bundle's) is kin to itself alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def kinship(manifest_root: str | os.PathLike[str] | None) -> dict[str, frozenset[str]]:
    """``{label: labels sharing a file with it (itself included)}`` for the cases of the fixture
    tree at ``manifest_root`` (the packaged tree when None); empty when it has no readable manifest."""
    from imagebench.fixtures.fixture import FixtureError
    from imagebench.fixtures.tree import PACKAGED_ROOT, load_manifest

    try:
        manifest = load_manifest(Path(manifest_root) if manifest_root is not None else PACKAGED_ROOT)
    except (FixtureError, OSError):
        return {}
    digests = {f"{e.skill}/{e.case_id}": {f.sha256 for f in e.files.values()} for e in manifest.fixtures}
    return {a: frozenset(b for b, theirs in digests.items() if ours & theirs) for a, ours in digests.items()}


def kin_of(label: str, kin: Mapping[str, frozenset[str]]) -> frozenset[str]:
    """``label`` and every case sharing a file with it."""
    return kin.get(label, frozenset()) | {label}
