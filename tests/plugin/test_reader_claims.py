"""The reader stays out of the way (no Qt, no viewer): what npe2 offers it for, what it declines,
and the review a run folder gives (names, verdicts, one contrast range)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import build_tree, make_toy_case

pytest.importorskip("npe2")
tifffile = pytest.importorskip("tifffile")

from imagebench.executor import run_cases  # noqa: E402
from imagebench.runs.artifacts import shared_range  # noqa: E402
from imagebench.runs.layout import RunFolderError, is_run_folder_name  # noqa: E402
from imagebench.subjects import ReferenceSubject  # noqa: E402
from napari_imagebench._artifacts import ARTIFACT_KEY, REVIEW_KEY, VERDICT_KEY  # noqa: E402
from napari_imagebench._reader import napari_get_reader, read_case_folder, run_folder_layers  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DSB_FOLDER = ROOT / "src" / "imagebench" / "data" / "fixtures" / "segment-nuclei" / "dsb2018"
PLUGIN = "napari-imagebench"


def _offered(path: Path) -> list[str]:
    """The plugins npe2 offers for ``path``, as napari asks it (``napari.plugins._npe2.get_readers``)."""
    from npe2 import PluginManager

    pm = PluginManager.instance()
    pm.discover()
    return sorted({r.plugin_name for r in pm.iter_compatible_readers([str(path)])})


def _tiff_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for i in range(3):
        tifffile.imwrite(folder / f"plane-{i}.tif", np.full((8, 9), i, dtype=np.uint16))
    return folder


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path_factory.mktemp("runs"), progress=False).run_dir


def test_the_manifest_read_is_this_checkout_s(toy_run: Path) -> None:
    from npe2 import PluginManager

    pm = PluginManager.instance()
    pm.discover()
    [reader] = pm.get_manifest(PLUGIN).contributions.readers
    assert (reader.filename_patterns, reader.accepts_directories) == (["run.json", "sitting.json", "case.json"], False)


def test_never_offered_for_a_folder_of_tiffs_a_zarr_folder_or_a_plain_file(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    tiffs = _tiff_folder(tmp_path / "tiffs")
    store = zarr.open(str(tmp_path / "image.zarr"), mode="w", shape=(10, 12), dtype="f4")
    store[:] = 1.5
    for path in (tiffs, tmp_path / "image.zarr", tiffs / "plane-0.tif"):
        assert PLUGIN not in _offered(path), path
        assert napari_get_reader(str(path)) is None, path


def test_offered_for_a_run_json_and_a_case_json_and_alone(toy_run: Path) -> None:
    """napari opens a path without asking only when one reader is offered."""
    assert _offered(toy_run / "run.json") == [PLUGIN]
    assert _offered(DSB_FOLDER / "case.json") == [PLUGIN]
    # a run folder and a case folder themselves are never ours to be offered (npe2 cannot narrow folders)
    assert PLUGIN not in _offered(toy_run) and PLUGIN not in _offered(DSB_FOLDER)


def test_a_run_folder_is_read_from_the_folder_or_its_run_json(toy_run: Path) -> None:
    assert is_run_folder_name(toy_run.name), toy_run.name
    assert napari_get_reader(str(toy_run)) is run_folder_layers
    assert napari_get_reader(str(toy_run / "run.json")) is run_folder_layers
    assert napari_get_reader([str(toy_run / "run.json")]) is run_folder_layers
    assert napari_get_reader(str(toy_run / "journal.jsonl")) is None


def test_a_foreign_run_json_is_declined_but_a_broken_run_folder_is_named(tmp_path: Path, toy_run: Path) -> None:
    foreign = tmp_path / "experiment"
    foreign.mkdir()
    (foreign / "run.json").write_text(json.dumps({"epochs": 3}))
    assert napari_get_reader(str(foreign)) is None
    assert napari_get_reader(str(foreign / "run.json")) is None

    # a folder named as run folders are, whose run.json is cut short: ours, and the error says what is wrong
    broken = tmp_path / "run-20250101T000000Z-2"
    shutil.copytree(toy_run, broken)
    (broken / "run.json").write_text('{"schema_version": ')
    reader = napari_get_reader(str(broken / "run.json"))
    assert reader is run_folder_layers
    with pytest.raises(RunFolderError, match=r"run\.json"):
        reader(str(broken / "run.json"))


def test_a_foreign_case_json_is_declined(tmp_path: Path) -> None:
    layout = (DSB_FOLDER / "case.json").read_text()
    # no manifest two levels up
    lone = tmp_path / "lab" / "stuff" / "case-7"
    lone.mkdir(parents=True)
    (lone / "case.json").write_text(layout)
    # a manifest.json two levels up that is not a fixture manifest
    other = tmp_path / "web" / "app" / "case"
    other.mkdir(parents=True)
    (other / "case.json").write_text(layout)
    (tmp_path / "web" / "manifest.json").write_text(json.dumps({"name": "my web app", "icons": []}))
    # a real fixture tree that does not list this case
    tree = tmp_path / "tree"
    build_tree(tree)
    unlisted = tree / "seg" / "unlisted"
    unlisted.mkdir()
    shutil.copy(tree / "seg" / "tiny" / "case.json", unlisted / "case.json")
    for folder in (lone, other, unlisted):
        assert napari_get_reader(str(folder)) is None, folder
        assert napari_get_reader(str(folder / "case.json")) is None, folder
        with pytest.raises(ValueError, match="not a fixture case folder"):
            read_case_folder(str(folder))
    # the listed case of that tree is read, from its folder or its case.json
    listed = tree / "seg" / "tiny"
    assert napari_get_reader(str(listed)) is read_case_folder
    layers = read_case_folder(str(listed / "case.json"))
    assert [(kw["name"], kind) for _, kw, kind in layers] == [("image", "image")]
    np.testing.assert_array_equal(layers[0][0], np.load(listed / "image.npy"))


def test_a_run_folder_reads_as_titled_panes_with_verdicts_and_one_range(tmp_path: Path) -> None:
    """No viewer window here: the layer data carries the titles and verdicts, and nothing waits to arrange it."""

    def half_mask(session: Any) -> None:
        image = np.asarray(session.namespace["image"])
        mask = image > 0.5
        mask[: mask.shape[0] // 2] = False  # half the rectangle: a wrong answer
        session.namespace["mask"] = mask
        session.namespace["area"] = int(mask.sum())

    right = run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path / "a", progress=False, samples=2).run_dir
    layers = run_folder_layers(str(right / "run.json"))
    pngs = sorted(right.glob("*/*/*/sample-*/*.png"))
    assert len(layers) == len(pngs) == 4
    assert sorted(kw["name"] for _, kw, _ in layers) == [
        "toy/rectangle s1 [ok]: mask",
        "toy/rectangle s1 [ok]: truth",
        "toy/rectangle s2 [ok]: mask",
        "toy/rectangle s2 [ok]: truth",
    ]
    values = [np.load(p.with_suffix(".npy")) for p in pngs]
    assert {kw["contrast_limits"] for _, kw, _ in layers} == {shared_range(*values)}
    for _, kw, _ in layers:
        verdict = kw["metadata"][VERDICT_KEY]
        assert (verdict["label"], verdict["subject"], verdict["status"]) == ("toy/rectangle", "reference", "ok")
        assert Path(kw["metadata"][ARTIFACT_KEY]).is_file()
        assert REVIEW_KEY not in kw["metadata"]  # no viewer window: nothing tagged to arrange

    wrong_case = make_toy_case(reference=half_mask)
    wrong = run_cases([wrong_case], ReferenceSubject(), out=tmp_path / "b", progress=False).run_dir
    statuses = {kw["metadata"][VERDICT_KEY]["status"] for _, kw, _ in run_folder_layers(str(wrong))}
    assert statuses == {"wrong-answer"}
    assert all(kw["name"].startswith("toy/rectangle s1 [wrong-answer]: ") for _, kw, _ in run_folder_layers(str(wrong)))
