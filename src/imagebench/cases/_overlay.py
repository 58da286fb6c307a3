"""Drawing a verdict: an image with the truth and the subject's answer marked on it, in colour.

Every case's artifact should let a person see what went wrong without reading numbers. The
convention across cases: the image in grey, **green** for the truth, **magenta** for the
subject's answer. A circle marks a true position and a cross an answered one, so the two stay
apart in print and for colour-blind readers too.

The overlay is a float RGB image in the units of the image it is drawn on: the colours are made
from that image's own contrast range (:func:`imagebench.runs.artifacts.shared_range`), so it shares
one range with the case's other artifacts of the same image instead of being rescaled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

GREEN = (0.0, 1.0, 0.0)  # the truth
MAGENTA = (1.0, 0.0, 1.0)  # the subject's answer
WHITE = (1.0, 1.0, 1.0)  # where the truth and the answer coincide; the legend's words for what is not drawn

#: One legend entry: its words and the colour they name (None: words alone, for something not drawn).
LegendEntry = tuple[str, Sequence[float] | None]


def answer_legend(answered: bool) -> list[LegendEntry]:
    """The usual legend: green the truth, magenta the answer (or, when none was drawn, "no answer")."""
    return [("truth", GREEN), ("answer", MAGENTA) if answered else ("no answer", None)]


def text_mask(text: str, scale: int = 1) -> np.ndarray:
    """``text`` as a boolean mask (rows, cols) in Pillow's built-in bitmap font (11 px high, no
    anti-aliasing, so the pixels are the same on every machine), each pixel ``scale`` x ``scale``."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default_imagefont()
    _, _, width, height = font.getbbox(text)
    canvas = Image.new("L", (max(1, int(width)), max(1, int(height))), 0)
    ImageDraw.Draw(canvas).text((0, 0), text, font=font, fill=255)
    mask = np.asarray(canvas) > 127
    return np.repeat(np.repeat(mask, scale, axis=0), scale, axis=1) if scale > 1 else mask


def numbers(value: Any, n: int) -> tuple[float, ...] | None:
    """``value`` as exactly ``n`` finite numbers (a list, tuple or array), else None. Never raises."""
    try:
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
    except Exception:
        return None
    if arr.size != n or not np.all(np.isfinite(arr)):
        return None
    return tuple(float(v) for v in arr)


class Overlay:
    """A grey image turned RGB, to draw marks on. ``rgb`` is the result."""

    def __init__(self, image: Any) -> None:
        from imagebench.runs.artifacts import shared_range

        grey = np.asarray(image, dtype=np.float32)
        if grey.ndim != 2:
            raise ValueError(f"an overlay is drawn on a 2-D image, got shape {grey.shape}")
        self.lo, self.hi = shared_range(grey)
        self.rgb = np.repeat(grey[..., None], 3, axis=-1)

    @property
    def shape(self) -> tuple[int, int]:
        return self.rgb.shape[:2]  # type: ignore[return-value]

    def _pixel(self, point: Sequence[float]) -> tuple[int, int]:
        # A wild answer (1e300) is drawn as far off the image, not as an overflow or a
        # line of a billion pixels.
        limit = 4.0 * max(self.shape)
        r, c = (int(round(float(np.clip(float(v), -limit, limit)))) for v in point)
        return r, c

    def paint(self, rr: np.ndarray, cc: np.ndarray, colour: Sequence[float]) -> None:
        """Set the pixels at (``rr``, ``cc``) that fall inside the image to ``colour`` (0..1 per channel)."""
        rr, cc = np.asarray(rr, dtype=np.intp), np.asarray(cc, dtype=np.intp)
        inside = (rr >= 0) & (rr < self.shape[0]) & (cc >= 0) & (cc < self.shape[1])
        value = self.lo + np.asarray(colour, dtype=np.float32) * (self.hi - self.lo)
        self.rgb[rr[inside], cc[inside]] = value

    def circle(self, centre: Sequence[float], radius: float, colour: Sequence[float]) -> None:
        from skimage.draw import circle_perimeter

        r, c = self._pixel(centre)
        self.paint(*circle_perimeter(r, c, max(1, int(round(radius)))), colour)

    def cross(self, centre: Sequence[float], arm: int, colour: Sequence[float]) -> None:
        """A diagonal cross (an x), so it never hides under a horizontal or vertical line."""
        r, c = self._pixel(centre)
        k = np.arange(-arm, arm + 1)
        self.paint(np.concatenate([r + k, r + k]), np.concatenate([c + k, c - k]), colour)

    def line(self, start: Sequence[float], end: Sequence[float], colour: Sequence[float]) -> None:
        from skimage.draw import line

        (r0, c0), (r1, c1) = self._pixel(start), self._pixel(end)
        self.paint(*line(r0, c0, r1, c1), colour)

    def outline(self, mask: np.ndarray, colour: Sequence[float]) -> None:
        from skimage.segmentation import find_boundaries

        self.paint(*np.nonzero(find_boundaries(np.asarray(mask, dtype=bool), mode="inner")), colour)

    def through_centre(self, angle_deg: float, colour: Sequence[float]) -> None:
        """A line across the whole image through its centre, ``angle_deg`` counter-clockwise from +x
        as displayed (rows point down)."""
        t = math.radians(angle_deg)
        cy, cx = (s / 2.0 for s in self.shape)
        half = 0.48 * min(self.shape)
        dy, dx = -math.sin(t) * half, math.cos(t) * half
        self.line((cy - dy, cx - dx), (cy + dy, cx + dx), colour)

    def tally(self, rows: Sequence[tuple[int | None, Sequence[float]]], block: int = 4, gap: int = 2) -> None:
        """Append a strip under the image with one row of ``count`` squares per ``(count, colour)``,
        so two counts compare by length. A count that does not fit ends its row in a long bar; a
        None count leaves its row empty."""
        h, w = self.shape
        per_row = max(1, (w - gap) // (block + gap))
        strip = np.full((gap + len(rows) * (block + gap), w, 3), self.lo, dtype=np.float32)
        self.rgb = np.concatenate([self.rgb, strip], axis=0)
        for i, (count, colour) in enumerate(rows):
            if count is None or count <= 0:
                continue
            top = h + gap + i * (block + gap)
            shown = min(int(count), per_row)
            for j in range(shown):
                left = gap + j * (block + gap)
                rr, cc = np.mgrid[top : top + block, left : left + block]
                self.paint(rr.ravel(), cc.ravel(), colour)
            if count > per_row:  # more than fit: a bar under the whole row says "and more"
                rr, cc = np.mgrid[top + block : top + block + 1, 0:w]
                self.paint(rr.ravel(), cc.ravel(), colour)

    def legend(self, entries: Sequence[LegendEntry]) -> None:
        """Append a strip under the image naming what each colour marks: per entry a filled square
        of its colour and its words in that colour (an entry without a colour: its words in white,
        no square, e.g. "no answer"). Entries run left to right and wrap to a new row when the image
        is too narrow; the words grow with the image (each font pixel 1 px under 300 px, 2 px under 600 px, ...)."""
        h, w = self.shape
        k = 1 + min(h, w) // 300
        pad, row_h, square = 2 * k, 13 * k, 7 * k
        placed: list[tuple[int, int, str, Sequence[float] | None]] = []  # (row, left, words, colour)
        row, left = 0, pad
        for words, colour in entries:
            width = (square + 3 * k if colour is not None else 0) + text_mask(words, k).shape[1]
            if left > pad and left + width > w - pad:
                row, left = row + 1, pad
            placed.append((row, left, words, colour))
            left += width + 8 * k
        rows = row + 1 if placed else 0
        strip = np.full((pad + rows * row_h, w, 3), self.lo, dtype=np.float32)
        self.rgb = np.concatenate([self.rgb, strip], axis=0)
        for row, left, words, colour in placed:
            top = h + pad + row * row_h
            if colour is not None:
                rr, cc = np.mgrid[top + 2 * k : top + 2 * k + square, left : left + square]
                self.paint(rr.ravel(), cc.ravel(), colour)
                left += square + 3 * k
            mask = text_mask(words, k)
            rr, cc = np.nonzero(mask)
            self.paint(rr + top, cc + left, colour if colour is not None else WHITE)


def outline_overlay(image: Any, truth: Any, answer: Any | None) -> np.ndarray:
    """``image`` (2-D) with the outlines of the truth's objects in green and of the answer's in
    magenta, white where the two coincide, and the legend under it saying so."""
    from skimage.segmentation import find_boundaries

    view = Overlay(image)
    true = find_boundaries(np.asarray(truth), mode="inner")
    if answer is None:
        view.paint(*np.nonzero(true), GREEN)
        view.legend(answer_legend(False))
        return view.rgb
    given = find_boundaries(np.asarray(answer), mode="inner")
    view.paint(*np.nonzero(true & ~given), GREEN)
    view.paint(*np.nonzero(given & ~true), MAGENTA)
    view.paint(*np.nonzero(true & given), WHITE)
    view.legend([*answer_legend(True), ("both", WHITE)])
    return view.rgb


#: What :func:`outline_overlay` draws, for ``detail["drawn"]``.
OUTLINE_LEGEND = (
    "overlay: the image with the outlines of the true objects in green and of the answer's in magenta, "
    "white where they coincide (the legend under it names the colours)"
)
