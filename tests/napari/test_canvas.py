"""Removing layers: a full collection at once when the removed layers held a large image, none
for small ones (Python's own collector frees them), and no freeze of the heap left behind."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

pytest.importorskip("napari")

import napari_imagebench._canvas as canvas  # noqa: E402
from napari_imagebench._canvas import COLLECT_NOW_BYTES, held_bytes, remove_layers  # noqa: E402


class _CountingGc:
    """The gc module as _canvas sees it, counting the full collections _canvas itself asks for."""

    def __init__(self) -> None:
        self.collected = 0

    def collect(self, *args: Any) -> int:
        self.collected += 1
        return gc.collect(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)


def test_a_large_removal_is_collected_at_once_and_a_small_one_is_not(
    make_napari_viewer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    viewer = make_napari_viewer()
    side = int(np.ceil(np.sqrt(COLLECT_NOW_BYTES / 4)))
    large = viewer.add_image(np.zeros((side, side), np.float32), name="large")
    small = viewer.add_image(np.zeros((64, 64), np.float32), name="small")
    kept = viewer.add_labels(np.zeros((64, 64), np.int32), name="kept")
    assert held_bytes(large) >= COLLECT_NOW_BYTES > held_bytes(small) == 64 * 64 * 4
    counting = _CountingGc()
    monkeypatch.setattr(canvas, "gc", counting)
    remove_layers(viewer, [small])
    assert counting.collected == 0 and gc.get_freeze_count() == 0
    remove_layers(viewer, [large])
    assert counting.collected == 1 and gc.get_freeze_count() == 0
    assert list(viewer.layers) == [kept]


def test_an_application_s_own_freeze_is_left_as_it_is(make_napari_viewer: Any) -> None:
    viewer = make_napari_viewer()
    layer = viewer.add_image(np.zeros((64, 64), np.float32))
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        remove_layers(viewer, [layer])
        assert gc.get_freeze_count() > frozen // 2  # still frozen (a freed object leaves it), never thawed
    finally:
        gc.unfreeze()


def test_a_lazy_or_pyramid_layer_counts_what_it_holds() -> None:
    class Layer:
        def __init__(self, data: Any) -> None:
            self.data = data

    levels = [np.zeros((8, 8), np.uint8), np.zeros((4, 4), np.uint8)]
    assert held_bytes(Layer(levels)) == 80
    assert held_bytes(Layer(None)) == 0
    dask = pytest.importorskip("dask.array")
    assert held_bytes(Layer(dask.zeros((1024, 1024)))) == 0  # nothing in memory until read
