"""What each MCP tool returns, as pydantic models: the server publishes each one as the tool's
``outputSchema`` and returns it as ``structuredContent`` (with the same JSON as text, as the
protocol asks for clients that read only text).

Every model forbids fields it does not name, so a tool that returned something its schema does
not say fails its own test rather than reaching an agent. The parameter types an agent sends
(nested numbers, an answer's value) are here too: precise JSON Schema, no "anything".
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    model_serializer,
)
from pydantic_core import CoreSchema
from typing_extensions import TypeAliasType

__all__ = [
    "ANSWER_KINDS",
    "COLORMAPS",
    "ENCODINGS",
    "AddResult",
    "AnswerResult",
    "AnswerValue",
    "DimsAxis",
    "FramesResult",
    "LayerDisplay",
    "LayerInfo",
    "LayersResult",
    "Leaving",
    "NestedNumbers",
    "PromptResult",
    "ReadResult",
    "SkillResult",
    "SkillsResult",
    "SnapshotResult",
    "SubmitResult",
    "UpdateResult",
    "ViewResult",
]

AnswerKind = Literal["labels", "image", "points", "shapes", "tracks"]
Encoding = Literal["list", "base64", "npy"]
#: the colormaps a snapshot draws an image layer with (napari names the same ones)
Colormap = Literal["gray", "viridis", "magma", "inferno", "red", "green", "blue", "cyan", "magenta", "yellow"]
ANSWER_KINDS: tuple[str, ...] = AnswerKind.__args__  # type: ignore[attr-defined]
ENCODINGS: tuple[str, ...] = Encoding.__args__  # type: ignore[attr-defined]
COLORMAPS: tuple[str, ...] = Colormap.__args__  # type: ignore[attr-defined]

#: a number, or a (nested) list of them: an array as JSON lists, row by row (C order)
NestedNumbers = TypeAliasType("NestedNumbers", Union[int, float, list["NestedNumbers"]])  # noqa: UP007
#: a structured answer's value: a JSON value (object, list, string, number, true/false, null)
AnswerValue = TypeAliasType(
    "AnswerValue",
    Union[dict[str, "AnswerValue"], list["AnswerValue"], str, int, float, bool, None],  # noqa: UP007
)


_DATA_SCHEMA = {
    "anyOf": [
        {
            "type": "array",
            "items": {"anyOf": [{"type": "array"}, {"type": "number"}]},
            "description": "numbers, nested one list per axis",
        },
        {"type": "string", "description": "base64 of the raw bytes"},
        {"type": "null"},
    ]
}


class _Result(BaseModel):
    """A tool's result. Its published schema carries no ``title`` (pydantic's, the field's name
    again): a client that checks the schema itself on every call, as the MCP SDK's does against the
    JSON Schema meta-schema, pays for every keyword (``benchmarks/bench_mcp.py``)."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        schema = handler.resolve_ref_schema(handler(core_schema))
        _untitled(schema)
        return schema


class _Sparse(_Result):
    """A result whose fields left at None are absent from it, never ``null``; its schema says so
    (the field's own type, not an ``anyOf`` with null), so a client checks fewer branches."""

    @model_serializer(mode="wrap")
    def _absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        schema = super().__get_pydantic_json_schema__(core_schema, handler)
        required = set(schema.get("required", ()))
        for name, prop in schema.get("properties", {}).items():
            if name not in required:
                _not_null(prop)
        return schema


def _untitled(schema: Any) -> None:
    if isinstance(schema, dict):
        schema.pop("title", None)
        for key, value in schema.items():
            if key != "properties":
                _untitled(value)
        for value in schema.get("properties", {}).values():
            _untitled(value)
    elif isinstance(schema, list):
        for value in schema:
            _untitled(value)


def _not_null(prop: dict[str, Any]) -> None:
    """An optional field's schema without its ``null``: the one other branch in its place."""
    if prop.get("default", 0) is None:
        del prop["default"]
    branches = prop.get("anyOf")
    if branches is None:
        return
    kept = [b for b in branches if b != {"type": "null"}]
    if len(kept) == 1:
        del prop["anyOf"]
        prop.update({k: v for k, v in kept[0].items() if k not in prop})
    else:
        prop["anyOf"] = kept


class LayerInfo(_Result):
    """A layer the agent can see."""

    name: str = Field(description="the layer's name, as the tools take it")
    kind: str = Field(description="image, labels, points, shapes or tracks")
    role: Literal["input", "answer"] = Field(description="input: the case's data; answer: a layer you added")
    shape: list[int] = Field(default_factory=list, description="the array's shape")
    dtype: str = Field(default="", description="the array's numpy dtype")
    presentation: str = Field(description="array (read with read_layer) or tensor (on the data plane)")
    scale: list[float] | None = Field(default=None, description="the physical size of a pixel per axis")
    units: str | None = Field(default=None, description="the unit of scale")
    axes: list[str] | None = Field(default=None, description="the axes' names (e.g. t, y, x)")
    like: str | None = Field(default=None, description="an answer layer's grid: the input it is drawn on")
    tensor_id: str | None = Field(default=None, description="a tensor layer's data-plane id")


class Leaving(_Result):
    """One name the case asks the agent to leave."""

    name: str
    what: Literal["array", "scalar", "json"] = Field(description="array: a layer; scalar: a number; json: an object")
    description: str = ""
    kind: str | None = Field(default=None, description="an array leaving's layer kind")
    like: str | None = Field(default=None, description="the input layer an array leaving is drawn on")
    how: str = Field(description="the tool call that leaves it")
    fields: dict[str, str] | None = Field(default=None, description="a structured answer's fields and comparators")


class PromptResult(_Result):
    label: str = Field(description="the case, <namespace>/<case_id>")
    task: str = Field(description="the task, as every subject reads it")
    persona: str
    inputs: list[LayerInfo]
    leave: list[Leaving] = Field(description="what to leave, and how")
    skills: list[str] = Field(description="the skills list_skills offers")
    note: str


class LayersResult(_Result):
    layers: list[LayerInfo]


class ReadResult(_Sparse):
    name: str
    shape: list[int] = Field(description="the shape of what was read")
    dtype: str = Field(description="numpy dtype (base64: little-endian, e.g. '<f4')")
    region: list[list[int]] = Field(description="[start, stop] per axis of what was read")
    # Checked in full here (pydantic); published with its first level only, so that a client's
    # JSON Schema validation of 262144 values costs what reading them does.
    data: Annotated[NestedNumbers | str | None, WithJsonSchema(_DATA_SCHEMA)] = Field(
        default=None, description="list: the numbers as nested lists; base64: the raw bytes; npy: absent"
    )
    order: Literal["C"] | None = Field(default=None, description="base64: the bytes' order")
    path: str | None = Field(default=None, description="npy: the .npy file written, as you can open it")


class AddResult(_Result):
    added: LayerInfo
    leaving: bool = Field(description="true when the layer is one of the names the case asks for")


class UpdateResult(_Result):
    updated: LayerInfo


class AnswerResult(_Result):
    set: str = Field(description="the answer's name")
    warnings: list[str] | None = Field(default=None, description="fields the answer schema does not name")


class Skill(_Result):
    name: str
    about: str = Field(description="what the skill is for")


class SkillsResult(_Result):
    skills: list[Skill]


class SkillResult(_Result):
    skill: str
    activated: bool
    instructions: str


class SubmitResult(_Result):
    submitted: bool
    left: list[str] = Field(description="the names you left")
    missing: list[str] = Field(description="the names the case asks for that you did not leave")


class SnapshotResult(_Result):
    """What a snapshot's PNG (the image content beside it) shows."""

    width: int
    height: int
    layers: list[str] = Field(description="the layers drawn, bottom first")
    position: dict[str, int] = Field(
        description="the step of each non-displayed axis drawn (axis index as text); an axis not named is max-projected"
    )
    downsampled: int = Field(description="1, or every how many pixels were drawn (a large layer)")


class Frame(_Result):
    step: int = Field(description="the frame's index along the axis")
    width: int
    height: int


class FramesResult(_Result):
    """The frames' PNGs are the image contents beside this, in the order of ``frames``."""

    axis: int
    frames: list[Frame]
    layers: list[str] = Field(description="the layers drawn, bottom first")
    downsampled: int = Field(description="1, or every how many pixels were drawn")
    truncated: bool = Field(description="true when the range asked for held more frames than one call returns")


class DimsAxis(_Result):
    axis: int
    label: str | None = Field(default=None, description="the axis' name (t, z, ...) when the case names it")
    size: int = Field(description="how many steps the axis has")
    step: int | None = Field(description="the step shown, or null: max-projected")


class LayerDisplay(_Result):
    name: str
    visible: bool
    opacity: float = Field(ge=0, le=1)
    colormap: str | None = Field(default=None, description="an image layer's colormap")
    contrast_limits: list[float] | None = Field(
        default=None, description="an image layer's [low, high]; null: the 1st and 99.5th percentiles of what is drawn"
    )


class ViewResult(_Result):
    """The view a snapshot draws: the axes that are not displayed and each layer's display."""

    displayed: int = Field(description="how many trailing axes are displayed (2: y and x)")
    dims: list[DimsAxis]
    layers: list[LayerDisplay]
    bound: Literal["session", "viewer"] = Field(
        description="session: this session's own view; viewer: the napari viewer the case is served from"
    )
