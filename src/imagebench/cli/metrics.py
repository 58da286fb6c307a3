"""``imagebench metrics ctc RES GT``: the Cell Tracking Challenge's measures of a tracker's result folder."""

from __future__ import annotations

import argparse
import json

from imagebench.cli import UsageError


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help="compute measures of a result against a reference outside any run (metrics ctc)")
    inner = p.add_subparsers(dest="metrics_command", metavar="MEASURES", required=True)
    c = inner.add_parser(
        "ctc",
        help="SEG, DET, TRA and division F1 of a CTC result folder against a CTC reference folder",
        description=(
            "Score a tracker's Cell Tracking Challenge result (RES: mask*.tif and res_track.txt) against "
            "the reference (GT: TRA/ with man_track*.tif and man_track.txt, SEG/ with man_seg*.tif), as the "
            "challenge's tools take them. SEG, DET and TRA as the challenge defines them (AOGM weights of "
            "TRA: NS 5, FN 10, FP 1, ED 1, EA 1.5, EC 1), division F1 as traccuracy defines it. "
            "Definitions: docs/metrics.md. Exit 2 on a folder that breaks the format."
        ),
    )
    c.add_argument("res", metavar="RES", help="the result folder (XX_RES)")
    c.add_argument("gt", metavar="GT", help="the reference folder (XX_GT)")
    c.add_argument(
        "--frame-buffer",
        type=int,
        default=0,
        metavar="N",
        help="frames a division may be shifted by and still count as found (traccuracy's frame buffer; default 0)",
    )
    c.add_argument(
        "--json",
        action="store_true",
        help="print the scores as one JSON object (SEG, DET, TRA, division_f1, counts, ...)",
    )
    c.set_defaults(func=_cmd_ctc)


def _cmd_ctc(args: argparse.Namespace) -> int:
    from imagebench.tracking.ctc import CtcFormatError
    from imagebench.tracking.metrics import evaluate_folders

    if args.frame_buffer < 0:
        raise UsageError(f"--frame-buffer is {args.frame_buffer}, expected an integer >= 0")
    try:
        scores = evaluate_folders(args.res, args.gt, frame_buffer=args.frame_buffer)
    except CtcFormatError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(scores.model_dump(mode="json"), indent=2))
        return 0

    def shown(value: float | None) -> str:
        return "undefined" if value is None else repr(value)

    c = scores.counts
    print(f"SEG          {shown(scores.SEG)}  (over {scores.seg_objects} reference objects)")
    print(f"DET          {shown(scores.DET)}")
    print(f"TRA          {shown(scores.TRA)}  (AOGM {c['AOGM']} of AOGM_0 {c['AOGM_0']})")
    d = scores.divisions
    print(
        f"division_f1  {shown(scores.division_f1)}  (frame buffer {d.frame_buffer}: {d.true_positive} found of "
        f"{d.reference} reference, {d.computed} in the result)"
    )
    print("counts       " + " ".join(f"{k} {c[k]}" for k in ("NS", "FN", "FP", "ED", "EA", "EC")))
    return 0
