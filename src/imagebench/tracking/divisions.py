"""Division F1 as traccuracy defines it (``traccuracy.metrics.DivisionMetrics``), with its frame buffer.

Definition (traccuracy documentation, "Division metrics"; the classification follows Ulicna et al.
2021, Front. Comput. Sci. 3:734559, and the CTC's branching correctness, Ulman et al. 2017):

* A *division* is a vertex with two or more successors (:meth:`LineageGraph.divisions`).
* Vertices are matched one to one. Here the matching is the CTC detection test
  (``|R ∩ S| > 0.5 |R|``, traccuracy's ``CTCMatcher``), keeping only computed vertices matched
  by exactly one reference vertex: traccuracy refuses a many-to-one matching for this metric, and
  a computed object that merges two reference objects is then matched to neither.
* A reference division ``g`` is a **true positive** when its match ``p`` is a computed division
  and exactly two of ``g``'s outgoing edges are correct (both ends matched, and the matched pair
  an edge of the computed graph); **wrong children** when ``p`` is a division but they are not;
  a **false negative** when ``g`` has no match or its match is not a division. A computed
  division left unclassified is a **false positive**.
* With a frame buffer ``B > 0``, a false-negative and a false-positive division ``1 <= |Δt| <= B``
  frames apart are one correct, shifted division when the earlier one's vertex matches the later
  one's ancestor ``Δt`` edges back, and each daughter branch of the earlier division reaches,
  before any further division, a matched vertex whose match descends from that ancestor. Buffers
  are tried 1, 2, ... B; each pair is taken at the smallest buffer that corrects it. Competing
  candidates are taken in (frame, label) order.
* recall = TP / reference divisions, precision = TP / computed divisions,
  F1 = 2 recall precision / (recall + precision); each is undefined (``None``) where traccuracy
  gives NaN (a zero denominator).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from pydantic import Field

from imagebench.records import FrozenRecord
from imagebench.tracking.graph import LineageGraph, Node


class DivisionScores(FrozenRecord):
    """The division measure at one frame buffer (``None`` where it is undefined)."""

    frame_buffer: int = Field(ge=0)
    reference: int  # divisions in the reference
    computed: int  # divisions in the result
    true_positive: int
    false_positive: int
    false_negative: int
    wrong_children: int
    recall: float | None
    precision: float | None
    f1: float | None


def _ratio(num: int, den: int) -> float | None:
    return None if den == 0 else num / den


def division_scores(
    ref: LineageGraph,
    comp: LineageGraph,
    ref_to_comp: Mapping[Node, Node],
    *,
    frame_buffer: int = 0,
) -> DivisionScores:
    """Classify every division of ``ref`` and ``comp`` under the one-to-one vertex matching ``ref_to_comp``."""
    if frame_buffer < 0:
        raise ValueError(f"frame_buffer is {frame_buffer}, expected an integer >= 0")
    comp_to_ref = {c: r for r, c in ref_to_comp.items()}
    if len(comp_to_ref) != len(ref_to_comp):
        raise ValueError("the vertex matching is not one to one")
    ref_divs, comp_divs = ref.divisions(), comp.divisions()
    remaining = dict.fromkeys(comp_divs)
    tp = wc = 0
    fn_nodes: list[Node] = []
    for g in ref_divs:
        p = ref_to_comp.get(g)
        if p is None or p not in remaining:
            fn_nodes.append(g)
            continue
        succ = set(comp.successors(p))
        correct = sum(1 for s in ref.successors(g) if s in ref_to_comp and ref_to_comp[s] in succ)
        if correct == 2:
            tp += 1
        else:
            wc += 1
        del remaining[p]
    fp_nodes = list(remaining)
    shifted = 0
    corrected_ref: set[Node] = set()
    corrected_comp: set[Node] = set()
    for delta in range(1, frame_buffer + 1):
        for fp, fn in itertools.product(fp_nodes, fn_nodes):
            if fp in corrected_comp or fn in corrected_ref:
                continue
            gap = fp[0] - fn[0]
            if gap == 0 or abs(gap) > delta:
                continue
            if gap < 0:  # the computed division comes first
                ok = _shifted(
                    early=comp,
                    early_node=fp,
                    late=ref,
                    late_node=fn,
                    late_to_early=ref_to_comp,
                    early_to_late=comp_to_ref,
                )
            else:
                ok = _shifted(
                    early=ref,
                    early_node=fn,
                    late=comp,
                    late_node=fp,
                    late_to_early=comp_to_ref,
                    early_to_late=ref_to_comp,
                )
            if ok:
                corrected_comp.add(fp)
                corrected_ref.add(fn)
                shifted += 1
    tp_all = tp + shifted
    recall = _ratio(tp_all, len(ref_divs))
    precision = _ratio(tp_all, len(comp_divs))
    f1 = (
        None
        if recall is None or precision is None or recall + precision == 0
        else 2 * recall * precision / (recall + precision)
    )
    return DivisionScores(
        frame_buffer=frame_buffer,
        reference=len(ref_divs),
        computed=len(comp_divs),
        true_positive=tp_all,
        false_positive=len(fp_nodes) - shifted,
        false_negative=len(fn_nodes) - shifted,
        wrong_children=wc,
        recall=recall,
        precision=precision,
        f1=f1,
    )


def _shifted(
    *,
    early: LineageGraph,
    early_node: Node,
    late: LineageGraph,
    late_node: Node,
    late_to_early: Mapping[Node, Node],
    early_to_late: Mapping[Node, Node],
) -> bool:
    """Whether a division of ``early`` and a later one of ``late`` are one division shifted in time."""
    ancestor: Node | None = late_node
    for _ in range(late_node[0] - early_node[0]):  # steps back along edges, as traccuracy walks them
        ancestor = late.predecessor(ancestor) if ancestor is not None else None
    if ancestor is None or late_to_early.get(ancestor) != early_node:
        return False
    daughters = early.successors(early_node)  # a division: two or more
    correct = 0
    for daughter in daughters:
        walk = [daughter]
        while len(walk) == 1:
            node = walk[0]
            match = early_to_late.get(node)
            if match is not None and late.has_path(ancestor, match):
                correct += 1
                break
            walk = early.successors(node)
    return correct == 2
