"""A run as one static web page: ``<run>/report.html``.

``imagebench report RUN_DIR`` (and ``imagebench run`` at its end) reads the run folder and
writes a single self-contained HTML file: no server, no network, no external script or style.
Images are the run's own PNGs, referenced by paths relative to the run folder, so the page opens
straight from disk and the folder can be moved or archived whole.

The page holds, failures first:

- the run: subject, samples, when, whether it is complete (and how to resume it when not);
- figures: pass@1 (and pass@k for k = the samples per case) over cases with their denominators,
  from :func:`imagebench.scoring.aggregate`;
- coverage: every status counted (skipped, blocked, timeouts and harness errors are shown, never
  dropped), the aggregate's coverage and the presentation-coverage warnings;
- one row per case: verdict, status counts, each metric's mean against its limit, pass@k with its
  denominator and the first reason;
- per case and sample: metrics, reason and the verifier's images side by side, with their names
  and the one contrast range they share;
- the receipt (``receipt.json``) when the run wrote one.

Every piece of text from the run is escaped (``html.escape``). The page sets
``data-images="loaded"`` on ``<body>`` once every image has decoded (``broken`` otherwise), which
is what the browser test reads.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from imagebench.records import CaseSummary, RunRecord, SampleSummary
    from imagebench.scoring.aggregates import Aggregate

REPORT_NAME = "report.html"
# Case rows and sections come in this order of verdicts: what needs looking at first.
VERDICT_ORDER = ("fail", "blocked", "error", "incomplete", "missing", "skipped", "pass")


class ReportError(ValueError):
    """The folder is not a run folder that a report can be written for (names the file)."""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


# --------------------------------------------------------------------------- reading a run


@dataclass
class CaseView:
    """One case of the run as the page shows it."""

    label: str
    folder: Path
    summary: CaseSummary | None = None
    samples: list[SampleSummary] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable records, shown on the page
    expected: int = 0

    @property
    def verdict(self) -> str:
        from imagebench.runfolder import case_verdict

        if not self.samples and self.summary is None:
            return "missing"
        if self.summary is not None:
            v = self.summary.extra.get("verdict")
            if isinstance(v, str):
                return v
        if self.expected and len(self.samples) < self.expected:
            return "incomplete"
        return case_verdict(self.samples)

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for s in self.samples:
            counts[s.status] = counts.get(s.status, 0) + 1
        return counts


@dataclass
class RunView:
    run_dir: Path
    record: RunRecord
    cases: list[CaseView]
    receipt: Any = None
    receipt_problem: str = ""
    warnings: list[str] = field(default_factory=list)
    warnings_note: str = ""
    aggregates: list[Aggregate] = field(default_factory=list)
    aggregate_problem: str = ""


def _sample_index(path: Path) -> int:
    try:
        return int(path.parent.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return 1 << 30


def read_run(run_dir: str | Path, *, progress: bool = False) -> RunView:
    """Everything the page shows, read from the run folder; a record that cannot be read is a
    problem shown on the page (only a missing or unreadable ``run.json`` is an error)."""
    from imagebench.artifacts import report_dir
    from imagebench.records import (
        CaseSummary,
        RecordError,
        RunRecord,
        SampleSummary,
        read_record,
    )

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a folder; expected a run folder (run-<UTC timestamp>) holding run.json")
    try:
        record: RunRecord = read_record(run_dir / "run.json", RunRecord)
    except RecordError as exc:
        raise ReportError(str(exc)) from None
    from imagebench.runfolder import samples_for

    known = _known_cases()
    views: list[CaseView] = []
    bar, task = _bar(len(record.cases)) if progress else (None, None)
    try:
        for label in record.cases:
            namespace, _, case_id = label.partition("/")
            folder = report_dir(run_dir, record.subject, namespace, case_id)
            view = CaseView(label=label, folder=folder)
            case = known.get(label)
            view.expected = samples_for(case, record.samples) if case is not None else record.samples
            path = folder / "summary.json"
            if path.is_file():
                try:
                    view.summary = read_record(path, CaseSummary)
                except RecordError as exc:
                    view.problems.append(str(exc))
            for spath in sorted(folder.glob("sample-*/summary.json"), key=_sample_index):
                try:
                    view.samples.append(read_record(spath, SampleSummary))
                except RecordError as exc:
                    view.problems.append(str(exc))
            views.append(view)
            if bar is not None:
                bar.advance(task)
    finally:
        if bar is not None:
            bar.stop()
    run = RunView(run_dir=run_dir, record=record, cases=views)
    _read_receipt(run)
    _coverage_warnings(run, known)
    _aggregate(run)
    return run


def _bar(total: int) -> tuple[Any, Any]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("[bold]reading the run"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )
    task = bar.add_task("report", total=total)
    bar.start()
    return bar, task


def _known_cases() -> dict[str, Any]:
    try:
        from imagebench import cases as builtin

        return {c.label: c for c in builtin.all_cases()}
    except Exception:  # the registry is optional for a report
        return {}


def _read_receipt(run: RunView) -> None:
    path = run.run_dir / "receipt.json"
    if not path.is_file():
        return
    try:
        from imagebench.receipt import read_receipt

        run.receipt = read_receipt(path)
    except Exception as exc:
        run.receipt_problem = f"{type(exc).__name__}: {exc}"


def _coverage_warnings(run: RunView, known: Mapping[str, Any]) -> None:
    resolved = [known[v.label] for v in run.cases if v.label in known]
    if not resolved:
        run.warnings_note = "not computed: none of the run's cases is a built-in case"
        return
    try:
        from imagebench import cases as builtin
        from imagebench.case import presentation_warnings

        run.warnings = presentation_warnings(builtin.skills(), resolved)
    except Exception as exc:
        run.warnings_note = f"not computed: {type(exc).__name__}: {exc}"
        return
    if len(resolved) < len(run.cases):
        run.warnings_note = f"computed over the {len(resolved)} of {len(run.cases)} cases that are built-in cases"


def _aggregate(run: RunView) -> None:
    samples = [s for v in run.cases for s in v.samples]
    try:
        from imagebench.scoring import aggregate

        ks = [1] + ([run.record.samples] if run.record.samples > 1 else [])
        run.aggregates = [aggregate(samples, k, expected=run.record.cases) for k in ks]
    except Exception as exc:
        run.aggregate_problem = f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- rendering


_CSS = """
:root { --fail:#b3261e; --pass:#1b7f3b; --skip:#8a6d00; --muted:#666; --line:#ddd; --bg:#fafafa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1280px;
       padding: 16px 24px 64px; color: #1d1d1d; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; } code, pre { font: 12px/1.4 ui-monospace, Menlo, Consolas, monospace; }
pre { background: var(--bg); border: 1px solid var(--line); padding: 8px; overflow: auto; max-height: 420px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg); position: sticky; top: 0; }
.verdict { font-weight: 600; text-transform: uppercase; font-size: 12px; padding: 1px 6px; border-radius: 3px; color: #fff; }
.v-pass { background: var(--pass); } .v-fail { background: var(--fail); } .v-skipped { background: var(--skip); }
.v-missing, .v-incomplete, .v-error { background: #555; } .v-blocked { background: #7a4fa0; }
.m-fail { color: var(--fail); font-weight: 600; } .m-pass { color: var(--pass); } .m-unavailable { color: var(--skip); }
.muted { color: var(--muted); } .zero { color: #aaa; } .warn { color: var(--skip); } .problem { color: var(--fail); }
.reason { color: #333; max-width: 520px; overflow-wrap: anywhere; }
.artifacts { display: flex; flex-wrap: wrap; gap: 12px; margin: 8px 0 4px; }
figure { margin: 0; } figure img { width: 256px; height: auto; image-rendering: pixelated; border: 1px solid var(--line);
       background: #000; display: block; }
figcaption { font-size: 12px; color: var(--muted); text-align: center; max-width: 256px; overflow-wrap: anywhere; }
.artifact-error { width: 256px; min-height: 64px; border: 1px dashed var(--fail); color: var(--fail); padding: 6px;
       font-size: 12px; overflow-wrap: anywhere; }
img.broken { outline: 3px solid var(--fail); }
.case { border-left: 4px solid var(--line); padding-left: 12px; margin: 18px 0; }
.case.v-fail-border { border-left-color: var(--fail); } .case.v-pass-border { border-left-color: var(--pass); }
.case.v-skipped-border { border-left-color: var(--skip); }
.sample { margin: 10px 0 14px; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; overflow-wrap: anywhere; }
.controls { margin: 8px 0; }
body.hide-pass .is-pass { display: none; }
"""

_SCRIPT = """
(function () {
  function settle() {
    var imgs = Array.prototype.slice.call(document.images);
    var ok = 0;
    imgs.forEach(function (img) {
      if (img.complete && img.naturalWidth > 0) { ok += 1; } else { img.classList.add('broken'); }
    });
    document.body.setAttribute('data-images-total', String(imgs.length));
    document.body.setAttribute('data-images-ok', String(ok));
    document.body.setAttribute('data-images', ok === imgs.length ? 'loaded' : 'broken');
  }
  window.addEventListener('load', settle);
  var toggle = document.getElementById('hide-pass');
  if (toggle) {
    toggle.addEventListener('change', function () { document.body.classList.toggle('hide-pass', toggle.checked); });
  }
})();
"""


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}g}"


def _verdict(v: str) -> str:
    return f'<span class="verdict v-{esc(v)}">{esc(v)}</span>'


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{esc(k)} {v}" for k, v in sorted(counts.items())) or "-"


def _kv(rows: Iterable[tuple[str, Any]]) -> str:
    items = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<dl class="kv">{items}</dl>'


def _order(views: Sequence[CaseView]) -> list[CaseView]:
    rank = {v: i for i, v in enumerate(VERDICT_ORDER)}
    return [v for _, v in sorted(enumerate(views), key=lambda iv: (rank.get(iv[1].verdict, 0), iv[0]))]


def _case_figures(run: RunView) -> dict[int, dict[str, Any]]:
    """k -> label -> CaseFigures."""
    return {a.k: {c.label: c for c in a.cases} for a in run.aggregates}


def _pass_cell(figs: Mapping[int, Mapping[str, Any]], label: str, k: int) -> str:
    fig = figs.get(k, {}).get(label)
    if fig is None:
        return '<span class="muted">-</span>'
    if fig.pass_at_k is None:
        why = "no scored sample" if fig.scored == 0 else f"{fig.scored} scored &lt; k={k}"
        return f'<span class="muted">n/a ({why})</span>'
    return f"{fig.pass_at_k:.3f} <span class=\"muted\">({fig.successes}/{fig.scored} scored ok)</span>"


def _metric_means(view: CaseView) -> str:
    if view.summary is None:
        return '<span class="muted">-</span>'
    limits = view.summary.extra.get("limits", {}) or {}
    verdicts: dict[str, set[str]] = {}
    for s in view.samples:
        for m in s.metrics:
            verdicts.setdefault(m.name, set()).add(m.verdict)
    lines = []
    for name, mean in view.summary.metric_means.items():
        seen = verdicts.get(name, set())
        cls = "m-fail" if "fail" in seen else ("m-unavailable" if "unavailable" in seen else "m-pass")
        lines.append(f'<span class="{cls}">{esc(name)}</span> {esc(_fmt(mean))} / {esc(_fmt(limits.get(name)))}')
    return "<br>".join(lines) or '<span class="muted">-</span>'


def _first_reason(view: CaseView) -> str:
    reasons: list[str] = []
    if view.summary is not None:
        reasons = [r for r in view.summary.extra.get("reasons", []) if isinstance(r, str)]
    if not reasons:
        reasons = [s.reason for s in view.samples if s.reason]
    if view.problems:
        reasons = [*view.problems, *reasons]
    if not reasons:
        return ""
    text = reasons[0]
    more = f' <span class="muted">(+{len(reasons) - 1} more)</span>' if len(reasons) > 1 else ""
    return esc(text) + more


def _results_table(run: RunView, ordered: Sequence[CaseView]) -> str:
    figs = _case_figures(run)
    k = run.record.samples
    head = ["case", "verdict", "samples", "metrics (mean / limit)", "pass@1"]
    if k > 1:
        head.append(f"pass@{k}")
    head.append("why (first reason)")
    rows = []
    for view in ordered:
        cells = [
            f'<a href="#case-{esc(quote(view.label, safe=""))}">{esc(view.label)}</a>',
            _verdict(view.verdict),
            f"{_counts(view.counts)}" + (f' <span class="muted">of {view.expected}</span>' if view.expected else ""),
            _metric_means(view),
            _pass_cell(figs, view.label, 1),
        ]
        if k > 1:
            cells.append(_pass_cell(figs, view.label, k))
        cells.append(f'<span class="reason">{_first_reason(view)}</span>')
        cls = "case-row is-pass" if view.verdict == "pass" else "case-row"
        rows.append(f'<tr class="{cls}" data-label="{esc(view.label)}" data-verdict="{esc(view.verdict)}">'
                    + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    thead = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f'<table id="results"><thead><tr>{thead}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _figures(run: RunView) -> str:
    if run.aggregate_problem:
        return f'<p class="problem">figures not computed: {esc(run.aggregate_problem)}</p>'
    rows = []
    for agg in run.aggregates:
        for f in agg.figures.values():
            if f.value is None:
                value = "n/a"
            else:
                value = f"{f.value:.3f}"
                if f.stderr is not None:
                    value += f" &plusmn; {f.stderr:.3f}"
                if f.ci_low is not None and f.ci_high is not None:
                    value += f' <span class="muted">[{f.ci_low:.3f}, {f.ci_high:.3f}] 95% CI</span>'
            rows.append(
                f"<tr><td>{esc(f.name)}</td><td>{value}</td><td>{f.denominator} of {agg.coverage.get('cases', 0)} cases</td></tr>"
            )
    if not rows:
        return '<p class="muted">no figures</p>'
    policy = esc(run.aggregates[0].policy) if run.aggregates else ""
    return (
        '<table id="figures"><thead><tr><th>figure</th><th>value (&plusmn; clustered s.e.)</th><th>denominator</th></tr>'
        f'</thead><tbody>{"".join(rows)}</tbody></table><p class="muted">{policy}</p>'
    )


def _coverage(run: RunView) -> str:
    from imagebench.records import STATUSES

    counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
    for view in run.cases:
        for k, v in view.counts.items():
            counts[k] = counts.get(k, 0) + v
    expected = sum(v.expected for v in run.cases)
    got = sum(counts.values())
    status_rows = "".join(
        f'<tr data-status="{esc(k)}"><td>{esc(k)}</td><td class="{"zero" if not v else ""}">{v}</td></tr>'
        for k, v in counts.items()
    )
    parts = [
        f'<table id="status-counts"><thead><tr><th>status</th><th>samples</th></tr></thead><tbody>{status_rows}'
        f"<tr><td><b>total</b></td><td><b>{got}</b> of {expected} expected</td></tr></tbody></table>"
    ]
    if run.aggregates:
        cov = run.aggregates[-1].coverage
        parts.append(
            f"<p>cases (pass@{run.aggregates[-1].k}): "
            + ", ".join(f"{esc(k)} {v}" for k, v in cov.items())
            + "</p>"
        )
    verdicts: dict[str, int] = {}
    for view in run.cases:
        verdicts[view.verdict] = verdicts.get(view.verdict, 0) + 1
    parts.append("<p>case verdicts: " + ", ".join(f"{esc(k)} {v}" for k, v in sorted(verdicts.items())) + "</p>")
    problems = [p for v in run.cases for p in v.problems]
    if problems:
        parts.append(
            '<p class="problem">unreadable records (shown, not counted):</p><ul>'
            + "".join(f'<li class="problem">{esc(p)}</li>' for p in problems)
            + "</ul>"
        )
    if run.warnings:
        parts.append(
            '<p>presentation-coverage warnings:</p><ul id="coverage-warnings">'
            + "".join(f'<li class="warn">{esc(w)}</li>' for w in run.warnings)
            + "</ul>"
        )
    else:
        parts.append('<p class="muted">presentation coverage: no warnings</p>')
    if run.warnings_note:
        parts.append(f'<p class="muted">presentation coverage {esc(run.warnings_note)}</p>')
    return "".join(parts)


def _artifacts(run: RunView, view: CaseView, sample: SampleSummary) -> str:
    folder = view.folder / f"sample-{sample.sample}" if sample.sample is not None else view.folder
    figures = []
    for name in sample.artifacts:
        path = folder / name
        rel = path.relative_to(run.run_dir).as_posix()
        stem = name[: -len(".png.error")] if name.endswith(".png.error") else name.rsplit(".", 1)[0]
        if name.endswith(".error"):
            try:
                why = path.read_text(encoding="utf-8", errors="replace").strip()
            except OSError as exc:
                why = f"(the error file could not be read: {exc})"
            figures.append(
                f'<figure><div class="artifact-error">this image could not be drawn: {esc(why)}</div>'
                f"<figcaption>{esc(stem)}</figcaption></figure>"
            )
            continue
        figures.append(
            f'<figure><img src="{esc(quote(rel))}" alt="{esc(stem)}" title="{esc(name)}">'
            f"<figcaption>{esc(stem)}</figcaption></figure>"
        )
    if not figures:
        return ""
    rng = sample.detail.get("artifact_range")
    if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, (int, float)) for x in rng):
        range_text = f"one shared contrast range for these images: [{_fmt(rng[0])}, {_fmt(rng[1])}] mapped to black..white"
    else:
        range_text = "one shared contrast range for these images (its value was not recorded)"
    return f'<div class="artifacts">{"".join(figures)}</div><p class="muted range">{esc(range_text)}</p>'


def _sample_block(run: RunView, view: CaseView, sample: SampleSummary) -> str:
    metric_rows = "".join(
        f'<tr><td>{esc(m.name)}</td><td class="m-{esc(m.verdict)}">{esc(_fmt(m.value))}{(" " + esc(m.unit)) if m.unit else ""}</td>'
        f"<td>{esc(_fmt(m.limit))}</td><td class=\"m-{esc(m.verdict)}\">{esc(m.verdict)}</td>"
        f"<td>{esc(m.unavailable or '')}</td></tr>"
        for m in sample.metrics
    )
    metrics = (
        f"<table><thead><tr><th>metric</th><th>value</th><th>limit</th><th>verdict</th><th>why unavailable</th></tr></thead>"
        f"<tbody>{metric_rows}</tbody></table>"
        if metric_rows
        else ""
    )
    flags = f' <span class="warn">{esc(", ".join(sample.flags))}</span>' if sample.flags else ""
    times = ", ".join(f"{esc(k)} {v:.3f}s" for k, v in sorted(sample.times.items()))
    reason = f'<p class="reason">{esc(sample.reason)}</p>' if sample.reason else ""
    return (
        f'<div class="sample" data-sample="{esc(sample.sample)}" data-status="{esc(sample.status)}">'
        f"<h3>sample {esc(sample.sample)}: {esc(sample.status)}{flags}</h3>{reason}{metrics}"
        f"{_artifacts(run, view, sample)}"
        f'<p class="muted">times: {times or "-"}</p></div>'
    )


def _case_section(run: RunView, view: CaseView) -> str:
    anchor = esc(quote(view.label, safe=""))
    info = []
    first = view.samples[0] if view.samples else None
    if first is not None:
        info += [("kind", esc(first.kind)), ("class", esc(first.case_class))]
        if first.seed is not None:
            info.append(("seed", esc(first.seed)))
        if first.provenance:
            info.append(("provenance", esc(first.provenance)))
    info.append(("samples", f"{_counts(view.counts)} (of {view.expected} expected)"))
    if view.summary is not None:
        consistency = view.summary.extra.get("consistency")
        if isinstance(consistency, Mapping):
            info.append(("across samples", esc(json.dumps(consistency, sort_keys=True))))
    problems = "".join(f'<p class="problem">{esc(p)}</p>' for p in view.problems)
    samples = "".join(_sample_block(run, view, s) for s in view.samples)
    if not view.samples:
        samples = '<p class="muted">no sample of this case has a summary (the run did not reach it)</p>'
    hide = " is-pass" if view.verdict == "pass" else ""
    return (
        f'<section class="case v-{esc(view.verdict)}-border{hide}" id="case-{anchor}" data-label="{esc(view.label)}">'
        f"<h2>{esc(view.label)} {_verdict(view.verdict)}</h2>{_kv(info)}{problems}{samples}</section>"
    )


def _receipt(run: RunView) -> str:
    if run.receipt_problem:
        return f'<p class="problem">receipt.json could not be read: {esc(run.receipt_problem)}</p>'
    if run.receipt is None:
        return '<p class="muted">this run wrote no receipt.json</p>'
    r = run.receipt
    packages = ", ".join(f"{esc(k)} {esc(v or 'absent')}" for k, v in r.packages.items())
    rows = [
        ("created", esc(r.created)),
        ("platform", esc(r.platform.get("platform", ""))),
        ("python", esc(f"{r.python.get('implementation', '')} {r.python.get('version', '')}")),
        ("source revision", esc(r.source_revision)),
        ("subject", esc(json.dumps(r.subject, sort_keys=True))),
        ("packages", packages),
    ]
    full = esc(json.dumps(r.model_dump(mode="json"), indent=2, sort_keys=True))
    return f"{_kv(rows)}<details><summary>the whole receipt</summary><pre id=\"receipt\">{full}</pre></details>"


def render(run: RunView) -> str:
    """The page for ``run`` as one HTML string."""
    rec = run.record
    ordered = _order(run.cases)
    verdicts = [v.verdict for v in run.cases]
    n_fail = sum(v == "fail" for v in verdicts)
    state = "complete" if rec.complete else (
        "incomplete: resume it with <code>imagebench run --resume " + esc(run.run_dir) + "</code>"
    )
    resumes = rec.extra.get("resumes") or []
    header_rows = [
        ("run", esc(rec.run_id)),
        ("subject", esc(rec.subject)),
        ("samples per case", esc(rec.samples)),
        ("cases", f"{len(rec.cases)} ({n_fail} failed, {verdicts.count('pass')} passed, {verdicts.count('skipped')} skipped)"),
        ("started", esc(rec.started)),
        ("finished", esc(rec.finished or "-")),
        ("state", state),
    ]
    if rec.selection:
        header_rows.append(("selection", esc(json.dumps(rec.selection, sort_keys=True))))
    if resumes:
        header_rows.append(("resumed", esc(", ".join(str(r.get("time", "?")) for r in resumes if isinstance(r, Mapping)))))
    if rec.extra.get("executor"):
        header_rows.append(("executor", esc(rec.extra["executor"])))
    sections = "".join(_case_section(run, v) for v in ordered)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>imagebench {esc(rec.run_id)}: {esc(rec.subject)}</title>"
        f"<style>{_CSS}</style></head>"
        '<body data-images="pending">'
        f"<h1>imagebench run {esc(rec.run_id)}</h1>{_kv(header_rows)}"
        "<h2>Figures</h2>" + _figures(run) + "<h2>Coverage</h2>" + _coverage(run)
        + "<h2>Results</h2>"
        '<div class="controls"><label><input type="checkbox" id="hide-pass"> hide passing cases</label></div>'
        + _results_table(run, ordered)
        + "<h2>Cases</h2>" + sections
        + "<h2>Receipt</h2>" + _receipt(run)
        + f"<script>{_SCRIPT}</script></body></html>\n"
    )


def write_html_report(run_dir: str | Path, *, out: str | Path | None = None, progress: bool = False) -> Path:
    """Write ``<run_dir>/report.html`` (or ``out``) atomically and return its path.

    Image paths are relative to the run folder; with ``out`` elsewhere they are made relative
    to ``out``'s folder so the page still finds them.
    """
    import os

    from imagebench.records import atomic_write_text

    run = read_run(run_dir, progress=progress)
    target = Path(out) if out is not None else run.run_dir / REPORT_NAME
    page = render(run)
    if target.parent.resolve() != run.run_dir.resolve():
        prefix = Path(os.path.relpath(run.run_dir.resolve(), target.parent.resolve())).as_posix()
        page = page.replace('<img src="', f'<img src="{esc(quote(prefix))}/')
    return atomic_write_text(target, page)


# --------------------------------------------------------------------------- CLI


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write a static HTML report of a run folder",
        description=(
            "Write RUN_DIR/report.html: figures, coverage, one row per case (failures first) and each "
            "sample's images side by side. It needs no server and opens from disk."
        ),
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (run-<UTC timestamp>) holding run.json")
    p.add_argument("--out", metavar="FILE", help="write the page here instead of RUN_DIR/report.html")
    p.add_argument("--quiet", action="store_true", help="no progress bar; print only the page's path")
    p.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    from imagebench.cli import UsageError

    try:
        path = write_html_report(args.run_dir, out=args.out, progress=not args.quiet)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        print(f"imagebench report: could not write the page: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0
