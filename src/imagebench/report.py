"""A run as one static web page: ``<run>/report.html``.
Long because it is the page's whole model (cases, figures, coverage, receipt; and a sitting's page over its runs); the markup is in templates/.

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

A bench panel's sitting (:mod:`imagebench.runs.sitting`, a folder of run folders, one per subject)
gets one page too (:func:`read_sitting_page`, template ``sitting.html.j2``): a row per subject (how
it was held, its verdicts, whether its journal verified), then each subject's run as its own page
shows it (``_run_body.html.j2``, every id prefixed by the subject's ``s<n>-``).

The markup is the Jinja2 template ``imagebench/templates/report.html.j2``; this module gathers
what it shows into a view-model of plain text and numbers (:func:`page_view`), and the template's
environment escapes every value it prints (autoescape), so text from the run never becomes markup.
The page sets ``data-images="loaded"`` on ``<body>`` once every image has decoded (``broken``
otherwise), which is what the browser test reads.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from imagebench.usage.show import totals, usage_text

if TYPE_CHECKING:
    from imagebench.records import CaseSummary, RunRecord, SampleSummary
    from imagebench.runs.brief import Briefs, CaseBriefs
    from imagebench.scoring.aggregates import Aggregate

REPORT_NAME = "report.html"
TEMPLATE_NAME = "report.html.j2"  # in imagebench/templates
# Case rows and sections come in this order of verdicts: what needs looking at first.
VERDICT_ORDER = ("fail", "blocked", "error", "incomplete", "missing", "skipped", "pass")


class ReportError(ValueError):
    """The folder is not a run folder that a report can be written for (names the file)."""


# --------------------------------------------------------------------------- reading a run


@dataclass
class CaseView:
    """One case of the run as the page shows it: every usable sample counted (``gathered``, a
    :class:`imagebench.runs.brief.CaseBriefs`), the few the page shows whole in ``samples``."""

    label: str
    folder: Path
    summary: CaseSummary | None = None
    samples: list[SampleSummary] = field(default_factory=list)  # shown whole, in sample order
    problems: list[str] = field(default_factory=list)  # unreadable records, shown on the page
    expected: int = 0
    gathered: CaseBriefs | None = None  # every usable sample, briefly

    @property
    def briefs(self) -> list[Any]:
        return list(self.gathered.briefs) if self.gathered is not None else list(self.samples)

    @property
    def total(self) -> int:
        return self.gathered.total if self.gathered is not None else len(self.samples)

    @property
    def verdict(self) -> str:
        from imagebench.runs.verdict import checked_verdict

        if not self.total and self.summary is None:
            return "missing"
        if self.expected and self.total < self.expected:
            return "incomplete"
        return checked_verdict(self.briefs, self.summary)

    @property
    def counts(self) -> dict[str, int]:
        if self.gathered is not None:
            return self.gathered.counts()
        counts: dict[str, int] = {}
        for s in self.samples:
            counts[s.status] = counts.get(s.status, 0) + 1
        return counts


@dataclass
class RunPage:
    """The page's model of one run: the run as its one reader read it (``contents``), with the
    case sections, figures and warnings the page shows."""

    run_dir: Path
    record: RunRecord
    cases: list[CaseView]
    contents: Any = None  # imagebench.runs.reader.RunContents
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


def _expected_of(known: Mapping[str, Any]) -> Any:
    """``record -> {label: samples expected}``: each known case's samples (a case may ask for more)."""
    from imagebench.runs.verdict import samples_for

    def expected_of(record: RunRecord) -> dict[str, int]:
        return {
            label: samples_for(known[label], record.samples) if label in known else record.samples
            for label in record.cases
        }

    return expected_of


def read_page(run_dir: str | Path, *, progress: bool = False, check_all: bool = False) -> RunPage:
    """Everything the page shows, read through the run folder's one reader
    (:func:`imagebench.runs.reader.read_run`): a sample summary that is unreadable, misplaced, changed
    after it was journaled or never journaled is left out and named on the page as a problem (only
    a missing or unreadable ``run.json`` or journal is an error).

    The samples the page shows are read whole; in a verified journal of version 3 the others are
    counted from their signed lines, their summaries' sizes checked (:meth:`Briefs.wants
    <imagebench.runs.brief.Briefs.wants>`), and the page says so. ``check_all`` reads every summary
    whole, as a journal of an older version is read."""
    from imagebench.runs.brief import Briefs
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.reader import read_run

    known = _known_cases()
    briefs = Briefs(check_all=check_all)
    try:  # each sample streamed past and let go: the page is read in bounded memory (runs.brief)
        contents = read_run(run_dir, expected=_expected_of(known), on_sample=briefs.take, wants=briefs.wants)
    except RunFolderError as exc:
        raise ReportError(str(exc)) from None
    return page_of(contents, known, progress=progress, briefs=briefs)


def page_of(
    contents: Any, known: Mapping[str, Any], *, progress: bool = False, briefs: Briefs | None = None
) -> RunPage:
    """The page of a run its one reader has read (``contents``, a RunContents); ``known`` are the
    built-in cases. ``briefs``: what the reader streamed into a :class:`~imagebench.runs.brief.Briefs`
    (else the samples ``contents`` kept are gathered here)."""
    from imagebench.runs.brief import Briefs
    from imagebench.runs.layout import label_dir
    from imagebench.runs.progress import Bar

    record = contents.record
    expected = _expected_of(known)(record)
    run_dir = Path(contents.run_dir)
    views: list[CaseView] = []
    with Bar(len(record.cases), description="reading", enabled=progress) as bar:
        for label in record.cases:
            view = CaseView(label=label, folder=label_dir(run_dir, record.subject, label), expected=expected[label])
            view.summary = contents.case_summaries.get(label)
            view.problems.extend(contents.case_problems.get(label, []))
            gathered = briefs if briefs is not None else Briefs()
            for entry in contents.entries(label):
                if entry.usable and entry.summary is not None:
                    if briefs is None:
                        gathered.take(entry)
                elif entry.problem and entry.problem != "missing":
                    view.problems.append(f"sample {entry.sample}: {entry.problem}")
            view.gathered = gathered.case(label)
            view.samples = sorted(view.gathered.shown, key=lambda s: s.sample if s.sample is not None else -1)
            views.append(view)
            bar.advance()
    run = RunPage(run_dir=run_dir, record=record, cases=views, contents=contents)
    _read_receipt(run)
    _coverage_warnings(run, known)
    _aggregate(run)
    return run


def _known_cases() -> dict[str, Any]:
    try:
        from imagebench import cases as builtin

        return {c.label: c for c in builtin.all_cases()}
    except Exception:  # the registry is optional for a report
        return {}


def _read_receipt(run: RunPage) -> None:
    """The receipt as the run folder's reader found it, validated as a Receipt."""
    raw = run.contents.receipt if run.contents is not None else None
    if raw is None:
        problem = run.contents.receipt_problem if run.contents is not None else ""
        if problem and problem != "no receipt.json":
            run.receipt_problem = f"ReceiptError: {run.run_dir / 'receipt.json'}: {problem}"
        return
    try:
        from imagebench.runs.receipt import Receipt

        run.receipt = Receipt.model_validate(raw)
    except Exception as exc:
        run.receipt_problem = f"{type(exc).__name__}: {exc}"


def _coverage_warnings(run: RunPage, known: Mapping[str, Any]) -> None:
    resolved = [known[v.label] for v in run.cases if v.label in known]
    if not resolved:
        run.warnings_note = "not computed: none of the run's cases is a built-in case"
        return
    try:
        from imagebench import cases as builtin
        from imagebench.case.model import presentation_warnings

        run.warnings = presentation_warnings(builtin.skills(), resolved)
    except Exception as exc:
        run.warnings_note = f"not computed: {type(exc).__name__}: {exc}"
        return
    if len(resolved) < len(run.cases):
        run.warnings_note = f"computed over the {len(resolved)} of {len(run.cases)} cases that are built-in cases"


def _aggregate(run: RunPage) -> None:
    samples = [s for v in run.cases for s in v.briefs]  # every usable sample, briefly (runs.brief)
    try:
        from imagebench.scoring import aggregate

        ks = [1] + ([run.record.samples] if run.record.samples > 1 else [])
        run.aggregates = [aggregate(samples, k, expected=run.record.cases) for k in ks]
    except Exception as exc:
        run.aggregate_problem = f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- the page's view-model
#
# What the page shows, as plain text and numbers; the markup is ``templates/report.html.j2``.
# Nothing here is HTML: the template's environment escapes every value it prints.


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}g}"


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _pairs(counts: Mapping[str, int]) -> str:
    """``"a 1, b 2"``: counts as one line of text."""
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _order(views: Sequence[CaseView]) -> list[CaseView]:
    rank = {v: i for i, v in enumerate(VERDICT_ORDER)}
    return [v for _, v in sorted(enumerate(views), key=lambda iv: (rank.get(iv[1].verdict, 0), iv[0]))]


def _anchor(label: str) -> str:
    return quote(label, safe="")


@dataclass(frozen=True)
class PassCell:
    """pass@k of one case: its value with the samples behind it, or why there is none."""

    value: str | None
    note: str


@dataclass(frozen=True)
class MetricMean:
    name: str
    css: str  # m-fail, m-unavailable or m-pass: the worst verdict any sample gave this metric
    mean: str
    limit: str


@dataclass(frozen=True)
class CaseRow:
    label: str
    anchor: str
    verdict: str
    is_pass: bool
    counts: str
    expected: int
    metrics: list[MetricMean]
    passes: list[PassCell]  # pass@1, then pass@k when the run drew k > 1 samples per case
    reason: str
    more: int  # reasons beyond the first


@dataclass(frozen=True)
class MetricRow:
    name: str
    value: str  # with its unit
    limit: str
    verdict: str
    unavailable: str


@dataclass(frozen=True)
class ArtifactView:
    name: str
    caption: str
    src: str = ""  # relative to the page
    error: str | None = None  # why the image could not be drawn


@dataclass(frozen=True)
class SampleBlock:
    sample: str
    status: str
    flags: str
    reason: str
    metrics: list[MetricRow]
    artifacts: list[ArtifactView]
    range: str
    times: str
    transcript: TranscriptView | None = None
    usage: str = "-"  # what the subject spent, each figure with its source (imagebench.usage.show)
    answered: list[tuple[str, str]] = field(default_factory=list)  # (leaving, what the subject left)
    fields: list[tuple[str, str, str]] = field(default_factory=list)  # (field, pass|fail, the scorer's reason)
    logs: list[tuple[str, str]] = field(default_factory=list)  # (stdout.txt / stderr.txt, its link)
    legend: str = ""  # what the images draw (detail.drawn: the overlay's colours)
    figures: str = ""  # a segmentation's informative figures (detail.figures), never gating


@dataclass(frozen=True)
class TranscriptView:
    """An agent's tool calls (``transcript.json`` beside the sample's summary)."""

    client: str
    route: str
    submitted: bool
    skills: str
    calls: list[dict[str, str]]
    error: str = ""
    total: int = 0  # every call, shown or not
    not_shown: int = 0  # past REPORT_CALLS, or only counted in the transcript (MAX_RECORDED)


#: tool calls a sample's section shows at most (the first ones; transcript.json has them all, to its own cap)
REPORT_CALLS = 500


@dataclass(frozen=True)
class CaseSection:
    label: str
    anchor: str
    verdict: str
    is_pass: bool
    info: list[tuple[str, str]]
    problems: list[str]
    samples: list[SampleBlock]
    checks: list[str] = field(default_factory=list)
    hidden: int = 0  # usable samples counted above but not shown whole
    more: str = ""  # how to see them: the case's own pages, written on demand


def _pass_cell(figs: Mapping[int, Mapping[str, Any]], label: str, k: int) -> PassCell:
    fig = figs.get(k, {}).get(label)
    if fig is None:
        return PassCell(None, "-")
    if fig.pass_at_k is None:
        why = "no scored sample" if fig.scored == 0 else f"{fig.scored} scored < k={k}"
        return PassCell(None, f"n/a ({why})")
    return PassCell(f"{fig.pass_at_k:.3f}", f"({fig.successes}/{fig.scored} scored ok)")


def _metric_means(view: CaseView) -> list[MetricMean]:
    if view.summary is None:
        return []
    limits = view.summary.extra.get("limits", {}) or {}
    verdicts: dict[str, set[str]] = view.gathered.metric_verdicts if view.gathered is not None else {}
    means = []
    for name, mean in view.summary.metric_means.items():
        seen = verdicts.get(name, set())
        css = "m-fail" if "fail" in seen else ("m-unavailable" if "unavailable" in seen else "m-pass")
        means.append(MetricMean(name, css, _fmt(mean), _fmt(limits.get(name))))
    return means


def _reasons(view: CaseView) -> list[str]:
    reasons: list[str] = []
    if view.summary is not None:
        reasons = [r for r in view.summary.extra.get("reasons", []) if isinstance(r, str)]
    if not reasons:
        reasons = (
            list(view.gathered.reasons) if view.gathered is not None else [s.reason for s in view.samples if s.reason]
        )
    return [*view.problems, *reasons]


def _results(run: RunPage, ordered: Sequence[CaseView]) -> dict[str, Any]:
    figs = {a.k: {c.label: c for c in a.cases} for a in run.aggregates}  # k -> label -> CaseFigures
    k = run.record.samples
    ks = [1, k] if k > 1 else [1]
    rows = []
    for view in ordered:
        reasons = _reasons(view)
        rows.append(
            CaseRow(
                label=view.label,
                anchor=_anchor(view.label),
                verdict=view.verdict,
                is_pass=view.verdict == "pass",
                counts=_pairs(dict(sorted(view.counts.items()))) or "-",
                expected=view.expected,
                metrics=_metric_means(view),
                passes=[_pass_cell(figs, view.label, j) for j in ks],
                reason=reasons[0] if reasons else "",
                more=max(0, len(reasons) - 1),
            )
        )
    head = ["case", "verdict", "samples", "metrics (mean / limit)", *(f"pass@{j}" for j in ks), "why (first reason)"]
    return {"head": head, "rows": rows}


def _figures(run: RunPage) -> dict[str, Any]:
    rows = []
    for agg in run.aggregates:
        for f in agg.figures.values():
            known = f.value is not None
            rows.append(
                {
                    "name": f.name,
                    "value": f"{f.value:.3f}" if known else "n/a",
                    "stderr": f"{f.stderr:.3f}" if known and f.stderr is not None else None,
                    "ci": (f"{f.ci_low:.3f}", f"{f.ci_high:.3f}")
                    if known and f.ci_low is not None and f.ci_high is not None
                    else None,
                    "denominator": f.denominator,
                    "cases": agg.coverage.get("cases", 0),
                    "fixtures": f.fixtures,
                }
            )
    policy = run.aggregates[0].policy if run.aggregates else ""
    return {"problem": run.aggregate_problem, "rows": rows, "policy": policy}


def _coverage(run: RunPage) -> dict[str, Any]:
    from imagebench.records import STATUSES

    counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
    for view in run.cases:
        for k, v in view.counts.items():
            counts[k] = counts.get(k, 0) + v
    verdicts: dict[str, int] = {}
    for view in run.cases:
        verdicts[view.verdict] = verdicts.get(view.verdict, 0) + 1
    last = run.aggregates[-1] if run.aggregates else None
    return {
        "statuses": list(counts.items()),
        "got": sum(counts.values()),
        "expected": sum(v.expected for v in run.cases),
        "cases_k": last.k if last is not None else None,
        "cases_line": _pairs(last.coverage) if last is not None else None,
        "verdicts": _pairs(dict(sorted(verdicts.items()))),
        "problems": _capped([p for v in run.cases for p in v.problems]),
        "warnings": run.warnings,
        "warnings_note": run.warnings_note,
    }


def _artifacts(run: RunPage, view: CaseView, sample: SampleSummary, image_prefix: str) -> list[ArtifactView]:
    folder = view.folder / f"sample-{sample.sample}" if sample.sample is not None else view.folder
    shown = []
    for name in sample.artifacts:
        path = folder / name
        stem = name[: -len(".png.error")] if name.endswith(".png.error") else name.rsplit(".", 1)[0]
        if name.endswith(".error"):
            try:
                why = path.read_text(encoding="utf-8", errors="replace").strip()
            except OSError as exc:
                why = f"(the error file could not be read: {exc})"
            shown.append(ArtifactView(name=name, caption=stem, error=why))
            continue
        rel = path.relative_to(run.run_dir).as_posix()
        shown.append(ArtifactView(name=name, caption=stem, src=quote(f"{image_prefix}{rel}")))
    return shown


def _range(sample: SampleSummary) -> str:
    rng = sample.detail.get("artifact_range")
    if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, (int, float)) for x in rng):
        text = f"one shared contrast range for these images: [{_fmt(rng[0])}, {_fmt(rng[1])}] mapped to black..white"
        from imagebench.runs.artifacts import difference_range, is_difference

        if any(is_difference(Path(name).name.split(".", 1)[0]) for name in sample.artifacts):
            lo, hi = difference_range(rng[0], rng[1])
            text += f"; the difference over [{_fmt(lo)}, {_fmt(hi)}], magenta..black..green"
        return text
    return "one shared contrast range for these images (its value was not recorded)"


def _sample_block(run: RunPage, view: CaseView, sample: SampleSummary, image_prefix: str) -> SampleBlock:
    metrics = [
        MetricRow(
            name=m.name,
            value=_fmt(m.value) + (f" {m.unit}" if m.unit else ""),
            limit=_fmt(m.limit),
            verdict=m.verdict,
            unavailable=m.unavailable or "",
        )
        for m in sample.metrics
    ]
    return SampleBlock(
        sample=_text(sample.sample),
        status=sample.status,
        flags=", ".join(sample.flags),
        reason=sample.reason,
        metrics=metrics,
        artifacts=_artifacts(run, view, sample, image_prefix),
        range=_range(sample),
        times=", ".join(f"{k} {v:.3f}s" for k, v in sorted(sample.times.items())) or "-",
        transcript=_transcript(view, sample),
        usage=usage_text(sample.usage),
        **_what_it_answered(run, view, sample, image_prefix),
    )


def _what_it_answered(run: RunPage, view: CaseView, sample: SampleSummary, image_prefix: str) -> dict[str, Any]:
    """What the subject left (a structured answer's values, an array's shape and dtype), the
    scorer's reason per field, links to its stdout/stderr, the images' legend
    (:mod:`imagebench.runs.explain`, as the CLI table and the panel read them)."""
    from imagebench.runs.explain import answered, field_reasons, figures_line, plain

    detail = sample.detail or {}
    answer = detail.get("answer") if isinstance(detail.get("answer"), Mapping) else sample.answer
    folder = view.folder / f"sample-{sample.sample}" if sample.sample is not None else view.folder
    logs = []
    for name in ("stdout.txt", "stderr.txt"):
        path = folder / name
        if path.is_file() and not path.is_symlink():
            rel = path.relative_to(run.run_dir).as_posix()
            logs.append((f"{name} ({path.stat().st_size} bytes)", quote(f"{image_prefix}{rel}")))
    return {
        "answered": answered(sample),
        "fields": [(plain(r.name, 80), r.verdict, plain(r.note, 400)) for r in field_reasons(answer)],
        "logs": logs,
        "legend": str(detail.get("drawn") or ""),
        "figures": (
            figures_line(
                detail["figures"],
                detail["input_figures"] if isinstance(detail.get("input_figures"), Mapping) else None,
            )
            if isinstance(detail.get("figures"), Mapping)
            else ""
        ),
    }


def _transcript(view: CaseView, sample: SampleSummary) -> TranscriptView | None:
    """The sample's transcript of tool calls, when its subject worked through MCP."""
    from imagebench.records import RecordError, read_record
    from imagebench.subjects.mcp.transcript import TRANSCRIPT, Transcript

    folder = view.folder / f"sample-{sample.sample}" if sample.sample is not None else view.folder
    path = folder / TRANSCRIPT
    if not path.is_file():
        return None
    try:
        record = read_record(path, Transcript)
    except RecordError as exc:
        return TranscriptView(client="", route="", submitted=False, skills="", calls=[], error=str(exc))
    calls = [
        {
            "seq": str(c.seq),
            "tool": c.tool,
            "arguments": json.dumps(c.arguments, separators=(", ", ": "))[:300] if c.arguments else "",
            "outcome": "ok" if c.ok else f"error: {c.error}",
            "ok": "ok" if c.ok else "error",
            "result": c.result,
            "at": f"{c.started_s:.3f}",
            "ms": f"{c.seconds * 1000:.1f}",
        }
        for c in record.calls[:REPORT_CALLS]
    ]
    return TranscriptView(
        client=record.client or "(unnamed client)",
        route=record.route,
        submitted=record.submitted,
        skills=", ".join(record.skills) or "none",
        calls=calls,
        total=record.total(),
        not_shown=record.total() - len(calls),
    )


def _case_section(run: RunPage, view: CaseView, image_prefix: str) -> CaseSection:
    info: list[tuple[str, str]] = []
    first = view.samples[0] if view.samples else None
    if first is not None:
        info += [("kind", first.kind), ("class", first.case_class)]
        if first.seed is not None:
            info.append(("seed", str(first.seed)))
        if first.citation:
            info.append(("cite", first.citation))
        if first.provenance:
            info.append(("provenance", first.provenance))
    info.append(("samples", f"{_pairs(dict(sorted(view.counts.items()))) or '-'} (of {view.expected} expected)"))
    if view.summary is not None:
        consistency = view.summary.extra.get("consistency")
        if isinstance(consistency, Mapping):
            info.append(("across samples", json.dumps(consistency, sort_keys=True)))
    return CaseSection(
        label=view.label,
        anchor=_anchor(view.label),
        verdict=view.verdict,
        is_pass=view.verdict == "pass",
        info=info,
        problems=_capped(list(view.problems)),
        samples=[_sample_block(run, view, s, image_prefix) for s in view.samples],
        hidden=max(0, view.total - len(view.samples)),
        more=_more(run, view),
        checks=[str(c) for c in (view.summary.extra.get("checks") or [])] if view.summary is not None else [],
    )


#: Problems listed per list on a page; the rest are counted (a page stays bounded when every sample has one).
PROBLEMS_SHOWN = 50
#: Samples on each of a case's own pages (:func:`write_case_report`).
CASE_PAGE = 200


def _capped(problems: list[str]) -> list[str]:
    if len(problems) <= PROBLEMS_SHOWN:
        return problems
    return [
        *problems[:PROBLEMS_SHOWN],
        f"... and {len(problems) - PROBLEMS_SHOWN} more (imagebench check, or the case's own page)",
    ]


def _more(run: RunPage, view: CaseView) -> str:
    hidden = view.total - len(view.samples)
    if hidden <= 0:
        return ""
    pages = -(-view.total // CASE_PAGE)
    return (
        f"{hidden} more sample(s) of this case are counted above and not shown here; "
        f"`imagebench report {run.run_dir} --case {view.label} --page N` writes them, {CASE_PAGE} a page "
        f"(pages 1 to {pages})"
    )


def _receipt(run: RunPage) -> dict[str, Any]:
    if run.receipt_problem or run.receipt is None:
        return {"problem": run.receipt_problem, "rows": None, "full": ""}
    r = run.receipt
    rows = [
        ("created", _text(r.created)),
        ("platform", _text(r.platform.get("platform", ""))),
        ("python", f"{r.python.get('implementation', '')} {r.python.get('version', '')}"),
        ("source revision", _text(r.source_revision) + (" (with uncommitted changes)" if r.source_dirty else "")),
        ("source tree", _text(r.source_tree_hash or "not recorded")),
        ("subject", json.dumps(r.subject, sort_keys=True)),
        ("packages", ", ".join(f"{k} {v or 'absent'}" for k, v in r.packages.items())),
    ]
    return {"problem": "", "rows": rows, "full": json.dumps(r.model_dump(mode="json"), indent=2, sort_keys=True)}


#: What each confinement means to a reader of the report (docs/integrity.md).
SANDBOX_MEANINGS = {
    "bubblewrap": "bubblewrap: the subject saw its workspace and a read-only system, never the truth or the harness",
    "none": "none: the subject ran with --no-sandbox and could read this whole machine, truth included",
    "in-process": "in-process: trusted code in the harness's own process (it could read the truth; only changing it is caught)",
}


#: What the bench panel records as its runs' source, and as the name of a person scoring their own work.
PANEL_SOURCE, PERSON = "napari-imagebench panel", "interactive"


def _sandbox_text(rec: Any) -> str:
    panel = rec.selection.get("source") == PANEL_SOURCE
    if rec.sandbox is None and panel and rec.subject == PERSON:
        return "none (a person at the viewer: they can see whatever the viewer shows, never the truth)"
    if rec.sandbox == "none" and panel and rec.subject.startswith("mcp:"):
        return (
            "none (an agent served from the panel: a program of its own outside any sandbox, "
            "which could read whatever its user can, truth files included)"
        )
    return SANDBOX_MEANINGS.get(rec.sandbox or "", "not recorded (a run before sandboxes were recorded)")


def _access_text(rec: Any) -> str:
    """The run's access setting (docs/agents.md, Access settings) and how it was enforced."""
    execution = rec.extra.get("execution")
    access = execution.get("access") if isinstance(execution, Mapping) else None
    if not isinstance(access, Mapping):
        return "not recorded (a subject without a sandbox policy, or a run before access settings)"
    how = f"{access.get('setting')}: {access.get('gives')}"
    if not access.get("declared", True):
        how += " (no --access declared: what a command always had)"
    if access.get("exec"):
        how += f"; execution confined by {access['exec']}"
    return how


def _head(run: RunPage) -> dict[str, Any]:
    rec = run.record
    verdicts = [v.verdict for v in run.cases]
    failed, passed, skipped = verdicts.count("fail"), verdicts.count("pass"), verdicts.count("skipped")
    rows = [
        ("run", rec.run_id),
        ("subject", rec.subject),
        ("sandbox", _sandbox_text(rec)),
        ("access", _access_text(rec)),
        ("samples per case", str(rec.samples)),
        ("cases", f"{len(rec.cases)} ({failed} failed, {passed} passed, {skipped} skipped)"),
        ("started", rec.started),
        ("finished", rec.finished or "-"),
    ]
    more: list[tuple[str, str]] = []
    if rec.selection:
        more.append(("selection", json.dumps(rec.selection, sort_keys=True)))
    kept = rec.extra.get("artifacts")
    if isinstance(kept, Mapping):
        rows.append(("images kept", f"{kept.get('mode')}: {kept.get('why')}"))
    resumes = rec.extra.get("resumes") or []
    if resumes:
        more.append(("resumed", ", ".join(str(r.get("time", "?")) for r in resumes if isinstance(r, Mapping))))
    if rec.extra.get("executor"):
        more.append(("executor", str(rec.extra["executor"])))
    rows.append(("usage", totals(s.usage for v in run.cases for s in v.samples).text()))
    rows.append(("checked", checked_text(run)))
    if rec.extra.get("budget"):
        budget = {k: v for k, v in rec.extra["budget"].items() if k != "prices" and v is not None}
        more.append(("budget per sample", json.dumps(budget, sort_keys=True)))
    return {
        "run_id": rec.run_id,
        "subject": rec.subject,
        "rows": rows,
        "complete": rec.complete,
        "run_dir": str(run.run_dir),
        "more_rows": more,
    }


def checked_text(run: RunPage) -> str:
    """What the reader checked of the run folder, in words: the journal's chain, the summaries read
    whole, and those vouched for by their signed lines (with the command that reads them all)."""
    contents = run.contents
    if contents is None:
        return "-"
    check = contents.journal_check
    if check is not None and check.verified:
        chain = f"journal chain: all {check.lines} line(s) verified"
    else:
        chain = "journal chain: not verified (see the problems above)"
    text = (
        f"{chain}; summaries read whole and checked against their digests and the files beside them: "
        f"{contents.read_whole}"
    )
    if contents.vouched:
        text += (
            f" (the samples shown); the other {contents.vouched} vouched for by their signed journal lines (each "
            f"summary's size checked, not its bytes): `imagebench report {run.run_dir} --check-all` reads and checks "
            "every one"
        )
    return text


def page_view(run: RunPage, *, image_prefix: str = "", prefix: str = "") -> dict[str, Any]:
    """Everything the template prints, as text and numbers (``image_prefix`` goes before each
    image's path relative to the run folder; ``prefix`` before each id of the page, a subject's
    own on a sitting's page)."""
    ordered = _order(run.cases)
    return {
        "prefix": prefix,
        "head": _head(run),
        "figures": _figures(run),
        "coverage": _coverage(run),
        "results": _results(run, ordered),
        "cases": [_case_section(run, v, image_prefix) for v in ordered],
        "receipt": _receipt(run),
        "integrity": _integrity(run),
    }


def _integrity(run: RunPage) -> dict[str, Any]:
    """Whether the run folder checks out as a whole (:attr:`imagebench.runs.reader.RunContents.integrity`)."""
    contents = run.contents
    problems = _capped(list(contents.integrity)) if contents is not None else []
    reruns = _capped(list(contents.reruns)) if contents is not None else []
    return {"forged": bool(contents is not None and contents.forged), "problems": problems, "reruns": reruns}


# --------------------------------------------------------------------------- rendering


@functools.cache
def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("imagebench", "templates"),
        autoescape=True,  # every value from the run is escaped; the template marks nothing safe
        undefined=jinja2.StrictUndefined,  # a name the view-model lacks is an error, not a blank
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(run: RunPage, *, image_prefix: str = "") -> str:
    """The page for ``run`` as one HTML string."""
    return _environment().get_template(TEMPLATE_NAME).render(page_view(run, image_prefix=image_prefix))


def write_html_report(
    run_dir: str | Path, *, out: str | Path | None = None, progress: bool = False, check_all: bool = False
) -> Path:
    """Write ``<run_dir>/report.html`` (or ``out``) atomically and return its path; for a sitting
    (:mod:`imagebench.runs.sitting`) the one page over all its subjects (:func:`read_sitting_page`).

    Image paths are relative to the run folder; with ``out`` elsewhere they are made relative
    to ``out``'s folder so the page still finds them.
    """
    from imagebench.runs.sitting import is_sitting

    if is_sitting(run_dir):
        return write_page(read_sitting_page(run_dir, progress=progress), out=out)
    return write_page(read_page(run_dir, progress=progress, check_all=check_all), out=out)


def write_page(run: RunPage | SittingPage, *, out: str | Path | None = None) -> Path:
    """Write the page of a run (or a sitting) already read (:func:`read_page`,
    :func:`read_sitting_page`); see :func:`write_html_report`."""
    import os

    from imagebench.records import atomic_write_text

    target = Path(out) if out is not None else run.run_dir / REPORT_NAME
    prefix = ""
    if target.parent.resolve() != run.run_dir.resolve():
        prefix = Path(os.path.relpath(run.run_dir.resolve(), target.parent.resolve())).as_posix() + "/"
    if isinstance(run, SittingPage):
        view = sitting_view(run, image_prefix=prefix)
        return atomic_write_text(target, _environment().get_template(SITTING_TEMPLATE).render(view))
    return atomic_write_text(target, render(run, image_prefix=prefix))


def case_report_name(label: str, page: int) -> str:
    """``report-<case>-p<page>.html``: the file of one page of a case's samples, beside ``report.html``."""
    from imagebench.runs.layout import safe_name

    return f"report-{safe_name(label.replace('/', '--'), 'case')}-p{page}.html"


def read_case_page(run_dir: str | Path, label: str, *, page: int = 1, check_all: bool = False) -> RunPage:
    """The page of one case's samples, :data:`CASE_PAGE` a page (``page`` from 1): the per-sample
    detail the run's page leaves out of a case with many samples, written on demand. The run is
    read as for its page (every record checked, in bounded memory); ReportError names a case the
    run does not have or a page beyond its last."""
    from imagebench.runs.brief import Briefs
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.reader import read_run

    if page < 1:
        raise ReportError(f"--page: expected a page number from 1, got {page}")
    known = _known_cases()
    briefs = Briefs(window=range((page - 1) * CASE_PAGE, page * CASE_PAGE), only=label, check_all=check_all)
    try:
        contents = read_run(run_dir, expected=_expected_of(known), on_sample=briefs.take, wants=briefs.wants)
    except RunFolderError as exc:
        raise ReportError(str(exc)) from None
    if label not in contents.record.cases:
        raise ReportError(f"{Path(run_dir) / 'run.json'}: field 'cases' has no case {label!r} (--case)")
    run = page_of(contents, known, briefs=briefs)
    run.cases = [v for v in run.cases if v.label == label]
    total = run.cases[0].total
    pages = max(1, -(-total // CASE_PAGE))
    if page > pages:
        raise ReportError(f"--page: case {label} has {total} usable sample(s) on {pages} page(s); got page {page}")
    run.record = run.record.model_copy(update={"cases": [label]})
    _aggregate(run)
    return run


def write_case_report(run_dir: str | Path, label: str, *, page: int = 1, out: str | Path | None = None) -> Path:
    """Write :func:`read_case_page` to ``out`` or beside ``report.html`` (:func:`case_report_name`)."""
    run = read_case_page(run_dir, label, page=page)
    return write_page(run, out=out if out is not None else run.run_dir / case_report_name(label, page))


# --------------------------------------------------------------------------- a sitting's page

SITTING_TEMPLATE = "sitting.html.j2"  # in imagebench/templates


@dataclass
class SittingPage:
    """The page of a sitting (:mod:`imagebench.runs.sitting`): each subject's run as its own page
    shows it, one after the other, under what the sitting says of them all."""

    run_dir: Path  # the sitting's folder
    contents: Any  # imagebench.runs.sitting.SittingContents
    runs: list[tuple[str, RunPage]] = field(default_factory=list)  # (subject, its run's page), as they joined


def read_sitting_page(path: str | Path, *, progress: bool = False) -> SittingPage:
    """Every run of a sitting read for its page, through :func:`imagebench.runs.sitting.read_sitting`
    (which reads each with the one checked reader); ReportError for a sitting that cannot be read."""
    from imagebench.runs.layout import RunFolderError
    from imagebench.runs.sitting import read_sitting

    known = _known_cases()
    try:
        contents = read_sitting(path, expected=_expected_of(known))
    except RunFolderError as exc:
        raise ReportError(str(exc)) from None
    pages = [(subject, page_of(run, known, progress=progress)) for subject, run in contents.runs.items()]
    return SittingPage(run_dir=Path(path), contents=contents, runs=pages)


def sitting_view(page: SittingPage, *, image_prefix: str = "") -> dict[str, Any]:
    """What the sitting's template prints: the sitting, a row per subject (how it was held, its
    verdicts), and each subject's run as its own page would show it (ids prefixed ``s<n>-``)."""
    rec = page.contents.record
    subjects = []
    for n, (subject, run) in enumerate(page.runs, start=1):
        verdicts = [v.verdict for v in run.cases]
        contents = run.contents
        checked = "forged" if contents.forged else ("verified" if contents.verified else "cannot be verified here")
        subjects.append(
            {
                "subject": subject,
                "prefix": f"s{n}-",
                "run": run.run_dir.name,
                "sandbox": _sandbox_text(run.record),
                "cases": f"{len(verdicts)} ({verdicts.count('fail')} failed, {verdicts.count('pass')} passed)",
                "samples": str(sum(v.total for v in run.cases)),
                "checked": checked,
                "view": page_view(run, image_prefix=f"{image_prefix}{run.run_dir.name}/", prefix=f"s{n}-"),
            }
        )
    rows = [
        ("sitting", rec.sitting_id),
        ("source", rec.source),
        ("started", rec.started),
        ("subjects", str(len(subjects))),
    ]
    problems = list(page.contents.integrity)
    return {
        "sitting": {"id": rec.sitting_id, "rows": rows},
        "subjects": subjects,
        "integrity": {"forged": page.contents.forged, "problems": problems},
    }
