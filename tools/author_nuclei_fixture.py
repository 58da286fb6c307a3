"""Author the curated 2D nucleus fixtures from the StarDist wheel's DSB 2018 image and annotation.

The StarDist 0.9.2 wheel on PyPI ships one fluorescence image of stained nuclei from the 2018 Data
Science Bowl together with its instance annotation (``stardist/data/images/img2d.tif`` and
``mask2d.tif``). This script reads both out of the pinned wheel (``tools/sources.stardist_wheel``;
nothing is installed), checks them, and writes three cases into a fixture tree through
``imagebench.fixtures.tree`` (case layout + manifest entry with provenance, citation and sha256s):

- ``segment-nuclei/dsb2018``: both TIFFs copied byte for byte;
- ``segment-nuclei/dsb2018-dim``: the same image made dim and noisy (a fixed gain, Poisson shot
  noise, a camera offset and Gaussian read noise, fixed seed); truth is the same annotation;
- ``segmentation-qc-metrics/dsb2018-watershed``: the annotation and a classical watershed
  segmentation of the image computed once, here, with parameters deliberately unlike the
  reference's (so it really merges, splits and misses); truth is precision, recall and F1 at
  IoU 0.5, cross-checked by an object-by-object loop.

Usage::

    python tools/author_nuclei_fixture.py                  # into src/imagebench/data/fixtures
    python tools/author_nuclei_fixture.py --out /some/tree [--wheel path/to/stardist-*.whl]

Re-running it reproduces every file byte for byte (.tif members are copies, derived arrays are
.npy, the noise has a fixed seed).
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
SKILL = "segment-nuclei"
CASE_ID = "dsb2018"
DIM_ID = "dsb2018-dim"
QC_SKILL = "segmentation-qc-metrics"
QC_ID = "dsb2018-watershed"
CASES: tuple[tuple[str, str], ...] = ((SKILL, CASE_ID), (SKILL, DIM_ID), (QC_SKILL, QC_ID))
PACKAGE = "stardist"
VERSION = sources.STARDIST_VERSION
MEMBERS = {"image": "stardist/data/images/img2d.tif", "labels": "stardist/data/images/mask2d.tif"}
CITATION = (
    "Caicedo et al., Nucleus segmentation across imaging experiments: the 2018 Data Science Bowl, "
    "Nature Methods 16, 1247–1253 (2019)"
)

#: the dim acquisition: expected counts = GAIN x original value, Poisson, + OFFSET + N(0, READ_NOISE), rounded
DIM = {"gain": 0.25, "offset": 100.0, "read_noise": 3.0, "seed": 2026}
#: the "model" of the QC case: imagebench's classical pipeline with parameters unlike the reference's
#: (heavier smoothing, a narrower background window, far-apart markers, a low noise floor)
QC_MODEL = {"sigma": 2.5, "min_distance": 9, "min_area": 15, "background_size": 31, "snr": 4.0}
QC_IOU = 0.5


def read_members(wheel: Path) -> dict[str, bytes]:
    return {key: sources.wheel_member(wheel, member) for key, member in MEMBERS.items()}


def check_pixels(raw: dict[str, bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Decode both TIFFs and check that they are a 2D image and an instance label image of one shape."""
    import tifffile

    image = tifffile.imread(io.BytesIO(raw["image"]))
    labels = tifffile.imread(io.BytesIO(raw["labels"]))
    if image.ndim != 2 or labels.ndim != 2:
        raise SystemExit(f"author: expected two 2D images, got {image.shape} and {labels.shape}")
    if image.shape != labels.shape:
        raise SystemExit(f"author: image {image.shape} and annotation {labels.shape} differ in shape")
    if labels.dtype.kind not in "iu" or int(labels.min()) < 0:
        raise SystemExit(f"author: the annotation is not a non-negative integer label image ({labels.dtype})")
    n = np.unique(labels[labels > 0]).size
    if n < 10:
        raise SystemExit(f"author: the annotation holds only {n} objects")
    return image, labels


def make_dim(image: np.ndarray) -> np.ndarray:
    """The image as a dimmer, noisier acquisition of the same field (uint16)."""
    rng = np.random.default_rng(DIM["seed"])
    counts = rng.poisson(DIM["gain"] * image.astype(np.float64)).astype(np.float64)
    counts = counts + DIM["offset"] + rng.normal(0.0, DIM["read_noise"], image.shape)
    return np.clip(np.rint(counts), 0, 65535).astype(np.uint16)


def make_model(image: np.ndarray) -> np.ndarray:
    from imagebench.cases.segmentation import segment_nuclei_classical

    return segment_nuclei_classical(image, **QC_MODEL).astype(np.uint16)


def qc_truth(annotation: np.ndarray, model: np.ndarray) -> dict[str, float | int]:
    """Precision, recall and F1 at IoU 0.5 from match_labels, cross-checked by an independent loop."""
    from imagebench.cases.segmentation import _brute_force_counts
    from imagebench.matching import label_overlaps, match_labels

    r = match_labels(annotation, model, iou=QC_IOU)
    tp, n_true, n_pred = _brute_force_counts(annotation, model, QC_IOU - 1e-12)
    if (tp, n_true, n_pred) != (r.tp, r.n_true, r.n_pred):
        raise SystemExit(
            f"author: match_labels gives tp={r.tp}, n_true={r.n_true}, n_pred={r.n_pred}; the object loop gives "
            f"tp={tp}, n_true={n_true}, n_pred={n_pred}"
        )
    iou = label_overlaps(annotation, model).iou()
    near = np.abs(iou - QC_IOU) < 1e-3
    if near.any():  # the answer must not hinge on > versus >= at 0.5
        raise SystemExit(f"author: {int(near.sum())} object pair(s) have an IoU within 1e-3 of {QC_IOU}")
    if not (r.fp and r.fn and r.tp):
        raise SystemExit(f"author: the model should make real errors (tp {r.tp}, fp {r.fp}, fn {r.fn})")
    return {"precision": r.precision, "recall": r.recall, "f1": r.f1, "tp": r.tp, "fp": r.fp, "fn": r.fn}



def main(argv: list[str] | None = None) -> int:
    args = sources.author_parser(__doc__, wheel=True).parse_args(argv)

    from imagebench.fixtures import tree

    wheel = args.wheel if args.wheel is not None else sources.stardist_wheel()
    wheel_sha = sources.sha256(wheel.read_bytes())
    raw = read_members(wheel)
    image, labels = check_pixels(raw)
    n_objects = int(np.unique(labels[labels > 0]).size)
    members = {key: f"{MEMBERS[key]} (sha256 {sources.sha256(raw[key])})" for key in MEMBERS}
    source = (
        f"the {PACKAGE} {VERSION} wheel {wheel.name} (sha256 {wheel_sha}), as read by "
        "stardist.data.test_image_nuclei_2d"
    )
    image_about = (
        f"image {image.shape[0]}x{image.shape[1]} {image.dtype} (values {int(image.min())}-{int(image.max())}); "
        f"annotation {labels.dtype} with {n_objects} nuclei on non-consecutive labels (max {int(labels.max())})"
    )
    files = {key: Path(member).name for key, member in MEMBERS.items()}

    # segment-nuclei/dsb2018: the two members, byte for byte
    sources.copy_case(
        args.out, SKILL, CASE_ID, raw, files,
        about=f"a real {image.shape[0]}x{image.shape[1]} fluorescence field of {n_objects} annotated nuclei (DSB 2018)",
        provenance=(
            f"One fluorescence image of stained nuclei from the 2018 Data Science Bowl and its human instance "
            f"annotation, from {source}. Members copied byte for byte, no crop and no conversion: "
            f"{members['image']} -> {files['image']}; {members['labels']} -> {files['labels']}. {image_about}. "
            "Authored by tools/author_nuclei_fixture.py; the annotation itself was not re-reviewed here."
        ),
        citation=CITATION,
    )  # fmt: skip

    # segment-nuclei/dsb2018-dim: the same field, dim and noisy
    dim = make_dim(image)
    folder = args.out / SKILL / DIM_ID
    sources.save_npy(folder / "image_dim.npy", dim)
    (folder / files["labels"]).write_bytes(raw["labels"])
    tree.write_case_layout(
        args.out, SKILL, DIM_ID,
        about=f"the DSB 2018 field of {n_objects} annotated nuclei as a dim, noisy acquisition (gain {DIM['gain']})",
        data={"image": "image_dim.npy"}, truth={"labels": files["labels"]},
    )  # fmt: skip
    tree.write_manifest_entry(
        args.out, SKILL, DIM_ID,
        provenance=(
            f"The DSB 2018 image and annotation from {source}: {members['image']} and {members['labels']}. "
            f"The annotation is copied byte for byte -> {files['labels']}. The image is turned into a dim, noisy "
            f"acquisition of the same field -> image_dim.npy ({dim.shape[0]}x{dim.shape[1]} uint16, values "
            f"{int(dim.min())}-{int(dim.max())}): with numpy default_rng(seed={DIM['seed']}), "
            f"counts = Poisson({DIM['gain']} x original value) (drawn first, for every pixel), plus a camera offset "
            f"of {DIM['offset']:g}, plus Gaussian read noise N(0, {DIM['read_noise']:g}) (drawn second), rounded "
            f"and clipped to 0-65535. {image_about}. Authored by tools/author_nuclei_fixture.py."
        ),
        citation=CITATION,
        files={"image_dim.npy": ["image"], files["labels"]: ["labels"]},
    )  # fmt: skip

    # segmentation-qc-metrics/dsb2018-watershed: the annotation against a real watershed
    model = make_model(image)
    truth = qc_truth(labels, model)
    folder = args.out / QC_SKILL / QC_ID
    (folder / files["labels"]).parent.mkdir(parents=True, exist_ok=True)
    (folder / files["labels"]).write_bytes(raw["labels"])
    sources.save_npy(folder / "model.npy", model)
    for key in ("precision", "recall", "f1"):
        sources.save_npy(folder / f"{key}.npy", np.float64(truth[key]))
    for key in ("tp", "fp", "fn"):
        sources.save_npy(folder / f"{key}.npy", np.int64(truth[key]))
    n_model = int(np.unique(model[model > 0]).size)
    tree.write_case_layout(
        args.out, QC_SKILL, QC_ID,
        about=f"the DSB 2018 annotation ({n_objects} nuclei) against a classical watershed ({n_model} objects)",
        data={"annotation": files["labels"], "model": "model.npy"},
        truth={key: f"{key}.npy" for key in ("precision", "recall", "f1", "tp", "fp", "fn")},
    )  # fmt: skip
    params = ", ".join(f"{k}={v}" for k, v in QC_MODEL.items())
    tree.write_manifest_entry(
        args.out, QC_SKILL, QC_ID,
        provenance=(
            f"The DSB 2018 image and annotation from {source}: {members['image']} and {members['labels']}. "
            f"annotation: {members['labels']} copied byte for byte -> {files['labels']}. model: "
            f"imagebench.cases.segmentation.segment_nuclei_classical({params}) run once on the image at "
            f"authoring time -> model.npy (uint16, {n_model} objects), parameters chosen unlike the reference's so "
            f"that it merges, splits and misses nuclei as a real model would. Truth: precision, recall, F1 and "
            f"tp/fp/fn from imagebench.matching.match_labels at IoU {QC_IOU}, cross-checked by an object-by-object "
            f"IoU loop over boolean masks, no pair within 1e-3 of IoU {QC_IOU} (tp {truth['tp']}, fp {truth['fp']}, "
            f"fn {truth['fn']}). Authored by tools/author_nuclei_fixture.py."
        ),
        citation=CITATION,
        files={
            files["labels"]: ["annotation"], "model.npy": ["model"],
            **{f"{key}.npy": [key] for key in ("precision", "recall", "f1", "tp", "fp", "fn")},
        },
    )  # fmt: skip

    for skill, case_id in CASES:
        ok, why = tree.case_available(args.out, skill, case_id)
        if not ok:
            raise SystemExit(f"author: the tree just written does not load {skill}/{case_id}: {why}")
        print(f"author: wrote {skill}/{case_id} under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
