"""The inspect hook that copies a finished task's log beside the run folders its samples wrote
(``<run folder>/inspect.eval``, or ``.json`` as the log was written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspect_ai.hooks import Hooks, RunEnd, hooks


@hooks(name="imagebench_logs", description="copy the inspect log of an imagebench/case task into its run folders")
class LogBeside(Hooks):
    async def on_run_end(self, data: RunEnd) -> None:
        # when the run ends every task's log is final, a task whose sample errored included (the
        # scorer raised: infra-error, harness-error), which ends without on_task_end
        for log in data.logs:
            _beside(log)


def _beside(header: Any) -> None:
    """Copy the log ``header`` names beside each run folder its samples wrote."""
    from inspect_ai.log import read_eval_log

    from imagebench.inspectai.task import LOG_NAME, run_folders

    location = getattr(header, "location", None)
    if not location or not header.eval.task.endswith("case"):
        return
    source = Path(location)
    if not source.is_file():
        return
    log = read_eval_log(str(source))
    for folder in run_folders(log):
        _copy(source, folder / f"{LOG_NAME}{source.suffix}")


def _copy(source: Path, target: Path) -> None:
    """``source`` to ``target`` atomically (a reader never sees half a log)."""
    import os
    import shutil
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
