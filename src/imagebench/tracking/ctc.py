"""The Cell Tracking Challenge (CTC) folder format: label movies and their lineage table.

A time-lapse is a label image over time (``T×Y×X`` or ``T×Z×Y×X``; 0 is background) and a
lineage table, one row per *track* (a label that lives over consecutive frames)::

    L B E P        label, first frame, last frame, parent label (0: none)

as the challenge's ``man_track.txt`` and ``res_track.txt`` hold it (Ulman et al. 2017, the
"Naming and file content conventions" of celltrackingchallenge.net). On disk::

    XX_GT/TRA/man_track000.tif ... man_track.txt   the reference markers and lineage
    XX_GT/SEG/man_seg000.tif ...                    reference segmentations of some frames
    XX_GT/SEG/man_seg_000_012.tif                   ... or of some slices (frame 0, z 12) of 3D data
    XX_RES/mask000.tif ... res_track.txt            a tracker's result

Frame numbers are read from the names (3 digits, 4 for sequences of 1000 frames or more) and must
run 0..T-1 without a hole. The rules a table must keep, checked by :func:`check_lineage` and
:func:`check_masks` (the challenge's own validator rejects a result that breaks any of them,
py-ctcmetrics' ``valid`` included):

* four integers a line; a label >= 1, begin >= 0, end >= begin, parent >= 0;
* labels unique; a parent is a track of the table and ends before its child begins;
* in every frame, the labels in the mask are exactly the tracks whose [begin, end] holds it
  (a label absent inside its span, or present outside it, is an error).

Every error is a :class:`CtcFormatError` naming the file, the line (or frame) and the field.
Writers are atomic: a reader sees the old file or the new one.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from imagebench.records import FrozenRecord, atomic_write_text

LINEAGE_VERSION = 1
TRACK_FIELDS = ("label", "begin", "end", "parent")

RESULT_MASK = re.compile(r"^mask(\d+)\.tiff?$")
TRA_MASK = re.compile(r"^man_track(\d+)\.tiff?$")
SEG_MASK = re.compile(r"^man_seg(\d+)\.tiff?$")
SEG_SLICE = re.compile(r"^man_seg_(\d+)_(\d+)\.tiff?$")


class CtcFormatError(ValueError):
    """A CTC file or folder that breaks the format: the message names the file, line or frame, and field."""


class Track(FrozenRecord):
    """One row of a lineage table: a label alive from ``begin`` to ``end`` (inclusive), and its parent."""

    label: int = Field(ge=1)
    begin: int = Field(ge=0)
    end: int = Field(ge=0)
    parent: int = Field(default=0, ge=0)


class Lineage(FrozenRecord):
    """A lineage table (``man_track.txt`` / ``res_track.txt``) as a value; :func:`check_lineage` holds its rules."""

    schema_version: Literal[1] = LINEAGE_VERSION
    tracks: tuple[Track, ...] = ()

    def by_label(self) -> dict[int, Track]:
        return {t.label: t for t in self.tracks}

    def children(self) -> dict[int, list[int]]:
        """parent label -> its children's labels, in table order."""
        out: dict[int, list[int]] = {}
        for t in self.tracks:
            if t.parent:
                out.setdefault(t.parent, []).append(t.label)
        return out

    def as_array(self) -> np.ndarray:
        """The table as an ``(n, 4)`` int64 array (label, begin, end, parent)."""
        rows = [(t.label, t.begin, t.end, t.parent) for t in self.tracks]
        return np.asarray(rows, dtype=np.int64).reshape(len(rows), 4)


@dataclass(frozen=True)
class TimeLapse:
    """A label movie (time first) and its lineage; built by the readers below, or by hand and then checked."""

    labels: np.ndarray
    lineage: Lineage

    @property
    def frames(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True)
class SegTruth:
    """Reference segmentation of one frame: the whole frame, or some of its z slices (``slices``)."""

    frame: int
    labels: np.ndarray
    slices: tuple[int, ...] | None = None


@dataclass(frozen=True)
class CtcTruth:
    """An ``XX_GT`` folder: the TRA markers and lineage, and the SEG frames there are (possibly none)."""

    tra: TimeLapse
    seg: tuple[SegTruth, ...] = field(default=())


# --------------------------------------------------------------------------- the lineage table


def parse_lineage(text: str, *, source: str = "<lineage>") -> Lineage:
    """A lineage table from its text (4 integers a line, blank lines ignored), checked by :func:`check_lineage`."""
    tracks: list[Track] = []
    lines: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        parts = raw.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise CtcFormatError(
                f"{source}: line {number}: {len(parts)} column(s) {raw.strip()!r}, expected 4 integers 'label begin end parent'"
            )
        values: list[int] = []
        for name, part in zip(TRACK_FIELDS, parts, strict=True):
            try:
                values.append(int(part))
            except ValueError:
                raise CtcFormatError(
                    f"{source}: line {number}: field {name!r} is {part!r}, expected an integer"
                ) from None
        label, begin, end, parent = values
        for name, value, low in (("label", label, 1), ("begin", begin, 0), ("end", end, 0), ("parent", parent, 0)):
            if value < low:
                raise CtcFormatError(
                    f"{source}: line {number}: field {name!r} is {value}, expected an integer >= {low}"
                )
        tracks.append(Track(label=label, begin=begin, end=end, parent=parent))
        lines.append(number)
    lineage = Lineage(tracks=tuple(tracks))
    check_lineage(lineage, source=source, lines=lines)
    return lineage


def check_lineage(lineage: Lineage, *, source: str = "<lineage>", lines: Sequence[int] | None = None) -> None:
    """Raise :class:`CtcFormatError` where the table breaks a rule of the format (see the module's docstring)."""
    where = list(lines) if lines is not None else list(range(1, len(lineage.tracks) + 1))
    seen: dict[int, int] = {}
    for track, number in zip(lineage.tracks, where, strict=True):
        if track.end < track.begin:
            raise CtcFormatError(
                f"{source}: line {number}: field 'end' is {track.end}, expected >= its begin {track.begin} (track {track.label})"
            )
        if track.label in seen:
            raise CtcFormatError(
                f"{source}: line {number}: field 'label' is {track.label}, already the label of line {seen[track.label]}; labels must be unique"
            )
        seen[track.label] = number
    tracks = lineage.by_label()
    for track, number in zip(lineage.tracks, where, strict=True):
        if not track.parent:
            continue
        parent = tracks.get(track.parent)
        if parent is None:
            raise CtcFormatError(
                f"{source}: line {number}: field 'parent' is {track.parent}, which is not a track of this table"
            )
        if parent.label == track.label:
            raise CtcFormatError(f"{source}: line {number}: field 'parent' is the track's own label {track.label}")
        if parent.end >= track.begin:
            raise CtcFormatError(
                f"{source}: line {number}: field 'parent' is {track.parent}, which ends at frame {parent.end}, "
                f"expected a parent that ends before its child begins (frame {track.begin})"
            )


def read_lineage(path: str | os.PathLike[str]) -> Lineage:
    """Read and check a ``man_track.txt`` / ``res_track.txt``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CtcFormatError(f"{path}: no such file (the lineage table)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CtcFormatError(f"{path}: cannot be read as text: {exc}") from None
    return parse_lineage(text, source=str(path))


def format_lineage(lineage: Lineage) -> str:
    """The table's text, one ``L B E P`` line a track separated by single spaces (as the challenge's tools read it)."""
    return "".join(f"{t.label} {t.begin} {t.end} {t.parent}\n" for t in lineage.tracks)


def write_lineage(path: str | os.PathLike[str], lineage: Lineage) -> Path:
    check_lineage(lineage, source=str(path))
    return atomic_write_text(path, format_lineage(lineage))


def lineage_from_labels(labels: np.ndarray, parents: Mapping[int, int] | None = None) -> Lineage:
    """The lineage of a label movie: each label's first and last frame, with the given parents (0 otherwise)."""
    parents = dict(parents or {})
    spans: dict[int, list[int]] = {}
    for t in range(labels.shape[0]):
        for label in present_labels(labels[t]).tolist():
            span = spans.setdefault(int(label), [t, t])
            span[1] = t
    unknown = sorted(set(parents) - set(spans))
    if unknown:
        raise CtcFormatError(f"parents: label(s) {unknown} never appear in the movie")
    tracks = tuple(Track(label=k, begin=b, end=e, parent=parents.get(k, 0)) for k, (b, e) in sorted(spans.items()))
    lineage = Lineage(tracks=tracks)
    check_lineage(lineage, source="parents")
    return lineage


# --------------------------------------------------------------------------- masks against the table


def present_labels(frame: np.ndarray) -> np.ndarray:
    """The non-zero labels in one frame, sorted (bincount when the labels are small, a sort otherwise)."""
    flat = frame.ravel()
    if flat.size == 0:
        return np.zeros(0, dtype=np.int64)
    top = int(flat.max())
    if top == 0:
        return np.zeros(0, dtype=np.int64)
    if top <= 4 * flat.size + 65536:
        counts = np.bincount(flat, minlength=top + 1)
        found = np.flatnonzero(counts)
    else:
        found = np.unique(flat)
    return found[found != 0].astype(np.int64)


def check_masks(movie: TimeLapse, *, source: str = "<masks>", names: Sequence[str] | None = None) -> None:
    """Raise :class:`CtcFormatError` unless every frame holds exactly the labels its table says are alive."""
    tracks = movie.lineage.tracks
    if tracks and max(t.end for t in tracks) >= movie.frames:
        last = max(tracks, key=lambda t: t.end)
        raise CtcFormatError(
            f"{source}: track {last.label} ends at frame {last.end}, but there are {movie.frames} frame(s) (0..{movie.frames - 1})"
        )
    alive: list[set[int]] = [set() for _ in range(movie.frames)]
    for t in tracks:
        for frame in range(t.begin, t.end + 1):
            alive[frame].add(t.label)
    for frame in range(movie.frames):
        found = set(present_labels(movie.labels[frame]).tolist())
        name = names[frame] if names is not None else f"frame {frame}"
        stray = sorted(found - alive[frame])
        if stray:
            spans = movie.lineage.by_label()
            why = "; ".join(
                f"label {k} is not in the table"
                if k not in spans
                else f"label {k}'s track spans frames {spans[k].begin}..{spans[k].end}"
                for k in stray[:5]
            )
            raise CtcFormatError(
                f"{source}: {name} (frame {frame}): label(s) {stray[:5]} outside their track's span ({why})"
            )
        missing = sorted(alive[frame] - found)
        if missing:
            raise CtcFormatError(
                f"{source}: {name} (frame {frame}): label(s) {missing[:5]} absent, but the table says their track is alive "
                "(a track may not have gaps: a cell that comes back is a new track whose parent is the old one)"
            )


# --------------------------------------------------------------------------- folders


def _numbered(folder: Path, pattern: re.Pattern[str]) -> dict[int, Path]:
    found: dict[int, Path] = {}
    for entry in sorted(folder.iterdir()):
        m = pattern.match(entry.name)
        if m is None or not entry.is_file():
            continue
        number = int(m.group(1))
        if number in found:
            raise CtcFormatError(f"{entry}: frame {number} is also {found[number].name}")
        found[number] = entry
    return found


def _contiguous(found: Mapping[int, Path], folder: Path, what: str) -> list[Path]:
    if not found:
        raise CtcFormatError(f"{folder}: no {what} files")
    numbers = sorted(found)
    holes = sorted(set(range(numbers[-1] + 1)) - set(numbers))
    if holes:
        raise CtcFormatError(
            f"{folder}: {what} frame(s) {holes[:5]} missing; frames must run 0..{numbers[-1]} without a hole"
        )
    return [found[n] for n in numbers]


def _read_label_image(path: Path) -> np.ndarray:
    import tifffile

    try:
        image = tifffile.imread(path)
    except Exception as exc:  # tifffile raises many kinds for a broken file
        raise CtcFormatError(f"{path}: not a readable TIFF ({exc})") from None
    image = np.asarray(image)
    if image.dtype.kind not in "ui":
        raise CtcFormatError(f"{path}: pixel type {image.dtype}, expected an integer label image")
    if image.dtype.kind == "i" and image.size and int(image.min()) < 0:
        raise CtcFormatError(f"{path}: negative labels, expected labels >= 0")
    return image


def _stack(paths: Sequence[Path], folder: Path) -> np.ndarray:
    frames = [_read_label_image(p) for p in paths]
    shape = frames[0].shape
    for p, f in zip(paths, frames, strict=True):
        if f.shape != shape:
            raise CtcFormatError(f"{p}: shape {f.shape}, expected {shape} as {paths[0].name}")
        if f.ndim not in (2, 3):
            raise CtcFormatError(f"{p}: {f.ndim} dimension(s), expected a 2D (Y×X) or 3D (Z×Y×X) frame")
    dtype = np.result_type(*[f.dtype for f in frames])
    return np.stack(frames).astype(dtype, copy=False)


def read_result(folder: str | os.PathLike[str]) -> TimeLapse:
    """Read and check an ``XX_RES`` folder: ``mask*.tif`` and ``res_track.txt``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CtcFormatError(f"{folder}: not a folder (expected an XX_RES folder with mask*.tif and res_track.txt)")
    paths = _contiguous(_numbered(folder, RESULT_MASK), folder, "mask*.tif")
    track = folder / "res_track.txt"
    movie = TimeLapse(labels=_stack(paths, folder), lineage=read_lineage(track))
    check_masks(movie, source=str(track), names=[p.name for p in paths])
    return movie


def read_truth(folder: str | os.PathLike[str]) -> CtcTruth:
    """Read and check an ``XX_GT`` folder: ``TRA/man_track*.tif`` with ``TRA/man_track.txt``, and ``SEG/`` if there is one."""
    folder = Path(folder)
    tra_dir = folder / "TRA"
    if not tra_dir.is_dir():
        raise CtcFormatError(f"{folder}: no TRA folder (expected an XX_GT folder with TRA/ and SEG/)")
    paths = _contiguous(_numbered(tra_dir, TRA_MASK), tra_dir, "man_track*.tif")
    track = tra_dir / "man_track.txt"
    movie = TimeLapse(labels=_stack(paths, tra_dir), lineage=read_lineage(track))
    check_masks(movie, source=str(track), names=[p.name for p in paths])
    return CtcTruth(tra=movie, seg=_read_seg(folder / "SEG", movie))


def _read_seg(seg_dir: Path, movie: TimeLapse) -> tuple[SegTruth, ...]:
    if not seg_dir.is_dir():
        return ()
    frame_shape = movie.labels.shape[1:]
    out: list[SegTruth] = []
    whole = _numbered(seg_dir, SEG_MASK)
    for number, path in sorted(whole.items()):
        if number >= movie.frames:
            raise CtcFormatError(f"{path}: frame {number}, but the TRA movie has {movie.frames} frame(s)")
        image = _read_label_image(path)
        if image.shape != frame_shape:
            raise CtcFormatError(f"{path}: shape {image.shape}, expected a frame's shape {frame_shape}")
        out.append(SegTruth(frame=number, labels=image))
    slices: dict[int, dict[int, Path]] = {}
    for entry in sorted(seg_dir.iterdir()):
        m = SEG_SLICE.match(entry.name)
        if m and entry.is_file():
            slices.setdefault(int(m.group(1)), {})[int(m.group(2))] = entry
    for number, by_z in sorted(slices.items()):
        if number in whole:
            raise CtcFormatError(
                f"{by_z[min(by_z)]}: frame {number} has a whole-frame SEG file too ({whole[number].name})"
            )
        if number >= movie.frames:
            raise CtcFormatError(f"{by_z[min(by_z)]}: frame {number}, but the TRA movie has {movie.frames} frame(s)")
        if len(frame_shape) != 3:
            raise CtcFormatError(f"{by_z[min(by_z)]}: a slice of frame {number}, but the movie's frames are 2D")
        zs = tuple(sorted(by_z))
        planes = []
        for z in zs:
            image = _read_label_image(by_z[z])
            if z >= frame_shape[0] or image.shape != frame_shape[1:]:
                raise CtcFormatError(
                    f"{by_z[z]}: slice {z} of shape {image.shape}, expected z < {frame_shape[0]} and shape {frame_shape[1:]}"
                )
            planes.append(image)
        out.append(SegTruth(frame=number, labels=np.stack(planes), slices=zs))
    return tuple(sorted(out, key=lambda s: s.frame))


def _digits(frames: int) -> int:
    return max(3, len(str(max(frames - 1, 0))))


def _write_tiff(path: Path, image: np.ndarray) -> None:
    import tifffile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        tifffile.imwrite(tmp, image, compression=None)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _label_dtype(labels: np.ndarray) -> np.dtype:
    top = int(labels.max()) if labels.size else 0
    return np.dtype(np.uint16) if top < 1 << 16 else np.dtype(np.uint32)


def write_result(folder: str | os.PathLike[str], movie: TimeLapse) -> Path:
    """Write ``movie`` as an ``XX_RES`` folder (``mask000.tif`` ... and ``res_track.txt``), checked first."""
    folder = Path(folder)
    check_masks(movie, source=str(folder / "res_track.txt"))
    folder.mkdir(parents=True, exist_ok=True)
    dtype, digits = _label_dtype(movie.labels), _digits(movie.frames)
    for t in range(movie.frames):
        _write_tiff(folder / f"mask{t:0{digits}d}.tif", movie.labels[t].astype(dtype))
    write_lineage(folder / "res_track.txt", movie.lineage)
    return folder


def write_truth(folder: str | os.PathLike[str], truth: CtcTruth) -> Path:
    """Write ``truth`` as an ``XX_GT`` folder (``TRA/`` with ``man_track.txt``, ``SEG/`` when it has SEG frames)."""
    folder = Path(folder)
    movie = truth.tra
    check_masks(movie, source=str(folder / "TRA" / "man_track.txt"))
    (folder / "TRA").mkdir(parents=True, exist_ok=True)
    dtype, digits = _label_dtype(movie.labels), _digits(movie.frames)
    for t in range(movie.frames):
        _write_tiff(folder / "TRA" / f"man_track{t:0{digits}d}.tif", movie.labels[t].astype(dtype))
    write_lineage(folder / "TRA" / "man_track.txt", movie.lineage)
    if truth.seg:
        (folder / "SEG").mkdir(parents=True, exist_ok=True)
    for seg in truth.seg:
        if seg.slices is None:
            _write_tiff(
                folder / "SEG" / f"man_seg{seg.frame:0{digits}d}.tif", seg.labels.astype(_label_dtype(seg.labels))
            )
        else:
            for z, plane in zip(seg.slices, seg.labels, strict=True):
                _write_tiff(
                    folder / "SEG" / f"man_seg_{seg.frame:0{digits}d}_{z:03d}.tif",
                    plane.astype(_label_dtype(seg.labels)),
                )
    return folder
