"""``imagebench case new``: a curated, declared case written into a fixture tree from files.

The files are read with the fixture readers (``.npy``, ``.tif``/``.tiff``, ``.nii``/``.nii.gz``;
any other format is refused with the readers' own message naming the file); the case is written
by :func:`imagebench.cases.authoring.save_case`, which checks everything first and writes
nothing when a check fails. Registered under the ``case`` command beside ``case add``
(:mod:`imagebench.cli.bundle`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from imagebench.cli import UsageError

TRUTH_KINDS = ("labels", "points")


def add_new(case_sub: argparse._SubParsersAction) -> None:
    p = case_sub.add_parser(
        "new",
        help="write a curated case into a fixture tree from files: arrays, case.json, manifest entry, bench-case.json",
        description=(
            "Write a new case into a fixture tree: each --data and --truth file as <key>.npy, case.json, the case's "
            "manifest entry (sha256, bytes, shapes, provenance, citation) and bench-case.json (prompt, layers, "
            "leaving, verifier chosen by the truth's kind, limits). Nothing is written when a check fails, and an "
            "existing case is never overwritten."
        ),
    )
    p.add_argument("--tree", metavar="DIR", help="the fixture tree (default: $IMAGEBENCH_FIXTURES); created if absent")
    p.add_argument("--skill", required=True, metavar="S", help="the skill id: the case's namespace (a lowercase name)")
    p.add_argument("--case", required=True, dest="case_id", metavar="C", help="the case's id (a lowercase name)")
    p.add_argument(
        "--data", action="append", required=True, metavar="KEY=FILE", help="an image the subject is shown (repeat)"
    )
    p.add_argument(
        "--truth", action="append", required=True, metavar="KEY=FILE", help="a held-out truth array (repeat)"
    )
    p.add_argument(
        "--truth-kind",
        action="append",
        default=[],
        metavar="KIND|KEY=KIND",
        help="labels or points, for every truth or one (default: a label image on a data grid, else (N, ndim) points)",
    )
    p.add_argument("--scored", metavar="KEY", help="the truth key the verifier scores (needed with several truths)")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", metavar="TEXT", help="the task as the subject reads it (default: written for you)")
    prompt.add_argument("--prompt-file", metavar="F", help="read the prompt from a UTF-8 text file")
    p.add_argument(
        "--verifier", metavar="NAME", help="a built-in verifier (default: by the truth's kind) or pkg.mod:func"
    )
    p.add_argument(
        "--tolerance",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a metric's limit (repeat; default: the verifier's starting limits, to calibrate)",
    )
    p.add_argument("--reference", metavar="pkg.mod:func", help="a reference solution of the case (trusted code)")
    p.add_argument("--baseline", metavar="pkg.mod:func", help="a naive solution that must fail the case")
    p.add_argument("--provenance", required=True, help="how the data and its truth came to be (required)")
    p.add_argument("--citation", required=True, help="whose data this is (required; copied into every report)")
    p.add_argument("--about", default="", help="one sentence about the case for people")
    p.add_argument(
        "--class", dest="case_class", default="golden", metavar="CLASS", help="the case class (default golden)"
    )
    p.set_defaults(func=_cmd_case_new)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key or not rest:
            raise UsageError(f"{flag} {value!r}: expected KEY=VALUE")
        if key in out:
            raise UsageError(f"{flag}: key {key!r} is given twice")
        out[key] = rest
    return out


def _read(path: str, flag: str) -> Any:
    import numpy as np

    from imagebench.fixtures.fixture import FixtureError
    from imagebench.fixtures.refs import FileRef

    ref = FileRef(path)
    problem = ref.missing()
    if problem:
        raise UsageError(f"{flag}: {problem}")
    try:
        return np.asarray(ref)
    except FixtureError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _kinds(values: list[str], truth: dict[str, Any], grids: dict[str, tuple[int, ...]]) -> dict[str, str]:
    from imagebench.fixtures.annotations import AnnotationError, infer_kind

    given: dict[str, str] = {}
    for value in values:
        key, sep, kind = value.rpartition("=")
        if kind not in TRUTH_KINDS:
            raise UsageError(f"--truth-kind {value!r}: expected labels or points (or KEY=labels, KEY=points)")
        if not sep:
            given.update(dict.fromkeys(truth, kind))
        elif key not in truth:
            raise UsageError(f"--truth-kind {value!r}: {key!r} is not a --truth key ({', '.join(truth)})")
        else:
            given[key] = kind
    for key, array in truth.items():
        if key not in given:
            try:
                given[key] = infer_kind(key, array, grids)
            except AnnotationError as exc:
                raise UsageError(str(exc)) from None
    return given


def _cmd_case_new(args: argparse.Namespace) -> int:
    from imagebench.cases.authoring import SaveError, save_case
    from imagebench.fixtures.fixture import FIXTURES_ENV, FixtureError

    root = args.tree or os.environ.get(FIXTURES_ENV)
    if not root:
        raise UsageError(f"no fixture tree: give --tree DIR or set ${FIXTURES_ENV}")
    limits: dict[str, float] = {}
    for name, value in _pairs(args.tolerance, "--tolerance").items():
        try:
            limits[name] = float(value)
        except ValueError:
            raise UsageError(f"--tolerance {name}={value}: the limit must be a number") from None
    prompt = args.prompt
    if args.prompt_file:
        try:
            prompt = Path(args.prompt_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--prompt-file {args.prompt_file}: cannot read it ({exc})") from None
        if not prompt.strip():
            raise UsageError(f"--prompt-file {args.prompt_file}: the file is empty")
    data = {key: _read(path, f"--data {key}") for key, path in _pairs(args.data, "--data").items()}
    truth = {key: _read(path, f"--truth {key}") for key, path in _pairs(args.truth, "--truth").items()}
    kinds = _kinds(args.truth_kind, truth, {k: tuple(v.shape) for k, v in data.items()})
    try:
        saved = save_case(
            root,
            args.skill,
            args.case_id,
            data=data,
            truth=truth,
            kinds=kinds,
            scored=args.scored,
            prompt=prompt,
            verifier=args.verifier,
            tolerance=limits or None,
            reference=args.reference,
            baseline=args.baseline,
            provenance=args.provenance,
            citation=args.citation,
            about=args.about,
            case_class=args.case_class,
        )
    except (SaveError, FixtureError) as exc:
        print(f"imagebench case new: {exc}; nothing was written", file=sys.stderr)
        return 1
    declared = saved.declaration
    print(f"wrote case {saved.label} into {root}:")
    for path in saved.paths():
        print(f"  {path}")
    limits_text = ", ".join(f"{k} {v:g}" for k, v in declared.tolerance.items())
    print(f"verifier {declared.verifier.name}, limits {limits_text}" + ("" if limits else " (starting limits)"))
    if declared.reference is None:
        print("no reference solution: the case lists and a person can score it; --reference adds one")
    print("next:")
    print(f"  imagebench list --tree {root}")
    print(f"  imagebench fixtures verify {root}")
    calibrate = f"  imagebench calibrate --tree {root} -k {saved.label}"
    if declared.reference is not None:
        print(f"{calibrate}   (checks that the limits pass the reference and stop the baseline)")
    else:
        print(f"{calibrate}   (once the case has a --reference and a --baseline, to set its limits)")
    return 0
