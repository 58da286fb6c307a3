"""Instance-segmentation measures over IoU thresholds, named as StarDist's ``matching()`` names them.

At one IoU threshold ``t`` (:func:`threshold_scores`): objects are matched one to one by
:func:`imagebench.matching.match_overlaps` (a pair matches when IoU >= t; the most matches, then
the largest summed IoU); ``tp``, ``fp``, ``fn``; ``precision = TP / n_pred``, ``recall = TP /
n_true``, ``f1``; ``accuracy = TP / (TP + FP + FN)``, the figure the 2018 Data Science Bowl and
StarDist call "AP" at ``t`` (it is *not* an average precision, the area under a precision-recall
curve); ``mean_matched_iou`` (StarDist's ``mean_matched_score``: the mean IoU of the matched pairs);
``panoptic_quality = SQ x RQ`` (Kirillov et al., CVPR 2019, Eq. 1) with ``SQ = mean_matched_iou``
and ``RQ = TP / (TP + FP/2 + FN/2)``, i.e. the matched IoUs summed over ``TP + FP/2 + FN/2``.

Over thresholds (:func:`instance_scores`): the same at each IoU of 0.5:0.05:0.95 and the mean of
each ratio over them; ``mean_accuracy`` is the DSB2018 figure ("mAP over IoU 0.5:0.95").

Thresholds: ``t`` must be > 0. A threshold above 1 cannot be met by any pair (IoU <= 1), so it is
answered as StarDist answers it: no match, ``tp = 0`` (StarDist returns zeros there;
:func:`imagebench.matching.match_labels` refuses such a threshold, this module does not).
Zero denominators follow :mod:`imagebench.matching`: 1.0 (two empty images agree perfectly), where
StarDist writes 0.0; ``mean_matched_iou`` is None when nothing matched (StarDist: 0.0), and
``panoptic_quality`` is 0.0 then unless both images are empty (1.0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from imagebench.matching import LabelOverlaps, label_overlaps, match_overlaps

__all__ = ["AP_THRESHOLDS", "InstanceScores", "ThresholdScores", "instance_scores", "threshold_scores"]

#: The IoU thresholds of the DSB2018 figure: 0.5, 0.55, ..., 0.95 (exact decimals, not a float range).
AP_THRESHOLDS: tuple[float, ...] = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))


def _ratio(num: float, den: float) -> float:
    return 1.0 if den == 0 else num / den


@dataclass(frozen=True)
class ThresholdScores:
    """The measures of one matching at IoU ``thresh`` (StarDist's field names where it has one)."""

    thresh: float
    tp: int
    fp: int
    fn: int
    n_true: int
    n_pred: int
    precision: float
    recall: float
    accuracy: float
    f1: float
    mean_matched_iou: float | None
    panoptic_quality: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, in this order."""
        return {
            "thresh": self.thresh,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "n_true": self.n_true,
            "n_pred": self.n_pred,
            "precision": self.precision,
            "recall": self.recall,
            "accuracy": self.accuracy,
            "f1": self.f1,
            "mean_matched_iou": self.mean_matched_iou,
            "panoptic_quality": self.panoptic_quality,
        }


def _check_threshold(iou: float) -> float:
    thr = float(iou)
    if not thr > 0.0:  # also refuses NaN
        raise ValueError(f"iou threshold must be > 0, got {iou!r}")
    return thr


def _at(ov: LabelOverlaps, thr: float) -> ThresholdScores:
    n_true, n_pred = int(ov.true_labels.size), int(ov.pred_labels.size)
    if thr > 1.0:
        tp, summed = 0, 0.0  # no pair can reach it: StarDist's answer
    else:
        r = match_overlaps(ov, thr)
        tp, summed = r.tp, float(r.pair_iou.sum())
    fp, fn = n_pred - tp, n_true - tp
    return ThresholdScores(
        thresh=thr,
        tp=tp,
        fp=fp,
        fn=fn,
        n_true=n_true,
        n_pred=n_pred,
        precision=_ratio(tp, n_pred),
        recall=_ratio(tp, n_true),
        accuracy=_ratio(tp, tp + fp + fn),
        f1=_ratio(2 * tp, 2 * tp + fp + fn),
        mean_matched_iou=summed / tp if tp else None,
        panoptic_quality=_ratio(summed, tp + fp / 2 + fn / 2),
    )


def threshold_scores(truth: Any, pred: Any, iou: float = 0.5) -> ThresholdScores:
    """The measures of ``pred`` against ``truth`` (integer label images of one shape) at IoU ``iou`` (> 0).

    Raises ValueError for a threshold <= 0 or NaN, non-integer images, negative labels or
    mismatched shapes.
    """
    thr = _check_threshold(iou)
    return _at(label_overlaps(truth, pred), thr)


@dataclass(frozen=True)
class InstanceScores:
    """The measures at each threshold of ``thresholds`` and the mean of each ratio over them."""

    per_threshold: tuple[ThresholdScores, ...]

    @property
    def thresholds(self) -> tuple[float, ...]:
        return tuple(s.thresh for s in self.per_threshold)

    def mean(self, name: str) -> float | None:
        """The mean of field ``name`` over the thresholds (None when any value is None)."""
        values = [getattr(s, name) for s in self.per_threshold]
        if not values or any(v is None for v in values):
            return None
        return float(np.mean(values))

    @property
    def mean_accuracy(self) -> float | None:
        """The mean over the thresholds of ``accuracy``: over 0.5:0.05:0.95, the DSB2018 "AP"."""
        return self.mean("accuracy")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``per_threshold`` (a list) and ``mean`` (each ratio's mean over them)."""
        names = ("precision", "recall", "accuracy", "f1", "mean_matched_iou", "panoptic_quality")
        return {
            "thresholds": list(self.thresholds),
            "per_threshold": [s.as_dict() for s in self.per_threshold],
            "mean": {name: self.mean(name) for name in names},
        }


def instance_scores(truth: Any, pred: Any, thresholds: tuple[float, ...] = AP_THRESHOLDS) -> InstanceScores:
    """The measures at each IoU of ``thresholds`` (default 0.5:0.05:0.95), overlaps counted once."""
    if not thresholds:
        raise ValueError("thresholds: expected at least one IoU threshold")
    checked = [_check_threshold(t) for t in thresholds]
    ov = label_overlaps(truth, pred)
    return InstanceScores(tuple(_at(ov, t) for t in checked))
