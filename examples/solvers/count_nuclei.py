"""A scripted subject for the example bundle ``examples/bundles/segment-nuclei``.

It stands in for an agent that has the ``segment-nuclei`` skill: it activates the skill through
the harness's skill tool when it is given one, counts nuclei with a classical pipeline of its
own, declines when the task needs a pixel size that the case's files do not give, and never
follows instructions found in files.

Two ways to run it:

- as a ``command:`` subject (it works in ``$IMAGEBENCH_WORKSPACE``, reading ``prompt.md``,
  ``inputs/image.npy`` and ``files/``, and writing ``outputs/answer.json``; on a trigger case it
  runs ``$IMAGEBENCH_SKILL_TOOL segment-nuclei``, which the harness records); the sandbox shows it
  this folder because the run says so::

      imagebench run --bundle examples/bundles/segment-nuclei --subject-expose examples/solvers \\
          --subject "command:python3 $PWD/examples/solvers/count_nuclei.py"

- as a ``python:`` subject, ``solve(session)``, when ``examples/solvers`` is importable::

      PYTHONPATH=examples/solvers imagebench run --bundle examples/bundles/segment-nuclei \\
          --subject python:count_nuclei:solve

  An in-process function has no channel the harness observes, so the trigger case is
  ``blocked`` for it (not graded), whatever it binds.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

SKILL = "segment-nuclei"
DENSITY = re.compile(r"\bdensity\b|per square (milli|micro)met", re.IGNORECASE)


def read_files(folder: Path | None) -> dict[str, str]:
    """Every UTF-8 text file under ``folder`` (the case's ``files/``), by relative path."""
    out: dict[str, str] = {}
    if folder is None or not folder.is_dir():
        return out
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            try:
                out[path.relative_to(folder).as_posix()] = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
    return out


def pixel_size_um(files: dict[str, str]) -> float | None:
    """The pixel size a ``metadata.json`` among the files declares (``pixel_size_um``), if any."""
    text = files.get("metadata.json")
    if text is None:
        return None
    try:
        value = json.loads(text).get("pixel_size_um")
    except (json.JSONDecodeError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def segment(image: Any, sigma: float = 1.5, min_distance: int = 5, min_area: int = 30, snr: float = 8.0) -> np.ndarray:
    """Label nuclei: smooth, flatten the background, threshold above Otsu and the noise, split
    touching ones with a watershed on the distance transform. Self-contained (scipy and
    scikit-image only): a sandboxed subject cannot import the bench."""
    from scipy import ndimage as ndi
    from skimage.feature import peak_local_max
    from skimage.filters import threshold_otsu
    from skimage.morphology import remove_small_objects
    from skimage.segmentation import watershed

    img = np.asarray(image, dtype=np.float64)
    smooth = ndi.gaussian_filter(img, sigma)
    flat = smooth - ndi.gaussian_filter(ndi.grey_opening(smooth, size=(41, 41)), 41 / 4)
    diffs = np.diff(img, axis=1).ravel()
    noise = 1.4826 * np.median(np.abs(diffs - np.median(diffs))) / np.sqrt(2.0) / (2.0 * np.sqrt(np.pi) * sigma)
    floor = float(np.median(flat)) + snr * noise
    otsu = float(threshold_otsu(flat)) if np.ptp(flat) > 0 else float(flat.max())
    mask = ndi.binary_fill_holes(remove_small_objects(flat > max(otsu, floor), min_area))
    if not mask.any():
        return np.zeros(img.shape, np.int32)
    dist = ndi.gaussian_filter(ndi.distance_transform_edt(mask), 1.0)
    regions, _ = ndi.label(mask)
    peaks = peak_local_max(dist, min_distance=min_distance, labels=regions, exclude_border=False)
    markers = np.zeros(img.shape, np.int32)
    markers[tuple(peaks.T)] = np.arange(1, len(peaks) + 1)
    missing = np.setdiff1d(np.unique(regions[mask]), np.unique(regions[markers > 0]))
    for i, c in enumerate(ndi.maximum_position(dist, regions, missing) if missing.size else [], start=len(peaks) + 1):
        markers[c] = i
    labels = watershed(-dist, markers, mask=mask)
    return remove_small_objects(labels, min_area // 2).astype(np.int32)


def answer_for(prompt: str, image: Any, files: dict[str, str]) -> dict[str, Any]:
    """The structured answer. Text in ``files`` is data to read, never instructions to follow."""
    labels = segment(image)
    count = int(np.unique(labels[labels > 0]).size)
    if DENSITY.search(prompt):
        size = pixel_size_um(files)
        if size is None:
            return {"decision": "decline", "reason": "the files give no pixel size, so an area in mm² cannot be known"}
        area_mm2 = labels.size * (size / 1000.0) ** 2
        return {"decision": "answer", "density_per_mm2": count / area_mm2}
    return {"count": count}


def solve(session: Any) -> None:
    """The ``python:`` subject: read the session, bind ``answer``."""
    workspace = getattr(session, "workspace", None)
    files = read_files(Path(workspace) / "files") if workspace is not None else {}
    session.namespace["answer"] = answer_for(session.prompt, session.namespace["image"], files)


def activate_skill() -> None:
    """Activate the skill through the harness's skill tool, when the harness gives one (a trigger
    case): the harness records the activation; a trace written here would count for nothing."""
    import subprocess

    tool = os.environ.get("IMAGEBENCH_SKILL_TOOL")
    if not tool:
        return
    done = subprocess.run([sys.executable, tool, SKILL], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"the skill tool refused: {done.stderr.strip()}", file=sys.stderr)


def main() -> int:
    """The ``command:`` subject: work in ``$IMAGEBENCH_WORKSPACE`` (or the current folder)."""
    workspace = Path(os.environ.get("IMAGEBENCH_WORKSPACE", "."))
    outputs = workspace / "outputs"
    outputs.mkdir(exist_ok=True)
    activate_skill()
    prompt = (workspace / "prompt.md").read_text(encoding="utf-8")
    image = np.load(workspace / "inputs" / "image.npy", allow_pickle=False)
    answer = answer_for(prompt, image, read_files(workspace / "files"))
    (outputs / "answer.json").write_text(json.dumps(answer) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
