"""The sitting's folder and report, as the panel opens them: Open run folder, Open report, Copy path. Qt-free.

The folder is the panel's sitting (:mod:`imagebench.runs.sitting`: a run folder per subject and one
``report.html`` over them). Opening it is the desktop's business: on Linux the panel runs
``xdg-open`` itself and hears its exit status, since Qt's ``QDesktopServices.openUrl`` answers True
as soon as ``xdg-open`` starts, even when no file manager or browser exists (as under Xvfb), and
elsewhere it asks Qt. Either failure is an error a person sees: a notification and a results line
naming the path, which Copy path puts on the clipboard. What the folder holds shows the truth of
every case scored (its artifacts, a curated fixture's provenance), so opening it flags the loaded
case's next samples as viewing its artifacts does (``saw-artifacts``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from napari_imagebench._base import Notices

if TYPE_CHECKING:
    from napari_imagebench._results_model import ResultsModel
    from napari_imagebench._workbench_model import WorkbenchModel

#: what the panel opens, as its messages name them
FOLDER, REPORT = "the run folder", "the report"


def open_command(path: Path) -> list[str] | None:
    """The command that opens ``path`` with the desktop's program and says by its exit status
    whether it could (``xdg-open PATH`` on Linux and the BSDs, where it is installed); None where
    Qt's ``QDesktopServices.openUrl`` is asked instead (macOS, Windows, no ``xdg-open``)."""
    if not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return None
    program = shutil.which("xdg-open")
    return [program, str(path)] if program else None


class FolderModel:
    """What Open run folder, Open report and Copy path act on, and what a person is told."""

    def __init__(self, notices: Notices, ledger: ResultsModel, workbench: WorkbenchModel) -> None:
        self.notices, self.ledger, self.workbench = notices, ledger, workbench

    def folder(self) -> Path:
        """The sitting's folder; PanelError (a warning) before the first sample."""
        path = self.ledger.sitting_dir
        if path is None:
            raise self.notices.fail("no run folder yet: score a sample first", "warning")
        return path

    def report(self) -> Path:
        """The sitting's ``report.html``, written again now (every subject's samples so far)."""
        self.folder()
        return self.ledger.write_report()

    def handed_out(self) -> None:
        """The sitting's folder or report is about to be opened or its path copied: what they hold
        shows the truth of every case scored, so the loaded case's next samples are flagged as
        after View artifacts, whether or not the desktop then opens it (the path is told either way)."""
        for result in self.ledger.results:  # flags the loaded case's next samples when it was scored
            self.workbench.artifacts_shown(result)

    def opened(self, what: str, path: Path) -> None:
        """The desktop opened ``path``."""
        self.notices.notify("info", f"opened {what}: {path}")

    def open_failed(self, what: str, path: Path, why: str) -> None:
        """The desktop could not open ``path``: an error the person sees, with the path."""
        self.notices.notify("error", f"{what} could not be opened ({why}); it is {path} (Copy path puts it on the clipboard)")

    def copied(self, path: Path) -> None:
        self.handed_out()
        self.notices.notify("info", f"copied to the clipboard: {path}")
