"""Honest comparison of two suite runs: every condition checked first, then paired statistics.
Long because the four conditions, their messages and the paired statistics they guard are read and changed together.

Two runs are compared only when all four conditions hold:

- **C1 same cohort**: the same suite (id, pinned revision, suite fingerprint) and sampling policy,
  and the same sealing: both runs unsealed, or both sealed with the same secret (the same
  commitment, :mod:`imagebench.runs.sealed`), so that the two saw the same fixtures;
- **C2 matched assignments**: the same replicate seed and the same tasks, each record first
  verified against the suite file when one pinning the recorded suite is at hand, and each run
  having run exactly its assignment;
- **C3 same scoring**: the same comparator registry hash and scorer implementation hash (as
  recorded at run time, and in ``receipt.json`` when both runs have one), the same scoring
  closure for every case (:mod:`imagebench.runs.closure`: its verifier, the project code it calls,
  its limits), and the same unit for every metric the two runs report for a case;
- **C4 the same execution conditions**: both runs complete, with the same samples per case, the
  same time-limit override, the same fixture selection and the same platform class, and the
  subject run under the same conditions (``run.json`` ``extra["execution"]``: ``sandbox``,
  ``network``, ``limits``, ``env_pass``, ``isolate``, ``mcp``, ``tool_env``, ``sealing``, ``harness``). Each
  execution condition that differs is named; ``allow`` (``--allow-conditions NAME``) turns the
  named ones into notes.

When one fails nothing is compared. When all hold, samples are paired by ``(case, sample index)``.
A pair counts when both samples were measured, with the denominators of
:mod:`imagebench.scoring.aggregates`: ``ok`` passes; ``wrong-answer``, ``no-result``,
``unscorable-result``, ``timeout``, ``subject-error``, ``truth-tampered`` and
``fixture-overwritten`` fail (a timeout left out would favour the run that gave up on the hard
cases); a pair with a ``skipped``, ``blocked``, ``harness-error`` or ``infra-error`` sample is left out and counted. A case with no pair is
listed as unmatched, never pooled. Differences are B minus A.

**Replicates, not samples.** A sample's summary names the fixture it saw (``fixture_digest``).
Samples of a case that saw the same fixture are one *replicate* of that fixture: a deterministic
solver run three times on one curated image is one piece of evidence, not three. A pair whose two
samples saw different fixtures is left out (named). Every test counts replicates: a replicate's
pass rate and metric means are over its samples; it is *discordant* when its two pass rates differ,
in favour of the run with the higher one. The discordant replicates are tested with McNemar's
exact test (``scipy.stats.binomtest``; with one sample per fixture this is McNemar's test on the
sample pairs), and only when at least two distinct fixtures stand behind the figure; metric mean
differences get a seeded paired percentile bootstrap interval (``scipy.stats.bootstrap``; per case
over its replicates, overall over cases), also only with two or more. A sample that does not say
which fixture it saw (a run written before they did) is pooled with every other such sample of its
case into one replicate: never more evidence than it could be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebench.runs.conditions import EXECUTION_CONDITIONS, EXECUTION_KEY
from imagebench.runs.fingerprint import scrub
from imagebench.runs.sealed import recorded_commitment
from imagebench.scoring.aggregates import FAILURE, SUCCESS
from imagebench.suite.comparison import (
    CaseComparison,
    Comparison,
    Condition,
    MetricDiff,
    Overall,
    RunSide,
    Unmatched,
)
from imagebench.suite.record import SuiteRunInfo, run_info
from imagebench.suite.sampling import (
    AssignmentError,
    assignment_mismatches,
    verify_assignment,
)
from imagebench.suite.statistics import mcnemar_exact, paired_bootstrap

if TYPE_CHECKING:
    from imagebench.usage import PriceTable

PASS = SUCCESS
FAIL = FAILURE  # the same denominators as every aggregate
CONDITION_NAMES = {
    "C1": "same cohort (suite and sampling policy)",
    "C2": "matched assignments (seed and tasks)",
    "C3": "same scoring rules and units",
    "C4": "the same execution conditions",
}


# --------------------------------------------------------------------------- reading a run


@dataclass
class LoadedRun:
    """One side of a comparison: the run as its one reader read it (``contents``), with what
    comparing needs of it (its suite info, its samples by index, its receipt's scorer)."""

    name: str  # "A" or "B"
    folder: Path
    record: Any  # RunRecord
    info: SuiteRunInfo | None
    contents: Any = None  # imagebench.runs.reader.RunContents
    samples: dict[str, dict[int, Any]] = field(default_factory=dict)  # label -> index -> SampleSummary
    missing: dict[str, list[str]] = field(default_factory=dict)  # label -> why samples are missing
    receipt_scorer: dict[str, str] = field(default_factory=dict)  # registry_hash / implementation_hash
    receipt_problem: str | None = None

    @property
    def side(self) -> RunSide:
        execution = self.record.extra.get(EXECUTION_KEY)
        identity = self.record.extra.get("subject_identity")
        return RunSide(
            run_id=self.record.run_id,
            subject=self.record.subject,
            samples=self.record.samples,
            execution=dict(execution) if isinstance(execution, Mapping) else None,
            identity=identity if isinstance(identity, dict) else None,
        )


def _run_folder(path: str | Path) -> Path:
    p = Path(path)
    return p.parent if p.name == "run.json" else p


def load_run(path: str | Path, name: str, *, lean: bool = False) -> tuple[LoadedRun | None, list[str]]:
    """Read run ``name`` (``"A"``/``"B"``) through the run folder's one checked reader
    (:func:`imagebench.runs.reader.read_run`): its record, its suite info, its receipt's scorer and
    every sample summary, each checked against its journal line. ``lean``: each sample is kept as
    what the comparison pairs of it (:class:`imagebench.runs.brief.ScoredBrief`), streamed past
    the reader, so two runs of any size compare in bounded memory (:func:`compare_runs` does)."""
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.reader import read_run

    folder = _run_folder(path)
    who = f"run {name} ({folder.name})"
    if not folder.is_dir():
        return None, [f"{who}: not a run folder"]
    from imagebench.runs.sitting import is_sitting, read_sitting_record

    if is_sitting(folder):  # a bench panel's sitting holds one run folder per subject
        try:
            runs = ", ".join(f"{r.run} ({r.subject})" for r in read_sitting_record(folder).runs) or "none yet"
        except RunFolderError:
            runs = "its sitting.json is not readable"
        return None, [
            f"{who}: a sitting, one run folder per subject: compare two runs, {folder.name}/<run>; it holds {runs}"
        ]
    infos: list[SuiteRunInfo | None] = []

    def expected(record: Any) -> dict[str, int]:
        info = run_info(record.extra)  # ValueError: run.json's suite info is not as expected
        infos.append(info)
        labels = info.assignment.labels if info is not None else list(record.cases)
        return {label: record.samples for label in labels}

    from imagebench.runs.brief import ScoredColumns

    briefs: dict[str, ScoredColumns] = {}

    def keep_brief(entry: Any) -> bool:
        if entry.usable and entry.summary is not None:
            briefs.setdefault(entry.label, ScoredColumns(entry.label)).add(entry.summary)
            return False
        return True

    try:
        contents = read_run(folder, expected=expected, on_sample=keep_brief if lean else None)
    except RunFolderError as exc:
        why = str(exc).split(": ", 1)[-1]
        return None, [
            f"{who}: run.json is not readable: {scrub(why)}" if "run.json" in str(exc) else f"{who}: {scrub(why)}"
        ]
    except ValueError as exc:
        return None, [f"{who}: run.json {scrub(str(exc))}"]
    run = LoadedRun(name=name, folder=folder, record=contents.record, info=infos[0], contents=contents)
    raw = contents.receipt
    if raw is None:
        run.receipt_problem = None if contents.receipt_problem == "no receipt.json" else contents.receipt_problem
    else:  # imagebench.runs.receipt writes the running scorer's hashes under "scorer"
        scorer = raw.get("scorer")
        if not isinstance(scorer, Mapping):
            run.receipt_problem = "receipt.json records no scorer"
        else:
            for key in ("registry_hash", "implementation_hash"):
                if isinstance(scorer.get(key), str):
                    run.receipt_scorer[key] = scorer[key]
            if not run.receipt_scorer:
                run.receipt_problem = f"receipt.json does not identify the scorer ({scorer.get('error', 'no hashes')})"
    for label in expected_labels(run):
        got: Any = briefs.get(label, {}) if lean else {}  # lean: columns, each brief made when looked up
        for entry in contents.entries(label):
            if entry.usable and entry.summary is not None:
                got[entry.sample] = entry.summary
            else:
                run.missing.setdefault(label, []).append(f"sample {entry.sample}: {scrub(entry.problem)}")
        run.samples[label] = got
    return run, []


def expected_labels(run: LoadedRun) -> list[str]:
    return run.info.assignment.labels if run.info is not None else list(run.record.cases)


# --------------------------------------------------------------------------- the four conditions


def _units(run: LoadedRun, label: str) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {}
    for s in run.samples.get(label, {}).values():
        for m in s.metrics:
            units.setdefault(m.name, set()).add(m.unit)
    return units


def pin_hint(a: LoadedRun, b: LoadedRun, name: str = "mine", revision: str = "0.1.0") -> str:
    """The commands that make two plain runs comparable: pin the cases they ran as a suite, run
    each subject on it, compare the two new run folders."""
    import shlex

    labels = list(dict.fromkeys([*a.record.cases, *b.record.cases]))
    pin = " ".join(
        ["imagebench suite pin", name, *(f"-k {shlex.quote(label)}" for label in labels), f"--revision {revision}"]
    )
    runs = []
    for run in (a, b):
        spec = run.record.extra.get("subject_spec")
        subject = spec if isinstance(spec, str) and spec else run.record.subject
        runs.append(f"imagebench run --suite {name}@{revision} --subject {shlex.quote(subject)}")
    return (
        f"only runs of one pinned suite compare: pin the cases and run both subjects on it: `{pin}`, then "
        f"`{runs[0]}` and `{runs[1]}` (give each the sandbox flags it ran with), then `imagebench compare RUN_A RUN_B` "
        "on the two new run folders (docs/suites.md)"
    )


def check_conditions(
    a: LoadedRun,
    b: LoadedRun,
    *,
    suite: Any = None,
    suite_explicit: bool = False,
    allow: frozenset[str] | set[str] = frozenset(),
) -> list[Condition]:
    """C1..C4 for two loaded runs. ``suite`` is a SuiteManifest to verify each assignment against;
    ``allow`` names execution conditions that may differ (each difference is then a note)."""
    conds = {cid: Condition(id=cid, name=CONDITION_NAMES[cid], holds=True) for cid in CONDITION_NAMES}

    def fail(cid: str, why: str) -> None:
        conds[cid].holds = False
        conds[cid].problems.append(why)

    ia, ib = a.info, b.info
    for run, info in ((a, ia), (b, ib)):
        if info is None:
            for cid in CONDITION_NAMES:
                fail(cid, f"run {run.name} records no cohort (it was not run with --suite)")
    if ia is None or ib is None:
        fail("C1", pin_hint(a, b))  # once: what makes the two comparable
        return list(conds.values())

    # C1: the same cohort
    ca, cb = ia.assignment.cohort, ib.assignment.cohort
    if ca.suite != cb.suite:
        for field_name, what in (
            ("suite_id", "suite id"),
            ("revision", "suite revision"),
            ("suite_fingerprint", "suite fingerprint"),
        ):
            va, vb = getattr(ca.suite, field_name), getattr(cb.suite, field_name)
            if va != vb:
                fail("C1", f"{what}: A {va}, B {vb}")
    if ca.policy != cb.policy:
        fail("C1", f"sampling policy: A {ca.policy}, B {cb.policy}")
    sealed_a, sealed_b = recorded_commitment(a.record.extra), recorded_commitment(b.record.extra)
    if sealed_a != sealed_b:
        if sealed_a is None or sealed_b is None:
            which, other = ("A", "B") if sealed_a is not None else ("B", "A")
            fail("C1", f"sealing: run {which} was sealed, run {other} was not; their procedural fixtures differ")
        else:
            fail(
                "C1",
                f"sealing: the runs were sealed with different secrets (commitments A {sealed_a[:19]}..., "
                f"B {sealed_b[:19]}...); their procedural fixtures differ",
            )
    elif sealed_a is not None:
        conds["C1"].notes.append(f"both runs sealed with the same secret (commitment {sealed_a[:19]}...)")
    for run, info in ((a, ia), (b, ib)):
        if info.alias:
            conds["C1"].notes.append(
                f"run {run.name} asked for {info.requested} (alias {info.alias!r}); its recorded pin is what counts"
            )

    # C2: matched, verified assignments that were actually run
    for run, info in ((a, ia), (b, ib)):
        if suite is None:
            conds["C2"].notes.append(
                f"run {run.name}: no suite file pinning {info.assignment.cohort.suite} at hand; its assignment is unverified"
            )
        elif suite.ref != info.assignment.cohort.suite:
            if suite_explicit:
                fail(
                    "C2",
                    f"run {run.name}: the suite file given pins {suite.ref}, the run recorded {info.assignment.cohort.suite}",
                )
            else:
                conds["C2"].notes.append(
                    f"run {run.name}: the suite file found pins {suite.ref}, not the recorded pin; its assignment is unverified"
                )
        else:
            try:
                verify_assignment(suite, info.assignment.cohort.policy, info.assignment)
                conds["C2"].notes.append(f"run {run.name}: assignment verified against the suite file")
            except AssignmentError as exc:
                for p in exc.problems:
                    fail("C2", f"run {run.name}: {p}")
        if list(run.record.cases) != list(info.assignment.labels):
            fail(
                "C2",
                f"run {run.name} ran {len(run.record.cases)} case(s) that are not exactly its assignment's {len(info.assignment.labels)}",
            )
    for m in assignment_mismatches(ia.assignment, ib.assignment):
        fail("C2", m)

    # C3: the same scoring code and units
    sa, sb = ia.conditions.scoring, ib.conditions.scoring
    for run, s in ((a, sa), (b, sb)):
        if s.registry_hash is None or s.implementation_hash is None:
            fail("C3", f"run {run.name} does not record its scoring code ({s.unavailable or 'no hashes'})")
    if sa.registry_hash and sb.registry_hash and sa.registry_hash != sb.registry_hash:
        fail("C3", f"comparator registry hash: A {sa.registry_hash[:16]}..., B {sb.registry_hash[:16]}...")
    if sa.implementation_hash and sb.implementation_hash and sa.implementation_hash != sb.implementation_hash:
        fail(
            "C3", f"scorer implementation hash: A {sa.implementation_hash[:16]}..., B {sb.implementation_hash[:16]}..."
        )
    for run, info in ((a, ia), (b, ib)):
        if run.receipt_problem:
            fail("C3", f"run {run.name}: {run.receipt_problem}")
        for key, value in run.receipt_scorer.items():
            if value != getattr(info.conditions.scoring, key):
                fail("C3", f"run {run.name}: receipt.json and run.json name different scorer {key.replace('_', ' ')}es")
    for key in ("registry_hash", "implementation_hash"):
        ra, rb = a.receipt_scorer.get(key), b.receipt_scorer.get(key)
        if ra and rb and ra != rb:
            fail("C3", f"receipt.json: the two runs name different scorer {key.replace('_', ' ')}es")
    for label in ia.assignment.labels:
        if label not in ib.assignment.labels:
            continue
        closures: list[str | None] = []
        if not a.samples.get(label) or not b.samples.get(label):
            continue  # nothing of it is compared (it is listed as unmatched)
        for run, s in ((a, sa), (b, sb)):
            digest = s.cases.get(label)
            if digest is None:
                why = s.case_problems.get(label, "the run records none")
                fail("C3", f"{label}: run {run.name} does not record its scoring closure ({scrub(why)})")
            closures.append(digest)
        if None not in closures and closures[0] != closures[1]:
            fail(
                "C3",
                f"{label}: the scoring closure differs (A {closures[0][7:23]}..., B {closures[1][7:23]}...): "
                "its verifier, a function it calls, or its limits changed",
            )
        ua, ub = _units(a, label), _units(b, label)
        for metric in sorted(set(ua) & set(ub)):
            for run, units in ((a, ua[metric]), (b, ub[metric])):
                if len(units) > 1:
                    fail("C3", f"{label}: metric {metric} has several units in run {run.name}: {sorted(units)}")
            if ua[metric] != ub[metric]:
                fail("C3", f"{label}: metric {metric} is in {sorted(ua[metric])} in A, {sorted(ub[metric])} in B")

    # C4: compatible declared conditions
    for run, info in ((a, ia), (b, ib)):
        if not run.record.complete:
            fail("C4", f"run {run.name} is incomplete (interrupted or still running)")
        if run.record.samples != info.conditions.samples:
            fail(
                "C4",
                f"run {run.name}: run.json says {run.record.samples} sample(s), its conditions {info.conditions.samples}",
            )
    da, db = ia.conditions, ib.conditions
    for field_name, what in (
        ("samples", "samples per case"),
        ("timeout", "time-limit override"),
        ("fixtures", "fixture selection"),
        ("platform", "platform class"),
    ):
        va, vb = getattr(da, field_name), getattr(db, field_name)
        if va != vb:
            fail("C4", f"{what}: A {va}, B {vb}")
    executions = []
    for run in (a, b):
        execution = run.record.extra.get(EXECUTION_KEY)
        if not isinstance(execution, Mapping):
            fail("C4", f"run {run.name} does not record the conditions its subject ran under (extra.execution)")
        executions.append(execution if isinstance(execution, Mapping) else None)
    ea, eb = executions
    if ea is not None and eb is not None:
        for name in EXECUTION_CONDITIONS:
            va, vb = ea.get(name), eb.get(name)
            if va == vb:
                continue
            text = f"{name}: A {shown_value(va)}, B {shown_value(vb)}"
            if name in allow:
                conds["C4"].notes.append(f"{text} (allowed by --allow-conditions {name})")
            else:
                fail("C4", f"{text} (compare anyway with --allow-conditions {name})")
    return list(conds.values())


def shown_value(value: Any) -> str:
    """An execution condition's value in words: a mapping as ``key value, ...``, a list by its items."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "{}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


# --------------------------------------------------------------------------- pairing


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values))


def _metric_diff(
    name: str, unit: str, xs: Sequence[float], ys: Sequence[float], seed: int, resamples: int
) -> MetricDiff:
    """Paired means of one metric in A and B, their difference and its seeded bootstrap interval."""
    return MetricDiff(
        metric=name,
        unit=unit,
        pairs=len(xs),
        mean_a=_mean(xs),
        mean_b=_mean(ys),
        diff=_mean(ys) - _mean(xs),
        ci=paired_bootstrap(xs, ys, seed=seed, resamples=resamples),
    )


@dataclass
class _Replicate:
    """The sample pairs of one case that saw one fixture: one piece of evidence."""

    passes: list[tuple[bool, bool]] = field(default_factory=list)
    values: dict[str, tuple[str, list[float], list[float]]] = field(default_factory=dict)

    @property
    def rates(self) -> tuple[float, float]:
        n = len(self.passes)
        return sum(x for x, _ in self.passes) / n, sum(y for _, y in self.passes) / n


def _replicate_key(x: Any, y: Any, n: int) -> tuple[str | None, str]:
    """``(key, why it is no pair)``: the fixture both samples saw; '' when neither says (one key for
    every such sample of the case: pooled, never counted as more evidence than one)."""
    fa, fb = x.fixture_digest, y.fixture_digest
    if fa is None or fb is None:
        return "", ""
    if fa != fb:
        return None, f"sample {n}: A and B saw different fixtures ({fa[7:19]}..., {fb[7:19]}...)"
    return fa, ""


def _pair_case(
    label: str, a: LoadedRun, b: LoadedRun, samples: int, seed: int, resamples: int
) -> tuple[CaseComparison | None, str, list[_Replicate]]:
    sa, sb = a.samples.get(label, {}), b.samples.get(label, {})
    replicates: dict[str, _Replicate] = {}
    excluded: list[str] = []
    for n in range(samples):
        x, y = sa.get(n), sb.get(n)
        if x is None or y is None:
            side = "A" if x is None else "B"
            excluded.append(f"sample {n}: no readable summary in run {side}")
            continue
        if x.status not in PASS | FAIL or y.status not in PASS | FAIL:
            excluded.append(f"sample {n}: A {x.status}, B {y.status}")
            continue
        key, why = _replicate_key(x, y, n)
        if key is None:
            excluded.append(why)
            continue
        rep = replicates.setdefault(key, _Replicate())
        rep.passes.append((x.status in PASS, y.status in PASS))
        ma = {m.name: m for m in x.metrics}
        mb = {m.name: m for m in y.metrics}
        for name in sorted(set(ma) & set(mb)):
            va, vb = ma[name].value, mb[name].value
            if va is None or vb is None:
                continue
            unit, xs, ys = rep.values.setdefault(name, (ma[name].unit, [], []))
            xs.append(va)
            ys.append(vb)
    for run in (a, b):
        for why in run.missing.get(label, []):
            excluded.append(f"run {run.name} {why}")
    if not replicates:
        reason = "; ".join(dict.fromkeys(excluded)) or "no sample pairs"
        return None, reason, []
    reps = list(replicates.values())
    pairs = [p for r in reps for p in r.passes]
    n = len(pairs)
    pa = sum(1 for x, _ in pairs if x)
    pb = sum(1 for _, y in pairs if y)
    # a metric's mean per replicate, then over replicates (a metric only some replicates report is
    # over those that do)
    per_metric: dict[str, tuple[str, list[float], list[float]]] = {}
    for r in reps:
        for name, (unit, xs, ys) in r.values.items():
            _, mx, my = per_metric.setdefault(name, (unit, [], []))
            mx.append(_mean(xs))
            my.append(_mean(ys))
    metrics = [_metric_diff(name, unit, xs, ys, seed, resamples) for name, (unit, xs, ys) in sorted(per_metric.items())]
    rates = [r.rates for r in reps]
    case = CaseComparison(
        label=label,
        pairs=n,
        fixtures=len(reps),
        passed_a=pa,
        passed_b=pb,
        rate_a=pa / n,
        rate_b=pb / n,
        rate_diff=(pb - pa) / n,
        only_a=sum(1 for ra, rb in rates if ra > rb),
        only_b=sum(1 for ra, rb in rates if rb > ra),
        metrics=metrics,
        excluded=excluded,
    )
    return case, "", reps


def compare_loaded(
    a: LoadedRun, b: LoadedRun, conditions: list[Condition], *, seed: int = 0, resamples: int = 2000
) -> Comparison:
    """The comparison of two loaded runs whose conditions were checked (statistics only if all hold)."""
    result = Comparison(
        a=a.side, b=b.side, conditions=conditions, bootstrap={"seed": seed, "resamples": resamples, "level": 0.95}
    )
    result.comparable = all(c.holds for c in conditions)
    if not result.comparable or a.info is None or b.info is None:
        return result
    samples = a.info.conditions.samples
    all_pairs: list[tuple[bool, bool]] = []
    fixtures = only_a = only_b = 0
    per_metric: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for label in a.info.assignment.labels:
        case, reason, reps = _pair_case(label, a, b, samples, seed, resamples)
        if case is None:
            result.unmatched.append(Unmatched(label=label, reason=reason))
            continue
        result.cases.append(case)
        all_pairs.extend(p for r in reps for p in r.passes)
        fixtures += case.fixtures
        only_a += case.only_a
        only_b += case.only_b
        for m in case.metrics:
            ca, cb = per_metric.setdefault((m.metric, m.unit), ([], []))
            ca.append(m.mean_a)
            cb.append(m.mean_b)
    if result.cases:
        n = len(all_pairs)
        pa = sum(1 for x, _ in all_pairs if x)
        pb = sum(1 for _, y in all_pairs if y)
        metrics = [
            _metric_diff(name, unit, xs, ys, seed, resamples) for (name, unit), (xs, ys) in sorted(per_metric.items())
        ]
        result.overall = Overall(
            cases=len(result.cases),
            pairs=n,
            fixtures=fixtures,
            passed_a=pa,
            passed_b=pb,
            rate_a=pa / n,
            rate_b=pb / n,
            rate_diff=(pb - pa) / n,
            only_a=only_a,
            only_b=only_b,
            mcnemar_p=mcnemar_exact(only_a, only_b) if fixtures >= 2 else None,
            metrics=metrics,
        )
    return result


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    *,
    suite: Any = None,
    suite_explicit: bool = False,
    seed: int = 0,
    resamples: int = 2000,
    allow_missing: bool = False,
    allow_conditions: Iterable[str] = (),
    prices: PriceTable | None = None,
) -> Comparison:
    """Load two run folders, check C1..C4 and, only when all hold, compare them.

    Each side's usage is given whenever both runs check out (comparable or not: it describes each
    run, it pairs nothing), with its cost under ``prices`` (``--prices``; :mod:`imagebench.suite.spending`).

    A sample summary that is missing, changed after its run journaled it, or never journaled makes
    the two runs not comparable (each is named), unless ``allow_missing``: then those pairs are
    left out and named in each case's exclusions."""
    a, pa = load_run(run_a, "A", lean=True)  # each sample as what is paired of it: bounded memory
    b, pb = load_run(run_b, "B", lean=True)
    if a is None or b is None:
        return Comparison(a=a.side if a else None, b=b.side if b else None, problems=pa + pb)
    untrusted = [
        f"run {r.name} {'is forged' if r.contents.forged else 'cannot be verified'}: {scrub(p)}"
        for r in (a, b)
        for p in r.contents.integrity
    ]
    if untrusted:
        return Comparison(
            a=a.side,
            b=b.side,
            problems=[*untrusted, "not comparable: a run folder that does not check out is never compared"],
        )
    if not allow_missing:
        gaps = [f"run {r.name} {label} {why}" for r in (a, b) for label, whys in r.missing.items() for why in whys]
        if gaps:
            more = f" (and {len(gaps) - 10} more)" if len(gaps) > 10 else ""
            return Comparison(
                a=a.side,
                b=b.side,
                problems=[
                    *gaps[:10],
                    f"not comparable: {len(gaps)} sample(s) cannot be used{more}; "
                    "compare them anyway with --allow-missing",
                ],
            )
    allow = set(allow_conditions)
    unknown = sorted(allow - set(EXECUTION_CONDITIONS))
    if unknown:
        raise ValueError(
            f"--allow-conditions: {', '.join(unknown)} is not an execution condition "
            f"(expected one of {', '.join(EXECUTION_CONDITIONS)})"
        )
    conditions = check_conditions(a, b, suite=suite, suite_explicit=suite_explicit, allow=allow)
    from imagebench.suite.spending import with_usage

    return with_usage(compare_loaded(a, b, conditions, seed=seed, resamples=resamples), a, b, prices)
