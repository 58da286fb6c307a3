"""The bench's own folders found inside a folder a subject is shown, to be masked there.

A user exposes their project folder (``--subject-expose .``: their solver lives there), and the
same folder holds what they ran before: ``outcomes/naive/run-*`` (a sample's ``truth_*``
artifacts), ``outcomes/calibration-*`` (the reference's run, the truth drawn), a sitting, a
fixture tree (truth files). The run being made hides its own outcome folder and its case's tree
(:attr:`imagebench.subjects.UnitContext.hidden`), but not those beside it, whose paths it was never
told. :func:`bench_folders` finds them by what they hold: a ``run-*`` folder holding ``run.json``,
a ``sitting-*`` folder holding ``sitting.json``, a ``calibration-*`` folder holding
``calibration.json``, and a fixture tree (a ``manifest.json`` listing ``fixtures``). Links are not
followed, and a folder found is not walked further.

The file names are those :mod:`imagebench.runs.layout`, :mod:`imagebench.runs.sitting`,
:mod:`imagebench.executor.calibration` and :mod:`imagebench.fixtures.tree` write
(``tests/test_withheld.py`` holds them equal); this floor cannot import the first three.
"""

from __future__ import annotations

import json
import os

#: ``(folder name prefix, the record it holds)`` of each folder the bench writes
MARKED = (("run-", "run.json"), ("sitting-", "sitting.json"), ("calibration-", "calibration.json"))
#: a fixture tree's manifest (:data:`imagebench.fixtures.tree.MANIFEST`)
TREE_MANIFEST = "manifest.json"
#: folders never walked: no bench folder lies there, and they can be large
_SKIPPED = frozenset({".git", "__pycache__", "node_modules", ".hg", ".svn"})
#: the largest manifest read to tell a fixture tree from another project's manifest.json
_MANIFEST_MAX = 64 * 1024 * 1024


def is_fixture_manifest(path: str) -> bool:
    """Whether ``path`` is a fixture tree's manifest: a JSON object with a ``fixtures`` list."""
    try:
        if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > _MANIFEST_MAX:
            return False
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(raw, dict) and isinstance(raw.get("fixtures"), list)


def is_bench_folder(path: str) -> bool:
    """Whether the folder at ``path`` is a run, sitting or calibration folder, or a fixture tree."""
    name = os.path.basename(path.rstrip("/"))
    for prefix, record in MARKED:
        here = os.path.join(path, record)
        if name.startswith(prefix) and os.path.isfile(here) and not os.path.islink(here):
            return True
    return is_fixture_manifest(os.path.join(path, TREE_MANIFEST))


def bench_folders(root: str) -> list[str]:
    """Every bench folder at or under ``root`` (outermost only), links never followed."""
    found: list[str] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        if is_bench_folder(folder):
            found.append(folder)
            continue
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name not in _SKIPPED and entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:  # a folder the harness cannot list is one the sandbox shows as it is
            continue
    return sorted(found)


__all__ = ["MARKED", "TREE_MANIFEST", "bench_folders", "is_bench_folder", "is_fixture_manifest"]
