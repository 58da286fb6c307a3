"""Work under way, where a napari user looks for it: the panel's busy bar, napari's status bar and
napari's activity dock, each with the seconds gone by (a Load that builds a fixture, a Run, a
Score), and what it took once it is done.

The elapsed time is redrawn by a timer on the GUI thread, so it moves while a worker thread does
the work. Work that lasts (:data:`ACTIVITY_AFTER_S`) also gets an indeterminate
``napari.utils.progress`` in napari's activity dock; a second's work never does (opening one costs
napari tens of milliseconds, a tenth of a quick Run). Work done on the GUI thread (Score) is said
before and after (:meth:`Busy.during`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from qtpy.QtCore import QTimer
from qtpy.QtWidgets import QProgressBar

#: how often the elapsed time is redrawn (ms)
TICK_MS = 200
#: work still under way after this many seconds gets an entry in napari's activity dock
ACTIVITY_AFTER_S = 1.0


def elapsed_text(text: str, seconds: float) -> str:
    """``text`` and the seconds gone by: ``loading x… 2.4 s``."""
    return f"{text} {seconds:.1f} s"


class Busy:
    """One piece of work at a time, shown on ``bar`` and through ``status`` (napari's status bar)."""

    def __init__(self, bar: QProgressBar, status: Callable[[str], None] | None = None) -> None:
        self.bar, self.status = bar, status
        self.text = ""
        self.began: float | None = None
        self.activity: Any = None  # napari's progress in the activity dock
        self.timer = QTimer(bar)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)

    @property
    def seconds(self) -> float:
        """Seconds since :meth:`start` (0 when nothing is under way)."""
        return time.perf_counter() - self.began if self.began is not None else 0.0

    def start(self, text: str) -> None:
        """Show ``text`` as busy: the bar indeterminate, the status bar counting (and the activity
        dock, once the work has lasted :data:`ACTIVITY_AFTER_S`)."""
        self.stop(None)
        self.text, self.began = text, time.perf_counter()
        self.bar.setRange(0, 0)  # neither a builder nor a subject reports progress of its own
        self.bar.setTextVisible(True)
        self._tick()
        self.timer.start()

    def retext(self, text: str) -> None:
        """The work goes on under another name (``stopping…``)."""
        self.text = text
        self._tick()

    def stop(self, done: str | None) -> float:
        """End the work; ``done`` (``loaded x``) is said with the seconds it took. Returns them."""
        if self.began is None:
            return 0.0
        seconds = self.seconds
        self.timer.stop()
        self.began = None
        if self.activity is not None:
            self.activity.close()
            self.activity = None
        self.bar.setRange(0, 1)
        self.bar.setValue(1)
        self.bar.setTextVisible(False)
        if done is not None and self.status is not None:
            self.status(f"{done} in {seconds:.1f} s")
        return seconds

    @contextmanager
    def during(self, text: str, done: str) -> Iterator[None]:
        """Work done on the GUI thread itself (Score): ``text`` is drawn before it starts, and
        ``done`` said with the seconds it took."""
        self.start(text)
        self.bar.repaint()  # the event loop waits for the work: draw the text now
        try:
            yield
        finally:
            self.stop(done)

    def _open_activity(self) -> None:
        try:
            from napari.utils import progress

            self.activity = progress(total=0, desc=self.text)
        except Exception:  # no napari progress (an old napari): the bar and status bar still say it
            self.activity = None

    def _tick(self) -> None:
        if self.began is None:
            return
        if self.activity is None and self.seconds >= ACTIVITY_AFTER_S:
            self._open_activity()
        line = elapsed_text(self.text, self.seconds)
        self.bar.setFormat(line)
        if self.activity is not None:
            self.activity.set_description(line)
        if self.status is not None:
            self.status(line)
