"""Drawing a tracking verdict: a few frames of the movie with the true and the answered tracks, errors marked.

Each panel is one frame in grey, each pixel drawn 2 x 2 (all panels under one contrast range, the movie's), with the last
:data:`TAIL` frames of every track alive in it drawn as a line through its centroids: **green**
the truth's, **magenta** the answer's (the overlay convention of :mod:`imagebench.cases._overlay`).
A link of the answer that joins two objects the truth does not link (a *false link*: both ends
matched by the detection test, the true pair not an edge of the true graph) is drawn **orange**
with an x at its head; a true division the answer did not make (no answered division at the
mother's match within the frame buffer: a *missed division*) is a **yellow** circle on the mother.
The panels sit side by side, each titled with its frame, and a legend under them names the colours.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from imagebench.cases._overlay import GREEN, MAGENTA, WHITE, Overlay, text_mask
from imagebench.tracking.ctc import TimeLapse
from imagebench.tracking.graph import edges_of
from imagebench.tracking.matching import ctc_matches, frame_overlap

ORANGE = (1.0, 0.55, 0.0)  # a false link
YELLOW = (1.0, 1.0, 0.0)  # a missed division
TAIL = 5  # frames of history drawn behind each object
SCALE = 2  # each pixel drawn 2 x 2, so a 128 px frame reads

Node = tuple[int, int]


def centroids(labels: np.ndarray) -> dict[Node, tuple[float, float]]:
    """``(t, label) -> (y, x)`` of every object of a label movie."""
    from scipy import ndimage as ndi

    out: dict[Node, tuple[float, float]] = {}
    for t in range(labels.shape[0]):
        frame = labels[t]
        present = np.unique(frame[frame > 0])
        if present.size:
            for k, c in zip(present.tolist(), ndi.center_of_mass(np.ones(frame.shape), frame, present), strict=True):
                out[(t, int(k))] = (float(c[0]), float(c[1]))
    return out


def unique_matches(truth: TimeLapse, answer: TimeLapse) -> dict[Node, Node]:
    """answer vertex -> the one true vertex it matches by the detection test (|R ∩ S| > 0.5 |R|)."""
    out: dict[Node, Node] = {}
    for t in range(truth.frames):
        ov = frame_overlap(truth.labels[t], answer.labels[t])
        pairs = ctc_matches(ov)
        refs = ov.ref_labels[ov.ref_index[pairs]].tolist()
        comps = ov.comp_labels[ov.comp_index[pairs]].tolist()
        counts: dict[int, int] = {}
        for c in comps:
            counts[c] = counts.get(c, 0) + 1
        for r, c in zip(refs, comps, strict=True):
            if counts[c] == 1:
                out[(t, int(c))] = (t, int(r))
    return out


def _edges(movie: TimeLapse) -> list[tuple[Node, Node]]:
    st, sl, dt, dl, _sem = edges_of(movie.lineage)
    return [((a, b), (c, d)) for a, b, c, d in zip(st.tolist(), sl.tolist(), dt.tolist(), dl.tolist(), strict=True)]


def tracking_errors(
    truth: TimeLapse, answer: TimeLapse, frame_buffer: int = 1
) -> tuple[list[tuple[Node, Node]], list[Node]]:
    """(the answer's false links as answer edges, the truth's missed divisions as the mother's last vertex)."""
    match = unique_matches(truth, answer)
    true_edges = set(_edges(truth))
    false_links = [
        (a, b) for a, b in _edges(answer) if a in match and b in match and (match[a], match[b]) not in true_edges
    ]
    answer_tracks = answer.lineage.by_label()
    answer_children = answer.lineage.children()
    to_answer: dict[Node, list[Node]] = {}
    for a, r in match.items():
        to_answer.setdefault(r, []).append(a)
    missed: list[Node] = []
    for mother, kids in truth.lineage.children().items():
        if len(kids) < 2:
            continue
        end = truth.lineage.by_label()[mother].end
        found = False
        for t in range(max(0, end - frame_buffer), end + frame_buffer + 1):
            for at, al in to_answer.get((t, mother), []):
                track = answer_tracks.get(al)
                if track is not None and len(answer_children.get(al, [])) >= 2 and abs(track.end - end) <= frame_buffer:
                    found = True
        if not found:
            missed.append((end, mother))
    return false_links, missed


def _scaled(where: dict[Node, tuple[float, float]]) -> dict[Node, tuple[float, float]]:
    return {n: (SCALE * y + (SCALE - 1) / 2, SCALE * x + (SCALE - 1) / 2) for n, (y, x) in where.items()}


def _draw_tracks(
    view: Overlay, movie: TimeLapse, where: dict[Node, tuple[float, float]], t: int, colour: Sequence[float]
) -> None:
    tracks = movie.lineage.by_label()
    for track in movie.lineage.tracks:
        if track.begin > t or track.end < t - TAIL:
            continue
        path = [(s, track.label) for s in range(max(track.begin, t - TAIL), min(track.end, t) + 1)]
        parent = tracks.get(track.parent)
        if parent is not None and path and path[0][0] == track.begin and track.begin > t - TAIL:
            path.insert(0, (parent.end, parent.label))
        points = [where[n] for n in path if n in where]
        for a, b in zip(points, points[1:], strict=False):
            view.line(a, b, colour)
        if path and path[-1][0] == t and path[-1] in where:
            view.circle(where[path[-1]], SCALE, colour)


def tracks_overlay(
    movie: np.ndarray,
    truth: TimeLapse,
    answer: TimeLapse | None,
    frames: Sequence[int],
    *,
    frame_buffer: int = 1,
) -> tuple[np.ndarray, dict[str, int]]:
    """The panels of ``frames`` side by side with the legend under them, and the counts of what was marked."""
    from imagebench.runs.artifacts import shared_range

    movie = np.asarray(movie, dtype=np.float32)
    lo, hi = shared_range(movie)
    true_at = _scaled(centroids(truth.labels))
    answer_at = _scaled(centroids(answer.labels)) if answer is not None else {}
    false_links, missed = tracking_errors(truth, answer, frame_buffer) if answer is not None else ([], [])
    panels = []
    for t in frames:
        grey = np.repeat(np.repeat(np.clip(movie[t], lo, hi), SCALE, axis=0), SCALE, axis=1)
        grey[0, 0], grey[-1, -1] = lo, hi  # every panel spans the movie's one range
        view = Overlay(grey)
        _draw_tracks(view, truth, true_at, t, GREEN)
        if answer is not None:
            _draw_tracks(view, answer, answer_at, t, MAGENTA)
            for a, b in false_links:
                if t - TAIL < b[0] <= t and a in answer_at and b in answer_at:
                    view.line(answer_at[a], answer_at[b], ORANGE)
                    view.cross(answer_at[b], 2 * SCALE, ORANGE)
        for node in missed:
            if t - TAIL <= node[0] <= t and node in true_at:
                view.circle(true_at[node], 5 * SCALE, YELLOW)
        title = text_mask(f"t={t}")
        rr, cc = np.nonzero(title)
        view.paint(rr + 1, cc + 2, WHITE)
        panels.append(view.rgb)
    gap = np.full((panels[0].shape[0], 2, 3), lo, np.float32)
    strip = np.concatenate([p if i == 0 else np.concatenate([gap, p], axis=1) for i, p in enumerate(panels)], axis=1)
    legend = Overlay(np.full(strip.shape[:2], lo, np.float32))
    legend.lo, legend.hi = lo, hi
    legend.rgb = strip
    entries: list[tuple[str, Sequence[float] | None]] = [("truth", GREEN)]
    entries += [("answer", MAGENTA), ("false link", ORANGE)] if answer is not None else [("no answer", None)]
    entries.append(("missed division", YELLOW))
    legend.legend(entries)
    return legend.rgb, {"false_links": len(false_links), "missed_divisions": len(missed)}


#: What :func:`tracks_overlay` draws, for ``detail["drawn"]``.
TRACKS_LEGEND = (
    "tracks: frames of the movie (one contrast range) with the last 5 frames of each true track in green and "
    "of each answered track in magenta; orange lines with an x: false links (the answer links two objects the "
    "truth does not); yellow circles: true divisions the answer missed (the legend under it names the colours)"
)
