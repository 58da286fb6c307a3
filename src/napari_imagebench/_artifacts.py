"""Artifacts side by side: a sample's (or a run's) PNGs as image layers under ONE contrast range.

A verifier's images are meant to be compared with each other, so each sample's PNGs were
written with one shared range; here they are shown the same way. Every pane gets the contrast
limits :func:`imagebench.runs.artifacts.shared_range` computes over all of them, the layers are linked
so that moving one pane's contrast moves them all, and the viewer's grid mode lays them out
side by side. Scaling each pane on its own would stretch a near-zero difference image to full
range and make it look like a real signal. A verifier's own ``difference`` pane is signed: it is
drawn on the diverging map its PNG was drawn with, over the range symmetric about zero whose
half-width is the shared range's width (``imagebench.runs.artifacts.difference_range``).
"""

from __future__ import annotations

import stat
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_imagebench._canvas import remove_layers
from napari_imagebench._layers import LayerData

if TYPE_CHECKING:
    import napari

#: metadata key marking a layer as an artifact pane (value: the PNG's path)
ARTIFACT_KEY = "imagebench_artifact"
#: metadata key marking an artifact pane the panel computed (a difference), not a PNG of the sample
DIFFERENCE_KEY = "imagebench_difference"
#: metadata key marking a verifier's own difference pane: signed, on a diverging map over a range
#: symmetric about zero derived from the shared one, so not linked to the others
SIGNED_KEY = "imagebench_signed"
#: metadata key of a run folder's pane: its sample's label, subject, sample, status and reason
VERDICT_KEY = "imagebench_verdict"
#: metadata key of a layer the reader read from a fixture case folder's data: its case's label
CASE_DATA_KEY = "imagebench_case_data"
#: metadata key tagging the panes of one run folder read (see :func:`review_on_arrival`)
REVIEW_KEY = "imagebench_review"


#: The largest artifact file a pane is read from (a PNG, or the values kept beside it: the writer
#: keeps values up to ``imagebench.runs.artifacts.VALUES_MAX_BYTES``); a bigger one is not read.
PANE_MAX_BYTES = 64 * 1024 * 1024


def _readable(path: Path) -> bool:
    """A regular file (never a symbolic link) of at most :data:`PANE_MAX_BYTES`."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size <= PANE_MAX_BYTES


def sample_pngs(sample_dir: str | Path) -> list[Path]:
    """The PNG artifacts of one sample folder: those its summary lists, else every ``*.png`` there;
    only plain file names in that folder (a summary naming a path elsewhere, ``..`` or a folder
    names nothing shown), regular files, not links, of a size a pane can hold."""
    from imagebench.records import RecordError, SampleSummary, read_record

    folder = Path(sample_dir)
    try:
        summary = read_record(folder / "summary.json", SampleSummary)
        names = [name for name in summary.artifacts if name.endswith(".png")]
    except RecordError:
        names = sorted(p.name for p in folder.glob("*.png"))
    plain = [name for name in names if name == Path(name).name and not name.startswith(".")]
    return [folder / name for name in plain if _readable(folder / name)]


@dataclass(frozen=True)
class ReviewSample:
    """One sample of a run folder that its journal vouches for: who, which case, its verdict, its PNGs."""

    label: str
    subject: str
    sample: int
    status: str
    reason: str
    pngs: tuple[Path, ...]
    checked: bool = True  # its run folder verified here (False: it cannot be, e.g. another machine's)

    @property
    def shown_status(self) -> str:
        """The status, or ``unverified <status>`` for a run folder this machine cannot verify."""
        return self.status if self.checked else f"unverified {self.status}"

    @property
    def verdict(self) -> str:
        """``ok`` or the status that failed it, with the reason when there is one."""
        return f"{self.shown_status} ({self.reason})" if self.reason and self.status != "ok" else self.shown_status


#: How :func:`run_samples` marks what it says of the whole run folder, not of one sample.
FOLDER_NOTE = "the run folder: "


def run_samples(run_dir: str | Path) -> tuple[list[ReviewSample], list[str]]:
    """Every usable sample of a run folder with its verdict and PNG artifacts, in a stable order,
    and the samples left out: the run folder's one reader checks each summary against the run's
    journal, and the journal against its key, so a summary changed (or written) after its run is
    named here and its images are not shown; a journal that does not verify is named first."""
    from imagebench.runs.reader import read_run

    contents = read_run(run_dir)  # RunFolderError names a missing or unreadable run.json / journal
    out: list[ReviewSample] = []
    # a forged or unverifiable run folder, named first (FOLDER_NOTE: not a sample)
    excluded: list[str] = [f"{FOLDER_NOTE}{p}" for p in contents.integrity]
    if contents.forged:  # nothing of a forged run is shown (as compare refuses it)
        return [], [*excluded, f"{FOLDER_NOTE}forged: none of its samples is shown"]
    checked = not contents.integrity  # else unverifiable here: each sample says so in its title
    for label in contents.labels:
        for entry in contents.entries(label):
            if entry.usable and entry.summary is not None:
                summary = entry.summary
                out.append(
                    ReviewSample(
                        label=label,
                        subject=summary.subject,
                        sample=entry.sample,
                        status=summary.status,
                        reason=summary.reason,
                        pngs=tuple(sample_pngs(entry.path.parent)),
                        checked=checked,
                    )
                )
            elif entry.summary is not None or entry.path.exists():
                excluded.append(f"{label} sample {entry.sample}: {entry.problem}")
    return out, excluded


def review_layer_data(samples: Sequence[ReviewSample], *, with_subject: bool = False) -> list[LayerData]:
    """The artifact panes of ``samples``, one contrast range for every grey one (as
    :func:`artifact_layer_data`), each titled ``<case label> s<n> [<status>]: <artifact>`` (``n``
    from 1, as the panel counts; ``<subject> · `` first when ``with_subject``: a sitting's runs) and
    carrying its sample's verdict under :data:`VERDICT_KEY` in its metadata."""
    from napari_imagebench._explain import sample_number

    owners = [(sample, png) for sample in samples for png in sample.pngs]
    datas = artifact_layer_data([png for _, png in owners])
    for (sample, png), (_, kwargs, _) in zip(owners, datas, strict=True):
        who = f"{sample.subject} · " if with_subject else ""
        kwargs["name"] = f"{who}{sample.label} s{sample_number(sample.sample)} [{sample.shown_status}]: {png.stem}"
        kwargs["metadata"][VERDICT_KEY] = {
            "label": sample.label,
            "subject": sample.subject,
            "sample": sample.sample,
            "status": sample.status,
            "reason": sample.reason,
            "verified": sample.checked,
        }
    return datas


def verdict_lines(samples: Sequence[ReviewSample], *, with_subject: bool = False) -> list[str]:
    """One line per sample: ``<case label> s<n>: <verdict>`` (``n`` from 1)."""
    from napari_imagebench._explain import sample_number

    return [
        f"{f'{s.subject} · ' if with_subject else ''}{s.label} s{sample_number(s.sample)}: {s.verdict}" for s in samples
    ]


def artifact_layer_data(
    paths: Sequence[Path],
    *,
    relative_to: Path | None = None,
    prefix: str = "",
    colormaps: Mapping[str, str] | None = None,
) -> list[LayerData]:
    """Image layer data for ``paths`` with one contrast range shared by every pane; a grey pane
    named after one of the case's channels keeps that channel's colormap (``colormaps``: artifact
    name -> colormap, :func:`napari_imagebench._layers.case_colormaps`), any other is grey.

    A grey artifact whose values were kept beside its PNG (``<stem>.npy``, see
    :func:`imagebench.runs.artifacts.save_values`) is shown from those values, so hovering reads real
    numbers and the shared range is real (not 0..255); a colour one from its PNG. A pane is named
    ``prefix`` + the PNG's path below ``relative_to`` (without ``.png``), or ``prefix`` +
    ``<sample folder>/<stem>`` when no ``relative_to`` is given.
    """
    import imageio.v3 as iio

    from imagebench.runs.artifacts import DIFFERENCE_COLORS, difference_range, is_difference, shared_range

    images: list[tuple[Path, Any]] = []
    for p in paths:
        values = p.with_suffix(".npy")
        if _readable(values):
            try:
                images.append((p, np.load(values, allow_pickle=False)))
                continue
            except (OSError, ValueError):
                pass  # the PNG still shows it
        images.append((p, iio.imread(p)))
    if not images:
        return []
    grey = [(p, img) for p, img in images if not (img.ndim == 3 and img.shape[-1] in (3, 4))]
    ranged = [img for p, img in grey if not is_difference(p.stem)] or [img for _, img in grey]
    lo, hi = shared_range(*ranged) if ranged else (0.0, 255.0)
    out: list[LayerData] = []
    for path, img in images:
        if relative_to is not None:
            name = path.relative_to(relative_to).with_suffix("").as_posix()
        else:
            name = f"{path.parent.name}/{path.stem}"
        name = prefix + name
        rgb = img.ndim == 3 and img.shape[-1] in (3, 4)
        kwargs: dict[str, Any] = {"name": name, "rgb": rgb, "metadata": {ARTIFACT_KEY: str(path)}}
        if not rgb and is_difference(path.stem):  # signed: the diverging map its PNG was drawn with
            kwargs["colormap"] = {"name": "imagebench difference", "colors": [[*c, 1.0] for c in DIFFERENCE_COLORS]}
            kwargs["contrast_limits"] = difference_range(lo, hi)
            kwargs["metadata"][SIGNED_KEY] = True
        elif not rgb:
            kwargs["colormap"] = (colormaps or {}).get(path.stem, "gray")
            kwargs["contrast_limits"] = (lo, hi)
        out.append((img, kwargs, "image"))
    return out


#: The first word of the artifact a pair is compared against (the truth, the raw input).
_REFERENCES = ("truth", "raw")


def compared_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """``(reference, other)`` artifact names that show the same thing two ways: ``truth_<x>`` and
    ``<leaving>_<x>``, or ``raw_<x>`` and ``corrected_<x>``; none when the verifier drew a
    ``difference`` of its own."""
    if any(name.split("_", 1)[0] == "difference" or name == "difference" for name in names):
        return []
    groups: dict[str, list[str]] = {}
    for name in names:
        head, sep, tail = name.partition("_")
        if sep:
            groups.setdefault(tail, []).append(name)
    pairs = []
    for members in groups.values():
        refs = [m for m in members if m.split("_", 1)[0] in _REFERENCES]
        if len(members) == 2 and len(refs) == 1:
            pairs.append((refs[0], next(m for m in members if m != refs[0])))
    return pairs


def difference_layer_data(reference: LayerData, other: LayerData) -> LayerData | None:
    """``other - reference`` as a pane of its own (a diverging colormap, a range symmetric about
    zero), or None when the two are not grey images of one shape."""
    a, b = np.asarray(reference[0]), np.asarray(other[0])
    if reference[1].get("rgb") or other[1].get("rgb") or a.shape != b.shape:
        return None
    diff = b.astype(np.float32) - a.astype(np.float32)
    span = float(np.nanmax(np.abs(diff))) if diff.size else 0.0
    span = span if np.isfinite(span) and span > 0 else 1.0
    # "<prefix>labels - truth": the pair's first words, short enough for the pane's title
    other_name, ref_name = other[1]["name"], reference[1]["name"]
    prefix, _, other_stem = other_name.rpartition(": ") if ": " in other_name else ("", "", other_name)
    ref_stem = ref_name.rsplit(": ", 1)[-1].rsplit("/", 1)[-1]
    other_stem = other_stem.rsplit("/", 1)[-1]
    name = f"{prefix + ': ' if prefix else ''}{other_stem.split('_')[0]} - {ref_stem.split('_')[0]}"
    kwargs = {
        "name": name,
        "colormap": "PiYG",
        "contrast_limits": (-span, span),
        "rgb": False,
        "metadata": {ARTIFACT_KEY: f"difference of {other[1]['metadata'][ARTIFACT_KEY]}", DIFFERENCE_KEY: True},
    }
    return diff, kwargs, "image"


def artifact_layers(viewer: napari.Viewer) -> list[Any]:
    return [layer for layer in viewer.layers if ARTIFACT_KEY in layer.metadata]


def show_artifacts(
    viewer: napari.Viewer,
    paths: Sequence[Path],
    *,
    relative_to: Path | None = None,
    prefix: str = "",
    colormaps: Mapping[str, str] | None = None,
    extra: Sequence[LayerData] = (),
) -> list[Any]:
    """Show ``paths`` as the viewer's artifact panes, side by side in grid mode, contrast linked,
    each pane titled with its name, plus a difference pane for each compared pair
    (:func:`compared_pairs`) and a pane for each of ``extra`` (a tracking sample's truth and answer
    tracks: layer data tagged under :data:`ARTIFACT_KEY`); every other layer is hidden meanwhile
    (see :func:`hide_others` and :func:`back_to_the_case`).

    Panes of the same PNGs left hidden by :func:`back_to_the_case` are shown again as they are
    (no texture is uploaded twice); panes of other PNGs are replaced.
    """
    from napari_imagebench._layers import add_layer_data

    wanted = [str(p) for p in paths] + [str(d[1]["metadata"][ARTIFACT_KEY]) for d in extra]
    present = [layer for layer in artifact_layers(viewer) if not layer.metadata.get(DIFFERENCE_KEY)]
    if [layer.metadata[ARTIFACT_KEY] for layer in present] == wanted and all(
        layer.name.startswith(prefix) for layer in present
    ):
        layers = artifact_layers(viewer)
        for layer in layers:
            layer.visible = True
        arrange_panes(viewer, layers, linked=[])  # still linked from when they were added
        return layers
    remove_layers(viewer, artifact_layers(viewer))
    datas = artifact_layer_data(paths, relative_to=relative_to, prefix=prefix, colormaps=colormaps)
    by_stem = {Path(d[1]["metadata"][ARTIFACT_KEY]).stem: d for d in datas}
    differences = [difference_layer_data(by_stem[a], by_stem[b]) for a, b in compared_pairs(list(by_stem))]
    layers = [add_layer_data(viewer, data) for data in datas]
    # linked; a difference pane (the verifier's or one computed here) keeps its own range
    grey = [layer for layer in layers if not layer.rgb and not layer.metadata.get(SIGNED_KEY)]
    layers += [add_layer_data(viewer, d) for d in differences if d is not None]
    layers += [add_layer_data(viewer, d) for d in extra]
    arrange_panes(viewer, layers, linked=grey)
    return layers


def arrange_panes(viewer: napari.Viewer, layers: Sequence[Any], *, linked: Sequence[Any]) -> None:
    """Lay ``layers`` out side by side in the viewer's grid mode, each pane titled with its layer's
    name, and link the contrast (and gamma) of ``linked``, so one range stays one range."""
    from napari.experimental import link_layers

    if len(linked) > 1:
        link_layers(list(linked), ("contrast_limits", "gamma"))
    for layer in layers:
        overlay = getattr(layer, "name_overlay", None)  # napari >= 0.6: the layer's name in its pane
        if overlay is not None:
            overlay.visible = True
    if layers:
        viewer_grid(viewer).enabled = True
        viewer.reset_view()


def review_on_arrival(datas: Sequence[LayerData], notice: str) -> napari.Viewer | None:
    """Arrange a run folder's panes (:func:`arrange_panes`) once the viewer they were read for has
    added them, and say ``notice`` (each sample's verdict) as a notification then.

    An npe2 reader only returns layer data; napari adds the layers after it returns, and grid mode
    is the viewer's. So each pane is tagged with one token under :data:`REVIEW_KEY`, and the
    active viewer (``napari.current_viewer()``) is watched until every tagged pane is in its layer
    list; then it is arranged and the watch ends. Returns the viewer watched, None when there is
    none (the reader called without a viewer window, as npe2's ``read`` does headless): then the
    layer data is all there is, and ``notice`` is left to the caller.
    """
    if not datas or "napari._qt.qt_main_window" not in sys.modules:
        return None  # no viewer window was ever made in this process: nothing to arrange
    import napari

    viewer = napari.current_viewer()
    if viewer is None:
        return None
    token = uuid.uuid4().hex
    for _, kwargs, _ in datas:
        kwargs["metadata"][REVIEW_KEY] = token
    expected = len(datas)

    def arrived(_event: Any = None) -> None:
        panes = [layer for layer in viewer.layers if layer.metadata.get(REVIEW_KEY) == token]
        if len(panes) < expected:
            return
        viewer.layers.events.inserted.disconnect(arrived)
        arrange_panes(viewer, panes, linked=[layer for layer in panes if not layer.rgb])
        from napari.utils.notifications import show_info

        show_info(notice)

    viewer.layers.events.inserted.connect(arrived)
    return viewer


def hide_others(viewer: napari.Viewer) -> dict[str, bool]:
    """Hide every layer but the artifact panes; return ``{name: was visible}`` to restore them."""
    hidden: dict[str, bool] = {}
    for layer in viewer.layers:
        if ARTIFACT_KEY not in layer.metadata:
            hidden[layer.name] = bool(layer.visible)
            layer.visible = False
    return hidden


def back_to_the_case(viewer: napari.Viewer, visibility: dict[str, bool]) -> None:
    """Hide the artifact panes (kept for the next View of the same sample: removing a layer costs
    napari a full garbage collection and re-showing it a texture upload), leave grid mode and show
    the other layers as they were."""
    viewer_grid(viewer).enabled = False  # first: in grid mode each visibility change lays the grid out again
    for layer in artifact_layers(viewer):
        layer.visible = False
    for layer in viewer.layers:
        if layer.name in visibility:
            layer.visible = visibility[layer.name]
    viewer.reset_view()


def viewer_grid(viewer: napari.Viewer) -> Any:
    """The viewer's grid settings (``viewer.canvas.grid`` from napari 0.9, ``viewer.grid`` before)."""
    canvas = getattr(viewer, "canvas", None)
    grid = getattr(canvas, "grid", None)
    return grid if grid is not None else viewer.grid


def contrast_ranges(layers: Sequence[Any]) -> set[tuple[float, float]]:
    """The distinct contrast ranges of ``layers`` (one element when they share one)."""
    return {(float(layer.contrast_limits[0]), float(layer.contrast_limits[1])) for layer in layers}
