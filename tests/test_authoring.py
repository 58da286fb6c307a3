"""Every authoring script under tools/ re-creates its curated fixtures byte for byte.

Each ``tools/author_*.py`` names the ``(skill, case_id)`` pairs it writes in ``CASES`` and takes
``--out``. It is run here into an empty tree; every file it writes must have the sha256 and size
the packaged manifest records, with the same provenance and citation, and the case layout must be
identical. The registry sources come from ``tools/sources.py`` (the pinned stardist wheel is kept
by ``make setup``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from imagebench.fixtures import tree

REPO = Path(__file__).resolve().parent.parent
PACKAGED = REPO / "src" / "imagebench" / "data" / "fixtures"
SCRIPTS = sorted((REPO / "tools").glob("author_*.py"))


def _load(path: Path) -> Any:
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(path.parent))


def test_every_packaged_fixture_has_an_authoring_script() -> None:
    written = {pair for script in SCRIPTS for pair in _load(script).CASES}
    packaged = {(e.skill, e.case_id) for e in tree.load_manifest(PACKAGED).fixtures}
    assert packaged <= written, f"curated fixtures no script writes: {sorted(packaged - written)}"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_the_script_recreates_its_fixtures_byte_for_byte(script: Path, tmp_path: Path) -> None:
    module = _load(script)
    assert module.main(["--out", str(tmp_path)]) == 0
    ours, theirs = tree.load_manifest(PACKAGED), tree.load_manifest(tmp_path)
    assert module.CASES, f"{script.name} names no case in CASES"
    for skill, case_id in module.CASES:
        want, got = ours.entry(skill, case_id), theirs.entry(skill, case_id)
        assert want is not None, f"{skill}/{case_id} is not in the packaged manifest"
        assert got is not None, f"{script.name} did not write {skill}/{case_id}"
        assert got.files.keys() == want.files.keys()
        for name, entry in want.files.items():
            assert (got.files[name].sha256, got.files[name].bytes) == (entry.sha256, entry.bytes), (
                f"{skill}/{case_id}/{name}: re-authored bytes differ from the packaged ones"
            )
        assert (got.provenance, got.citation) == (want.provenance, want.citation)
        assert tree.load_layout(tmp_path, skill, case_id) == tree.load_layout(PACKAGED, skill, case_id)
    assert tree.verify_tree(tmp_path) == []
