"""Running units and the run folder they leave.

- :mod:`.runner`: ONE unit in three phases (open, work, finish);
- :mod:`.folder`: the run folder: its layout, its names, the verdict of a case, the one reader;
- :mod:`.journal`: the run's journal and lock; :mod:`.artifacts`: what a person looks at (PNGs, summaries);
- :mod:`.receipt`: what a run ran on; :mod:`.sealed`: seeds derived from a secret;
- :mod:`.fingerprint`: a case's identity (pinned suites); :mod:`.progress`: the one progress bar.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebench._lazy import lazy_package

# The public names are the imports of the TYPE_CHECKING block below: declared once.
__getattr__, __dir__, __all__ = lazy_package(__name__, __file__)

if TYPE_CHECKING:  # pragma: no cover
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.reader import RunContents, read_run
    from imagebench.runs.runner import finish_unit, open_unit, run_unit, work_unit
    from imagebench.runs.verdict import RunResult
