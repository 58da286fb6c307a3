"""A snapshot drawn from a session's own layers: the PNGs ``snapshot`` and ``snapshot_frames`` return.

Rendered from the arrays the agent can read anyway, never grabbed from a screen, so nothing else
on a viewer (a truth layer a person opened, another subject's results) can reach a picture. Each
layer is drawn with its display (:class:`Display`: visible, opacity, colormap, contrast limits),
at a ``position`` (the step of each axis that is not displayed; an axis not named is
max-projected), every ``step`` pixels so that a picture costs its own size, never its layer's.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: the longest side of a snapshot, and of each frame of a multi-frame snapshot
SNAPSHOT_MAX_SIDE = 1024
FRAME_MAX_SIDE = 512

# Colormaps as stops from black (or their low end) to their high end, interpolated (the perceptual
# ones approximated by five of matplotlib's stops; napari names the same maps).
_STOPS: dict[str, tuple[tuple[int, int, int], ...]] = {
    "gray": ((0, 0, 0), (255, 255, 255)),
    "red": ((0, 0, 0), (255, 0, 0)),
    "green": ((0, 0, 0), (0, 255, 0)),
    "blue": ((0, 0, 0), (0, 0, 255)),
    "cyan": ((0, 0, 0), (0, 255, 255)),
    "magenta": ((0, 0, 0), (255, 0, 255)),
    "yellow": ((0, 0, 0), (255, 255, 0)),
    "viridis": ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)),
    "magma": ((0, 0, 4), (81, 18, 124), (183, 55, 121), (252, 137, 97), (252, 253, 191)),
    "inferno": ((0, 0, 4), (87, 16, 110), (188, 55, 84), (249, 142, 9), (252, 255, 164)),
}


@dataclass(frozen=True)
class Display:
    """How one layer is drawn. ``contrast_limits`` None: the 1st and 99.5th percentiles of what is
    drawn; ``opacity`` None: the kind's own (1 for an image, 0.5 for labels, 1 for points)."""

    visible: bool = True
    opacity: float | None = None
    colormap: str | None = None
    contrast_limits: tuple[float, float] | None = None

    def opacity_of(self, kind: str) -> float:
        return self.opacity if self.opacity is not None else (0.5 if kind == "labels" else 1.0)


@dataclass(frozen=True)
class Drawn:
    """One layer to draw: its name, kind and array (its data, or (n, 2) marks of a frame)."""

    name: str
    kind: str
    data: np.ndarray


def leading_axes(shape: Sequence[int]) -> int:
    """How many leading axes of an array of ``shape`` are not displayed: all but the last two (an
    RGB(A) image of shape (Y, X, 3|4) has none)."""
    if len(shape) == 3 and shape[-1] in (3, 4):
        return 0
    return max(0, len(shape) - 2)


def at_position(arr: np.ndarray, position: Mapping[int, int], view_leading: int) -> np.ndarray:
    """A 2D (or RGB) view of ``arr``: each leading axis at its step in ``position`` (the view's
    axes, aligned to ``arr``'s from the right as napari aligns layers), the rest max-projected."""
    a = np.asarray(arr)
    lead = leading_axes(a.shape)
    offset = view_leading - lead
    for axis in range(lead - 1, -1, -1):
        step = position.get(axis + offset)
        if step is not None and 0 <= step < a.shape[axis]:
            a = np.take(a, step, axis=axis)
        else:
            a = a.max(axis=axis)
    return a


def render(
    layers: Sequence[Drawn],
    displays: Mapping[str, Display],
    *,
    max_side: int = SNAPSHOT_MAX_SIDE,
) -> tuple[np.ndarray, int, list[str]]:
    """The RGB picture of ``layers`` (each already at its position), every ``step`` pixels so its
    longest side is at most ``max_side``; returns it, the step, and the names drawn."""
    shape2 = next((tuple(x.data.shape[:2]) for x in layers if x.kind in ("image", "labels")), None)
    step = max(1, math.ceil(max(shape2) / max_side)) if shape2 else 1
    size = tuple(-(-n // step) for n in shape2) if shape2 else (256, 256)
    out = np.zeros((*size, 3), np.float64)
    drawn: list[str] = []
    for layer in layers:
        display = displays.get(layer.name, Display())
        if not display.visible:
            continue
        alpha = display.opacity_of(layer.kind)
        a = layer.data
        if layer.kind == "image":
            colour = _coloured(a[::step, ::step], display)
            if colour.shape[:2] != out.shape[:2]:
                continue
            out = (1 - alpha) * out + alpha * colour if drawn else alpha * colour
        elif layer.kind == "labels":
            lab = a[::step, ::step].astype(np.int64)
            if lab.shape != out.shape[:2]:
                continue
            hue = (lab * 2654435761) % 2**32
            colour = 64 + np.stack([(hue >> s) & 255 for s in (0, 8, 16)], axis=-1).astype(np.float64) * 0.75
            m = lab > 0
            out[m] = (1 - alpha) * out[m] + alpha * colour[m]
        elif _drawn_as_points(layer.kind, a):
            mark = np.array((255.0, 0.0, 255.0))
            for p in np.asarray(a, dtype=np.float64)[: 1 << 16]:
                y, x = int(round(p[-2] / step)), int(round(p[-1] / step))
                box = out[max(0, y - 1) : y + 2, max(0, x - 1) : x + 2]
                box[...] = (1 - alpha) * box + alpha * mark
        else:
            continue
        drawn.append(layer.name)
    return out.clip(0, 255).astype(np.uint8), step, drawn


def _coloured(a: np.ndarray, display: Display) -> np.ndarray:
    """An image plane in colour: an RGB image as it is, a grey one through its contrast limits and colormap."""
    if a.ndim == 3 and a.shape[-1] in (3, 4):
        return np.asarray(a[..., :3], dtype=np.float64)
    x = np.asarray(a, dtype=np.float64)
    if display.contrast_limits is not None:
        lo, hi = display.contrast_limits
    else:
        finite = x[np.isfinite(x)]
        if finite.size == 0:
            return np.zeros((*x.shape[:2], 3))
        lo, hi = (float(v) for v in np.percentile(finite, [1, 99.5]))
        if hi <= lo:
            lo, hi = float(finite.min()), float(finite.max()) or 1.0
    scaled = np.clip((np.nan_to_num(x, nan=lo) - lo) / ((hi - lo) or 1.0), 0, 1)
    stops = np.asarray(_STOPS[display.colormap or "gray"], dtype=np.float64)
    where = np.linspace(0, 1, len(stops))
    return np.stack([np.interp(scaled, where, stops[:, c]) for c in range(3)], axis=-1)


def _drawn_as_points(kind: str, a: np.ndarray) -> bool:
    """Points and shapes are (n, >= 2) coordinates; a tracks layer only once it is marks (n, 2) of one frame."""
    if a.ndim != 2:
        return False
    return (kind in ("points", "shapes") and a.shape[1] >= 2) or (kind == "tracks" and a.shape[1] == 2)


def track_marks(table: np.ndarray, labels: np.ndarray | None, frame: int) -> np.ndarray:
    """(n, 2) points: the centroid, in the agent's label movie, of each track alive in ``frame``
    and in the 5 frames before it (its path); none without a label movie of matching frames."""
    if labels is None or labels.ndim < 3 or frame >= labels.shape[0]:
        return np.zeros((0, 2))
    points: list[tuple[float, float]] = []
    for t in range(max(0, frame - 5), frame + 1):
        alive = [int(r[0]) for r in np.asarray(table).tolist() if r[1] <= t <= r[2]]
        plane = labels[t]
        for label in alive[:4096]:
            yy, xx = np.nonzero(plane == label)
            if yy.size:
                points.append((float(yy.mean()), float(xx.mean())))
    return np.asarray(points, dtype=np.float64).reshape(-1, 2)


def png(rgb: np.ndarray) -> bytes:
    """A minimal PNG encoder (8-bit RGB), so a snapshot needs no imaging library."""
    h, w = rgb.shape[:2]
    raw = b"".join(b"\x00" + np.ascontiguousarray(rgb[y]).tobytes() for y in range(h))

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
