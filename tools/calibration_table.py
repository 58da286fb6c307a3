"""Regenerate the calibration table in docs/cases.md from real runs.

Every built-in case is run once with three subjects: its reference solution, its naive baseline
(identity, a global threshold, "no correction": what a person tries first) and ``nop``. For each
metric the table gives the limit, the reference's value and the margin (limit / reference value),
and the baseline's value, so a reader sees at once that the limits let the reference through with
room to spare and stop the naive answer.

Usage::

    python tools/calibration_table.py            # print the table
    python tools/calibration_table.py --write    # and put it into docs/cases.md between the markers
    python tools/calibration_table.py --cases 'segment-nuclei/*' --fixtures curated

``tests/test_calibration.py`` runs the same :func:`calibrate` on every curated case and holds the
rule the table shows: the reference passes, the baseline and ``nop`` fail.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "cases.md"
BEGIN = "<!-- calibration-table:begin (tools/calibration_table.py --write) -->"
END = "<!-- calibration-table:end -->"
SUBJECTS = ("reference", "baseline", "nop")
COMMAND = "python tools/calibration_table.py --write"


@dataclass
class Score:
    """One subject's sample of one case: its status, whether it passed, its metric values."""

    status: str
    passed: bool
    values: dict[str, float | None] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)  # a structured answer: each field's verdict in words


@dataclass
class CaseRow:
    label: str
    skill: str
    kind: str
    case_class: str
    limits: dict[str, float]
    scores: dict[str, Score] = field(default_factory=dict)
    skipped: str = ""  # why the case did not run here (unavailable)


def calibrate(cases: Iterable[object], subjects: Sequence[str] = SUBJECTS, *, progress: bool = False) -> list[CaseRow]:
    """Run each case once with each subject (a case without a baseline gets no baseline score)."""
    from imagebench.executor import run_cases
    from imagebench.subjects import parse_subject

    cases = list(cases)
    rows = {
        c.label: CaseRow(c.label, c.namespace, c.kind, c.case_class, dict(c.tolerances))  # type: ignore[attr-defined]
        for c in cases
    }
    runnable = []
    for case in cases:
        ok, why = case.available()  # type: ignore[attr-defined]
        if ok:
            runnable.append(case)
        else:
            rows[case.label].skipped = why  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="imagebench-calibration-") as tmp:
        for spec in subjects:
            chosen = [c for c in runnable if spec != "baseline" or c.baseline is not None]  # type: ignore[attr-defined]
            if not chosen:
                continue
            result = run_cases(chosen, parse_subject(spec), samples=1, out=Path(tmp) / spec, progress=progress)
            for label, samples in result.samples.items():
                s = samples[0]
                answer = (s.answer or {}).get("fields") or {}
                said = {k: str(v.get("reason", "")) for k, v in answer.items() if isinstance(v, dict)}
                rows[label].scores[spec] = Score(s.status, s.passed, {m.name: m.value for m in s.metrics}, said)
    return list(rows.values())


def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 100 or abs(value) < 0.001:
        return f"{value:.3g}"
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _margin(limit: float, value: float | None) -> str:
    if value is None:
        return "-"
    if value <= 0:
        return "exact" if limit == 0 else "∞"
    return f"{limit / value:.2g}x"


def _value(score: Score | None, metric: str) -> str:
    """A metric's value; for a structured answer, each field's verdict beside it."""
    if score is None:
        return "-"
    text = _num(score.values.get(metric))
    if score.fields:
        text += " (" + "; ".join(f"{k}: {v}" for k, v in score.fields.items()) + ")"
    return text


def _verdict(score: Score | None) -> str:
    if score is None:
        return "-"
    return "pass" if score.passed else score.status


def render(rows: Sequence[CaseRow]) -> str:
    """The markdown table: one line per metric, the case's cells on its first line."""
    lines = [
        "| skill | case | kind | metric | limit | reference | margin | baseline | baseline verdict | nop |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: (r.skill, r.kind != "synthetic", r.label)):
        case_id = row.label.split("/", 1)[1]
        if row.skipped:
            lines.append(f"| {row.skill} | {case_id} | {row.kind} | (not run here: {row.skipped}) | | | | | | |")
            continue
        ref, base, nop = (row.scores.get(s) for s in SUBJECTS)
        for i, (metric, limit) in enumerate(row.limits.items()):
            first = i == 0
            cells = [
                row.skill if first else "",
                f"`{case_id}`" if first else "",
                f"{row.kind}, {row.case_class}" if first else "",
                f"`{metric}`",
                _num(limit),
                _value(ref, metric),
                _margin(limit, ref.values.get(metric)) if ref else "-",
                _value(base, metric),
                _verdict(base) if first else "",
                _verdict(nop) if first else "",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(rows: Sequence[CaseRow]) -> str:
    ran = [r for r in rows if not r.skipped]
    ref_ok = sum(1 for r in ran if r.scores.get("reference") and r.scores["reference"].passed)
    base = [r for r in ran if "baseline" in r.scores]
    base_fail = sum(1 for r in base if not r.scores["baseline"].passed)
    nop_fail = sum(1 for r in ran if r.scores.get("nop") and not r.scores["nop"].passed)
    return (
        f"{len(ran)} cases run: the reference passes {ref_ok}, the naive baseline fails {base_fail} of "
        f"{len(base)}, nop fails {nop_fail}."
    )


def write_doc(text: str, doc: Path = DOC) -> None:
    from imagebench.records import atomic_write_text

    current = doc.read_text(encoding="utf-8")
    if BEGIN not in current or END not in current:
        raise SystemExit(f"{doc}: the markers {BEGIN!r} and {END!r} are missing; add them where the table goes")
    head, rest = current.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    atomic_write_text(doc, f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", default=None, help="label patterns (default: every built-in case)")
    parser.add_argument("--fixtures", choices=("all", "synthetic", "curated"), default="all")
    parser.add_argument("--write", action="store_true", help=f"write the table into {DOC.relative_to(REPO)}")
    args = parser.parse_args(argv)

    from imagebench.case.model import select_cases
    from imagebench.cases import all_cases

    chosen, unmatched = select_cases(all_cases(), args.cases, args.fixtures)
    if unmatched:
        raise SystemExit(f"calibration: no case matches {unmatched}")
    rows = calibrate(chosen, progress=True)
    text = f"{render(rows)}\n\n{summary(rows)} Regenerate with `{COMMAND}`."
    print(text)
    if args.write:
        if args.cases or args.fixtures != "all":
            raise SystemExit("calibration: --write writes the whole table; run it without --cases/--fixtures")
        write_doc(text)
        print(f"calibration: wrote {DOC}", file=sys.stderr)
    failing = [
        r.label
        for r in rows
        if not r.skipped
        and (
            not (r.scores.get("reference") and r.scores["reference"].passed)
            or any(r.scores.get(s) and r.scores[s].passed for s in ("baseline", "nop"))
        )
    ]
    if failing:
        print(f"calibration: these cases break the rule (reference passes, baseline and nop fail): {failing}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
