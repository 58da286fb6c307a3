"""Whose a viewer layer is: the tag the panel writes into a layer's metadata. Qt-free.

Every layer the panel puts on the viewer carries ``metadata["imagebench"]`` with its *role* and
the case and load it belongs to (``case``: the case's label, ``load``: the number of the Load,
counted from 1 in one panel):

============  ============================================================================
role          what it is
============  ============================================================================
``case``      a data layer of the loaded case (replaced on the next Load)
``result``    what a subject's Run (or an agent) left, ``<subject>:<leaving>`` (replaced on the next Load)
``answer``    an empty layer the Answer tab's Create made for a leaving: the person's work
``person``    a layer the person added while a case was loaded (tagged when it arrived)
============  ============================================================================

A layer with no tag is *foreign*: it was on the viewer before the panel saw it, or arrived while
no case was loaded (it is then tagged ``person`` with no case). The panel never replaces a foreign
layer nor offers it as an answer. The person's layers of an earlier load are *leftovers*: the next
Load asks whether to keep them aside or remove them (:class:`napari_imagebench._workbench_model.Leftovers`),
and they are never any other load's answer.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal

#: the metadata key of the panel's tag
TAG = "imagebench"

Role = Literal["case", "result", "answer", "person"]
PANEL_ROLES: frozenset[str] = frozenset({"case", "result"})  # the panel's own: replaced on Load
PERSON_ROLES: frozenset[str] = frozenset({"answer", "person"})  # the person's work: never replaced unasked


@dataclass(frozen=True)
class Owner:
    """Whose a layer is, as its tag says; ``role`` None for a foreign layer."""

    role: str | None = None
    case: str | None = None
    load: int | None = None

    @property
    def panel(self) -> bool:
        """The panel put it there for a case (a data layer or a result): the next Load replaces it."""
        return self.role in PANEL_ROLES

    @property
    def persons(self) -> bool:
        """The person made it while a case was loaded (Create, or a layer of their own)."""
        return self.role in PERSON_ROLES and self.case is not None

    def of_load(self, case: str | None, load: int | None) -> bool:
        """It belongs to the load numbered ``load`` of ``case`` (the case on the viewer now)."""
        return load is not None and case is not None and self.load == load and self.case == case and self.role is not None


def owner(metadata: Mapping[str, Any] | None) -> Owner:
    """The owner ``metadata`` records (an untagged layer's is foreign). A tag written before roles
    were recorded says ``key`` (a case's data layer), ``result`` or ``answer``."""
    tag = (metadata or {}).get(TAG)
    if not isinstance(tag, Mapping):
        return Owner()
    role = tag.get("role")
    if role is None:
        role = next((r for r, key in (("case", "key"), ("result", "result"), ("answer", "answer")) if key in tag), None)
    load = tag.get("load")
    return Owner(
        role=str(role) if role is not None else None,
        case=str(tag["case"]) if tag.get("case") is not None else None,
        load=int(load) if isinstance(load, int) and not isinstance(load, bool) else None,
    )


def stamp(metadata: MutableMapping[str, Any], role: Role, case: str | None, load: int | None) -> None:
    """Write the tag into ``metadata`` (keeping what else the tag holds: a data key, an array id)."""
    tag = metadata.get(TAG)
    tag = dict(tag) if isinstance(tag, Mapping) else {}
    tag.update(role=role, case=case, load=load)
    metadata[TAG] = tag


def tagged(metadata: Mapping[str, Any] | None) -> bool:
    """``metadata`` carries the panel's tag (of any role)."""
    return isinstance((metadata or {}).get(TAG), Mapping)
