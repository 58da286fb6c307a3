"""Per-frame detection matching of a result's labels against the reference's, as the CTC measures use it.

:func:`frame_overlap` counts, in one frame, every (reference label, result label) pair's
intersection and every object's area without a Python loop over objects or pixels: the labels of
each image are first mapped onto ``1..n`` (a look-up table), then one ``np.bincount`` over
``ref * (n_comp + 1) + comp`` gives the joint histogram; a sort of the overlapping pixels' keys
replaces it when the table would be larger than the frame.

:func:`ctc_matches` is the challenge's detection test (Matula et al. 2015, section "Detection
test"; the same test decides SEG's matches, Ulman et al. 2017): a result object ``S`` matches a
reference object ``R`` when ``|R ∩ S| > 0.5 |R|``. Each reference object has at most one match;
one result object may match several (a merge). Integer arithmetic (``2|R∩S| > |R|``) decides it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Overlap:
    """The overlaps of one frame: labels, areas, and the overlapping pairs (indices into the label arrays)."""

    ref_labels: np.ndarray  # (nr,) sorted non-zero labels of the reference frame
    comp_labels: np.ndarray  # (nc,) sorted non-zero labels of the result frame
    ref_area: np.ndarray  # (nr,) pixels of each reference object
    comp_area: np.ndarray  # (nc,)
    ref_index: np.ndarray  # (k,) pairs with a non-empty intersection: index into ref_labels
    comp_index: np.ndarray  # (k,) ... into comp_labels
    intersection: np.ndarray  # (k,) pixels in common

    @property
    def iou(self) -> np.ndarray:
        """The intersection over union of each overlapping pair."""
        inter = self.intersection.astype(np.float64)
        union = self.ref_area[self.ref_index] + self.comp_area[self.comp_index] - self.intersection
        return inter / np.maximum(union, 1)


def _compact(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels, areas, the image relabelled onto 0..n): 0 stays background."""
    if flat.size == 0 or int(flat.max()) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(flat.shape, np.intp)
    top = int(flat.max())
    if top <= 4 * flat.size + 65536:
        counts = np.bincount(flat, minlength=top + 1)
        labels = np.flatnonzero(counts)
        labels = labels[labels != 0]
        lut = np.zeros(top + 1, dtype=np.intp)
        lut[labels] = np.arange(1, labels.size + 1)
        return labels.astype(np.int64), counts[labels].astype(np.int64), lut[flat]
    values, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
    if values[0] == 0:
        return values[1:].astype(np.int64), counts[1:].astype(np.int64), inverse.reshape(flat.shape).astype(np.intp)
    return values.astype(np.int64), counts.astype(np.int64), inverse.reshape(flat.shape).astype(np.intp) + 1


def frame_overlap(ref: np.ndarray, comp: np.ndarray) -> Overlap:
    """Count the overlaps of two label images of one shape (2D or 3D; 0 is background)."""
    if ref.shape != comp.shape:
        raise ValueError(f"frame shapes differ: reference {ref.shape}, result {comp.shape}")
    r_flat = ref.ravel()
    c_flat = comp.ravel()
    ref_labels, ref_area, rr = _compact(r_flat)
    comp_labels, comp_area, cc = _compact(c_flat)
    nc1 = comp_labels.size + 1
    cells = (ref_labels.size + 1) * nc1
    if ref_labels.size == 0 or comp_labels.size == 0:
        empty = np.zeros(0, np.int64)
        return Overlap(ref_labels, comp_labels, ref_area, comp_area, empty, empty, empty)
    if cells <= 4 * r_flat.size + 65536:
        joint = np.bincount(rr * nc1 + cc, minlength=cells).reshape(ref_labels.size + 1, nc1)[1:, 1:]
        ri, ci = np.nonzero(joint)
        inter = joint[ri, ci]
    else:
        both = (rr > 0) & (cc > 0)
        keys, inter = np.unique(rr[both].astype(np.int64) * nc1 + cc[both], return_counts=True)
        ri, ci = keys // nc1 - 1, keys % nc1 - 1
    return Overlap(
        ref_labels, comp_labels, ref_area, comp_area, ri.astype(np.int64), ci.astype(np.int64), inter.astype(np.int64)
    )


def ctc_matches(overlap: Overlap) -> np.ndarray:
    """The pairs the CTC detection test accepts (``|R ∩ S| > 0.5 |R|``): an index into the overlap's pairs."""
    return np.flatnonzero(2 * overlap.intersection > overlap.ref_area[overlap.ref_index])
