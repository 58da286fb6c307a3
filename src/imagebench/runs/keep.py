"""What a run keeps of each sample's images: ``imagebench run --artifacts all|failures|none``.

A sample's images (the verifier's PNGs and the ``.npy`` values beside them, about 32 KB a sample
for a small case) are what makes a run folder grow with its samples. The mode is chosen once per
run and kept in ``run.json`` (``extra["artifacts"]``: the mode, what was asked, and why), which the
start line signs and the report shows:

- ``all``: every sample keeps its images;
- ``failures``: a sample keeps its images when it did not pass (any status but ``ok``), and the
  first :data:`PASSING_KEPT` samples of each case keep theirs whatever their status (a sample of
  what passing looks like);
- ``none``: no sample keeps its images.

Not asked (``auto``), a run keeps ``all`` when it has at most :data:`LARGE_RUN` units (cases x
samples) and ``failures`` above: a run is *large* when it has more than 1,000 units.

Only images go: ``stdout.txt``, ``stderr.txt``, a transcript and every ``.error`` file stay (they
are what a person needs to see why a sample ended as it did). The images of a sample that does
not keep them are removed before its journal line is written, and its summary is written again
(atomically) without them: ``artifacts`` empty, ``artifact_digests`` over what stays and
``detail["images"]`` saying why, so the reader holds the folder to what it kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from imagebench.records import SampleSummary

Mode = Literal["all", "failures", "none"]
MODES: tuple[str, ...] = ("all", "failures", "none")
ASKED: tuple[str, ...] = ("auto", *MODES)
#: Above this many units (cases x samples) a run is large: ``auto`` keeps failures and a sample.
LARGE_RUN = 1000
#: Samples of each case (the first ones, sample 0 up) whose images ``failures`` keeps though they passed.
PASSING_KEPT = 3
#: ``run.json`` ``extra`` key of the mode.
KEY = "artifacts"
#: The suffixes of the files a sample that does not keep its images loses.
IMAGE_SUFFIXES = (".png", ".npy")


def choose(asked: str | None, units: int) -> dict[str, Any]:
    """``run.json``'s record of the mode: ``{"mode", "asked", "why"}``; ValueError naming the flag for
    a mode not in :data:`ASKED`."""
    asked = asked or "auto"
    if asked not in ASKED:
        raise ValueError(f"--artifacts: expected one of {', '.join(ASKED)}, got {asked!r}")
    if asked != "auto":
        return {"mode": asked, "asked": asked, "why": f"--artifacts {asked}"}
    if units > LARGE_RUN:
        why = (
            f"a large run ({units} units > {LARGE_RUN}): the images of every sample that did not pass, "
            f"and of the first {PASSING_KEPT} samples of each case"
        )
        return {"mode": "failures", "asked": "auto", "why": why}
    return {"mode": "all", "asked": "auto", "why": f"a small run ({units} units <= {LARGE_RUN}): every sample's images"}


def mode_of(extra: Mapping[str, Any] | None) -> str:
    """The mode a run's ``run.json`` ``extra`` records (``all`` for a run before the flag)."""
    raw = (extra or {}).get(KEY)
    mode = raw.get("mode") if isinstance(raw, Mapping) else None
    return mode if isinstance(mode, str) and mode in MODES else "all"


def keeps_images(mode: str, status: str, sample: int | None) -> bool:
    """Whether a sample of ``status`` (numbered from 0) keeps its images under ``mode``."""
    if mode == "all":
        return True
    if mode == "none":
        return False
    return status != "ok" or (sample is not None and sample < PASSING_KEPT)


def drop_images(path: Path, summary: SampleSummary, mode: str) -> tuple[SampleSummary, bytes]:
    """Remove the images beside the summary at ``path`` and write it again without them; returns
    the new summary and its bytes. Only regular files named in ``summary.artifacts`` (and their
    ``.npy`` values) whose suffix is an image's are removed: never a link, never anything else."""
    from imagebench.records import write_record
    from imagebench.runs.layout import artifact_digests

    folder = path.parent
    kept: list[str] = []
    for name in summary.artifacts:
        if not name.endswith(".png"):
            kept.append(name)  # an .error file says why an image could not be drawn: it stays
            continue
        stem = name[: -len(".png")]
        for other in (name, f"{stem}.npy"):
            target = folder / other
            if "/" not in other and target.is_file() and not target.is_symlink():
                target.unlink()
    detail = dict(summary.detail or {})
    detail.pop("artifact_range", None)
    detail["images"] = f"not kept (--artifacts {mode})"
    lean = summary.model_copy(
        update={"artifacts": kept, "artifact_digests": artifact_digests(folder), "detail": detail}
    )
    write_record(path, lean)
    return lean, path.read_bytes()
