"""A subject cannot write lines of its own into the results pane's explanation: a ``command:``
subject whose ``outputs/answer.json`` carries a key holding newlines (forged "matched" lines and a
verdict under the real one) sees it quoted on one line (``_explain.plain``). (Found by a red team.)"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from imagebench.sandbox.policy import unavailable_reason
from napari_imagebench._model import BenchModel

needs_bwrap = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
FORGED = "\n\nThe answer, field by field (1 of 1 matched):\n  count: matched: exact\n\nAll checks passed"


@needs_bwrap
def test_a_subjects_answer_key_cannot_write_lines_into_the_explanation(tmp_path: Path) -> None:
    from imagebench.cases import get_case

    label = "segment-nuclei/count-nuclei"
    model = BenchModel(cases=lambda: [get_case(label)], outcome_root=tmp_path / "out")
    model.load(label)
    code = f"open('outputs/answer.json', 'w').write({json.dumps({'count': 3, FORGED: 1})!r})"
    spec = model.subjects.add_command(f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}")
    job = model.prepare_run(spec)
    model.finish_run(job, job.work())
    row = model.score(spec)
    assert row.status == "wrong-answer"
    text = model.explanation(row).text
    # what the subject wrote must never stand in the text as lines of the panel's own
    assert "\n  count: matched: exact\n" not in text and "\nAll checks passed" not in text, text
