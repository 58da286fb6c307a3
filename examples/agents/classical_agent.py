"""A small scripted MCP agent: it works an imagebench case through the case server's tools only.

It connects with the MCP SDK's stdio client to the server named in ``mcp.json`` (the
``mcpServers`` configuration the harness writes into the workspace, or the bench panel's
"Serve to an agent" writes into its agent folder), reads the prompt, activates a skill the task
calls for, reads the ``nuclei`` (or ``image``) layer and solves by classical means:

- a ``labels`` leaving (``segment-nuclei/synthetic-blobs``): Gaussian smoothing, background
  flattening, an Otsu / noise-floor threshold, then a distance-transform watershed that splits
  touching nuclei; added with ``add_layer``;
- an ``answer`` with a ``count`` field (``segment-nuclei/count-nuclei``): Gaussian, Otsu,
  connected components of at least 12 pixels; given with ``set_answer``;
- a ``tracks`` leaving with its label movie (``tracking/moving-nuclei``): each frame of the
  ``movie`` segmented as above (smaller nuclei), the objects linked frame to frame by linear
  assignment on their centroids, a division where an unlinked object sits beside one that did
  link and both are smaller than the object before; the label movie added as a ``labels`` layer
  and the lineage table (label, first frame, last frame, parent) as a ``tracks`` layer, and a
  ``snapshot`` of a middle frame taken to look at the result.

Then it calls ``submit``. It never imports imagebench (the sandbox hides it) and writes no
files: what it leaves goes through the tools. Run it as a ``command:`` subject::

    imagebench run -k segment-nuclei/synthetic-blobs --subject-mcp --subject-expose examples/agents \\
        --subject "command:python3 $PWD/examples/agents/classical_agent.py"

or against a server started by the panel: ``python3 classical_agent.py --config <folder>/mcp.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

CLIENT_NAME = "classical-agent"


# --------------------------------------------------------------------------- the image analysis


def segment(
    image: np.ndarray, *, sigma: float = 1.5, min_distance: int = 5, min_area: int = 30, bg_size: int = 41
) -> np.ndarray:
    """One label per nucleus (int32, 0 = background)."""
    from scipy import ndimage as ndi
    from skimage.feature import peak_local_max
    from skimage.filters import threshold_otsu
    from skimage.segmentation import watershed

    img = np.asarray(image, dtype=np.float64)
    snr = 8.0
    smooth = ndi.gaussian_filter(img, sigma)
    flat = smooth - ndi.gaussian_filter(ndi.grey_opening(smooth, size=(bg_size, bg_size)), bg_size / 4)
    diffs = np.diff(img, axis=1).ravel()
    noise = 1.4826 * np.median(np.abs(diffs - np.median(diffs))) / np.sqrt(2.0) / (2.0 * np.sqrt(np.pi) * sigma)
    try:
        otsu = float(threshold_otsu(flat))
    except ValueError:
        otsu = float(flat.max())
    mask = flat > max(otsu, float(np.median(flat)) + snr * noise)
    mask = _drop_small(ndi.label(mask)[0], min_area) > 0
    mask = ndi.binary_fill_holes(mask)
    if not mask.any():
        return np.zeros(img.shape, np.int32)
    dist = ndi.gaussian_filter(ndi.distance_transform_edt(mask), 1.0)
    regions, _ = ndi.label(mask)
    peaks = peak_local_max(dist, min_distance=min_distance, labels=regions, exclude_border=False)
    markers = np.zeros(img.shape, np.int32)
    markers[tuple(peaks.T)] = np.arange(1, len(peaks) + 1)
    missing = np.setdiff1d(np.unique(regions[mask]), np.unique(regions[markers > 0]))
    if missing.size:
        for i, c in enumerate(ndi.maximum_position(dist, regions, missing), start=len(peaks) + 1):
            markers[c] = i
    labels = watershed(-dist, markers, mask=mask)
    return _drop_small(labels, min_area // 2).astype(np.int32)


def _drop_small(labels: np.ndarray, min_area: int) -> np.ndarray:
    if min_area <= 1 or not labels.any():
        return labels
    small = np.bincount(labels.ravel()) < min_area
    small[0] = False
    out = labels.copy()
    out[small[labels]] = 0
    return out


def track(movie: np.ndarray) -> tuple[np.ndarray, list[list[int]]]:
    """(label movie, lineage rows [label, begin, end, parent]) of a T×Y×X movie of nuclei."""
    from scipy import ndimage as ndi
    from scipy.optimize import linear_sum_assignment

    seg = np.stack([segment(f, sigma=1.0, min_distance=4, min_area=15, bg_size=31) for f in movie])
    out = np.zeros(seg.shape, np.int32)
    rows: dict[int, list[int]] = {}  # label -> [begin, end, parent]
    prev: list[tuple[int, float, float, float]] = []  # (track label, y, x, area) of the frame before
    for t in range(seg.shape[0]):
        ids = [int(k) for k in np.unique(seg[t]) if k]
        centres = ndi.center_of_mass(np.ones(seg[t].shape), seg[t], ids) if ids else []
        areas = ndi.sum_labels(np.ones(seg[t].shape), seg[t], ids) if ids else []
        cur = [(k, c[0], c[1], float(a)) for k, c, a in zip(ids, centres, areas)]
        link: dict[int, int] = {}  # current index -> previous index
        if prev and cur:
            d = np.hypot(*(np.subtract.outer([p[i] for p in prev], [c[i] for c in cur]) for i in (1, 2)))
            r, c = linear_sum_assignment(np.where(d <= 9, d**2, 1e9))
            link = {int(j): int(i) for i, j in zip(r, c) if d[i, j] <= 9}
        mothers: dict[int, list[int]] = {}
        for j, obj in enumerate(cur):
            if j in link or not prev:
                continue
            i = int(np.argmin([np.hypot(p[1] - obj[1], p[2] - obj[2]) for p in prev]))
            sister = next((k for k, v in link.items() if v == i), None)
            near = np.hypot(prev[i][1] - obj[1], prev[i][2] - obj[2]) <= 12
            if near and sister is not None and i not in mothers and max(obj[3], cur[sister][3]) < 0.85 * prev[i][3]:
                mothers[i] = [sister, j]
        labels: list[int] = []
        for j, obj in enumerate(cur):
            i = link.get(j)
            mother = next((m for m, kids in mothers.items() if j in kids), None)
            if i is not None and mother is None:
                label = prev[i][0]
                rows[label][1] = t
            else:
                label = len(rows) + 1
                rows[label] = [t, t, prev[mother][0] if mother is not None else 0]
            out[t][seg[t] == obj[0]] = label
            labels.append(label)
        prev = [(label, obj[1], obj[2], obj[3]) for label, obj in zip(labels, cur)]
    return out, [[k, b, e, p] for k, (b, e, p) in sorted(rows.items())]


def count(image: np.ndarray) -> int:
    """Separated nuclei: Gaussian, Otsu, components of at least 12 pixels."""
    from scipy import ndimage as ndi
    from skimage.filters import threshold_otsu

    smooth = ndi.gaussian_filter(np.asarray(image, dtype=np.float64), 1.0)
    labels, _ = ndi.label(smooth > threshold_otsu(smooth))
    return int(np.sum(np.bincount(labels.ravel())[1:] >= 12))


# --------------------------------------------------------------------------- working the case through the tools


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def _call(session: Any, tool: str, **args: Any) -> Any:
    result = await session.call_tool(tool, args)
    if result.isError:
        raise RuntimeError(f"{tool} failed: {_text(result)}")
    return json.loads(_text(result))


async def read(session: Any, name: str) -> np.ndarray:
    got = await _call(session, "read_layer", name=name, encoding="base64")
    raw = base64.b64decode(got["data"])
    return np.frombuffer(raw, dtype=np.dtype(got["dtype"])).reshape(got["shape"])


def choose_skill(task: str, names: list[str]) -> str | None:
    """The one skill this agent's work calls for: it segments and counts nuclei or cells, so a task
    about them gets the nuclei skill of its dimensionality (``-3d`` for a volume), the shortest
    such name. None for any other task (activating every skill offered is not choosing one)."""
    text = task.lower()
    if "track" in text:  # a time-lapse to track: the tracking skill, when one is offered
        return min((n for n in names if "track" in n), key=len, default=None)
    if not any(word in text for word in ("nucle", "cell")):
        return None
    volume = any(word in text for word in ("3d", "volume", "z-stack", "stack"))
    found = [n for n in names if "nucle" in n and "pick" not in n and "qc" not in n]
    found = [n for n in found if ("3d" in n) == volume] or found
    return min(found, key=len, default=None)


async def work(session: Any, log: Any) -> dict[str, Any]:
    prompt = await _call(session, "get_prompt")
    print(f"case {prompt['label']}: leave {[x['name'] for x in prompt['leave']]}", file=log)
    task = prompt["task"].lower()
    skills = (await _call(session, "list_skills"))["skills"]
    chosen = choose_skill(task, [skill["name"] for skill in skills])
    if chosen is not None:  # one skill, the one the task's words call for (activating them all is not choosing)
        await _call(session, "use_skill", name=chosen)
        print(f"activated skill {chosen}", file=log)
    inputs = [x["name"] for x in prompt["inputs"] if x["kind"] == "image"]
    image = await read(session, "nuclei" if "nuclei" in inputs else inputs[0])
    tracks = next((x for x in prompt["leave"] if x.get("kind") == "tracks"), None)
    if tracks is not None:  # a time-lapse: the label movie and its lineage table, then a look at them
        labels = next(x["name"] for x in prompt["leave"] if x.get("kind") == "labels")
        movie, table = track(image)
        await _call(session, "add_layer", name=labels, kind="labels", data=movie.tolist())
        await _call(session, "add_layer", name=tracks["name"], kind="tracks", data=table)
        shot = await session.call_tool("snapshot", {"frame": int(movie.shape[0]) // 2})
        print(f"tracked {len(table)} tracks over {movie.shape[0]} frames; snapshot {not shot.isError}", file=log)
        return await _call(session, "submit", note="classical segmentation and linear-assignment linking")
    for leaving in prompt["leave"]:
        name = leaving["name"]
        if leaving["what"] == "array" and leaving.get("kind") == "labels":
            labels = segment(image)
            await _call(session, "add_layer", name=name, kind="labels", data=labels.tolist())
            print(f"added labels layer {name!r} with {len(np.unique(labels)) - 1} objects", file=log)
        elif name == "answer" and "count" in (leaving.get("fields") or {"count": 1}):
            n = count(image)
            await _call(session, "set_answer", name=name, value={"count": n})
            print(f"answer count = {n}", file=log)
    return await _call(session, "submit", note="classical pipeline")


def server_params(config: Path) -> Any:
    from mcp import StdioServerParameters

    servers = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]
    entry = servers.get("imagebench") or next(iter(servers.values()))
    return StdioServerParameters(command=entry["command"], args=list(entry.get("args", [])), env=entry.get("env"))


async def main_async(config: Path) -> int:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client
    from mcp.types import Implementation

    async with stdio_client(server_params(config)) as (r, w):
        async with ClientSession(r, w, client_info=Implementation(name=CLIENT_NAME, version="1.0")) as session:
            await session.initialize()
            done = await work(session, sys.stderr)
    print(json.dumps(done))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(os.environ.get("IMAGEBENCH_WORKSPACE", ".")) / "mcp.json"
    p.add_argument("--config", type=Path, default=default, help="the mcp.json naming the case server")
    args = p.parse_args(argv)
    return asyncio.run(main_async(args.config))


if __name__ == "__main__":
    sys.exit(main())
