"""A user's own package and fixture tree, written into a test's tmp_path: the tests of declared
cases, targets and bundle cases share it (``from user_code import write_user_package``).

``write_user_package(folder, name)`` writes the package ``<name>/``: ``build.py`` (a builder
``build(seed, size)``: bright squares and their label image, data key ``raw``, truth key
``nuclei``), ``score.py`` (a verifier ``verify(fixture, attempt, truth="nuclei")`` with metric
``mismatch``), ``solve.py`` (``reference``: a threshold and connected components; ``baseline``:
one object over the whole image) and ``__init__.py`` re-exporting ``reference`` (a package
target whose callable another file defines). ``write_tree(root, ...)`` writes a fixture tree with
one curated case built by it and its ``bench-case.json``.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

BUILD = """
import numpy as np
from scipy import ndimage as ndi

from imagebench.fixtures.fixture import Fixture


def build(*, seed, size=48):
    rng = np.random.default_rng(seed)
    labels = np.zeros((size, size), np.int32)
    k = 0
    for r in range(4, size - 10, 14):
        for c in range(4, size - 10, 14):
            k += 1
            labels[r : r + 8, c : c + 8] = k
    raw = (labels > 0).astype(np.float32) + rng.normal(0, 0.05, labels.shape).astype(np.float32)
    return Fixture(provenance=f"squares, seed {seed}", data={"raw": raw}, truth={"nuclei": labels})
"""

SCORE = """
import numpy as np

from imagebench.fixtures.fixture import Metric, Outcome, read_array

THRESHOLD = 0.5


def verify(fixture, attempt, truth="nuclei"):
    true = np.asarray(fixture.truth[truth]) > 0
    labels, why = read_array(attempt, "labels", shape=true.shape, dtype="iu")
    limit = fixture.tolerance["mismatch"]
    if labels is None:
        return Outcome(fixture, attempt, [Metric.missing("mismatch", limit, why)])
    return Outcome(fixture, attempt, [Metric("mismatch", float(np.mean((labels > 0) != true)), limit)])
"""

SOLVE = """
import numpy as np
from scipy import ndimage as ndi


def reference(session):
    image = np.asarray(session.namespace["image"])
    session.namespace["labels"] = ndi.label(image > 0.5)[0].astype(np.int32)


def baseline(session):
    image = np.asarray(session.namespace["image"])
    session.namespace["labels"] = np.ones(image.shape, np.int32)
"""

INIT = "from .solve import reference\n"


def write_user_package(folder: Path, name: str = "mybench", *, score: str = SCORE) -> Path:
    pkg = folder / name
    pkg.mkdir(parents=True, exist_ok=True)
    for file, text in (("__init__.py", INIT), ("build.py", BUILD), ("score.py", score), ("solve.py", SOLVE)):
        (pkg / file).write_text(textwrap.dedent(text).lstrip())
    return pkg


def forget_package(name: str) -> None:
    """Drop ``name`` and its submodules from ``sys.modules``: the next import reads this test's copy."""
    import sys

    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


LABEL_TOLERANCE = {"f1_shortfall": 0.05, "missed_fraction": 0.05, "false_fraction": 0.05, "iou_shortfall": 0.1}


def declaration(pkg: str = "mybench", **change: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "version": 1,
        "skill": "my-skill",
        "case_id": "squares",
        "prompt": "Segment every square in `image`; leave `labels`, an integer label image, one label per square.",
        "layers": [{"name": "image", "key": "raw"}],
        "leave": [{"name": "labels", "layer": "labels", "like": "image"}],
        "verifier": {"name": "label-image", "params": {"data": "raw", "truth": "nuclei", "leaving": "labels"}},
        "tolerance": dict(LABEL_TOLERANCE),
        "reference": f"{pkg}.solve:reference",
        "baseline": f"{pkg}.solve:baseline",
    }
    body.update(change)
    return body


def write_tree(
    root: Path, body: dict[str, Any] | None = None, *, skill: str = "my-skill", case_id: str = "squares"
) -> Path:
    """A fixture tree at ``root`` with one curated case (``raw.npy`` data, ``nuclei.npy`` truth) and
    its declaration; returns the declaration's path."""
    from imagebench.fixtures.tree import write_case_layout, write_manifest_entry

    folder = root / skill / case_id
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    labels = np.zeros((48, 48), np.int32)
    for k, (r, c) in enumerate(((4, 4), (4, 30), (30, 4), (30, 30)), start=1):
        labels[r : r + 9, c : c + 9] = k
    raw = (labels > 0).astype(np.float32) + rng.normal(0, 0.05, labels.shape).astype(np.float32)
    np.save(folder / "raw.npy", raw)
    np.save(folder / "nuclei.npy", labels)
    write_case_layout(
        root, skill, case_id, about="four squares", data={"raw": "raw.npy"}, truth={"nuclei": "nuclei.npy"}
    )
    write_manifest_entry(
        root, skill, case_id, provenance="drawn for a test", citation="none", files=["raw.npy", "nuclei.npy"]
    )
    path = folder / "bench-case.json"
    body = declaration() if body is None else body
    path.write_text(json.dumps({**body, "skill": skill, "case_id": case_id}, indent=2))
    return path
