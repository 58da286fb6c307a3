"""Author the curated fixtures of ``imagebench.cases.acquisitions``: real pixels, transformed once, here.

Each fixture starts from one of scikit-image's bundled images (read through ``tools/sources.py``) and
applies a known transformation with fixed numbers or a fixed numpy seed, so the truth is the
transformation itself:

- ``drift-correction/cell-qpi`` and ``drift-correction/cell-qpi-low-snr``: ``cell.png`` (a
  quantitative phase image of a cell), 2x2-binned, moved along a fixed sub-pixel drift trajectory by
  exact Fourier shifts into 20 frames of 128 x 128, with camera noise (the hard case: much more noise);
- ``align-channels-from-landmarks/ihc-stains``: ``ihc.png`` unmixed into hematoxylin and DAB
  (``skimage.color.rgb2hed``); the DAB channel seen through a fixed affine-plus-sinusoid warp,
  landmarks on hematoxylin-stained nuclei, probes mapped by the known warp;
- ``flatfield/ihc-tiles``: 16 tiles of ``ihc.png`` (brightfield, grey) times a fixed vignetting
  profile, plus a dark offset with a column pattern and shot/read noise;
- ``fibre-angle/brick-courses``: ``brick.png`` with the perspective its docstring records undone
  (so the brick courses run along the rows), rotated by a fixed angle.

Usage::

    python tools/author_acquisitions.py                # into src/imagebench/data/fixtures
    python tools/author_acquisitions.py --out /some/tree

Every file is written with ``numpy.save`` (no timestamps), so a re-run reproduces every byte.
"""

from __future__ import annotations

import hashlib
import io
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sources  # noqa: E402  (tools/sources.py, next to this script)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = sources.DEFAULT_OUT

CASES: tuple[tuple[str, str], ...] = (
    ("drift-correction", "cell-qpi"),
    ("drift-correction", "cell-qpi-low-snr"),
    ("align-channels-from-landmarks", "ihc-stains"),
    ("flatfield", "ihc-tiles"),
    ("fibre-angle", "brick-courses"),
)

SKIMAGE = "scikit-image (van der Walt et al., scikit-image: image processing in Python, PeerJ 2:e453, 2014)"
CELL_CITATION = (
    "skimage.data.cell (cell.png, CC0): Müller P, Schürmann M, Girardo S, Cojoc G, Guck J, Accurate evaluation of "
    f"size and refractive index for spherical objects in quantitative phase imaging, Optics Express 26(8): "
    f"10729-10743 (2018), doi:10.1364/OE.26.010729; distributed with {SKIMAGE}"
)
IHC_CITATION = (
    "skimage.data.immunohistochemistry (ihc.png): colonic glands, IHC staining of FHL2 with DAB and hematoxylin "
    "counterstain, acquired at the Center for Microscopy And Molecular Imaging (CMMI), no known copyright "
    f"restrictions; distributed with {SKIMAGE}"
)
BRICK_CITATION = (
    "skimage.data.brick (brick.png): Bricks25 texture from CC0Textures (cc0textures.com), CC0, perspective-warped, "
    f"rescaled and rotated as its docstring records; distributed with {SKIMAGE}"
)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _image(name: str) -> tuple[np.ndarray, str, str]:
    """One bundled image: pixels, 'scikit-image <version> skimage/data/<name> (sha256 ...)', and version."""
    import imageio.v3 as iio

    raw, version = sources.skimage_image(name)
    pixels = iio.imread(io.BytesIO(raw))
    return pixels, f"scikit-image {version}, skimage/data/{name} (sha256 {_sha(raw)})", version


def _write(folder: Path, arrays: dict[str, np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for key, array in arrays.items():
        np.save(folder / f"{key}.npy", np.asarray(array) if np.ndim(array) == 0 else np.ascontiguousarray(array))


def _record(
    out: Path, skill: str, case_id: str, *, about: str, data: dict, truth: dict, provenance: str, citation: str
) -> None:
    from imagebench.fixtures import tree

    folder = out / skill / case_id
    _write(folder, {**data, **truth})
    tree.write_case_layout(
        out,
        skill,
        case_id,
        about=about,
        data={k: f"{k}.npy" for k in data},
        truth={k: f"{k}.npy" for k in truth},
    )
    tree.write_manifest_entry(
        out,
        skill,
        case_id,
        provenance=provenance + f" Authored by tools/author_acquisitions.py (numpy {np.__version__}).",
        citation=citation,
        files={f"{k}.npy": [k] for k in (*data, *truth)},
    )
    ok, why = tree.case_available(out, skill, case_id)
    if not ok:
        raise SystemExit(f"author: {skill}/{case_id} does not load from the tree just written: {why}")
    print(f"author: wrote {skill}/{case_id}")


# --------------------------------------------------------------------------- drift


def fourier_shift(image: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Content moved by ``shift`` (rows, cols), an exact band-limited shift of the mirror-symmetric extension."""
    from imagebench.cases.stack import fourier_shift_slice

    return fourier_shift_slice(image, shift)


DRIFT_FRAMES = 20
DRIFT_SIZE = 128
DRIFT_PAD = 16  # real content around the field: what drifts in comes from the acquisition itself
DRIFT_ORIGIN = (123, 131)  # top-left of the field in the 2x2-binned cell.png (330 x 275), the cell inside it


def drift_trajectory(
    creep: tuple[float, float], wobble: tuple[float, float], period: tuple[float, float]
) -> np.ndarray:
    """A fixed smooth drift: a linear creep plus one sinusoid per axis, zero at frame 0, rounded to 1/1000 px."""
    t = np.arange(DRIFT_FRAMES, dtype=np.float64)[:, None]
    phase = np.array([0.6, 2.1])
    path = np.array(creep) * t + np.array(wobble) * (np.sin(2 * np.pi * t / np.array(period) + phase) - np.sin(phase))
    return np.round(path, 3)


DRIFT_VARIANTS = {
    # case id: (creep px/frame, wobble amplitude px, wobble period frames, noise sigma in grey levels, seed)
    "cell-qpi": ((0.16, -0.12), (1.3, 0.9), (17.0, 23.0), 6.0, 1101),
    "cell-qpi-low-snr": ((-0.13, 0.18), (1.1, 1.4), (21.0, 15.0), 150.0, 1102),
}
DRIFT_GAIN, DRIFT_OFFSET = 16.0, 400.0  # grey level = 400 + 16 x binned cell.png value


def author_drift(out: Path) -> None:
    pixels, source, _ = _image("cell.png")
    cell = pixels.astype(np.float64)
    binned = cell[: cell.shape[0] // 2 * 2, : cell.shape[1] // 2 * 2]
    binned = binned.reshape(binned.shape[0] // 2, 2, binned.shape[1] // 2, 2).mean(axis=(1, 3))
    y0, x0 = DRIFT_ORIGIN
    region = binned[y0 - DRIFT_PAD : y0 + DRIFT_SIZE + DRIFT_PAD, x0 - DRIFT_PAD : x0 + DRIFT_SIZE + DRIFT_PAD]
    clean_region = DRIFT_OFFSET + DRIFT_GAIN * region
    inner = (slice(DRIFT_PAD, DRIFT_PAD + DRIFT_SIZE), slice(DRIFT_PAD, DRIFT_PAD + DRIFT_SIZE))
    undrifted = clean_region[inner]
    texture = float(undrifted.std())
    for case_id, (creep, wobble, period, noise, seed) in DRIFT_VARIANTS.items():
        trajectory = drift_trajectory(creep, wobble, period)
        if np.abs(trajectory).max() >= DRIFT_PAD - 2:
            raise SystemExit(f"author: {case_id}: the drift would bring in content from outside the padded region")
        rng = np.random.default_rng(seed)
        frames = []
        for shift in trajectory:
            frame = fourier_shift(clean_region, shift)[inner]
            frames.append(frame + rng.normal(0.0, noise, frame.shape))
        movie = np.clip(np.rint(np.stack(frames)), 0, 65535).astype(np.uint16)
        hard = "low-snr" in case_id
        _record(
            out,
            "drift-correction",
            case_id,
            about=(
                f"a real quantitative phase image of a cell moved along a known sub-pixel drift, {DRIFT_FRAMES} frames"
                + (", low SNR" if hard else "")
            ),
            data={"movie": movie},
            truth={"trajectory": trajectory, "undrifted_mean": undrifted.astype(np.float64)},
            provenance=(
                f"{source}: a quantitative phase image of a cell in saline (pixel 0.107 um). Transformation: 2x2 "
                f"binning (mean) to {binned.shape[0]}x{binned.shape[1]}, grey = {DRIFT_OFFSET:g} + {DRIFT_GAIN:g} x "
                f"value; a {DRIFT_SIZE}x{DRIFT_SIZE} field at rows {y0}-{y0 + DRIFT_SIZE - 1}, cols "
                f"{x0}-{x0 + DRIFT_SIZE - 1} of the binned image, with {DRIFT_PAD} px of real surround; each of "
                f"{DRIFT_FRAMES} frames is the surround moved by the frame's drift (an exact sub-pixel Fourier shift "
                f"of its mirror-symmetric extension) and cropped to the field. Drift (rows, cols) = creep {creep} "
                f"px/frame x t + wobble {wobble} px x (sin(2 pi t / {period} + (0.6, 2.1)) - sin((0.6, 2.1))), rounded "
                f"to 0.001 px (the truth). Gaussian noise sigma {noise:g} grey levels "
                f"(numpy.random.default_rng({seed}); the field's own standard deviation is {texture:.1f}), rounded to "
                "uint16. undrifted_mean is the noise-free field at frame 0."
            ),
            citation=CELL_CITATION,
        )


# --------------------------------------------------------------------------- landmarks

LM_SIZE = 256
LM_ORIGIN = (128, 128)  # top-left of the fixed field in ihc.png
LM_LANDMARKS = 18
LM_PROBES = 25
LM_CLICK_PX = 0.25
LM_SEED = 1201


def ihc_warp() -> object:
    """The fixed warp from moving to fixed (row, col) coordinates of the 256 x 256 field."""
    from imagebench.cases.landmarks import Warp

    angle = np.deg2rad(4.0)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    matrix = rot @ np.diag([1.03, 0.975]) @ np.array([[1.0, 0.02], [0.0, 1.0]])
    centre = np.array([LM_SIZE / 2.0, LM_SIZE / 2.0])
    offset = centre - matrix @ centre + np.array([5.5, -6.25])
    heading = np.deg2rad(np.array([30.0, 115.0]))
    wave = np.stack([np.sin(heading), np.cos(heading)], axis=1) / np.array([1.2 * LM_SIZE, 1.35 * LM_SIZE])[:, None]
    return Warp(
        matrix=matrix,
        offset=offset,
        amplitude=np.array([3.6, 3.2]),
        wave=wave,
        phase=np.pi / 2.0 - 2.0 * np.pi * (wave @ centre) + np.array([0.3, -0.2]),
    )


def author_landmarks(out: Path) -> None:
    from scipy import ndimage
    from scipy.spatial import Delaunay
    from skimage.color import rgb2hed
    from skimage.feature import peak_local_max

    from imagebench.cases.landmarks import check_inverse

    pixels, source, _ = _image("ihc.png")
    hed = rgb2hed(pixels[..., :3])
    hema, dab = hed[..., 0], hed[..., 2]
    y0, x0 = LM_ORIGIN
    fixed = hema[y0 : y0 + LM_SIZE, x0 : x0 + LM_SIZE]
    warp = ihc_warp()
    lip = warp.contraction()
    if not lip < 0.5:
        raise SystemExit(f"author: the ihc warp is too strong to invert safely (contraction bound {lip:.3f})")
    axis = np.arange(LM_SIZE, dtype=np.float64)
    grid = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1)
    where = warp.forward(grid) + np.array([y0, x0])  # each moving pixel's position in the whole ihc.png
    moving = ndimage.map_coordinates(dab, [where[..., 0], where[..., 1]], order=3, mode="reflect")
    # Landmarks: hematoxylin-stained nuclei of the fixed channel (peaks of the smoothed stain), inside both fields.
    peaks = peak_local_max(ndimage.gaussian_filter(fixed, 2.0), min_distance=10, threshold_rel=0.3).astype(float)
    moving_peaks = warp.inverse(peaks)
    inside = np.all((peaks > 16) & (peaks < LM_SIZE - 16), axis=1) & np.all(
        (moving_peaks > 16) & (moving_peaks < LM_SIZE - 16), axis=1
    )
    candidates = np.flatnonzero(inside)
    rng = np.random.default_rng(LM_SEED)
    if candidates.size < LM_LANDMARKS:
        raise SystemExit(f"author: only {candidates.size} nuclei usable as landmarks")
    chosen = np.sort(rng.choice(candidates, size=LM_LANDMARKS, replace=False))
    lm_fixed_true = peaks[chosen]
    lm_moving_true = moving_peaks[chosen]
    check_inverse(warp, lm_fixed_true, lm_moving_true)
    hull = Delaunay(lm_moving_true)
    probes: list[np.ndarray] = []
    while len(probes) < LM_PROBES:
        batch = rng.uniform(0.0, LM_SIZE - 1.0, (4 * LM_PROBES, 2))
        probes.extend(batch[hull.find_simplex(batch) >= 0])
    probes_moving = np.array(probes[:LM_PROBES])
    probes_true = warp.forward(probes_moving)
    check_inverse(warp, probes_true, warp.inverse(probes_true))
    lm_fixed = lm_fixed_true + rng.normal(0.0, LM_CLICK_PX, lm_fixed_true.shape)
    lm_moving = lm_moving_true + rng.normal(0.0, LM_CLICK_PX, lm_moving_true.shape)
    _record(
        out,
        "align-channels-from-landmarks",
        "ihc-stains",
        about="two stains of a real IHC field (hematoxylin fixed, DAB warped), nucleus landmarks, probes",
        data={
            "fixed": fixed.astype(np.float32),
            "moving": moving.astype(np.float32),
            "landmarks_fixed": lm_fixed,
            "landmarks_moving": lm_moving,
            "probes_moving": probes_moving,
        },
        truth={"probes_fixed_true": probes_true},
        provenance=(
            f"{source}: a brightfield IHC image (DAB and hematoxylin). Transformation: colour deconvolution "
            "(skimage.color.rgb2hed); fixed = hematoxylin optical density in rows "
            f"{y0}-{y0 + LM_SIZE - 1}, cols {x0}-{x0 + LM_SIZE - 1}; moving = DAB optical density sampled (cubic "
            "spline, reflected at the image border) at G(p) for each moving pixel p, G the warp moving -> fixed: "
            "A p + b + s(p), A = rotation 4 deg . diag(1.03, 0.975) . shear 0.02 about the field centre, shift "
            "(5.5, -6.25) px, s = sinusoids of amplitude (3.6, 3.2) px, wavelengths (1.2, 1.35) field widths, "
            f"headings (30, 115) deg, an extremum near the centre (contraction bound {lip:.3f}, so G is invertible; "
            "G^-1 by fixed-point iteration, forward(inverse(q)) = q checked to 1e-6 px). Landmarks: "
            f"{LM_LANDMARKS} hematoxylin-stained nuclei (local maxima of the stain smoothed with sigma 2, at least 10 "
            "px apart, 16 px inside both fields) chosen with numpy.random.default_rng("
            f"{LM_SEED}), their moving positions G^-1(q), each coordinate then given {LM_CLICK_PX:g} px of click "
            f"jitter per channel; {LM_PROBES} probes uniform inside the moving landmarks' hull; truth G(probe)."
        ),
        citation=IHC_CITATION,
    )


# --------------------------------------------------------------------------- flatfield

FF_FIELDS = 16
FF_SIZE = 128
FF_SEED = 1301


def author_flatfield(out: Path) -> None:
    from skimage.color import rgb2gray

    pixels, source, _ = _image("ihc.png")
    grey = rgb2gray(pixels[..., :3])  # brightfield transmission in [0, 1]
    tiles = np.stack(
        [grey[r * FF_SIZE : (r + 1) * FF_SIZE, c * FF_SIZE : (c + 1) * FF_SIZE] for r in range(4) for c in range(4)]
    )
    specimen = 2000.0 * np.clip(tiles, 0.02, None) / float(np.median(tiles))
    y, x = np.mgrid[0:FF_SIZE, 0:FF_SIZE].astype(np.float64)
    cy, cx, wy, wx = 0.5 * FF_SIZE + 9.0, 0.5 * FF_SIZE - 12.0, 0.47 * FF_SIZE, 0.58 * FF_SIZE
    flat = np.exp(-0.5 * (((y - cy) / wy) ** 2 + ((x - cx) / wx) ** 2))
    flat /= flat.mean()
    rng = np.random.default_rng(FF_SEED)
    dark = np.tile(700.0 + rng.normal(0.0, 3.0, FF_SIZE), (FF_SIZE, 1))
    signal = flat * specimen
    raw = dark + signal + rng.normal(size=signal.shape) * np.sqrt(signal + 25.0)
    dark_frame = dark + rng.normal(0.0, 5.0, (FF_SIZE, FF_SIZE)) / np.sqrt(16.0)
    corner = float(min(flat[0, 0], flat[0, -1], flat[-1, 0], flat[-1, -1]) / flat.max())
    _record(
        out,
        "flatfield",
        "ihc-tiles",
        about=f"{FF_FIELDS} real brightfield tiles under one known vignetting profile, with a dark frame",
        data={"fields": np.clip(np.rint(raw), 0, 65535).astype(np.uint16), "dark": dark_frame.astype(np.float32)},
        truth={"flatfield": flat.astype(np.float32), "specimen": specimen.astype(np.float32)},
        provenance=(
            f"{source}: a brightfield IHC image. Transformation: grey = skimage.color.rgb2gray, cut into "
            f"{FF_FIELDS} tiles of {FF_SIZE}x{FF_SIZE} (4 x 4, row-major); specimen = 2000 x max(grey, 0.02) / "
            "median(grey). Each field = dark + flatfield x specimen + noise: flatfield an anisotropic Gaussian "
            f"falloff centred at (row, col) ({cy:g}, {cx:g}), widths ({wy:g}, {wx:g}) px, normalised to mean 1 "
            f"(darkest corner {corner:.2f} of the peak); dark 700 + a column pattern (sigma 3); noise of variance "
            "signal + 25 (shot and read); the dark frame is dark + the noise of a mean of 16 dark exposures "
            f"(sigma 5 each); all noise from numpy.random.default_rng({FF_SEED}); fields rounded to uint16 (a camera's "
            "counts), dark frame, flatfield and specimen kept as float32."
        ),
        citation=IHC_CITATION,
    )


# --------------------------------------------------------------------------- fibre angle

BRICK_H_INVERSE = np.array([[0.54764, -0.00219, 0.0], [-0.12822, 0.54688, 0.0], [-0.00022, 0.0, 1.0]])
BRICK_RECT = (180, 20, 600)  # top, left, side of the square taken from the rectified texture (half resolution)
BRICK_ANGLE_DEG = 37.0
BRICK_SIZE = 192
BRICK_NOISE = 4.0
BRICK_SEED = 1401


def rectified_brick(brick: np.ndarray) -> np.ndarray:
    """brick.png with its recorded rotation, rescale and perspective undone: rows run along the courses.

    skimage's brick.png = rotate(rescale(warp(orig, inv(M))[:1024, :1024], 0.5), -90) with M the matrix in
    its docstring; so orig(q) is seen at p = M q (homogeneous, (col, row)) of the warped image. This samples
    the un-rotated brick.png at (p - 0.5) / 2 for q on a half-resolution grid of the original texture.
    """
    from scipy import ndimage

    unrotated = np.rot90(brick.astype(np.float64), k=1)
    n = 900
    rr, cc = np.mgrid[0:n, 0:n].astype(np.float64)
    q = np.stack([2 * cc + 0.5, 2 * rr + 0.5, np.ones_like(rr)]).reshape(3, -1)
    p = BRICK_H_INVERSE @ q
    px, py = (p[0] / p[2] - 0.5) / 2, (p[1] / p[2] - 0.5) / 2
    out = ndimage.map_coordinates(unrotated, [py, px], order=3, mode="constant", cval=np.nan).reshape(n, n)
    top, left, side = BRICK_RECT
    square = out[top : top + side, left : left + side]
    if not np.isfinite(square).all():
        raise SystemExit("author: the rectified square reaches outside brick.png")
    return square


def course_angle(image: np.ndarray) -> float:
    """Independent check of the courses' direction: the projection-profile angle (deg, in [-3, 3]).

    The image is rotated by small angles and its row means compared; the mortar courses line up with the
    rows where that profile varies most. Positive: courses rising to the right, as displayed.
    """
    from skimage.transform import rotate

    best, best_var = 0.0, -1.0
    for a in np.arange(-3.0, 3.0001, 0.05):
        profile = rotate(image, -a, order=1, mode="reflect")[100:-100, 100:-100].mean(axis=1)
        if profile.var() > best_var:
            best, best_var = float(a), float(profile.var())
    return best


def author_fibre(out: Path) -> None:
    from skimage.transform import rotate

    from imagebench.cases.structured import _orientation_spectrum

    pixels, source, _ = _image("brick.png")
    square = rectified_brick(pixels)
    binned = square.reshape(square.shape[0] // 2, 2, square.shape[1] // 2, 2).mean(axis=(1, 3))
    residual = course_angle(binned)
    if abs(residual) > 0.5:
        raise SystemExit(f"author: the rectified courses run at {residual:.2f} deg, not along the rows")
    turned = rotate(binned, BRICK_ANGLE_DEG, order=3, mode="reflect")  # counter-clockwise as displayed
    c = turned.shape[0] // 2
    crop = turned[c - BRICK_SIZE // 2 : c + BRICK_SIZE // 2, c - BRICK_SIZE // 2 : c + BRICK_SIZE // 2]
    image = crop + np.random.default_rng(BRICK_SEED).normal(0.0, BRICK_NOISE, crop.shape)
    seen = _orientation_spectrum(crop)
    truth = BRICK_ANGLE_DEG % 180.0
    _record(
        out,
        "fibre-angle",
        "brick-courses",
        about="a real brick-wall texture rotated by a known angle: the courses' direction",
        data={"fibres": image.astype(np.float32)},
        truth={"angle_deg": np.array(truth)},
        provenance=(
            f"{source}: a brick-wall texture. Transformation: the rotation, rescale and perspective warp recorded in "
            "skimage.data.brick's docstring undone (np.rot90 k=1, then the homography M = [[0.54764, -0.00219, 0], "
            "[-0.12822, 0.54688, 0], [-0.00022, 0, 1]] applied to a half-resolution grid of the original texture, "
            f"cubic spline); a {BRICK_RECT[2]}x{BRICK_RECT[2]} square at row {BRICK_RECT[0]}, col {BRICK_RECT[1]} of "
            f"it, 2x2-binned; its courses run along the rows (projection-profile check: {residual:+.2f} deg); "
            f"rotated {BRICK_ANGLE_DEG:g} deg counter-clockwise (skimage.transform.rotate, cubic, reflect), the "
            f"central {BRICK_SIZE}x{BRICK_SIZE} kept, Gaussian noise sigma {BRICK_NOISE:g} "
            f"(numpy.random.default_rng({BRICK_SEED})). Truth: the courses' direction, {truth:g} deg counter-clockwise "
            f"from +x as displayed (the power spectrum's axis says {seen:.2f})."
        ),
        citation=BRICK_CITATION,
    )


AUTHORS: dict[str, Callable[[Path], None]] = {
    "drift": author_drift,
    "landmarks": author_landmarks,
    "flatfield": author_flatfield,
    "fibre": author_fibre,
}


def main(argv: list[str] | None = None) -> int:
    parser = sources.author_parser(__doc__)
    parser.add_argument("--only", choices=sorted(AUTHORS), action="append", help="author only these (repeatable)")
    args = parser.parse_args(argv)
    for name, author in AUTHORS.items():
        if not args.only or name in args.only:
            author(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
