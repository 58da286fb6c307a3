"""Author the curated ``pick-a-nucleus/stardist-3d`` fixture from the StarDist wheel's 3D nuclei stack.

The question is "the largest nucleus touching no face of the stack", answered from the human
annotation alone (``mask3d.tif``): among the annotated nuclei none of whose voxels lies on a face,
the one with the most voxels; it must lead the next one by at least 1.5x, and the middle voxel of
the stack (the baseline's answer) must lie outside it. The stack (``img3d.tif``) is copied byte for
byte as the data; the truth is that nucleus's boolean mask (``largest_whole_nucleus.npy``).

Usage::

    python tools/author_pick_stardist.py [--out DIR] [--wheel path/to/stardist-*.whl]

Re-running it reproduces every file byte for byte.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))
if str(REPO / "src") not in sys.path:
    sys.path.append(str(REPO / "src"))

import sources  # noqa: E402
from author_nuclei3d_fixture import CITATION, MEMBERS, border_labels, check_pixels  # noqa: E402

DEFAULT_OUT = sources.DEFAULT_OUT
CASES: tuple[tuple[str, str], ...] = (("pick-a-nucleus", "stardist-3d"),)
#: the least lead of the largest whole nucleus over the next whole one for the question to be clear
MARGIN = 1.5



def main(argv: list[str] | None = None) -> int:
    args = sources.author_parser(__doc__, wheel=True).parse_args(argv)

    from imagebench.fixtures import tree

    wheel = args.wheel if args.wheel is not None else sources.stardist_wheel()
    raw = sources.stardist_members(MEMBERS, wheel)
    image, labels = check_pixels(raw)
    cut = border_labels(labels)
    ids, counts = np.unique(labels[labels > 0], return_counts=True)
    whole = sorted(((int(c), int(i)) for i, c in zip(ids, counts, strict=True) if int(i) not in cut), reverse=True)
    if len(whole) < 2:
        raise SystemExit("author: fewer than two annotated nuclei touch no face")
    (n_first, first), (n_second, second) = whole[0], whole[1]
    if n_first < MARGIN * n_second:
        raise SystemExit(f"author: the largest whole nucleus leads the next by only {n_first / n_second:.3f}x")
    mask = labels == first
    middle = tuple(s // 2 for s in labels.shape)
    if mask[middle]:
        raise SystemExit("author: the middle voxel of the stack lies inside the largest whole nucleus")

    source = (
        f"the stardist {sources.STARDIST_VERSION} wheel {wheel.name} (sha256 {sources.sha256(wheel.read_bytes())}), "
        "as read by stardist.data.test_image_nuclei_3d"
    )
    shape = "x".join(str(n) for n in image.shape)
    skill, case_id = CASES[0]
    folder = args.out / skill / case_id
    folder.mkdir(parents=True, exist_ok=True)
    name = Path(MEMBERS["image"]).name
    (folder / name).write_bytes(raw["image"])
    sources.save_npy(folder / "largest_whole_nucleus.npy", mask)
    tree.write_case_layout(
        args.out, skill, case_id,
        about=f"a real 3D stack ({shape}); truth: the largest annotated nucleus touching no face",
        data={"volume": name}, truth={"largest_whole_nucleus": "largest_whole_nucleus.npy"},
    )  # fmt: skip
    tree.write_manifest_entry(
        args.out, skill, case_id,
        provenance=(
            f"A 3D fluorescence stack of stained nuclei ({shape}, z y x, {image.dtype}) and its human instance "
            f"annotation from {source}. {MEMBERS['image']} (sha256 {sources.sha256(raw['image'])}) copied byte for "
            f"byte -> {name}. From {MEMBERS['labels']} (sha256 {sources.sha256(raw['labels'])}), read only here: "
            f"of {ids.size} annotated nuclei, {len(cut)} have a voxel on a face of the stack; of the {len(whole)} "
            f"others the largest, annotation label {first} ({n_first} voxels), leads the next, label {second} "
            f"({n_second} voxels), {n_first / n_second:.2f}x; its boolean mask -> largest_whole_nucleus.npy. The "
            f"middle voxel {list(middle)} lies outside it. Authored by tools/author_pick_stardist.py; the annotation "
            "itself was not re-reviewed here."
        ),
        citation=CITATION,
        files={name: ["volume"], "largest_whole_nucleus.npy": ["largest_whole_nucleus"]},
    )  # fmt: skip
    ok, why = tree.case_available(args.out, skill, case_id)
    if not ok:
        raise SystemExit(f"author: the tree just written does not load {skill}/{case_id}: {why}")
    print(f"author: wrote {skill}/{case_id} under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
