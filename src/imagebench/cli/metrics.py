"""``imagebench metrics ctc RES GT``: the Cell Tracking Challenge's measures of a tracker's result folder;
``imagebench metrics spots TRUTH PRED --distance D``: detections matched to true points."""

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
    _add_spots(inner)


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


def _add_spots(inner: argparse._SubParsersAction) -> None:
    s = inner.add_parser(
        "spots",
        help="tp, fp, fn, F1, localisation RMSE and count error of detected points against true points",
        description=(
            "Match the predicted points (PRED) one-to-one to the true points (TRUTH) within --distance, by "
            "optimal (Hungarian) matching that makes as many pairs as possible and, among those, the least total "
            "distance (imagebench.cases.points.match_points, the points verifier's matcher). Each file is a .npy "
            "or a .csv (a header row allowed) of (N, 2) or (N, 3) coordinates, one point a row, in the same "
            "units. Definitions: docs/metrics.md. Exit 2 on a file that cannot be read as points."
        ),
    )
    s.add_argument("truth", metavar="TRUTH", help="the true points (.npy or .csv)")
    s.add_argument("pred", metavar="PRED", help="the predicted points (.npy or .csv)")
    s.add_argument(
        "--distance", type=float, required=True, metavar="D", help="the farthest a matched pair may lie apart"
    )
    s.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    s.set_defaults(func=_cmd_spots)


def _cmd_spots(args: argparse.Namespace) -> int:
    import math

    from imagebench.cases.points import PointsFileError, load_points_file, match_points

    if not (math.isfinite(args.distance) and args.distance > 0):
        raise UsageError(f"--distance is {args.distance}, expected a positive number")
    try:
        truth, pred = load_points_file(args.truth), load_points_file(args.pred)
    except PointsFileError as exc:
        raise UsageError(str(exc)) from None
    if truth.shape[0] and pred.shape[0] and truth.shape[1] != pred.shape[1]:
        raise UsageError(
            f"{args.pred}: points of {pred.shape[1]} coordinates, expected {truth.shape[1]} as in {args.truth}"
        )
    m = match_points(truth, pred, args.distance)
    scores = {**m.as_dict(), "distance": args.distance}
    if args.json:
        print(json.dumps(scores, indent=2))
        return 0
    rmse = "undefined (no match)" if m.rmse is None else repr(m.rmse)
    print(f"tp           {m.tp}  (of {m.n_true} true, {m.n_pred} predicted, within {args.distance:g})")
    print(f"fp           {m.n_pred - m.tp}")
    print(f"fn           {m.n_true - m.tp}")
    print(f"f1           {m.f1!r}")
    print(f"rmse         {rmse}")
    print(f"count_error  {m.count_error!r}  (|predicted - true| / true)")
    return 0
