"""The N fixed rendered views a subject under access setting ``views-N`` is given, and nothing else
of the data (:mod:`imagebench.sandbox.access`).

The views are fixed by the case's inputs and N alone, never by the subject: the image and labels
inputs (points and shapes drawn over them) rendered as the MCP ``snapshot`` renders them
(:mod:`imagebench.subjects.mcp.render`), then

- a stack (a leading axis beyond the plane: time or z): N planes evenly spaced along axis 0, the
  first and the last among them (one view: the maximum projection);
- a single plane: the whole of it first, then N - 1 tiles of a grid of ceil(sqrt(N - 1)) columns
  and as many rows as they need, row by row (views-3: the whole, its left half, its right half).

Each view is ``views/view-<i>.png`` (from 1) in the workspace, described in ``views/views.json``
(which plane, which box: no values of the data).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from imagebench.records import Record

if TYPE_CHECKING:
    from imagebench.case.session import Session
    from imagebench.sandbox.workspace import Workspace

VIEWS_DIR = "views"
INDEX_NAME = "views.json"
_RENDERED = ("image", "labels", "points", "shapes")


class ViewsError(ValueError):
    """The case's inputs cannot be rendered as views (no image or labels input, a tensor)."""


@dataclass(frozen=True)
class View:
    """One view: its file name and what of the data it shows."""

    name: str
    plane: int | None  # the index along axis 0 of a stack; None: a single plane, or the projection
    box: tuple[tuple[int, int], tuple[int, int]]  # (y0, y1), (x0, x1) of the rendered plane

    def to_json(self) -> dict[str, Any]:
        return {"file": f"{VIEWS_DIR}/{self.name}", "plane": self.plane, "box": [list(self.box[0]), list(self.box[1])]}


class ViewEntry(Record):
    file: str = Field(description="the PNG, relative to the workspace (views/view-<i>.png)")
    plane: int | None = Field(description="its index along axis 0 of a stack; null: a single plane, or the projection")
    box: list[list[int]] = Field(description="[[y0, y1], [x0, x1]] of the rendered plane it shows")


class ViewsIndex(Record):
    """``views/views.json``: the views a ``views-N`` subject is given (``imagebench schema views-index``)."""

    schema_version: int = 1
    setting: str = Field(description="the access setting, views-N")
    views: list[ViewEntry]
    of: list[str] = Field(description="the case's input layers, by name")


@dataclass(frozen=True)
class _Shown:
    name: str
    kind: str


def _inputs(session: Session) -> tuple[list[_Shown], dict[str, np.ndarray]]:
    shown: list[_Shown] = []
    arrays: dict[str, np.ndarray] = {}
    for name, sl in session.layers.items():
        if sl.layer.kind not in _RENDERED:
            continue
        if isinstance(sl.data, str) or sl.layer.presentation == "tensor":
            raise ViewsError(f"layer {name!r} is a tensor on the data plane; it has no fixed views")
        shown.append(_Shown(name, sl.layer.kind))
        arrays[name] = np.asarray(sl.data)
    if not any(s.kind in ("image", "labels") for s in shown):
        raise ViewsError("the case has no image or labels input to render")
    return shown, arrays


def _frames(shown: list[_Shown], arrays: dict[str, np.ndarray]) -> int:
    """The length of axis 0 of the first image or labels input when it is a stack (not RGB), else 0."""
    first = next(arrays[s.name] for s in shown if s.kind in ("image", "labels"))
    rgb = first.ndim == 3 and first.shape[-1] in (3, 4)
    return int(first.shape[0]) if first.ndim >= 3 and not rgb else 0


def plan(frames: int, shape: tuple[int, int], n: int) -> list[View]:
    """The N views of data with ``frames`` planes (0: a single plane) of ``shape`` (rows, columns)."""
    h, w = shape
    whole = ((0, h), (0, w))
    if frames > 0:
        if n == 1:
            return [View("view-1.png", None, whole)]
        planes = [round(i * (frames - 1) / (n - 1)) for i in range(n)]
        return [View(f"view-{i + 1}.png", p, whole) for i, p in enumerate(planes)]
    views = [View("view-1.png", None, whole)]
    if n > 1:
        cols = math.ceil(math.sqrt(n - 1))
        rows = math.ceil((n - 1) / cols)
        for i in range(n - 1):
            r, c = divmod(i, cols)
            box = ((r * h // rows, (r + 1) * h // rows), (c * w // cols, (c + 1) * w // cols))
            views.append(View(f"view-{i + 2}.png", None, box))
    return views


def render_views(session: Session, n: int) -> list[tuple[View, bytes]]:
    """The N views of ``session``'s inputs, each with its PNG; :class:`ViewsError` when there are none."""
    from imagebench.subjects.mcp.render import Drawn, at_position, leading_axes, png, render

    if n < 1:
        raise ViewsError(f"a views setting shows at least one view, got {n}")
    shown, arrays = _inputs(session)
    frames = _frames(shown, arrays)
    lead = max(leading_axes(arrays[s.name].shape) for s in shown if s.kind in ("image", "labels"))

    def picture(plane: int | None) -> np.ndarray:
        drawn = [
            Drawn(s.name, s.kind, arrays[s.name])
            if s.kind in ("points", "shapes")
            else Drawn(s.name, s.kind, at_position(arrays[s.name], {} if plane is None else {0: plane}, lead))
            for s in shown
        ]
        return render(drawn, {})[0]

    whole = picture(None)  # a single plane, or the stack max-projected
    out: list[tuple[View, bytes]] = []
    for view in plan(frames, (int(whole.shape[0]), int(whole.shape[1])), n):
        rgb = whole if view.plane is None else picture(view.plane)
        (y0, y1), (x0, x1) = view.box
        out.append((view, png(np.ascontiguousarray(rgb[y0:y1, x0:x1]))))
    return out


def write_views(session: Session, ws: Workspace, n: int) -> list[View]:
    """``views/view-1.png`` ... and ``views/views.json`` in the workspace, beneath its descriptor."""
    rendered = render_views(session, n)
    ws.mkdir(VIEWS_DIR)
    for view, png in rendered:
        ws.write_bytes(f"{VIEWS_DIR}/{view.name}", png)
    index = ViewsIndex(
        setting=f"views-{n}", views=[ViewEntry(**v.to_json()) for v, _ in rendered], of=sorted(session.layers)
    )
    ws.write_text(f"{VIEWS_DIR}/{INDEX_NAME}", json.dumps(index.model_dump(mode="json"), indent=2) + "\n")
    return [v for v, _ in rendered]


__all__ = [
    "INDEX_NAME",
    "VIEWS_DIR",
    "View",
    "ViewEntry",
    "ViewsError",
    "ViewsIndex",
    "plan",
    "render_views",
    "write_views",
]
