"""Procedural time-lapses of nuclei for the tracking cases: fluorescence movies and their CTC truth.

:func:`build_tracking_movie` simulates nuclei as ellipses that move (a persistent random walk),
deform (their semi-axes breathe and their orientation turns), divide (after a drawn cell cycle the
mother is gone and two smaller daughters, set apart across a random axis, begin in the next
frame and grow back), enter across the border (a new nucleus just outside an edge, heading in)
and leave across it. Each frame is rasterized (a pixel goes to the ellipse it is most inside, so
touching nuclei share a boundary), blurred, put on an uneven background and given shot-like noise
(the same renderer as the segmentation cases). The truth is the label movie made a valid CTC
movie by :func:`imagebench.tracking.synthetic.tracks_from_labels` (a nucleus hidden for a frame
and seen again becomes a new track whose parent is the old one) and its lineage table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from imagebench.cases.segmentation import _background, _fluorescence
from imagebench.fixtures.fixture import Fixture, FixtureError
from imagebench.tracking.synthetic import tracks_from_labels


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
    phase: float
    theta: float
    spin: float
    brightness: float


def simulate(
    rng: np.random.Generator,
    *,
    frames: int,
    shape: tuple[int, int],
    cells: int,
    radius: float,
    speed: float,
    cycle: tuple[int, int],
    arrivals: float,
    deform: float,
    max_cells: int,
    spacing: float,
) -> tuple[list[list[_Cell]], dict[int, int]]:
    """The cells alive in each frame (copies) and each daughter's parent label."""
    height, width = shape
    next_label = 1
    parents: dict[int, int] = {}

    def new(y: float, x: float, parent: int = 0, r: float | None = None, heading: float | None = None) -> _Cell:
        nonlocal next_label
        angle = float(rng.uniform(0, 2 * np.pi)) if heading is None else heading
        cell = _Cell(
            label=next_label,
            y=y,
            x=x,
            vy=speed * float(np.sin(angle)),
            vx=speed * float(np.cos(angle)),
            radius=r if r is not None else float(rng.uniform(0.85, 1.15) * radius),
            age=0 if parent else int(rng.integers(0, cycle[0])),
            cycle=int(rng.integers(cycle[0], cycle[1] + 1)),
            phase=float(rng.uniform(0, 2 * np.pi)),
            theta=float(rng.uniform(0, np.pi)),
            spin=float(rng.normal(0, 0.08)),
            brightness=float(rng.uniform(0.6, 1.0)),
        )
        if parent:
            parents[next_label] = parent
        next_label += 1
        return cell

    alive: list[_Cell] = []
    margin = 2 * radius
    tries = 0
    while len(alive) < cells and tries < 500 * cells:
        tries += 1
        y, x = float(rng.uniform(margin, height - margin)), float(rng.uniform(margin, width - margin))
        if all(np.hypot(c.y - y, c.x - x) >= spacing * (c.radius + radius) for c in alive):
            alive.append(new(y, x))
    if len(alive) < cells:
        raise FixtureError(f"tracking movie: could place only {len(alive)} of {cells} nuclei in {shape}")
    history: list[list[_Cell]] = []
    for t in range(frames):
        if t:
            born: list[_Cell] = []
            for cell in alive:
                heading = float(np.arctan2(cell.vy, cell.vx)) + float(rng.normal(0, 0.35))
                cell.vy, cell.vx = speed * float(np.sin(heading)), speed * float(np.cos(heading))
                cell.y += cell.vy
                cell.x += cell.vx
                cell.age += 1
                cell.theta += cell.spin
                cell.radius = min(cell.radius * 1.03, 1.15 * radius)
                if cell.age >= cell.cycle and len(alive) + len(born) < max_cells:
                    axis = float(rng.uniform(0, np.pi))
                    dy, dx = np.sin(axis) * cell.radius * 0.75, np.cos(axis) * cell.radius * 0.75
                    r = cell.radius * 0.72
                    born += [
                        new(cell.y + dy, cell.x + dx, cell.label, r, axis),
                        new(cell.y - dy, cell.x - dx, cell.label, r, axis + np.pi),
                    ]
                    cell.age = -1  # divided: gone from this frame on
            alive = [
                c
                for c in alive
                if c.age >= 0 and -c.radius < c.y < height + c.radius and -c.radius < c.x < width + c.radius
            ]
            alive += born
            if rng.random() < arrivals and len(alive) < max_cells:
                edge = int(rng.integers(4))
                along = float(rng.uniform(margin, (width if edge < 2 else height) - margin))
                r0 = radius * 0.5
                y, x, heading = (
                    (-r0, along, np.pi / 2),
                    (height + r0, along, -np.pi / 2),
                    (along, -r0, 0.0),
                    (along, width + r0, np.pi),
                )[edge]
                alive.append(new(float(y), float(x), heading=float(heading) + float(rng.normal(0, 0.3))))
        history.append([_Cell(**vars(c)) for c in alive])
    return history, parents


def render(history: list[list[_Cell]], shape: tuple[int, int], deform: float) -> tuple[np.ndarray, np.ndarray]:
    """The label movie (uint16, the cells' labels) and each frame's brightness profile in [0, 1]:
    each cell an ellipse, a pixel given to the ellipse it is most inside (cells partly outside the
    field are cut by its edge)."""
    h, w = shape
    labels = np.zeros((len(history), h, w), np.uint16)
    profiles = np.zeros((len(history), h, w), np.float64)
    for t, cells in enumerate(history):
        best = np.full(shape, np.inf)
        for c in cells:
            wobble = deform * np.sin(0.5 * t + c.phase)
            a, b = c.radius * (1 + wobble), c.radius * (1 - 0.6 * wobble)
            r = int(np.ceil(max(a, b))) + 1
            y0, y1 = max(0, int(c.y) - r), min(h, int(c.y) + r + 2)
            x0, x1 = max(0, int(c.x) - r), min(w, int(c.x) + r + 2)
            if y0 >= y1 or x0 >= x1:
                continue
            yy, xx = np.mgrid[y0:y1, x0:x1]
            dy, dx = yy - c.y, xx - c.x
            cos, sin = np.cos(c.theta), np.sin(c.theta)
            q = ((dy * cos - dx * sin) / a) ** 2 + ((dy * sin + dx * cos) / b) ** 2
            inside = (q <= 1.0) & (q < best[y0:y1, x0:x1])
            labels[t, y0:y1, x0:x1][inside] = c.label
            best[y0:y1, x0:x1][inside] = q[inside]
            profiles[t, y0:y1, x0:x1][inside] = (c.brightness * (1.0 - 0.35 * q))[inside]
    return labels, profiles


def build_tracking_movie(
    *,
    seed: int,
    frames: int = 30,
    shape: tuple[int, int] = (128, 128),
    cells: int = 7,
    radius: float = 6.0,
    speed: float = 1.5,
    cycle: tuple[int, int] = (10, 20),
    arrivals: float = 0.12,
    deform: float = 0.15,
    noise: float = 0.03,
    max_cells: int = 24,
    spacing: float = 1.6,
) -> Fixture:
    """A fluorescence movie of moving, deforming, dividing nuclei; truth: the CTC label movie and lineage."""
    rng = np.random.default_rng(seed)
    shape = (int(shape[0]), int(shape[1]))
    history, parents = simulate(
        rng,
        frames=int(frames),
        shape=shape,
        cells=int(cells),
        radius=float(radius),
        speed=float(speed),
        cycle=(int(cycle[0]), int(cycle[1])),
        arrivals=float(arrivals),
        deform=float(deform),
        max_cells=int(max_cells),
        spacing=float(spacing),
    )
    raw, profiles = render(history, shape, float(deform))
    truth = tracks_from_labels(raw, parents)
    bg = _background(rng, shape, level=0.12, ramp=0.15)
    movie = np.stack([_fluorescence(rng, profiles[t], bg, float(noise)) for t in range(len(history))])
    table = truth.lineage.as_array()
    divisions = len({p for p in table[:, 3].tolist() if p and sum(1 for q in table[:, 3] if q == p) >= 2})
    if divisions == 0:
        raise FixtureError(f"tracking movie (seed {seed}): no division happened; a tracking case needs one")
    return Fixture(
        provenance=(
            f"synthetic: {cells} elliptical nuclei (radius {radius} px, breathing ±{deform:.0%}, turning), "
            f"a persistent random walk at {speed} px/frame, dividing every {cycle[0]}-{cycle[1]} frames into two "
            f"daughters of 0.72 the radius, entering across an edge with probability {arrivals} a frame and leaving "
            f"across it; rendered as the segmentation cases render nuclei (blur sigma 1 px, a tilted background "
            f"with a glow, shot-like noise {noise}); truth made a CTC movie by tracks_from_labels; "
            f"numpy default_rng(seed={seed})"
        ),
        data={"movie": movie.astype(np.float32)},
        truth={"labels": truth.labels, "lineage": table},
        about=(
            f"{len(history)} frames of {shape[0]}x{shape[1]} float32, {len(truth.lineage.tracks)} tracks, "
            f"{divisions} divisions"
        ),
    )
