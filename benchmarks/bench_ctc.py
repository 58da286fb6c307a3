"""Benchmark: TRA of imagebench.tracking against py-ctcmetrics on the same 200-frame movie.

Builds one reference movie (``imagebench.tracking.synthetic.disc_movie``: 256 x 256, ~30 moving
discs that divide) and a result made wrong on purpose (frames shifted by up to 2 px, 5% of the
detections dropped, 10% of the tracks cut and relabelled), writes them as CTC folders (``01_GT``
with ``TRA/``, ``01_RES``), then times, alternately over ``--repeats`` runs, the whole TRA
computation from the folders:

* imagebench: read and check both folders, the per-frame detection test, the AOGM counts, TRA;
* the anchor, py-ctcmetrics: ``evaluate_sequence(RES, GT, metrics=["TRA"], threads=1)`` (one
  process, as imagebench runs; it validates the result and matches every frame too).

Both must give the same TRA (to 1e-9). Prints the median wall time of each and the ratio
py-ctcmetrics / imagebench. py-ctcmetrics is a test dependency (``pip install -e .[test]``).
The folders are deleted afterwards.

Usage: python benchmarks/bench_ctc.py [--frames 200] [--size 256] [--cells 30] [--repeats 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

from imagebench.tracking import ctc
from imagebench.tracking.graph import build_matching
from imagebench.tracking.matching import ctc_matches, frame_overlap
from imagebench.tracking.metrics import aogm_counts, check_pair, tra
from imagebench.tracking.synthetic import disc_movie, tracks_from_labels


def make_result(truth: ctc.TimeLapse, seed: int) -> ctc.TimeLapse:
    import numpy as np

    rng = np.random.default_rng(seed)
    labels = truth.labels.copy()
    for t in range(labels.shape[0]):
        labels[t] = np.roll(labels[t], int(rng.integers(-2, 3)), axis=-1)
    top = int(labels.max()) + 1
    for track in truth.lineage.tracks:
        for t in range(track.begin, track.end + 1):
            if rng.random() < 0.05:
                labels[t][labels[t] == track.label] = 0
        if track.end > track.begin and rng.random() < 0.1:
            cut = int(rng.integers(track.begin + 1, track.end + 1))
            labels[cut : track.end + 1][labels[cut : track.end + 1] == track.label] = top
            top += 1
    return tracks_from_labels(labels, {t.label: t.parent for t in truth.lineage.tracks if t.parent})


def ours(res: Path, gt: Path) -> float:
    truth, result = ctc.read_truth(gt), ctc.read_result(res)
    check_pair(result, truth)
    frames = []
    for t in range(truth.tra.frames):
        ov = frame_overlap(truth.tra.labels[t], result.labels[t])
        pairs = ctc_matches(ov)
        frames.append(
            (ov.ref_labels, ov.comp_labels, ov.ref_labels[ov.ref_index[pairs]], ov.comp_labels[ov.comp_index[pairs]])
        )
    return tra(aogm_counts(build_matching(frames), truth.tra, result))


def peer(res: Path, gt: Path) -> float:
    from ctc_metrics import evaluate_sequence

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(evaluate_sequence(str(res), str(gt), metrics=["TRA"], threads=1)["TRA"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument(
        "--cells", type=int, default=30, help="at most this many cells a frame (half of them at the start)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    try:
        import ctc_metrics  # noqa: F401
    except ImportError:
        print("py-ctcmetrics is not installed (pip install -e .[test]); it is the anchor", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="bench-ctc-"))
    try:
        truth = disc_movie(
            seed=0,
            frames=args.frames,
            shape=(args.size, args.size),
            cells=args.cells // 2,
            cycle=(40, 80),
            arrivals=0.05,
            max_cells=args.cells,
            radius=7.0,
        )
        result = make_result(truth, seed=1)
        gt = ctc.write_truth(root / "01_GT", ctc.CtcTruth(tra=truth))
        res = ctc.write_result(root / "01_RES", result)
        divisions = sum(1 for kids in truth.lineage.children().values() if len(kids) >= 2)
        per_frame = sum(t.end - t.begin + 1 for t in truth.lineage.tracks) / truth.frames
        print(
            f"movie: {truth.frames} frames of {args.size}x{args.size}, {len(truth.lineage.tracks)} tracks, "
            f"{per_frame:.1f} cells a frame, {divisions} divisions"
        )
        times: dict[str, list[float]] = {"imagebench": [], "py-ctcmetrics": []}
        values: dict[str, float] = {}
        for _ in range(args.repeats):
            for name, func in (("imagebench", ours), ("py-ctcmetrics", peer)):
                start = time.perf_counter()
                values[name] = func(res, gt)
                times[name].append(time.perf_counter() - start)
        if abs(values["imagebench"] - values["py-ctcmetrics"]) > 1e-9:
            print(
                f"TRA differs: imagebench {values['imagebench']!r}, py-ctcmetrics {values['py-ctcmetrics']!r}",
                file=sys.stderr,
            )
            return 1
        mine, anchor = statistics.median(times["imagebench"]), statistics.median(times["py-ctcmetrics"])
        print(f"TRA = {values['imagebench']:.12f} (both)")
        print(f"imagebench     median {mine:.3f} s over {args.repeats}")
        print(
            f"py-ctcmetrics  median {anchor:.3f} s over {args.repeats} (evaluate_sequence, metrics=['TRA'], threads=1): the anchor"
        )
        print(f"ratio py-ctcmetrics / imagebench = {anchor / mine:.1f}x")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
