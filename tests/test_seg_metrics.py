"""The field's segmentation and image measures (imagebench.metrics) against their reference
implementations: stardist.matching (matching, AP, panoptic quality), seg-metrics (HD95, mean
surface distance, with anisotropic spacing) and skimage.metrics (PSNR, SSIM, NRMSE); the
figures every segmentation case reports (never gating); ``imagebench metrics instance|image``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage as ndi

from imagebench.matching import match_labels
from imagebench.metrics import AP_THRESHOLDS, dice, image_scores, instance_scores, surface_scores, threshold_scores
from imagebench.metrics.figures import segmentation_figures

stardist_matching = pytest.importorskip("stardist.matching")
seg_metrics = pytest.importorskip("seg_metrics.seg_metrics")
skm = pytest.importorskip("skimage.metrics")

ROOT = Path(__file__).resolve().parents[1]
DSB = ROOT / "src/imagebench/data/fixtures/segment-nuclei/dsb2018/mask2d.tif"
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.2, 2.0)


def _blobs(rng: np.random.Generator, shape: tuple[int, ...], n: int) -> np.ndarray:
    """A label image of ``n`` random overlapping-then-labelled discs (touching objects share edges)."""
    seeds = np.zeros(shape, np.int32)
    idx = tuple(rng.integers(0, s, n) for s in shape)
    seeds[idx] = np.arange(1, n + 1)
    dist = ndi.distance_transform_edt(seeds == 0)
    _, nearest = ndi.distance_transform_edt(seeds == 0, return_indices=True)
    labels = seeds[tuple(nearest)]
    labels[dist > rng.uniform(2, 6)] = 0
    return labels


def _perturbed(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """A prediction: shifted, some objects dropped, one spurious, some relabelled and dilated."""
    pred = np.roll(labels, tuple(int(v) for v in rng.integers(-2, 3, labels.ndim)), axis=tuple(range(labels.ndim)))
    present = np.unique(pred[pred > 0])
    drop = rng.choice(present, size=min(len(present), int(rng.integers(0, 3))), replace=False) if present.size else []
    pred[np.isin(pred, drop)] = 0
    if rng.random() < 0.5:
        pred = ndi.grey_dilation(pred, size=(3,) * labels.ndim)
    sl = tuple(slice(0, 4) for _ in labels.shape)
    pred[sl] = 999
    perm = rng.permutation(2000)[: int(pred.max()) + 1]
    perm[0] = 0
    return perm[pred].astype(np.int32)


def _check_against_stardist(truth: np.ndarray, pred: np.ndarray) -> None:
    ours = instance_scores(truth, pred, THRESHOLDS)
    for s in ours.per_threshold:
        ref = stardist_matching.matching(truth, pred, thresh=s.thresh)
        assert (s.tp, s.fp, s.fn, s.n_true, s.n_pred) == (ref.tp, ref.fp, ref.fn, ref.n_true, ref.n_pred), s.thresh
        for name in ("precision", "recall", "accuracy", "f1"):
            assert getattr(s, name) == pytest.approx(getattr(ref, name), abs=1e-12), (name, s.thresh)
        if s.thresh >= 0.5:  # unique matches: the same pairs, so the same IoUs
            assert s.panoptic_quality == pytest.approx(ref.panoptic_quality, rel=1e-6), s.thresh  # float32 IoUs there
            assert (s.mean_matched_iou or 0.0) == pytest.approx(ref.mean_matched_score, rel=1e-6), s.thresh
        else:  # below 0.5 a choice: ours maximizes the matched IoU among the most matches
            assert s.panoptic_quality >= ref.panoptic_quality * (1 - 1e-6), s.thresh
        if s.thresh > 1:
            assert s.tp == 0 and s.panoptic_quality == ref.panoptic_quality == 0.0


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 25), three=st.booleans())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_matching_and_ap_agree_with_stardist_on_random_label_images(seed: int, n: int, three: bool) -> None:
    rng = np.random.default_rng(seed)
    truth = _blobs(rng, (14, 24, 24) if three else (48, 48), n)
    _check_against_stardist(truth, _perturbed(rng, truth))


def test_matching_and_ap_agree_with_stardist_on_the_dsb_fixture() -> None:
    import tifffile

    truth = tifffile.imread(DSB).astype(np.int32)
    rng = np.random.default_rng(3)
    for pred in (truth, ndi.grey_dilation(truth, size=3), _perturbed(rng, truth), ndi.grey_erosion(truth, size=3)):
        _check_against_stardist(truth, pred)


def test_ap_is_accuracy_at_each_threshold_and_its_mean_is_the_dsb_figure() -> None:
    truth = np.zeros((20, 20), np.int32)
    truth[2:8, 2:8] = 1  # 36 px
    truth[10:16, 10:16] = 2
    pred = np.zeros_like(truth)
    pred[2:8, 2:7] = 5  # IoU 30/36 = 0.833: matched up to 0.80, not at 0.85
    pred[0:2, 15:20] = 6  # a false object; truth 2 missed
    sweep = instance_scores(truth, pred)
    assert sweep.thresholds == AP_THRESHOLDS == (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
    acc = [s.accuracy for s in sweep.per_threshold]
    assert acc == [1 / 3] * 7 + [0.0] * 3  # TP/(TP+FP+FN) = 1/(1+1+1) while the pair matches
    assert sweep.mean_accuracy == pytest.approx(7 / 30)
    half = sweep.per_threshold[0]
    assert half.panoptic_quality == pytest.approx((30 / 36) / (1 + 0.5 + 0.5))
    assert half.panoptic_quality == pytest.approx(half.mean_matched_iou * half.f1)  # SQ x RQ


def test_empty_images_and_bad_thresholds() -> None:
    z = np.zeros((8, 8), np.int32)
    s = threshold_scores(z, z, 0.5)
    assert (s.tp, s.accuracy, s.panoptic_quality, s.mean_matched_iou) == (0, 1.0, 1.0, None)
    one = z.copy()
    one[2:4, 2:4] = 1
    s = threshold_scores(z, one, 0.5)
    assert (s.fp, s.precision, s.accuracy, s.panoptic_quality) == (1, 0.0, 0.0, 0.0)
    for bad in (0.0, -0.5, float("nan")):
        with pytest.raises(ValueError, match="threshold"):
            threshold_scores(one, one, bad)
    with pytest.raises(ValueError, match="shape"):
        threshold_scores(one, np.zeros((8, 9), np.int32))
    with pytest.raises(ValueError, match="integer"):
        threshold_scores(one.astype(float), one)


def _peer_surface(truth: np.ndarray, pred: np.ndarray, spacing: tuple[float, ...]) -> dict[str, float]:
    # seg-metrics takes SimpleITK's spacing order (x, y, z): the reverse of the array's
    return seg_metrics.computeQualityMeasures(
        (pred > 0).astype(np.uint8), (truth > 0).astype(np.uint8), spacing=np.array(spacing[::-1], float),
        metrics_names=["dice", "hd95", "msd", "hd"],
    )  # fmt: skip


@pytest.mark.parametrize("spacing", [(1.0, 1.0), (0.5, 1.7), (2.0, 0.5, 0.5), (1.0, 0.3, 0.7)])
def test_surface_distances_agree_with_seg_metrics_with_anisotropic_spacing(spacing: tuple[float, ...]) -> None:
    rng = np.random.default_rng(len(spacing) * 10 + int(spacing[0] * 10))
    shape = (20, 30, 30) if len(spacing) == 3 else (60, 60)
    for _ in range(4):
        truth = _blobs(rng, shape, 12)
        pred = _perturbed(rng, truth)
        pred[tuple(0 for _ in shape)] = 7  # an object on the image's edge
        ours = surface_scores(truth, pred, spacing)
        ref = _peer_surface(truth, pred, spacing)
        assert ours.dice == pytest.approx(ref["dice"], abs=1e-12)
        # SimpleITK keeps distances in float32
        assert ours.hd95 == pytest.approx(ref["hd95"], rel=1e-5, abs=1e-5)
        assert ours.msd == pytest.approx(ref["msd"], rel=1e-5, abs=1e-5)
        assert ours.hd == pytest.approx(ref["hd"], rel=1e-5, abs=1e-5)


def test_surface_distances_are_in_physical_units_and_undefined_on_an_empty_side() -> None:
    truth = np.zeros((10, 40), np.uint8)
    truth[:, 5:15] = 1
    pred = np.zeros_like(truth)
    pred[:, 8:18] = 1  # every boundary 3 columns away: 3 x the x step
    assert surface_scores(truth, pred, (1.0, 0.5)).hd == pytest.approx(1.5)
    assert surface_scores(truth, pred).hd == pytest.approx(3.0)
    assert dice(truth, pred) == pytest.approx(2 * 70 / 200)
    empty = surface_scores(truth, np.zeros_like(truth))
    assert empty.hd95 is None and empty.msd is None and "pred" in (empty.undefined or "")
    with pytest.raises(ValueError, match="spacing"):
        surface_scores(truth, pred, (1.0,))
    with pytest.raises(ValueError, match="spacing"):
        surface_scores(truth, pred, (1.0, 0.0))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_image_metrics_are_skimage_with_the_data_range_given(dtype: type) -> None:
    rng = np.random.default_rng(5)
    top = 1.0 if dtype is np.float32 else float(np.iinfo(dtype).max)
    truth = (rng.random((40, 50)) * top).astype(dtype)
    pred = np.clip(truth.astype(np.float64) + rng.normal(0, top / 20, truth.shape), 0, top).astype(dtype)
    for r in (top, top / 2):
        ours = image_scores(truth, pred, data_range=r)
        t, p = truth.astype(np.float64), pred.astype(np.float64)
        assert ours.psnr == pytest.approx(skm.peak_signal_noise_ratio(t, p, data_range=r), rel=1e-12)
        assert ours.ssim == pytest.approx(skm.structural_similarity(t, p, data_range=r), rel=1e-12)
        assert ours.nrmse == pytest.approx(skm.normalized_root_mse(t, p), rel=1e-12)
    # the range given is the range used: halving it lowers PSNR by 20 log10(2) dB
    assert image_scores(truth, pred, top).psnr - image_scores(truth, pred, top / 2).psnr == pytest.approx(
        20 * np.log10(2)
    )
    assert image_scores(truth, truth, top).psnr is None  # identical: infinite PSNR, written as None
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="data_range"):
            image_scores(truth, pred, bad)
    with pytest.raises(ValueError, match="7 pixels"):
        image_scores(truth[:5], pred[:5], top)


def test_every_segmentation_case_reports_the_figures_and_they_never_gate() -> None:
    from imagebench.cases import segmentation
    from imagebench.fixtures.fixture import Attempt, Fixture

    truth = _blobs(np.random.default_rng(9), (64, 64), 15)
    fixture = Fixture(
        provenance="test",
        data={"image": truth.astype(np.float32)},
        truth={"labels": truth},
        tolerance={"f1_shortfall": 0.5, "missed_fraction": 0.5, "false_fraction": 0.5, "iou_shortfall": 0.5},
        skill_id="segment-nuclei",
        case_id="t",
    )
    good = segmentation.verify_nuclei(fixture, Attempt(subject="test", arrays={"labels": truth}))
    figures = good.detail["figures"]
    assert figures["ap@0.50:0.05:0.95"] == 1.0 and figures["pq@0.50"] == 1.0 and figures["hd95_foreground"] == 0.0
    assert [k for k in figures if k.startswith("ap@")][:2] == ["ap@0.50", "ap@0.55"]
    assert {m.name for m in good.metrics} == {"f1_shortfall", "missed_fraction", "false_fraction", "iou_shortfall"}
    # a dishonest answer whose boundaries are poor but within the limits at IoU 0.5: the figures
    # show it, the gate is unchanged
    coarse = ndi.grey_dilation(truth, size=3)
    out = segmentation.verify_nuclei(fixture, Attempt(subject="test", arrays={"labels": coarse}))
    assert out.detail["figures"]["ap@0.50:0.05:0.95"] < 1.0
    assert out.detail["figures"] == segmentation_figures(truth, coarse)
    r = match_labels(truth, coarse, iou=0.5)  # the gate is what it was: the IoU-0.5 metrics, nothing else
    assert {m.name: m.value for m in out.metrics} == pytest.approx(
        {"f1_shortfall": 1 - r.f1, "missed_fraction": r.fn / r.n_true, "false_fraction": r.fp / r.n_pred,
         "iou_shortfall": 1 - r.mean_matched_iou}
    )  # fmt: skip
    assert out.status == ("ok" if all(m.passed for m in out.metrics) else "wrong-answer")
    json.dumps(out.detail["figures"])  # JSON-ready: no NaN, no numpy scalar


def test_the_explanation_shows_the_figures_as_informative() -> None:
    from imagebench.runs.explain import figures_line

    truth = _blobs(np.random.default_rng(2), (40, 40), 8)
    line = figures_line(segmentation_figures(truth, ndi.grey_dilation(truth, size=3), (0.5, 0.5), "um"))
    assert "never gating" in line and "AP@0.50:0.05:0.95" in line and "HD95" in line and " um" in line


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "imagebench", "metrics", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_cli_instance_and_image_on_files(tmp_path: Path) -> None:
    import tifffile

    truth = tifffile.imread(DSB).astype(np.int32)
    pred = ndi.grey_dilation(truth, size=3)
    tifffile.imwrite(tmp_path / "t.tif", truth)
    np.save(tmp_path / "p.npy", pred)
    one = _cli("instance", "t.tif", "p.npy", "--iou", "0.7", "--spacing", "0.5,0.25", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    got = json.loads(one.stdout)
    ref = stardist_matching.matching(truth, pred, thresh=0.7)
    for name in ("tp", "fp", "fn", "precision", "recall", "accuracy", "f1"):
        assert got[name] == pytest.approx(getattr(ref, name), abs=1e-12), name
    assert got["panoptic_quality"] == pytest.approx(ref.panoptic_quality, rel=1e-6)  # stardist's IoUs are float32
    assert got["mean_matched_iou"] == pytest.approx(ref.mean_matched_score, rel=1e-6)
    assert got["foreground"]["hd95"] == pytest.approx(_peer_surface(truth, pred, (0.5, 0.25))["hd95"], rel=1e-5)
    sweep = json.loads(_cli("instance", "t.tif", "p.npy", cwd=tmp_path).stdout)
    assert sweep["thresholds"] == list(AP_THRESHOLDS)
    refs = [stardist_matching.matching(truth, pred, thresh=t).accuracy for t in AP_THRESHOLDS]
    assert sweep["mean"]["accuracy"] == pytest.approx(np.mean(refs))
    above = json.loads(_cli("instance", "t.tif", "p.npy", "--iou", "1.5", cwd=tmp_path).stdout)
    assert (above["tp"], above["accuracy"]) == (0, 0.0)

    rng = np.random.default_rng(1)
    img = rng.random((32, 32))
    np.save(tmp_path / "a.npy", img)
    tifffile.imwrite(tmp_path / "b.tif", (img + rng.normal(0, 0.05, img.shape)).astype(np.float64))
    im = _cli("image", "a.npy", "b.tif", "--data-range", "1", cwd=tmp_path)
    assert im.returncode == 0, im.stderr
    b = tifffile.imread(tmp_path / "b.tif")
    assert json.loads(im.stdout)["ssim"] == pytest.approx(skm.structural_similarity(img, b, data_range=1.0))

    # unreadable, mismatched or dishonest inputs: exit 2, the file named
    (tmp_path / "junk.tif").write_text("not a tiff")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "small.npy", np.zeros((4, 4), np.int32))
    for args, named in (
        (("instance", "t.tif", "missing.npy"), "missing.npy"),
        (("instance", "t.tif", "junk.tif"), "junk.tif"),
        (("instance", "t.tif", "obj.npy"), "obj.npy"),
        (("instance", "t.tif", "small.npy"), "small.npy"),
        (("instance", "t.tif", "p.txt"), "p.txt"),
        (("instance", "t.tif", "p.npy", "--spacing", "1"), "--spacing"),
        (("instance", "t.tif", "p.npy", "--iou", "0"), "--iou"),
        (("image", "a.npy", "b.tif", "--data-range", "0"), "data_range"),
    ):
        r = _cli(*args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert named in r.stderr, (args, r.stderr)
