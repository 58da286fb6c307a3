"""Tracks in the viewer: a CTC answer or truth as a napari Tracks layer, and a person's Tracks layer as an answer.

A tracking case's leavings are a label movie (``masks``) and its lineage table (``tracks``, the
case's ``Collect.layer == "tracks"``). In the viewer they are a Tracks layer: rows ``(track id, t,
y, x)`` at each object's centroid and ``graph`` ``{child: [parent]}`` (the divisions), made by
:func:`imagebench.tracking.points.track_points`. The other way, a person picks a Tracks layer for
``tracks`` and a Labels layer over time for ``masks``: :func:`tracks_lookup` turns the pair into
the CTC movie the scorer reads (:func:`imagebench.tracking.points.movie_from_points`), each point
naming the object under it. After scoring, a sample's summary holds both movies' tracks
(``detail.tracks``), which :func:`summary_tracks` makes the artifact panes "truth tracks" and
"answer tracks". Qt-free; nothing here reads a fixture's truth.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from imagebench.case.model import Case, Collect, Layer

LayerData = tuple[Any, dict[str, Any], str]

#: frames of history (and of future) a Tracks layer draws behind (ahead of) the current frame
TAIL = 8
#: what a Tracks layer picked as an answer is, as a leaving value (``_layers.layer_value``)
TRACKS_VALUE = ("data", "graph")


def tracks_layer_data(
    name: str, rows: Any, graph: Mapping[Any, Any], *, like: Layer | None = None, metadata: dict | None = None
) -> LayerData:
    """A napari Tracks layer data tuple: ``rows`` ``(id, t, y, x)``, ``graph`` ``{child: [parent]}``,
    on the grid (scale) of the data layer ``like`` when it declares one."""
    data = np.asarray(rows, dtype=np.float64).reshape(-1, np.shape(rows)[1] if np.ndim(rows) == 2 else 4)
    kwargs: dict[str, Any] = {
        "name": name,
        "graph": {int(k): [int(p) for p in v] for k, v in graph.items()},
        "tail_length": TAIL,
        "tail_width": 3,
        "metadata": dict(metadata or {}),
    }
    ndim = data.shape[1] - 1
    if like is not None and like.scale is not None and len(like.scale) == ndim:
        kwargs["scale"] = tuple(float(v) for v in like.scale)
    return data, kwargs, "tracks"


def masks_leaving(case: Case, tracks: Collect) -> Collect | None:
    """The label-movie leaving a ``tracks`` leaving goes with: the case's labels leaving on the same grid."""
    return next(
        (c for c in case.collect if c.layer == "labels" and c.like == tracks.like and not c.recorded),
        None,
    )


def answer_movie(case: Case, left: Mapping[str, Any], tracks: Collect) -> Any:
    """The checked CTC movie of ``left``'s ``tracks`` table and its masks; CtcFormatError or KeyError."""
    from imagebench.cases.tracking import lineage_of
    from imagebench.tracking.ctc import TimeLapse, check_masks

    masks = masks_leaving(case, tracks)
    if masks is None or masks.name not in left:
        raise KeyError(f"{tracks.name} is drawn over its label movie, which was not left")
    labels = np.asarray(left[masks.name])
    movie = TimeLapse(labels=labels, lineage=lineage_of(left[tracks.name], source=repr(tracks.name)))
    check_masks(movie, source=f"{masks.name!r} against {tracks.name!r}")
    return movie


def result_tracks(name: str, case: Case, left: Mapping[str, Any], tracks: Collect) -> LayerData:
    """A subject's ``tracks`` (with its masks) as a Tracks layer named ``name``; raises when they are not a CTC movie."""
    from imagebench.tracking.points import track_points

    rows, graph = track_points(answer_movie(case, left, tracks))
    like = next((layer for layer in case.layers if layer.name == tracks.like), None)
    return tracks_layer_data(name, rows, graph, like=like, metadata={"imagebench": {"result": tracks.name}})


def is_tracks_value(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == set(TRACKS_VALUE)


def tracks_lookup(case: Case, lookup: Callable[[str], Any]) -> Callable[[str], Any]:
    """``lookup`` where a Tracks layer given for a ``tracks`` leaving (``{"data", "graph"}``, :func:`napari_imagebench._layers.layer_value`) and the
    label movie given for its masks become the CTC table and the relabelled masks; a pair that
    cannot be one (a point on background, an object two tracks claim) is a KeyError naming why."""
    pairs = {c.name: c for c in case.collect if c.layer == "tracks"}
    masks_of = {name: masks_leaving(case, c) for name, c in pairs.items()}
    owners = {m.name: name for name, m in masks_of.items() if m is not None}
    settled: dict[str, Any] = {}

    def settle(tracks_name: str) -> None:
        from imagebench.tracking.ctc import CtcFormatError
        from imagebench.tracking.points import movie_from_points

        value = lookup(tracks_name)
        masks = masks_of[tracks_name]
        if not is_tracks_value(value) or masks is None:
            return
        try:
            movie = movie_from_points(
                value["data"], value["graph"], lookup(masks.name), source=f"Tracks {tracks_name!r}"
            )
        except CtcFormatError as exc:
            raise KeyError(f"{tracks_name} (a Tracks layer over {masks.name!r}) cannot be scored: {exc}") from None
        settled[tracks_name] = movie.lineage.as_array()
        settled[masks.name] = movie.labels

    def found(name: str) -> Any:
        if name in settled:
            return settled[name]
        key = name if name in pairs else owners.get(name)
        if key is not None:
            settle(key)
            if name in settled:
                return settled[name]
        return lookup(name)

    return found


def summary_tracks(sample_dir: str | Path, *, key: str, prefix: str = "", like: Layer | None = None) -> list[LayerData]:
    """The panes "truth tracks" and "answer tracks" of a scored sample, from ``detail.tracks`` of its
    ``summary.json`` (what the verifier kept after scoring), each tagged ``{key: where}`` (the
    artifact panes' key); none when it kept none."""
    path = Path(sample_dir) / "summary.json"
    try:
        detail = json.loads(path.read_text(encoding="utf-8")).get("detail") or {}
    except (OSError, ValueError):
        return []
    drawn = detail.get("tracks") if isinstance(detail, Mapping) else None
    out: list[LayerData] = []
    pane_scale = drawn.get("pane_scale", 1) if isinstance(drawn, Mapping) else 1
    for which in ("truth", "answer"):
        entry = drawn.get(which) if isinstance(drawn, Mapping) else None
        if not isinstance(entry, Mapping) or not entry.get("data"):
            continue
        try:
            data = tracks_layer_data(
                f"{prefix}{which} tracks",
                entry["data"],
                entry.get("graph") or {},
                like=like,
                metadata={key: f"{path.parent}/{which} tracks"},
            )
        except (TypeError, ValueError):
            continue
        data[1]["colormap"] = "turbo"  # bright on the black of a pane without the movie
        data[1]["tail_width"] = 5
        usable = isinstance(pane_scale, (int, float)) and not isinstance(pane_scale, bool) and pane_scale > 0
        if usable and "scale" not in data[1]:  # the size of one frame of the `tracks` image beside it
            ndim = np.shape(data[0])[1] - 1
            data[1]["scale"] = (1.0,) + (float(pane_scale),) * (ndim - 1)  # time stays in frames
        out.append(data)
    return out
