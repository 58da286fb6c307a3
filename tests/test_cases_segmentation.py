"""The segmentation cases: the reference passes, naive answers fail, bad leavings are unavailable,
builders are deterministic and cross-checked, the curated DSB tree is intact and loads."""

from __future__ import annotations

import importlib.util
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import truth_leaks
from scipy import ndimage as ndi
from skimage.filters import threshold_otsu

import imagebench.cases.segmentation as seg
from imagebench.case.model import Case
from imagebench.case.session import collect_attempt, open_session
from imagebench.cases import all_cases, builders, skills
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError
from imagebench.fixtures.specs import Procedural
from imagebench.matching import label_overlaps, match_labels

REPO = Path(__file__).resolve().parent.parent
CASES = {c.case_id: c for c in seg.CASES}


def build(case: Case, seed: int | None = None) -> Fixture:
    spec = case.fixture
    if seed is not None:
        assert isinstance(spec, Procedural)
        spec = replace(spec, seed=seed)
    return spec.build(case.namespace, case.case_id)


def attempt_with(**arrays: Any) -> Attempt:
    return Attempt(subject="test", arrays=dict(arrays))


def run_reference(case: Case, fixture: Fixture) -> Any:
    session = open_session(case, fixture)
    assert case.reference is not None
    case.reference(session)
    attempt = collect_attempt(case, "reference", session.lookup)
    return case.verify(fixture, attempt)


def verdicts(outcome: Any) -> dict[str, str]:
    return {m.name: m.verdict for m in outcome.metrics}


# --------------------------------------------------------------------------- registration


def test_cases_skills_and_builders_are_registered() -> None:
    labels = {c.label for c in all_cases()}
    assert {
        "segment-nuclei/synthetic-blobs",
        "segment-nuclei/dsb2018",
        "segment-nuclei/empty-field",
        "segmentation-qc-metrics/annotation-vs-model",
    } <= labels
    assert {"segment-nuclei", "segmentation-qc-metrics"} <= set(skills())
    assert builders()["nuclei-synthetic"] is seg.build_synthetic_nuclei
    assert CASES["empty-field"].case_class == "empty"
    assert CASES["dsb2018"].kind == "curated" and CASES["synthetic-blobs"].kind == "synthetic"
    for case in seg.CASES:
        kinds = {layer.kind for layer in case.layers}
        assert kinds <= {"image", "labels"}
        for name, _ in seg.NUCLEI_METRICS if case.namespace == seg.SEGMENT and case.case_class == "golden" else ():
            assert name in case.tolerances


# --------------------------------------------------------------------------- segment-nuclei: synthetic


@pytest.mark.parametrize("seed", [0, 1, 2026])
def test_reference_passes_synthetic_blobs(seed: int) -> None:
    case = CASES["synthetic-blobs"]
    fx = build(case, seed)
    outcome = run_reference(case, fx)
    assert outcome.passed, verdicts(outcome)
    assert outcome.detail["matching"]["n_true"] == 40
    assert set(outcome.artifacts) == {"image", "truth_outlines", "labels_outlines", "overlay"}
    assert all(np.asarray(a).ndim == 2 for name, a in outcome.artifacts.items() if name != "overlay")
    assert outcome.artifacts["overlay"].shape[1:] == (256, 3) and "green" in outcome.detail["drawn"]


def test_synthetic_builder_is_deterministic_and_keeps_truth_out_of_data() -> None:
    a = seg.build_synthetic_nuclei(seed=5)
    b = seg.build_synthetic_nuclei(seed=5)
    c = seg.build_synthetic_nuclei(seed=6)
    assert np.array_equal(a.data["image"], b.data["image"]) and np.array_equal(a.truth["labels"], b.truth["labels"])
    assert not np.array_equal(a.truth["labels"], c.truth["labels"])
    assert not set(a.data) & set(a.truth)
    assert a.data["image"].dtype == np.float32 and a.data["image"].shape == (256, 256)
    labels = a.truth["labels"]
    assert np.unique(labels[labels > 0]).size == 40
    assert "seed=5" in a.provenance
    # some nuclei really touch (share an edge), so a plain threshold cannot separate them
    assert len(seg._touching_pairs(labels)) >= 3


def test_truth_never_reaches_the_session() -> None:
    for case in (CASES["synthetic-blobs"], CASES["annotation-vs-model"], CASES["empty-field"]):
        fx = build(case)
        session = open_session(case, fx)
        assert not set(fx.truth) & set(session.namespace)
        for value in session.namespace.values():
            if isinstance(value, np.ndarray):
                assert truth_leaks({k: v for k, v in fx.truth.items() if np.ndim(v) > 0}, array=value) == []


def test_naive_answers_fail_synthetic_blobs() -> None:
    case = CASES["synthetic-blobs"]
    fx = build(case)
    image = np.asarray(fx.data["image"])
    shape = image.shape
    zeros = case.verify(fx, attempt_with(labels=np.zeros(shape, np.int32)))
    assert not zeros.passed and zeros.scored  # scored: f1_shortfall = 1
    assert verdicts(zeros)["f1_shortfall"] == "fail"
    assert verdicts(zeros)["iou_shortfall"] == "unavailable"
    one_blob = case.verify(fx, attempt_with(labels=np.ones(shape, np.int32)))
    assert not one_blob.passed
    # a global Otsu threshold without splitting touching nuclei: merges cost matches
    otsu, _ = ndi.label(image > threshold_otsu(image))
    merged = case.verify(fx, attempt_with(labels=otsu.astype(np.int32)))
    assert verdicts(merged)["f1_shortfall"] == "fail"
    # the truth with its boundaries shifted by 4 px: matches mostly survive but IoU drops
    shifted = np.roll(np.asarray(fx.truth["labels"]), 4, axis=1)
    assert verdicts(case.verify(fx, attempt_with(labels=shifted)))["iou_shortfall"] == "fail"


@pytest.mark.parametrize(
    ("leaving", "why"),
    [
        (np.zeros((255, 256), np.int32), "shape"),
        (np.zeros((256, 256), np.float32), "dtype"),
        (np.full((256, 256), -1, np.int32), "negative"),
        ("not an array", "str"),
    ],
)
def test_unreadable_labels_are_unavailable(leaving: Any, why: str) -> None:
    case = CASES["synthetic-blobs"]
    fx = build(case)
    outcome = case.verify(fx, attempt_with(labels=leaving))
    assert not outcome.passed and not outcome.scored
    for m in outcome.metrics:
        assert m.value is None and why in (m.unavailable or "")
    assert outcome.status == "unscorable-result"


def test_nothing_left_is_no_result() -> None:
    case = CASES["synthetic-blobs"]
    outcome = case.verify(build(case), Attempt(subject="nop"))
    assert outcome.status == "no-result"


# --------------------------------------------------------------------------- segment-nuclei: empty


@pytest.mark.parametrize("seed", [0, 1, 2026])
def test_reference_finds_nothing_on_an_empty_field(seed: int) -> None:
    case = CASES["empty-field"]
    fx = build(case, seed)
    outcome = run_reference(case, fx)
    assert outcome.passed, verdicts(outcome)
    assert outcome.metrics[0].value == 0.0


def test_objects_on_an_empty_field_fail() -> None:
    case = CASES["empty-field"]
    fx = build(case)
    image = np.asarray(fx.data["image"])
    assert not np.asarray(fx.truth["labels"]).any()
    assert case.verify(fx, attempt_with(labels=np.zeros(image.shape, np.uint8))).passed
    # Otsu on pure background splits it into "objects": the hallucination this case exists to catch
    otsu, n = ndi.label(image > threshold_otsu(image))
    outcome = case.verify(fx, attempt_with(labels=otsu))
    assert n > 0 and not outcome.passed and outcome.metrics[0].value == float(n)
    one = np.zeros(image.shape, np.int32)
    one[10:20, 10:20] = 9
    assert case.verify(fx, attempt_with(labels=one)).metrics[0].value == 1.0
    bad = case.verify(fx, attempt_with(labels=np.zeros((3, 3), np.int32)))
    assert bad.metrics[0].value is None


def test_classical_pipeline_refuses_non_2d_and_handles_constant_images() -> None:
    with pytest.raises(ValueError, match="2D"):
        seg.segment_nuclei_classical(np.zeros((3, 4, 5)))
    assert not seg.segment_nuclei_classical(np.full((64, 64), 3.0)).any()


# --------------------------------------------------------------------------- segment-nuclei: DSB 2018 (curated)


def test_dsb_tree_is_intact_and_cited() -> None:
    from imagebench.fixtures import tree

    assert tree.verify_tree(seg.FIXTURE_ROOT) == []
    manifest = tree.load_manifest(seg.FIXTURE_ROOT)
    entry = manifest.entry("segment-nuclei", "dsb2018")
    assert entry is not None
    assert entry.citation == seg.DSB_CITATION
    assert "stardist 0.9.2" in entry.provenance and "sha256" in entry.provenance
    assert sum(f.bytes for f in entry.files.values()) < 2 * 1024 * 1024


def test_reference_passes_dsb_and_naive_answers_fail() -> None:
    case = CASES["dsb2018"]
    assert case.available() == (True, "")
    fx = build(case)
    assert fx.kind == "curated" and fx.citation == seg.DSB_CITATION
    outcome = run_reference(case, fx)
    assert outcome.passed, verdicts(outcome)
    assert outcome.detail["matching"]["n_true"] == 125
    image = np.asarray(fx.data["image"])
    assert not case.verify(fx, attempt_with(labels=np.zeros(image.shape, np.int32))).passed
    otsu, _ = ndi.label(image > threshold_otsu(image))
    assert not case.verify(fx, attempt_with(labels=otsu)).passed


def test_dsb_is_unavailable_without_its_tree(tmp_path: Path) -> None:
    case = CASES["dsb2018"]
    missing = replace(case, fixture=replace(case.fixture, root=tmp_path / "nowhere"))
    ok, why = missing.available()
    assert not ok and "nowhere" in why


def _author_module() -> Any:
    spec = importlib.util.spec_from_file_location("author_nuclei_fixture", REPO / "tools" / "author_nuclei_fixture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pinned_wheel() -> Path:
    import sys

    sys.path.insert(0, str(REPO / "tools"))
    import sources

    try:
        return sources.stardist_wheel(download=False)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def test_author_tool_reproduces_the_packaged_cases_byte_for_byte(tmp_path: Path) -> None:
    from imagebench.fixtures import tree

    author = _author_module()
    assert author.CASES == (
        ("segment-nuclei", "dsb2018"), ("segment-nuclei", "dsb2018-dim"), ("segmentation-qc-metrics", "dsb2018-watershed"),
    )  # fmt: skip
    out = tmp_path / "tree"
    assert author.main(["--wheel", str(_pinned_wheel()), "--out", str(out)]) == 0
    assert tree.verify_tree(out) == []
    written, packaged = tree.load_manifest(out), tree.load_manifest(seg.FIXTURE_ROOT)
    for skill, case_id in author.CASES:
        mine, shipped = written.entry(skill, case_id), packaged.entry(skill, case_id)
        assert mine is not None and shipped is not None
        assert mine == shipped, f"{skill}/{case_id} differs from the packaged entry"
    fx = tree.load_fixture(out, "segment-nuclei", "dsb2018")
    assert fx.citation == author.CITATION


def test_author_tool_refuses_a_wheel_without_the_members(tmp_path: Path) -> None:
    author = _author_module()
    wheel = tmp_path / "stardist-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("stardist/data/other.txt", "x")
    with pytest.raises(SystemExit, match="img2d.tif"):
        author.read_members(wheel)


# --------------------------------------------------------------------------- segmentation-qc-metrics


@pytest.mark.parametrize("seed", [0, 3, 2026])
def test_reference_passes_qc(seed: int) -> None:
    case = CASES["annotation-vs-model"]
    fx = build(case, seed)
    outcome = run_reference(case, fx)
    assert outcome.passed, verdicts(outcome)
    assert all(m.value == 0.0 for m in outcome.metrics)
    assert set(outcome.artifacts) == {"errors"}


@pytest.mark.parametrize("seed", range(6))
def test_qc_builder_controls_its_errors(seed: int) -> None:
    fx = seg.build_qc_pair(seed=seed)
    annotation, model = fx.data["annotation"], fx.data["model"]
    truth = fx.truth
    assert truth["fp"] > 0 and truth["fn"] > 0 and truth["tp"] > 0
    # no pair of objects sits near the 0.5 threshold, so > and >= conventions agree
    iou = label_overlaps(annotation, model).iou()
    assert not np.any((iou >= 0.45) & (iou <= 0.55))
    # model labels are shuffled and non-consecutive: equal values mean nothing across the two images
    values = np.unique(model[model > 0])
    assert values.size > 1 and not np.array_equal(values, np.arange(1, values.size + 1))
    r = match_labels(annotation, model)
    assert (r.precision, r.recall, r.f1) == (truth["precision"], truth["recall"], truth["f1"])


def test_qc_builder_catches_a_wrong_truth(monkeypatch: pytest.MonkeyPatch) -> None:
    real = seg.match_labels

    def off_by_one(truth: Any, pred: Any, iou: float = 0.5) -> Any:
        r = real(truth, pred, iou)
        return replace(r, tp=r.tp + 1)

    monkeypatch.setattr(seg, "match_labels", off_by_one)
    with pytest.raises(FixtureError, match="object-by-object"):
        seg.build_qc_pair(seed=0)


def test_qc_naive_answers_fail() -> None:
    case = CASES["annotation-vs-model"]
    fx = build(case)
    truth = fx.truth
    perfect = case.verify(fx, attempt_with(precision=1.0, recall=1.0, f1=1.0))
    assert not perfect.passed
    # one object miscounted on each side is already outside the limit
    tp, fp, fn = truth["tp"], truth["fp"], truth["fn"]
    p, r = (tp - 1) / (tp + fp), (tp - 1) / (tp + fn)
    off = case.verify(fx, attempt_with(precision=p, recall=r, f1=2 * p * r / (p + r)))
    assert not off.passed and all(v == "fail" for v in verdicts(off).values())
    # pixel-wise scores instead of object matching
    a, m = np.asarray(fx.data["annotation"]) > 0, np.asarray(fx.data["model"]) > 0
    inter = np.count_nonzero(a & m)
    pp, pr = inter / np.count_nonzero(m), inter / np.count_nonzero(a)
    pixel = case.verify(fx, attempt_with(precision=pp, recall=pr, f1=2 * pp * pr / (pp + pr)))
    assert not pixel.passed


def test_qc_unreadable_scalars_are_unavailable() -> None:
    case = CASES["annotation-vs-model"]
    fx = build(case)
    outcome = case.verify(fx, attempt_with(precision="0.9", recall=np.ones(3), f1=1.7))
    assert not outcome.scored and outcome.status == "unscorable-result"
    reasons = {m.name: m.unavailable for m in outcome.metrics}
    assert "str" in reasons["precision_error"]
    assert "shape" in reasons["recall_error"]
    assert "[0, 1]" in reasons["f1_error"]


def test_qc_builder_reverts_pairs_near_the_threshold() -> None:
    # many merges reach near-equal pairs (IoU ~0.5 each), which the builder must undo
    fx = seg.build_qc_pair(seed=0, merges=12, splits=0, misses=0)
    reverted = int(fx.provenance.split("reverted ")[1].split(" ")[0])
    assert reverted > 0
    iou = label_overlaps(fx.data["annotation"], fx.data["model"]).iou()
    assert not np.any((iou >= 0.45) & (iou <= 0.55))


# --------------------------------------------------------------------------- real pixels: dim DSB, real QC, baselines


def run_baseline(case: Case, fixture: Fixture) -> Any:
    session = open_session(case, fixture)
    assert case.baseline is not None, case.label
    case.baseline(session)
    return case.verify(fixture, collect_attempt(case, "baseline", session.lookup))


@pytest.mark.parametrize("case_id", [c.case_id for c in seg.CASES])
def test_every_case_has_a_baseline_that_fails(case_id: str) -> None:
    case = CASES[case_id]
    assert case.baseline is not None and case.baseline_about
    outcome = run_baseline(case, build(case))
    assert outcome.scored and not outcome.passed, verdicts(outcome)


def test_dsb_reference_is_the_synthetic_pipeline() -> None:
    # no reference parameter is chosen on the curated image it is scored on
    assert seg.reference_dsb is seg.reference_synthetic
    for case_id in ("dsb2018", "dsb2018-dim"):
        assert CASES[case_id].reference is seg.reference_synthetic


def test_dim_dsb_is_the_same_field_dimmer_and_noisier() -> None:
    case = CASES["dsb2018-dim"]
    assert case.case_class == "hard-case" and case.available() == (True, "")
    dim = build(case)
    real = build(CASES["dsb2018"])
    assert np.array_equal(np.asarray(dim.truth["labels"]), np.asarray(real.truth["labels"]))
    a, b = np.asarray(dim.data["image"]).astype(float), np.asarray(real.data["image"]).astype(float)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > 0.8  # the same nuclei
    # contrast over the noise is far lower than in the original
    assert (a.std() / np.std(np.diff(a, axis=1))) < (b.std() / np.std(np.diff(b, axis=1)))
    outcome = run_reference(case, dim)
    assert outcome.passed, verdicts(outcome)
    assert outcome.detail["matching"]["n_true"] == 125
    # the dim case really is harder for the same method
    easy = run_reference(CASES["dsb2018"], real)
    assert outcome.metrics[0].value > easy.metrics[0].value


def test_real_qc_case_truth_and_wrong_answers() -> None:
    case = CASES["dsb2018-watershed"]
    assert case.available() == (True, "")
    fx = build(case)
    annotation, model = np.asarray(fx.data["annotation"]), np.asarray(fx.data["model"])
    r = match_labels(annotation, model)
    assert r.fp > 0 and r.fn > 0 and r.n_true == 125
    assert abs(r.precision - seg._number(fx.truth["precision"])) < 1e-12
    assert (r.tp, r.fp, r.fn) == tuple(int(seg._number(fx.truth[k])) for k in ("tp", "fp", "fn"))
    outcome = run_reference(case, fx)
    assert outcome.passed and all(m.value == 0.0 for m in outcome.metrics)
    p, rc, f = seg.pixel_scores(annotation, model)
    assert not case.verify(fx, attempt_with(precision=p, recall=rc, f1=f)).passed
    assert not case.verify(fx, attempt_with(precision=1.0, recall=1.0, f1=1.0)).passed
    tp, fp, fn = r.tp, r.fp, r.fn
    pp, rr = (tp - 2) / (tp + fp), (tp - 2) / (tp + fn)  # two objects miscounted
    assert not case.verify(fx, attempt_with(precision=pp, recall=rr, f1=2 * pp * rr / (pp + rr))).passed
    # matching at IoU > 0 (any overlap) instead of 0.5 is wrong too
    loose = match_labels(annotation, model, iou=0.1)
    assert not case.verify(fx, attempt_with(precision=loose.precision, recall=loose.recall, f1=loose.f1)).passed
