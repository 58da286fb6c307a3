"""The scorer self-test: ground truth fed back into the scorer, a consistency check and never a result.

:func:`run_selftest` checks the scorer manifest against the running code, runs every registered
comparator on its worked example (the gold fed back, the matching and the mismatching
prediction), and, for each given case that carries a task contract, feeds the fixture's truth
back as the answer (as a leaving and as a final message, expecting ``answer_score`` 1.0) and an
empty answer (expecting 0.0). The caller chooses the cases; ``imagebench scorer selftest`` passes
the built-in suite. Agreement says the scorer is consistent with its own ground truth; it is not
a model result and never belongs in a leaderboard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from imagebench.scoring.answer import final_json_message
from imagebench.scoring.comparators import REGISTRY, ComparatorEntry, ContractError
from imagebench.scoring.contract import Blocked, exemplar, scorer_problem

NOTE = (
    "scorer self-test: a consistency check that feeds ground truth back into the scorer; "
    "it is not a model result and never belongs in a leaderboard"
)


@dataclass(frozen=True)
class SelftestCheck:
    """One check: what was tried (``check``) on what (``subject``), what was expected and got."""

    check: str
    subject: str
    expected: str
    got: str
    ok: bool
    note: str = ""

    @property
    def kind(self) -> str:
        """``manifest``, ``comparator``, ``case`` or ``cases``: the check without its detail."""
        return self.check.split(":")[0]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_selftest(
    *,
    cases: Iterable[Any],
    manifest: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[SelftestCheck]:
    """Every self-test check, in order: the manifest, each comparator, each structured case.

    ``cases``: case objects (those whose ``answer`` is a task contract are tested; reading the
    iterable may raise, which is a failed check); ``manifest``: the scorer manifest to check
    (default: the shipped one); ``progress(done, total)`` is called as the cases are tested.
    """
    problem = scorer_problem(manifest)
    checks = [
        SelftestCheck(
            "manifest",
            "imagebench/data/scorer_manifest.json" if manifest is None else str(manifest),
            "pins the running scorer",
            "intact" if problem is None else "mismatch",
            problem is None,
            problem or "",
        )
    ]
    for name in sorted(REGISTRY):
        checks.extend(_comparator_checks(REGISTRY[name]))
    try:
        structured = [c for c in cases if getattr(c, "answer", None) is not None]
    except Exception as exc:
        checks.append(SelftestCheck("cases", "cases", "loads", "error", False, f"{type(exc).__name__}: {exc}"))
        return checks
    if not structured:
        checks.append(
            SelftestCheck("cases", "cases", "structured cases", "none", False, "no case carries a task contract")
        )
    for done, case in enumerate(structured, start=1):
        checks.extend(_case_checks(case))
        if progress is not None:
            progress(done, len(structured))
    return checks


def _comparator_checks(entry: ComparatorEntry) -> list[SelftestCheck]:
    gold, config, good, bad = entry.example
    out = []
    trials = (("gold fed back", None, True), ("example match", good, True), ("example mismatch", bad, False))
    for label, pred, want in trials:
        try:
            if label == "gold fed back":
                pred = entry.exemplar(gold)
            result = entry.compare(pred, gold, config)
            got, note = result.matched, result.reason
        except ContractError as exc:
            got, note = None, f"blocked: {exc}"
        except Exception as exc:  # a broken comparator is a failed check, not a crashed self-test
            got, note = None, f"raised {type(exc).__name__}: {exc}"
        out.append(
            SelftestCheck(
                f"comparator: {label}",
                entry.name,
                "match" if want else "mismatch",
                {True: "match", False: "mismatch", None: "blocked"}[got],
                got is want,
                note,
            )
        )
    return out


def _case_checks(case: Any) -> list[SelftestCheck]:
    from imagebench.fixtures.fixture import Attempt

    def one(got: str, ok: bool, note: str) -> list[SelftestCheck]:
        return [SelftestCheck("case", case.label, "answer_score 1.0", got, ok, note)]

    ok, why = case.available()
    if not ok:
        return one("skipped", True, f"not available here: {why}")
    try:
        fixture = case.build()
        answer = exemplar(case.answer, fixture.truth)
    except Blocked as exc:
        return one("blocked", False, str(exc))
    except Exception as exc:
        return one("error", False, f"{type(exc).__name__}: {exc}")
    checks = []
    trials = (
        ("truth as the answer", Attempt("selftest", arrays={"answer": answer}), 1.0),
        ("truth as a final message", Attempt("selftest", notes={"final_message": final_json_message(answer)}), 1.0),
        ("empty answer", Attempt("selftest", arrays={"answer": {}}), 0.0),
    )
    for label, attempt, want in trials:
        try:
            outcome = case.verify(fixture, attempt)
            info = outcome.detail.get("answer", {})
            got = info.get("answer_score")
            note = outcome.detail.get("blocked") or info.get("unscorable") or ""
            if not note and got != want:
                note = "; ".join(f"{f}: {r['reason']}" for f, r in info.get("fields", {}).items() if not r["matched"])
        except Exception as exc:
            got, note = None, f"{type(exc).__name__}: {exc}"
        checks.append(
            SelftestCheck(
                f"case: {label}",
                case.label,
                f"answer_score {want:.1f}",
                "blocked" if got is None else f"answer_score {got:.1f}",
                got == want,
                note,
            )
        )
    return checks
