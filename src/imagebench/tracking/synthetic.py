"""Procedural time-lapses: moving discs that divide, appear and leave, as valid CTC movies.

:func:`disc_movie` simulates cells (discs moving with a persistent random walk, dividing into two
daughters after a random cell cycle, new cells entering) and renders them into a label movie.
:func:`tracks_from_labels` turns any label movie into a valid CTC one: a label that vanishes and
comes back becomes a new track whose parent is the old one (the CTC's way of closing a gap), and
parents that never show, or that would end after their child begins, are dropped. The bench's
tests and ``benchmarks/bench_ctc.py`` build their folders from these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from imagebench.tracking.ctc import Lineage, TimeLapse, Track, check_lineage, present_labels


@dataclass
class _Cell:
    label: int
    y: float
    x: float
    vy: float
    vx: float
    radius: float
    age: int
    cycle: int


def disc_movie(
    *,
    seed: int,
    frames: int = 20,
    shape: tuple[int, int] = (128, 128),
    cells: int = 6,
    radius: float = 6.0,
    cycle: tuple[int, int] = (8, 16),
    arrivals: float = 0.1,
    max_cells: int = 64,
) -> TimeLapse:
    """A movie of ``frames`` frames of discs: ``cells`` at the start, dividing every ``cycle`` frames (a range)."""
    rng = np.random.default_rng(seed)
    height, width = shape
    next_label = 1
    parents: dict[int, int] = {}
    alive: list[_Cell] = []

    def new_cell(y: float, x: float, parent: int = 0, r: float | None = None) -> _Cell:
        nonlocal next_label
        cell = _Cell(
            label=next_label,
            y=y,
            x=x,
            vy=float(rng.normal(0, 1.0)),
            vx=float(rng.normal(0, 1.0)),
            radius=r if r is not None else float(rng.uniform(0.8, 1.2) * radius),
            age=0 if parent else int(rng.integers(0, cycle[0])),
            cycle=int(rng.integers(cycle[0], cycle[1] + 1)),
        )
        if parent:
            parents[next_label] = parent
        next_label += 1
        return cell

    margin = radius * 2
    for _ in range(cells):
        alive.append(new_cell(float(rng.uniform(margin, height - margin)), float(rng.uniform(margin, width - margin))))
    labels = np.zeros((frames, height, width), dtype=np.uint16)
    for t in range(frames):
        if t:
            born: list[_Cell] = []
            for cell in alive:
                cell.vy = 0.8 * cell.vy + float(rng.normal(0, 0.6))
                cell.vx = 0.8 * cell.vx + float(rng.normal(0, 0.6))
                cell.y += cell.vy
                cell.x += cell.vx
                cell.age += 1
                if cell.age >= cell.cycle and len(alive) + len(born) < max_cells:
                    angle = float(rng.uniform(0, np.pi))
                    dy, dx = np.sin(angle) * cell.radius * 0.6, np.cos(angle) * cell.radius * 0.6
                    r = cell.radius * 0.8
                    born += [
                        new_cell(cell.y + dy, cell.x + dx, cell.label, r),
                        new_cell(cell.y - dy, cell.x - dx, cell.label, r),
                    ]
                    cell.age = -1  # divided: gone from the next frame on
            alive = [
                c
                for c in alive
                if c.age >= 0 and -c.radius < c.y < height + c.radius and -c.radius < c.x < width + c.radius
            ]
            alive += born
            if rng.random() < arrivals and len(alive) < max_cells:
                alive.append(
                    new_cell(float(rng.uniform(margin, height - margin)), float(rng.uniform(margin, width - margin)))
                )
        frame = labels[t]
        for cell in alive:
            cell.radius = min(cell.radius * 1.02, radius * 1.2)  # daughters grow back to full size
            y0, y1 = max(int(cell.y - cell.radius), 0), min(int(cell.y + cell.radius) + 2, height)
            x0, x1 = max(int(cell.x - cell.radius), 0), min(int(cell.x + cell.radius) + 2, width)
            if y0 >= y1 or x0 >= x1:
                continue
            yy, xx = np.mgrid[y0:y1, x0:x1]
            window = frame[y0:y1, x0:x1]
            window[(yy - cell.y) ** 2 + (xx - cell.x) ** 2 <= cell.radius**2] = cell.label
    return tracks_from_labels(labels, parents)


def tracks_from_labels(labels: np.ndarray, parents: Mapping[int, int] | None = None) -> TimeLapse:
    """A valid CTC movie from a label movie and the parent of each label (see the module's docstring)."""
    parents = dict(parents or {})
    present: dict[int, list[int]] = {}
    for t in range(labels.shape[0]):
        for label in present_labels(labels[t]).tolist():
            present.setdefault(int(label), []).append(t)
    out = labels.copy()
    top = max(present, default=0)
    if top + sum(len(v) for v in present.values()) >= np.iinfo(out.dtype).max:
        out = out.astype(np.uint32)
    last_segment: dict[int, int] = {}  # original label -> the label of its last segment
    rows: list[list[int]] = []
    next_label = top + 1
    for label in sorted(present):
        frames = present[label]
        breaks = [i for i in range(1, len(frames)) if frames[i] != frames[i - 1] + 1]
        starts = [0, *breaks]
        ends = [*(b - 1 for b in breaks), len(frames) - 1]
        previous = 0
        for s, e in zip(starts, ends, strict=True):
            seg_label = label if previous == 0 else next_label
            if previous:
                next_label += 1
                for t in frames[s : e + 1]:
                    out[t][labels[t] == label] = seg_label
            rows.append(
                [seg_label, frames[s], frames[e], previous if previous else -label]
            )  # -label: parent to resolve
            previous = seg_label
        last_segment[label] = previous
    tracks = []
    ends_of = {r[0]: r[2] for r in rows}
    for seg_label, begin, end, parent in rows:
        if parent < 0:  # a label's first segment: its given parent's last segment, when that ends in time
            given = parents.get(-parent, 0)
            parent = last_segment.get(given, 0)
            if parent and ends_of[parent] >= begin:
                parent = 0
        tracks.append(Track(label=seg_label, begin=begin, end=end, parent=parent))
    lineage = Lineage(tracks=tuple(sorted(tracks, key=lambda t: t.label)))
    check_lineage(lineage, source="tracks_from_labels")
    return TimeLapse(labels=out, lineage=lineage)
