"""Author the curated fixture ``segment-nuclei/dsb2018``: real nuclei and their human annotation.

The StarDist wheel on PyPI ships one fluorescence image of stained nuclei from the 2018 Data
Science Bowl together with its instance annotation (``stardist/data/images/img2d.tif`` and
``mask2d.tif``). This tool downloads that wheel (``pip download --no-deps``; nothing is
installed), reads the two TIFFs out of the zip, checks them, copies them byte for byte into a
fixture tree and records the manifest entry (provenance, citation, sha256, sizes and array
specs) and the case layout through ``imagebench.tree``.

Usage::

    python tools/author_nuclei_fixture.py                  # into src/imagebench/data/fixtures
    python tools/author_nuclei_fixture.py --out /some/tree --wheel path/to/stardist-*.whl

The run only ever reads what this writes; re-running it reproduces the same bytes (the wheel
version is pinned) and the same manifest entry.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "src" / "imagebench" / "data" / "fixtures"
SKILL = "segment-nuclei"
CASE_ID = "dsb2018"
PACKAGE = "stardist"
VERSION = "0.9.2"
MEMBERS = {"image": "stardist/data/images/img2d.tif", "labels": "stardist/data/images/mask2d.tif"}
CITATION = (
    "Caicedo et al., Nucleus segmentation across imaging experiments: the 2018 Data Science Bowl, "
    "Nature Methods 16, 1247–1253 (2019)"
)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download_wheel(dest: Path, version: str) -> Path:
    cmd = [
        sys.executable, "-m", "pip", "download", f"{PACKAGE}=={version}",
        "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-d", str(dest),
    ]  # fmt: skip
    print("author: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    wheels = sorted(dest.glob(f"{PACKAGE}-{version}-*.whl"))
    if not wheels:
        raise SystemExit(f"author: pip download left no {PACKAGE}-{version} wheel in {dest}")
    return wheels[0]


def read_members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        out = {}
        for key, member in MEMBERS.items():
            if member not in names:
                found = sorted(n for n in names if n.startswith("stardist/data/"))
                raise SystemExit(f"author: {wheel.name} has no {member} (stardist/data/ holds {found})")
            out[key] = zf.read(member)
    return out


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"fixture tree root (default {DEFAULT_OUT})")
    parser.add_argument("--wheel", type=Path, default=None, help="use this stardist wheel instead of downloading one")
    parser.add_argument("--version", default=VERSION, help=f"stardist version to download (default {VERSION})")
    args = parser.parse_args(argv)

    from imagebench import tree

    with tempfile.TemporaryDirectory(prefix="imagebench-author-") as tmp:
        wheel = args.wheel if args.wheel is not None else download_wheel(Path(tmp), args.version)
        wheel_bytes = wheel.read_bytes()
        raw = read_members(wheel)
    image, labels = check_pixels(raw)
    n_objects = int(np.unique(labels[labels > 0]).size)

    folder = args.out / SKILL / CASE_ID
    folder.mkdir(parents=True, exist_ok=True)
    files = {key: Path(member).name for key, member in MEMBERS.items()}
    for key, name in files.items():
        (folder / name).write_bytes(raw[key])

    member_lines = "; ".join(
        f"{MEMBERS[key]} (sha256 {_sha256(raw[key])}) -> {files[key]}" for key in MEMBERS
    )
    provenance = (
        f"One fluorescence image of stained nuclei from the 2018 Data Science Bowl "
        f"and its human instance annotation, as shipped in the {PACKAGE} {args.version} wheel {wheel.name} "
        f"(sha256 {_sha256(wheel_bytes)}), read by stardist.data.test_image_nuclei_2d. "
        f"Members copied byte for byte, no crop and no conversion: {member_lines}. "
        f"Image {image.shape[0]}x{image.shape[1]} {image.dtype} (values {int(image.min())}-{int(image.max())}); "
        f"annotation {labels.dtype} with {n_objects} nuclei on non-consecutive labels (max {int(labels.max())}). "
        f"Authored by tools/author_nuclei_fixture.py; the annotation itself was not re-reviewed here."
    )
    tree.write_case_layout(
        args.out,
        SKILL,
        CASE_ID,
        about=f"a real {image.shape[0]}x{image.shape[1]} fluorescence field of {n_objects} annotated nuclei (DSB 2018)",
        data={"image": files["image"]},
        truth={"labels": files["labels"]},
    )
    entry = tree.write_manifest_entry(
        args.out,
        SKILL,
        CASE_ID,
        provenance=provenance,
        citation=CITATION,
        files={files["image"]: ["image"], files["labels"]: ["labels"]},
    )
    total = sum(f.bytes for f in entry.files.values())
    print(f"author: wrote {SKILL}/{CASE_ID} under {args.out} ({len(entry.files)} files, {total} bytes)")
    ok, why = tree.case_available(args.out, SKILL, CASE_ID)
    if not ok:
        raise SystemExit(f"author: the tree just written does not load: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
