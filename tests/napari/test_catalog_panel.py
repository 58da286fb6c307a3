"""Cases from anywhere in the bench panel (run under xvfb-run): an installed package's case module
(a fake distribution whose ``imagebench.cases`` entry point names a module with a procedural
builder, written into tmp_path) is listed by itself in the case tree, names its source in the tree
and in the Detail tab, and Loads; a catalog handed to the model names a ``--cases`` module."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from test_catalog import install_entry_point, write_skill  # noqa: E402

from imagebench.catalog import build_catalog  # noqa: E402
from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._style import LABEL_ROLE  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

LABEL = "blob-skill/three-squares"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    write_skill(site)
    install_entry_point(site, "blob-skill-pkg", {"blob-skill": "blobskill.cases"})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("IMAGEBENCH_FIXTURES", raising=False)
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))
    importlib.invalidate_caches()
    yield site
    for name in [n for n in sys.modules if n == "blobskill" or n.startswith("blobskill.")]:
        del sys.modules[name]


def _item(panel: BenchPanel, label: str) -> Any:
    tree = panel.findChild(type(panel.case_tree), "case_tree")
    for i in range(tree.topLevelItemCount()):
        group = tree.topLevelItem(i)
        for j in range(group.childCount()):
            if group.child(j).data(0, LABEL_ROLE) == label:
                return group.child(j)
    return None


def test_an_installed_packages_case_is_listed_with_its_source_and_loads(
    make_napari_viewer: Any, qtbot: Any, installed: Path, tmp_path: Path
) -> None:
    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(outcome_root=tmp_path / "panel-out"))  # the default catalog
    viewer.window.add_dock_widget(panel, name="Imagebench")
    item = _item(panel, LABEL)
    assert item is not None, "the entry point's case is not in the case tree"
    assert item.text(4) == "entry-point" and "entry point blob-skill = blobskill.cases" in item.toolTip(0)
    assert not panel.case_tree.isColumnHidden(4)  # the source column shows once a case is not built-in
    assert _item(panel, "segment-nuclei/synthetic-blobs").text(4) == "built-in"
    panel.select_case(LABEL)
    assert "from entry point blob-skill = blobskill.cases (distribution blob-skill-pkg)" in panel.detail.toPlainText()
    assert panel.load(LABEL)
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.model.loaded is not None and panel.model.loaded.case.label == LABEL
    image = next(layer for layer in viewer.layers if layer.name == "image")
    assert np.asarray(image.data).shape == (40, 40)
    # its reference, scored by the built-in label-image verifier the package names
    panel.subject_combo.setCurrentText("reference")
    assert panel.run()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    result = panel.score()
    assert result is not None and result.status == "ok", result


def test_a_catalog_given_to_the_model_names_a_module(
    make_napari_viewer: Any, qtbot: Any, installed: Path, tmp_path: Path
) -> None:
    catalog = build_catalog(builtin=False, entry_points=False, modules=["blobskill.cases"], env_tree=False)
    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(cases=lambda: catalog, outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench")
    item = _item(panel, "blob-skill/three-more")
    assert item is not None and item.text(4) == "module"
    assert panel.model.browser.detail("blob-skill/three-more").origin == "module blobskill.cases"
    assert panel.load("blob-skill/three-more")
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.model.loaded is not None and panel.model.loaded.case.label == "blob-skill/three-more"
