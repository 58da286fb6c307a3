"""The transcript of an agent's tool calls: ``transcript.json`` in the sample folder.

Each call keeps the tool's name, its arguments summarised (a long list or string is replaced by
a description: no arrays are kept), whether it succeeded, its error, a one-line summary of what
it returned, and when it started and how long it took. A ``trigger``-class case is graded from
the skills this record shows activated (``use_skill`` calls that succeeded), never from a file
the subject writes about itself.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from imagebench.records import Record

TRANSCRIPT = "transcript.json"
TRANSCRIPT_VERSION = 1
_MAX_TEXT = 200
_MAX_ITEMS = 16
#: calls a transcript records one by one; past them a call is only counted, by tool (``dropped``):
#: a subject calling a cheap tool in a loop for its whole time limit made hundreds of thousands
#: (about 650 bytes each in ``transcript.json``, more in the harness's memory and in the report)
MAX_RECORDED = 10_000


class ToolCall(Record):
    """One tool call as the harness saw it."""

    seq: int
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    ok: bool
    error: str | None = None
    result: str = ""
    started_s: float  # since the session was opened
    seconds: float


class Transcript(Record):
    """Every tool call of one agent session of one case, in order."""

    schema_version: Literal[1] = TRANSCRIPT_VERSION
    label: str
    client: str | None = None  # the MCP client's own name (its initialize request)
    route: str = ""  # "socket" (run --subject-mcp), "stdio", "http", "viewer"
    submitted: bool = False
    skills: list[str] = Field(default_factory=list)  # skills activated through use_skill, in order
    calls: list[ToolCall] = Field(default_factory=list)
    dropped: dict[str, int] = Field(default_factory=dict)  # calls past MAX_RECORDED, by tool: counted only
    dropped_errors: int = 0  # of those, the ones that failed

    def total(self) -> int:
        """Every call, recorded or only counted."""
        return len(self.calls) + sum(self.dropped.values())

    def add(self, call: ToolCall) -> None:
        """Record ``call``, or past :data:`MAX_RECORDED` count it."""
        if len(self.calls) < MAX_RECORDED:
            self.calls.append(call)
            return
        self.dropped[call.tool] = self.dropped.get(call.tool, 0) + 1
        self.dropped_errors += 0 if call.ok else 1

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for call in self.calls:
            out[call.tool] = out.get(call.tool, 0) + 1
        for tool, n in self.dropped.items():
            out[tool] = out.get(tool, 0) + n
        return out

    def errors(self) -> int:
        return sum(1 for c in self.calls if not c.ok) + self.dropped_errors


def summarise(value: Any, depth: int = 0) -> Any:
    """``value`` with every long list or string replaced by a short description (no arrays kept)."""
    if isinstance(value, str):
        return value if len(value) <= _MAX_TEXT else f"<text of {len(value)} characters: {value[:60]!r}...>"
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, dict):
        items = list(value.items())
        out = {str(k): summarise(v, depth + 1) for k, v in items[:_MAX_ITEMS]}
        if len(items) > _MAX_ITEMS:
            out["..."] = f"{len(items) - _MAX_ITEMS} more keys"
        return out
    if isinstance(value, (list, tuple)):
        n, shape = _count(value)
        if n > _MAX_ITEMS or depth > 3:
            return f"<nested list of {n} values{', shape ' + str(list(shape)) if shape else ''}>"
        return [summarise(v, depth + 1) for v in value]
    return f"<{type(value).__name__}>"


def _count(value: Any) -> tuple[int, tuple[int, ...] | None]:
    """How many scalars a nested list holds, and its shape when it is rectangular."""
    if not isinstance(value, (list, tuple)):
        return 1, ()
    total, shapes = 0, set()
    for v in value:
        n, s = _count(v)
        total += n
        shapes.add(s)
    if len(shapes) <= 1:
        inner = next(iter(shapes), ())
        return total, None if inner is None else (len(value), *inner)
    return total, None
