"""Costs that grow with cases, not samples: --artifacts, a bounded report, streaming readers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case

from imagebench.executor import run_cases
from imagebench.report import REPORT_NAME, case_report_name, read_page, write_case_report, write_html_report
from imagebench.runs import keep
from imagebench.runs.brief import SHOWN_FIRST, Briefs
from imagebench.runs.journal import JOURNAL_NAME, check_journal, iter_journal_lines, read_journal_lines
from imagebench.runs.layout import RunFolderError
from imagebench.runs.reader import _disagreement, read_run
from imagebench.subjects import ReferenceSubject
from imagebench.suite.compare import load_run

LABEL = "toy/rectangle"


def _wrong(session: Any) -> None:
    image = np.asarray(session.namespace["image"])
    session.namespace["mask"] = image > 0.5
    session.namespace["area"] = 3  # far from the truth: a failing sample


def _run(tmp: Path, samples: int, artifacts: str | None, reference: Any = None) -> Path:
    case = make_toy_case(reference=reference) if reference is not None else make_toy_case()
    result = run_cases([case], ReferenceSubject(), samples=samples, out=tmp, progress=False, artifacts=artifacts)
    return result.run_dir


def _images(run_dir: Path) -> dict[int, list[str]]:
    folder = run_dir / "reference" / LABEL
    return {
        int(p.name.split("-")[1]): sorted(f.name for f in p.iterdir() if f.suffix in (".png", ".npy"))
        for p in sorted(folder.glob("sample-*"))
    }


# --------------------------------------------------------------------------- --artifacts


def test_auto_keeps_all_for_a_small_run_and_failures_for_a_large_one() -> None:
    assert keep.choose(None, keep.LARGE_RUN)["mode"] == "all"
    large = keep.choose("auto", keep.LARGE_RUN + 1)
    assert large["mode"] == "failures" and "large run" in large["why"]
    assert keep.choose("none", 5) == {"mode": "none", "asked": "none", "why": "--artifacts none"}
    with pytest.raises(ValueError, match="--artifacts: expected one of auto, all, failures, none"):
        keep.choose("some", 5)
    assert keep.keeps_images("failures", "ok", keep.PASSING_KEPT - 1)
    assert not keep.keeps_images("failures", "ok", keep.PASSING_KEPT)
    assert keep.keeps_images("failures", "wrong-answer", 10**6)
    assert not keep.keeps_images("none", "wrong-answer", 0) and keep.keeps_images("all", "ok", 10**6)


@pytest.mark.parametrize("mode", ["all", "failures", "none"])
def test_artifacts_modes_keep_and_drop_the_right_files(tmp_path: Path, mode: str) -> None:
    run_dir = _run(tmp_path, 5, mode)
    images = _images(run_dir)
    kept = {n for n, names in images.items() if names}
    want = {"all": set(range(5)), "failures": set(range(keep.PASSING_KEPT)), "none": set()}[mode]
    assert kept == want
    for n, names in images.items():
        summary = json.loads((run_dir / "reference" / LABEL / f"sample-{n}" / "summary.json").read_text())
        if n in want:
            assert names and summary["artifacts"]
        else:
            assert summary["artifacts"] == [] and summary["detail"]["images"] == f"not kept (--artifacts {mode})"
    assert json.loads((run_dir / "run.json").read_text())["extra"]["artifacts"]["mode"] == mode
    contents = read_run(run_dir)
    assert contents.verified and not contents.problems  # the folder is held to what it kept
    page = (run_dir / REPORT_NAME).read_text() if (run_dir / REPORT_NAME).exists() else ""
    page = page or write_html_report(run_dir).read_text()
    assert "images kept" in page and f"--artifacts {mode}" in page  # the report says which


def test_failures_keep_their_images_and_a_dropped_image_put_back_is_named(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, 5, "failures", reference=_wrong)
    assert all(_images(run_dir).values())  # every sample failed: every one keeps its images
    passing = _run(tmp_path / "b", 5, "failures")
    lean = passing / "reference" / LABEL / "sample-4"
    assert not _images(passing)[4]
    (lean / "mask.png").write_bytes((passing / "reference" / LABEL / "sample-0" / "mask.png").read_bytes())
    entry = read_run(passing).units[(LABEL, 4)]
    assert not entry.usable and "mask.png" in entry.problem  # a file beside it that it never recorded


# --------------------------------------------------------------------------- a report that stays bounded


def test_a_case_with_many_samples_shows_a_few_and_pages_the_rest(tmp_path: Path) -> None:
    n = SHOWN_FIRST + 25
    run_dir = _run(tmp_path, n, "none")
    html = write_html_report(run_dir).read_text()
    assert html.count('class="sample"') == SHOWN_FIRST  # not every sample inline
    assert f'data-hidden="{n - SHOWN_FIRST}"' in html and "--case toy/rectangle --page N" in html
    page = read_page(run_dir)
    (view,) = page.cases
    assert view.total == n and view.counts == {"ok": n} and view.verdict == "pass"
    assert page.aggregates[0].cases[0].samples == n  # the figures count every sample, not those shown
    case_page = write_case_report(run_dir, LABEL, page=1)
    assert case_page.name == case_report_name(LABEL, 1) and case_page.read_text().count('class="sample"') == n
    with pytest.raises(Exception, match="--page: case toy/rectangle has .* 1 page"):
        write_case_report(run_dir, LABEL, page=2)


def test_failures_are_shown_beyond_the_first_samples(tmp_path: Path) -> None:
    briefs = Briefs()
    run_dir = _run(tmp_path, 3, "none")
    entry = read_run(run_dir).units[(LABEL, 0)]
    assert entry.summary is not None
    for n in range(100):
        status = "wrong-answer" if n >= 60 else "ok"
        fake = type(entry)(label=LABEL, sample=n, where=entry.path, journaled=True)
        fake.summary = entry.summary.model_copy(update={"sample": n, "status": status})
        assert briefs.take(fake) is False
    shown = briefs.case(LABEL).shown
    assert [s.sample for s in shown] == [*range(SHOWN_FIRST), *range(60, 70)]
    assert briefs.case(LABEL).counts() == {"ok": 60, "wrong-answer": 40}


# --------------------------------------------------------------------------- streaming readers


def _same(a: Any, b: Any) -> None:
    assert a.integrity == b.integrity and a.unverifiable == b.unverifiable and a.reruns == b.reruns
    assert a.case_problems == b.case_problems and a.case_forged == b.case_forged
    assert {k: v.model_dump() for k, v in a.case_summaries.items()} == {
        k: v.model_dump() for k, v in b.case_summaries.items()
    }
    assert a.journal_check == b.journal_check and a.problems == b.problems


def test_streaming_reads_give_what_the_whole_read_gives(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, 6, "failures", reference=_wrong)
    whole = read_run(run_dir)
    seen: list[tuple[str, int]] = []
    streamed = read_run(run_dir, on_sample=lambda e: seen.append((e.label, e.sample)) or False)
    _same(whole, streamed)
    assert seen == sorted(whole.units) and not streamed.units  # every sample handed over, none kept
    tally = streamed.tallies[LABEL]
    assert tally.disagreement(whole.case_summaries[LABEL]) == ""
    # the tally disagrees exactly where the whole read does
    summary = whole.case_summaries[LABEL]
    for changed in ({"passed": 2}, {"counts": {"ok": 6}}, {"metric_means": {"iou": 0.1}}):
        other = summary.model_copy(update=changed)
        assert tally.disagreement(other) == _disagreement(other, whole.samples(LABEL)) != ""
    # the journal read line by line is the journal read whole, and checks the same
    lines = read_journal_lines(run_dir / JOURNAL_NAME)
    assert list(iter_journal_lines(run_dir / JOURNAL_NAME)) == lines
    run_id = whole.record.run_id
    anchor = whole.receipt["journal"]
    assert check_journal(iter(lines), run_id, anchor) == check_journal(lines, run_id, anchor)
    lean, _ = load_run(run_dir, "A", lean=True)
    full, _ = load_run(run_dir, "A")
    assert lean is not None and full is not None
    for n, s in full.samples[LABEL].items():
        b = lean.samples[LABEL][n]
        assert (b.status, b.fixture_digest) == (s.status, s.fixture_digest)
        assert [(m.name, m.unit, m.value) for m in b.metrics] == [(m.name, m.unit, m.value) for m in s.metrics]


def test_a_forged_or_corrupt_journal_line_is_still_refused_when_streamed(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, 4, "none", reference=_wrong)
    path = run_dir / JOURNAL_NAME
    text = path.read_text()
    forged = re.sub(r'("sample":2,"status":)"wrong-answer"', r'\1"ok"', text, count=1)
    assert forged != text
    path.write_text(forged)
    for on_sample in (None, lambda e: False):
        contents = read_run(run_dir, on_sample=on_sample)
        assert contents.forged
        assert any("does not verify under the journal key" in p for p in contents.integrity)
    lines = text.splitlines(keepends=True)
    lines.insert(2, "{not json\n")
    path.write_text("".join(lines))
    with pytest.raises(RunFolderError, match=r"journal.jsonl: line 3: .*expected one JournalEntry"):
        read_run(run_dir, on_sample=lambda e: False)
    path.write_text("".join(lines[:2] + lines[3:]).replace(lines[1], "", 1))  # a line cut out of the chain
    contents = read_run(run_dir, on_sample=lambda e: False)
    assert contents.forged


def test_a_page_of_samples_checks_each_sample_it_shows(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, 3, "all")
    summary = run_dir / "reference" / LABEL / "sample-1" / "summary.json"
    raw = json.loads(summary.read_text())
    raw["reason"] = "edited by hand"
    summary.write_text(json.dumps(raw))
    page = read_page(run_dir)
    assert page.contents.forged
    assert any("sample 1" in p and "digest mismatch" in p for p in page.cases[0].problems)
    assert [s.sample for s in page.cases[0].samples] == [0, 2]


def test_scored_columns_give_back_each_brief_as_it_was_added(tmp_path: Path) -> None:
    from imagebench.records import MetricRecord as Metric
    from imagebench.runs.brief import ScoredColumns, scored_brief

    run_dir = _run(tmp_path, 2, "none", reference=_wrong)
    base = read_run(run_dir).units[(LABEL, 0)].summary
    assert base is not None
    m0 = base.metrics[0]
    odd = [Metric(**{**m0.model_dump(), "name": "zz", "value": None}), m0]  # another order, a None value
    variants = [
        base,
        base.model_copy(update={"sample": 3, "status": "ok", "fixture_digest": None}),
        base.model_copy(update={"sample": 7, "metrics": odd, "fixture_digest": "curated:abc"}),
        base.model_copy(update={"sample": 9, "metrics": []}),
    ]
    columns = ScoredColumns(LABEL)
    for s in variants:
        columns.add(s)
    assert list(columns) == [0, 3, 7, 9] and len(columns) == 4 and 5 not in columns
    for s in variants:
        assert columns[s.sample] == scored_brief(s)
    with pytest.raises(ValueError, match="added after"):
        columns.add(base)
