"""``imagebench metrics``: measures of a result against a reference outside any run.

``ctc RES GT``: the Cell Tracking Challenge's measures of a tracker's result folder.
``instance TRUTH PRED``: instance-segmentation measures of two label images (TIFF or .npy).
``image TRUTH PRED --data-range R``: PSNR, SSIM and NRMSE of two images.
``spots TRUTH PRED --distance D``: detections matched one to one to true points.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from imagebench.cli import UsageError


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "metrics",
        help="compute measures of a result against a reference outside any run (metrics ctc | instance | image)",
    )
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
    _add_instance(inner)
    _add_image(inner)
    _add_spots(inner)


def _add_instance(inner: argparse._SubParsersAction) -> None:
    c = inner.add_parser(
        "instance",
        help="AP (TP/(TP+FP+FN)) over IoU 0.5:0.95, panoptic quality, Dice, HD95 of two label images",
        description=(
            "Match the objects of PRED to those of TRUTH (integer label images of one shape, TIFF or .npy; 0 is "
            "background) one to one at an IoU threshold and print, as JSON: tp, fp, fn, n_true, n_pred, "
            "precision, recall, accuracy (TP/(TP+FP+FN), the DSB2018 'AP'; not an area under a precision-recall "
            "curve), f1, mean_matched_iou, panoptic_quality (named as stardist.matching.matching names them). "
            "With --iou T at that threshold; without it at each IoU of 0.5:0.05:0.95 and their mean (the DSB2018 "
            "figure). Beside them the foreground's dice, hd95 and msd (mean surface distance), in the units of "
            "--spacing. Definitions: docs/metrics.md. Exit 2 on a file that cannot be read or images that differ."
        ),
    )
    c.add_argument("truth", metavar="TRUTH", help="the reference label image (.tif, .tiff or .npy)")
    c.add_argument("pred", metavar="PRED", help="the label image to score (.tif, .tiff or .npy)")
    c.add_argument(
        "--iou",
        type=float,
        default=None,
        metavar="T",
        help="one IoU threshold (> 0; above 1 nothing can match, as stardist answers); default: 0.5:0.05:0.95",
    )
    c.add_argument(
        "--spacing",
        default=None,
        metavar="Z,Y,X",
        help="the pixel size along each axis, in the array's order, for hd95 and msd (default 1 per axis: pixels)",
    )
    c.set_defaults(func=_cmd_instance)


def _add_image(inner: argparse._SubParsersAction) -> None:
    c = inner.add_parser(
        "image",
        help="PSNR, SSIM and NRMSE of an image against a reference (scikit-image's)",
        description=(
            "Print, as JSON, psnr (dB), ssim and nrmse (euclidean normalization) of PRED against TRUTH (real "
            "arrays of one shape, TIFF or .npy), computed by skimage.metrics with the data range R given. "
            "Definitions: docs/metrics.md. Exit 2 on a file that cannot be read or images that differ."
        ),
    )
    c.add_argument("truth", metavar="TRUTH", help="the reference image (.tif, .tiff or .npy)")
    c.add_argument("pred", metavar="PRED", help="the image to score (.tif, .tiff or .npy)")
    c.add_argument(
        "--data-range",
        type=float,
        required=True,
        metavar="R",
        help="the data range of the images (max - min possible value, e.g. 255 for 8-bit, 1.0 for [0, 1] floats)",
    )
    c.set_defaults(func=_cmd_image)


def _read_pair(truth: str, pred: str) -> tuple[Any, Any]:
    from imagebench.metrics.files import InputError, read_image_file

    try:
        t, p = read_image_file(truth), read_image_file(pred)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if t.shape != p.shape:
        raise UsageError(f"{pred}: shape {t.shape} expected (the shape of {truth}), got {p.shape}")
    return t, p


def _spacing(text: str | None, ndim: int) -> tuple[float, ...] | None:
    if text is None:
        return None
    try:
        steps = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"--spacing is {text!r}, expected {ndim} comma-separated positive numbers") from None
    if len(steps) != ndim or any(not (s > 0 and s < float("inf")) for s in steps):
        raise UsageError(f"--spacing is {text!r}, expected {ndim} comma-separated positive numbers (one per axis)")
    return steps


def _cmd_instance(args: argparse.Namespace) -> int:
    from imagebench.metrics.instance import instance_scores, threshold_scores
    from imagebench.metrics.surface import surface_scores

    if args.iou is not None and not args.iou > 0:
        raise UsageError(f"--iou is {args.iou}, expected a threshold > 0")
    t, p = _read_pair(args.truth, args.pred)
    spacing = _spacing(args.spacing, t.ndim)
    try:
        if args.iou is not None:
            out = threshold_scores(t, p, args.iou).as_dict()
        else:
            out = instance_scores(t, p).as_dict()
        surface = surface_scores(t, p, spacing)
    except ValueError as exc:
        raise UsageError(f"{args.truth}, {args.pred}: {exc}") from None
    out["foreground"] = surface.as_dict()
    print(json.dumps(out, indent=2))
    return 0


def _cmd_image(args: argparse.Namespace) -> int:
    from imagebench.metrics.image import image_scores

    t, p = _read_pair(args.truth, args.pred)
    try:
        scores = image_scores(t, p, args.data_range)
    except ValueError as exc:
        raise UsageError(f"{args.truth}, {args.pred}: {exc}") from None
    print(json.dumps(scores.as_dict(), indent=2))
    return 0


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
