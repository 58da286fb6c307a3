"""The calibration rule, run for real: on every curated case the reference passes and the naive
baseline and ``nop`` fail (the table in docs/cases.md shows the same runs for every case)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from imagebench.cases import all_cases
from imagebench.cli.calibrate import render_table, summary_line
from imagebench.executor.calibration import CaseCalibration, SubjectScore, calibrate

REPO = Path(__file__).resolve().parent.parent


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("calibration_table", REPO / "tools" / "calibration_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("calibration_table", module)
    spec.loader.exec_module(module)
    return module


CURATED = [c for c in all_cases() if c.kind == "curated"]


@pytest.fixture(scope="module")
def curated_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseCalibration]:
    result = calibrate(CURATED, out=tmp_path_factory.mktemp("calibration"), remember=False)
    return {row.label: row for row in result.cases}


@pytest.mark.parametrize("label", [c.label for c in CURATED])
def test_reference_passes_and_the_naive_answers_fail_every_curated_case(label: str, curated_rows: dict) -> None:
    row = curated_rows[label]
    assert row.verdict != "not-run", f"{label} did not run: {row.not_run}"
    assert row.scores["reference"].passed, f"{label}: the reference fails ({row.scores['reference']})"
    assert not row.scores["nop"].passed
    assert "baseline" in row.scores, f"{label} declares no naive baseline"
    assert not row.scores["baseline"].passed, f"{label}: the naive baseline passes ({row.scores['baseline']})"
    assert row.verdict == "ok" and row.problems == [], row.problems


def test_the_table_renders_every_metric_and_names_a_baseline_that_passes() -> None:
    row = CaseCalibration(
        label="s/c",
        skill="s",
        kind="curated",
        case_class="golden",
        limits={"err": 0.5, "miss": 0.0},
        scores={
            "reference": SubjectScore(status="ok", verdict="pass", values={"err": 0.25, "miss": 0.0}),
            "baseline": SubjectScore(status="ok", verdict="pass", values={"err": 0.4, "miss": 0.0}),
            "nop": SubjectScore(status="no-result", verdict="fail", values={"err": None, "miss": None}),
        },
        verdict="warning",
        problems=["baseline passes: the limits cannot tell the naive answer from a good one"],
    )
    text = render_table([row])
    assert "| s | `c` | curated, golden | `err` | 0.5 | 0.25 | 2x | 0.4 | pass | no-result | baseline passes |" in text
    assert "| `miss` | 0 | 0 | exact |" in text
    assert "the naive baseline fails 0 of 1" in summary_line([row])
    assert "the calibration holds for 0 of 1" in summary_line([row])


def test_docs_hold_the_table_between_its_markers() -> None:
    tool = _tool()
    text = (REPO / "docs" / "cases.md").read_text(encoding="utf-8")
    assert tool.BEGIN in text and tool.END in text
    table = text.split(tool.BEGIN, 1)[1].split(tool.END, 1)[0]
    assert "| calibration |" in table.splitlines()[1], f"the table's columns are stale; run {tool.COMMAND}"
    for case in all_cases():
        assert f"`{case.case_id}`" in table, f"{case.label} is missing from the calibration table; run {tool.COMMAND}"
