"""The usage record: figures labelled by source, merged measured over reported, bad figures refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from imagebench.usage import USAGE_NOTE, Usage, measured_usage, merge_usage, note_usage, reported_usage


def test_reported_figures_are_labelled_reported() -> None:
    u = reported_usage(tokens_in=100, tokens_out=20, turns=3, tool_calls=4, cost_usd=0.5, model="claude-x")
    assert {u.figure(n).source for n in ("tokens_in", "tokens_out", "turns", "tool_calls", "cost_usd")} == {"reported"}
    assert u.model is not None and (u.model.id, u.model.source) == ("claude-x", "reported")
    assert u.tokens == 120 and u.wall_s is None and not u.empty


def test_measured_wins_over_reported_and_keeps_what_the_agent_said() -> None:
    said = reported_usage(tokens_in=999, tool_calls=1, model="gpt-a")
    counted = measured_usage(tokens_in=100, tool_calls=5, wall_s=2.5, model="gpt-b")
    for merged in (merge_usage(said, counted), merge_usage(counted, said)):
        assert merged is not None
        assert merged.tokens_in is not None and merged.tokens_in.source == "measured"
        assert (merged.tokens_in.value, merged.tokens_in.reported) == (100, 999)
        assert merged.tool_calls is not None and (merged.tool_calls.value, merged.tool_calls.reported) == (5, 1)
        assert merged.model is not None and (merged.model.id, merged.model.reported) == ("gpt-b", "gpt-a")
    assert merge_usage(None, None) is None


@pytest.mark.parametrize(
    ("figure", "value"),
    [("tokens_in", -1), ("turns", 1.5), ("wall_s", float("nan")), ("tool_calls", "3"), ("cost_usd", True)],
)
def test_a_bad_figure_is_refused_naming_it(figure: str, value: object) -> None:
    with pytest.raises(ValueError, match=figure):
        reported_usage(**{figure: value})  # type: ignore[arg-type]


def test_an_unknown_field_on_disk_is_an_error() -> None:
    with pytest.raises(ValidationError):
        Usage.model_validate({"tokens": {"value": 1, "source": "measured"}})
    with pytest.raises(ValidationError):
        Usage.model_validate({"turns": {"value": 1, "source": "guessed"}})


def test_note_usage_accumulates_under_the_note() -> None:
    notes: dict[str, object] = {}
    note_usage(notes, reported_usage(tokens_in=10))
    note_usage(notes, measured_usage(wall_s=1.0))
    held = notes[USAGE_NOTE]
    assert isinstance(held, Usage) and held.value("tokens_in") == 10 and held.value("wall_s") == 1.0
    with pytest.raises(TypeError):
        note_usage(notes, {"tokens_in": 3})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- in a sample's summary


class _Noting:
    """An in-process subject that solves the toy case and notes ``usage`` in its session."""

    def __init__(self, usage: object, name: str = "noting") -> None:
        self.usage, self.name = usage, name

    def __call__(self, session) -> None:  # type: ignore[no-untyped-def]
        from helpers import toy_reference

        toy_reference(session)
        session.notes[USAGE_NOTE] = self.usage


def _run(tmp_path, subject, budget=None):  # type: ignore[no-untyped-def]
    from helpers import make_toy_case

    from imagebench.executor import run_cases

    result = run_cases([make_toy_case()], subject, out=tmp_path, progress=False, budget=budget)
    (summary,) = result.samples["toy/rectangle"]
    return result, summary


def test_a_summary_records_the_subjects_report_and_the_harness_measure(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from imagebench.records import SampleSummary, read_record

    _, summary = _run(tmp_path, _Noting(reported_usage(tokens_in=300, tokens_out=40, model="toy-model")))
    assert summary.status == "ok" and summary.usage is not None
    assert summary.usage.tokens_in == summary.usage.tokens_in.model_copy(update={"value": 300, "source": "reported"})
    assert summary.usage.wall_s is not None and summary.usage.wall_s.source == "measured"
    assert summary.usage.model is not None and summary.usage.model.id == "toy-model"
    (path,) = tmp_path.glob("run-*/noting/toy/rectangle/sample-0/summary.json")
    assert read_record(path, SampleSummary).usage == summary.usage  # on disk, read back


def test_an_in_process_subject_cannot_make_its_own_figures_measured(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, summary = _run(tmp_path, _Noting(measured_usage(tokens_in=1, tokens_out=1, tool_calls=0, wall_s=0.0)))
    assert summary.usage is not None
    for name in ("tokens_in", "tokens_out", "tool_calls"):
        assert summary.usage.figure(name).source == "reported", name
    assert summary.usage.wall_s is not None and summary.usage.wall_s.source == "measured"  # the harness's own
    assert summary.usage.wall_s.reported == 0.0  # what it claimed, kept beside the measure


def test_something_not_a_usage_under_the_note_is_flagged_not_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, summary = _run(tmp_path, _Noting({"tokens_in": {"value": 5, "source": "measured"}}))
    assert summary.status == "ok" and "usage-unreadable" in summary.flags
    assert summary.usage is not None and summary.usage.tokens_in is None


def test_a_sample_over_its_token_budget_ends_budget_exceeded_whatever_it_left(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from imagebench.usage import Budget

    budget = Budget(max_tokens=100)
    result, summary = _run(tmp_path, _Noting(reported_usage(tokens_in=90, tokens_out=20)), budget)
    assert summary.status == "budget-exceeded" and not summary.passed
    assert "110 tokens (reported) > --max-tokens 100" in summary.reason
    assert result.verdicts == {"toy/rectangle": "fail"} and result.record.counts == {"budget-exceeded": 1}
    assert result.record.extra["budget"]["max_tokens"] == 100
    _, within = _run(tmp_path / "b", _Noting(reported_usage(tokens_in=60, tokens_out=40)), budget)
    assert within.status == "ok"  # 100 is within a budget of 100


def test_a_cost_budget_uses_the_price_table_and_a_budget_nothing_measures_is_flagged(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from imagebench.usage import Budget, PriceTable

    prices = PriceTable.model_validate({"models": {"prov/toy": {"input_per_mtok": 1e6, "output_per_mtok": 0}}})
    over = reported_usage(tokens_in=3, tokens_out=1, model="toy")  # $3 at a dollar a token (bare id found)
    _, summary = _run(tmp_path, _Noting(over), Budget(max_cost=2.0, prices=prices))
    assert summary.status == "budget-exceeded" and "cost 3 (prices) > --max-cost 2" in summary.reason
    _, unmeasured = _run(tmp_path / "b", _Noting(reported_usage(turns=2)), Budget(max_tokens=10, max_cost=1.0))
    assert unmeasured.status == "ok" and "budget-unmeasured" in unmeasured.flags


def test_a_version_7_summary_reads_without_usage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from imagebench.records import SampleSummary, read_record

    _, summary = _run(tmp_path, _Noting(reported_usage(turns=1)))
    raw = summary.model_dump(mode="json")
    raw.pop("usage")
    raw["schema_version"] = 7
    old = tmp_path / "old.json"
    old.write_text(json.dumps(raw))
    assert read_record(old, SampleSummary).usage is None


# --------------------------------------------------------------------------- prices, compare, the command line


def _prices(tmp_path, body) -> str:  # type: ignore[no-untyped-def]
    import json

    path = tmp_path / "prices.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_compare_gives_each_sides_usage_and_its_cost_under_a_price_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from imagebench.suite.compare import compare_runs
    from imagebench.usage import read_prices

    a, _ = _run(tmp_path / "a", _Noting(reported_usage(tokens_in=1000, tokens_out=100, model="prov/m1"), "a"))
    b, _ = _run(tmp_path / "b", _Noting(reported_usage(tokens_in=4000, tokens_out=0, model="m2"), "b"))
    prices = read_prices(
        _prices(
            tmp_path,
            {
                "models": {
                    "m1": {"input_per_mtok": 1, "output_per_mtok": 10},
                    "m2": {"input_per_mtok": 2, "output_per_mtok": 2},
                }
            },
        )
    )
    result = compare_runs(a.run_dir, b.run_dir, prices=prices)
    assert not result.comparable  # not suite runs: nothing is paired, but each side's spending is shown
    ua, ub = result.a.usage, result.b.usage
    assert ua is not None and ub is not None
    assert ua.totals["tokens_in"] == 1000 and ua.sources["tokens_in"] == ["reported"] and ua.models == ["prov/m1"]
    assert ua.cost == pytest.approx(0.002) and ua.cost_per_pass == pytest.approx(0.002) and ua.cost_source == ["prices"]
    assert ub.cost == pytest.approx(0.008) and ub.passed == 1
    unpriced = compare_runs(a.run_dir, b.run_dir)
    assert unpriced.a.usage is not None and unpriced.a.usage.cost is None  # no table, no reported cost: unknown


def test_the_command_line_takes_prices_and_budgets_and_names_a_bad_file(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from imagebench.cli import main

    a, _ = _run(tmp_path / "a", _Noting(reported_usage(tokens_in=10, tokens_out=10, model="m1"), "a"))
    good = _prices(tmp_path, {"models": {"m1": {"input_per_mtok": 1e6, "output_per_mtok": 1e6}}})
    assert main(["compare", str(a.run_dir), str(a.run_dir), "--prices", good]) == 1  # not suite runs
    out = capsys.readouterr().out
    assert "usage" in out and "20.0000 USD (prices)" in out and "cost per pass" in out
    bad = _prices(tmp_path, {"models": {"m1": {"input_per_mtok": -1, "output_per_mtok": 1}}})
    assert main(["compare", str(a.run_dir), str(a.run_dir), "--prices", bad]) == 2
    err = capsys.readouterr().err
    assert "prices.json" in err and "models.m1.input_per_mtok" in err
    assert main(["run", "-k", "segment-nuclei/count-nuclei", "--subject", "nop", "--max-tokens", "0", "--quiet"]) == 2
    assert "--max-tokens" in capsys.readouterr().err


def test_a_resume_keeps_the_budget_and_names_a_bad_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from imagebench.executor.run import ResumeError, recorded_budget
    from imagebench.records import RunRecord, read_record
    from imagebench.usage import Budget

    result, _ = _run(tmp_path, _Noting(reported_usage(tokens_in=1)), Budget(max_tokens=50))
    record = read_record(result.run_dir / "run.json", RunRecord)
    assert recorded_budget(result.run_dir, record) == Budget(max_tokens=50)
    bad = record.model_copy(update={"extra": {**record.extra, "budget": {"max_tokens": -3}}})
    with pytest.raises(ResumeError, match=r"extra.budget.max_tokens"):
        recorded_budget(result.run_dir, bad)
