"""Issue 28's leftovers for declared cases: the ``restored`` named verifier (scored as ``denoise`` and
``deconvolution`` are, at a declared data range) and ``label-image``'s declared pixel ``spacing``
(HD95 and mean surface distance in physical units), each with dishonest and bad inputs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from imagebench.case.declared import DeclarationError
from imagebench.cases import get_case
from imagebench.cases.declared import declared_case
from imagebench.cases.restored import peak_range
from imagebench.cases.verifiers import VerifierError, limit_problems, named_verifier
from imagebench.executor import run_cases
from imagebench.fixtures.fixture import Attempt, Fixture, FixtureError
from imagebench.metrics.image import image_scores
from imagebench.metrics.surface import surface_scores
from imagebench.subjects import NopSubject

RESTORED_LIMITS = {"nrmse": 0.2, "ssim_shortfall": 0.2}


def _rows(outcome: Any) -> list[tuple[str, float | None, float, str | None]]:
    return [(m.name, m.value, m.limit, m.unavailable_because) for m in outcome.metrics]


def _user_keys(fx: Fixture, data: str, leaving: str) -> Fixture:
    return replace(
        fx,
        data={"u_raw": fx.data[data], **{k: v for k, v in fx.data.items() if k != data}},
        truth={"u_clean": fx.truth["clean"]},
    )


@pytest.mark.parametrize(
    ("label", "data", "leaving"),
    [("denoise/synthetic-specimen", "noisy", "denoised"), ("deconvolution/synthetic-beads", "blurred", "deconvolved")],
)
def test_restored_scores_as_the_built_in_case_under_the_users_keys(label: str, data: str, leaving: str) -> None:
    case = get_case(label)
    fx = case.build()
    clean = np.asarray(fx.truth["clean"], dtype=np.float64)
    answer = clean + np.random.default_rng(0).normal(0, 0.02 * clean.max(), clean.shape)
    builtin = case.verify(fx, Attempt("s", arrays={leaving: answer}))
    params = {"data": "u_raw", "truth": "u_clean", "leaving": "u_out", "data_range": peak_range(clean)}
    verify = named_verifier("restored", params)
    named = verify(_user_keys(fx, data, leaving), Attempt("s", arrays={"u_out": answer}))
    assert _rows(named) == _rows(builtin) and named.status == builtin.status
    assert named.detail["figures"] == builtin.detail["figures"]
    assert sorted(named.artifacts) == sorted(builtin.artifacts) == ["answer", "difference", "input", "truth"]
    # what it left under the built-in name is not the declared leaving: it left nothing, named as the user's
    wrong_name = verify(_user_keys(fx, data, leaving), Attempt("s", arrays={leaving: answer}))
    assert wrong_name.status == "no-result" and not wrong_name.passed
    assert all("'u_out'" in str(m.unavailable) for m in wrong_name.metrics)


def _pair(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:64, 0:64]
    clean = 100.0 + 900.0 * np.exp(-((yy - 30.0) ** 2 + (xx - 34.0) ** 2) / 80.0)
    noisy = clean + rng.normal(0, 60.0, clean.shape)
    return clean, noisy


def _restored_fixture(clean: np.ndarray, noisy: np.ndarray) -> Fixture:
    return Fixture(
        provenance="test",
        data={"raw": noisy.astype(np.float32)},
        truth={"gt": clean.astype(np.float32)},
        tolerance=dict(RESTORED_LIMITS),
        skill_id="s",
        case_id="c",
    )


def test_restored_at_the_declared_range_honest_wrong_and_dishonest() -> None:
    clean, noisy = _pair()
    fx = _restored_fixture(clean, noisy)
    verify = named_verifier("restored", {"data": "raw", "truth": "gt", "leaving": "out", "data_range": 1000.0})
    honest = verify(fx, Attempt("s", arrays={"out": clean + 1.0}))
    assert honest.passed and honest.status == "ok"
    want = image_scores(clean.astype(np.float32).astype(np.float64), clean.astype(np.float32) + 1.0, data_range=1000.0)
    assert honest.detail["data_range"] == 1000.0
    assert honest.detail["figures"]["psnr_db@range=1000"] == pytest.approx(want.psnr)
    assert next(m.value for m in honest.metrics if m.name == "nrmse") == pytest.approx(want.nrmse)
    # the same answer at another declared range: the SSIM differs, so the range is what was declared
    other = named_verifier("restored", {"data": "raw", "truth": "gt", "leaving": "out", "data_range": 50.0})
    assert other(fx, Attempt("s", arrays={"out": clean + 1.0})).detail["data_range"] == 50.0
    assert not verify(fx, Attempt("s", arrays={"out": noisy})).passed  # the input handed back
    assert not verify(fx, Attempt("s", arrays={"out": np.zeros_like(clean)})).passed
    for bad in (clean[:, :-1], np.full(clean.shape, np.nan), np.where(clean > 500, np.inf, clean), "clean", None):
        outcome = verify(fx, Attempt("s", arrays={"out": bad}))
        assert not outcome.passed and outcome.status in ("unscorable-result", "no-result"), type(bad)
    nothing = verify(fx, Attempt("s", arrays={}))
    assert nothing.status == "no-result" and not nothing.passed


def test_restored_needs_a_declared_range_and_its_grid() -> None:
    with pytest.raises(VerifierError, match="'data_range' is required"):
        named_verifier("restored", {"data": "raw", "truth": "gt"})
    for bad in (0, -1.0, float("nan"), "1000", True):
        with pytest.raises(VerifierError, match="'data_range' must be a positive number"):
            named_verifier("restored", {"data_range": bad})
    assert limit_problems("restored", {"data_range": 1.0}, {"nrmse": 0.1})[0][0] == "tolerance"
    clean, noisy = _pair()
    fx = _restored_fixture(clean, noisy[:, :60])
    with pytest.raises(FixtureError, match="grid of its input"):
        named_verifier("restored", {"data": "raw", "truth": "gt", "data_range": 1000.0})(fx, Attempt("s"))


# --------------------------------------------------------------------------- declared trees


def _tree(root: Path, data: np.ndarray, truth: np.ndarray, body: dict[str, Any]) -> Path:
    from imagebench.fixtures.tree import write_case_layout, write_manifest_entry

    folder = root / "my-skill" / "mine"
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "raw.npy", data)
    np.save(folder / "truth.npy", truth)
    write_case_layout(root, "my-skill", "mine", about="a test", data={"raw": "raw.npy"}, truth={"gt": "truth.npy"})
    write_manifest_entry(root, "my-skill", "mine", provenance="test", citation="none", files=["raw.npy", "truth.npy"])
    path = folder / "bench-case.json"
    path.write_text(json.dumps({"version": 1, "skill": "my-skill", "case_id": "mine", **body}))
    return path


def _restored_body(**params: Any) -> dict[str, Any]:
    return {
        "prompt": "Denoise `image`; leave `out`, the restored image on the same grid and scale.",
        "layers": [{"name": "image", "key": "raw"}],
        "leave": [{"name": "out", "layer": "image", "like": "image"}],
        "verifier": {"name": "restored", "params": {"data": "raw", "truth": "gt", "leaving": "out", **params}},
        "tolerance": dict(RESTORED_LIMITS),
    }


def test_a_declared_restored_case_runs_and_nop_fails(tmp_path: Path) -> None:
    clean, noisy = _pair()
    root = tmp_path / "tree"
    case = declared_case(
        _tree(root, noisy.astype(np.float32), clean.astype(np.float32), _restored_body(data_range=1000)), root
    )
    nop = run_cases([case], NopSubject(), out=tmp_path / "nop", progress=False)
    assert nop.verdicts == {case.label: "fail"} and nop.samples[case.label][0].status == "no-result"
    with pytest.raises(DeclarationError, match=r"field 'verifier.params'.*'data_range' is required"):
        declared_case(_tree(root, noisy, clean, _restored_body()), root)


def _blobs3d() -> np.ndarray:
    labels = np.zeros((12, 40, 40), np.int32)
    labels[3:8, 5:15, 5:15] = 1
    labels[4:10, 20:34, 22:36] = 2
    return labels


def _label_body(**params: Any) -> dict[str, Any]:
    return {
        "prompt": "Segment every nucleus in `image`; leave `labels`, one label per nucleus.",
        "layers": [{"name": "image", "key": "raw", "scale": [2.0, 0.5, 0.5], "units": "um"}],
        "leave": [{"name": "labels", "layer": "labels", "like": "image"}],
        "verifier": {"name": "label-image", "params": {"data": "raw", "truth": "gt", "leaving": "labels", **params}},
        "tolerance": {"f1_shortfall": 0.5, "missed_fraction": 0.5, "false_fraction": 0.5, "iou_shortfall": 0.5},
    }


def test_declared_3d_surface_distances_are_in_the_declared_spacings_units(tmp_path: Path) -> None:
    truth = _blobs3d()
    raw = (truth > 0).astype(np.float32)
    answer = np.roll(truth, 2, axis=2)  # shifted 2 px along x: 1 um at 0.5 um a pixel
    root = tmp_path / "tree"
    case = declared_case(_tree(root, raw, truth, _label_body(spacing=[2.0, 0.5, 0.5])), root)
    fx = case.build()
    figures = case.verify(fx, Attempt("s", arrays={"labels": answer})).detail["figures"]
    want = surface_scores(truth, answer, (2.0, 0.5, 0.5))
    assert figures["unit"] == "um" and figures["spacing"] == [2.0, 0.5, 0.5]
    assert figures["hd95_foreground"] == pytest.approx(want.hd95, abs=1e-6)
    assert figures["msd_foreground"] == pytest.approx(want.msd, abs=1e-6)
    in_px = surface_scores(truth, answer)
    assert figures["hd95_foreground"] != pytest.approx(in_px.hd95)  # not pixels
    # without a spacing the figures stay in pixels, and a unit can be named
    plain = declared_case(_tree(root, raw, truth, _label_body()), root)
    assert plain.verify(fx, Attempt("s", arrays={"labels": answer})).detail["figures"]["unit"] == "px"
    nm = declared_case(_tree(root, raw, truth, _label_body(spacing=[2000, 500, 500], unit="nm")), root)
    nm_figures = nm.verify(fx, Attempt("s", arrays={"labels": answer})).detail["figures"]
    assert nm_figures["unit"] == "nm" and nm_figures["hd95_foreground"] == pytest.approx(1000 * want.hd95, rel=1e-6)


@pytest.mark.parametrize(
    ("spacing", "message"),
    [
        ([0.5, 0.5], r"field 'verifier.params.spacing'.*2 pixel sizes.*3 dimensions"),
        ([2.0, 0.5, 0.5, 1.0], r"field 'verifier.params.spacing'.*4 pixel sizes"),
        ([2.0, -0.5, 0.5], r"field 'verifier.params'.*'spacing' must be a list of positive numbers"),
        ([2.0, 0.0, 0.5], r"'spacing' must be a list of positive numbers"),
        ("0.5", r"'spacing' must be a list of positive numbers"),
        ([], r"'spacing' must be a list of positive numbers"),
    ],
)
def test_a_bad_spacing_is_named_when_the_case_loads(tmp_path: Path, spacing: Any, message: str) -> None:
    truth = _blobs3d()
    root = tmp_path / "tree"
    with pytest.raises(DeclarationError, match=message):
        declared_case(_tree(root, (truth > 0).astype(np.float32), truth, _label_body(spacing=spacing)), root)


def test_a_spacing_that_does_not_fit_the_truth_is_the_cases_fault_at_scoring() -> None:
    truth = _blobs3d()
    fx = Fixture(
        provenance="t",
        data={"raw": truth.astype(np.float32)},
        truth={"gt": truth},
        tolerance={"f1_shortfall": 0.5},
        skill_id="s",
        case_id="c",
    )
    verify = named_verifier(
        "label-image", {"data": "raw", "truth": "gt", "spacing": [1.0, 1.0], "metrics": ["f1_shortfall"]}
    )
    with pytest.raises(FixtureError, match="'spacing'.*3 dimension"):
        verify(fx, Attempt("s", arrays={"labels": truth}))
