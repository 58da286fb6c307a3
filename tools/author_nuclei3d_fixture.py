"""Author the curated 3D nucleus fixtures from the StarDist wheel's 3D nuclei stack and annotation.

The StarDist 0.9.2 wheel on PyPI ships a small 3D fluorescence stack of stained nuclei and its
instance annotation (``stardist/data/images/img3d.tif`` and ``mask3d.tif``, 31 x 61 x 57, read by
``stardist.data.test_image_nuclei_3d``). This script reads both out of the pinned wheel
(``tools/sources.stardist_wheel``; nothing is installed) and writes two cases through
``imagebench.fixtures.tree``:

- ``segment-nuclei-3d/stardist-3d``: both TIFFs copied byte for byte;
- ``calibrated-measurements/stardist-3d-volumes``: the annotation relabelled 1..N (order kept) as
  the labels to measure, on the voxel size this case states (the wheel carries no calibration);
  truth = voxel count x voxel volume, cross-checked with ``regionprops(spacing=)``.

Usage::

    python tools/author_nuclei3d_fixture.py [--out DIR] [--wheel path/to/stardist-*.whl]

Re-running it reproduces every file byte for byte (.tif members are copies, derived arrays are .npy).
"""

from __future__ import annotations

import io
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

DEFAULT_OUT = sources.DEFAULT_OUT
SEG3D = ("segment-nuclei-3d", "stardist-3d")
VOLUMES = ("calibrated-measurements", "stardist-3d-volumes")
CASES: tuple[tuple[str, str], ...] = (SEG3D, VOLUMES)
MEMBERS = {"image": "stardist/data/images/img3d.tif", "labels": "stardist/data/images/mask3d.tif"}
#: the voxel size the measurement case states (z, y, x) in um; the wheel's TIFFs carry none, and the
#: annotated nuclei are about twice as many voxels across in y/x as in z, so z is taken as 2x y/x
SPACING: tuple[float, float, float] = (1.0, 0.5, 0.5)
CITATION = (
    "Weigert, Schmidt, Haase, Sugawara, Myers: Star-convex Polyhedra for 3D Object Detection and Segmentation "
    "in Microscopy, WACV 2020; data: the 3D nuclei test stack shipped with StarDist 0.9.2 "
    "(stardist.data.test_image_nuclei_3d)"
)


def check_pixels(raw: dict[str, bytes]) -> tuple[np.ndarray, np.ndarray]:
    import tifffile

    image = tifffile.imread(io.BytesIO(raw["image"]))
    labels = tifffile.imread(io.BytesIO(raw["labels"]))
    if image.ndim != 3 or image.shape != labels.shape:
        raise SystemExit(
            f"author: expected a 3D stack and an annotation of one shape, got {image.shape}, {labels.shape}"
        )
    if labels.dtype.kind not in "iu" or int(labels.min()) < 0:
        raise SystemExit(f"author: the annotation is not a non-negative integer label volume ({labels.dtype})")
    return image, labels


def border_labels(labels: np.ndarray) -> set[int]:
    faces = [labels[0], labels[-1], labels[:, 0], labels[:, -1], labels[:, :, 0], labels[:, :, -1]]
    return {int(v) for face in faces for v in np.unique(face)} - {0}



def main(argv: list[str] | None = None) -> int:
    args = sources.author_parser(__doc__, wheel=True).parse_args(argv)

    from skimage.measure import regionprops
    from skimage.segmentation import relabel_sequential

    from imagebench.fixtures import tree

    wheel = args.wheel if args.wheel is not None else sources.stardist_wheel()
    raw = sources.stardist_members(MEMBERS, wheel)
    image, labels = check_pixels(raw)
    n_objects = int(np.unique(labels[labels > 0]).size)
    source = (
        f"the stardist {sources.STARDIST_VERSION} wheel {wheel.name} (sha256 {sources.sha256(wheel.read_bytes())}), "
        "as read by stardist.data.test_image_nuclei_3d"
    )
    members = {key: f"{MEMBERS[key]} (sha256 {sources.sha256(raw[key])})" for key in MEMBERS}
    shape = "x".join(str(n) for n in image.shape)
    about = (
        f"stack {shape} (z, y, x) {image.dtype} (values {int(image.min())}-{int(image.max())}); annotation "
        f"{labels.dtype} with {n_objects} nuclei on non-consecutive labels (max {int(labels.max())}), "
        f"{len(border_labels(labels))} of them cut by a face of the stack"
    )
    names = {key: Path(member).name for key, member in MEMBERS.items()}

    # segment-nuclei-3d/stardist-3d
    skill, case_id = SEG3D
    sources.copy_case(
        args.out, skill, case_id, raw, names,
        about=f"a real 3D stack ({shape}) of {n_objects} annotated nuclei (StarDist's test volume)",
        provenance=(
            f"A 3D fluorescence stack of stained nuclei and its human instance annotation from {source}. Members "
            f"copied byte for byte, no crop and no conversion: {members['image']} -> {names['image']}; "
            f"{members['labels']} -> {names['labels']}. {about}. Authored by tools/author_nuclei3d_fixture.py; the "
            "annotation itself was not re-reviewed here."
        ),
        citation=CITATION,
    )  # fmt: skip

    # calibrated-measurements/stardist-3d-volumes
    skill, case_id = VOLUMES
    relabelled, _, _ = relabel_sequential(labels.astype(np.int32))
    relabelled = relabelled.astype(np.int32)
    voxel_volume = float(np.prod(SPACING))
    volumes = np.bincount(relabelled.ravel(), minlength=n_objects + 1)[1:].astype(np.float64) * voxel_volume
    other = np.zeros_like(volumes)
    for p in regionprops(relabelled, spacing=SPACING):
        other[p.label - 1] = p.area
    if not np.allclose(other, volumes, rtol=1e-9, atol=0.0) or volumes.size != n_objects:
        raise SystemExit("author: voxel-count volumes disagree with regionprops(spacing=)")
    folder = args.out / skill / case_id
    sources.save_npy(folder / "labels.npy", relabelled)
    sources.save_npy(folder / "volumes_um3.npy", volumes)
    tree.write_case_layout(
        args.out, skill, case_id,
        about=f"{n_objects} annotated real nuclei labelled 1..{n_objects} on {SPACING} um voxels (z, y, x)",
        data={"labels": "labels.npy"}, truth={"volumes_um3": "volumes_um3.npy"},
    )  # fmt: skip
    tree.write_manifest_entry(
        args.out, skill, case_id,
        provenance=(
            f"The human annotation of a 3D nuclei stack from {source}: {members['labels']}. {about}. Relabelled "
            f"1..{n_objects} in increasing order of the original label (skimage.segmentation.relabel_sequential), "
            f"int32 -> labels.npy. The voxel size {SPACING} um (z, y, x) is stated by this case (the TIFFs carry no "
            "calibration; the nuclei span about twice as many voxels in y/x as in z). Truth: each label's voxel "
            f"count x {voxel_volume:g} um^3 -> volumes_um3.npy (float64), cross-checked against "
            "skimage.measure.regionprops(spacing=) to a relative 1e-9. Authored by tools/author_nuclei3d_fixture.py."
        ),
        citation=CITATION,
        files={"labels.npy": ["labels"], "volumes_um3.npy": ["volumes_um3"]},
    )  # fmt: skip

    for skill, case_id in CASES:
        ok, why = tree.case_available(args.out, skill, case_id)
        if not ok:
            raise SystemExit(f"author: the tree just written does not load {skill}/{case_id}: {why}")
        print(f"author: wrote {skill}/{case_id} under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
