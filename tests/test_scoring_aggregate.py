"""pass@k, pass^k and mean@k against brute force, and aggregates with honest denominators."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imagebench.records import SampleSummary
from imagebench.scoring.aggregates import (
    aggregate,
    bootstrap_ci,
    cluster_standard_error,
    mean_at_k,
    pass_at_k,
    pass_hat_k,
)


def brute(n: int, c: int, k: int) -> tuple[float, float, float]:
    """Over every k-subset of n outcomes (c successes): P(any), P(all), E[mean]."""
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    anyp = sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)
    allp = sum(all(outcomes[i] for i in s) for s in subsets) / len(subsets)
    mean = sum(sum(outcomes[i] for i in s) / k for s in subsets) / len(subsets)
    return anyp, allp, mean


@pytest.mark.parametrize("n", range(1, 9))
def test_estimators_match_enumeration(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            anyp, allp, mean = brute(n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(anyp, abs=1e-12)
            assert pass_hat_k(n, c, k) == pytest.approx(allp, abs=1e-12)
            assert mean_at_k([1.0] * c + [0.0] * (n - c), k) == pytest.approx(mean, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 400), st.data())
def test_closed_forms_and_stability(n: int, data) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    if n <= 60:  # exact integers are cheap here
        assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-9)
        assert pass_hat_k(n, c, k) == pytest.approx(comb(c, k) / comb(n, k), abs=1e-9)
    p = pass_at_k(n, c, k)
    assert 0.0 <= p <= 1.0 and np.isfinite(p)
    assert pass_hat_k(n, c, k) <= p + 1e-12
    if k > 1:
        assert pass_at_k(n, c, k) >= pass_at_k(n, c, k - 1) - 1e-12


def test_large_n_is_finite() -> None:
    assert pass_at_k(10_000, 3, 100) == pytest.approx(1 - comb(9997, 100) / comb(10_000, 100), rel=1e-9)


@pytest.mark.parametrize("args", [(2, 1, 3), (3, 4, 1), (3, -1, 1), (3, 1, 0)])
def test_bad_counts(args) -> None:
    with pytest.raises(ValueError):
        pass_at_k(*args)
    with pytest.raises(ValueError):
        pass_hat_k(*args)


def test_bool_is_not_a_count() -> None:
    with pytest.raises(TypeError):
        pass_at_k(3, True, 1)


def test_stderr_and_bootstrap() -> None:
    assert cluster_standard_error([1.0]) is None
    assert cluster_standard_error([0.0, 1.0]) == pytest.approx(0.5)
    a = bootstrap_ci([0.0, 1.0, 1.0, 0.5], seed=7, resamples=500)
    assert a == bootstrap_ci([0.0, 1.0, 1.0, 0.5], seed=7, resamples=500)  # seeded: reproducible
    assert a[0] <= np.mean([0.0, 1.0, 1.0, 0.5]) <= a[1]
    assert bootstrap_ci([], seed=0) is None
    assert bootstrap_ci([0.25] * 5, seed=1) == (0.25, 0.25)


# --------------------------------------------------------------------------- aggregate


def s(label: str, status: str, subject: str = "agent") -> SampleSummary:
    ns, cid = label.split("/")
    return SampleSummary(label=label, namespace=ns, case_id=cid, subject=subject, status=status, passed=status == "ok")


def test_aggregate_denominators_and_coverage() -> None:
    samples = [
        s("a/one", "ok"), s("a/one", "wrong-answer"), s("a/one", "ok"),
        s("a/two", "wrong-answer"), s("a/two", "no-result"), s("a/two", "unscorable-result"),
        s("a/three", "ok"), s("a/three", "blocked"), s("a/three", "ok"), s("a/three", "ok"),
        s("a/four", "ok"), s("a/four", "timeout"), s("a/four", "harness-error"), s("a/four", "infra-error"),
        s("a/five", "blocked"), s("a/five", "blocked"), s("a/five", "blocked"),
        s("a/six", "skipped"),
    ]  # fmt: skip
    agg = aggregate(samples, 3, expected=["a/one", "a/two", "a/three", "a/four", "a/five", "a/six", "a/seven"])
    assert agg.coverage == {
        "cases": 7, "complete": 3, "incomplete": 1, "unscored": 2, "missing": 1,
        "blocked": 4, "harness-error": 1, "infra-error": 1, "skipped": 1, "stopped": 0, "not-attempted": 0,
    }  # fmt: skip
    assert agg.missing == ["a/seven"]
    fig = agg.figures["pass@3"]
    assert fig.denominator == 3
    assert fig.value == pytest.approx((1.0 + 0.0 + 1.0) / 3)
    assert agg.figures["pass^3"].value == pytest.approx((0.0 + 0.0 + 1.0) / 3)
    assert agg.figures["mean@3"].value == pytest.approx((2 / 3 + 0.0 + 1.0) / 3)
    by = {c.label: c for c in agg.cases}
    assert by["a/three"].scored == 3 and by["a/three"].counts["blocked"] == 1  # blocked is not a zero
    # the timeout is a scored failure, the harness error is not scored: 2 of the 3 needed
    assert by["a/four"].scored == 2 and by["a/four"].successes == 1
    assert by["a/four"].complete is False and by["a/four"].pass_at_k is None
    assert agg.sample_counts["blocked"] == 4 and sum(agg.sample_counts.values()) == len(samples)
    assert fig.ci_low is not None and fig.ci_low <= fig.value <= fig.ci_high
    rows = dict(agg.table())
    assert "over 3 of 7 cases" in rows["pass@3"] and "blocked 4" in rows["pass@3"]
    assert "harness-error 1" in rows["pass@3"] and "skipped 1" in rows["pass@3"]


def test_every_status_has_one_place() -> None:
    from imagebench.records import STATUSES
    from imagebench.scoring.aggregates import BLOCKED, EXCLUDED, FAILURE, SUCCESS

    groups = (SUCCESS, FAILURE, EXCLUDED, BLOCKED)
    assert set().union(*groups) == set(STATUSES)
    assert sum(len(g) for g in groups) == len(STATUSES)  # disjoint


def test_a_timeout_on_a_hard_case_lowers_the_mean() -> None:
    easy = [s("a/easy", "ok"), s("a/easy", "ok"), s("a/easy", "ok")]
    finished = aggregate([*easy, s("a/hard", "ok"), s("a/hard", "wrong-answer"), s("a/hard", "wrong-answer")], 1)
    timed_out = aggregate([*easy, s("a/hard", "ok"), s("a/hard", "timeout"), s("a/hard", "timeout")], 1)
    assert timed_out.figures["mean@1"].value == finished.figures["mean@1"].value == pytest.approx((1 + 1 / 3) / 2)
    assert timed_out.figures["mean@1"].denominator == 2
    # a hard case that always runs out of time is a case failed, not a case dropped
    never = aggregate([*easy, s("a/hard", "timeout"), s("a/hard", "timeout"), s("a/hard", "timeout")], 3)
    assert never.figures["mean@3"].value == pytest.approx(0.5) and never.figures["mean@3"].denominator == 2
    assert never.figures["pass@3"].value == pytest.approx(0.5)
    assert never.coverage["complete"] == 2 and never.coverage["unscored"] == 0


def test_harness_errors_and_skips_are_left_out_and_counted() -> None:
    clean = aggregate([s("a/x", "ok"), s("a/y", "wrong-answer")], 1)
    noisy = aggregate(
        [s("a/x", "ok"), s("a/x", "harness-error"), s("a/y", "wrong-answer"), s("a/y", "skipped"), s("a/z", "skipped")],
        1,
    )
    assert noisy.figures["mean@1"].value == clean.figures["mean@1"].value == 0.5
    assert noisy.figures["mean@1"].denominator == 2
    assert noisy.coverage["harness-error"] == 1 and noisy.coverage["skipped"] == 2 and noisy.coverage["unscored"] == 1


def test_blocked_is_never_averaged_as_zero() -> None:
    only_ok = aggregate([s("a/x", "ok"), s("a/y", "ok")], 1)
    with_blocked = aggregate([s("a/x", "ok"), s("a/y", "ok"), s("a/z", "blocked")], 1)
    assert only_ok.figures["mean@1"].value == with_blocked.figures["mean@1"].value == 1.0
    assert with_blocked.figures["mean@1"].denominator == 2 and with_blocked.coverage["blocked"] == 1


def test_no_complete_case_reports_none() -> None:
    agg = aggregate([s("a/x", "blocked")], 1)
    assert agg.figures["pass@1"].value is None and agg.figures["pass@1"].denominator == 0
    assert "n/a" in dict(agg.table())["pass@1"]


def test_one_subject_at_a_time() -> None:
    with pytest.raises(ValueError, match="several subjects"):
        aggregate([s("a/x", "ok", "one"), s("a/x", "ok", "two")], 1)


def test_bad_k() -> None:
    with pytest.raises(ValueError):
        aggregate([s("a/x", "ok")], 0)


def test_aggregate_is_seeded() -> None:
    samples = [s(f"a/c{i}", st_) for i in range(8) for st_ in ("ok", "wrong-answer", "ok" if i % 2 else "no-result")]
    one = aggregate(samples, 2, seed=3).model_dump()
    assert one == aggregate(samples, 2, seed=3).model_dump()
    assert one["bootstrap"]["seed"] == 3
