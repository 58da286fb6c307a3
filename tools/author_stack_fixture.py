"""Author the curated fixture ``stack-alignment/mri-anatomical``: a real MRI volume whose slices were re-placed.

The source is ``anatomical.nii``, the structural MRI volume nibabel ships among its test data
(``nibabel/tests/data/anatomical.nii``: 33 x 41 x 25 voxels of 2 mm, int16). Every slice along the
last (k) axis is moved within its plane by its own translation, drawn once from a fixed numpy seed
(uniform in +-2.5 px per axis, rounded to 1/1000 px) and applied as an exact sub-pixel Fourier shift
of the slice's mirror-symmetric extension (``imagebench.cases.stack.replace_slices``). The result is
written as float32 NIfTI-1 with the source's affine, gzip-compressed with mtime 0 so a re-run writes
the same bytes; the offsets are the truth (``offsets.npy``).

Usage::

    python tools/author_stack_fixture.py                # into src/imagebench/data/fixtures
    python tools/author_stack_fixture.py --out /some/tree
"""

from __future__ import annotations

import gzip
import hashlib
import io
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sources  # noqa: E402  (tools/sources.py, next to this script)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = sources.DEFAULT_OUT
SKILL = "stack-alignment"
CASE_ID = "mri-anatomical"
CASES: tuple[tuple[str, str], ...] = ((SKILL, CASE_ID),)
SOURCE = "anatomical.nii"
SEED = 20261115
MAX_OFFSET_PX = 2.5
VOLUME_FILE = "anatomical_replaced.nii.gz"
TRUTH_FILE = "offsets.npy"
CITATION = (
    "nibabel test data: nibabel/tests/data/anatomical.nii, a structural MRI volume shipped with NiBabel "
    "(Brett M, Markiewicz CJ, Hanke M, et al., nipy/nibabel, Zenodo, doi:10.5281/zenodo.591597; MIT licence)"
)


def nifti_gz_bytes(image: object) -> bytes:
    """A NIfTI-1 image as .nii.gz bytes, gzip header with mtime 0 and no file name (byte-for-byte repeatable)."""
    raw = image.to_bytes()  # type: ignore[attr-defined]
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(raw)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = sources.author_parser(__doc__)
    args = parser.parse_args(argv)

    import nibabel

    from imagebench.cases.stack import check_replaced, jitter, replace_slices
    from imagebench.fixtures import tree

    raw, version = sources.nibabel_volume(SOURCE)
    source = nibabel.Nifti1Image.from_bytes(raw)
    straight = np.asarray(source.dataobj, dtype=np.float64)
    if straight.ndim != 3:
        raise SystemExit(f"author: {SOURCE} is not a 3-D volume ({straight.shape})")
    offsets = jitter(np.random.default_rng(SEED), straight.shape[2], MAX_OFFSET_PX)
    replaced = replace_slices(straight, offsets)
    check = check_replaced(straight, replaced, offsets, margin=int(np.ceil(MAX_OFFSET_PX)) + 4)

    header = source.header.copy()
    header.set_data_dtype(np.float32)
    out_image = nibabel.Nifti1Image(replaced.astype(np.float32), source.affine, header)
    out_image.header.set_slope_inter(1.0, 0.0)

    folder = args.out / SKILL / CASE_ID
    folder.mkdir(parents=True, exist_ok=True)
    (folder / VOLUME_FILE).write_bytes(nifti_gz_bytes(out_image))
    np.save(folder / TRUTH_FILE, offsets)

    zooms = tuple(float(z) for z in source.header.get_zooms())
    provenance = (
        f"nibabel {version}, nibabel/tests/data/{SOURCE} (sha256 {hashlib.sha256(raw).hexdigest()}): a structural "
        f"MRI volume {straight.shape[0]}x{straight.shape[1]}x{straight.shape[2]} ({source.get_data_dtype()}, voxels "
        f"{zooms[0]:g}x{zooms[1]:g}x{zooms[2]:g} mm). Transformation (tools/author_stack_fixture.py, applied once "
        f"here): every slice along the last axis moved in-plane by its own offset, drawn by "
        f"numpy.random.default_rng({SEED}).uniform(-{MAX_OFFSET_PX:g}, {MAX_OFFSET_PX:g}, ({straight.shape[2]}, 2)) "
        "rounded to 0.001 px, as an exact sub-pixel Fourier shift of the slice's mirror-symmetric extension "
        "(imagebench.cases.stack.replace_slices); checked by moving each slice back with a cubic spline (worst "
        f"relative RMS {check:.4f}). Written as float32 NIfTI-1 with the source's affine (numpy "
        f"{np.__version__}), gzip with mtime 0; the offsets (px, along axes 0 and 1) are the truth."
    )
    tree.write_case_layout(
        args.out,
        SKILL,
        CASE_ID,
        about=f"a real {straight.shape} MRI volume (nibabel anatomical.nii) with re-placed slices, NIfTI",
        data={"volume": VOLUME_FILE},
        truth={"offsets": TRUTH_FILE},
    )
    tree.write_manifest_entry(
        args.out,
        SKILL,
        CASE_ID,
        provenance=provenance,
        citation=CITATION,
        files={VOLUME_FILE: ["volume"], TRUTH_FILE: ["offsets"]},
    )
    ok, why = tree.case_available(args.out, SKILL, CASE_ID)
    if not ok:
        raise SystemExit(f"author: the tree just written does not load: {why}")
    print(f"author: wrote {SKILL}/{CASE_ID} under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
