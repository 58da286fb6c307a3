"""The skills a case offers a subject, and the skills the harness itself saw the subject activate.

A ``trigger`` case asks whether a skill activated on its own. Only a channel the harness owns can
say so, never a file or a binding of the subject's:

- ``mcp``: the MCP session's transcript: each ``use_skill`` call that succeeded
  (:mod:`imagebench.subjects.mcp`);
- ``skill-tool``: the ``skill`` program the harness gives a ``command:`` subject of a trigger case
  (shown read-only at ``/skill`` in the sandbox); it asks the harness, over a socket in a folder
  of the harness's, to activate a skill, and the harness keeps the record
  (:mod:`imagebench.subjects.skilltool`).

Each channel's harness code writes :data:`OBSERVED_NOTE` into the session's notes when the
subject's turn is over (:func:`note_observed`), naming the channel even when nothing was
activated through it: a channel that was open and unused is a "no", a missing one is "not
observed". The runner hands the note to the verifier only for a subject that ran in a process of
its own (an in-process subject shares the harness's memory, so a note in its session proves
nothing: :func:`imagebench.runs.runner.finish_unit`).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.case.model import Case

#: the session note (and the attempt note) holding what the harness observed
OBSERVED_NOTE = "observed_skills"
#: the attempt note saying why nothing the harness observed reached the verifier
UNOBSERVED_NOTE = "unobserved"
#: the channels that can observe an activation
CHANNELS: tuple[str, ...] = ("mcp", "skill-tool")
#: an activation as a trace event: {"type": SKILL_EVENT, "name": <skill id>}
SKILL_EVENT = "skill"
#: activations one note keeps at most (a subject calling the tool in a loop cannot grow it further)
MAX_OBSERVED = 256
#: the case meta key a trigger bundle case lists the skills it offers under ({id: what it is for})
SKILLS_META = "skills"
#: the case meta key of each offered skill's instructions ({id: the SKILL.md's body}), what use_skill returns
SKILL_TEXTS_META = "skill_texts"


@dataclass(frozen=True)
class Activation:
    """One skill activation the harness saw, and the channel it came through."""

    name: str
    via: str


@dataclass(frozen=True)
class ObservedSkills:
    """The channels the harness gave the subject, and what it activated through them, in order."""

    channels: tuple[str, ...]
    activations: tuple[Activation, ...] = ()

    def names(self) -> list[str]:
        """The skills activated, each once, in the order first seen."""
        return list(dict.fromkeys(a.name for a in self.activations))

    def trace(self) -> list[dict[str, str]]:
        """The activations as trace events ``{"type": "skill", "name": ..., "via": <channel>}``."""
        return [{"type": SKILL_EVENT, "name": a.name, "via": a.via} for a in self.activations]

    def to_json(self) -> dict[str, Any]:
        return {"channels": list(self.channels), "activations": [{"name": a.name, "via": a.via} for a in self.activations]}


def note_observed(notes: MutableMapping[str, Any], channel: str, activated: Sequence[str]) -> None:
    """Record in ``notes`` that ``channel`` was open to the subject and the skills activated through
    it (kept beside what another channel recorded). Only the harness's channel code calls this."""
    if channel not in CHANNELS:
        raise ValueError(f"channel {channel!r} is not one of {list(CHANNELS)}")
    held = notes.get(OBSERVED_NOTE)
    before, problem = read_observed(held) if held is not None else (ObservedSkills(()), None)
    if before is None:
        raise ValueError(f"notes[{OBSERVED_NOTE!r}] is malformed ({problem}); it is the harness's own")
    channels = tuple(dict.fromkeys((*before.channels, channel)))
    room = max(0, MAX_OBSERVED - len(before.activations))
    added = tuple(Activation(str(name), channel) for name in list(activated)[:room])
    notes[OBSERVED_NOTE] = ObservedSkills(channels, before.activations + added).to_json()


def read_observed(value: Any) -> tuple[ObservedSkills | None, str | None]:
    """The note :func:`note_observed` wrote: ``(observed, None)``, or ``(None, why)`` naming the field
    that is not as written (a harness error: the note never comes from a subject)."""
    if not isinstance(value, Mapping):
        return None, f"expected an object with 'channels' and 'activations', got {type(value).__name__}"
    channels = value.get("channels")
    if not isinstance(channels, list) or not all(isinstance(c, str) and c in CHANNELS for c in channels):
        return None, f"field 'channels' must be a list of {list(CHANNELS)}, got {channels!r}"
    raw = value.get("activations", [])
    if not isinstance(raw, list) or len(raw) > MAX_OBSERVED:
        return None, f"field 'activations' must be a list of at most {MAX_OBSERVED} objects"
    acts: list[Activation] = []
    for i, item in enumerate(raw):
        ok = isinstance(item, Mapping) and isinstance(item.get("name"), str) and item.get("via") in channels
        if not ok:
            return None, f"field 'activations[{i}]' must be {{'name': <skill>, 'via': <one of the channels>}}, got {item!r}"
        acts.append(Activation(item["name"], item["via"]))
    return ObservedSkills(tuple(channels), tuple(acts)), None


def offered_skills(case: Case) -> dict[str, str]:
    """The skills a subject of ``case`` may activate (``use_skill`` over MCP, or the ``skill`` tool),
    each with what it is for: the case's own list (``meta["skills"]``: a trigger bundle case offers
    its skill among the harness's other skills, so activating the wrong one can be seen), else the
    case's own skill alone."""
    listed = case.meta.get(SKILLS_META)
    if isinstance(listed, Mapping) and listed and all(isinstance(k, str) and isinstance(v, str) for k, v in listed.items()):
        return {k: listed[k] for k in sorted(listed)}
    doc = _builtin_doc(case.namespace)
    if doc is not None:
        return {case.namespace: doc.description}
    about = str(case.meta.get("skill_about") or f"the {case.namespace} skill: its instructions for this kind of task")
    return {case.namespace: about}


def skill_instructions(case: Case) -> dict[str, str]:
    """What ``use_skill`` (or the ``skill`` tool) returns for each skill :func:`offered_skills` lists:
    the body of its ``SKILL.md`` (:mod:`imagebench.case.skillfile`): the case's own texts
    (``meta["skill_texts"]``, a bundle's), else the built-in skill's packaged folder. A skill with
    no ``SKILL.md`` anywhere (a user's module naming its own skill) gets its description and a line
    saying it has no instructions of its own."""
    texts = case.meta.get(SKILL_TEXTS_META)
    texts = texts if isinstance(texts, Mapping) else {}
    out: dict[str, str] = {}
    for name, about in offered_skills(case).items():
        given = texts.get(name)
        if isinstance(given, str) and given.strip():
            out[name] = given
            continue
        doc = _builtin_doc(name)
        out[name] = doc.instructions if doc is not None else f"{about.rstrip('.')}. (This skill ships no SKILL.md instructions.)"
    return out


def _builtin_doc(name: str) -> Any:
    from imagebench.case.skillfile import builtin_skill_docs

    return builtin_skill_docs().get(name)
