"""Choosing cases (issue 30, item 6): one rule for ``-k`` (an exact label alone, a glob, else a
substring), ``--exclude``, ``--skill`` and ``--kind`` on ``run``, ``list`` and ``suite pin``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import UnavailableSpec, make_toy_case

from imagebench import cli
from imagebench.case.model import Case, select_cases


def _pool() -> list[Case]:
    return [
        make_toy_case("blobs", namespace="seg"),
        make_toy_case("blobs-3d", namespace="seg"),
        make_toy_case("dsb2018", namespace="seg", spec=UnavailableSpec()),
        make_toy_case("dsb2018-watershed", namespace="seg"),
        make_toy_case("count", namespace="counting"),
    ]


def _labels(cases: list[Case]) -> list[str]:
    return [c.label for c in cases]


def test_an_exact_label_selects_that_case_alone() -> None:
    chosen, unmatched = select_cases(_pool(), ["seg/dsb2018"])
    assert _labels(chosen) == ["seg/dsb2018"] and unmatched == []  # not seg/dsb2018-watershed
    chosen, _ = select_cases(_pool(), ["seg/blobs"])
    assert _labels(chosen) == ["seg/blobs"]


def test_a_glob_matches_the_whole_label_or_case_id_and_a_plain_pattern_is_a_substring() -> None:
    assert _labels(select_cases(_pool(), ["dsb2018*"])[0]) == ["seg/dsb2018", "seg/dsb2018-watershed"]
    assert _labels(select_cases(_pool(), ["seg/*-3d"])[0]) == ["seg/blobs-3d"]
    assert _labels(select_cases(_pool(), ["blob"])[0]) == ["seg/blobs", "seg/blobs-3d"]
    assert select_cases(_pool(), ["seg/blob?"])[1] == []


def test_exclude_skill_and_kind_narrow_the_selection_and_unmatched_ones_are_named() -> None:
    chosen, _ = select_cases(_pool(), None, exclude=["*-3d", "seg/dsb2018"])
    assert _labels(chosen) == ["seg/blobs", "seg/dsb2018-watershed", "counting/count"]
    chosen, _ = select_cases(_pool(), None, skills=["counting"])
    assert _labels(chosen) == ["counting/count"]
    chosen, _ = select_cases(_pool(), ["dsb2018*"], "curated", skills=["seg"])
    assert _labels(chosen) == ["seg/dsb2018"]
    _, unmatched = select_cases(_pool(), ["zeta"], exclude=["nothing*"], skills=["no-skill"])
    assert unmatched == ["zeta", "--exclude nothing*", "--skill no-skill"]


@pytest.fixture
def builtin_pool(monkeypatch: pytest.MonkeyPatch) -> list[Case]:
    from imagebench import cases as builtin

    pool = _pool()
    monkeypatch.setattr(builtin, "all_cases", lambda: list(pool))
    monkeypatch.setattr(builtin, "skills", lambda: {})
    return pool


def test_list_selects_as_run_does_and_prints_json(builtin_pool: list[Case], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list", "--json", "--skill", "seg", "--exclude", "dsb2018*"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in rows] == ["seg/blobs", "seg/blobs-3d"]
    assert rows[0]["skill"] == "seg" and rows[0]["kind"] == "synthetic" and rows[0]["available"] is True
    assert cli.main(["list", "--json", "--kind", "curated"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["label"], r["available"]) for r in rows] == [("seg/dsb2018", False)]
    assert cli.main(["list", "-k", "seg/dsb2018"]) == 0
    out = capsys.readouterr().out
    assert "seg/dsb2018" in out and "watershed" not in out
    assert cli.main(["list", "--skill", "imaging"]) == 2
    err = capsys.readouterr().err
    assert "--skill imaging matched no case" in err and "skills: counting, seg" in err


def test_run_takes_the_same_flags_and_records_them(
    builtin_pool: list[Case], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from imagebench.records import RunRecord, read_record

    code = cli.main(
        [
            "run",
            "--out",
            str(tmp_path),
            "--quiet",
            "--no-report",
            "--skill",
            "seg",
            "--exclude",
            "*dsb2018*",
            "--kind",
            "synthetic",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    run_dir = Path(out.split("run folder: ")[1].split()[0])
    record = read_record(run_dir / "run.json", RunRecord)
    assert record.cases == ["seg/blobs", "seg/blobs-3d"]
    assert record.selection["exclude"] == ["*dsb2018*"] and record.selection["skills"] == ["seg"]
    assert record.selection["fixtures"] == "synthetic"
    assert cli.main(["run", "--out", str(tmp_path), "--skill", "seg", "--exclude", "seg/*"]) == 2
    assert "no case selected (--exclude seg/* --skill seg)" in capsys.readouterr().err


# --------------------------------------------------------------------------- suites


def test_suite_pin_selects_as_run_does_and_run_suite_writes_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from imagebench import cases as builtin
    from imagebench.suite.model import load_suite

    pool = [make_toy_case("alpha"), make_toy_case("beta", seed=1), make_toy_case("gamma", namespace="other", seed=2)]
    monkeypatch.setattr(builtin, "all_cases", lambda: list(pool))
    monkeypatch.chdir(tmp_path)
    assert (
        cli.main(["suite", "pin", "core", "--skill", "toy", "--exclude", "toy/beta", "--revision", "0.1.0", "--quiet"])
        == 0
    )
    assert [m.label for m in load_suite(tmp_path / "suites" / "core.json").members] == ["toy/alpha"]
    capsys.readouterr()
    assert cli.main(["suite", "pin", "core2", "--kind", "curated", "--revision", "0.1.0"]) == 2
    assert "no case selected (--kind curated)" in capsys.readouterr().err
    out = tmp_path / "out"
    assert cli.main(["run", "--suite", "core", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    run_dir = Path(text.split("run folder: ")[1].split()[0])
    assert f"report: {run_dir / 'report.html'}" in text and (run_dir / "report.html").is_file()
    assert cli.main(["run", "--suite", "core", "--out", str(out), "--quiet", "--no-report"]) == 0
    text = capsys.readouterr().out
    assert "report:" not in text
    assert not (Path(text.split("run folder: ")[1].split()[0]) / "report.html").exists()
    for flag in (["--skill", "toy"], ["--exclude", "x"], ["--kind", "synthetic"]):
        assert cli.main(["run", "--suite", "core", "--out", str(out), *flag]) == 2
        assert "cannot be combined with --suite" in capsys.readouterr().err


def test_compare_of_two_plain_runs_says_how_to_pin_a_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from imagebench.executor import run_cases
    from imagebench.subjects import parse_subject
    from imagebench.suite.compare import compare_runs

    cases = [make_toy_case("alpha"), make_toy_case("beta", seed=1)]
    a = run_cases(cases, parse_subject("reference"), out=tmp_path, progress=False).run_dir
    b = run_cases(cases, parse_subject("nop"), out=tmp_path, progress=False).run_dir
    result = compare_runs(a, b)
    (c1,) = [c for c in result.conditions if c.id == "C1"]
    hint = " ".join(c1.problems)
    assert "imagebench suite pin mine -k toy/alpha -k toy/beta --revision 0.1.0" in hint
    assert "imagebench run --suite mine@0.1.0 --subject reference" in hint and "--subject nop" in hint
    assert cli.main(["compare", str(a), str(b)]) == 1
    assert "imagebench suite pin mine -k toy/alpha -k toy/beta" in capsys.readouterr().out.replace("\n", " ")
