"""Subjects and Run: the subject list (you, ``reference``, a ``python:`` solver added in the
field below it, and *Command…*, which turns that field into a command line run in the sandbox as
``imagebench run --subject command:…`` runs it), Run, Score, Stop and the busy bar. Loading and a subject's work happen in a worker
thread (napari's ``create_worker``), so the viewer never freezes; each piece of work closes the
data-plane connections it opened on its thread (:func:`closing_connections`).

The widget draws :class:`napari_imagebench._controls.Controls`; what Load and Score do to the
viewer is the panel's (:class:`napari_imagebench._widget.BenchPanel`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from qtpy.QtCore import Signal
from qtpy.QtWidgets import (
    QApplication,
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from napari_imagebench._busy import Busy
from napari_imagebench._model import BenchModel, PanelError
from napari_imagebench._style import name_children
from napari_imagebench._subjects_model import COMMAND_ENTRY, COMMAND_PREFIX

if TYPE_CHECKING:
    from napari_imagebench._controls import Controls
    from napari_imagebench._model import RunJob

T = TypeVar("T")

SOLVER_HINT = "python:package.module:function"
SOLVER_TIP = "a solver to add to the subjects: python:package.module:function, or command:<command line> (Enter adds it)"
COMMAND_HINT = "a command line, e.g. python3 /path/solve.py"
COMMAND_TIP = (
    "a command line to add as a subject: it runs with bash in a fresh workspace (prompt.md, inputs/, outputs/), in "
    "the bubblewrap sandbox with no network and the default limits, on sealed fixtures: as imagebench run --subject "
    "command:… runs it (refused where bubblewrap cannot start)"
)


def closing_connections(work: Callable[[], T]) -> Callable[[], T]:
    """``work`` wrapped to close, on its own thread, the data-plane connections it opened there.

    Loading a tensor case opens data-plane (Arrow Flight) connections, which the client keeps per
    thread. A Qt pool thread (where napari's workers run) tears its Python state down in a way
    that crashes the process if such a connection is still open then, so every piece of worker
    work closes its thread's connections before it returns
    (:func:`imagebench.plane.client.close_thread_connections`). When the client was never
    imported no connection can exist, and nothing is imported here.
    """

    def run() -> T:
        try:
            return work()
        finally:
            client = sys.modules.get("imagebench.plane.client")
            if client is not None:
                client.close_thread_connections()

    return run


_CLOSING: list[Any] = []  # data planes whose close() runs when the application quits


def close_on_quit(plane: Any) -> None:
    """Stop ``plane`` (its server process and temporary data) when the Qt application quits."""

    app = QApplication.instance()
    if app is None or any(p is plane for p in _CLOSING):
        return
    _CLOSING.append(plane)
    app.aboutToQuit.connect(plane.close)


class RunControls(QWidget):
    """``ran(job, run)`` fires when a Run's work returns; ``changed`` when what the buttons show may change."""

    ran = Signal(object, object)
    changed = Signal()

    def __init__(self, model: BenchModel, status: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.model = model
        self.worker: Any = None
        self.busy_text = ""
        self.job: RunJob | None = None
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()  # one row: the subject and what it does (the dock fits 1366x768)
        self.subject_combo = QComboBox()
        self.subject_combo.addItems([*self.model.subject_specs, COMMAND_ENTRY])
        self.subject_combo.setToolTip(
            "who works the loaded case: you in the viewer, the reference, a solver added below, or (Command…) a command line"
        )
        self.subject_combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.subject_combo.setMinimumContentsLength(6)  # a long solver name does not widen the dock
        self.subject_combo.currentTextChanged.connect(self._subject_changed)
        self.run_button = QPushButton("Run")
        self.run_button.clicked.connect(self.run)
        self.score_button = QPushButton("Score")
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)
        row.addWidget(self.subject_combo, 1)
        for button in (self.run_button, self.score_button, self.stop_button):
            row.addWidget(button)
        col.addLayout(row)
        row = QHBoxLayout()
        self.solver_edit = QLineEdit()
        self.solver_edit.setPlaceholderText(SOLVER_HINT)
        self.solver_edit.setToolTip(SOLVER_TIP)
        self.solver_edit.returnPressed.connect(self.add_solver)
        self.add_solver_button = QPushButton("Add solver")
        self.add_solver_button.setToolTip("add the solver named in the field beside it to the subject list")
        self.add_solver_button.clicked.connect(self.add_solver)
        row.addWidget(self.solver_edit, 1)
        row.addWidget(self.add_solver_button)
        col.addLayout(row)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)
        col.addWidget(self.progress)  # its own row: the busy text is readable
        self.busy = Busy(self.progress, status)  # the seconds gone by, here, in the status bar and activity dock
        self.setObjectName("run_controls")
        name_children(self)

    @property
    def running(self) -> bool:
        return self.worker is not None

    @property
    def subject(self) -> str:
        return self.subject_combo.currentText()

    @property
    def stoppable(self) -> bool:
        """A Run is under way and Stop was not pressed yet."""
        return self.job is not None and self.running and not self.job.stop.is_set()

    @property
    def asking_command(self) -> bool:
        """*Command…* is chosen: the field takes a command line."""
        return self.subject == COMMAND_ENTRY

    def _subject_changed(self, _: str) -> None:
        command = self.asking_command
        self.solver_edit.setPlaceholderText(COMMAND_HINT if command else SOLVER_HINT)
        self.add_solver_button.setText("Add command" if command else "Add solver")
        self.solver_edit.setToolTip(COMMAND_TIP if command else SOLVER_TIP)
        if command:
            self.solver_edit.setFocus()
        self.changed.emit()

    def add_solver(self) -> bool:
        """Add what the field names: a command line while *Command…* is chosen (or one typed as
        ``command:…``), else a solver; the subject list then shows it chosen."""
        text = self.solver_edit.text().strip()
        try:
            if self.asking_command or text.startswith(COMMAND_PREFIX):
                spec = self.model.subjects.add_command(text)
            else:
                spec = self.model.add_subject(text)
        except PanelError:
            return False
        if self.subject_combo.findText(spec) < 0:  # before Command…, which stays last
            self.subject_combo.insertItem(self.subject_combo.count() - 1, spec)
        self.subject_combo.setCurrentText(spec)
        self.solver_edit.clear()
        return True

    def run(self) -> bool:
        """Start the selected subject on a fresh session in a worker; False when it cannot start."""
        if self.running:
            self.model.notify("warning", "wait for the current work to finish before running")
            return False
        spec = self.subject
        try:
            job = self.model.prepare_run(spec)
        except PanelError:
            return False
        self.job = job
        self.start(job.work, f"{spec} working…", lambda run, job=job: self.ran.emit(job, run), job.subject_name)
        return True

    def stop(self) -> bool:
        """Stop the running subject (False when no subject is running)."""
        if self.job is None or not self.running:
            return False
        self.job.stop.set()
        self.busy.retext("stopping…")
        self.stop_button.setEnabled(False)
        return True

    def start(self, work: Any, busy_text: str, done: Any, what: str) -> None:
        """Run ``work()`` in a worker thread with the bar busy; ``done(result)`` runs back on the GUI thread."""
        from napari.qt.threading import create_worker

        def failed(exc: BaseException) -> None:
            text = str(exc) if isinstance(exc, PanelError) else f"{what}: {type(exc).__name__}: {exc}"
            self.model.notify("error", text)

        worker = create_worker(closing_connections(work), _start_thread=False)
        worker.returned.connect(done)
        worker.errored.connect(failed)
        worker.finished.connect(self._work_finished)
        self.worker = worker
        self.busy_text = busy_text
        self.busy.start(busy_text)
        self.changed.emit()
        worker.start()

    def _work_finished(self) -> None:
        self.worker = None
        self.job = None
        self.busy.stop(f"{self.busy_text.rstrip('…')}: done")
        self.changed.emit()

    def show_controls(self, controls: Controls) -> None:
        """Enable Run, Score and Stop as ``controls`` say; grey each subject that cannot work the case."""
        for button, control in (
            (self.run_button, controls.run),
            (self.score_button, controls.score),
            (self.stop_button, controls.stop),
        ):
            button.setEnabled(control.enabled)
            button.setToolTip(control.why)
        items = self.subject_combo.model()
        for i in range(self.subject_combo.count()):
            text = self.subject_combo.itemText(i)
            problem = controls.subjects.get(text, "")
            item = items.item(i) if hasattr(items, "item") else None
            if item is not None:
                item.setEnabled(not problem)
                item.setToolTip(COMMAND_TIP if text == COMMAND_ENTRY else problem or text)

    def subject_enabled(self, spec: str) -> bool:
        """Whether ``spec`` is selectable in the subject list now."""
        i = self.subject_combo.findText(spec)
        items = self.subject_combo.model()
        item = items.item(i) if i >= 0 and hasattr(items, "item") else None
        return bool(item is not None and item.isEnabled())
