"""The reader in a real viewer (run under xvfb-run): plain folders open straight away with napari's
own reader, a run folder's run.json opens as a review in grid mode, a foreign case.json is left alone.

Each open goes through ``QtViewer._qt_open``, the path a drop or *File → Open* takes, with napari's
"Choose reader" dialog replaced by one that fails the test: a dialog means napari found the
choice ambiguous.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)
tifffile = pytest.importorskip("tifffile")

from napari.utils.notifications import notification_manager  # noqa: E402

from imagebench.executor import run_cases  # noqa: E402
from imagebench.runs.artifacts import shared_range  # noqa: E402
from imagebench.subjects import ReferenceSubject  # noqa: E402
from napari_imagebench._artifacts import VERDICT_KEY, contrast_ranges, viewer_grid  # noqa: E402

PLUGIN = "napari-imagebench"
DSB_CASE = Path(__file__).resolve().parents[2] / "src" / "imagebench" / "data" / "fixtures" / "segment-nuclei" / "dsb2018"


class _NoDialog:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"napari asked which reader to use: {kwargs.get('pth')} ({kwargs.get('readers')})")


@pytest.fixture
def viewer(make_napari_viewer: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    import napari._qt.dialogs.qt_reader_dialog as dialogs

    monkeypatch.setattr(dialogs, "QtReaderDialog", _NoDialog)
    return make_napari_viewer()


def drop(viewer: Any, path: Path) -> list[Any]:
    """Open ``path`` as a drop does; the layers it added."""
    before = list(viewer.layers)
    viewer.window._qt_viewer._qt_open([str(path)], stack=False)
    return [layer for layer in viewer.layers if layer not in before]


def _by_napari(make_napari_viewer: Any, path: Path) -> list[tuple[str, tuple[int, ...], Any]]:
    """What napari's own reader makes of ``path`` (as with this plugin disabled)."""
    other = make_napari_viewer()
    return [(layer.name, layer.data.shape, layer.data.dtype) for layer in other.open(path, plugin="napari")]


def test_a_folder_of_tiffs_opens_at_once_with_napari_s_reader(viewer: Any, make_napari_viewer: Any, tmp_path: Path) -> None:
    folder = tmp_path / "planes"
    folder.mkdir()
    for i in range(3):
        tifffile.imwrite(folder / f"plane-{i}.tif", np.full((8, 9), i, dtype=np.uint16))
    added = drop(viewer, folder)
    assert [layer.source.reader_plugin for layer in added] == ["napari"]
    assert [(layer.name, layer.data.shape, layer.data.dtype) for layer in added] == _by_napari(make_napari_viewer, folder)
    np.testing.assert_array_equal(np.asarray(added[0].data)[:, 0, 0], [0, 1, 2])
    assert viewer.open(folder, plugin=None)  # no MultipleReaderError either


def test_a_zarr_folder_opens_at_once_with_napari_s_reader(viewer: Any, make_napari_viewer: Any, tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    store = zarr.open(str(tmp_path / "field.zarr"), mode="w", shape=(10, 12), dtype="f4")
    store[:] = 1.5
    added = drop(viewer, tmp_path / "field.zarr")
    assert [layer.source.reader_plugin for layer in added] == ["napari"]
    assert [(layer.name, layer.data.shape, layer.data.dtype) for layer in added] == _by_napari(
        make_napari_viewer, tmp_path / "field.zarr"
    )
    assert float(np.asarray(added[0].data).mean()) == 1.5


def test_a_foreign_folder_with_a_case_json_opens_with_napari_s_reader(viewer: Any, tmp_path: Path) -> None:
    folder = tmp_path / "lab" / "notes" / "case-7"
    folder.mkdir(parents=True)
    (folder / "case.json").write_text((DSB_CASE / "case.json").read_text())
    tifffile.imwrite(folder / "a.tif", np.zeros((5, 5), dtype=np.uint8))
    tifffile.imwrite(folder / "b.tif", np.ones((5, 5), dtype=np.uint8))
    added = drop(viewer, folder)
    assert [layer.source.reader_plugin for layer in added] == ["napari"]
    # its case.json alone: the plugin is the only reader offered, and it declines
    from napari.errors import ReaderPluginError

    with pytest.raises(ReaderPluginError):
        viewer.open(folder / "case.json", plugin=None)
    assert len(viewer.layers) == 1


def test_a_run_json_opens_the_run_as_a_review_in_grid_mode(viewer: Any, qtbot: Any, tmp_path: Path) -> None:
    run_dir = run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False, samples=2).run_dir
    notices: list[str] = []
    notification_manager.notification_ready.connect(lambda n: notices.append(str(n.message)))
    assert not viewer_grid(viewer).enabled
    added = drop(viewer, run_dir / "run.json")
    assert {layer.source.reader_plugin for layer in added} == {PLUGIN}
    assert sorted(layer.name for layer in added) == [
        "toy/rectangle s1 [ok]: mask",
        "toy/rectangle s1 [ok]: truth",
        "toy/rectangle s2 [ok]: mask",
        "toy/rectangle s2 [ok]: truth",
    ]
    assert viewer_grid(viewer).enabled
    assert all(layer.metadata[VERDICT_KEY]["status"] == "ok" for layer in added)
    for layer in added:
        overlay = getattr(layer, "name_overlay", None)
        assert overlay is None or overlay.visible  # each pane titled (napari >= 0.6)
    pngs = sorted(run_dir.glob("*/*/*/sample-*/*.png"))
    assert contrast_ranges(added) == {shared_range(*(np.load(p.with_suffix(".npy")) for p in pngs))}
    # linked: one pane's contrast moves them all
    added[0].contrast_limits = (0.0, 0.25)
    assert contrast_ranges(added) == {(0.0, 0.25)}
    qtbot.waitUntil(lambda: any("s1: ok" in n for n in notices), timeout=5_000)
    [notice] = [n for n in notices if n.startswith(run_dir.name)]
    assert "(reference)" in notice and "toy/rectangle s1: ok" in notice


def test_a_fixture_case_json_opens_its_data_without_grid_mode(viewer: Any) -> None:
    added = drop(viewer, DSB_CASE / "case.json")
    assert [(layer.name, layer.source.reader_plugin) for layer in added] == [("nuclei", PLUGIN)]
    assert not viewer_grid(viewer).enabled
