"""The calibration rule, run for real: on every curated case the reference passes and the naive
baseline and ``nop`` fail (the table in docs/cases.md shows the same runs for every case)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from imagebench.cases import all_cases

REPO = Path(__file__).resolve().parent.parent


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("calibration_table", REPO / "tools" / "calibration_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("calibration_table", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


CURATED = [c for c in all_cases() if c.kind == "curated"]


@pytest.fixture(scope="module")
def curated_rows() -> dict[str, Any]:
    return {row.label: row for row in _tool().calibrate(CURATED)}


@pytest.mark.parametrize("label", [c.label for c in CURATED])
def test_reference_passes_and_the_naive_answers_fail_every_curated_case(label: str, curated_rows: dict) -> None:
    row = curated_rows[label]
    assert not row.skipped, f"{label} did not run: {row.skipped}"
    assert row.scores["reference"].passed, f"{label}: the reference fails ({row.scores['reference']})"
    assert not row.scores["nop"].passed
    assert "baseline" in row.scores, f"{label} declares no naive baseline"
    assert not row.scores["baseline"].passed, f"{label}: the naive baseline passes ({row.scores['baseline']})"


def test_the_table_renders_every_metric_and_names_a_baseline_that_passes() -> None:
    tool = _tool()
    row = tool.CaseRow("s/c", "s", "curated", "golden", {"err": 0.5, "miss": 0.0})
    row.scores = {
        "reference": tool.Score("ok", True, {"err": 0.25, "miss": 0.0}),
        "baseline": tool.Score("ok", True, {"err": 0.4, "miss": 0.0}),
        "nop": tool.Score("no-result", False, {"err": None, "miss": None}),
    }
    text = tool.render([row])
    assert "| s | `c` | curated, golden | `err` | 0.5 | 0.25 | 2x | 0.4 | pass | no-result |" in text
    assert "| `miss` | 0 | 0 | exact |" in text
    assert "the naive baseline fails 0 of 1" in tool.summary([row])


def test_docs_hold_the_table_between_its_markers() -> None:
    tool = _tool()
    text = (REPO / "docs" / "cases.md").read_text(encoding="utf-8")
    assert tool.BEGIN in text and tool.END in text
    table = text.split(tool.BEGIN, 1)[1].split(tool.END, 1)[0]
    for case in all_cases():
        assert f"`{case.case_id}`" in table, f"{case.label} is missing from the calibration table; run {tool.COMMAND}"
