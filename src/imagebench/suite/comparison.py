"""What a comparison of two runs says (``imagebench compare --json``, ``schema_version`` 2): the
conditions checked, per case and overall figures over replicates, each run's side. The models only;
:mod:`imagebench.suite.compare` fills them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from imagebench.records import Record

# 2: replicates (fixtures), per-case scoring closures, execution conditions; 3: usage and cost per side and case
COMPARISON_SCHEMA_VERSION = 3


class Condition(Record):
    id: str
    name: str
    holds: bool
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class MetricDiff(Record):
    metric: str
    unit: str = ""
    pairs: int  # replicates (per case) or cases (overall) the means are over
    mean_a: float
    mean_b: float
    diff: float
    ci: tuple[float, float] | None = None


class CaseComparison(Record):
    label: str
    pairs: int  # sample pairs
    fixtures: int = 0  # distinct fixtures behind them: the replicates every test counts
    passed_a: int
    passed_b: int
    rate_a: float
    rate_b: float
    rate_diff: float
    only_a: int  # replicates whose pass rate is higher in A than in B
    only_b: int
    metrics: list[MetricDiff] = Field(default_factory=list)
    excluded: list[str] = Field(default_factory=list)
    # the mean cost of a sample of this case in each run (--prices, else what the agents reported);
    # None: not known for every sample of it (imagebench.suite.spending)
    cost_a: float | None = None
    cost_b: float | None = None


class Unmatched(Record):
    label: str
    reason: str


class Overall(Record):
    cases: int
    pairs: int  # sample pairs
    fixtures: int = 0  # distinct fixtures (replicates) behind them
    passed_a: int
    passed_b: int
    rate_a: float
    rate_b: float
    rate_diff: float
    only_a: int  # discordant replicates favouring A
    only_b: int
    # McNemar's exact test over the discordant replicates; None with fewer than 2 distinct fixtures
    mcnemar_p: float | None
    metrics: list[MetricDiff] = Field(default_factory=list)


class UsageSide(Record):
    """What a run's subject spent over its usable samples (imagebench.suite.spending): each figure's
    total over the samples that know it (``known``), its sources, and the cost-normalised figures
    when every sample's cost is known (``--prices``, else the agents' own reports)."""

    samples: int
    totals: dict[str, float] = Field(default_factory=dict)
    known: dict[str, int] = Field(default_factory=dict)
    sources: dict[str, list[str]] = Field(default_factory=dict)
    models: list[str] = Field(default_factory=list)
    passed: int = 0
    cost: float | None = None  # total, when every sample's cost is known
    cost_source: list[str] = Field(default_factory=list)  # "prices" and/or "reported"
    currency: str = "USD"
    cost_per_sample: float | None = None
    cost_per_pass: float | None = None  # None also when nothing passed
    tokens_per_pass: float | None = None


class RunSide(Record):
    run_id: str
    subject: str
    samples: int | None = None
    execution: dict[str, Any] | None = None  # the conditions its subject ran under (run.json extra.execution)
    identity: dict[str, Any] | None = None  # run.json's extra.subject_identity: its name and code digest
    usage: UsageSide | None = None  # what its subject spent (None: the run could not be read)


class Comparison(Record):
    schema_version: Literal[2] = COMPARISON_SCHEMA_VERSION
    a: RunSide | None = None
    b: RunSide | None = None
    problems: list[str] = Field(default_factory=list)  # a run that could not be read at all
    conditions: list[Condition] = Field(default_factory=list)
    comparable: bool = False
    direction: str = "B - A"
    bootstrap: dict[str, Any] = Field(default_factory=dict)
    cases: list[CaseComparison] = Field(default_factory=list)
    unmatched: list[Unmatched] = Field(default_factory=list)
    overall: Overall | None = None


__all__ = [
    "COMPARISON_SCHEMA_VERSION", "CaseComparison", "Comparison", "Condition", "MetricDiff", "Overall", "RunSide",
    "Unmatched", "UsageSide",
]  # fmt: skip
