"""Aggregates over samples, each with its denominator and its coverage.

Per case with ``n`` scored samples of which ``c`` succeeded (status ``ok``):

- ``pass@k`` = 1 - C(n-c, k) / C(n, k): the chance that at least one of k samples drawn without
  replacement succeeds (the unbiased estimator; needs n >= k);
- ``pass^k`` = C(c, k) / C(n, k): the chance that all k succeed;
- ``mean@k``: the expected mean score over k samples, which is the case's mean over all n
  (every k-subset mean averages to it); for k = 1 it is the single-run mean.

A figure is the mean over cases of the per-case values, with its denominator (how many cases)
and how many distinct fixtures its samples saw (samples of one fixture are attempts at it, not
more evidence: ``fixture_digest``), a standard error clustered by case (the spread of per-case values; samples of one case are not
independent evidence) and a seeded bootstrap confidence interval that resamples cases.

Which samples count: ``ok`` is a success; ``wrong-answer``, ``no-result``,
``unscorable-result``, ``timeout``, ``subject-error`` (it raised, or its command failed, and what
it left did not pass), ``truth-tampered`` and ``fixture-overwritten`` are failures, the
subject's doing. A timeout is a failure rather than an exclusion because leaving them out would raise the mean
exactly on the cases too hard to finish in time. ``harness-error`` (the bench's own failure),
``infra-error`` (an agent's network, login or rate limit failed, as its CLI reported it), ``skipped``
(not runnable here), ``stopped`` (a person ended the turn at the viewer) and ``not-attempted`` (a served
agent that never called a case tool) are excluded and counted in the coverage; ``blocked`` (the bench
cannot grade the task) is excluded and counted on its own, never averaged in as a zero. A case
with fewer than k scored samples is *incomplete* (or *unscored* when it has none) and left out
of the figures; a case named in ``expected`` with no sample at all is *missing*. Nothing is
dropped silently: every count is in :class:`Aggregate.coverage`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from imagebench.records import Record

if TYPE_CHECKING:
    from imagebench.records import SampleSummary

AGGREGATE_SCHEMA_VERSION = 1
SUCCESS = frozenset({"ok"})
FAILURE = frozenset(
    {
        "wrong-answer", "no-result", "unscorable-result", "timeout", "resource-limit", "budget-exceeded",
        "subject-error", "truth-tampered", "fixture-overwritten",
    }
)
SCORED = SUCCESS | FAILURE
# Left out of every figure, each counted in the coverage under its own name.
EXCLUDED = frozenset({"harness-error", "infra-error", "skipped", "stopped", "not-attempted"})
BLOCKED = frozenset({"blocked"})


def _check_counts(n: int, c: int, k: int) -> None:
    for name, v in (("n", n), ("c", c), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"c must lie in 0..n (n={n}), got {c}")
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples, got n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one case: 1 - C(n-c, k)/C(n, k), computed as a stable product.

    ``n`` samples, ``c`` of them successes, ``k`` drawn. Raises ValueError when n < k.
    """
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    # C(n-c, k)/C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i)
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)
    return float(1.0 - np.prod(1.0 - k / i))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k for one case: C(c, k)/C(n, k), the chance that all k drawn samples succeed."""
    _check_counts(n, c, k)
    if c < k:
        return 0.0
    j = np.arange(k, dtype=np.float64)
    return float(np.prod((c - j) / (n - j)))


def mean_at_k(scores: Sequence[float], k: int) -> float:
    """mean@k for one case: the expected mean of k of its scores drawn without replacement,
    which equals the mean of all of them. Raises ValueError when fewer than k scores."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if len(scores) < k:
        raise ValueError(f"mean@{k} needs at least {k} scores, got {len(scores)}")
    return float(np.mean(np.asarray(scores, dtype=np.float64)))


def cluster_standard_error(per_case: Sequence[float]) -> float | None:
    """Standard error of the mean over cases, clustering samples by case: sd(per-case)/sqrt(m).

    ``None`` with fewer than two cases (no spread to estimate from).
    """
    values = np.asarray(per_case, dtype=np.float64)
    if values.size < 2:
        return None
    return float(values.std(ddof=1) / math.sqrt(values.size))


def bootstrap_ci(
    per_case: Sequence[float], *, seed: int, resamples: int = 2000, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean over cases, resampling cases with replacement
    (``numpy.random.default_rng(seed)``: the same seed gives the same interval). ``None`` with
    no cases."""
    values = np.asarray(per_case, dtype=np.float64)
    if values.size == 0:
        return None
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    chunk = max(1, 2_000_000 // max(values.size, 1))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, values.size, size=(stop - start, values.size))
        means[start:stop] = values[idx].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


class Figure(Record):
    """One reported number with what it is a mean over."""

    name: str
    value: float | None
    denominator: int
    unit: Literal["cases"] = "cases"
    # distinct fixtures behind the figure (over its cases' scored samples); None: a sample does not say
    fixtures: int | None = None
    stderr: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class CaseFigures(Record):
    label: str
    samples: int
    scored: int
    successes: int
    counts: dict[str, int]
    complete: bool
    # distinct fixtures its scored samples saw (their fixture_digest); None: a sample does not say
    fixtures: int | None = None
    pass_at_k: float | None = None
    pass_hat_k: float | None = None
    mean_at_k: float | None = None


class Aggregate(Record):
    """Aggregate figures for one subject over a set of cases (``schema_version`` 1)."""

    schema_version: Literal[1] = AGGREGATE_SCHEMA_VERSION
    subject: str
    k: int
    figures: dict[str, Figure]
    coverage: dict[str, int]
    sample_counts: dict[str, int]
    cases: list[CaseFigures]
    missing: list[str] = Field(default_factory=list)
    bootstrap: dict[str, float | int] = Field(default_factory=dict)
    policy: str = ""

    def table(self) -> list[tuple[str, str]]:
        """Rows ``(figure, text)`` for people: each value with its denominator and coverage."""
        cov = ", ".join(f"{k} {v}" for k, v in self.coverage.items() if k != "cases")
        rows = []
        for f in self.figures.values():
            if f.value is None:
                text = f"n/a (0 complete cases; {cov})"
            else:
                ci = f" [{f.ci_low:.3f}, {f.ci_high:.3f}]" if f.ci_low is not None else ""
                se = f" +- {f.stderr:.3f}" if f.stderr is not None else ""
                fixtures = f"{f.fixtures} distinct fixtures; " if f.fixtures is not None else ""
                text = f"{f.value:.3f}{se}{ci} over {f.denominator} of {self.coverage['cases']} cases ({fixtures}{cov})"
            rows.append((f.name, text))
        return rows


POLICY = (
    "success: ok; failure: wrong-answer, no-result, unscorable-result, timeout, budget-exceeded, subject-error, truth-tampered, "
    "fixture-overwritten; excluded and counted: "
    "harness-error, infra-error, skipped, stopped, not-attempted; blocked: excluded and counted on its own, never a zero; a case with fewer "
    "than k scored samples is incomplete (unscored with none) and left out of the figures"
)


def aggregate(
    samples: Iterable[SampleSummary],
    k: int,
    *,
    expected: Iterable[str] | None = None,
    seed: int = 0,
    resamples: int = 2000,
    level: float = 0.95,
) -> Aggregate:
    """pass@k, pass^k and mean@k over cases, each with its denominator, stderr and bootstrap CI.

    All samples must belong to one subject (a mean across subjects means nothing); raises
    ValueError otherwise. ``expected`` lists every case label that should have been run, so
    that cases with no sample at all are reported as missing.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    samples = list(samples)
    subjects = sorted({s.subject for s in samples})
    if len(subjects) > 1:
        raise ValueError(f"samples of several subjects {subjects}; aggregate one subject at a time")
    by_case: dict[str, list[SampleSummary]] = defaultdict(list)
    for s in samples:
        by_case[s.label].append(s)
    expected_set = set(expected or ())
    missing = sorted(expected_set - set(by_case))

    sample_counts: dict[str, int] = defaultdict(int)
    cases: list[CaseFigures] = []
    coverage = {
        "cases": len(by_case) + len(missing),
        "complete": 0,
        "incomplete": 0,
        "unscored": 0,
        "missing": len(missing),
        "blocked": 0,
        **{status: 0 for status in sorted(EXCLUDED)},
    }
    for label in sorted(by_case):
        rows = by_case[label]
        counts: dict[str, int] = defaultdict(int)
        for s in rows:
            counts[s.status] += 1
            sample_counts[s.status] += 1
        scored = sum(counts[st] for st in SCORED)
        successes = sum(counts[st] for st in SUCCESS)
        for status in BLOCKED | EXCLUDED:
            coverage[status] += counts[status]
        seen = [s.fixture_digest for s in rows if s.status in SCORED]
        fig = CaseFigures(
            label=label,
            samples=len(rows),
            scored=scored,
            successes=successes,
            counts=dict(sorted(counts.items())),
            complete=scored >= k,
            fixtures=None if None in seen else len(set(seen)),
        )
        if fig.complete:
            coverage["complete"] += 1
            fig.pass_at_k = pass_at_k(scored, successes, k)
            fig.pass_hat_k = pass_hat_k(scored, successes, k)
            fig.mean_at_k = mean_at_k([1.0] * successes + [0.0] * (scored - successes), k)
        elif scored:
            coverage["incomplete"] += 1
        else:
            coverage["unscored"] += 1
        cases.append(fig)

    complete = [c for c in cases if c.complete]
    figures: dict[str, Figure] = {}
    for key, attr in ((f"pass@{k}", "pass_at_k"), (f"pass^{k}", "pass_hat_k"), (f"mean@{k}", "mean_at_k")):
        values = [getattr(c, attr) for c in complete]
        # One seed for every figure: each is resampled over the same draws of cases.
        ci = bootstrap_ci(values, seed=seed, resamples=resamples, level=level) if values else None
        known = [c.fixtures for c in complete]
        figures[key] = Figure(
            fixtures=None if None in known else sum(known),  # type: ignore[arg-type]
            name=key,
            value=float(np.mean(values)) if values else None,
            denominator=len(values),
            stderr=cluster_standard_error(values),
            ci_low=ci[0] if ci else None,
            ci_high=ci[1] if ci else None,
        )
    return Aggregate(
        subject=subjects[0] if subjects else "",
        k=k,
        figures=figures,
        coverage=coverage,
        sample_counts=dict(sorted(sample_counts.items())),
        cases=cases,
        missing=missing,
        bootstrap={"seed": seed, "resamples": resamples, "level": level},
        policy=POLICY,
    )
