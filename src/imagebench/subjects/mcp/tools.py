"""The tools an agent works one case with, over what the subject is shown and nothing else.
Long because each tool's checks and messages sit beside it; the transports are in server.py.

:class:`AgentSession` is built from a :class:`~imagebench.case.session.Session` (the fixture's data,
never its truth) and a :class:`CaseView` (the public part of the case: prompt, persona, layers,
leavings, the answer's field names; never its fixture spec, verifier or contract's ground truth).
It holds what the agent leaves: answer layers (``add_layer``/``update_layer``) and structured
answers (``set_answer``). Every tool validates its arguments and raises :class:`ToolError` with a
message naming the layer, field or limit at fault; the server returns it as a tool error and the
session goes on. :meth:`AgentSession.call` runs a tool and records it in the transcript.

Paths: the agent names ``.npy`` files relative to its workspace (or under the workspace's path as
it sees it, ``/workspace`` in the sandbox); they are read beneath the workspace's descriptor
without following any link (:class:`imagebench.sandbox.workspace.Workspace`), so a path that leaves the
workspace, a link or anything but a regular file is refused, and no message names a path of the
harness, only the one the agent gave. ``read_layer(encoding="npy")`` writes into the harness's
own folder (:class:`imagebench.subjects.mcp.folder.McpFolder`), never into the workspace.
"""

from __future__ import annotations

import base64
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from imagebench.sandbox.access import tool_refusal
from imagebench.subjects.mcp.errors import ToolError
from imagebench.subjects.mcp.render import SNAPSHOT_MAX_SIDE
from imagebench.subjects.mcp.results import ANSWER_KINDS, ENCODINGS
from imagebench.subjects.mcp.transcript import ToolCall, Transcript, summarise
from imagebench.subjects.mcp.view import SessionView

if TYPE_CHECKING:
    from imagebench.case.model import Case, Collect, Layer
    from imagebench.case.session import Session
    from imagebench.sandbox.access import Access
    from imagebench.sandbox.workspace import Workspace
    from imagebench.subjects.mcp.folder import McpFolder
    from imagebench.subjects.mcp.view import ViewBackend

__all__ = ["MAX_LIST_VALUES", "SNAPSHOT_MAX_SIDE", "AgentLayer", "AgentSession", "CaseView", "ToolError"]

#: values one read_layer returns at most as a JSON list, and as base64 or an .npy file
MAX_LIST_VALUES = 512 * 512
MAX_READ_VALUES = 4 * 1024 * 1024
#: values one add_layer/update_layer takes at most from a JSON list (an .npy file may hold more)
MAX_LIST_INPUT = 1024 * 1024
MAX_LAYER_VALUES = 64 * 1024 * 1024
#: what the harness keeps of an agent's layers: bytes of one layer, bytes of all of them, how many
MAX_LAYER_BYTES = 512 * 1024 * 1024
MAX_AGENT_BYTES = 1024 * 1024 * 1024
MAX_AGENT_LAYERS = 64
MAX_NAME_CHARS = 128
#: rows a tracks layer (a lineage table) may hold
MAX_TRACK_ROWS = 100_000
TRACE_NAME = "trace"  # a trigger case's leaving (imagebench.bundle.grading.TRACE_NAME)
SKILL_EVENT = "skill"  # imagebench.case.skills.SKILL_EVENT

# What each comparator of an answer field expects, as a check and its words (the rest: any JSON).
_FIELD_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "integer_equal": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "boolean_equal": (lambda v: isinstance(v, (bool, str)), "true or false"),
    "vector_abs_tolerance": (
        lambda v: isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v),
        "a list of numbers",
    ),
    "circular_tolerance": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "absolute_tolerance": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "relative_tolerance": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "voxel_member_of_set": (
        lambda v: isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
        "a list of integer voxel coordinates",
    ),
}


# --------------------------------------------------------------------------- what the agent may know of a case


@dataclass(frozen=True)
class CaseView:
    """The public part of a case: what a subject reads anyway (``imagebench show`` prints it)."""

    label: str
    prompt: str
    persona: str
    layers: tuple[Layer, ...]
    collect: tuple[Collect, ...]
    # answer field -> comparator name (TaskContract.public_fields: no gold, no config)
    answer_fields: Mapping[str, str] | None = None
    # skill id -> what it is for: the skills an agent may activate (use_skill)
    skills: Mapping[str, str] = field(default_factory=dict)
    # skill id -> its instructions (the body of its SKILL.md): what use_skill returns
    instructions: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, case: Case) -> CaseView:
        from imagebench.case.session import case_prompt
        from imagebench.case.skills import offered_skills, skill_instructions
        from imagebench.scoring.contract import load_contract

        fields: dict[str, str] | None = None
        if case.answer is not None:
            contract, _why = load_contract(case.answer)
            if contract is not None:
                fields = dict(contract.public_fields())
        return cls(
            label=case.label,
            prompt=case_prompt(case),
            persona=case.persona,
            layers=tuple(case.layers),
            collect=tuple(case.collect),
            answer_fields=fields,
            skills=offered_skills(case),
            instructions=skill_instructions(case),
        )

    def leaving(self, name: str) -> Collect | None:
        return next((c for c in self.collect if c.name == name), None)

    @property
    def trace_by_harness(self) -> bool:
        """A trigger case: its ``trace`` is recorded by the harness (the skills the transcript shows
        activated through use_skill), never what the agent says."""
        trace = self.leaving(TRACE_NAME)
        return trace is not None and trace.recorded


@dataclass
class AgentLayer:
    """A layer the agent can see: an input of the case, or one it left."""

    name: str
    kind: str
    data: Any  # a numpy array; for a tensor input, its data-plane id (str)
    role: str  # "input" or "answer"
    layer: Layer | None = None  # an input's declaration (scale, units, presentation)
    like: str | None = None  # an answer's grid: the input it is drawn on
    version: int = 0


# --------------------------------------------------------------------------- the session


class AgentSession:
    """One agent's session of one case: the tools, the leavings, the transcript.

    ``workspace`` is the agent's folder on this machine (for ``.npy`` files it names; a
    :class:`~imagebench.sandbox.workspace.Workspace` or the path of a folder the harness made),
    ``workspace_alias`` the path it has inside the sandbox (``/workspace``); ``reads`` the
    harness's folder ``npy`` reads go to, seen by the agent at ``reads_alias``. ``on_layer(layer)`` is
    told of every answer layer added or updated (the panel puts it on the viewer), ``on_call(call)``
    of every finished tool call (the panel's log).
    """

    def __init__(
        self,
        view: CaseView,
        session: Session,
        *,
        workspace: Path | Workspace | None = None,
        workspace_alias: str | None = None,
        reads: McpFolder | None = None,
        reads_alias: str | None = None,
        route: str = "",
        on_layer: Callable[[AgentLayer], None] | None = None,
        on_call: Callable[[ToolCall], None] | None = None,
        display: ViewBackend | None = None,
        access: Access | None = None,
    ) -> None:
        self.view = view
        #: the viewer tools' view: the session's own, or (served from the panel) the live viewer's
        self.display: ViewBackend = display if display is not None else SessionView()
        self.access = access  # the run's access setting: which tools are served (imagebench.sandbox.access)
        self._client = session.client
        from imagebench.sandbox.workspace import Workspace

        if workspace is not None and not isinstance(workspace, Workspace):
            workspace = Workspace(Path(workspace))
        self.workspace: Workspace | None = workspace
        self.workspace_alias = workspace_alias
        self.reads, self.reads_alias = reads, reads_alias
        self.layers: dict[str, AgentLayer] = {}
        for name, sl in session.layers.items():
            self.layers[name] = AgentLayer(name, sl.layer.kind, sl.data, "input", layer=sl.layer)
        self.answers: dict[str, Any] = {}
        self.transcript = Transcript(label=view.label, route=route)
        self.on_layer = on_layer
        self.on_call = on_call
        self._lock = threading.RLock()
        self._t0 = time.perf_counter()
        self._reads = 0
        self._whole: dict[str, str] = {}  # an input layer read whole as npy: the file handed out
        self.submitted = threading.Event()

    # ---------------------------------------------------------------- recording

    @property
    def client_name(self) -> str | None:
        return self.transcript.client

    def set_client(self, name: str | None) -> None:
        if name and not self.transcript.client:
            self.transcript.client = str(name)[:80]

    def call(self, tool: str, arguments: Mapping[str, Any], fn: Callable[[], Any]) -> Any:
        """Run one tool, record it (name, arguments summarised, outcome, timing) and return its result.

        A :class:`ToolError` is recorded and raised again; any other exception becomes a
        ToolError naming its type (the session goes on either way)."""
        start = time.perf_counter()
        error: str | None = None
        result: Any = None
        try:
            refused = tool_refusal(self.access, tool)
            if refused is not None:  # a call that reached a tool the setting does not serve
                raise ToolError(refused)
            with self._lock:
                result = fn()
            return result
        except ToolError as exc:
            error = str(exc)
            raise
        except Exception as exc:
            error = f"{tool} failed: {type(exc).__name__}: {exc}"
            raise ToolError(error) from None
        finally:
            self.record(tool, arguments, start, error=error, result=result)

    def record(
        self, tool: str, arguments: Mapping[str, Any], start: float, *, error: str | None, result: Any = None
    ) -> ToolCall:
        """Record one call that started at ``start`` (``time.perf_counter()``) and ended now: the
        server records here a call refused before its tool ran (an argument of the wrong type, a
        tool this session does not serve)."""
        end = time.perf_counter()
        args = {str(k): summarise(v) for k, v in arguments.items() if v is not None}
        record = ToolCall(
            seq=self.transcript.total() + 1,
            tool=str(tool)[:MAX_NAME_CHARS],
            arguments=args,
            ok=error is None,
            error=error,
            result=_result_summary(result) if error is None else "",
            started_s=round(start - self._t0, 6),
            seconds=round(end - start, 6),
        )
        self.transcript.add(record)
        if self.on_call is not None:
            try:
                self.on_call(record)
            except Exception:  # a viewer's log must never break the session
                pass
        return record

    @property
    def lock(self) -> Any:
        """Held while a tool runs: one call at a time changes the session."""
        return self._lock

    @property
    def attempted(self) -> bool:
        """The client called a tool of this session, or left something through one (a bare
        ``tools/list`` probe does neither): a session never attempted is ``not-attempted``, never
        a scored ``no-result``."""
        return bool(self.transcript.calls or self.answers) or any(x.role == "answer" for x in self.layers.values())

    # ---------------------------------------------------------------- the tools

    def get_prompt(self) -> dict[str, Any]:
        """The task, the persona, the inputs and the names to leave, with their kinds and how."""
        leave = []
        for c in self.view.collect:
            item: dict[str, Any] = {"name": c.name, "what": c.what, "description": c.description}
            if c.what == "array":
                item["kind"] = c.layer or "image"
                if c.like:
                    item["like"] = c.like
                item["how"] = f"add_layer(name={c.name!r}, kind={item['kind']!r}, data=... or npy=...)"
            elif c.recorded:
                item["how"] = "recorded by the harness from your tool calls (use_skill); you cannot set it"
            else:
                item["how"] = f"set_answer(name={c.name!r}, value=...)"
                if c.name == "answer" and self.view.answer_fields:
                    item["fields"] = dict(self.view.answer_fields)
            leave.append(item)
        return {
            "label": self.view.label,
            "task": self.view.prompt,
            "persona": self.view.persona,
            "inputs": [self._info(layer) for layer in self.layers.values() if layer.role == "input"],
            "leave": leave,
            "skills": sorted(self.view.skills),
            "note": "Leave each name through the tools (add_layer, set_answer), then call submit. "
            "What you left when you submit is what gets scored.",
        }

    def list_layers(self) -> dict[str, Any]:
        return {"layers": [self._info(layer) for layer in self.layers.values()]}

    def read_layer(self, name: str, region: Any = None, encoding: str = "list") -> dict[str, Any]:
        layer = self._layer(name)
        if encoding not in ENCODINGS:
            raise ToolError(f"encoding {encoding!r} is not one of {list(ENCODINGS)}")
        arr = self._array(layer)
        index, box = _region(region, arr.shape, name)
        n = int(np.prod([b - a for a, b in box])) if box else 1
        limit = MAX_LIST_VALUES if encoding == "list" else MAX_READ_VALUES
        if n > limit:
            raise ToolError(
                f"read_layer {name!r}: the region holds {n} values, more than the limit of {limit} for encoding "
                f"{encoding!r}; ask for a region (region=[[start, stop], ...] per axis of shape {list(arr.shape)})"
                + (" or use encoding='base64' or 'npy'" if encoding == "list" and n <= MAX_READ_VALUES else "")
            )
        part = np.ascontiguousarray(arr[index])
        out: dict[str, Any] = {"name": name, "shape": list(part.shape), "dtype": str(part.dtype), "region": box}
        if encoding == "list":
            out["data"] = part.tolist()
        elif encoding == "base64":
            le = part.astype(part.dtype.newbyteorder("<"), copy=False)
            out["dtype"] = le.dtype.str
            out["data"] = base64.b64encode(le.tobytes()).decode("ascii")
            out["order"] = "C"
        else:
            # An input layer never changes: read whole, its file is written once and named again.
            whole = layer.role == "input" and box == [[0, s] for s in arr.shape]
            out["path"] = self._whole.get(name) if whole else None
            if out["path"] is None:
                out["path"] = self._write_read(name, part, keep=whole)
                if whole:
                    self._whole[name] = out["path"]
        return out

    def snapshot(self, layer: str | None = None, frame: int | None = None) -> bytes:
        """A PNG of one layer, or of the view (the inputs with the agent's layers over them), at the
        view's position; ``frame``: that step of axis 0 of a time-lapse, where a tracks layer is
        drawn over the agent's labels (:func:`imagebench.subjects.mcp.view.picture`)."""
        return self.snapshot_view(layer, frame)[0]

    def snapshot_view(self, layer: str | None = None, frame: int | None = None) -> tuple[bytes, dict[str, Any]]:
        """:meth:`snapshot` and what it shows (size, layers drawn, position)."""
        from imagebench.subjects.mcp.view import picture

        return picture(self, layer, frame)

    # ---------------------------------------------------------------- the viewer tools (imagebench.subjects.mcp.view)

    def view_state(self) -> dict[str, Any]:
        from imagebench.subjects.mcp.view import view_result

        return view_result(self)

    def set_dims(self, axis: int | str, step: int | None) -> dict[str, Any]:
        from imagebench.subjects.mcp.view import set_step

        return set_step(self, axis, step)

    def step_dims(self, axis: int | str, by: int = 1) -> dict[str, Any]:
        from imagebench.subjects.mcp.view import step_by

        return step_by(self, axis, by)

    def set_layer_display(self, name: str, **display: Any) -> dict[str, Any]:
        from imagebench.subjects.mcp.view import set_display

        return set_display(self, name, **display)

    def snapshot_frames(
        self, axis: int | str = 0, start: int = 0, stop: int | None = None, every: int = 1, layer: str | None = None
    ) -> tuple[list[bytes], dict[str, Any]]:
        from imagebench.subjects.mcp.view import frames

        return frames(self, axis, start, stop, every, layer)

    def add_layer(
        self, name: str, kind: str, data: Any = None, npy: str | None = None, like: str | None = None
    ) -> dict[str, Any]:
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
            raise ToolError(f"a layer's name must be text of 1 to {MAX_NAME_CHARS} characters, got {_short(name)}")
        if name in self.layers and self.layers[name].role == "input":
            raise ToolError(f"{name!r} is an input layer of the case; leave your answer under another name")
        if name in self.layers:
            raise ToolError(f"layer {name!r} exists already; use update_layer to change it")
        if kind not in ANSWER_KINDS:
            raise ToolError(f"kind {kind!r} is not one of {list(ANSWER_KINDS)}")
        leaving = self.view.leaving(name)
        if leaving is not None and leaving.what != "array":
            raise ToolError(f"{name!r} is a {leaving.what} leaving: give it with set_answer(name={name!r}, value=...)")
        if leaving is not None and leaving.layer and kind != leaving.layer:
            raise ToolError(f"{name!r} must be a {leaving.layer} layer, not {kind}")
        like = like or (leaving.like if leaving is not None else None)
        if like is not None and (like not in self.layers or self.layers[like].role != "input"):
            raise ToolError(f"like={like!r} names no input layer (inputs: {self._inputs()})")
        if like is None and kind in ("labels", "image"):
            like = self._default_grid(name, kind)
        if sum(1 for x in self.layers.values() if x.role == "answer") >= MAX_AGENT_LAYERS:
            raise ToolError(f"you have {MAX_AGENT_LAYERS} layers, the most a session keeps; update one instead")
        arr = self._checked(name, kind, self._data(name, data, npy), like)
        self._check_held(name, arr, replacing=None)
        self._check_open()
        added = AgentLayer(name, kind, arr, "answer", like=like, version=1)
        self.layers[name] = added
        self._tell(added)
        return {"added": self._info(added), "leaving": leaving is not None}

    def update_layer(self, name: str, data: Any = None, npy: str | None = None) -> dict[str, Any]:
        layer = self._layer(name)
        if layer.role == "input":
            raise ToolError(f"{name!r} is an input layer of the case; it cannot be changed")
        arr = self._checked(name, layer.kind, self._data(name, data, npy), layer.like)
        self._check_held(name, arr, replacing=layer)
        self._check_open()
        layer.data, layer.version = arr, layer.version + 1
        self._tell(layer)
        return {"updated": self._info(layer)}

    def set_answer(self, value: Any, name: str = "answer") -> dict[str, Any]:
        leaving = self.view.leaving(name)
        if leaving is None:
            names = [c.name for c in self.view.collect if c.what != "array"]
            raise ToolError(f"the case asks for no answer named {name!r} (answers: {names})")
        if leaving.recorded:
            raise ToolError(f"{name!r} is recorded by the harness from your tool calls (use_skill); it cannot be set")
        if leaving.what == "array":
            raise ToolError(f"{name!r} is an array leaving: give it with add_layer(name={name!r}, ...)")
        if leaving.what == "scalar":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ToolError(f"{name!r} must be a finite number, got {_short(value)}")
            checked: Any = value
            warnings: list[str] = []
        else:
            checked, warnings = self._check_answer(name, value)
        self._check_open()
        self.answers[name] = checked
        out: dict[str, Any] = {"set": name}
        if warnings:
            out["warnings"] = warnings
        return out

    def list_skills(self) -> dict[str, Any]:
        return {"skills": [{"name": k, "about": v} for k, v in sorted(self.view.skills.items())]}

    def use_skill(self, name: str) -> dict[str, Any]:
        if name not in self.view.skills:
            raise ToolError(f"no skill named {name!r} (skills: {sorted(self.view.skills)})")
        self._check_open()  # an activation after submit would change what was scored
        if name not in self.transcript.skills:
            self.transcript.skills.append(name)
        return {
            "skill": name,
            "activated": True,
            "instructions": self.view.instructions.get(name) or self.view.skills[name],
        }

    def submit(self, note: str = "") -> dict[str, Any]:
        self._check_open()
        self.transcript.submitted = True
        self.submitted.set()
        left = sorted(self.leavings())
        missing = [c.name for c in self.view.collect if c.name not in left]
        return {"submitted": True, "left": left, "missing": missing}

    # ---------------------------------------------------------------- what was left

    def leavings(self) -> dict[str, Any]:
        """Each leaving of the case the agent left through the tools. A recorded leaving (a trigger
        case's ``trace``) is never among them: the harness keeps it (:meth:`apply_to`)."""
        out: dict[str, Any] = {}
        for c in self.view.collect:
            if c.recorded:
                continue
            if c.name in self.answers:
                out[c.name] = self.answers[c.name]
            elif c.name in self.layers and self.layers[c.name].role == "answer":
                out[c.name] = self.layers[c.name].data
        return out

    def apply_to(self, session: Session) -> None:
        """Bind what the agent left in ``session.namespace`` (over any file it wrote to outputs/).
        A trigger case's activations go into the session's notes as the harness observed them
        (:func:`imagebench.case.skills.note_observed`, channel ``mcp``: the transcript's
        ``use_skill`` calls), never into the namespace."""
        from imagebench.case.skills import note_observed

        left = self.leavings()
        for c in self.view.collect:
            if c.name in left:
                session.namespace[c.name] = left[c.name]
                session.notes.get("why_not", {}).pop(c.name, None)
                if c.name in session.notes.get("unreadable", []):
                    session.notes["unreadable"].remove(c.name)
        if self.view.trace_by_harness:
            note_observed(session.notes, "mcp", list(self.transcript.skills))

    # ---------------------------------------------------------------- helpers

    def _check_held(self, name: str, arr: np.ndarray, *, replacing: AgentLayer | None) -> None:
        """The harness holds an agent's layers in its own memory: one layer and all of them are capped."""
        if arr.nbytes > MAX_LAYER_BYTES:
            raise ToolError(
                f"layer {name!r} is {arr.nbytes} bytes, more than the limit of {MAX_LAYER_BYTES} for one layer"
            )
        held = sum(np.asarray(x.data).nbytes for x in self.layers.values() if x.role == "answer" and x is not replacing)
        if held + arr.nbytes > MAX_AGENT_BYTES:
            raise ToolError(
                f"layer {name!r} would bring your layers to {held + arr.nbytes} bytes, more than the {MAX_AGENT_BYTES} a "
                "session keeps; update a layer you no longer need with a small array instead"
            )

    def _check_open(self) -> None:
        if self.submitted.is_set():
            raise ToolError("the turn was submitted; nothing can be changed after submit")

    def _default_grid(self, name: str, kind: str) -> str | None:
        """The input a labels or image layer is drawn on when neither ``like`` nor the case names
        one, whatever its name: the first array leaving's grid, else the first image or labels
        input (a scratch layer has the shape of the case's data, as every layer the case asks for)."""
        named = next((c.like for c in self.view.collect if c.what == "array" and c.like in self.layers), None)
        if named is not None:
            return named
        return next((n for n, x in self.layers.items() if x.role == "input" and x.kind in ("image", "labels")), None)

    def _inputs(self) -> list[str]:
        return [n for n, x in self.layers.items() if x.role == "input"]

    def layer_named(self, name: Any) -> AgentLayer:
        """The session's layer named ``name`` (an input or the agent's), else a ToolError listing them."""
        return self._layer(name)

    def array(self, layer: AgentLayer) -> np.ndarray:
        """``layer``'s array (a tensor input read from the data plane)."""
        return self._array(layer)

    def layer_info(self, layer: AgentLayer) -> dict[str, Any]:
        return self._info(layer)

    def _layer(self, name: Any) -> AgentLayer:
        if not isinstance(name, str) or name not in self.layers:
            raise ToolError(f"no layer named {_short(name)} (layers: {list(self.layers)})")
        return self.layers[name]

    def _array(self, layer: AgentLayer) -> np.ndarray:
        if isinstance(layer.data, str):  # a tensor input: read it from the data plane
            if self._client is None:
                raise ToolError(f"layer {layer.name!r} lives on the data plane, which this session cannot reach")
            return np.asarray(self._client.get(layer.data))
        return np.asarray(layer.data)

    def _info(self, layer: AgentLayer) -> dict[str, Any]:
        out: dict[str, Any] = {"name": layer.name, "kind": layer.kind, "role": layer.role}
        decl = layer.layer
        if isinstance(layer.data, str):
            out["tensor_id"] = layer.data
            out["presentation"] = "tensor"
            try:
                desc = self._client.describe(layer.data) if self._client is not None else {}
                out["shape"], out["dtype"] = list(desc.get("shape", [])), str(desc.get("dtype", ""))
            except Exception:
                pass
        else:
            arr = np.asarray(layer.data)
            out["shape"], out["dtype"] = list(arr.shape), str(arr.dtype)
            out["presentation"] = decl.presentation if decl is not None else "array"
        like = self.layers.get(layer.like) if layer.like else None
        src = decl or (like.layer if like is not None else None)
        out["scale"] = list(src.scale) if src is not None and src.scale else None
        out["units"] = src.units if src is not None else None
        if decl is not None and decl.dim_labels:
            out["axes"] = list(decl.dim_labels)
        if layer.like:
            out["like"] = layer.like
        return out

    def _relative(self, given: str) -> str:
        """``given`` (relative, or under the workspace as the agent sees it) relative to the workspace."""
        if self.workspace is None:
            raise ToolError("this session has no workspace: give the data as numbers (data=...)")
        if not isinstance(given, str) or not given.endswith(".npy"):
            raise ToolError(f"npy must name an .npy file in your workspace, got {_short(given)}")
        rel = given
        alias = (self.workspace_alias or "").rstrip("/")
        root = str(self.workspace.root)
        if alias and (given == alias or given.startswith(alias + "/")):
            rel = given[len(alias) :]
        elif given.startswith(root + "/"):
            rel = given[len(root) :]
        elif os.path.isabs(given):
            raise ToolError(f"npy {given!r} is outside your workspace; name a file in it (e.g. outputs/x.npy)")
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            raise ToolError(f"npy {given!r} is outside your workspace; name a file in it (e.g. outputs/x.npy)")
        return "/".join(parts)

    def _data(self, name: str, data: Any, npy: str | None) -> np.ndarray:
        if (data is None) == (npy is None):
            raise ToolError(
                f"layer {name!r}: give exactly one of data (numbers) or npy (an .npy file in your workspace)"
            )
        if npy is not None:
            from imagebench.sandbox.workspace import NPY_HEADER_MAX, Refused

            rel = self._relative(npy)
            assert self.workspace is not None
            try:  # beneath the workspace's descriptor, no link followed, read from the fd it checked
                arr = self.workspace.read_array(rel, cap=MAX_LAYER_BYTES + NPY_HEADER_MAX)
            except FileNotFoundError:
                raise ToolError(f"npy {npy!r}: no such file in your workspace") from None
            except Refused as exc:
                raise ToolError(f"npy {npy!r} refused: {exc}") from None
            except OSError as exc:
                raise ToolError(f"npy {npy!r} could not be read: {exc.strerror or exc}") from None
            if arr.size > MAX_LAYER_VALUES:
                raise ToolError(f"npy {npy!r} holds {arr.size} values, more than the limit of {MAX_LAYER_VALUES}")
            return arr
        n, _ = _nested_size(data)
        if n > MAX_LIST_INPUT:
            raise ToolError(
                f"layer {name!r}: data holds {n} numbers, more than the limit of {MAX_LIST_INPUT} for a JSON list; "
                "save it as .npy in your workspace and pass npy=..."
            )
        try:
            arr = np.asarray(data)
        except Exception as exc:
            raise ToolError(f"layer {name!r}: data is not a rectangular array of numbers ({exc})") from None
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise ToolError(f"layer {name!r}: data must be a rectangular nested list of numbers, got dtype {arr.dtype}")
        return arr

    def _checked(self, name: str, kind: str, arr: np.ndarray, like: str | None) -> np.ndarray:
        # the input's shape only (a tensor input's from the data plane's description, never its pixels)
        ref = _Grid(tuple(int(n) for n in self._info(self.layers[like]).get("shape", []))) if like is not None else None
        if kind in ("labels", "image"):
            if ref is not None and arr.shape != ref.shape:
                raise ToolError(
                    f"layer {name!r}: shape {list(arr.shape)} differs from its input {like!r}, shape {list(ref.shape)}"
                )
            if arr.ndim < 2:
                raise ToolError(
                    f"layer {name!r}: a {kind} layer needs at least 2 dimensions, got shape {list(arr.shape)}"
                )
            if kind == "labels":
                if arr.dtype.kind == "f":
                    if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                        raise ToolError(f"layer {name!r}: labels must be whole numbers")
                    arr = arr.astype(np.int64)
                if arr.dtype.kind == "b":
                    arr = arr.astype(np.int32)
                if arr.size and int(arr.min()) < 0:
                    raise ToolError(f"layer {name!r}: labels must be >= 0 (0 = background), found {int(arr.min())}")
                arr = arr.astype(np.int32) if arr.size == 0 or int(arr.max()) < 2**31 else arr.astype(np.int64)
            return arr
        if kind == "tracks":
            return _lineage_table(name, arr, ref)
        # points and shapes: (N, D) coordinates
        if arr.size == 0:
            d = ref.ndim if ref is not None else 2
            return np.zeros((0, d), np.float64)
        if arr.ndim != 2:
            raise ToolError(
                f"layer {name!r}: {kind} must be an (N, D) list of coordinates, got shape {list(arr.shape)}"
            )
        if ref is not None and arr.shape[1] != ref.ndim:
            raise ToolError(f"layer {name!r}: coordinates have {arr.shape[1]} axes, its input {like!r} has {ref.ndim}")
        return arr.astype(np.float64)

    def _check_answer(self, name: str, value: Any) -> tuple[dict[str, Any], list[str]]:
        from imagebench.scoring.answer import parse_answer

        if not isinstance(value, (dict, str)):
            raise ToolError(f"{name!r} must be a JSON object, got {type(value).__name__}")
        parsed, why = parse_answer(value)
        if parsed is None:
            raise ToolError(f"{name!r} is not a usable answer: {why}")
        warnings: list[str] = []
        fields = self.view.answer_fields if name == "answer" else None
        if fields:
            for f, comparator in fields.items():
                if f not in parsed:
                    raise ToolError(f"answer field {f!r} is missing (fields: {sorted(fields)})")
                check = _FIELD_TYPES.get(comparator)
                if check is not None and parsed[f] is not None and not check[0](parsed[f]):
                    raise ToolError(f"answer field {f!r} must be {check[1]} ({comparator}), got {_short(parsed[f])}")
            extra = sorted(set(parsed) - set(fields))
            if extra:
                warnings.append(f"field(s) {extra} are not in the answer schema {sorted(fields)}")
        return parsed, warnings

    def _write_read(self, name: str, part: np.ndarray, *, keep: bool = False) -> str:
        if self.reads is None:
            raise ToolError("encoding 'npy' needs a folder for reads; use 'base64' or 'list'")
        self._reads += 1
        safe = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in name)[:64]
        rel = self.reads.save_read(f"{safe}-{self._reads}.npy", part, keep=keep)
        shown = self.reads_alias if self.reads_alias is not None else str(self.reads.path)
        return f"{shown.rstrip('/')}/{rel}"

    def _tell(self, layer: AgentLayer) -> None:
        if self.on_layer is not None:
            self.on_layer(layer)


# --------------------------------------------------------------------------- small helpers


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _nested_size(value: Any) -> tuple[int, None]:
    if isinstance(value, (list, tuple)):
        return sum(_nested_size(v)[0] for v in value), None
    return 1, None


def _region(region: Any, shape: tuple[int, ...], name: str) -> tuple[tuple[slice, ...], list[list[int]]]:
    if region is None:
        return tuple(slice(None) for _ in shape), [[0, s] for s in shape]
    if not isinstance(region, (list, tuple)) or len(region) > len(shape):
        raise ToolError(
            f"read_layer {name!r}: region must be a list of [start, stop] pairs, one per axis (at most "
            f"{len(shape)} for shape {list(shape)}), got {_short(region)}"
        )
    box: list[list[int]] = []
    for axis, (pair, size) in enumerate(zip(region, shape, strict=False)):
        ok = (
            isinstance(pair, (list, tuple))
            and len(pair) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
        )
        if not ok or not (0 <= pair[0] < pair[1] <= size):
            raise ToolError(
                f"read_layer {name!r}: region axis {axis} must be [start, stop] with 0 <= start < stop <= {size}, "
                f"got {_short(pair)}"
            )
        box.append([int(pair[0]), int(pair[1])])
    box += [[0, s] for s in shape[len(box) :]]
    return tuple(slice(a, b) for a, b in box), box


def _result_summary(result: Any) -> str:
    if isinstance(result, bytes):
        return f"PNG, {len(result)} bytes"
    if isinstance(result, dict):
        parts = []
        for k, v in result.items():
            if k == "data":
                parts.append(
                    f"data: {len(v) if isinstance(v, str) else 'values'}{' characters' if isinstance(v, str) else ''}"
                )
            elif isinstance(v, (str, int, float, bool)) or v is None:
                parts.append(f"{k}: {str(v)[:60]}")
            elif isinstance(v, list) and len(v) <= 6 and all(isinstance(x, (int, float, str)) for x in v):
                parts.append(f"{k}: {v}")
            else:
                parts.append(f"{k}: ...")
        return "; ".join(parts)[:300]
    return type(result).__name__


# --------------------------------------------------------------------------- a tracks layer


@dataclass(frozen=True)
class _Grid:
    """An input's shape, as the checks of an answer layer read it."""

    shape: tuple[int, ...]

    @property
    def ndim(self) -> int:
        return len(self.shape)


def _lineage_table(name: str, arr: np.ndarray, ref: _Grid | None) -> np.ndarray:
    """A tracks layer checked as a lineage table: (n, 4) whole numbers label >= 1, begin >= 0,
    end >= begin, parent >= 0, at most :data:`MAX_TRACK_ROWS` rows, ending inside the time-lapse."""
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ToolError(
            f"layer {name!r}: a tracks layer is (n, 4) rows label, begin, end, parent; got {list(arr.shape)}"
        )
    if arr.shape[0] > MAX_TRACK_ROWS:
        raise ToolError(f"layer {name!r}: {arr.shape[0]} tracks, more than the limit of {MAX_TRACK_ROWS}")
    if arr.dtype.kind not in "iuf" or (arr.size and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)))):
        raise ToolError(f"layer {name!r}: a lineage table holds whole numbers")
    if arr.size and (np.any(np.abs(arr) >= 2**31)):
        raise ToolError(f"layer {name!r}: labels and frames must be below 2**31")
    table = arr.astype(np.int64)
    for i, (label, begin, end, parent) in enumerate(table.tolist()):
        if label < 1 or begin < 0 or parent < 0 or end < begin:
            raise ToolError(
                f"layer {name!r}: row {i}: {[label, begin, end, parent]}, expected label >= 1, begin >= 0, "
                "end >= begin, parent >= 0"
            )
        if ref is not None and ref.ndim >= 3 and end >= ref.shape[0]:
            raise ToolError(
                f"layer {name!r}: row {i}: track {label} ends at frame {end}, the time-lapse has {ref.shape[0]}"
            )
    return table
