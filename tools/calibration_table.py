"""Regenerate the calibration table in docs/cases.md from real runs.

A thin caller of the one implementation: :func:`imagebench.executor.calibration.calibrate` runs
every built-in case once with its reference solution, its naive baseline and ``nop`` (as
``imagebench calibrate`` does), and :func:`imagebench.cli.calibrate.render_table` renders the
table. For each metric the table gives the limit, the reference's value and the margin (limit /
reference value), the baseline's value and the verdicts, so a reader sees at once that the limits
let the reference through with room to spare and stop the naive answer.

Usage::

    python tools/calibration_table.py            # print the table
    python tools/calibration_table.py --write    # and put it into docs/cases.md between the markers
    python tools/calibration_table.py --cases 'segment-nuclei/*' --fixtures curated

``tests/test_calibration.py`` runs the same ``calibrate`` on every curated case and holds the rule
the table shows: the reference passes, the baseline and ``nop`` fail.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "cases.md"
BEGIN = "<!-- calibration-table:begin (tools/calibration_table.py --write) -->"
END = "<!-- calibration-table:end -->"
COMMAND = "python tools/calibration_table.py --write"


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
    from imagebench.cli.calibrate import render_table, summary_line, verdict_lines
    from imagebench.executor.calibration import calibrate

    chosen, unmatched = select_cases(all_cases(), args.cases, args.fixtures)
    if unmatched:
        raise SystemExit(f"calibration: no case matches {unmatched}")
    with tempfile.TemporaryDirectory(prefix="imagebench-calibration-") as tmp:
        result = calibrate(chosen, out=tmp, progress=True, selection={"k": list(args.cases or [])})
    text = f"{render_table(result.cases)}\n\n{summary_line(result.cases)} Regenerate with `{COMMAND}`."
    print(text)
    if args.write:
        if args.cases or args.fixtures != "all":
            raise SystemExit("calibration: --write writes the whole table; run it without --cases/--fixtures")
        write_doc(text)
        print(f"calibration: wrote {DOC}", file=sys.stderr)
    for line in verdict_lines(result.cases):
        print(f"calibration: {line}")
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
