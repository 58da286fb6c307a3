"""The plugin's npe2 contributions: the manifest, the reader, the sample data, a tensor layer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case, truth_leaks

pytest.importorskip("napari")
needs_display = pytest.mark.skipif(
    not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")),
    reason="needs a display: run under xvfb-run (make test-napari)",
)

from imagebench import cases as builtin  # noqa: E402
from imagebench.case.model import Layer  # noqa: E402
from imagebench.executor import run_cases  # noqa: E402
from imagebench.runs.artifacts import shared_range  # noqa: E402
from imagebench.subjects import ReferenceSubject  # noqa: E402
from napari_imagebench._artifacts import ARTIFACT_KEY  # noqa: E402
from napari_imagebench._layers import TEXTURE_LIMIT  # noqa: E402
from napari_imagebench._model import BenchModel  # noqa: E402
from napari_imagebench._reader import napari_get_reader  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DSB_FOLDER = ROOT / "src" / "imagebench" / "data" / "fixtures" / "segment-nuclei" / "dsb2018"


def _manifest() -> Any:
    from npe2 import PluginManager

    pm = PluginManager.instance()
    pm.discover()
    return pm.get_manifest("napari-imagebench")


def test_npe2_validates_the_manifest_with_imports() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "npe2", "validate", "napari-imagebench", "--imports"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid" in proc.stdout


def test_the_package_manifest_is_the_root_file() -> None:
    shipped = ROOT / "src" / "napari_imagebench" / "napari.yaml"  # a real copy: a wheel drops symlinks
    assert shipped.read_bytes() == (ROOT / "napari.yaml").read_bytes()
    manifest = _manifest()
    assert [w.display_name for w in manifest.contributions.widgets] == ["Imagebench"]
    assert all(c.id.startswith("napari-imagebench.") for c in manifest.contributions.commands)


def test_every_sample_is_a_builtin_case_s_data_layers_and_never_truth() -> None:
    from npe2 import PluginManager

    samples = _manifest().contributions.sample_data
    assert len(samples) >= 3
    commands = PluginManager.instance().commands
    for sample in samples:
        layers = commands.execute(sample.command)
        label = sample.display_name.rsplit("(", 1)[1].rstrip(")")
        case = builtin.get_case(label)
        assert [(kw["name"], kind) for _, kw, kind in layers] == [(layer.name, layer.kind) for layer in case.layers], label
        truth = dict(case.build().truth)
        for data, kw, _ in layers:
            full = np.asarray(data[0] if kw.get("multiscale") else data)  # a pyramid's finest level
            assert not truth_leaks(truth, array=full), label


def test_a_tensor_case_s_sample_comes_from_the_data_plane_never_as_an_array(monkeypatch: pytest.MonkeyPatch) -> None:
    import dask.array as da

    from imagebench import plane as plane_module
    from napari_imagebench._layers import PresentationError, fixture_layer_data
    from napari_imagebench._sample_data import large_field_tensor

    pytest.importorskip("pyarrow.flight")
    case = builtin.get_case("drift-correction/large-field-tensor")
    try:
        layers = large_field_tensor()
        tensor_layers = [(data, kw) for data, kw, _ in layers if "array_id" in kw["metadata"]["imagebench"]]
        assert len(tensor_layers) == sum(layer.presentation == "tensor" for layer in case.layers) >= 1
        for data, kw in tensor_layers:
            # lazy, from the plane; one level, as 1024 x 1024 frames fit a texture (a pyramid only beyond)
            assert not kw["multiscale"] and isinstance(data, da.Array) and max(data.shape[-2:]) <= TEXTURE_LIMIT
    finally:
        plane_module.shared_plane().close()

    def no_plane() -> None:
        raise plane_module.PlaneUnavailable("pyarrow.flight is not installed (test)")

    monkeypatch.setattr(plane_module, "shared_plane", no_plane)
    with pytest.raises(PresentationError, match=r"cannot run here \(pyarrow.flight is not installed \(test\)\); they are not shown"):
        large_field_tensor()
    with pytest.raises(PresentationError, match="never as an in-memory array"):
        fixture_layer_data(case.layers, case.build().data)


@needs_display
def test_open_sample_adds_labels_and_points_layers(make_napari_viewer: Any) -> None:
    viewer = make_napari_viewer()
    viewer.open_sample("napari-imagebench", "annotation-vs-model")
    viewer.open_sample("napari-imagebench", "landmark-channels")
    kinds = {layer.name: type(layer).__name__ for layer in viewer.layers}
    assert kinds["annotation"] == kinds["model"] == "Labels"
    assert kinds["landmarks_fixed"] == "Points" and kinds["fixed"] == "Image"


@needs_display
def test_reader_opens_a_fixture_case_folder_as_its_data_layers_only(make_napari_viewer: Any) -> None:
    assert napari_get_reader(str(DSB_FOLDER.parent)) is None  # a namespace folder is neither
    assert napari_get_reader(str(DSB_FOLDER / "img2d.tif")) is None
    reader = napari_get_reader(str(DSB_FOLDER))
    assert reader is not None
    layers = reader(str(DSB_FOLDER))
    case = builtin.get_case("segment-nuclei/dsb2018")
    assert [(kw["name"], kind) for _, kw, kind in layers] == [(layer.name, layer.kind) for layer in case.layers]
    fixture = case.build()
    np.testing.assert_array_equal(layers[0][0], np.asarray(fixture.data[case.layers[0].key]))
    assert not truth_leaks({k: np.asarray(v) for k, v in fixture.truth.items()}, array=layers[0][0])

    viewer = make_napari_viewer()
    added = viewer.open(DSB_FOLDER / "case.json", plugin="napari-imagebench")  # napari never offers it a folder
    assert [layer.name for layer in added] == ["nuclei"]


def test_reader_opens_a_run_folder_s_artifacts_with_one_contrast_range(tmp_path: Path) -> None:

    result = run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False)
    reader = napari_get_reader(str(result.run_dir))
    assert reader is not None
    layers = reader(str(result.run_dir))
    pngs = sorted(result.run_dir.glob("*/*/*/sample-*/*.png"))
    assert len(layers) == len(pngs) >= 2
    # shown from the float values kept beside each PNG: one real range, not 0..255
    values = [np.load(p.with_suffix(".npy")) for p in pngs]
    assert all(v.dtype == np.float32 for v in values)
    assert {kw["contrast_limits"] for _, kw, _ in layers} == {shared_range(*values)}
    assert {tuple(np.asarray(data).shape) for data, _, _ in layers} == {v.shape for v in values}
    assert {kw["name"] for _, kw, _ in layers} == {"toy/rectangle s1 [ok]: mask", "toy/rectangle s1 [ok]: truth"}
    assert all(ARTIFACT_KEY in kw["metadata"] for _, kw, _ in layers)


def test_the_reader_is_offered_for_a_case_json_only_never_a_plain_file_or_folder(tmp_path: Path) -> None:
    """A plain .tif, or any folder, never makes napari ask which reader to use (tests/plugin/test_reader_claims.py
    has the rest: run.json, .zarr and TIFF folders, foreign case.json)."""
    from npe2 import PluginManager

    pm = PluginManager.instance()
    pm.discover()
    tif = tmp_path / "plain.tif"
    tif.write_bytes(b"")

    def ours(path: Path) -> list[Any]:
        return [r for r in pm.iter_compatible_readers([str(path)]) if r.plugin_name == "napari-imagebench"]

    assert ours(tif) == [] and ours(DSB_FOLDER) == [] and ours(tmp_path) == []
    assert len(ours(DSB_FOLDER / "case.json")) == 1
    assert napari_get_reader(str(tmp_path)) is None  # a folder that is neither a case nor a run


def test_reader_names_a_forged_summary_and_shows_nothing_of_its_run(tmp_path: Path) -> None:
    """A summary edited after its run is not vouched for by the journal: the run is forged, and as
    ``compare`` refuses it, the reader shows none of it (the warning says why)."""
    import json

    result = run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False, samples=2)
    forged = next(result.run_dir.glob("*/*/*/sample-1/summary.json"))
    raw = json.loads(forged.read_text())
    raw["reason"] = "forged"
    forged.write_text(json.dumps(raw))
    with pytest.warns(UserWarning, match=r"toy/rectangle#1: the journal .* changed after it was journaled.*none of its samples is shown"):
        layers = napari_get_reader(str(result.run_dir))(str(result.run_dir))  # type: ignore[misc]
    assert layers == []


@needs_display
def test_a_tensor_layer_beyond_a_texture_loads_as_a_multiscale_dask_pyramid_from_the_plane(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyarrow.flight")
    from napari_imagebench import _layers

    monkeypatch.setattr(_layers, "TEXTURE_LIMIT", 8)  # the toy's level 0 exceeds such a "texture"

    case = make_toy_case("tensor", layers=(Layer("image", "image", "image", "tensor", chunks=(8, 8)),))
    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(cases=lambda: [case], outcome_root=tmp_path))
    plane = None
    try:
        assert panel.model.row("toy/tensor").available
        assert panel.load("toy/tensor")
        qtbot.waitUntil(lambda: not panel.running, timeout=60_000)
        assert panel.model.loaded is not None, panel.model.messages[-1].text
        plane = panel.model.loaded.plane
        layer = viewer.layers["image"]
        assert layer.multiscale and len(layer.data) > 1
        assert max(layer.data[-1].shape) <= 8 < max(layer.data[-2].shape)  # it ends at the first level that fits
        assert type(layer.data[0]).__module__.startswith("dask")
        fixture = panel.model.loaded.fixture
        np.testing.assert_allclose(np.asarray(layer.data[0]), fixture.data["image"])
        session = panel.model.loaded.session
        assert session.namespace["fixture_tensors"] == {"image": layer.metadata["imagebench"]["array_id"]}
        # only the data was uploaded: nothing on the plane equals a truth array
        client = session.client
        for sid in client.list():
            assert not truth_leaks(dict(fixture.truth), array=np.asarray(client.get(sid)))
    finally:
        panel.model.close()
        if plane is not None:
            plane.close()
