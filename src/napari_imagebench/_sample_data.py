"""Sample data: a few built-in cases' data layers (never their truth), as each case presents them.

Every sample builds its case's fixture with the case's own seed, so the pixels are exactly
what a subject of that case gets, presented the same way (a ``tensor`` layer comes lazily from
the data plane; where no plane can run, the sample says so instead of loading an array).
"""

from __future__ import annotations

from napari_imagebench._layers import LayerData, present_fixture


def case_data_layers(label: str) -> list[LayerData]:
    """The data layers of built-in case ``label`` (``<namespace>/<case_id>``)."""
    from imagebench.cases import get_case

    try:
        case = get_case(label)
    except KeyError:
        raise KeyError(f"no built-in case labelled {label!r}") from None
    ok, why = case.available()
    if not ok:
        raise RuntimeError(f"{label} is not available here: {why}")
    return present_fixture(case, case.build())


def synthetic_nuclei() -> list[LayerData]:
    """segment-nuclei/synthetic-blobs: a fluorescence-like field of touching nuclei."""
    return case_data_layers("segment-nuclei/synthetic-blobs")


def dsb2018_nuclei() -> list[LayerData]:
    """segment-nuclei/dsb2018: a real fluorescence image from the 2018 Data Science Bowl."""
    return case_data_layers("segment-nuclei/dsb2018")


def annotation_vs_model() -> list[LayerData]:
    """segmentation-qc-metrics/annotation-vs-model: a hand annotation and a model's labels."""
    return case_data_layers("segmentation-qc-metrics/annotation-vs-model")


def landmark_channels() -> list[LayerData]:
    """align-channels-from-landmarks/synthetic-warp: two channels and the clicked landmark points."""
    return case_data_layers("align-channels-from-landmarks/synthetic-warp")


def drifting_beads() -> list[LayerData]:
    """drift-correction/beads-subpixel: a time-lapse of beads drifting by sub-pixel steps."""
    return case_data_layers("drift-correction/beads-subpixel")


def large_field_tensor() -> list[LayerData]:
    """drift-correction/large-field-tensor: a large drifting field, a lazy pyramid from the data plane."""
    return case_data_layers("drift-correction/large-field-tensor")
