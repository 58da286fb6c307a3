"""A CTC movie as centroid tracks, and centroid tracks over a label movie as a CTC movie.

A viewer draws tracks as points over time: rows ``(track id, t, y, x)`` (napari's Tracks data, or
``(id, t, z, y, x)`` in 3D) and a graph ``{child: [parent]}`` of the divisions and closed gaps.
:func:`track_points` turns a checked :class:`~imagebench.tracking.ctc.TimeLapse` into them (each
object's centroid, its track's label the id, each track's parent its graph entry);
:func:`movie_from_points` goes back: each point names the object of the label movie under it in
its frame, that object takes the point's track id, and the graph gives the parents (a track with
a gap is split as :func:`~imagebench.tracking.synthetic.tracks_from_labels` splits one). Nothing
here imports napari.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from imagebench.tracking.ctc import CtcFormatError, TimeLapse, present_labels
from imagebench.tracking.synthetic import tracks_from_labels

#: the most rows :func:`track_points` returns (a summary keeps them; a larger movie is not drawn)
MAX_POINTS = 50_000


def track_points(movie: TimeLapse, *, limit: int = MAX_POINTS) -> tuple[np.ndarray, dict[int, list[int]]]:
    """``(rows, graph)``: one row ``(label, t, *centroid)`` per object of ``movie`` (float64,
    sorted by label then frame) and ``{child: [parent]}``; CtcFormatError past ``limit`` rows."""
    from scipy import ndimage as ndi

    rows: list[tuple[float, ...]] = []
    for t in range(movie.frames):
        frame = movie.labels[t]
        present = present_labels(frame)
        if present.size == 0:
            continue
        if len(rows) + present.size > limit:
            raise CtcFormatError(f"more than {limit} objects over the movie's frames: too many to draw as tracks")
        centres = ndi.center_of_mass(np.ones(frame.shape), frame, present)
        rows += [(float(k), float(t), *map(float, c)) for k, c in zip(present.tolist(), centres, strict=True)]
    ndim = movie.labels.ndim - 1
    data = np.asarray(rows, dtype=np.float64).reshape(len(rows), 2 + ndim)
    if data.size:
        data = data[np.lexsort((data[:, 1], data[:, 0]))]
    graph = {t.label: [t.parent] for t in movie.lineage.tracks if t.parent}
    return data, graph


def movie_from_points(
    points: Any, graph: Mapping[Any, Sequence[Any]] | None, labels: Any, *, source: str = "tracks"
) -> TimeLapse:
    """The CTC movie a person's tracks make over their label movie (see the module's docstring).

    CtcFormatError names what cannot be: rows that are not ``(id, t, y, x)``, a point outside the
    movie, a point on background, one object claimed by two tracks in a frame, two objects by one
    track, a parent that is no track or more than one parent."""
    labels = np.asarray(labels)
    if labels.dtype.kind not in "iu" or labels.ndim not in (3, 4):
        raise CtcFormatError(
            f"{source}: the label movie is {labels.dtype} of shape {labels.shape}, expected T×Y×X integers"
        )
    rows = np.asarray(points, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != labels.ndim + 1:
        raise CtcFormatError(
            f"{source}: points of shape {rows.shape}, expected (n, {labels.ndim + 1}) rows (id, t, y, x)"
        )
    if rows.size and not np.all(np.isfinite(rows)):
        raise CtcFormatError(f"{source}: points hold NaN or infinite values")
    ids = rows[:, 0]
    if rows.size and (np.any(ids != np.round(ids)) or np.any(ids < 1) or np.any(ids >= 2**31)):
        raise CtcFormatError(f"{source}: track ids must be whole numbers from 1 to 2**31-1")
    at = np.round(rows[:, 1:]).astype(np.int64)
    inside = np.all((at >= 0) & (at < np.asarray(labels.shape)), axis=1) if rows.size else np.zeros(0, bool)
    if not np.all(inside):
        bad = rows[~inside][0]
        raise CtcFormatError(f"{source}: point {bad.tolist()} lies outside the movie of shape {labels.shape}")
    out = np.zeros(labels.shape, np.uint32)
    claimed: dict[tuple[int, int], int] = {}  # (t, object) -> track id
    held: dict[tuple[int, int], int] = {}  # (t, track id) -> object
    for tid, where in zip(ids.astype(np.int64).tolist(), at.tolist(), strict=True):
        t = where[0]
        obj = int(labels[tuple(where)])
        if obj == 0:
            raise CtcFormatError(f"{source}: track {tid}'s point in frame {t} lies on background, not on an object")
        if claimed.get((t, obj), tid) != tid:
            raise CtcFormatError(
                f"{source}: frame {t}: object {obj} is claimed by tracks {claimed[(t, obj)]} and {tid}"
            )
        if held.get((t, tid), obj) != obj:
            raise CtcFormatError(
                f"{source}: frame {t}: track {tid} has points on two objects ({held[(t, tid)]}, {obj})"
            )
        claimed[(t, obj)] = tid
        held[(t, tid)] = obj
    for (t, obj), tid in claimed.items():
        out[t][labels[t] == obj] = tid
    tracks = {int(v) for v in ids.tolist()}
    parents: dict[int, int] = {}
    for child, given in (graph or {}).items():
        given = [given] if np.isscalar(given) else list(given)
        try:
            child_id, parent_ids = int(child), [int(p) for p in given]
        except (TypeError, ValueError):
            raise CtcFormatError(f"{source}: graph entry {child!r}: {given!r} is not track ids") from None
        if len(parent_ids) > 1:
            raise CtcFormatError(f"{source}: graph: track {child_id} has {len(parent_ids)} parents, at most one")
        if child_id not in tracks or (parent_ids and parent_ids[0] not in tracks):
            raise CtcFormatError(f"{source}: graph entry {child_id}: {parent_ids} names a track with no point")
        if parent_ids:
            parents[child_id] = parent_ids[0]
    return tracks_from_labels(out, parents)
