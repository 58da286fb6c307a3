"""The acyclic oriented graph of a tracked movie, and the vertex matching between two of them.

A movie with a lineage is a graph (Matula et al. 2015): a *vertex* is one object in one frame,
``(t, label)``; a *track link* (semantic 0) joins ``(t, l)`` to ``(t + 1, l)`` inside a track, and
a *parent link* (semantic 1) joins a parent's last vertex ``(end_p, p)`` to each child's first
``(begin_c, c)`` (across a gap when the child begins later). Every vertex has at most one
predecessor, so the graph is a forest of lineage trees.

:class:`Matching` holds, for a reference graph ``R`` and a computed graph ``C`` of the same movie
length, the vertices of each (sorted by ``(t, label)``) and the detection-test pairs
(:func:`imagebench.tracking.matching.ctc_matches`) as vertex indices. A computed vertex matched by
exactly one reference vertex is *uniquely matched*; AOGM's edge comparison and the division
measure only see those.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from imagebench.tracking.ctc import Lineage

Node = tuple[int, int]  # (frame, label)


def edges_of(lineage: Lineage) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src t, src label, dst t, dst label, semantic) of every edge of the lineage's graph, as int64 arrays."""
    table = lineage.as_array()
    label, begin, end, parent = table.T if table.size else (np.zeros(0, np.int64),) * 4
    steps = end - begin  # a track of n frames has n - 1 track links
    track_label = np.repeat(label, steps)
    first = np.cumsum(steps) - steps  # where each track's links start in the flat arrays
    src_t = np.repeat(begin - first, steps) + np.arange(track_label.size, dtype=np.int64)
    by_label = {int(k): i for i, k in enumerate(label.tolist())}
    has_parent = np.flatnonzero(parent > 0)
    p_rows = np.asarray([by_label[int(p)] for p in parent[has_parent].tolist()], dtype=np.int64)
    p_src_t = end[p_rows] if p_rows.size else np.zeros(0, np.int64)
    return (
        np.concatenate([src_t, p_src_t]).astype(np.int64),
        np.concatenate([track_label, label[p_rows] if p_rows.size else np.zeros(0, np.int64)]).astype(np.int64),
        np.concatenate([src_t + 1, begin[has_parent]]).astype(np.int64),
        np.concatenate([track_label, label[has_parent]]).astype(np.int64),
        np.concatenate([np.zeros(src_t.size, np.int64), np.ones(has_parent.size, np.int64)]),
    )


@dataclass(frozen=True)
class Vertices:
    """The vertices of one graph, sorted by (frame, label), found by key ``t * base + label``."""

    t: np.ndarray
    label: np.ndarray
    base: int

    @cached_property
    def keys(self) -> np.ndarray:
        return self.t * self.base + self.label

    def __len__(self) -> int:
        return int(self.t.size)

    def index(self, t: np.ndarray, label: np.ndarray) -> np.ndarray:
        """The index of each (t, label); every one must be a vertex (the lineage was checked against the masks)."""
        keys = np.asarray(t, np.int64) * self.base + np.asarray(label, np.int64)
        found = np.searchsorted(self.keys, keys)
        if keys.size and (
            np.any(found >= self.keys.size) or np.any(self.keys[np.minimum(found, self.keys.size - 1)] != keys)
        ):
            raise ValueError("an edge names a vertex that is not in the masks")
        return found.astype(np.int64)


@dataclass(frozen=True)
class Matching:
    """Two graphs' vertices and the detection test's pairs between them (vertex indices)."""

    ref: Vertices
    comp: Vertices
    ref_index: np.ndarray
    comp_index: np.ndarray

    @cached_property
    def comp_matches(self) -> np.ndarray:
        """How many reference vertices each computed vertex matches."""
        return np.bincount(self.comp_index, minlength=len(self.comp)).astype(np.int64)

    @cached_property
    def unique(self) -> np.ndarray:
        """The pairs (indices into ref_index/comp_index) whose computed vertex matches exactly one reference vertex."""
        return np.flatnonzero(self.comp_matches[self.comp_index] == 1)

    @cached_property
    def comp_to_ref(self) -> np.ndarray:
        """For each computed vertex, its reference vertex when uniquely matched, else -1."""
        out = np.full(len(self.comp), -1, dtype=np.int64)
        out[self.comp_index[self.unique]] = self.ref_index[self.unique]
        return out


def build_matching(
    frames: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
) -> Matching:
    """A :class:`Matching` from per-frame (reference labels, computed labels, matched ref labels, matched comp labels)."""
    top = 1
    for ref_labels, comp_labels, _, _ in frames:
        for arr in (ref_labels, comp_labels):
            if arr.size:
                top = max(top, int(arr.max()))
    base = top + 1

    def vertices(pick: int) -> Vertices:
        ts = [np.full(f[pick].size, t, np.int64) for t, f in enumerate(frames)]
        ls = [f[pick].astype(np.int64) for f in frames]
        return Vertices(
            t=np.concatenate(ts) if ts else np.zeros(0, np.int64),
            label=np.concatenate(ls) if ls else np.zeros(0, np.int64),
            base=base,
        )

    ref, comp = vertices(0), vertices(1)
    mt = (
        np.concatenate([np.full(f[2].size, t, np.int64) for t, f in enumerate(frames)])
        if frames
        else np.zeros(0, np.int64)
    )
    mr = np.concatenate([f[2] for f in frames]).astype(np.int64) if frames else np.zeros(0, np.int64)
    mc = np.concatenate([f[3] for f in frames]).astype(np.int64) if frames else np.zeros(0, np.int64)
    return Matching(ref=ref, comp=comp, ref_index=ref.index(mt, mr), comp_index=comp.index(mt, mc))


class LineageGraph:
    """Walking a lineage's graph node by node: successors, predecessors, divisions, paths (for the division measure)."""

    def __init__(self, lineage: Lineage) -> None:
        self.tracks = lineage.by_label()
        self.kids = lineage.children()

    def successors(self, node: Node) -> list[Node]:
        t, label = node
        track = self.tracks[label]
        if t < track.end:
            return [(t + 1, label)]
        return [(self.tracks[c].begin, c) for c in self.kids.get(label, [])]

    def predecessor(self, node: Node) -> Node | None:
        t, label = node
        track = self.tracks[label]
        if t > track.begin:
            return (t - 1, label)
        if track.parent:
            return (self.tracks[track.parent].end, track.parent)
        return None

    def divisions(self) -> list[Node]:
        """Every vertex with two or more successors (a track's last vertex with two or more children), by (t, label)."""
        return sorted((self.tracks[p].end, p) for p, kids in self.kids.items() if len(kids) >= 2)

    def has_path(self, source: Node, target: Node) -> bool:
        """Whether ``target`` is ``source`` or one of its descendants."""
        (t1, l1), (t2, l2) = source, target
        if l1 == l2:
            return t2 >= t1
        label = self.tracks[l2].parent
        while label:
            if label == l1:
                return True
            label = self.tracks[label].parent
        return False
