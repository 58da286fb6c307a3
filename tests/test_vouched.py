"""A report that reads whole only the samples it shows (the rest counted from their signed journal
lines), and a resume that keeps its units as columns: each rule tried with a dishonest input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case, resign_run

from imagebench.executor import resume_run, run_cases
from imagebench.records import SampleSummary, read_record
from imagebench.report import page_view, read_page, write_html_report
from imagebench.runs.brief import SHOWN_FIRST
from imagebench.runs.columns import CaseColumns, StoredSamples
from imagebench.runs.journal import JOURNAL_NAME, brief_of, digest
from imagebench.runs.layout import RunFolderError
from imagebench.runs.reader import read_run
from imagebench.runs.vouched import LineBriefs
from imagebench.runs.writer import summarize_case
from imagebench.subjects import ReferenceSubject

LABEL = "toy/rectangle"
N = SHOWN_FIRST + 6


def _wrong(session: Any) -> None:
    image = np.asarray(session.namespace["image"])
    session.namespace["mask"] = image > 0.5
    session.namespace["area"] = 3


def _run(tmp: Path, samples: int = N, reference: Any = None) -> Path:
    case = make_toy_case(reference=reference) if reference is not None else make_toy_case()
    return run_cases([case], ReferenceSubject(), samples=samples, out=tmp, progress=False, artifacts="none").run_dir


def _summary(run_dir: Path, n: int) -> Path:
    return run_dir / "reference" / LABEL / f"sample-{n}" / "summary.json"


def _same_size_forgery(path: Path) -> None:
    """A changed summary of the same size: one digit of a recorded time changed."""
    text = path.read_text()
    found = re.search(r'("build_s": )(\d)', text)
    assert found is not None
    digit = "1" if found.group(2) != "1" else "2"
    forged = text[: found.start(2)] + digit + text[found.end(2) :]
    assert len(forged) == len(text) and forged != text
    path.write_text(forged)


def _view(page: Any) -> dict[str, Any]:
    view = page_view(page)
    return {k: view[k] for k in ("figures", "coverage", "results")}


def test_the_page_counts_the_samples_it_does_not_show_from_their_lines_and_says_so(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    page, whole = read_page(run_dir), read_page(run_dir, check_all=True)
    assert (page.contents.read_whole, page.contents.vouched) == (SHOWN_FIRST, N - SHOWN_FIRST)
    assert (whole.contents.read_whole, whole.contents.vouched) == (N, 0)
    assert _view(page) == _view(whole)  # the same figures, counts and rows, whichever way they were read
    assert page.cases[0].total == N and page.aggregates[0].cases[0].samples == N
    html = write_html_report(run_dir).read_text()
    assert f"the other {N - SHOWN_FIRST} vouched for by their signed journal lines" in html
    assert "--check-all" in html and f"all {page.contents.journal_check.lines} line(s) verified" in html


def test_a_forged_summary_is_named_shown_or_not_and_check_all_catches_one_of_the_same_size(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    _same_size_forgery(_summary(run_dir, 1))  # shown: read whole, its digest checked
    page = read_page(run_dir)
    assert page.contents.forged and any("digest mismatch" in p for p in page.contents.integrity)
    run_dir = _run(tmp_path / "b")
    _same_size_forgery(_summary(run_dir, N - 1))  # not shown, same size: vouched for by its line
    page = read_page(run_dir)
    assert not page.contents.forged and page.contents.vouched == N - SHOWN_FIRST
    whole = read_page(run_dir, check_all=True)  # the check every page names finds it
    assert whole.contents.forged
    assert any(f"{LABEL}#{N - 1}" in p and "digest mismatch" in p for p in whole.contents.integrity)
    path = _summary(run_dir, N - 2)
    path.write_text(path.read_text() + " ")  # not shown, another size: the size check finds it
    page = read_page(run_dir)
    assert page.contents.forged
    assert any(f"{LABEL}#{N - 2}" in p and "its line says" in p for p in page.contents.integrity)
    path.unlink()  # gone
    page = read_page(run_dir)
    assert any(f"{LABEL}#{N - 2}" in p and "missing" in p for p in page.contents.integrity)


def test_a_brief_changed_in_its_line_breaks_the_chain(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    path = run_dir / JOURNAL_NAME
    text = path.read_text()
    line = next(x for x in text.splitlines() if f'"sample":{N - 1},' in x and '"event":"unit"' in x)
    assert '"passed":true' in line
    path.write_text(text.replace(line, line.replace('"passed":true', '"passed":false')))
    page = read_page(run_dir)
    assert page.contents.forged and page.contents.vouched == 0  # a journal that does not verify vouches for nothing
    assert any("does not verify under the journal key" in p for p in page.contents.integrity)


def test_a_signed_brief_that_its_summary_contradicts_is_named_forged(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, reference=_wrong)
    path = run_dir / JOURNAL_NAME
    text = path.read_text()
    # a key holder's line: a failing sample's brief made to pass, signed again as it stands
    line = next(x for x in text.splitlines() if '"sample":3,' in x and '"event":"unit"' in x)
    forged = line.replace('"fail"]', '"pass"]', 1)
    assert forged != line
    path.write_text(text.replace(line, forged))
    resign_run(run_dir, briefs=False)
    page = read_page(run_dir)
    assert page.contents.forged
    assert any(f"{LABEL}#3" in p and "disagrees with its journal line's brief" in p for p in page.contents.integrity)


def test_line_briefs_give_back_each_brief_and_the_last_line_wins(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, 2, reference=_wrong)
    summary = read_record(_summary(run_dir, 0), SampleSummary)
    data = _summary(run_dir, 0).read_bytes()
    brief = brief_of(summary, data)
    odd = brief.model_copy(update={"fixture": "curated:abc", "metrics": [*brief.metrics, brief.metrics[0]]})
    briefs = LineBriefs()
    briefs.set(LABEL, 5, brief)
    briefs.set(LABEL, 6, odd)
    briefs.set(LABEL, 7, brief.model_copy(update={"fixture": None, "passed": True}))
    got = briefs.get(LABEL, 5)
    assert got is not None and (got.bytes, got.fixture, got.passed) == (brief.bytes, brief.fixture, brief.passed)
    assert sorted(got.metrics) == sorted(brief.metrics)
    assert briefs.get(LABEL, 6) == odd and briefs.get(LABEL, 4) is None and briefs.get("other", 5) is None
    got7 = briefs.get(LABEL, 7)
    assert got7 is not None and got7.fixture is None and got7.passed
    briefs.set(LABEL, 5, None)  # a later line without a brief (an older version's): the earlier one is gone
    assert briefs.get(LABEL, 5) is None


# --------------------------------------------------------------------------- the resume's columns


def test_columns_summarise_a_case_as_its_summaries_do_in_any_order(tmp_path: Path) -> None:
    ok = read_run(_run(tmp_path, 3))
    bad = read_run(_run(tmp_path / "b", 3, reference=_wrong))
    samples = [*ok.samples(LABEL), *bad.samples(LABEL)]
    samples = [s.model_copy(update={"sample": i, "reason": s.reason or f"r{i % 2}"}) for i, s in enumerate(samples)]
    columns = CaseColumns(len(samples))
    for row in (5, 0, 3, 1, 4, 2):  # as dask workers finish
        columns.add(row, samples[row])
    assert columns.counts() == {"ok": 3, "wrong-answer": 3} == CaseColumns.of(samples).counts()
    assert columns.metric_means() == CaseColumns.of(samples).metric_means()
    assert columns.reasons() == list(dict.fromkeys(s.reason for s in samples if s.reason))[:5]
    with pytest.raises(ValueError, match="given twice"):
        columns.add(2, samples[2])
    case = make_toy_case()
    assert summarize_case(case, "reference", samples, 0.0) == summarize_case(case, "reference", list(samples), 0.0)


def test_a_kept_summary_changed_during_the_resume_is_refused_when_read_back(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, 3)
    folder = run_dir / "reference" / LABEL
    stored = StoredSamples(folder, 3)
    for n in range(3):
        data = _summary(run_dir, n).read_bytes()
        stored.on_disk(n, read_record(_summary(run_dir, n), SampleSummary), digest(data))
    assert [s.sample for s in stored] == [0, 1, 2] and stored.complete and not stored.in_memory
    _same_size_forgery(_summary(run_dir, 1))
    with pytest.raises(RunFolderError, match="sample-1/summary.json: changed since the resume checked it"):
        list(stored)


def test_a_resumed_run_keeps_its_units_as_columns_and_reads_them_back_checked(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, 4, reference=_wrong)
    before = json.loads((run_dir / "reference" / LABEL / "summary.json").read_text())
    result = resume_run(run_dir, cases=[make_toy_case(reference=_wrong)], progress=False)
    samples = result.samples[LABEL]
    assert isinstance(samples, StoredSamples) and not samples.in_memory  # none held: read back when looked at
    assert [s.status for s in samples] == ["wrong-answer"] * 4
    after = json.loads((run_dir / "reference" / LABEL / "summary.json").read_text())
    assert {k: v for k, v in after.items() if k != "extra"} == {k: v for k, v in before.items() if k != "extra"}
    assert {k: v for k, v in after["extra"].items() if k != "build_s"} == {
        k: v for k, v in before["extra"].items() if k != "build_s"
    }
    assert result.record.counts == {"wrong-answer": 4} and result.verdicts == {LABEL: "fail"}
