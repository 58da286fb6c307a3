"""The workbench's model: the one loaded case (its fixture, the person's unit and session) and
what the panel showed of it on the viewer. Qt-free.

One panel holds at most one loaded case. Loading builds the fixture once (as a run does) and
opens a session on its data; the fixture stays private to this model and is used only to
verify. The interactive subject (a person at the viewer) works the session opened at Load.

Each load is numbered (1, 2, ... in one panel) and every layer on the viewer is tagged with the
case and load it belongs to (:mod:`napari_imagebench._owners`). The person's layers of another
case are *leftovers* when a case loads: :meth:`WorkbenchModel.decide_leftovers` asks the person
(:attr:`WorkbenchModel.ask_leftovers`; the panel shows a message box that never blocks the Load)
whether to keep them aside (:attr:`WorkbenchModel.kept_aside`, back when their case is loaded
again) or to remove them; either way they are never the new load's answer, and a Remove said
after the Load still removes what was kept aside (:meth:`WorkbenchModel.discard`). The person's
layers of the same case, loaded again, stay. A load that takes back layers of an earlier load
takes that load's flags too (what the person had seen of the truth when they made them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from imagebench.case.model import Case
from imagebench.fixtures.fixture import Fixture
from napari_imagebench._base import INTERACTIVE_NAME, Notices, PanelError
from napari_imagebench._owners import TAG, stamp
from napari_imagebench._runs import ResultRow

if TYPE_CHECKING:
    from imagebench.case.session import Session
    from imagebench.runs.runner import Unit
    from imagebench.subjects import SubjectRun
    from napari_imagebench._browser_model import BrowserModel


@dataclass
class Loaded:
    """The case on the viewer: the person's unit, opened at Load (its fixture is private: only the
    verifier reads it), and the units other subjects ran on the same fixture until they are scored."""

    case: Case
    unit: Unit  # the interactive unit: its session is what the viewer shows
    # the last unit and SubjectRun of each non-interactive subject, until it is scored
    runs: dict[str, tuple[Unit, SubjectRun | None]] = field(default_factory=dict)
    # what this load has shown a person beyond the data: flags on their later samples
    seen: set[str] = field(default_factory=set)
    # the answers a person set in the Answer tab's forms, by leaving name
    answers: dict[str, Any] = field(default_factory=dict)
    # which load of this panel it is (1, 2, ...): the tag of every layer that belongs to it
    number: int = 0

    @property
    def fixture(self) -> Fixture:
        assert self.unit.fixture is not None
        return self.unit.fixture

    @property
    def session(self) -> Session:
        assert self.unit.session is not None
        return self.unit.session

    @property
    def build_s(self) -> float:
        return self.unit.prepared.build_s

    @property
    def plane(self) -> Any:
        return self.unit.plane

    @property
    def tensors(self) -> Mapping[str, str] | None:
        return self.unit.tensors

    def release(self) -> None:
        """Remove what this load holds on disk (the read-only files copy); idempotent."""
        self.unit.release()


KEEP, REMOVE = "keep", "remove"
LeftoverChoice = Literal["keep", "remove"]


@dataclass(frozen=True)
class Leftovers:
    """The question a Load asks when the person's layers of earlier loads are on the viewer."""

    loading: str  # the label of the case being loaded
    by_case: Mapping[str, tuple[str, ...]]  # case label -> the names of the person's layers made on it

    @property
    def names(self) -> list[str]:
        return [name for names in self.by_case.values() for name in names]

    def text(self) -> str:
        parts = [f"{', '.join(f'`{n}`' for n in names)} (made on {label})" for label, names in self.by_case.items()]
        return (
            f"Loading {self.loading}. Your layers {'; '.join(parts)} are still on the viewer. Keep them aside "
            "(they come back when their case is loaded again) or remove them? Either way they are not offered "
            f"as an answer to {self.loading}."
        )


class WorkbenchModel:
    """The loaded case, how it is loaded (:meth:`build` off the GUI thread, then :meth:`adopt`), and
    which of its layers the panel showed and a person deleted since Load."""

    def __init__(
        self, notices: Notices, browser: BrowserModel, *, plane_provider: Callable[[], Any] | None = None
    ) -> None:
        self.notices, self.browser = notices, browser
        self._plane_provider = plane_provider
        self.loaded: Loaded | None = None
        self.shown: set[str] = set()  # layer names this panel put on the viewer for the loaded case
        self.deleted: list[str] = []  # of those (and of leaving names), deleted since Load
        self.loads = 0  # how many loads this panel has adopted: the last one's number
        self._seen_by_load: dict[int, set[str]] = {}  # each load's flags (the set it keeps adding to)
        # what the person has seen, per case, for the whole sitting: a new Load of a case starts
        # with its flags (a second Load forgets nothing); read over the case's kin (see flags())
        self.seen_by_case: dict[str, set[str]] = {}
        self.data_shown: set[str] = set()  # cases whose data was opened beside the loaded one (the reader)
        self._kin: tuple[Any, dict[str, frozenset[str]]] | None = None  # (fixtures root, kinship)
        # how the person answers a Leftovers question: the panel shows a message box; by default
        # (no panel, a script) the layers are kept aside, never removed unasked
        self.ask_leftovers: Callable[[Leftovers], str] = lambda _question: KEEP
        self.kept_aside: dict[str, list[Any]] = {}  # case label -> the person's layers made on it, off the viewer

    def _plane(self) -> Any:
        if self._plane_provider is not None:
            return self._plane_provider()
        from imagebench.plane import PlaneUnavailable, shared_plane

        try:
            return shared_plane()
        except PlaneUnavailable as exc:
            raise PanelError(f"no data plane can run here, so tensor layers cannot load: {exc.reason}") from None

    def loadable(self, label: str) -> Case:
        """The case ``label`` when it can be loaded here; else a notice and PanelError."""
        r = self.browser.row(label)
        if r.case is None or not r.available:
            raise self.notices.fail(f"{label} cannot run here: {r.reason}")
        return r.case

    def build(self, case: Case) -> Loaded:
        """Build ``case``'s fixture and open the person's unit on its data (:func:`imagebench.runs.runner.open_unit`).

        The slow half of loading (a builder, a curated read, the data plane's start and upload),
        safe to call from a worker thread: it changes no state and raises no notice; a failure is
        a PanelError whose message says why. :meth:`adopt` makes the result the loaded case.
        """
        from imagebench.runs.runner import open_unit, presents_tensor

        plane = self._plane() if presents_tensor(case) else None
        unit = open_unit(case, INTERACTIVE_NAME, plane=plane)
        if unit.failure is not None:
            unit.release()
            status, reason = unit.failure
            raise PanelError(f"{case.label}: {status}: {reason}" if unit.fixture is None else f"{case.label}: {reason}")
        return Loaded(case=case, unit=unit)

    def adopt(self, loaded: Loaded) -> Loaded:
        """Make ``loaded`` (from :meth:`build`) the loaded case, forgetting the previous one."""
        if self.loaded is not None and self.loaded is not loaded:
            self.loaded.release()
        self.loaded = loaded
        if not loaded.number:
            self.loads += 1
            loaded.number = self.loads
            # one set per case for the sitting: what this load sees is what the case has been seen with
            case_seen = self.seen_by_case.setdefault(loaded.case.label, set())
            case_seen |= loaded.seen
            loaded.seen = case_seen
            self._seen_by_load[loaded.number] = loaded.seen
        loaded.unit.started = time.perf_counter()  # the person's turn starts when the layers are shown
        self.start_showing()
        return loaded

    def start_showing(self) -> None:
        """The loaded case's layers are (being) shown: nothing of it is shown or deleted yet."""
        self.shown = set()
        self.deleted = []

    def need_loaded(self) -> Loaded:
        """The loaded case; else a notice and PanelError."""
        if self.loaded is None:
            raise self.notices.fail("load a case first", "warning")
        return self.loaded

    # ---------------------------------------------------------------- layers on the viewer

    def layer_shown(self, name: str) -> None:
        """The panel put a layer named ``name`` on the viewer for the loaded case."""
        self.shown.add(name)
        if name in self.deleted:
            self.deleted.remove(name)

    def layer_removed(self, name: str) -> None:
        """A layer left the viewer: remembered when the panel showed it or a leaving has its name."""
        if self.loaded is None:
            return
        leaving = name in {c.name for c in self.loaded.case.collect}
        if (name in self.shown or leaving) and name not in self.deleted:
            self.deleted.append(name)

    def layer_added(self, name: str) -> None:
        if name in self.deleted:
            self.deleted.remove(name)

    def tag_arrival(self, metadata: dict[str, Any]) -> bool:
        """A layer arrived on the viewer: one the panel did not tag is the person's, of the loaded
        case's load (of no case when none is loaded). True when it was tagged here."""
        if TAG in metadata:
            return False
        loaded = self.loaded
        stamp(metadata, "person", loaded.case.label if loaded else None, loaded.number if loaded else None)
        return True

    def decide_leftovers(self, question: Leftovers) -> LeftoverChoice:
        """Ask the person what to do with the leftovers of earlier loads (:attr:`ask_leftovers`);
        anything but "remove" keeps them aside. The choice is said in a notice."""
        choice: LeftoverChoice = REMOVE if self.ask_leftovers(question) == REMOVE else KEEP
        names = ", ".join(question.names)
        if choice == REMOVE:
            self.notices.notify("info", f"removed your layers of earlier cases: {names}")
        else:
            labels = ", ".join(question.by_case)
            self.notices.notify("info", f"kept aside your layers {names}: they come back when you load {labels} again")
        return choice

    def keep_aside(self, label: str, layers: Iterable[Any]) -> None:
        """The person's ``layers`` made on case ``label`` leave the viewer, to come back with it."""
        self.kept_aside.setdefault(label, []).extend(layers)

    def kept(self, label: str) -> list[Any]:
        """The layers kept aside from case ``label``, handed back (and no longer kept here)."""
        return self.kept_aside.pop(label, [])

    def discard(self, question: Leftovers) -> list[Any]:
        """The person said Remove after the Load: the layers ``question`` named, kept aside, go."""
        gone: list[Any] = []
        for label, names in question.by_case.items():
            kept = self.kept_aside.get(label, [])
            gone += [layer for layer in kept if getattr(layer, "name", None) in names]
            self.kept_aside[label] = [layer for layer in kept if getattr(layer, "name", None) not in names]
            if not self.kept_aside[label]:
                del self.kept_aside[label]
        if gone:
            self.notices.notify("info", f"removed your layers of earlier cases: {', '.join(layer.name for layer in gone)}")
        return gone

    def take_back(self, loads: Iterable[int]) -> set[str]:
        """Layers kept aside from ``loads`` come back to the loaded case: it takes those loads'
        flags too (a painting made after viewing the truth stays flagged). Returns the flags added."""
        loaded = self.need_loaded()
        added: set[str] = set()
        for number in set(loads):
            if number != loaded.number:
                added |= self._seen_by_load.get(number, set()) - loaded.seen
        loaded.seen |= added
        return added

    def artifacts_shown(self, result: ResultRow) -> None:
        """A sample's artifacts were put on the viewer: they may show its case's truth (and so the
        truth of every case sharing a file with it)."""
        self.mark(result.label, "saw-artifacts")

    # ---------------------------------------------------------------- what the person has seen

    def kin(self, label: str) -> frozenset[str]:
        """``label`` and the cases of the fixture tree sharing a file with it (:mod:`._kin`)."""
        from napari_imagebench._kin import kin_of, kinship

        root = self.browser.fixtures_root
        if self._kin is None or self._kin[0] != root:
            self._kin = (root, kinship(root))
        return kin_of(label, self._kin[1])

    def mark(self, label: str, flag: str) -> bool:
        """The person saw something of case ``label`` that may show its truth: ``flag`` is kept for
        it for the sitting. True when it newly flags the loaded case (``label`` or its kin)."""
        before = self.flags()
        self.seen_by_case.setdefault(label, set()).add(flag)
        return flag not in before and flag in self.flags()

    def data_opened(self, label: str) -> bool:
        """Case ``label``'s data was opened beside the loaded case (the reader's ``case.json``): for
        a case sharing a file with it, that file may be its truth. True when it newly flags the loaded case."""
        before = self.flags()
        self.data_shown.add(label)
        return "saw-truth" not in before and "saw-truth" in self.flags()

    def layer_arrived(self, metadata: Mapping[str, Any]) -> str | None:
        """A layer arrived on the viewer from outside the panel's own work: a run folder's pane
        (the reader) flags its case ``saw-artifacts``, a fixture case folder's data its kin
        ``saw-truth``. Returns the flag when it newly flags the loaded case."""
        from napari_imagebench._artifacts import CASE_DATA_KEY, VERDICT_KEY

        verdict = metadata.get(VERDICT_KEY)
        if isinstance(verdict, Mapping) and verdict.get("label"):
            return "saw-artifacts" if self.mark(str(verdict["label"]), "saw-artifacts") else None
        data = metadata.get(CASE_DATA_KEY)
        if isinstance(data, str) and data:
            return "saw-truth" if self.data_opened(data) else None
        return None

    def flags(self) -> set[str]:
        """The loaded case's flags: what it was seen with this sitting, what each case sharing a
        file with it was seen with, and ``saw-truth`` when such a case's data was opened."""
        loaded = self.loaded
        if loaded is None:
            return set()
        label = loaded.case.label
        kin = self.kin(label)
        out = set(loaded.seen)
        for other in kin:
            out |= self.seen_by_case.get(other, set())
        if any(other in self.data_shown for other in kin - {label}):
            out.add("saw-truth")
        return out

    def close(self) -> None:
        """Forget the loaded case (and its fixture, and its copy of a bundle case's files)."""
        if self.loaded is not None:
            self.loaded.release()
        self.loaded = None
        self.start_showing()
