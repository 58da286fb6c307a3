"""The informative figures a segmentation case reports beside its gating metrics.

:func:`segmentation_figures` gives, under names that carry their thresholds: ``ap@0.50`` ...
``ap@0.95`` (``accuracy = TP / (TP + FP + FN)`` at each IoU, the DSB2018 "AP", not the area under a
precision-recall curve), ``ap@0.50:0.05:0.95`` (their mean, the DSB2018 figure), ``pq@0.50``,
``sq@0.50`` and ``rq@0.50`` (panoptic quality = SQ x RQ at IoU 0.5), ``dice_foreground``, and
``hd95_foreground`` and ``msd_foreground`` in ``unit`` (the voxel spacing's, "px" without one).
They never gate: a verifier puts them in ``Outcome.detail["figures"]``, which no limit reads.
"""

from __future__ import annotations

from typing import Any

from imagebench.metrics.instance import AP_THRESHOLDS, instance_scores
from imagebench.metrics.surface import surface_scores

__all__ = ["FIGURES_KEY", "segmentation_figures"]

#: The key of ``Outcome.detail`` that holds them.
FIGURES_KEY = "figures"


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def segmentation_figures(truth: Any, pred: Any, spacing: Any = None, unit: str = "px") -> dict[str, Any]:
    """The figures of ``pred`` against ``truth`` (label images of one shape), JSON-ready, rounded to 1e-6."""
    sweep = instance_scores(truth, pred, AP_THRESHOLDS)
    at = {s.thresh: s for s in sweep.per_threshold}
    half = at[0.5]
    surf = surface_scores(truth, pred, spacing)
    out: dict[str, Any] = {f"ap@{t:.2f}": _round(at[t].accuracy) for t in AP_THRESHOLDS}
    out["ap@0.50:0.05:0.95"] = _round(sweep.mean_accuracy)
    out["pq@0.50"] = _round(half.panoptic_quality)
    out["sq@0.50"] = _round(half.mean_matched_iou)
    out["rq@0.50"] = _round(half.f1)
    out["dice_foreground"] = _round(surf.dice)
    out["hd95_foreground"] = _round(surf.hd95)
    out["msd_foreground"] = _round(surf.msd)
    out["unit"] = unit
    out["spacing"] = list(surf.spacing)
    if surf.undefined:
        out["undefined"] = surf.undefined
    return out
