"""The sitting's folder: Open run folder, Open report and Copy path, in one row. Its model is
:class:`napari_imagebench._folder_model.FolderModel` (what is opened, what a person is told).

On Linux the folder and the report are opened with ``xdg-open`` (a :class:`QProcess` whose exit
status is heard: Qt's ``openUrl`` says True as soon as it starts it, even with no file manager or
browser to open anything); elsewhere with ``QDesktopServices.openUrl``, whose False is heard. A
failure is a notification and a results line naming the path.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from qtpy.QtCore import QProcess, QUrl
from qtpy.QtGui import QDesktopServices
from qtpy.QtWidgets import QApplication, QHBoxLayout, QPushButton, QWidget

from napari_imagebench._folder_model import FOLDER, REPORT, open_command
from napari_imagebench._model import BenchModel, PanelError
from napari_imagebench._style import name_children

if TYPE_CHECKING:
    from napari_imagebench._controls import Controls


class FolderButtons(QWidget):
    """Open run folder, Open report, Copy path: the sitting's folder (every subject's run) and its page."""

    def __init__(self, model: BenchModel) -> None:
        super().__init__()
        self.model = model
        self.openers: list[QProcess] = []  # xdg-open processes not yet heard from
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.folder_button = QPushButton("Open run folder")
        self.folder_button.setToolTip(
            "open this sitting's folder: a run folder per subject (run.json, journal, receipt, samples) and report.html"
        )
        self.folder_button.clicked.connect(lambda: self.open_run_folder())
        self.report_button = QPushButton("Open report")
        self.report_button.setToolTip("write the sitting's report.html again (one page over every subject) and open it")
        self.report_button.clicked.connect(lambda: self.open_report())
        self.copy_path_button = QPushButton("Copy path")
        self.copy_path_button.setToolTip("put the sitting's folder path on the clipboard")
        self.copy_path_button.clicked.connect(lambda: self.copy_path())
        for button in (self.folder_button, self.report_button, self.copy_path_button):
            row.addWidget(button)
        self.setObjectName("folder_buttons")
        name_children(self)

    def show_controls(self, controls: Controls) -> None:
        for button in (self.folder_button, self.report_button, self.copy_path_button):
            button.setEnabled(controls.folder.enabled)

    def run_folder_path(self) -> Path | None:
        return self.model.ledger.sitting_dir

    def open_run_folder(self) -> Path | None:
        try:
            path = self.model.folders.folder()
        except PanelError:
            return None
        self.open_path(FOLDER, path)
        return path

    def open_report(self) -> Path | None:
        try:
            path = self.model.folders.report()
        except PanelError:
            return None
        self.open_path(REPORT, path)
        return path

    def copy_path(self) -> Path | None:
        try:
            path = self.model.folders.folder()
        except PanelError:
            return None
        clipboard = QApplication.clipboard()
        if clipboard is None:
            self.model.notify("error", f"no clipboard to copy to; the run folder is {path}")
            return None
        clipboard.setText(str(path))
        self.model.folders.copied(path)
        return path

    def open_path(self, what: str, path: Path) -> bool:
        """Hand ``path`` to the desktop; False when it says at once that it cannot (a later
        failure of ``xdg-open`` is told when it exits)."""
        folders = self.model.folders
        folders.handed_out()
        argv = open_command(path)
        if argv is None:
            if QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))):
                folders.opened(what, path)
                return True
            folders.open_failed(what, path, "no program to open it: no file manager or browser")
            return False
        process = QProcess()
        process.setProgram(argv[0])
        process.setArguments(argv[1:])
        process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)

        def finished(code: int, _status: object) -> None:
            said = bytes(process.readAll().data()).decode("utf-8", "replace").strip().splitlines()
            if code == 0:
                folders.opened(what, path)
            else:
                folders.open_failed(what, path, f"xdg-open exited {code}: {said[-1] if said else 'no message'}")
            self._forget(process)

        def errored(error: object) -> None:
            if process.state() == QProcess.ProcessState.NotRunning and error == QProcess.ProcessError.FailedToStart:
                folders.open_failed(what, path, f"xdg-open could not start: {process.errorString()}")
                self._forget(process)

        process.finished.connect(finished)
        process.errorOccurred.connect(errored)
        self.openers.append(process)
        process.start()
        return True

    def _forget(self, process: QProcess) -> None:
        if process in self.openers:
            self.openers.remove(process)
        process.deleteLater()
