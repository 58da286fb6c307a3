"""Save as case without Qt: what the form offers, the rule that enables Save, and the save itself.

The layers are stand-ins carrying what the model reads of a napari layer (its class name,
``name``, ``data``, ``scale``, ``translate``, ``shape_type``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from savecase_solutions import field

from imagebench.case.declared import read_declaration
from imagebench.fixtures import tree
from napari_imagebench._base import PanelError
from napari_imagebench._savecase_model import SaveCaseModel, SaveForm, key_for


class _Layer:
    def __init__(self, name: str, data: Any, scale: Any = None, translate: Any = None, **extra: Any) -> None:
        self.name, self.data = name, data
        ndim = np.ndim(data) if not isinstance(data, list) else 2
        self.scale = list(scale) if scale is not None else [1.0] * ndim
        self.translate = list(translate) if translate is not None else [0.0] * ndim
        self.multiscale = False
        for key, value in extra.items():
            setattr(self, key, value)


class Image(_Layer):
    pass


class Labels(_Layer):
    pass


class Points(_Layer):
    pass


class Shapes(_Layer):
    pass


class Surface(_Layer):
    pass


def _viewer() -> dict[str, Any]:
    image, labels = field()
    layers = [
        Image("nuclei", image),
        Labels("Labels", labels),
        Points("Points", np.array([[11.0, 13.5], [33.0, 38.0]])),
        Shapes("Shapes", [np.array([[5, 5], [5, 15], [15, 15], [15, 5]], float)], shape_type=["rectangle"]),
        Surface("mesh", np.zeros((3, 3))),
    ]
    return {layer.name: layer for layer in layers}


def _form(tmp_path: Path, **changes: Any) -> SaveForm:
    form = SaveForm(
        data=["nuclei"],
        truth="Labels",
        skill="my-skill",
        case_id="blobs",
        prompt="Segment every nucleus in `nuclei`; leave `labels`, an integer label image.",
        citation="the imagebench test suite",
        provenance="painted by hand in napari",
        tree=str(tmp_path / "tree"),
    )
    return replace(form, **changes)


def test_the_form_offers_images_as_data_and_annotations_as_truth() -> None:
    data, truth = SaveCaseModel.offered(_viewer().values())
    assert data == ["nuclei"] and truth == ["Labels", "Points", "Shapes"]


def test_keys_are_lowercase_names_never_shared() -> None:
    assert (
        key_for("Labels") == "labels" and key_for("blobs [1]") == "blobs_1" and key_for("3d stack") == "layer_3d_stack"
    )
    assert key_for("nuclei", ["nuclei"]) == "nuclei_2"
    form = SaveForm(data=["Cells", "cells"], truth="CELLS")
    assert SaveCaseModel.keys(form) == ({"Cells": "cells", "cells": "cells_2"}, "cells_3")


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"data": []}, "pick at least one data layer"),
        ({"data": ["Labels"]}, "is not an Image layer"),
        ({"data": ["gone"]}, "is not an Image layer"),
        ({"truth": None}, "pick the truth layer"),
        ({"truth": "mesh"}, "is not a Labels, Points or Shapes layer"),
        ({"skill": ""}, "name the skill"),
        ({"case_id": "  "}, "name the case"),
        ({"case_id": "My Case"}, "must be lowercase"),
        ({"tree": ""}, "choose the fixture tree"),
        ({"prompt": " \n"}, "write the prompt"),
        ({"citation": ""}, "write the citation"),
        ({"provenance": "  "}, "write the provenance"),
    ],
)
def test_save_waits_for_every_field(tmp_path: Path, changes: dict, why: str) -> None:
    rules = SaveCaseModel()
    assert rules.problem(_form(tmp_path), _viewer()) is None
    problem = rules.problem(_form(tmp_path, **changes), _viewer())
    assert problem is not None and why in problem


def test_the_packaged_tree_is_never_written(tmp_path: Path) -> None:
    packaged = tmp_path / "package" / "fixtures"
    packaged.mkdir(parents=True)
    rules = SaveCaseModel(packaged_root=packaged)
    for target in (packaged, packaged / "sub"):
        assert "shipped inside the package" in (rules.problem(_form(tmp_path, tree=str(target)), _viewer()) or "")
        with pytest.raises(PanelError, match="shipped inside the package"):
            rules.save(_form(tmp_path, tree=str(target)), _viewer())
    assert list(packaged.iterdir()) == []


def test_the_default_prompt_names_the_data_and_the_leaving(tmp_path: Path) -> None:
    rules = SaveCaseModel()
    text = rules.default_prompt(_form(tmp_path), _viewer())
    assert "`nuclei` (48 x 64)" in text and "`labels`" in text
    assert "(N, 2)" in rules.default_prompt(_form(tmp_path, truth="Points"), _viewer())
    assert rules.default_prompt(_form(tmp_path, truth=None), _viewer()) == ""


def test_save_writes_a_case_the_tree_reads_back(tmp_path: Path) -> None:
    saved = SaveCaseModel().save(_form(tmp_path), _viewer())
    root = tmp_path / "tree"
    assert saved.label == "my-skill/blobs" and tree.verify_tree(root) == []
    fixture = tree.load_fixture(root, "my-skill", "blobs")
    assert np.array_equal(np.asarray(fixture.truth["labels"]), field()[1])
    assert read_declaration(saved.declaration_path).verifier.name == "label-image"


def test_shapes_are_saved_as_a_label_image(tmp_path: Path) -> None:
    form = _form(tmp_path, truth="Shapes", prompt="Segment the nuclei in `nuclei`; leave `shapes`, a label image.")
    SaveCaseModel().save(form, _viewer())
    truth = np.asarray(tree.load_fixture(tmp_path / "tree", "my-skill", "blobs").truth["shapes"])
    assert truth.shape == (48, 64) and truth[10, 10] == 1 and truth[30, 30] == 0


def test_a_truth_off_the_data_grid_is_refused(tmp_path: Path) -> None:
    layers = _viewer()
    layers["Labels"].scale = [2.0, 2.0]
    with pytest.raises(PanelError, match="truth layer 'Labels' has scale"):
        SaveCaseModel().save(_form(tmp_path), layers)
    layers = _viewer()
    layers["Points"].translate = [0.0, 5.0]
    with pytest.raises(PanelError, match="translate"):
        SaveCaseModel().save(_form(tmp_path, truth="Points", prompt="Find them in `nuclei`; leave `points`."), layers)
    assert not (tmp_path / "tree").exists()


def test_a_dishonest_truth_layer_is_refused_and_nothing_written(tmp_path: Path) -> None:
    layers = _viewer()
    layers["Labels"].data = np.full((48, 64), np.nan)
    with pytest.raises(PanelError, match="truth layer 'Labels'.*NaN.*nothing was written"):
        SaveCaseModel().save(_form(tmp_path), layers)
    layers["Labels"].data = np.ones((10, 10), np.int32)
    with pytest.raises(PanelError, match="grid of no data layer"):
        SaveCaseModel().save(_form(tmp_path), layers)
    assert not (tmp_path / "tree").exists()


def test_an_existing_case_is_refused(tmp_path: Path) -> None:
    SaveCaseModel().save(_form(tmp_path), _viewer())
    with pytest.raises(PanelError, match="already listed"):
        SaveCaseModel().save(_form(tmp_path), _viewer())
