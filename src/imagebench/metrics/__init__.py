"""The measures the field reports, each named by its definition (docs/metrics.md).

``instance``: object matching of two label images swept over IoU thresholds: per threshold the
counts, precision, recall, F1, ``accuracy = TP / (TP + FP + FN)`` (the DSB2018 "AP"; not the area
under a precision-recall curve) and panoptic quality; their mean over IoU 0.5:0.05:0.95.
``surface``: foreground Dice, HD95 and mean surface distance in physical units (voxel spacing).
``image``: PSNR, SSIM and NRMSE, computed by scikit-image's ``skimage.metrics``.
``figures``: the informative figures a segmentation case reports beside its gating metrics.
``files``: a TIFF or ``.npy`` file read as an array for ``imagebench metrics``.
"""

from __future__ import annotations

from imagebench.metrics.image import ImageScores, image_scores
from imagebench.metrics.instance import (
    AP_THRESHOLDS,
    InstanceScores,
    ThresholdScores,
    instance_scores,
    threshold_scores,
)
from imagebench.metrics.surface import SurfaceScores, dice, surface_scores

__all__ = [
    "AP_THRESHOLDS",
    "ImageScores",
    "InstanceScores",
    "SurfaceScores",
    "ThresholdScores",
    "dice",
    "image_scores",
    "instance_scores",
    "surface_scores",
    "threshold_scores",
]
