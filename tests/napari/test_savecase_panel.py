"""The Save as case tab: an image and a painted Labels layer saved into a tree, listed at once.

The form is filled and Save clicked by objectName; the tree is then read back through its own
readers, verified by hash, and the case appears in the panel's case tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case

pytest.importorskip("napari")

from imagebench.case.declared import DECLARATION, read_declaration  # noqa: E402
from imagebench.fixtures import tree  # noqa: E402
from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

PROVENANCE = "painted in napari with the brush over a synthetic field"


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def _panel(make_napari_viewer: Any, tmp_path: Path) -> tuple[Any, BenchPanel]:
    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(cases=lambda: [make_toy_case()], outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench")
    return viewer, panel


def _painted(viewer: Any) -> np.ndarray:
    """A Labels layer painted with the brush, and the image it annotates made from it."""
    labels = viewer.add_labels(np.zeros((48, 64), dtype=np.int32), name="Labels")
    labels.brush_size = 9
    for label, centre in ((1, (12, 14)), (2, (32, 40)), (3, (14, 54))):
        labels.paint(centre, label)
    painted = np.asarray(labels.data).copy()
    assert sorted(np.unique(painted)) == [0, 1, 2, 3]
    rng = np.random.default_rng(3)
    viewer.add_image(((painted > 0) * 200.0 + rng.normal(20.0, 4.0, painted.shape)).astype(np.float32), name="nuclei")
    return painted


def _fill(panel: BenchPanel, qtbot: Any, root: Path) -> None:
    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QComboBox, QLineEdit, QListWidget, QPlainTextEdit, QPushButton

    def field(kind: Any, name: str) -> Any:
        widget = panel.findChild(kind, name)
        assert widget is not None, name
        assert widget.toolTip(), f"{name} has no tooltip"
        return widget

    data = field(QListWidget, "savecase_data")
    assert [data.item(i).text() for i in range(data.count())] == ["nuclei"]
    assert data.item(0).checkState() == Qt.CheckState.Checked  # the one image is picked
    truth = field(QComboBox, "savecase_truth")
    assert truth.currentText() == "Labels"
    prompt = field(QPlainTextEdit, "savecase_prompt")
    assert "`nuclei` (48 x 64)" in prompt.toPlainText() and "`labels`" in prompt.toPlainText()
    save = field(QPushButton, "savecase_button")
    assert not save.isEnabled() and "name the skill" in save.toolTip()
    field(QLineEdit, "savecase_skill").setText("my-skill")
    field(QLineEdit, "savecase_case").setText("blobs")
    field(QLineEdit, "savecase_tree").setText(str(root))
    field(QLineEdit, "savecase_citation").setText("the imagebench test suite")
    assert not save.isEnabled() and "provenance" in save.toolTip()
    field(QLineEdit, "savecase_provenance").setText(PROVENANCE)
    assert save.isEnabled()


def test_an_image_and_a_painted_labels_layer_are_saved_and_listed(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QLabel, QPushButton

    viewer, panel = _panel(make_napari_viewer, tmp_path)
    painted = _painted(viewer)
    root = tmp_path / "my-tree"
    _fill(panel, qtbot, root)
    qtbot.mouseClick(panel.findChild(QPushButton, "savecase_button"), Qt.MouseButton.LeftButton)

    assert tree.verify_tree(root) == []
    fixture = tree.load_fixture(root, "my-skill", "blobs")
    assert np.array_equal(np.asarray(fixture.truth["labels"]), painted)
    assert np.array_equal(np.asarray(fixture.data["nuclei"]), np.asarray(viewer.layers["nuclei"].data))
    entry = tree.load_manifest(root).entry("my-skill", "blobs")
    assert entry is not None and entry.provenance == PROVENANCE
    declared = read_declaration(root / "my-skill" / "blobs" / DECLARATION)
    assert declared.verifier.name == "label-image" and declared.leave[0].like == "nuclei"
    message = panel.findChild(QLabel, "savecase_why").text()
    assert message.startswith(f"saved my-skill/blobs into {root}") and "labels.npy" in message
    # listed at once: the panel took up the tree and selected the new case
    assert panel.model.browser.fixtures_root == root
    assert "my-skill/blobs" in panel.case_items() and panel.selected_label() == "my-skill/blobs"
    assert any("saved case my-skill/blobs" in m.text for m in panel.model.messages)

    # a second click names the case that exists and changes nothing
    before = (root / "manifest.json").read_bytes()
    qtbot.mouseClick(panel.findChild(QPushButton, "savecase_button"), Qt.MouseButton.LeftButton)
    assert "already listed" in panel.findChild(QLabel, "savecase_why").text()
    assert (root / "manifest.json").read_bytes() == before


def test_reload_the_saved_case_and_score_the_reference(make_napari_viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    """The case saved from the viewer, read back as a case, passes its reference and fails its baseline."""
    from helpers import solve_case
    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QPlainTextEdit, QPushButton
    from savecase_solutions import baseline, reference

    from imagebench.cases.declared import declared_case

    viewer, panel = _panel(make_napari_viewer, tmp_path)
    _painted(viewer)
    root = tmp_path / "my-tree"
    _fill(panel, qtbot, root)
    panel.findChild(QPlainTextEdit, "savecase_prompt").setPlainText(
        "Segment every nucleus in `nuclei`; leave `labels`, an integer label image of its shape."
    )
    qtbot.mouseClick(panel.findChild(QPushButton, "savecase_button"), Qt.MouseButton.LeftButton)
    case = declared_case(root / "my-skill" / "blobs" / DECLARATION, root)
    fixture = case.fixture.build(case.namespace, case.case_id)
    assert solve_case(case, fixture, reference).passed
    assert not solve_case(case, fixture, baseline).passed
