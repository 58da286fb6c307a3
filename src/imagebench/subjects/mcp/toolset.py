"""The tools a session serves, in one table: each tool's name, what it is for (case or viewer),
whether it only reads, and its typed function (every parameter described, fixed values as enums,
its result a model of :mod:`imagebench.subjects.mcp.results`, published as its ``outputSchema``).

:func:`register` puts the tools of :data:`TOOLS` on a ``FastMCP`` server, all of them or those
``only`` names (an access setting serves fewer); every call then goes through the server's one
dispatch point (``server.ImagebenchMCP.call_tool``), which records it in the transcript.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Collection
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import Field

from imagebench.subjects.mcp.errors import ToolError
from imagebench.subjects.mcp.results import (
    AddResult,
    AnswerKind,
    AnswerResult,
    AnswerValue,
    Colormap,
    Encoding,
    FramesResult,
    LayerDisplay,
    LayersResult,
    NestedNumbers,
    PromptResult,
    ReadResult,
    SkillResult,
    SkillsResult,
    SnapshotResult,
    SubmitResult,
    UpdateResult,
    ViewResult,
)

if TYPE_CHECKING:
    from imagebench.subjects.mcp.tools import AgentSession

__all__ = ["TOOLS", "ToolSpec", "register", "tool_names"]

#: what the tool function of the call under way returned, for the transcript's one-line summary
RESULT: ContextVar[dict[str, Any] | None] = ContextVar("imagebench_mcp_result", default=None)


@dataclass(frozen=True)
class ToolSpec:
    """One row of the table: ``group`` is ``case`` (the task, its data, what is left) or ``viewer``
    (the view a snapshot draws: dims, display, frames); ``read_only`` tools change nothing scored."""

    name: str
    group: Literal["case", "viewer"]
    read_only: bool


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("get_prompt", "case", True),
    ToolSpec("list_layers", "case", True),
    ToolSpec("read_layer", "case", True),
    ToolSpec("snapshot", "case", True),
    ToolSpec("add_layer", "case", False),
    ToolSpec("update_layer", "case", False),
    ToolSpec("set_answer", "case", False),
    ToolSpec("list_skills", "case", True),
    ToolSpec("use_skill", "case", False),
    ToolSpec("submit", "case", False),
    ToolSpec("view_state", "viewer", True),
    ToolSpec("set_dims", "viewer", True),
    ToolSpec("step_dims", "viewer", True),
    ToolSpec("set_layer_display", "viewer", True),
    ToolSpec("snapshot_frames", "viewer", True),
)


def tool_names(group: str | None = None) -> list[str]:
    return [t.name for t in TOOLS if group is None or t.group == group]


# --------------------------------------------------------------------------- parameter types

LayerName = Annotated[str, Field(description="a layer's name, as list_layers gives it", min_length=1, max_length=128)]
Axis = Annotated[
    int | str,
    Field(description="a leading (not displayed) axis of the view: its index (0: time or z) or its name (t, z)"),
]
Numbers = Annotated[
    list[NestedNumbers] | None,
    Field(description="the array as nested JSON lists of numbers, row by row (C order); give this or npy"),
]
Npy = Annotated[
    str | None,
    Field(description="an .npy file in your workspace (e.g. 'outputs/labels.npy'); give this or data"),
]


def _picture(png: bytes, info: dict[str, Any], model: type[Any]) -> CallToolResult:
    import base64

    structured = model.model_validate(info).model_dump(mode="json")
    return CallToolResult(
        content=[
            ImageContent(type="image", data=base64.b64encode(png).decode("ascii"), mimeType="image/png"),
            TextContent(type="text", text=json.dumps(structured, separators=(",", ":"))),
        ],
        structuredContent=structured,
    )


def _frames(pngs: list[bytes], info: dict[str, Any]) -> CallToolResult:
    import base64

    structured = FramesResult.model_validate(info).model_dump(mode="json")
    images = [ImageContent(type="image", data=base64.b64encode(p).decode("ascii"), mimeType="image/png") for p in pngs]
    text = TextContent(type="text", text=json.dumps(structured, separators=(",", ":")))
    return CallToolResult(content=[*images, text], structuredContent=structured)


def _functions(agent: AgentSession) -> dict[str, Callable[..., Any]]:
    """The typed function of each tool over ``agent``; each runs under the session's lock."""

    def run(tool: str, fn: Callable[[], Any], model: type[Any] | None = None) -> Any:
        """``fn()`` under the session's lock, its result checked against ``model`` (the tool's
        outputSchema): the text beside the structured result is then the same JSON."""
        try:
            with agent.lock:
                result = fn()
        except ToolError:
            raise
        except Exception as exc:  # a bug of the bench's: named, and the session goes on
            raise ToolError(f"{tool} failed: {type(exc).__name__}: {exc}") from None
        RESULT.set(result[1] if isinstance(result, tuple) else result)
        return model.model_validate(result) if model is not None else result

    def get_prompt() -> PromptResult:
        """The task, the persona, the input layers (name, kind, shape, dtype, scale, units) and the
        names to leave, with their kinds and the tool that leaves each. Call it first."""
        return run("get_prompt", agent.get_prompt, PromptResult)

    def list_layers() -> LayersResult:
        """Every layer you can see: the case's inputs and the layers you added (name, kind, role,
        shape, dtype, scale, units, axes, presentation, data-plane tensor id)."""
        return run("list_layers", agent.list_layers, LayersResult)

    def read_layer(
        name: LayerName,
        region: Annotated[
            list[Annotated[list[int], Field(min_length=2, max_length=2)]] | None,
            Field(description="[[start, stop], ...]: one pair per leading axis; default: the whole layer"),
        ] = None,
        encoding: Annotated[
            Encoding,
            Field(
                description="list: nested JSON lists (at most 262144 values); base64: the raw little-endian "
                "bytes in C order, with dtype and shape; npy: an .npy file written for you to open, its path "
                "returned (both at most 4194304 values)"
            ),
        ] = "list",
    ) -> ReadResult:
        """A layer, or a region of it, as numbers."""
        return run("read_layer", lambda: agent.read_layer(name, region, encoding), ReadResult)

    def snapshot(
        layer: Annotated[
            str | None, Field(description="one layer to draw; default: the view, inputs under your layers")
        ] = None,
        frame: Annotated[
            int | None,
            Field(description="that step of axis 0 of a time-lapse; default: the view's position (view_state)"),
        ] = None,
    ) -> Annotated[CallToolResult, SnapshotResult]:
        """A PNG of one layer, or of the view: the inputs with your layers drawn over them, each
        with its display (set_layer_display), at the view's position (set_dims; an axis with no
        step is max-projected). A tracks layer is drawn, in a frame, as each track's centroid in
        your labels and its path over the 5 frames before. Drawn from the session's layers only."""
        png, info = run("snapshot", lambda: agent.snapshot_view(layer, frame))
        return _picture(png, info, SnapshotResult)

    def add_layer(
        name: LayerName,
        kind: Annotated[AnswerKind, Field(description="the layer's kind")],
        data: Numbers = None,
        npy: Npy = None,
        like: Annotated[
            str | None,
            Field(description="the input layer whose grid (shape) it is drawn on; default: the one the case names"),
        ] = None,
    ) -> AddResult:
        """Add an answer layer from numbers (data) or from an .npy file in your workspace (npy).
        A labels or image layer has the shape of an input (like; by default the one the case
        names, else its first image), a time-lapse's included (T x Y x X), whatever its name:
        labels are whole numbers >= 0 (0: background). points and shapes are (N, D) coordinates.
        A tracks layer is a lineage table: (n, 4) whole numbers label, first frame, last frame,
        parent (0: none), as the Cell Tracking Challenge's res_track.txt."""
        return run("add_layer", lambda: agent.add_layer(name, kind, data, npy, like), AddResult)

    def update_layer(name: LayerName, data: Numbers = None, npy: Npy = None) -> UpdateResult:
        """Replace the data of a layer you added, from numbers (data) or an .npy file (npy); the
        same checks as add_layer."""
        return run("update_layer", lambda: agent.update_layer(name, data, npy), UpdateResult)

    def set_answer(
        value: Annotated[
            AnswerValue,
            Field(description="a JSON object with the fields get_prompt names, or a number for a scalar leaving"),
        ],
        name: Annotated[str, Field(description="the answer's name, as get_prompt lists it")] = "answer",
    ) -> AnswerResult:
        """Set a structured answer, checked against the case's answer schema (an error names the field)."""
        return run("set_answer", lambda: agent.set_answer(value, name), AnswerResult)

    def list_skills() -> SkillsResult:
        """The skills you may activate for this task, each with what it is for."""
        return run("list_skills", agent.list_skills, SkillsResult)

    def use_skill(name: Annotated[str, Field(description="a skill's name, as list_skills gives it")]) -> SkillResult:
        """Activate a skill: returns its instructions."""
        return run("use_skill", lambda: agent.use_skill(name), SkillResult)

    def submit(
        note: Annotated[str, Field(description="an optional note kept in the transcript", max_length=2000)] = "",
    ) -> SubmitResult:
        """End your turn. What you left (layers, answers) is what gets scored; nothing can change after."""
        return run("submit", lambda: agent.submit(note), SubmitResult)

    def view_state() -> ViewResult:
        """The view snapshot draws: each leading axis (time, z) with its size and the step shown
        (null: max-projected), and each layer's display (visible, opacity, colormap, contrast limits)."""
        return run("view_state", agent.view_state, ViewResult)

    def set_dims(
        axis: Axis,
        step: Annotated[
            int | None, Field(description="the step to show, from 0; null: max-project the axis (headless only)")
        ],
    ) -> ViewResult:
        """Show one step of a leading axis (a time point, a z plane) in later snapshots."""
        return run("set_dims", lambda: agent.set_dims(axis, step), ViewResult)

    def step_dims(
        axis: Axis,
        by: Annotated[int, Field(description="how many steps to move (negative: back); held at the ends")] = 1,
    ) -> ViewResult:
        """Move a leading axis by some steps (from 0 when it was max-projected)."""
        return run("step_dims", lambda: agent.step_dims(axis, by), ViewResult)

    def set_layer_display(
        name: LayerName,
        visible: Annotated[bool | None, Field(description="draw the layer or not")] = None,
        opacity: Annotated[float | None, Field(description="from 0 (transparent) to 1", ge=0, le=1)] = None,
        colormap: Annotated[Colormap | None, Field(description="an image layer's colormap")] = None,
        contrast_limits: Annotated[
            list[float] | None,
            Field(
                description="an image layer's [low, high]: low and below drawn dark, high and above bright",
                min_length=2,
                max_length=2,
            ),
        ] = None,
    ) -> LayerDisplay:
        """Change how one of the session's layers is drawn in snapshots; what is not given stays."""
        return run(
            "set_layer_display",
            lambda: agent.set_layer_display(
                name, visible=visible, opacity=opacity, colormap=colormap, contrast_limits=contrast_limits
            ),
            LayerDisplay,
        )

    def snapshot_frames(
        axis: Axis = 0,
        start: Annotated[int, Field(description="the first step", ge=0)] = 0,
        stop: Annotated[int | None, Field(description="the step to stop before; default: the axis' end")] = None,
        every: Annotated[int, Field(description="take every how many steps", ge=1)] = 1,
        layer: Annotated[str | None, Field(description="one layer to draw; default: the view")] = None,
    ) -> Annotated[CallToolResult, FramesResult]:
        """PNGs of several steps of a leading axis (a time-lapse's frames, a stack's z planes), the
        other axes at the view's position: at most 16 frames a call, each at most 512 pixels a side."""
        pngs, info = run("snapshot_frames", lambda: agent.snapshot_frames(axis, start, stop, every, layer))
        return _frames(pngs, info)

    fns = {f.__name__: f for f in (
        get_prompt, list_layers, read_layer, snapshot, add_layer, update_layer, set_answer, list_skills,
        use_skill, submit, view_state, set_dims, step_dims, set_layer_display, snapshot_frames,
    )}  # fmt: skip
    assert set(fns) == set(tool_names()), "every tool of the table has its function"
    return fns


def register(server: Any, agent: AgentSession, only: Collection[str] | None = None) -> list[str]:
    """Put ``agent``'s tools on ``server`` (a ``FastMCP``): all of :data:`TOOLS`, or those named in
    ``only``; returns the names served."""
    unknown = sorted(set(only or ()) - set(tool_names()))
    if unknown:
        raise ValueError(f"no tool named {unknown} (tools: {tool_names()})")
    fns = _functions(agent)
    served = []
    for spec in TOOLS:
        if only is not None and spec.name not in only:
            continue
        fn = fns[spec.name]
        server.tool(
            name=spec.name,
            description=inspect.cleandoc(fn.__doc__ or ""),
            annotations=ToolAnnotations(readOnlyHint=spec.read_only, destructiveHint=False, openWorldHint=False),
            structured_output=True,
        )(fn)
        served.append(spec.name)
    return served
