"""The Cell Tracking Challenge's measures SEG, DET and TRA, and division F1, of a result against a reference.

Definitions (AOGM: Matula P, Maška M, Sorokin DV, Matula P, Ortiz-de-Solórzano C, Kozubek M.
"Cell Tracking Accuracy Measurement Based on Comparison of Acyclic Oriented Graphs", PLoS ONE
10(12): e0144959, 2015; the challenge's use of them: Ulman V, et al. "An objective comparison of
cell-tracking algorithms", Nat Methods 14:1141-1152, 2017), computed as py-ctcmetrics computes them
(its agreement is tested to 1e-9, see docs/metrics.md):

* **Detection test.** In each frame a result object ``S`` matches a reference marker ``R`` when
  ``|R ∩ S| > 0.5 |R|`` (:func:`imagebench.tracking.matching.ctc_matches`).
* **AOGM counts** (graphs as :mod:`imagebench.tracking.graph` builds them): ``FN`` reference
  vertices with no match; ``FP`` result vertices that match none; ``NS`` the splits needed,
  ``Σ (k - 1)`` over result vertices matching ``k >= 2`` reference vertices. On the result's
  uniquely matched vertices, each result edge is mapped to the reference: ``ED`` result edges that
  are not reference edges (to delete), ``EA`` reference edges no result edge maps to (to add), ``EC``
  mapped edges whose semantic (track link / parent link) differs (to change).
* **TRA** = ``1 - min(AOGM, AOGM_0) / AOGM_0`` with ``AOGM = 5 NS + 10 FN + 1 FP + 1 ED + 1.5 EA
  + 1 EC`` (the challenge's TRA weights) and ``AOGM_0 = 10 |V_R| + 1.5 |E_R|``, the cost of building
  the reference graph from nothing.
* **DET** likewise with ``AOGM_D = 5 NS + 10 FN + 1 FP`` and ``AOGM_D0 = 10 |V_R|``.
* **SEG** = the mean, over the reference objects of the frames (or slices) that have a SEG
  reference, of the Jaccard index ``|R ∩ S| / |R ∪ S|`` of the result object ``S`` matched to ``R``
  by the detection test, 0 where none is. For 3D data annotated on some slices, those slices of
  a frame are stacked and compared as one volume (as py-ctcmetrics does). ``None`` when the
  reference has no SEG frame.
* **Division F1**: :mod:`imagebench.tracking.divisions` (traccuracy's definition, frame buffer given).

Undefined values are ``None``, never a number: a reference with no marker at all is refused
(:class:`CtcFormatError`), as DET and TRA would divide by zero.
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np
from pydantic import Field

from imagebench.records import FrozenRecord
from imagebench.tracking.ctc import CtcFormatError, CtcTruth, TimeLapse, read_result, read_truth
from imagebench.tracking.divisions import DivisionScores, division_scores
from imagebench.tracking.graph import LineageGraph, Matching, build_matching, edges_of
from imagebench.tracking.matching import ctc_matches, frame_overlap

METRICS_VERSION = 1
# The AOGM weights the challenge sets for TRA (Ulman et al. 2017, Methods; Matula et al. 2015 table 1)
W_NS, W_FN, W_FP, W_ED, W_EA, W_EC = 5.0, 10.0, 1.0, 1.0, 1.5, 1.0


class AogmCounts(FrozenRecord):
    """The graph operations that turn the result's graph into the reference's, and the sizes of the reference graph."""

    NS: int
    FN: int
    FP: int
    ED: int
    EA: int
    EC: int
    reference_vertices: int
    reference_edges: int
    result_vertices: int
    result_edges: int

    @property
    def aogm(self) -> float:
        return W_NS * self.NS + W_FN * self.FN + W_FP * self.FP + W_ED * self.ED + W_EA * self.EA + W_EC * self.EC

    @property
    def aogm_0(self) -> float:
        return W_FN * self.reference_vertices + W_EA * self.reference_edges

    @property
    def aogm_d(self) -> float:
        return W_NS * self.NS + W_FN * self.FN + W_FP * self.FP

    @property
    def aogm_d0(self) -> float:
        return W_FN * self.reference_vertices


class CtcScores(FrozenRecord):
    """What ``imagebench metrics ctc`` prints: SEG, DET, TRA and division F1, and what they were computed from."""

    schema_version: Literal[1] = METRICS_VERSION
    SEG: float | None
    DET: float
    TRA: float
    division_f1: float | None
    frame_buffer: int = Field(ge=0)
    seg_objects: int  # reference objects SEG averages over
    counts: dict[str, int | float]  # NS FN FP ED EA EC, AOGM, AOGM_0, AOGM_D, AOGM_D0, graph sizes
    divisions: DivisionScores


def aogm_counts(matching: Matching, ref: TimeLapse, comp: TimeLapse) -> AogmCounts:
    """Count the AOGM operations (see the module's docstring) from the detection test's pairs."""
    k = matching.comp_matches
    tp = int(matching.ref_index.size)
    n_ref = len(matching.ref)
    rs_t, rs_l, rd_t, rd_l, r_sem = edges_of(ref.lineage)
    cs_t, cs_l, cd_t, cd_l, c_sem = edges_of(comp.lineage)
    r_src, r_dst = matching.ref.index(rs_t, rs_l), matching.ref.index(rd_t, rd_l)
    c_src, c_dst = matching.comp.index(cs_t, cs_l), matching.comp.index(cd_t, cd_l)
    to_ref = matching.comp_to_ref
    kept = (to_ref[c_src] >= 0) & (to_ref[c_dst] >= 0)  # the induced subgraph on uniquely matched vertices
    ref_keys = r_src * n_ref + r_dst
    comp_keys = to_ref[c_src[kept]] * n_ref + to_ref[c_dst[kept]]
    order = np.argsort(ref_keys, kind="stable")
    sorted_keys, sorted_sem = ref_keys[order], r_sem[order]
    where = np.searchsorted(sorted_keys, comp_keys)
    hit = np.zeros(comp_keys.size, dtype=bool)
    inside = where < sorted_keys.size
    hit[inside] = sorted_keys[where[inside]] == comp_keys[inside]
    wrong_semantic = int(np.count_nonzero(sorted_sem[where[hit]] != c_sem[kept][hit]))
    return AogmCounts(
        NS=int(np.maximum(k - 1, 0).sum()),
        FN=n_ref - tp,
        FP=int(np.count_nonzero(k == 0)),
        ED=int(np.count_nonzero(~hit)),
        EA=int(ref_keys.size - np.count_nonzero(np.isin(ref_keys, comp_keys[hit]))),
        EC=wrong_semantic,
        reference_vertices=n_ref,
        reference_edges=int(ref_keys.size),
        result_vertices=len(matching.comp),
        result_edges=int(c_src.size),
    )


def tra(counts: AogmCounts) -> float:
    """TRA = 1 - min(AOGM, AOGM_0) / AOGM_0 (Matula et al. 2015)."""
    return 1.0 - min(counts.aogm, counts.aogm_0) / counts.aogm_0


def det(counts: AogmCounts) -> float:
    """DET = 1 - min(AOGM_D, AOGM_D0) / AOGM_D0 (Matula et al. 2015)."""
    return 1.0 - min(counts.aogm_d, counts.aogm_d0) / counts.aogm_d0


def seg(truth: CtcTruth, comp: TimeLapse) -> tuple[float | None, int]:
    """(SEG, the number of reference objects it averages over); SEG is None without SEG frames."""
    if not truth.seg:
        return None, 0
    objects = 0
    ious: list[np.ndarray] = []
    for s in truth.seg:
        frame = comp.labels[s.frame]
        if s.slices is not None:
            frame = frame[list(s.slices)]
        ov = frame_overlap(s.labels, frame)
        pairs = ctc_matches(ov)
        ious.append(ov.iou[pairs])
        objects += int(ov.ref_labels.size)
    total = float(np.sum(np.concatenate(ious))) if ious else 0.0
    return total / max(objects, 1), objects


def check_pair(result: TimeLapse, truth: CtcTruth, *, res_name: str = "result", gt_name: str = "reference") -> None:
    """Raise :class:`CtcFormatError` unless the result's movie has the reference's frames and frame shape."""
    ref = truth.tra
    if result.frames != ref.frames:
        raise CtcFormatError(f"{res_name}: {result.frames} frame(s), but {gt_name} has {ref.frames}")
    if result.labels.shape[1:] != ref.labels.shape[1:]:
        raise CtcFormatError(
            f"{res_name}: frames of shape {result.labels.shape[1:]}, but {gt_name}'s are {ref.labels.shape[1:]}"
        )
    if not ref.lineage.tracks:
        raise CtcFormatError(f"{gt_name}: no reference track at all; DET and TRA are undefined")


def evaluate(result: TimeLapse, truth: CtcTruth, *, frame_buffer: int = 0) -> CtcScores:
    """SEG, DET, TRA and division F1 of a (checked) result against a (checked) reference."""
    check_pair(result, truth)
    ref = truth.tra
    frames = []
    for t in range(ref.frames):
        ov = frame_overlap(ref.labels[t], result.labels[t])
        pairs = ctc_matches(ov)
        frames.append(
            (ov.ref_labels, ov.comp_labels, ov.ref_labels[ov.ref_index[pairs]], ov.comp_labels[ov.comp_index[pairs]])
        )
    matching = build_matching(frames)
    counts = aogm_counts(matching, ref, result)
    unique = matching.unique
    r, c = matching.ref_index[unique], matching.comp_index[unique]
    ref_to_comp = {
        (int(t), int(a)): (int(t), int(b))
        for t, a, b in zip(
            matching.ref.t[r].tolist(), matching.ref.label[r].tolist(), matching.comp.label[c].tolist(), strict=True
        )
    }
    divisions = division_scores(
        LineageGraph(ref.lineage), LineageGraph(result.lineage), ref_to_comp, frame_buffer=frame_buffer
    )
    seg_value, seg_objects = seg(truth, result)
    return CtcScores(
        SEG=seg_value,
        DET=det(counts),
        TRA=tra(counts),
        division_f1=divisions.f1,
        frame_buffer=frame_buffer,
        seg_objects=seg_objects,
        counts={
            **{k: getattr(counts, k) for k in ("NS", "FN", "FP", "ED", "EA", "EC")},
            "AOGM": counts.aogm,
            "AOGM_0": counts.aogm_0,
            "AOGM_D": counts.aogm_d,
            "AOGM_D0": counts.aogm_d0,
            "reference_vertices": counts.reference_vertices,
            "reference_edges": counts.reference_edges,
            "result_vertices": counts.result_vertices,
            "result_edges": counts.result_edges,
        },
        divisions=divisions,
    )


def evaluate_folders(res: str | os.PathLike[str], gt: str | os.PathLike[str], *, frame_buffer: int = 0) -> CtcScores:
    """Read an ``XX_RES`` and an ``XX_GT`` folder (as the challenge's tools take them) and :func:`evaluate` them."""
    truth = read_truth(gt)
    result = read_result(res)
    check_pair(result, truth, res_name=str(res), gt_name=str(gt))
    return evaluate(result, truth, frame_buffer=frame_buffer)
