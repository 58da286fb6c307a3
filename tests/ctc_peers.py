"""Shared helpers of the CTC tests: folders from movies, results made wrong on purpose, and the two peers.

The peers (py-ctcmetrics for SEG/DET/TRA, traccuracy for division F1) are test dependencies only;
the functions that call them import them inside, so a test that needs one skips with
``pytest.importorskip`` first.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from imagebench.tracking import ctc
from imagebench.tracking.synthetic import tracks_from_labels

TOLERANCE = 1e-9


def write_pair(
    root: Path, truth: ctc.TimeLapse, result: ctc.TimeLapse, seg_frames: tuple[int, ...] = (0,)
) -> tuple[Path, Path]:
    """``root/01_GT`` (SEG from the TRA masks on ``seg_frames``) and ``root/01_RES``."""
    seg = tuple(ctc.SegTruth(frame=t, labels=truth.labels[t]) for t in seg_frames)
    gt = ctc.write_truth(root / "01_GT", ctc.CtcTruth(tra=truth, seg=seg))
    res = ctc.write_result(root / "01_RES", result)
    return res, gt


def parents_of(movie: ctc.TimeLapse) -> dict[int, int]:
    return {t.label: t.parent for t in movie.lineage.tracks if t.parent}


def perturb(
    movie: ctc.TimeLapse, seed: int, *, shift: int = 1, drop: float = 0.05, relink: float = 0.1
) -> ctc.TimeLapse:
    """A plausible wrong result: frames shifted, detections dropped, some tracks cut and relabelled (links lost)."""
    rng = np.random.default_rng(seed)
    labels = movie.labels.copy()
    for t in range(labels.shape[0]):
        labels[t] = np.roll(labels[t], int(rng.integers(-shift, shift + 1)), axis=-1)
    top = int(labels.max()) + 1
    for track in movie.lineage.tracks:
        for t in range(track.begin, track.end + 1):
            if rng.random() < drop:
                labels[t][labels[t] == track.label] = 0
        if track.end > track.begin and rng.random() < relink:
            cut = int(rng.integers(track.begin + 1, track.end + 1))
            for t in range(cut, track.end + 1):
                labels[t][labels[t] == track.label] = top
            top += 1
    return tracks_from_labels(labels, parents_of(movie))


def peer_ctc(res: Path, gt: Path) -> dict[str, Any]:
    """py-ctcmetrics' SEG, DET, TRA and AOGM counts of the two folders (one process, no pool)."""
    from ctc_metrics import evaluate_sequence

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate_sequence(str(res), str(gt), metrics=["Valid", "SEG", "DET", "TRA"], threads=1)


def peer_divisions(res: Path, gt: Path, frame_buffer: int = 0) -> dict[str, Any]:
    """traccuracy's DivisionMetrics over its CTC loader and CTCMatcher, at ``frame_buffer``.

    Where the CTC matching is many-to-one (a result object covering two references: a merge),
    traccuracy refuses the metric; the mapping is then restricted to its uniquely matched result
    vertices, as imagebench's definition is (docs/metrics.md), and handed to the metric as one-to-one.
    """
    from traccuracy.loaders import load_ctc_data
    from traccuracy.matchers import CTCMatcher, Matched
    from traccuracy.metrics import DivisionMetrics

    logging.getLogger("traccuracy").setLevel(logging.ERROR)
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gt_graph = load_ctc_data(str(gt / "TRA"), str(gt / "TRA" / "man_track.txt"))
        res_graph = load_ctc_data(str(res), str(res / "res_track.txt"))
        matched = CTCMatcher().compute_mapping(gt_graph, res_graph)
        if matched.matching_type != "one-to-one":
            counts: dict[Any, int] = {}
            for _, p in matched.mapping:
                counts[p] = counts.get(p, 0) + 1
            mapping = [(g, p) for g, p in matched.mapping if counts[p] == 1]
            matched = Matched(
                matched.gt_graph, matched.pred_graph, mapping, {"name": "CTCMatcher", "matching type": "one-to-one"}
            )
        result = DivisionMetrics(max_frame_buffer=frame_buffer).compute(matched)
    return result.results[f"Frame Buffer {frame_buffer}"]


def same(ours: float | None, theirs: Any) -> bool:
    """Equal to 1e-9; None (undefined) equals the peer's NaN."""
    if ours is None:
        return theirs is None or bool(np.isnan(theirs))
    return theirs is not None and not np.isnan(theirs) and abs(ours - float(theirs)) <= TOLERANCE
