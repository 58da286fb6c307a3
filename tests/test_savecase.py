"""Save as case, the core: a person's arrays written into a fixture tree as a curated, declared case.

Each test reads back what was written through the tree's own readers (``load_layout``,
``load_manifest``, ``load_fixture``, ``read_declaration``) and ``verify_tree``; every refusal
is checked to leave the tree exactly as it was."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import build_tree
from savecase_solutions import field

from imagebench.case.declared import DECLARATION, read_declaration
from imagebench.cases import authoring
from imagebench.cases.authoring import DEFAULT_TOLERANCES, SaveError, save_case
from imagebench.fixtures import tree
from imagebench.fixtures.annotations import AnnotationError, shapes_label_image
from imagebench.fixtures.authoring import CaseExists
from imagebench.fixtures.fixture import FixtureError

WORDS = {"provenance": "painted by hand over a synthetic field, seed 3", "citation": "the imagebench test suite"}


def _snapshot(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(root.rglob("*"))
    }


def _save(root: Path, **changes: object) -> authoring.SavedCase:
    image, labels = field()
    args: dict[str, object] = {
        "data": {"nuclei": image},
        "truth": {"labels": labels},
        "kinds": {"labels": "labels"},
        **WORDS,
    }
    args.update(changes)
    return save_case(root, "my-skill", str(args.pop("case_id", "blobs")), **args)  # type: ignore[arg-type]


def test_a_saved_case_reads_back_through_the_tree_and_verifies_clean(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    image, labels = field()
    saved = _save(root, reference="savecase_solutions:reference")
    folder = root / "my-skill" / "blobs"
    assert saved.written.folder == folder and saved.label == "my-skill/blobs"
    assert sorted(p.name for p in folder.iterdir()) == [DECLARATION, "case.json", "labels.npy", "nuclei.npy"]

    layout = tree.load_layout(root, "my-skill", "blobs")
    assert dict(layout.data) == {"nuclei": "nuclei.npy"} and dict(layout.truth) == {"labels": "labels.npy"}
    entry = tree.load_manifest(root).entry("my-skill", "blobs")
    assert entry is not None and entry.provenance == WORDS["provenance"] and entry.citation == WORDS["citation"]
    assert set(entry.files) == {"nuclei.npy", "labels.npy", DECLARATION}
    assert entry.files["labels.npy"].arrays["labels"].shape == [48, 64]
    assert entry.files["labels.npy"].arrays["labels"].dtype == "uint8"  # the smallest type holding label 3
    assert entry.files[DECLARATION].arrays == {}
    assert entry.files["nuclei.npy"].sha256 == tree.sha256_file(folder / "nuclei.npy")
    assert entry.files["nuclei.npy"].bytes == (folder / "nuclei.npy").stat().st_size

    fixture = tree.load_fixture(root, "my-skill", "blobs")
    assert np.array_equal(np.asarray(fixture.data["nuclei"]), image)
    assert np.array_equal(np.asarray(fixture.truth["labels"]), labels)
    assert "labels" not in fixture.data  # truth is never data

    declared = read_declaration(folder / DECLARATION)
    assert declared == saved.declaration
    assert [(layer.name, layer.key, layer.kind) for layer in declared.layers] == [("nuclei", "nuclei", "image")]
    (leaving,) = declared.leave
    assert (leaving.name, leaving.layer, leaving.like) == ("labels", "labels", "nuclei")
    assert declared.verifier.name == "label-image"
    assert declared.verifier.params == {"data": "nuclei", "truth": "labels", "leaving": "labels"}
    assert declared.tolerance == DEFAULT_TOLERANCES["label-image"]
    assert declared.reference == "savecase_solutions:reference" and declared.baseline is None
    assert "`nuclei` (48 x 64)" in declared.prompt and "`labels`" in declared.prompt
    assert tree.verify_tree(root) == []


def test_the_manifest_keeps_the_other_cases(tmp_path: Path) -> None:
    build_tree(tmp_path)
    before = tree.load_manifest(tmp_path).entry("seg", "tiny")
    _save(tmp_path)
    manifest = tree.load_manifest(tmp_path)
    assert [e.label for e in manifest.fixtures] == ["my-skill/blobs", "seg/tiny"]
    assert manifest.entry("seg", "tiny") == before
    assert tree.verify_tree(tmp_path) == []


def test_a_case_is_never_overwritten(tmp_path: Path) -> None:
    _save(tmp_path)
    before = _snapshot(tmp_path)
    with pytest.raises(CaseExists, match="my-skill/blobs is already listed"):
        _save(tmp_path, prompt="Segment `nuclei` again; leave `labels`.")
    assert _snapshot(tmp_path) == before
    (tmp_path / "my-skill" / "stray").mkdir()  # a folder nobody listed is not free either
    with pytest.raises(CaseExists, match="stray already exists"):
        _save(tmp_path, case_id="stray")
    assert not any((tmp_path / "my-skill" / "stray").iterdir())


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"case_id": "Blobs"}, "case_id"),
        ({"case_id": "../escape"}, "case_id"),
        ({"data": {"Nuclei": field()[0]}}, "'Nuclei'"),
        ({"truth": {"the labels": field()[1]}, "kinds": {"the labels": "labels"}}, "'the labels'"),
        ({"provenance": ""}, "provenance"),
        ({"provenance": "   "}, "provenance"),
        ({"citation": ""}, "citation"),
        ({"prompt": "Segment the nuclei, please."}, "the prompt must name what to leave"),
        ({"reference": "not a target"}, "reference"),
        ({"kinds": {"labels": "mask"}}, "kind 'mask'"),
        ({"verifier": "my-own"}, "no default limits"),
        ({"tolerance": {"f1_shortfal": 0.2}}, "['f1_shortfal']: not metrics of verifier 'label-image'"),
    ],
)
def test_bad_input_is_named_and_nothing_is_written(tmp_path: Path, changes: dict, named: str) -> None:
    root = tmp_path / "tree"
    build_tree(root)
    before = _snapshot(root)
    with pytest.raises((SaveError, FixtureError)) as caught:
        _save(root, **changes)
    assert named in str(caught.value)
    assert _snapshot(root) == before


def test_nothing_is_written_into_a_tree_that_did_not_exist(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="provenance"):
        _save(tmp_path / "new", provenance="")
    assert not (tmp_path / "new").exists()


def test_an_unreadable_manifest_stops_the_save(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{ not json")
    with pytest.raises(FixtureError, match="manifest.json: not valid JSON"):
        _save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_a_failed_manifest_write_takes_the_folder_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from imagebench.fixtures import authoring as writing

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(writing, "write_manifest_entry", refuse)
    with pytest.raises(OSError, match="disk full"):
        _save(tmp_path)
    assert list(tmp_path.iterdir()) == []  # no case folder, no staging folder, no skill folder


@pytest.mark.parametrize(
    ("truth", "named"),
    [
        (np.where(field()[1] > 0, np.nan, 0.0), "NaN"),
        (field((40, 64))[1], "shape [40, 64] is the grid of no data layer"),
        (np.zeros((48, 64), np.int32), "holds no object"),
        (-field()[1], "negative labels"),
        (field()[1] + 0.5, "fractional"),
    ],
)
def test_a_dishonest_label_truth_is_refused_naming_the_layer(tmp_path: Path, truth: np.ndarray, named: str) -> None:
    with pytest.raises(SaveError, match="truth layer 'labels'") as caught:
        _save(tmp_path, truth={"labels": truth})
    assert named in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_points_truth_gets_the_points_verifier(tmp_path: Path) -> None:
    points = np.array([[11.0, 13.5], [33.0, 38.0], [14.0, 55.0]])
    saved = _save(tmp_path, truth={"spots": points}, kinds={"spots": "points"})
    declared = saved.declaration
    assert declared.verifier.name == "points" and declared.leave[0].layer == "points"
    assert declared.tolerance == DEFAULT_TOLERANCES["points"] and "(N, 2)" in declared.prompt
    fixture = tree.load_fixture(tmp_path, "my-skill", "blobs")
    assert np.asarray(fixture.truth["spots"]).dtype == np.float64
    assert np.array_equal(np.asarray(fixture.truth["spots"]), points)
    assert tree.verify_tree(tmp_path) == []


def test_a_limit_on_a_metric_scored_only_when_named_opts_the_case_into_it(tmp_path: Path) -> None:
    points = np.array([[11.0, 13.5], [33.0, 38.0], [14.0, 55.0]])
    saved = _save(tmp_path, truth={"spots": points}, kinds={"spots": "points"}, tolerance={"localization_rmse": 1.5})
    declared = saved.declaration
    assert declared.verifier.params["metrics"] == [*DEFAULT_TOLERANCES["points"], "localization_rmse"]
    assert declared.tolerance["localization_rmse"] == 1.5
    with pytest.raises(SaveError, match="not metrics of verifier 'points'"):
        _save(tmp_path / "other", truth={"spots": points}, kinds={"spots": "points"}, tolerance={"hd95": 1.0})


@pytest.mark.parametrize(
    ("points", "named"),
    [
        (np.array([[1.0, np.nan]]), "NaN"),
        (np.array([[1.0, 2.0, 3.0]]), "expected (N, 2)"),
        (np.array([[10.0, 70.0]]), "outside the grid"),
        (np.zeros((0, 2)), "holds no point"),
    ],
)
def test_dishonest_points_are_refused(tmp_path: Path, points: np.ndarray, named: str) -> None:
    with pytest.raises(SaveError, match=re.escape(named)):
        _save(tmp_path, truth={"spots": points}, kinds={"spots": "points"})
    assert list(tmp_path.iterdir()) == []


def test_several_truths_need_the_scored_one_named(tmp_path: Path) -> None:
    labels = field()[1]
    points = np.array([[11.0, 13.5]])
    both = {"truth": {"labels": labels, "spots": points}, "kinds": {"labels": "labels", "spots": "points"}}
    with pytest.raises(SaveError, match="say which one"):
        _save(tmp_path, **both)
    saved = _save(tmp_path, scored="labels", tolerance={"f1_shortfall": 0.1}, **both)
    assert saved.declaration.tolerance == {**DEFAULT_TOLERANCES["label-image"], "f1_shortfall": 0.1}
    assert set(tree.load_layout(tmp_path, "my-skill", "blobs").truth) == {"labels", "spots"}


def test_shapes_are_rasterized_one_label_each() -> None:
    grid = (40, 50)
    square = np.array([[5, 5], [5, 15], [15, 15], [15, 5]], float)
    triangle = np.array([[20, 20], [35, 20], [35, 40]], float)
    ellipse = np.array([[2, 30], [2, 46], [18, 46], [18, 30]], float)  # the box napari keeps
    out = shapes_label_image("cells", [square, triangle, ellipse], ["rectangle", "polygon", "ellipse"], grid)
    assert out.shape == grid and sorted(np.unique(out)) == [0, 1, 2, 3]
    assert out[10, 10] == 1 and out[33, 25] == 2 and out[10, 38] == 3
    assert out[2, 30] == 0  # an ellipse is not its box
    area = np.count_nonzero(out == 3)
    assert abs(area - np.pi * 8 * 8) < 0.12 * np.pi * 64
    # a later shape is on top where two overlap
    over = shapes_label_image("cells", [square, square + 2], ["rectangle", "rectangle"], grid)
    assert over[14, 14] == 2 and over[6, 6] == 1


def test_shapes_on_a_plane_of_a_volume() -> None:
    square = np.array([[3, 2, 2], [3, 2, 8], [3, 8, 8], [3, 8, 2]], float)
    out = shapes_label_image("cells", [square], ["polygon"], (5, 12, 12))
    assert np.count_nonzero(out[3]) > 0 and np.count_nonzero(out) == np.count_nonzero(out[3])
    tilted = square.copy()
    tilted[0, 0] = 1
    with pytest.raises(AnnotationError, match="one plane"):
        shapes_label_image("cells", [tilted], ["polygon"], (5, 12, 12))


@pytest.mark.parametrize(
    ("shapes", "types", "named"),
    [
        ([np.array([[1.0, 1.0], [9.0, 9.0]])], ["line"], "has no area"),
        ([np.array([[1.0, 1.0], [9.0, 9.0], [1.0, 9.0]])], ["path"], "has no area"),
        ([np.array([[100.0, 100.0], [110.0, 100.0], [110.0, 110.0]])], ["polygon"], "covers no pixel"),
        ([np.array([[1.0, 1.0], [np.nan, 9.0], [1.0, 9.0]])], ["polygon"], "NaN"),
        ([], [], "holds no shape"),
    ],
)
def test_shapes_that_cannot_be_labels_are_refused(shapes: list, types: list, named: str) -> None:
    with pytest.raises(AnnotationError, match=f"truth layer 'cells'.*{named}"):
        shapes_label_image("cells", shapes, types, (20, 20))


def test_the_declaration_is_pinned_by_the_manifest(tmp_path: Path) -> None:
    """Loosening a saved case's limits by editing bench-case.json is drift that verify reports."""
    saved = _save(tmp_path)
    body = json.loads(saved.declaration_path.read_text())
    body["tolerance"]["f1_shortfall"] = 1.0
    saved.declaration_path.write_text(json.dumps(body, indent=2) + "\n")
    problems = {f.problem for f in tree.verify_tree(tmp_path)}
    assert problems & {"size", "sha256"}


def test_reload_it_and_score_the_reference(tmp_path: Path) -> None:
    """The saved case, read back as a case, is solved by its reference and failed by its baseline."""
    from helpers import solve_case
    from savecase_solutions import baseline, reference

    from imagebench.cases.declared import declared_case

    saved = _save(tmp_path, reference="savecase_solutions:reference", baseline="savecase_solutions:baseline")
    case = declared_case(saved.declaration_path, tmp_path)
    assert case.label == "my-skill/blobs"
    fixture = case.fixture.build(case.namespace, case.case_id)
    assert solve_case(case, fixture, reference).passed
    assert not solve_case(case, fixture, baseline).passed


def test_a_skill_folder_linked_out_of_the_tree_is_refused(tmp_path: Path) -> None:
    """The tree's own folders are followed only inside it: a skill folder that is a link elsewhere is refused."""
    root, elsewhere = tmp_path / "tree", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "my-skill").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(FixtureError, match="outside the fixture tree"):
        _save(root)
    assert list(elsewhere.iterdir()) == [] and not (root / "manifest.json").exists()


def test_a_saved_points_case_is_scored_by_the_points_verifier(tmp_path: Path) -> None:
    """Points clicked at the objects' centres: the centres a reference finds pass, the field's corner fails."""
    from helpers import solve_case
    from savecase_solutions import centres

    from imagebench.cases.declared import declared_case

    truth = np.array([[10.5, 13.5], [32.5, 37.5], [13.5, 54.5]])  # the centres of field()'s three squares
    saved = _save(tmp_path, truth={"spots": truth}, kinds={"spots": "points"})
    case = declared_case(saved.declaration_path, tmp_path)
    fixture = case.fixture.build(case.namespace, case.case_id)
    assert solve_case(case, fixture, centres).passed

    def corner(session: object) -> None:
        session.namespace["spots"] = np.array([[0.0, 0.0]])  # type: ignore[attr-defined]

    assert not solve_case(case, fixture, corner).passed
