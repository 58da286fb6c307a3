"""Suite runs for the Compare tab's tests: what ``imagebench run --suite`` does, through the API,
for any subject object (``tests/plugin/test_compare_model.py``, ``tests/napari/test_side_by_side.py``).

:class:`Shifted` leaves the toy case's rectangle one column to the right on even samples (it fails
those) and the right one on odd samples, so a comparison with ``reference`` has discordant pairs
and its difference panes show the column it got wrong."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from imagebench.case.model import Case
from imagebench.executor import run_cases
from imagebench.subjects import UnitContext
from imagebench.suite.model import SuiteManifest, write_suite
from imagebench.suite.record import RUN_INFO_KEY, SuiteRunInfo, conditions_now
from imagebench.suite.resolve import pin_suite
from imagebench.suite.sampling import assign

REVISION = "2026.11.0"


class Shifted:
    """The rectangle one column off on even samples (a wrong mask and area), right on odd ones."""

    name = "shifted"

    def bind(self, case: Case, context: UnitContext) -> Callable[[Any], None]:
        even = int(context.sample_dir.name.split("-")[1]) % 2 == 0

        def work(session: Any) -> None:
            mask = np.asarray(session.namespace["image"]) > 0.5
            if even:
                mask = np.roll(mask, 1, axis=1)
                mask[:, 0] = False
            session.namespace["mask"] = mask
            session.namespace["area"] = float(mask.sum()) * (1.2 if even else 1.0)

        return work


def pin(cases: Sequence[Case], suites: Path, suite_id: str = "toys") -> SuiteManifest:
    """Pin ``cases`` as suite ``suite_id`` and write its file into ``suites``."""
    manifest, problems = pin_suite(suite_id, REVISION, list(cases))
    assert manifest is not None, problems
    write_suite(suites / f"{suite_id}.json", manifest)
    return manifest


def suite_run(out: Path, manifest: SuiteManifest, cases: Sequence[Case], subject: Any, *, samples: int = 2) -> Path:
    """A run of every case of ``manifest`` by ``subject`` that records its cohort, as ``run --suite``."""
    assignment = assign(manifest, "all", 0)
    by_label = {c.label: c for c in cases}
    chosen = [by_label[label] for label in assignment.labels]
    info = SuiteRunInfo(
        requested=manifest.suite_id,
        assignment=assignment,
        conditions=conditions_now(samples=samples, timeout=None, cases=chosen),
    )
    result = run_cases(
        chosen, subject, samples=samples, out=out, progress=False, record_extra={RUN_INFO_KEY: info.model_dump(mode="json")}
    )
    return Path(result.run_dir)
