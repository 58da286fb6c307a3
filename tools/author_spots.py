"""Author the curated spot-detection fixture: spots of recorded position added to real pixels.

The packaged ``segment-nuclei/dsb2018`` fixture holds one real DSB 2018 fluorescence image of
nuclei (``img2d.tif``, copied byte for byte from the stardist 0.9.2 wheel by
``tools/author_nuclei_fixture.py``). This script crops its centre (256 x 256) as the background
and adds spots at recorded sub-pixel positions: each spot's expected photons through the
spot-detection cases' Gaussian PSF integrated over each pixel
(:func:`imagebench.cases.spots.render_spots`), made counts by their own Poisson shot noise and
added to the real pixels (which keep their own noise). The truth is the recorded positions. It
writes one case, ``spot-detection/dsb2018-spots`` (``image.npy``, ``spots.npy``), through
``imagebench.fixtures.tree``.

Usage::

    python tools/author_spots.py                  # into src/imagebench/data/fixtures
    python tools/author_spots.py --out /some/tree

Re-running it reproduces every file byte for byte (a fixed seed; the source image is read from
the packaged tree, whose bytes its manifest pins).
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

SKILL = "spot-detection"
CASE_ID = "dsb2018-spots"
CASES: tuple[tuple[str, str], ...] = ((SKILL, CASE_ID),)
SOURCE = Path("segment-nuclei") / "dsb2018" / "img2d.tif"  # in the packaged tree
CITATION = (
    "Caicedo et al., Nucleus segmentation across imaging experiments: the 2018 Data Science Bowl, "
    "Nature Methods 16, 1247–1253 (2019)"
)
CROP = (slice(128, 384), slice(128, 384))
SPOTS = {"seed": 2028, "n": 80, "photons": 1000.0, "spread": 0.25, "separation": 3.0, "margin": 3.0}


def main(argv: list[str] | None = None) -> int:
    args = sources.author_parser(__doc__).parse_args(argv)

    import io

    import tifffile

    from imagebench.cases.spots import PSF_SIGMA, render_spots, scatter_positions
    from imagebench.fixtures import tree

    raw = (sources.DEFAULT_OUT / SOURCE).read_bytes()
    real = np.asarray(tifffile.imread(io.BytesIO(raw)))
    background = real[CROP].astype(np.int64)
    shape = (int(background.shape[0]), int(background.shape[1]))
    rng = np.random.default_rng(SPOTS["seed"])
    positions = scatter_positions(
        rng, shape, int(SPOTS["n"]), margin=float(SPOTS["margin"]), separation=float(SPOTS["separation"])
    )
    photons = float(SPOTS["photons"]) * rng.lognormal(0.0, float(SPOTS["spread"]), size=positions.shape[0])
    signal = rng.poisson(render_spots(shape, positions, photons, PSF_SIGMA))
    image = np.clip(background + signal, 0, 65535).astype(np.uint16)

    folder = args.out / SKILL / CASE_ID
    sources.save_npy(folder / "image.npy", image)
    sources.save_npy(folder / "spots.npy", positions.astype(np.float64))
    tree.write_case_layout(
        args.out, SKILL, CASE_ID,
        about=f"{shape[0]}x{shape[1]}: {positions.shape[0]} spots added to the real pixels of a DSB 2018 image of nuclei",
        data={"image": "image.npy"}, truth={"spots": "spots.npy"},
    )  # fmt: skip
    params = ", ".join(f"{k}={v}" for k, v in SPOTS.items())
    tree.write_manifest_entry(
        args.out, SKILL, CASE_ID,
        provenance=(
            f"Background: the real pixels [128:384, 128:384] of the packaged fixture {SOURCE.as_posix()} (sha256 "
            f"{sources.sha256(raw)}; the DSB 2018 image of the stardist {sources.STARDIST_VERSION} wheel, copied "
            f"byte for byte by tools/author_nuclei_fixture.py), uint16 values {int(background.min())}-"
            f"{int(background.max())}, unchanged. Spots ({params}): {positions.shape[0]} uniform sub-pixel "
            "positions at least `separation` px apart and `margin` px from the border "
            "(imagebench.cases.spots.scatter_positions), each with `photons` x lognormal(0, `spread`) photons, "
            f"through a Gaussian PSF of sigma {PSF_SIGMA} px integrated over each pixel "
            "(imagebench.cases.spots.render_spots), made counts by their own Poisson shot noise and added to the "
            f"real pixels; numpy default_rng(seed={SPOTS['seed']}) for positions, photons and noise in that "
            "order -> image.npy (uint16). Truth: the positions, (row, col) px with pixel centres at integer "
            "coordinates -> spots.npy. Authored by tools/author_spots.py."
        ),
        citation=CITATION,
        files={"image.npy": ["image"], "spots.npy": ["spots"]},
    )  # fmt: skip
    print(f"author: wrote {folder} ({positions.shape[0]} spots on real DSB 2018 pixels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
