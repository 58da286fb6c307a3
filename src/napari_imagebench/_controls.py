"""Which of the panel's buttons are enabled now, and why: the enabling rules, Qt-free.

The widget says what only it knows (a :class:`PanelState`: the selected case, the chosen subject,
whether work is under way, whether the artifact panes are up, the viewer's layers and the
console's names); :func:`controls` answers with a :class:`Controls`, one :class:`Control` (enabled,
and a tooltip saying why) per button, and the reason each subject cannot work the case in view.
The widget only draws it, so every rule is tested without Qt (``tests/plugin/test_controls.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from napari_imagebench._base import INTERACTIVE, PanelError

if TYPE_CHECKING:
    from imagebench.case.model import Case
    from napari_imagebench._cases import CaseRow
    from napari_imagebench._workbench_model import Loaded

RUN_TIP = "run the subject on a fresh session of the loaded case"
SCORE_TIP = "score the leavings as a sample"
SCORE_AGENT_TIP = "score what the agent left (and stop serving it)"
STOP_TIP = "end the running subject now (its processes too); the sample is recorded as stopped"

# The panel's keyboard shortcuts ({action: Qt key sequences}), live while the focus is in the panel.
# Qt shortcuts, not npe2 keybindings: napari registers a plugin's commands with no keybindings
# (npe2's `keybindings` contribution is ignored), and a command would not reach this dock's buttons.
SHORTCUTS: dict[str, tuple[str, ...]] = {
    "load": ("Ctrl+L",),
    "score": ("Ctrl+Return", "Ctrl+Enter"),
    "artifacts": ("Ctrl+Shift+A",),  # View artifacts, and Back to the case while the panes are up
}


def with_key(tip: str, action: str) -> str:
    """``tip`` followed by the action's shortcut, as the button's tooltip shows it."""
    keys = SHORTCUTS.get(action)
    return f"{tip} ({keys[0]})" if keys and tip else tip


class PanelModel(Protocol):
    """What the rules read of the panel's model (:class:`napari_imagebench._model.BenchModel` has it)."""

    @property
    def loaded(self) -> Loaded | None: ...
    @property
    def agent(self) -> Any: ...
    @property
    def results(self) -> Sequence[Any]: ...
    @property
    def subject_specs(self) -> Sequence[str]: ...
    def rows(self) -> list[CaseRow]: ...
    def subject_problem(self, spec: str, case: Case | None) -> str: ...
    def missing_answers(self, layers: Mapping[str, Any], console: Mapping[str, Any] | None) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class PanelState:
    """What the widget knows that the model does not."""

    selected: str | None = None  # the label selected in the case tree
    subject: str = INTERACTIVE  # the subject chosen in the list
    busy: bool = False  # a Load or a Run is under way in a worker
    stoppable: bool = False  # a Run is under way and Stop was not pressed yet
    reviewing: bool = False  # the artifact panes are up (Back to the case restores the case)
    layers: Mapping[str, Any] = field(default_factory=dict)  # {name: data} of the viewer's leavings
    console: Mapping[str, Any] | None = None  # the console's namespace, None when it is not open


@dataclass(frozen=True)
class Control:
    enabled: bool
    why: str = ""  # the tooltip: what the button does, or why it cannot now

    def __bool__(self) -> bool:
        return self.enabled


@dataclass(frozen=True)
class Controls:
    """Each button's state; ``subjects`` is ``{spec: why it cannot work the case in view}`` ('' when it can)."""

    load: Control
    run: Control
    score: Control
    stop: Control
    serve: Control
    artifacts: Control
    back: Control
    folder: Control
    subjects: Mapping[str, str]
    missing: tuple[str, ...] = ()  # the leavings a person has not given yet (Score waits for them)


def controls(model: PanelModel, state: PanelState) -> Controls:
    """The enabling rules of the bench panel, for ``model`` as it is and the widget's ``state``."""
    row = None
    if state.selected is not None:
        row = next((r for r in model.rows() if r.label == state.selected), None)
    loaded = model.loaded
    serving = model.agent is not None
    interactive = state.subject == INTERACTIVE
    # a subject that cannot work the case in view (reference on a case without one) is greyed in the list
    target = loaded.case if loaded is not None else (row.case if row is not None else None)
    subjects = {spec: model.subject_problem(spec, target) for spec in model.subject_specs}
    problem = subjects.get(state.subject, "")

    if state.busy:
        load = Control(False, "wait for the current work to finish")
    elif serving:
        load = Control(False, "an agent is served the loaded case: Score or stop it first")
    elif row is None:
        load = Control(False, "select a case to load")
    elif not row.available:
        load = Control(False, f"{row.label} cannot run here: {row.reason}")
    else:
        load = Control(True, "add the case's data layers to the viewer")

    chosen = state.subject in model.subject_specs  # not an entry that asks for one (Command…)
    if not chosen:
        run = Control(False, "choose a subject, or add one in the field below")
    elif problem:
        run = Control(False, problem)
    elif loaded is None:
        run = Control(False, RUN_TIP)
    else:
        run = Control(not interactive and not state.busy, RUN_TIP)

    missing: tuple[str, ...] = ()
    if loaded is not None and interactive and not serving:
        try:
            missing = tuple(model.missing_answers(state.layers, state.console))
        except PanelError:
            missing = ()
    if serving:
        score_tip = SCORE_AGENT_TIP
    elif not chosen:
        score_tip = "choose a subject, or add one in the field below"
    elif missing:
        score_tip = f"leave {', '.join(missing)} first (the Answer tab says how)"
    else:
        score_tip = SCORE_TIP
    score = Control(loaded is not None and not state.busy and not missing and (chosen or serving), score_tip)

    has_result = bool(model.results)
    return Controls(
        load=load,
        run=run,
        score=score,
        stop=Control(state.busy and state.stoppable, STOP_TIP),
        serve=Control((loaded is not None or serving) and not state.busy),
        artifacts=Control(has_result),
        back=Control(state.reviewing),
        folder=Control(has_result),
        subjects=subjects,
        missing=missing,
    )
