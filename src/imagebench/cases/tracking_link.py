"""Linking detections over time into CTC tracks: the tracking cases' reference and their naive baseline.

:func:`link_tracks` is the reference's linker, a linear-assignment tracker in three steps:

1. **Frame to frame**: the detections of frames ``t`` and ``t + 1`` are paired by
   :func:`scipy.optimize.linear_sum_assignment` on squared centroid distance, a pair farther than
   ``max_step`` px refused (the matrix is padded with "no link" entries at ``max_step²``, so a
   far pair is never forced).
2. **Divisions**: a detection of ``t + 1`` left unpaired whose nearest detection of ``t`` (within
   ``division_distance``) was paired with another one, both of them smaller than
   ``area_ratio`` times it, is a division: the mother's track ends at ``t`` and both daughters
   begin tracks whose parent it is.
3. **Gap closing**: a track that begins without a parent is joined to one that ended, without
   children, ``2..gap + 1`` frames before, within ``gap_distance`` px (nearest pairs first): the
   new track's parent is the old one, as the Cell Tracking Challenge writes a closed gap.

:func:`nearest_neighbour_tracks` is the naive baseline: each detection takes the track of the
nearest detection of the previous frame not yet taken; no division, no gap.
Both return a checked :class:`imagebench.tracking.ctc.TimeLapse`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from imagebench.tracking.ctc import Lineage, TimeLapse, Track, check_masks


@dataclass
class _Det:
    label: int  # in the per-frame segmentation
    y: float
    x: float
    area: int


@dataclass
class _Track:
    frames: list[tuple[int, int]] = field(default_factory=list)  # (t, index of the detection in frame t)
    parent: int = 0
    children: list[int] = field(default_factory=list)


def detections(frame: np.ndarray) -> list[_Det]:
    """The objects of one label image: label, centroid and area, in label order."""
    from scipy import ndimage as ndi

    frame = np.asarray(frame)
    present = np.unique(frame[frame > 0])
    if present.size == 0:
        return []
    centres = ndi.center_of_mass(np.ones(frame.shape), frame, present)
    areas = ndi.sum_labels(np.ones(frame.shape), frame, present)
    return [
        _Det(int(k), float(c[0]), float(c[1]), int(a)) for k, c, a in zip(present.tolist(), centres, areas, strict=True)
    ]


def _distances(a: list[_Det], b: list[_Det]) -> np.ndarray:
    if not a or not b:
        return np.zeros((len(a), len(b)))
    pa = np.array([(d.y, d.x) for d in a])
    pb = np.array([(d.y, d.x) for d in b])
    return np.sqrt(((pa[:, None, :] - pb[None, :, :]) ** 2).sum(-1))


def _assign(dist: np.ndarray, max_step: float) -> dict[int, int]:
    """Previous index -> current index, by linear assignment with "no link" at ``max_step²``."""
    from scipy.optimize import linear_sum_assignment

    n, m = dist.shape
    if n == 0 or m == 0:
        return {}
    block = max_step**2
    big = 1e12
    cost = np.full((n + m, m + n), big)
    sq = dist**2
    cost[:n, :m] = np.where(dist <= max_step, sq, big)
    cost[:n, m:] = np.where(np.eye(n, dtype=bool), block, big)  # i ends
    cost[n:, :m] = np.where(np.eye(m, dtype=bool), block, big)  # j begins
    cost[n:, m:] = 0.0  # the lower-right block: free
    rows, cols = linear_sum_assignment(cost)
    return {int(r): int(c) for r, c in zip(rows, cols, strict=True) if r < n and c < m and dist[r, c] <= max_step}


def _movie(segmentation: np.ndarray, dets: list[list[_Det]], tracks: list[_Track]) -> TimeLapse:
    """Relabel each detection with its track's number (1, 2, ...) and write the lineage."""
    out = np.zeros(segmentation.shape, np.uint32)
    rows: list[Track] = []
    for number, track in enumerate(tracks, start=1):
        for t, i in track.frames:
            out[t][segmentation[t] == dets[t][i].label] = number
        begin, end = track.frames[0][0], track.frames[-1][0]
        rows.append(Track(label=number, begin=begin, end=end, parent=track.parent))
    movie = TimeLapse(labels=out, lineage=Lineage(tracks=tuple(rows)))
    check_masks(movie, source="the linker's result")
    return movie


def link_tracks(
    segmentation: np.ndarray,
    *,
    max_step: float = 9.0,
    division_distance: float = 12.0,
    area_ratio: float = 0.85,
    gap: int = 2,
    gap_distance: float = 12.0,
) -> TimeLapse:
    """Tracks from a per-frame segmentation (T×Y×X labels), by the three steps of the module's docstring."""
    segmentation = np.asarray(segmentation)
    dets = [detections(segmentation[t]) for t in range(segmentation.shape[0])]
    tracks: list[_Track] = []  # track numbers are index + 1
    owner: list[dict[int, int]] = [{} for _ in dets]  # per frame: detection index -> track index

    def start(t: int, i: int, parent: int = 0) -> int:
        tracks.append(_Track(frames=[(t, i)], parent=parent))
        owner[t][i] = len(tracks) - 1
        return len(tracks) - 1

    for i in range(len(dets[0]) if dets else 0):
        start(0, i)
    for t in range(1, len(dets)):
        prev, cur = dets[t - 1], dets[t]
        dist = _distances(prev, cur)
        pairs = _assign(dist, max_step)
        taken = {j: i for i, j in pairs.items()}
        divided: dict[int, int] = {}  # mother (previous index) -> the unpaired daughter (current index)
        for j in range(len(cur)):
            if j in taken or not prev:
                continue
            near = np.argsort(dist[:, j])
            for i in near.tolist():
                if dist[i, j] > division_distance:
                    break
                k = pairs.get(i)
                if k is None or i in divided:
                    continue
                if cur[j].area < area_ratio * prev[i].area and cur[k].area < area_ratio * prev[i].area:
                    divided[i] = j
                    break
        for i, j in pairs.items():
            mother = owner[t - 1][i]
            if i in divided:
                for daughter in (j, divided[i]):
                    tracks[mother].children.append(start(t, daughter, parent=mother + 1))
            else:
                tracks[mother].frames.append((t, j))
                owner[t][j] = mother
        for j in range(len(cur)):
            if j not in owner[t]:
                start(t, j)
    _close_gaps(tracks, dets, gap, gap_distance)
    return _movie(segmentation, dets, tracks)


def _close_gaps(tracks: list[_Track], dets: list[list[_Det]], gap: int, gap_distance: float) -> None:
    candidates: list[tuple[float, int, int]] = []
    for a, old in enumerate(tracks):
        if old.children:
            continue
        end_t, end_i = old.frames[-1]
        for b, new in enumerate(tracks):
            begin_t, begin_i = new.frames[0]
            if new.parent or not 2 <= begin_t - end_t <= gap + 1:
                continue
            e, s = dets[end_t][end_i], dets[begin_t][begin_i]
            d = float(np.hypot(e.y - s.y, e.x - s.x))
            if d <= gap_distance:
                candidates.append((d, a, b))
    for _d, a, b in sorted(candidates):
        if tracks[a].children or tracks[b].parent:
            continue
        tracks[b].parent = a + 1
        tracks[a].children.append(b)


def nearest_neighbour_tracks(segmentation: np.ndarray, *, max_step: float = 20.0) -> TimeLapse:
    """The naive linker: each detection, in label order, takes the track of the nearest detection
    of the previous frame (within ``max_step`` px) that no other has taken; else a new track."""
    segmentation = np.asarray(segmentation)
    dets = [detections(segmentation[t]) for t in range(segmentation.shape[0])]
    tracks: list[_Track] = []
    owner: list[dict[int, int]] = [{} for _ in dets]
    for t, cur in enumerate(dets):
        prev = dets[t - 1] if t else []
        dist = _distances(prev, cur)
        used: set[int] = set()
        for j in range(len(cur)):
            best = None
            if prev:
                for i in np.argsort(dist[:, j]).tolist():
                    if dist[i, j] > max_step:
                        break
                    if i not in used:
                        best = i
                        break
            if best is None:
                tracks.append(_Track(frames=[(t, j)]))
                owner[t][j] = len(tracks) - 1
            else:
                used.add(best)
                owner[t][j] = owner[t - 1][best]
                tracks[owner[t][j]].frames.append((t, j))
    return _movie(segmentation, dets, tracks)
