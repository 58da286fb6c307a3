"""Author the curated denoising and deconvolution fixtures: real clean images, noise (and blur) added.

Each case's truth is a real image made expected photo-electrons (scaled so its peak is the case's
``peak``); the subject's input is a camera image of it: for ``denoise``, Poisson shot noise and
Gaussian read noise (:func:`imagebench.cases.restored.photon_camera`); for ``deconvolution``, first
the blur of a Gaussian PSF (:func:`imagebench.cases.deconvolution.blur`, edges reflected), then the
same noise. Sources: the packaged ``segment-nuclei/dsb2018/img2d.tif`` (the DSB 2018 image of the
stardist wheel, copied byte for byte by ``tools/author_nuclei_fixture.py``), 2x2 binned; scikit-image's
bundled ``coins.png`` and ``cell.png``. It writes four cases through ``imagebench.fixtures.tree``:

- ``denoise/dsb2018-nuclei`` and ``denoise/coins-low-light`` (``noisy.npy``, ``clean.npy``);
- ``deconvolution/dsb2018-nuclei`` and ``deconvolution/cell-qpi`` (``blurred.npy``, ``psf.npy``, ``clean.npy``).

Usage::

    python tools/author_restoration.py                  # into src/imagebench/data/fixtures
    python tools/author_restoration.py --out /some/tree

Re-running it reproduces every file byte for byte (fixed seeds; the sources' bytes are pinned by
the packaged manifest and by their sha256 in each provenance).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))
if str(REPO / "src") not in sys.path:
    sys.path.append(str(REPO / "src"))

import sources  # noqa: E402

DSB_SOURCE = Path("segment-nuclei") / "dsb2018" / "img2d.tif"  # in the packaged tree
DSB_CITATION = (
    "Caicedo et al., Nucleus segmentation across imaging experiments: the 2018 Data Science Bowl, "
    "Nature Methods 16, 1247–1253 (2019)"
)
SKIMAGE_CITATION = (
    "van der Walt et al., scikit-image: image processing in Python, PeerJ 2:e453 (2014); the image from "
    "scikit-image's bundled data (skimage/data/{name})"
)


class Recipe(NamedTuple):
    skill: str
    case_id: str
    source: str  # "dsb" or a scikit-image file name
    crop: tuple[slice, slice] | None  # of the source (after binning); None: all of it
    peak: float
    seed: int
    blurred: bool


RECIPES = (
    Recipe("denoise", "dsb2018-nuclei", "dsb", None, 200.0, 2030, False),
    Recipe("denoise", "coins-low-light", "coins.png", (slice(20, 276), slice(60, 316)), 50.0, 2031, False),
    Recipe("deconvolution", "dsb2018-nuclei", "dsb", None, 2000.0, 2032, True),
    Recipe("deconvolution", "cell-qpi", "cell.png", (slice(200, 456), slice(150, 406)), 1000.0, 2033, True),
)
CASES: tuple[tuple[str, str], ...] = tuple((r.skill, r.case_id) for r in RECIPES)


def _source(name: str) -> tuple[np.ndarray, str]:
    """The source's pixels (float64) and the words of its provenance."""
    if name == "dsb":
        import tifffile

        raw = (sources.DEFAULT_OUT / DSB_SOURCE).read_bytes()
        pixels = np.asarray(tifffile.imread(io.BytesIO(raw)), dtype=np.float64)
        binned = pixels.reshape(pixels.shape[0] // 2, 2, pixels.shape[1] // 2, 2).mean(axis=(1, 3))
        words = (
            f"the packaged fixture {DSB_SOURCE.as_posix()} (sha256 {sources.sha256(raw)}; the DSB 2018 image of "
            f"the stardist {sources.STARDIST_VERSION} wheel, copied byte for byte by tools/author_nuclei_fixture.py), "
            f"uint16 {pixels.shape[0]}x{pixels.shape[1]}, binned 2x2 (the mean of each 2x2 block)"
        )
        return binned, words
    import imageio.v3 as iio

    raw, version = sources.skimage_image(name)
    pixels = np.asarray(iio.imread(io.BytesIO(raw)), dtype=np.float64)
    return (
        pixels,
        f"scikit-image {version}, skimage/data/{name} (sha256 {sources.sha256(raw)}), {pixels.shape[0]}x{pixels.shape[1]}",
    )


def author(out: Path, recipe: Recipe) -> None:
    from imagebench.cases.deconvolution import PSF_SIGMA, blur
    from imagebench.cases.restored import READ_NOISE, gaussian_psf, photon_camera
    from imagebench.fixtures import tree

    pixels, words = _source(recipe.source)
    crop = recipe.crop or (slice(0, pixels.shape[0]), slice(0, pixels.shape[1]))
    scale = recipe.peak / float(pixels[crop].max())
    clean = pixels[crop] * scale
    rng = np.random.default_rng(recipe.seed)
    where = "all of it" if recipe.crop is None else f"[{crop[0].start}:{crop[0].stop}, {crop[1].start}:{crop[1].stop}]"
    folder = out / recipe.skill / recipe.case_id
    if recipe.blurred:
        psf = gaussian_psf(PSF_SIGMA)
        # blurred over the whole frame, then cropped: the crop's edges are blurred by what lies beyond them
        given = photon_camera(rng, blur(pixels * scale, psf)[crop], READ_NOISE)
        sources.save_npy(folder / "blurred.npy", given)
        sources.save_npy(folder / "psf.npy", psf.astype(np.float32))
        data, files = {"blurred": "blurred.npy", "psf": "psf.npy"}, {"blurred.npy": ["blurred"], "psf.npy": ["psf"]}
        step = (
            f"convolved over the whole frame with a Gaussian PSF of sigma {PSF_SIGMA:g} px ({psf.shape[0]} px square, "
            "sum 1; imagebench.cases.deconvolution.blur, edges reflected) -> psf.npy (float32), cropped, then "
        )
        kind = "blurred, noisy"
    else:
        given = photon_camera(rng, clean, READ_NOISE)
        sources.save_npy(folder / "noisy.npy", given)
        data, files = {"noisy": "noisy.npy"}, {"noisy.npy": ["noisy"]}
        step = ""
        kind = "noisy"
    sources.save_npy(folder / "clean.npy", clean.astype(np.float32))
    files["clean.npy"] = ["clean"]
    out_name = "blurred.npy" if recipe.blurred else "noisy.npy"
    tree.write_case_layout(
        out, recipe.skill, recipe.case_id,
        about=f"{clean.shape[0]}x{clean.shape[1]} {kind} camera image of a real image at a peak of {recipe.peak:g} photo-electrons",
        data=data, truth={"clean": "clean.npy"},
    )  # fmt: skip
    tree.write_manifest_entry(
        out, recipe.skill, recipe.case_id,
        provenance=(
            f"Source: {words}. Truth: the pixels {where}, scaled by {scale:.6g} so the peak is {recipe.peak:g} "
            "photo-electrons -> clean.npy (float32). Input: the scaled image "
            f"{step}Poisson shot noise and Gaussian read noise {READ_NOISE:g} e- (imagebench.cases.restored."
            f"photon_camera, gain 1, no offset), numpy default_rng(seed={recipe.seed}) -> {out_name} (float32). "
            "Authored by tools/author_restoration.py."
        ),
        citation=DSB_CITATION if recipe.source == "dsb" else SKIMAGE_CITATION.format(name=recipe.source),
        files=files,
    )  # fmt: skip
    print(f"author: wrote {folder}")


def main(argv: list[str] | None = None) -> int:
    args = sources.author_parser(__doc__).parse_args(argv)
    for recipe in RECIPES:
        author(args.out, recipe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
