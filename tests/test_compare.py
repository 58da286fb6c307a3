"""Honest comparison: each of C1-C4 fails on its own, and the paired statistics are right."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case

from imagebench import cli
from imagebench.case.model import Case
from imagebench.executor import run_cases
from imagebench.subjects import NopSubject, ReferenceSubject, UnitContext
from imagebench.suite.compare import compare_runs, mcnemar_exact, paired_bootstrap
from imagebench.suite.model import SuiteManifest, write_suite
from imagebench.suite.record import RUN_INFO_KEY, SuiteRunInfo, conditions_now
from imagebench.suite.resolve import pin_suite
from imagebench.suite.sampling import assign

REV = "2026.11.0"


class Sloppy:
    """Right mask every time; the area 10% too large on even samples (so it fails those)."""

    name = "sloppy"

    def bind(self, case: Case, context: UnitContext) -> Callable[[Any], None]:
        even = int(context.sample_dir.name.split("-")[1]) % 2 == 0

        def work(session: Any) -> None:
            mask = np.asarray(session.namespace["image"]) > 0.5
            session.namespace["mask"] = mask
            session.namespace["area"] = float(mask.sum()) * (1.1 if even else 1.0)

        return work


def toy_cases() -> list[Case]:
    return [make_toy_case("alpha"), make_toy_case("beta", seed=1), make_toy_case("gamma", seed=2)]


def pinned(cases: list[Case], suite_id: str = "core") -> SuiteManifest:
    manifest, problems = pin_suite(suite_id, REV, cases)
    assert manifest is not None, problems
    return manifest


def suite_run(
    out: Path,
    manifest: SuiteManifest,
    cases: list[Case],
    subject: Any,
    *,
    policy: str = "all",
    seed: int = 0,
    samples: int = 1,
    timeout: float | None = None,
) -> Path:
    """What ``imagebench run --suite`` does, through the API (any subject object can be used)."""
    assignment = assign(manifest, policy, seed)
    by_label = {c.label: c for c in cases}
    chosen = [by_label[label] for label in assignment.labels]
    info = SuiteRunInfo(
        requested=manifest.suite_id,
        assignment=assignment,
        conditions=conditions_now(samples=samples, timeout=timeout, cases=chosen),
    )
    result = run_cases(
        chosen,
        subject,
        samples=samples,
        out=out,
        progress=False,
        timeout=timeout,
        record_extra={RUN_INFO_KEY: info.model_dump(mode="json")},
    )
    return result.run_dir


def edit(path: Path, change: Callable[[dict[str, Any]], None], *, journal: bool = True) -> None:
    """Change a record as a run that produced it would have written it. For a sample summary the
    run's journal takes the new digest too (``journal=False``: a hand edit the journal never saw)."""
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw))
    if not journal:
        return
    from helpers import resign_run

    run_dir = next(p for p in path.parents if (p / "run.json").is_file())
    if path.parent.name.startswith("sample-"):
        # ... and the case's summary over its samples, as the run writes it after them
        case_summary = path.parent.parent / "summary.json"
        if case_summary.is_file():
            statuses = [json.loads(p.read_text())["status"] for p in sorted(path.parent.parent.glob("sample-*/summary.json"))]
            case = json.loads(case_summary.read_text())
            case.update(counts={st: statuses.count(st) for st in set(statuses)}, passed=statuses.count("ok"))
            case_summary.write_text(json.dumps(case))
    resign_run(run_dir)  # the journal signs run.json's fixed fields and each summary's digest


def conditions(result: Any) -> dict[str, Any]:
    return {c.id: c for c in result.conditions}


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    cases = toy_cases()
    manifest = pinned(cases)
    suite_file = write_suite(tmp_path / "suites" / "core.json", manifest)
    return {"cases": cases, "suite": manifest, "suite_file": suite_file, "out": tmp_path / "out"}


# --------------------------------------------------------------------------- statistics


def test_mcnemar_exact_against_hand_computation() -> None:
    # p = min(1, 2 * sum_{i<=min(b,c)} C(b+c, i) / 2^(b+c))
    assert mcnemar_exact(3, 0) == pytest.approx(2 * 1 / 8)  # 0.25
    assert mcnemar_exact(0, 3) == pytest.approx(0.25)
    assert mcnemar_exact(5, 1) == pytest.approx(2 * (1 + 6) / 64)  # 0.21875
    assert mcnemar_exact(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)  # 0.03857...
    assert mcnemar_exact(8, 0) == pytest.approx(2 / 256)
    assert mcnemar_exact(4, 4) == 1.0 and mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(2, 3) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)
    with pytest.raises(ValueError):
        mcnemar_exact(True, 2)


def test_paired_bootstrap_is_seeded_and_paired() -> None:
    a = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    b = [0.2, 0.1, 0.5, 0.4, 0.9, 0.6]
    first = paired_bootstrap(a, b, seed=3)
    assert first == paired_bootstrap(a, b, seed=3)
    assert first != paired_bootstrap(a, b, seed=4)
    assert first is not None and first[0] <= float(np.mean(np.subtract(b, a))) <= first[1]
    # pairing: adding the same offset to both sides leaves the interval of the difference alone
    shifted = paired_bootstrap([x + 5 for x in a], [y + 5 for y in b], seed=3)
    assert shifted == pytest.approx(first)
    assert paired_bootstrap([1.0], [2.0], seed=0) is None
    assert paired_bootstrap([1.0, 1.0], [2.0, 2.0], seed=0) == pytest.approx((1.0, 1.0))
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap([1.0], [1.0, 2.0], seed=0)


# Golden values, recorded from the hand-written implementations these functions replaced
# (an exact rational McNemar, and a numpy percentile bootstrap over rng.integers resamples).
# The McNemar p is exact as a rational; the float the new code returns may differ from the
# correctly rounded one in the last bits (n >= 15), never by more than a relative 1e-12.
MCNEMAR_GOLDEN = {
    (0, 0): 1.0,  # no discordant pair
    (1, 0): 1.0,  # n = 1
    (0, 1): 1.0,
    (3, 0): 0.25,  # all discordant one way
    (0, 3): 0.25,
    (8, 0): 0.0078125,
    (20, 0): 1.9073486328125e-06,
    (100, 0): 1.5777218104420236e-30,
    (0, 1000): 1.8665272370064378e-301,  # near the float's floor, not 0
    (5, 1): 0.21875,
    (1, 5): 0.21875,
    (10, 2): 0.03857421875,
    (4, 4): 1.0,  # balanced
    (2, 3): 1.0,
    (25, 30): 0.5900533317766357,
    (60, 40): 0.05688793364098079,
    (517, 483): 0.2966893507732786,
    (1075, 925): 0.000858697892589366,
}


def _exact_mcnemar(b: int, c: int) -> Fraction:
    """The two-sided exact McNemar p as a rational: min(1, 2 P[X <= min(b, c)]), X ~ Bin(b + c, 1/2)."""
    n = b + c
    if n == 0:
        return Fraction(1)
    tail = Fraction(sum(math.comb(n, i) for i in range(min(b, c) + 1)), 2**n)
    return min(Fraction(1), 2 * tail)


def test_mcnemar_matches_the_golden_values() -> None:
    for (b, c), p in MCNEMAR_GOLDEN.items():
        assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12, abs=0), (b, c)
        if b + c < 15:  # small n: every p is a short dyadic fraction, held bit for bit
            assert mcnemar_exact(b, c) == p, (b, c)


def test_mcnemar_against_exact_rational_arithmetic() -> None:
    for n in range(61):
        for b in range(n + 1):
            exact = _exact_mcnemar(b, n - b)
            got = mcnemar_exact(b, n - b)
            assert got == pytest.approx(float(exact), rel=1e-12, abs=0), (b, n - b)
            if n < 15:
                assert got == float(exact), (b, n - b)
    assert mcnemar_exact(5000, 0) == 0.0  # below the smallest float, as the rational rounds


def _wave(n: int) -> tuple[list[float], list[float]]:
    a = [math.sin(i) for i in range(n)]
    return a, [x + 0.1 * math.cos(3 * i) + 0.05 for i, x in enumerate(a)]


SIX = ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.2, 0.1, 0.5, 0.4, 0.9, 0.6])
BOOTSTRAP_GOLDEN: list[tuple[tuple[list[float], list[float]], dict[str, Any], tuple[float, float] | None]] = [
    (SIX, {"seed": 0}, (-0.016666666666666666, 0.23333333333333336)),
    (SIX, {"seed": 3}, (-0.016666666666666666, 0.2337499999999978)),
    (SIX, {"seed": 5, "resamples": 1}, (0.25, 0.25)),  # one resample: its mean, without a warning
    (([0.0, 1.0], [1.0, 3.0]), {"seed": 0}, (1.0, 2.0)),  # two pairs
    (([1.0, 2.0, 3.0], [1.5, 2.0, 4.0]), {"seed": 3}, (0.0, 1.0)),
    (([1.0, 1.0], [2.0, 2.0]), {"seed": 0}, (1.0, 1.0)),  # no spread
    (([1.0], [2.0]), {"seed": 0}, None),  # n = 1
    (([], []), {"seed": 0}, None),
    (_wave(50), {"seed": 0}, (0.02967483812747185, 0.07117704093010219)),
    (_wave(50), {"seed": 7, "resamples": 7}, (0.03894014822627932, 0.0637086152569726)),
    (_wave(50), {"seed": 1, "level": 0.9}, (0.033453945071954164, 0.06700568667768955)),
    (_wave(50), {"seed": 2, "resamples": 2500}, (0.030068258047102905, 0.07019257714116738)),
    (_wave(1500), {"seed": 0}, (0.04650987899445991, 0.053657008901404235)),
    (_wave(1500), {"seed": 7, "resamples": 7}, (0.048959076457323704, 0.05297165545517307)),
    (_wave(1500), {"seed": 1, "level": 0.9}, (0.04705522760839602, 0.05303942061557889)),
]


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize(("pairs", "kwargs", "expected"), BOOTSTRAP_GOLDEN)
def test_paired_bootstrap_matches_the_golden_values(
    pairs: tuple[list[float], list[float]], kwargs: dict[str, Any], expected: tuple[float, float] | None
) -> None:
    got = paired_bootstrap(*pairs, **kwargs)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_paired_bootstrap_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="level"):
        paired_bootstrap(*SIX, seed=0, level=1.0)
    with pytest.raises(ValueError, match="resamples"):
        paired_bootstrap(*SIX, seed=0, resamples=0)


# --------------------------------------------------------------------------- when everything holds


def test_comparable_runs_give_paired_outcomes_and_statistics(world: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject(), samples=2)
    b = suite_run(world["out"], world["suite"], world["cases"], Sloppy(), samples=2)
    result = compare_runs(a, b, suite=world["suite"], suite_explicit=True, seed=1)
    assert result.comparable and result.problems == []
    assert all(c.holds for c in result.conditions)
    assert any("verified against the suite file" in n for n in conditions(result)["C2"].notes)
    assert [c.label for c in result.cases] == ["toy/alpha", "toy/beta", "toy/gamma"] and result.unmatched == []
    for case in result.cases:
        # both samples of a case saw its one fixture: two pairs, one replicate
        assert (case.pairs, case.fixtures, case.passed_a, case.passed_b, case.only_a, case.only_b) == (2, 1, 2, 1, 1, 0)
        assert case.rate_diff == pytest.approx(-0.5)
        area = {m.metric: m for m in case.metrics}["area_error"]
        assert area.mean_a == pytest.approx(0.0) and area.mean_b == pytest.approx(0.05) and area.diff == pytest.approx(0.05)
        assert area.pairs == 1 and area.ci is None  # no interval over one replicate
        mask = {m.metric: m for m in case.metrics}["mask_error"]
        assert mask.diff == pytest.approx(0.0)
    o = result.overall
    assert o is not None
    assert (o.cases, o.pairs, o.fixtures, o.passed_a, o.passed_b, o.only_a, o.only_b) == (3, 6, 3, 6, 3, 3, 0)
    assert o.mcnemar_p == pytest.approx(0.25)  # over 3 fixtures, not 6 pseudo-pairs
    area = {m.metric: m for m in o.metrics}["area_error"]
    assert area.pairs == 3 and area.diff == pytest.approx(0.05) and area.ci == pytest.approx((0.05, 0.05))

    # the command: a table, or JSON; the same bootstrap seed gives the same numbers
    assert cli.main(["compare", str(a), str(b), "--suite", str(world["suite_file"])]) == 0
    text = capsys.readouterr().out
    assert "McNemar exact p = 0.25 over 3 distinct fixtures" in text and "toy/alpha" in text and "2/2" in text and "1/2" in text
    assert cli.main(["compare", str(a), str(b / "run.json"), "--json", "--suite", str(world["suite_file"])]) == 0
    first = capsys.readouterr().out
    assert cli.main(["compare", str(a), str(b), "--json", "--suite", str(world["suite_file"])]) == 0
    assert capsys.readouterr().out == first
    data = json.loads(first)
    assert data["comparable"] is True and data["overall"]["mcnemar_p"] == pytest.approx(0.25)
    assert data["direction"] == "B - A" and data["bootstrap"]["seed"] == 0


def test_the_suite_file_is_looked_up_by_the_recorded_pin(world: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject())
    b = suite_run(world["out"], world["suite"], world["cases"], NopSubject())
    suites = str(world["suite_file"].parent)
    assert cli.main(["compare", str(a), str(b), "--json", "--suites-dir", suites]) == 0
    data = json.loads(capsys.readouterr().out)
    c2 = next(c for c in data["conditions"] if c["id"] == "C2")
    assert c2["notes"] == ["run A: assignment verified against the suite file", "run B: assignment verified against the suite file"]
    # no suite file at hand: the comparison says its assignments are unverified
    assert cli.main(["compare", str(a), str(b), "--json", "--suites-dir", str(world["out"])]) == 0
    c2 = next(c for c in json.loads(capsys.readouterr().out)["conditions"] if c["id"] == "C2")
    assert all("unverified" in n for n in c2["notes"])


# --------------------------------------------------------------------------- each condition fails on its own


def assert_only(result: Any, failing: str, needle: str) -> None:
    conds = conditions(result)
    assert not result.comparable
    assert [cid for cid, c in conds.items() if not c.holds] == [failing]
    assert any(needle in p for p in conds[failing].problems), conds[failing].problems
    assert result.cases == [] and result.overall is None and result.unmatched == []  # nothing compared


def test_c1_a_run_from_another_suite(world: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = pinned(world["cases"], suite_id="other")
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject())
    b = suite_run(world["out"], other, world["cases"], ReferenceSubject())
    result = compare_runs(a, b)
    conds = conditions(result)
    assert not conds["C1"].holds and any("suite id: A core, B other" in p for p in conds["C1"].problems)
    assert not conds["C2"].holds  # their assignments cannot pair either
    assert result.cases == [] and result.overall is None
    assert cli.main(["compare", str(a), str(b), "--suites-dir", str(tmp_path)]) == 1
    assert "not comparable" in capsys.readouterr().out
    # another sampling policy is another cohort
    c = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject(), policy="first:3")
    result = compare_runs(a, c)
    assert any("sampling policy: A all, B first:3" in p for p in conditions(result)["C1"].problems)


def test_c2_different_replicate_seeds(world: dict[str, Any]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject(), policy="seeded:2", seed=0)
    b = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject(), policy="seeded:2", seed=1)
    assert_only(compare_runs(a, b, suite=world["suite"]), "C2", "replicate seed: A 0, B 1")


def test_c2_forged_assignments_are_refused_when_the_suite_is_at_hand(world: dict[str, Any]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject(), policy="seeded:2", seed=0)
    b = suite_run(world["out"], world["suite"], world["cases"], NopSubject(), policy="seeded:2", seed=0)
    real = json.loads((a / "run.json").read_text())["cases"]
    forged_list = [label for label in world["suite"].labels if label not in real] + real[:1]
    forged_list = [label for label in world["suite"].labels if label in forged_list]

    def forge(raw: dict[str, Any]) -> None:
        raw["extra"]["suite"]["assignment"]["labels"] = forged_list
        raw["cases"] = forged_list

    for run in (a, b):
        edit(run / "run.json", forge)
    # the journal holds the units that really ran: a run.json that names others is forged
    forged = compare_runs(a, b, allow_missing=True)
    assert not forged.comparable and any("run.json does not expect" in p for p in forged.problems)

    # an assignment forged alone (cases as run) still names units the journal never saw run, or
    # leaves out one it did: the same refusal, before any condition
    for run in (a, b):
        edit(run / "run.json", lambda raw: raw.update(cases=real))
    again = compare_runs(a, b, suite=world["suite"], allow_missing=True)
    assert not again.comparable and any("run.json does not expect" in p for p in again.problems)


def test_c2_an_explicit_suite_file_that_is_not_the_recorded_pin(world: dict[str, Any]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject())
    b = suite_run(world["out"], world["suite"], world["cases"], NopSubject())
    other = pinned(list(reversed(world["cases"])))
    assert_only(compare_runs(a, b, suite=other, suite_explicit=True), "C2", "the suite file given pins")
    found = compare_runs(a, b, suite=other, suite_explicit=False)
    assert found.comparable and any("not the recorded pin" in n for n in conditions(found)["C2"].notes)


def test_c3_scoring_code_and_units(world: dict[str, Any]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject())
    b = suite_run(world["out"], world["suite"], world["cases"], Sloppy())
    assert compare_runs(a, b).comparable

    edit(b / "run.json", lambda raw: raw["extra"]["suite"]["conditions"]["scoring"].update(registry_hash="f" * 64))
    assert_only(compare_runs(a, b), "C3", "comparator registry hash: A")
    edit(b / "run.json", lambda raw: raw["extra"]["suite"]["conditions"]["scoring"].update(registry_hash=None, unavailable="gone"))
    assert_only(compare_runs(a, b), "C3", "run B does not record its scoring code (gone)")

    c = suite_run(world["out"], world["suite"], world["cases"], Sloppy())
    summary = c / "sloppy" / "toy" / "beta" / "sample-0" / "summary.json"
    edit(summary, lambda raw: [m.update(unit="px") for m in raw["metrics"] if m["name"] == "area_error"])
    assert_only(compare_runs(a, c), "C3", "toy/beta: metric area_error is in ['rel'] in A, ['px'] in B")

    # receipt.json (imagebench.runs.receipt), when present, must agree with run.json and with the other run
    d = suite_run(world["out"], world["suite"], world["cases"], Sloppy())
    scoring = json.loads((a / "run.json").read_text())["extra"]["suite"]["conditions"]["scoring"]
    anchors = {run: json.loads((run / "receipt.json").read_text())["journal"] for run in (a, d)}
    for run in (a, d):
        scorer = {k: scoring[k] for k in ("registry_hash", "implementation_hash")}
        (run / "receipt.json").write_text(json.dumps({"scorer": scorer, "journal": anchors[run]}))
    assert compare_runs(a, d).comparable
    (d / "receipt.json").write_text(json.dumps({"scorer": {"registry_hash": "2" * 64}, "journal": anchors[d]}))
    result = compare_runs(a, d)
    assert not conditions(result)["C3"].holds
    problems = conditions(result)["C3"].problems
    assert "receipt.json: the two runs name different scorer registry hashes" in problems
    assert "run B: receipt.json and run.json name different scorer registry hashes" in problems
    (d / "receipt.json").write_text("{")  # unreadable: it cannot anchor the journal either, so nothing is compared
    result = compare_runs(a, d)
    assert not result.comparable and any("receipt.json does not anchor the journal" in p for p in result.problems)


def test_c4_declared_conditions(world: dict[str, Any]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject(), samples=2)
    b = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject(), samples=1)
    assert_only(compare_runs(a, b), "C4", "samples per case: A 2, B 1")

    c = suite_run(world["out"], world["suite"], world["cases"], NopSubject(), samples=2, timeout=5.0)
    assert_only(compare_runs(a, c), "C4", "time-limit override: A None, B 5.0")

    d = suite_run(world["out"], world["suite"], world["cases"], NopSubject(), samples=2)
    assert compare_runs(a, d).comparable
    edit(d / "run.json", lambda raw: raw["extra"]["suite"]["conditions"].update(platform="darwin-aarch64"))
    assert_only(compare_runs(a, d), "C4", "platform class: A")
    edit(d / "run.json", lambda raw: (raw["extra"]["suite"]["conditions"].update(platform=conditions_now(samples=1, timeout=None).platform), raw.update(complete=False)))
    assert_only(compare_runs(a, d), "C4", "run B is incomplete")


# --------------------------------------------------------------------------- bad input


def test_unreadable_or_non_suite_runs(world: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject())
    b = suite_run(world["out"], world["suite"], world["cases"], NopSubject())
    text = (b / "run.json").read_text()
    (b / "run.json").write_text(text[: len(text) // 3])  # truncated
    result = compare_runs(a, b)
    assert not result.comparable and result.conditions == []
    assert result.problems and result.problems[0].startswith(f"run B ({b.name}): run.json is not readable: not valid JSON")
    assert str(tmp_path) not in result.problems[0]
    assert cli.main(["compare", str(a), str(b)]) == 1
    assert "cannot compare" in capsys.readouterr().out

    assert compare_runs(a, tmp_path / "nowhere").problems == ["run B (nowhere): not a run folder"]

    plain = run_cases(world["cases"], NopSubject(), out=world["out"], progress=False).run_dir
    result = compare_runs(a, plain)
    assert {c.id for c in result.conditions if not c.holds} == {"C1", "C2", "C3", "C4"}
    assert all(any("run B records no cohort" in p for p in c.problems) for c in result.conditions)

    edit(plain / "run.json", lambda raw: raw["extra"].update(suite={"assignment": "?"}))
    result = compare_runs(a, plain)
    assert result.problems and "field 'extra.suite." in result.problems[0]


def test_unmatched_cases_are_listed_not_pooled(world: dict[str, Any]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject(), samples=2)
    b = suite_run(world["out"], world["suite"], world["cases"], Sloppy(), samples=2)
    for n in range(2):
        edit(b / "sloppy" / "toy" / "beta" / f"sample-{n}" / "summary.json", lambda raw: raw.update(status="harness-error", passed=False))
    from helpers import resign_run

    resign_run(b, drop={("toy/gamma", 1)})  # a sample the run never wrote (not one deleted after it)
    result = compare_runs(a, b, suite=world["suite"], allow_missing=True)
    assert result.comparable
    assert [u.label for u in result.unmatched] == ["toy/beta"]
    assert "sample 0: A ok, B harness-error" in result.unmatched[0].reason
    gamma = next(c for c in result.cases if c.label == "toy/gamma")
    assert gamma.pairs == 1 and any("no readable summary in run B" in e for e in gamma.excluded)
    o = result.overall
    assert o is not None and o.cases == 2 and o.pairs == 3  # alpha 2 + gamma 1; beta is not pooled
    assert (o.only_a, o.only_b) == (2, 0)


def test_the_table_prints_reasons_with_brackets_literally(world: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject())
    b = suite_run(world["out"], world["suite"], world["cases"], Sloppy())
    edit(b / "sloppy" / "toy" / "alpha" / "sample-0" / "summary.json", lambda raw: [m.update(unit="[/px]") for m in raw["metrics"]])
    assert cli.main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "[/px]" in out  # printed as text, not taken for a closing tag
    assert "not comparable" in out


def test_a_summary_edited_after_the_run_makes_runs_not_comparable(world: dict[str, Any]) -> None:
    """A forged summary (nop turned ok by hand) is named and refused; --allow-missing leaves it out."""
    a = suite_run(world["out"], world["suite"], world["cases"], ReferenceSubject(), policy="seeded:2", seed=0)
    b = suite_run(world["out"], world["suite"], world["cases"], NopSubject(), policy="seeded:2", seed=0)
    forged = next(Path(b).rglob("sample-0/summary.json"))
    edit(forged, lambda raw: raw.update(status="ok", passed=True), journal=False)
    refused = compare_runs(a, b)
    assert not refused.comparable and any("changed after it was journaled" in p for p in refused.problems)
    # the journal vouches for what the run wrote: a folder edited after it is forged, never compared
    allowed = compare_runs(a, b, allow_missing=True)
    assert not allowed.comparable and any("run B is forged" in p for p in allowed.problems)


@pytest.mark.parametrize("status", ["timeout", "subject-error", "truth-tampered", "fixture-overwritten"])
def test_a_failure_of_the_subject_s_doing_is_a_failed_pair_never_left_out(status: str, tmp_path: Path) -> None:
    """The same denominators as the aggregates: a subject that timed out, raised or tampered
    fails its pair (leaving it out would favour the run that gave up on the hard cases)."""
    from imagebench.records import SampleSummary
    from imagebench.suite.compare import LoadedRun, _pair_case

    def sample(st: str) -> SampleSummary:
        return SampleSummary(label="s/c", namespace="s", case_id="c", subject="x", sample=0, status=st, passed=st == "ok")

    a = LoadedRun("A", tmp_path, None, None, samples={"s/c": {0: sample("ok")}})
    b = LoadedRun("B", tmp_path, None, None, samples={"s/c": {0: sample(status)}})
    _, _, reps = _pair_case("s/c", a, b, 1, 0, 10)
    assert [r.passes for r in reps] == [[(True, False)]]
    skipped = LoadedRun("B", tmp_path, None, None, samples={"s/c": {0: sample("harness-error")}})
    assert _pair_case("s/c", a, skipped, 1, 0, 10)[2] == []  # the bench's own failure is left out
