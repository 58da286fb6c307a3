"""What a subject sees: a session opened on a fixture's data, and the attempt collected from it.

A session is opened fresh for every sample. It holds the case's prompt and persona, one
:class:`SessionLayer` per presented layer, and a namespace pre-bound with each layer's data.
Only ``fixture.data`` is read here; ``fixture.truth`` is never touched, so nothing a subject can
reach through a session leads to the answer.

Array layers are private numpy copies: a subject that writes into them changes neither the
fixture nor the next sample's session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from imagebench.case.model import Collect, Layer
from imagebench.fixtures.fixture import Attempt, Fixture

if TYPE_CHECKING:
    from imagebench.case.model import Case

# Names the harness binds in every namespace; a case may not use them for a layer or a leaving.
RESERVED_NAMES: frozenset[str] = frozenset({"prompt", "fixture_tensors"})


class SessionError(ValueError):
    """A session cannot be opened for this case and fixture (names the case, layer and key)."""


@dataclass
class SessionLayer:
    """One presented layer: how it is shown (``layer``) and what the subject gets (``data``).

    ``data`` is a numpy array for an ``array`` layer and the data-plane id (a string) for a
    ``tensor`` layer.
    """

    layer: Layer
    data: Any


@dataclass
class Session:
    """Everything a subject may use while it works one sample of one case."""

    label: str
    prompt: str
    persona: str
    layers: dict[str, SessionLayer]
    namespace: dict[str, Any]
    client: Any
    collect: tuple[Collect, ...]
    workspace: Path | None = None
    # Why a leaving is absent although the subject tried (e.g. an unreadable outputs file):
    # ``notes["why_not"][name]`` and ``notes["unreadable"]`` (names it left but nobody could read).
    notes: dict[str, Any] = field(default_factory=dict)

    def why_not(self, name: str, reason: str, *, unreadable: bool = False) -> None:
        """Record why ``name`` could not be collected; ``unreadable`` marks something left but unreadable."""
        self.notes.setdefault("why_not", {})[name] = reason
        if unreadable:
            names = self.notes.setdefault("unreadable", [])
            if name not in names:
                names.append(name)

    def ignored(self, name: str, where: str) -> None:
        """Note that the subject left something under the recorded leaving ``name`` (at ``where``):
        it is never read as that leaving."""
        self.notes.setdefault(IGNORED_NOTE, {})[name] = where

    def lookup(self, name: str) -> Any:
        """The leaving named ``name``: a namespace binding, or a layer the subject added; else KeyError."""
        if name in self.namespace:
            return self.namespace[name]
        if name in self.layers:  # a layer the subject added (never an input: see _check_names)
            return self.layers[name].data
        reason = self.notes.get("why_not", {}).get(name) or f"the subject left nothing named {name!r}"
        raise KeyError(reason)


# --------------------------------------------------------------------------- the prompt

_HOW = {
    "array": "outputs/{name}.npy",
    "scalar": "outputs/{name}.json",
    "json": "outputs/{name}.json",
}
#: how a recorded leaving (Collect.recorded) is left: by the harness, never by the subject
RECORDED_HOW = (
    "recorded by the harness, never left by you: a command activates a skill by running the harness's "
    "`skill` tool ($IMAGEBENCH_SKILL_TOOL; skill-tool.md in its workspace says how), an MCP client calls "
    "use_skill; a file or binding of this name is ignored"
)
#: notes[IGNORED_NOTE][name]: where a subject left something under a recorded leaving's name (ignored)
IGNORED_NOTE = "ignored_leavings"


def case_prompt(case: Case) -> str:
    """The prompt every subject of ``case`` sees: the task, then its inputs, then a ``Leave:`` section.

    It depends on the case only (never on the fixture), so ``imagebench show`` prints exactly
    what a subject will read.
    """
    lines = [case.task.rstrip(), ""]
    if case.layers:
        lines.append("Inputs:")
        for layer in case.layers:
            if layer.presentation == "tensor":
                where = (
                    f"data-plane id `fixture_tensors[{layer.name!r}]` (a command reads fixture_tensors.json "
                    "and reaches the plane at $IMAGEBENCH_TENSOR_URL)"
                )
            else:
                where = f"`{layer.name}` in the namespace; a command reads inputs/{layer.name}.npy"
            lines.append(f"- {layer.name} ({layer.kind}): {where}")
        lines.append("")
    lines.append("Leave:")
    for c in case.collect:
        about = f" - {c.description}" if c.description else ""
        if c.recorded:
            lines.append(f"- {c.name} ({c.what}){about}: {RECORDED_HOW}")
            continue
        how = _HOW[c.what].format(name=c.name)
        if c.layer == "tracks":  # imagebench.subjects.command reads a CTC result folder for it
            how += f", or a CTC result folder outputs/{c.name}/ (mask000.tif, ... and res_track.txt)"
        lines.append(f"- {c.name} ({c.what}){about}: bind `{c.name}` in the namespace; a command writes {how}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- opening and collecting


def _check_names(case: Case) -> None:
    layer_names = {layer.name for layer in case.layers}
    for name in layer_names:
        if name in RESERVED_NAMES:
            raise SessionError(f"case {case.label}: layer name {name!r} is reserved by the harness")
    for c in case.collect:
        if c.name in RESERVED_NAMES:
            raise SessionError(f"case {case.label}: leaving name {c.name!r} is reserved by the harness")
        if c.name in layer_names:
            # The input would already be bound under that name, so doing nothing would count as leaving it.
            raise SessionError(
                f"case {case.label}: leaving {c.name!r} has the same name as an input layer; "
                "a subject that did nothing would appear to have left it"
            )


def open_session(
    case: Case,
    fixture: Fixture,
    *,
    client: Any = None,
    tensors: Mapping[str, str] | None = None,
) -> Session:
    """Open a fresh session for one sample of ``case`` on ``fixture``.

    Only ``fixture.data`` is read. Every ``array`` layer gets its own numpy copy; a ``tensor``
    layer gets its data-plane id from ``tensors`` (``{layer name: id}``, given by the data plane
    after it uploaded the data). The namespace binds each layer name to its data, ``prompt``,
    and ``fixture_tensors`` when ``tensors`` is given.
    """
    _check_names(case)
    layers: dict[str, SessionLayer] = {}
    for layer in case.layers:
        if layer.key not in fixture.data:
            raise SessionError(
                f"case {case.label}: layer {layer.name!r} presents data key {layer.key!r}, which the fixture "
                f"does not have (data keys: {sorted(fixture.data)})"
            )
        if layer.presentation == "tensor":
            if tensors is None or layer.name not in tensors:
                raise SessionError(
                    f"case {case.label}: layer {layer.name!r} presents as tensor and no data-plane id was given for it"
                )
            data: Any = str(tensors[layer.name])
        else:
            try:
                # Always a private copy: the fixture is reused across samples.
                data = np.array(np.asarray(fixture.data[layer.key]), copy=True)
            except Exception as exc:
                raise SessionError(
                    f"case {case.label}: layer {layer.name!r} (data key {layer.key!r}) could not be read as an "
                    f"array: {type(exc).__name__}: {exc}"
                ) from exc
        layers[layer.name] = SessionLayer(layer=layer, data=data)

    prompt = case_prompt(case)
    namespace: dict[str, Any] = {name: sl.data for name, sl in layers.items()}
    namespace["prompt"] = prompt
    if tensors is not None:
        namespace["fixture_tensors"] = {k: str(v) for k, v in tensors.items()}
    return Session(
        label=case.label,
        prompt=prompt,
        persona=case.persona,
        layers=layers,
        namespace=namespace,
        client=client,
        collect=tuple(case.collect),
    )


def collect_attempt(case: Case, subject_name: str, lookup: Callable[[str], Any]) -> Attempt:
    """Collect each of ``case.collect`` through ``lookup(name)`` (which raises KeyError when absent).

    A missing name is recorded in ``attempt.notes["why_not"][name]``: the KeyError's message
    when it carries one, otherwise a plain "left nothing" reason. A recorded leaving
    (``Collect.recorded``) is never collected: the harness keeps it; when ``lookup`` finds a
    value under its name anyway, ``attempt.notes["ignored_leavings"][name]`` says so.
    """
    arrays: dict[str, Any] = {}
    why_not: dict[str, str] = {}
    ignored: dict[str, str] = {}
    for c in case.collect:
        if c.recorded:
            try:
                lookup(c.name)
            except KeyError:
                continue
            ignored[c.name] = f"a value bound as {c.name!r}"
            continue
        try:
            arrays[c.name] = lookup(c.name)
        except KeyError as exc:
            message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else ""
            if not message or message == c.name:
                message = f"the subject left nothing named {c.name!r}"
            why_not[c.name] = message
    notes: dict[str, Any] = {"why_not": why_not, "left": sorted(arrays)}
    if ignored:
        notes[IGNORED_NOTE] = ignored
    return Attempt(subject=subject_name, arrays=arrays, notes=notes)
