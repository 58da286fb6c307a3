"""A scored sample explained for a person, from the ``summary.json`` its scorer wrote.

One implementation for every reader of a run: ``report.html`` (:mod:`imagebench.report`), the
results table of ``imagebench run`` (:mod:`imagebench.cli.tables`) and the panel's results pane
(``napari_imagebench._explain`` re-exports it). What the subject answered is read from
``detail.leavings`` (:func:`describe_leavings`, written when the sample is scored): a structured
answer's values, an array's shape and dtype.

The results pane shows a metric and its verdict; this says why: per field of a structured answer
the scorer's reason (``detail.answer.fields``: "[0] off by 1.458 (tolerance 0.1)"), per probe of a
landmark case its error against the worst allowed (``detail.probe_errors_px``), the object
matching of a segmentation, a verifier's hint, what the artifacts draw (``detail.drawn``, the
overlays' legend) and every note in full. Nothing here is computed again: it is read from what
the verifier wrote and the run folder keeps.

What states the truth (the fixture's ``provenance``: "second frame Fourier-shifted by (1.668,
-4.719) px"), and whatever else a verifier noted beyond what this reads (segmentation QC's
``truth_counts``), is kept apart in :attr:`Explanation.truth`: the pane shows it only when asked, after
scoring, and that sets the ``saw-truth`` flag (:meth:`napari_imagebench._score_model.ScoreModel.truth_shown`).

A person counts samples from 1: :func:`sample_number` is the one place the panel turns the run
folder's ``sample-<n>`` (from 0, as on disk) into the number it shows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagebench.records import MetricRecord, SampleSummary

#: The metric of a structured answer (``imagebench.scoring.contract.METRIC``): its fields' reasons go under it.
STRUCTURED_METRIC = "answer_mismatch"
#: The metric the landmark verifier's per-probe errors are judged against.
PROBE_METRIC = "worst_probe_error"
#: More reasons than this under one metric start folded in the results pane (the text has them all).
FOLD_OVER = 8

# detail keys read into their own lines; every other key is listed as it is
_READ = {
    "answer", "probe_errors_px", "probes", "matching", "hint", "drawn", "why", "blocked", "artifact_range", "leavings",
    "figures",
}  # fmt: skip
#: The key of ``detail`` that holds what the subject left, as :func:`describe_leavings` tells it.
LEAVINGS_KEY = "leavings"
#: The most characters of one structured leaving's JSON that a summary keeps.
VALUE_MAX = 2000


#: The most characters of one piece of text a subject could have written (a field's name or
#: value) that an explanation prints.
PLAIN_MAX = 160


def plain(text: object, limit: int = PLAIN_MAX) -> str:
    """``text`` as one line a subject cannot dress up: control characters (a newline among them)
    written as escapes, cut at ``limit`` characters with the count of the rest."""
    raw = str(text)
    shown = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in raw)
    return shown if len(shown) <= limit else f"{shown[:limit]}… ({len(shown) - limit} more characters)"


def describe_leavings(arrays: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What a subject left, by name, for a person to read: an array (anything with a shape and a
    dtype) as ``{"shape", "dtype"}``; any other value (a structured answer, a number, a string)
    as ``{"value"}`` when its JSON fits in :data:`VALUE_MAX` characters, else ``{"json_chars",
    "value_head"}``. Nothing here is truth: only what the subject handed in."""
    from imagebench.records import json_safe

    out: dict[str, dict[str, Any]] = {}
    for name, value in arrays.items():
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        if shape is not None and dtype is not None and not isinstance(value, (str, bytes)) and tuple(shape) != ():
            try:
                out[str(name)] = {"shape": [int(n) for n in shape], "dtype": str(dtype)}
                continue
            except (TypeError, ValueError):
                pass
        try:
            safe = json_safe(value)
            text = json.dumps(safe, sort_keys=True, default=str)
        except Exception as exc:  # a leaving nobody can write down is described, never a crash
            out[str(name)] = {"type": type(value).__name__, "unreadable": f"{type(exc).__name__}: {exc}"}
            continue
        if len(text) <= VALUE_MAX:
            out[str(name)] = {"value": safe}
        else:
            out[str(name)] = {"json_chars": len(text), "value_head": text[:VALUE_MAX]}
    return out


def leaving_text(described: Mapping[str, Any]) -> str:
    """One leaving as :func:`describe_leavings` wrote it, on one line (subject text made plain)."""
    if "shape" in described:
        return f"array of shape {tuple(described.get('shape') or ())}, dtype {plain(described.get('dtype'), 40)}"
    if "value" in described:
        return plain(json.dumps(described["value"], sort_keys=True, default=str), 400)
    if "value_head" in described:
        return f"{plain(described['value_head'], 300)} ({described.get('json_chars', '?')} characters of JSON)"
    return f"a {plain(described.get('type', '?'), 40)} that could not be written down ({plain(described.get('unreadable', ''))})"


def answered(summary: SampleSummary) -> list[tuple[str, str]]:
    """``(leaving name, what the subject left)`` of one sample, from ``detail.leavings``."""
    leavings = (summary.detail or {}).get(LEAVINGS_KEY)
    if not isinstance(leavings, Mapping):
        return []
    return [(plain(name, 60), leaving_text(d) if isinstance(d, Mapping) else plain(d)) for name, d in leavings.items()]


def sample_number(sample: int | None) -> str:
    """The number a person sees for a sample: from 1 (the run folder's ``sample-0`` is sample 1)."""
    return "" if sample is None else str(int(sample) + 1)


@dataclass(frozen=True)
class Reason:
    """One row under a metric (or under the sample): a field, a probe, a hint."""

    name: str
    value: str = ""
    limit: str = ""
    verdict: str = ""  # "pass", "fail", or "" for a note
    note: str = ""


@dataclass(frozen=True)
class Explanation:
    """What the results pane shows of one sample beyond its metric table."""

    title: str  # "<subject> #<n>: <case label>", n from 1
    status: str
    notes: Mapping[str, str] = field(default_factory=dict)  # metric name -> its note, in full
    reasons: Mapping[str, tuple[Reason, ...]] = field(default_factory=dict)  # metric name ("" the sample) -> rows
    text: str = ""  # the whole explanation, word-wrapped in the pane
    legend: str = ""  # what the artifacts draw (the overlays' colours)
    truth: str = ""  # what states (or may state) the truth: shown only when asked, after scoring

    def with_truth(self) -> str:
        """:attr:`text` followed by what states the truth."""
        if not self.truth:
            return self.text
        return f"{self.text}\n\nHow the case was made (this states the truth):\n{self.truth}"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _limit(m: MetricRecord) -> str:
    return ("inf" if m.limit is None else f"{m.limit:g}") + (f" {m.unit}" if m.unit else "")


def field_reasons(answer: Any) -> tuple[Reason, ...]:
    """Per field of a structured answer's score (``detail.answer.fields``): matched or not, and why."""
    fields = answer.get("fields") if isinstance(answer, Mapping) else None
    if not isinstance(fields, Mapping):
        return ()
    rows = []
    for name, got in fields.items():
        got = got if isinstance(got, Mapping) else {}
        matched = bool(got.get("matched"))
        why = str(got.get("reason") or ("matched" if matched else "not matched"))
        rows.append(Reason(str(name), "matched" if matched else "no", "", "pass" if matched else "fail", why))
    return tuple(rows)


def probe_reasons(errors: Sequence[Any], limit: float | None, unit: str = "px") -> tuple[Reason, ...]:
    """Per probe of a landmark case: its error, against the worst error allowed. Probes are named
    by their index in the answer (``[0]`` is the first row, as the points are numbered on the canvas)."""
    rows = []
    for i, e in enumerate(errors):
        try:
            value = float(e)
        except (TypeError, ValueError):
            rows.append(Reason(f"[{i}]", str(e), "", "", "not a number"))
            continue
        verdict = "" if limit is None else ("pass" if value <= limit else "fail")
        shown_limit = "" if limit is None else f"{limit:g} {unit}"
        rows.append(Reason(f"[{i}]", f"{value:g}", shown_limit, verdict))  # as the verifier rounded it
    return tuple(rows)


def _matching_line(matching: Mapping[str, Any]) -> str:
    try:
        n_true, n_pred, tp, fp, fn = (int(matching[k]) for k in ("n_true", "n_pred", "tp", "fp", "fn"))
    except (KeyError, TypeError, ValueError):
        return f"object matching: {json.dumps(matching, default=str)}"
    line = (
        f"object matching at IoU {matching.get('iou_threshold', 0.5)}: {tp} of {n_true} true objects found "
        f"({fn} missed), {fp} of {n_pred} answered objects match none"
    )
    iou = matching.get("mean_matched_iou")
    return line + (f"; mean IoU of the matched pairs {float(iou):.3f}" if iou is not None else "")


def _fig(value: object, digits: int = 3) -> str:
    return "undefined" if not isinstance(value, (int, float)) else f"{float(value):.{digits}f}"


#: the keys that make ``detail.figures`` a segmentation's (:mod:`imagebench.metrics.figures`)
SEGMENTATION_FIGURES = ("ap@0.50:0.05:0.95", "pq@0.50", "dice_foreground", "hd95_foreground")


def figures_line(figures: Mapping[str, Any], given: Mapping[str, Any] | None = None) -> str:
    """A verifier's informative figures (``detail.figures``) as one line: a segmentation's in the
    field's terms (:mod:`imagebench.metrics.figures`), any other's as its names and values, with
    ``given`` (``detail.input_figures``: the same figures of the input as it was handed over) beside them."""
    if not any(k in figures for k in SEGMENTATION_FIGURES):

        def listed(got: Mapping[str, Any]) -> str:
            return "; ".join(f"{plain(k, 80)} {_fig(v)}" for k, v in got.items() if not isinstance(v, (Mapping, list)))

        line = "Figures (informative, never gating): " + listed(figures)
        return line + (f"; the input as given: {listed(given)}" if given else "")
    aps = ", ".join(f"{k[3:]} {_fig(v)}" for k, v in figures.items() if k.startswith("ap@") and ":" not in k)
    unit = plain(figures.get("unit", "px"), 20)
    line = (
        "Figures the field reports (informative, never gating): "
        f"AP@0.50:0.05:0.95 {_fig(figures.get('ap@0.50:0.05:0.95'))} (accuracy TP/(TP+FP+FN) at each IoU: {aps}); "
        f"PQ@0.50 {_fig(figures.get('pq@0.50'))} (SQ {_fig(figures.get('sq@0.50'))} x RQ {_fig(figures.get('rq@0.50'))}); "
        f"foreground Dice {_fig(figures.get('dice_foreground'))}, HD95 {_fig(figures.get('hd95_foreground'))} {unit}, "
        f"mean surface distance {_fig(figures.get('msd_foreground'))} {unit}"
    )
    if figures.get("undefined"):
        line += f" ({plain(figures['undefined'])})"
    return line


def explain(summary: SampleSummary, sample_dir: Path | None = None) -> Explanation:
    """The explanation of one sample, from its summary (as ``finish_unit`` wrote it)."""
    detail = summary.detail or {}
    metrics = {m.name: m for m in summary.metrics}
    notes: dict[str, str] = {m.name: m.unavailable for m in summary.metrics if m.unavailable}
    reasons: dict[str, tuple[Reason, ...]] = {}
    head = [f"{summary.subject} #{sample_number(summary.sample)}: {summary.label}: {summary.status}"]
    if summary.reason:
        head.append(summary.reason)
    lines: list[str] = []

    answer = detail.get("answer") if isinstance(detail.get("answer"), Mapping) else summary.answer
    fields = field_reasons(answer)
    if fields and isinstance(answer, Mapping):
        under = STRUCTURED_METRIC if STRUCTURED_METRIC in metrics else ""
        reasons[under] = fields
        wrong = [f"{r.name}: {r.note}" for r in fields if r.verdict == "fail"]
        if under and under not in notes:
            notes[under] = "; ".join(wrong) if wrong else f"all {len(fields)} fields matched"
        lines.append(
            f"The answer, field by field ({answer.get('matched', '?')} of {answer.get('total', len(fields))} matched"
            + (f", contract {answer['contract']}" if answer.get("contract") else "")
            + (f", read from the {answer['source']}" if answer.get("source") else "")
            + "):"
        )
        lines += [
            f"  {plain(r.name)}: {'matched' if r.verdict == 'pass' else 'wrong'}: {plain(r.note, 400)}" for r in fields
        ]
        extra = answer.get("extra_fields")
        if extra:
            # names the subject chose: each quoted, on this one line
            named = ", ".join(repr(plain(name, 60)) for name in list(extra)[:20])
            more = f" and {len(extra) - 20} more" if len(extra) > 20 else ""
            lines.append(
                f"  fields the contract does not ask for ({plain(answer.get('extra_policy', 'ignore'))}): {named}{more}"
            )

    errors = detail.get("probe_errors_px")
    if isinstance(errors, Sequence) and not isinstance(errors, str) and errors:
        worst = metrics.get(PROBE_METRIC)
        limit = None if worst is None else worst.limit
        rows = probe_reasons(errors, limit)
        under = PROBE_METRIC if worst is not None else ""
        reasons[under] = (*reasons.get(under, ()), *rows)
        over = [r for r in rows if r.verdict == "fail"]
        values = [float(r.value) for r in rows if r.verdict]
        if values and under and under not in notes:
            i = max(range(len(values)), key=values.__getitem__)
            notes[under] = (
                f"worst {rows[i].name} {rows[i].value} px; {len(over)} of {len(rows)} probes over {limit:g} px"
            )
        if "median_probe_error" in metrics and "median_probe_error" not in notes:
            notes["median_probe_error"] = f"the median of {len(rows)} probes' errors"
        lines.append(
            "Per probe, the distance from its true position"
            + (f" (the worst allowed: {limit:g} px; {len(over)} of {len(rows)} over it)" if limit is not None else "")
            + ":"
        )
        lines += [f"  {r.name} {r.value} px" + (" (over)" if r.verdict == "fail" else "") for r in rows]

    if isinstance(detail.get("matching"), Mapping):
        lines.append(_matching_line(detail["matching"]))
    if isinstance(detail.get("figures"), Mapping):
        given = detail.get("input_figures")
        lines.append(figures_line(detail["figures"], given if isinstance(given, Mapping) else None))
    left = answered(summary)
    if left:
        lines.append("What the subject left:")
        lines += [f"  {name}: {what}" for name, what in left]
    sample_rows: list[Reason] = list(reasons.get("", ()))
    for key, label in (("blocked", "blocked"), ("why", "why"), ("hint", "hint")):
        if detail.get(key):
            sample_rows.append(Reason(label, note=str(detail[key])))
            lines.append(f"{label.capitalize()}: {detail[key]}")
    if sample_rows:
        reasons[""] = tuple(sample_rows)
    # what else the verifier noted may state the truth (segmentation QC's truth_counts): it is
    # kept with the provenance, shown only when asked (and flagged saw-truth then)
    others = {k: v for k, v in detail.items() if k not in _READ}
    noted = [
        f"  {plain(k)}: {plain(v if isinstance(v, str) else json.dumps(v, default=str), 400)}"
        for k, v in others.items()
    ]

    metric_lines = ["Metrics:"]
    for m in summary.metrics:
        line = f"  {m.name} = {_number(m.value)}{(' ' + m.unit) if m.unit and m.value is not None else ''}, limit {_limit(m)}: {m.verdict}"
        if m.name in notes:
            line += f"\n    {notes[m.name]}"
        metric_lines.append(line)
    blocks = ["\n".join(head)]
    if summary.metrics:
        blocks.append("\n".join(metric_lines))
    if lines:
        blocks.append("\n".join(lines))
    legend = str(detail.get("drawn") or "")
    if legend:
        blocks.append(f"The images: {legend}")
    tail = []
    if summary.flags:
        tail.append(f"Flagged: {', '.join(summary.flags)} (what the person had seen before scoring)")
    if sample_dir is not None:
        tail.append(f"Sample {sample_number(summary.sample)} is the run folder's {sample_dir.name}: {sample_dir}")
    if tail:
        blocks.append("\n".join(tail))
    return Explanation(
        title=f"{summary.subject} #{sample_number(summary.sample)}: {summary.label}",
        status=summary.status,
        notes=notes,
        reasons=reasons,
        text="\n\n".join(blocks),
        legend=legend,
        truth="\n\n".join(
            part
            for part in (summary.provenance or "", "\n".join(["The verifier's detail:", *noted]) if noted else "")
            if part
        ),
    )
