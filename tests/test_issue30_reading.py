"""A result a person can read (issue 30, item 7): report.html, the results table and ``run --json``
show what the subject left (a structured answer's values, an array's shape and dtype), the
scorer's reason per field, and links to its stdout/stderr; the explanation is derived once, in
the core (imagebench.runs.explain), and the panel's module is that one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import make_toy_case

from imagebench import cli
from imagebench.executor import run_cases
from imagebench.report import write_html_report
from imagebench.runs.explain import answered, describe_leavings, explain
from imagebench.subjects import parse_subject

CASE = "segment-nuclei/count-nuclei"
#: a command that answers a wrong count (count-nuclei draws 6 to 14 nuclei, whatever seed a seal
#: derives), with a hostile extra field, and prints to both streams
WRONG = (
    "command:mkdir -p outputs; "
    """printf '{"count": 70, "<script>alert(1)</script>": "[red]x[/red]"}' > outputs/answer.json; """
    "echo said-on-stdout; echo said-on-stderr >&2"
)


def test_describe_leavings_tells_arrays_by_shape_and_dtype_and_answers_by_value() -> None:
    described = describe_leavings(
        {
            "labels": np.zeros((3, 4), np.uint16),
            "answer": {"count": 3},
            "area": np.float64(2.5),
            "big": list(range(5000)),
        }
    )
    assert described["labels"] == {"shape": [3, 4], "dtype": "uint16"}
    assert described["answer"] == {"value": {"count": 3}} and described["area"] == {"value": 2.5}
    assert described["big"]["json_chars"] > 2000 and len(described["big"]["value_head"]) == 2000


def test_the_panel_explains_with_the_core_s_one_implementation() -> None:
    import napari_imagebench._explain as panel
    from imagebench.runs import explain as core

    assert panel.explain is core.explain and panel.field_reasons is core.field_reasons
    assert panel.Explanation is core.Explanation and panel.sample_number is core.sample_number


def test_an_array_leaving_is_shown_by_shape_and_dtype(tmp_path: Path) -> None:
    result = run_cases([make_toy_case()], parse_subject("reference"), out=tmp_path, progress=False)
    (sample,) = result.samples["toy/rectangle"]
    left = dict(answered(sample))
    assert left["mask"].startswith("array of shape (") and "dtype" in left["mask"]
    assert "What the subject left:" in explain(sample).text
    html = write_html_report(result.run_dir).read_text()
    assert "what the subject left" in html and "array of shape (" in html


@pytest.fixture(scope="module")
def wrong_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    assert cli.main(["run", "-k", CASE, "--subject", WRONG, "--out", str(out), "--quiet", "--no-report"]) == 1
    (run_dir,) = out.glob("run-*")
    return run_dir


def test_the_report_shows_the_answer_the_field_reasons_and_the_output_links(wrong_run: Path) -> None:
    html = write_html_report(wrong_run).read_text()
    assert "what the subject left" in html
    assert "&#34;count&#34;: 70" in html  # the answer as submitted, escaped
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html  # a subject's text stays text
    assert "answered 70, which is not the expected integer" in html
    stdout = next(wrong_run.rglob("sample-0/stdout.txt"))
    rel = stdout.relative_to(wrong_run).as_posix()
    assert f'href="{rel}"' in html and f'href="{rel[: -len("stdout.txt")]}stderr.txt"' in html
    assert "said-on-stdout" in stdout.read_text()


def test_the_results_table_and_json_show_the_answer_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "-k", CASE, "--subject", WRONG, "--out", str(tmp_path), "--no-report"]) == 1
    out = capsys.readouterr().out
    assert 'left answer: {"<script>alert(1)</script>": "[red]x[/red]", "count": 70}' in out.replace("\n", "")
    assert "count: answered 70, which is not the expected integer" in out
    assert cli.main(["run", "-k", CASE, "--subject", WRONG, "--out", str(tmp_path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)  # stdout holds the JSON alone
    assert data["exit_code"] == 1 and data["verdicts"]["fail"] == 1 and Path(data["report"]).is_file()
    (case,) = data["cases"]
    (sample,) = case["samples"]
    assert case["label"] == CASE and case["verdict"] == "fail" and sample["status"] == "wrong-answer"
    assert json.loads(sample["left"]["answer"])["count"] == 70
    assert {"field": "count", "verdict": "fail", "why": "answered 70, which is not the expected integer"} in sample[
        "fields"
    ]
    assert Path(sample["logs"]["stderr.txt"]).read_text().strip() == "said-on-stderr"


def test_tables_take_the_terminal_s_width_or_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    from imagebench.cli.tables import PIPED_WIDTH, console, console_width

    monkeypatch.setenv("COLUMNS", "213")
    assert console_width() == 213 and console().width == 213
    monkeypatch.delenv("COLUMNS")
    for name in ("stdout", "stderr", "stdin"):  # piped everywhere: a log, not an 80-column terminal
        monkeypatch.setattr(sys, name, io.StringIO())
    assert console_width() == PIPED_WIDTH and PIPED_WIDTH > 80
