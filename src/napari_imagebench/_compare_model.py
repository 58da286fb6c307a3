"""Two runs side by side: the Compare tab's model, Qt-free.

Two run folders are picked (a folder each, or two of the panel's own run folders of this
sitting), each read through the one checked reader as ``imagebench compare`` reads it
(:func:`imagebench.suite.compare.load_run`, over :func:`imagebench.runs.reader.read_run`). A run
folder that does not check out (a forged journal or summary, a journal this state folder cannot
verify) is refused, each reason named as ``imagebench compare`` names it, and never shown.

Per case both runs hold, and per sample index both hold (compare pairs samples by ``(case,
sample)``), :meth:`CompareModel.side_by_side` lays the two samples' artifacts (what each subject
left, as its verifier drew it, beside the truth) out in rows of three: A, B, and A - B. Every grey
pane of both sides shares one contrast range (:func:`napari_imagebench._artifacts.artifact_layer_data`),
the difference pane has its own range symmetric about zero and a diverging colormap, black where
the two agree (:data:`LEGEND`). The compare table is :func:`imagebench.suite.compare.compare_runs`'s
result, as the command gets it (the suite file looked up by what run A recorded): the conditions
C1-C4 and, only when all hold, the paired outcomes per case with their discordant replicates.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_imagebench._artifacts import ARTIFACT_KEY, artifact_layer_data, difference_layer_data, sample_pngs
from napari_imagebench._base import Level
from napari_imagebench._explain import sample_number
from napari_imagebench._runs import ResultRow

if TYPE_CHECKING:
    from imagebench.records import SampleSummary
    from imagebench.suite.compare import LoadedRun
    from imagebench.suite.comparison import Comparison
    from napari_imagebench._layers import LayerData

SIDES = ("A", "B")
DIFFERENCE = "A − B"
#: metadata key of a compare pane: its side ("A", "B" or :data:`DIFFERENCE`) and artifact
COMPARE_KEY = "imagebench_compare"
#: A - B: magenta where B is higher, black where the two agree, green where A is higher
DIFFERENCE_COLORS = ((0.9, 0.25, 0.9, 1.0), (0.0, 0.0, 0.0, 1.0), (0.25, 0.85, 0.35, 1.0))
DIFFERENCE_COLORMAP: dict[str, Any] = {"name": "imagebench A-B", "colors": [list(c) for c in DIFFERENCE_COLORS]}
LEGEND = "A − B: green where A is higher, magenta where B is higher, black where they agree"
CONDITION_COLUMNS = ("", "condition", "holds", "why / notes")
CASE_COLUMNS = ("case", "pairs", "fixtures", "pass A", "pass B", "diff (B − A)", "better in A", "better in B", "metrics")


@dataclass(frozen=True)
class ComparedRun:
    """One side: the run folder as ``imagebench compare`` loads it (``run``, a ``LoadedRun``)."""

    name: str  # "A" or "B"
    folder: Path
    run: LoadedRun

    @property
    def subject(self) -> str:
        return str(self.run.record.subject)

    @property
    def title(self) -> str:
        return f"{self.name}: {self.subject} ({self.folder.name})"

    def samples(self, label: str) -> dict[int, SampleSummary]:
        """The usable samples of ``label`` (each checked against its journal line), by index."""
        return dict(self.run.samples.get(label, {}))

    def sample_dir(self, label: str, sample: int) -> Path:
        return Path(self.run.contents.units[(label, sample)].path).parent


@dataclass(frozen=True)
class Pane:
    """One pane of the grid: its side, the artifact it shows, its title; ``present`` is False for
    a placeholder (the side left no such image)."""

    side: str
    artifact: str
    name: str
    present: bool = True


@dataclass(frozen=True)
class SideBySide:
    """What :meth:`CompareModel.side_by_side` lays out: ``layers`` and ``panes`` in grid order,
    ``columns`` per row (A, B, A - B), the shared range of the grey panes, notes in words."""

    label: str
    sample: int
    layers: tuple[LayerData, ...]
    panes: tuple[Pane, ...]
    summaries: dict[str, SampleSummary]
    contrast: tuple[float, float] | None
    notes: tuple[str, ...] = ()
    columns: int = 3
    legend: str = LEGEND

    @property
    def rows(self) -> int:
        return len(self.panes) // self.columns


@dataclass(frozen=True)
class Enabled:
    """A control's state: enabled or not, and its tooltip (what it does, or why it cannot now)."""

    enabled: bool
    why: str


@dataclass
class CompareModel:
    """The two runs picked, their refusals, the side-by-side panes and the compare table.

    ``sitting`` lists the panel's run folders of this sitting; ``notify`` hears each refusal;
    ``shown`` is told each sample whose artifacts are put on the viewer (they may show the truth
    of the case a person is working: the façade flags later samples ``saw-artifacts``)."""

    sitting: Callable[[], Sequence[Path]] = list
    notify: Callable[[Level, str], Any] | None = None
    shown: Callable[[ResultRow], Any] | None = None
    suites_dir: str | os.PathLike[str] | None = None
    seed: int = 0
    resamples: int = 2000
    runs: dict[str, ComparedRun] = field(default_factory=dict)
    refused: dict[str, list[str]] = field(default_factory=dict)
    picked: list[Path] = field(default_factory=list)  # folders picked by hand, offered again
    _comparison: Comparison | None = field(default=None, repr=False)

    # ---------------------------------------------------------------- picking the runs

    def choices(self) -> list[tuple[str, Path]]:
        """``(text, folder)`` for the run folders on offer: this sitting's, then those picked by hand."""
        from imagebench.runs.layout import RunFolderError
        from imagebench.runs.reader import read_record_of_run

        out: list[tuple[str, Path]] = []
        for folder in dict.fromkeys([*map(Path, self.sitting()), *self.picked]):
            try:
                subject = read_record_of_run(folder).subject
            except RunFolderError:
                continue
            out.append((f"{subject} · {folder.name}", folder))
        return out

    def set_run(self, side: str, path: str | os.PathLike[str]) -> ComparedRun | None:
        """Read run folder ``path`` (or its ``run.json``) as side ``side``; None, with the reasons in
        :attr:`refused` (and told), when it is not readable or does not check out."""
        from imagebench.runs.fingerprint import scrub
        from imagebench.suite.compare import load_run

        if side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {side!r}")
        self.runs.pop(side, None)
        self.refused.pop(side, None)
        self._comparison = None
        loaded, problems = load_run(path, side)
        if loaded is not None:  # the words of compare_runs: a folder that does not check out is never compared
            problems = [
                f"run {side} {'is forged' if loaded.contents.forged else 'cannot be verified'}: {scrub(p)}"
                for p in loaded.contents.integrity
            ]
        if loaded is None or problems:
            self.refused[side] = [*problems, f"run {side} is refused: a run folder that does not check out is never shown"]
            if self.notify is not None:
                self.notify("warning", "; ".join(self.refused[side]))
            return None
        run = self.runs[side] = ComparedRun(side, loaded.folder, loaded)
        if run.folder not in self.picked and run.folder not in map(Path, self.sitting()):
            self.picked.append(run.folder)
        return run

    def clear(self, side: str) -> None:
        self.runs.pop(side, None)
        self.refused.pop(side, None)
        self._comparison = None

    @property
    def ready(self) -> bool:
        return all(side in self.runs for side in SIDES)

    def status(self) -> list[str]:
        """One line per side: its subject and folder, or why it was refused, or that none is picked."""
        lines = []
        for side in SIDES:
            if side in self.runs:
                lines.append(self.runs[side].title)
            elif side in self.refused:
                lines.extend(self.refused[side])
            else:
                lines.append(f"{side}: pick a run folder")
        return lines

    # ---------------------------------------------------------------- cases and samples

    def cases(self) -> list[str]:
        """The cases both runs hold a usable sample of, at one index (in run A's order)."""
        if not self.ready:
            return []
        a, b = self.runs["A"], self.runs["B"]
        return [label for label in a.run.samples if set(a.samples(label)) & set(b.samples(label))]

    def samples(self, label: str) -> list[int]:
        """The sample indices of ``label`` both runs hold a usable summary of."""
        if not self.ready:
            return []
        return sorted(set(self.runs["A"].samples(label)) & set(self.runs["B"].samples(label)))

    def controls(self, comparing: bool, label: str | None) -> dict[str, Enabled]:
        """Whether Side by side and Back can act now, and why (the tab only draws it)."""
        if not self.ready:
            missing = ", ".join(side for side in SIDES if side not in self.runs)
            show = Enabled(False, f"pick run folder {missing} first (a refused one says why above)")
        elif not self.cases():
            show = Enabled(False, "the two runs hold no case at a common sample: nothing to lay side by side")
        elif label is None:
            show = Enabled(False, "choose a case both runs hold")
        else:
            show = Enabled(True, "both samples' artifacts in one grid, one contrast range, and A − B beside them")
        back = Enabled(comparing, "remove the compare panes and show the layers as they were")
        return {"show": show, "back": back}

    # ---------------------------------------------------------------- the panes

    def side_by_side(self, label: str, sample: int) -> SideBySide:
        """The panes of ``label``'s sample ``sample`` in both runs, in rows of A, B and A - B."""
        if sample not in self.samples(label):
            raise ValueError(f"{label} sample {sample}: not a sample both runs hold ({self.samples(label)})")
        runs = [self.runs[side] for side in SIDES]
        summaries = {run.name: run.samples(label)[sample] for run in runs}
        dirs = {run.name: run.sample_dir(label, sample) for run in runs}
        pngs = {run.name: sample_pngs(dirs[run.name]) for run in runs}
        datas = artifact_layer_data([*pngs["A"], *pngs["B"]])  # ONE range for every grey pane of both
        split = len(pngs["A"])
        by_side = {
            "A": {Path(d[1]["metadata"][ARTIFACT_KEY]).stem: d for d in datas[:split]},
            "B": {Path(d[1]["metadata"][ARTIFACT_KEY]).stem: d for d in datas[split:]},
        }
        names = list(dict.fromkeys([*by_side["A"], *by_side["B"]]))
        layers: list[LayerData] = []
        panes: list[Pane] = []
        notes: list[str] = []
        for run in runs:
            summary = summaries[run.name]
            verdict = summary.status + (f" ({summary.reason})" if summary.reason and summary.status != "ok" else "")
            notes.append(f"{run.name} {run.subject} s{sample_number(sample)}: {verdict}" + ("" if pngs[run.name] else "; it left no images"))
        for stem in names:
            for run in runs:
                data = by_side[run.name].get(stem)
                title = f"{run.name} {run.subject} s{sample_number(sample)}: {stem}"
                if data is None:
                    title = f"{title} (none: {summaries[run.name].status})"
                    layers.append(_placeholder(title, run.name, stem))
                    panes.append(Pane(run.name, stem, title, present=False))
                    continue
                data[1]["name"] = title
                data[1]["metadata"][COMPARE_KEY] = {"side": run.name, "artifact": stem}
                layers.append(data)
                panes.append(Pane(run.name, stem, title))
            diff, why = self._difference(by_side["A"].get(stem), by_side["B"].get(stem), stem, sample)
            if diff is None:
                title = f"{DIFFERENCE} s{sample_number(sample)}: {stem} ({why})"
                layers.append(_placeholder(title, DIFFERENCE, stem))
                panes.append(Pane(DIFFERENCE, stem, title, present=False))
                notes.append(f"{stem}: no difference pane, {why}")
            else:
                layers.append(diff)
                panes.append(Pane(DIFFERENCE, stem, diff[1]["name"]))
                if not np.any(diff[0]):
                    notes.append(f"{stem}: identical in A and B")
        grey = [d[1]["contrast_limits"] for d in datas if not d[1].get("rgb")]
        contrast = (float(grey[0][0]), float(grey[0][1])) if grey else None
        for run in runs:
            if self.shown is not None and pngs[run.name]:
                self.shown(ResultRow.of(summaries[run.name], run.folder, dirs[run.name]))
        return SideBySide(label, sample, tuple(layers), tuple(panes), summaries, contrast, tuple(notes))

    @staticmethod
    def _difference(a: LayerData | None, b: LayerData | None, stem: str, sample: int) -> tuple[LayerData | None, str]:
        """A - B of one artifact as a pane (``difference_layer_data`` with B as the reference), or
        None and why there is none."""
        if a is None or b is None:
            return None, f"only {'A' if b is None else 'B'} has it"
        diff = difference_layer_data(b, a)
        if diff is None:
            same = np.shape(a[0]) == np.shape(b[0])
            return None, "a colour image" if same else f"shapes differ, A {np.shape(a[0])}, B {np.shape(b[0])}"
        values, kwargs, kind = diff
        identical = not np.any(values)
        kwargs["name"] = f"{DIFFERENCE} s{sample_number(sample)}: {stem}" + (" (identical)" if identical else "")
        kwargs["colormap"] = dict(DIFFERENCE_COLORMAP)
        kwargs["metadata"][COMPARE_KEY] = {"side": DIFFERENCE, "artifact": stem}
        return (values, kwargs, kind), ""

    # ---------------------------------------------------------------- the compare table

    def comparison(self) -> Comparison | None:
        """``imagebench compare A B``'s result (None until both runs are picked): the suite file is
        looked up by what run A recorded, as the command does."""
        if not self.ready:
            return None
        if self._comparison is None:
            from imagebench.suite.compare import compare_runs

            a, b = self.runs["A"], self.runs["B"]
            self._comparison = compare_runs(
                a.folder, b.folder, suite=self._recorded_suite(a.run), seed=self.seed, resamples=self.resamples
            )
        return self._comparison

    def _recorded_suite(self, run: LoadedRun) -> Any:
        """The suite file pinning what ``run`` recorded, when one is at hand (else None), as the
        command looks it up (a moved alias is never consulted)."""
        from imagebench.suite.model import SuiteError, find_suite_file, load_suite, suites_dir

        if run.info is None:
            return None
        ref = run.info.assignment.cohort.suite
        path = find_suite_file(ref.suite_id, ref.revision, suites_dir(self.suites_dir))
        try:
            return load_suite(path) if path.is_file() else None
        except SuiteError:
            return None

    def condition_rows(self) -> list[tuple[str, str, str, str]]:
        """C1..C4 as the command's comparability table: id, condition, holds, why and notes."""
        result = self.comparison()
        if result is None:
            return []
        return [
            (c.id, c.name, "yes" if c.holds else "no", "\n".join([*c.problems, *c.notes]) or "-")
            for c in result.conditions
        ]

    def case_rows(self) -> list[tuple[str, ...]]:
        """The paired outcomes per case (:data:`CASE_COLUMNS`) and an ``overall`` row; none unless
        the two runs are comparable."""
        result = self.comparison()
        if result is None or not result.comparable:
            return []
        rows: list[tuple[str, ...]] = []
        for c in result.cases:
            metrics = "; ".join(f"{m.metric}: {_f(m.mean_a)} / {_f(m.mean_b)}, {_f(m.diff)} {_ci(m.ci)}" for m in c.metrics)
            rows.append(_case_row(c.label, c.pairs, c.fixtures, c.passed_a, c.passed_b, c.rate_diff, c.only_a, c.only_b, metrics))
        o = result.overall
        if o is not None:
            rows.append(_case_row("overall", o.pairs, o.fixtures, o.passed_a, o.passed_b, o.rate_diff, o.only_a, o.only_b, ""))
        return rows

    def summary_lines(self) -> list[str]:
        """What the command prints around its tables: why it cannot compare, which conditions fail,
        the unmatched cases, the overall figures and McNemar's test."""
        result = self.comparison()
        if result is None:
            return []
        lines = [f"cannot compare: {p}" for p in result.problems]
        if result.problems:
            return lines
        if not result.comparable:
            failed = ", ".join(c.id for c in result.conditions if not c.holds)
            return [f"not comparable: {failed} fail; nothing was compared"]
        lines += [f"unmatched {u.label}: {u.reason} (not pooled)" for u in result.unmatched]
        o = result.overall
        if o is None:
            return [*lines, "no case has a scored pair of samples: nothing to compare"]
        test = (
            f"McNemar exact p = {o.mcnemar_p:.4g} over {o.fixtures} distinct fixtures"
            if o.mcnemar_p is not None
            else f"no test: {o.fixtures} distinct fixture(s) (samples of one fixture are one replicate)"
        )
        lines.append(
            f"overall ({result.direction}): pass rate A {o.rate_a:.3g}, B {o.rate_b:.3g}, diff {o.rate_diff:+.3g}; "
            f"discordant fixtures: {o.only_a} better in A, {o.only_b} better in B; {test}"
        )
        return lines


def _placeholder(title: str, side: str, stem: str) -> LayerData:
    """An empty pane holding a grid cell (an empty Points layer: no pixel pretends to be data)."""
    metadata = {ARTIFACT_KEY: f"none: {title}", COMPARE_KEY: {"side": side, "artifact": stem, "placeholder": True}}
    return np.empty((0, 2)), {"name": title, "metadata": metadata}, "points"


def _case_row(label: str, pairs: int, fixtures: int, pa: int, pb: int, diff: float, oa: int, ob: int, metrics: str) -> tuple[str, ...]:
    return (label, str(pairs), str(fixtures), f"{pa}/{pairs}", f"{pb}/{pairs}", f"{diff:+.3g}", str(oa), str(ob), metrics or "-")


def _f(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{_f(ci[0])}, {_f(ci[1])}]"
