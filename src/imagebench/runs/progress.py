"""Progress a person can watch: one bar and one spinner, both on stderr, for every long job.

A run's units, a report's cases, a fixture tree's hashes and a suite's verification all show the
same bar (what it works on, done of total, elapsed, time left). ``enabled=False`` (``--quiet``,
or a caller that is not a terminal session) gives an object that accepts the same calls and
shows nothing, so callers never branch on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Bar:
    """A started progress bar; :meth:`advance` after each item (or each byte count, ``in_bytes``),
    :meth:`describe` for what is next."""

    def __init__(
        self, total: int, *, done: int = 0, description: str = "starting", in_bytes: bool = False, enabled: bool = True
    ) -> None:
        self._progress: Any = None
        self._task: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        count = (DownloadColumn(), TransferSpeedColumn()) if in_bytes else (MofNCompleteColumn(),)
        self._progress = Progress(
            TextColumn("[bold]{task.description}", justify="left"),
            BarColumn(),
            *count,
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = self._progress.add_task(description, total=total, completed=done)
        self._progress.start()

    def describe(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def advance(self, n: int = 1, *, description: str | None = None) -> None:
        if self._progress is not None:
            if description is not None:
                self._progress.update(self._task, description=description)
            self._progress.advance(self._task, n)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def spinner(text: str, *, enabled: bool = True) -> Iterator[None]:
    """A spinner saying what is starting (a cluster, a plane) while the block runs."""
    if not enabled:
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(text):
        yield
