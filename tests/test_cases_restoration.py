"""The denoising and deconvolution cases (issue 28): builders, reference/baseline/nop, the verifier's
refusals, dishonest answers, and an agent answering through the MCP tools.

The reference passes every case and the baseline and nop fail each; the input given back, a
constant, the truth's mean and (for deconvolution) a fixed unsharp mask fail; an answer of the wrong
shape, a non-real dtype or a NaN is refused with its reason named, never scored; the verifier's
numbers are scikit-image's.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import truth_leaks

from imagebench import cases as builtin
from imagebench.case.session import collect_attempt, open_session
from imagebench.cases import deconvolution, restoration
from imagebench.cases.restored import RESTORED_METRICS, gaussian_psf, photon_camera, specimen
from imagebench.fixtures.fixture import Attempt

CASES = restoration.CASES + deconvolution.CASES
LABELS = [c.label for c in CASES]
LEAVING = {restoration.DENOISE: ("denoised", "noisy"), deconvolution.DECONVOLUTION: ("deconvolved", "blurred")}


def _attempt(case, fixture, solve) -> Attempt:
    session = open_session(case, fixture)
    if solve is not None:
        solve(session)
    return collect_attempt(case, "t", session.lookup)


@pytest.fixture(scope="module")
def built():
    return {c.label: (c, c.fixture.build(c.namespace, c.case_id)) for c in CASES}


def _rows(outcome) -> list[tuple[str, float | None, float]]:
    return [(m.name, m.value, m.limit) for m in outcome.metrics]


def test_the_skills_cases_and_builders_are_registered() -> None:
    labels = [c.label for c in builtin.all_cases()]
    assert set(LABELS) <= set(labels)
    assert {"denoise", "deconvolution"} <= set(builtin.skills()) and len(builtin.skills()) >= 14
    assert builtin.builders()["denoise-synthetic"] is restoration.build_noisy_specimen
    assert builtin.builders()["deconvolution-synthetic"] is deconvolution.build_blurred_specimen
    for skill in (restoration.DENOISE, deconvolution.DECONVOLUTION):
        kinds = {c.kind for c in CASES if c.namespace == skill}
        assert kinds == {"synthetic", "curated"}, skill
    for case in CASES:
        name, like = LEAVING[case.namespace]
        (collect,) = case.collect
        assert (collect.name, collect.layer, collect.like) == (name, "image", like)
    assert [layer.key for layer in deconvolution.CASES[0].layers] == ["blurred", "psf"]
    assert "`psf`" in deconvolution.CASES[0].task  # the PSF is given, and the task says so


def test_the_builders_are_seeded_and_the_camera_is_poisson_gaussian() -> None:
    a, b = restoration.build_noisy_specimen(seed=5), restoration.build_noisy_specimen(seed=5)
    assert np.array_equal(a.data["noisy"], b.data["noisy"]) and np.array_equal(a.truth["clean"], b.truth["clean"])
    assert not np.array_equal(a.truth["clean"], restoration.build_noisy_specimen(seed=6).truth["clean"])
    assert set(a.data).isdisjoint(a.truth) and a.truth["clean"].max() == pytest.approx(100.0)
    d = deconvolution.build_blurred_specimen(seed=5)
    assert d.data["psf"].shape == (17, 17) and d.data["psf"].sum() == pytest.approx(1.0, abs=1e-6)
    assert d.truth["clean"].max() == pytest.approx(2000.0) and set(d.data).isdisjoint(d.truth)
    # shot noise's variance is the mean, plus the read noise's
    flat = np.full((400, 400), 50.0)
    image = photon_camera(np.random.default_rng(1), flat, 2.0)
    assert image.dtype == np.float32
    assert float(image.mean()) == pytest.approx(50.0, abs=0.1)
    assert float(image.var()) == pytest.approx(54.0, rel=0.03)
    assert specimen(3).max() == pytest.approx(1.0) and specimen(3).min() > 0
    assert gaussian_psf(2.0).sum() == pytest.approx(1.0)


@pytest.mark.parametrize("label", LABELS)
def test_reference_passes_baseline_and_nop_fail(built, label: str) -> None:
    case, fixture = built[label]
    assert {name for name, _ in RESTORED_METRICS} == set(fixture.tolerance)
    ref = case.verify(fixture, _attempt(case, fixture, case.reference))
    assert ref.passed, _rows(ref)
    base = case.verify(fixture, _attempt(case, fixture, case.baseline))
    assert not base.passed, _rows(base)
    nop = case.verify(fixture, _attempt(case, fixture, None))
    assert not nop.passed and nop.status == "no-result" and all(m.value is None for m in nop.metrics)
    assert set(ref.artifacts) == {"truth", "input", "answer", "difference"}
    assert set(nop.artifacts) == {"truth", "input"}  # a number and an artifact even for nothing left
    assert ref.detail["data_range"] == pytest.approx(float(np.max(fixture.truth["clean"])))


@pytest.mark.parametrize("label", LABELS)
def test_dishonest_answers_fail(built, label: str) -> None:
    """The input given back, a constant, the truth's own mean level, and the input scaled: none passes."""
    case, fixture = built[label]
    name, data_key = LEAVING[case.namespace]
    given = np.asarray(fixture.data[data_key], dtype=np.float32)
    for answer in (given, np.zeros_like(given), np.full_like(given, float(given.mean())), given * 1.5):
        outcome = case.verify(fixture, Attempt("s", arrays={name: answer}))
        assert not outcome.passed, _rows(outcome)
        assert outcome.status == "wrong-answer"


def test_a_fixed_unsharp_mask_does_not_pass_for_deconvolution(built) -> None:
    from skimage.filters import unsharp_mask

    for case in deconvolution.CASES:
        _, fixture = built[case.label]
        sharpened = unsharp_mask(
            np.asarray(fixture.data["blurred"], np.float64), radius=2, amount=1.0, preserve_range=True
        )
        assert not case.verify(fixture, Attempt("s", arrays={"deconvolved": sharpened})).passed


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (np.zeros((255, 256), np.float32), "expected (256, 256)"),
        (np.zeros((256, 256, 1), np.float32), "expected (256, 256)"),
        (np.zeros((256, 256), np.complex64), "expected kind 'iuf'"),
        (np.zeros((256, 256), bool), "expected kind 'iuf'"),
        (np.full((256, 256), np.nan, np.float32), "contains NaN or infinite"),
        ("an image", "expected an array"),
    ],
    ids=["short", "3-d", "complex", "bool", "nan", "text"],
)
def test_the_verifier_refuses_what_it_cannot_score_naming_why(built, answer, words: str) -> None:
    case, fixture = built["denoise/synthetic-specimen"]
    outcome = case.verify(fixture, Attempt("s", arrays={"denoised": answer}))
    assert not outcome.passed and outcome.status == "unscorable-result"
    assert all(m.value is None and words in str(m.unavailable) for m in outcome.metrics)
    assert words in outcome.detail["why"]


def test_one_infinite_pixel_is_refused(built) -> None:
    case, fixture = built["deconvolution/synthetic-beads"]
    answer = np.asarray(fixture.truth["clean"], np.float32).copy()
    answer[3, 4] = np.inf
    outcome = case.verify(fixture, Attempt("s", arrays={"deconvolved": answer}))
    assert outcome.status == "unscorable-result" and "contains NaN or infinite" in outcome.detail["why"]


def test_the_scores_are_scikit_images_at_the_declared_range(built) -> None:
    from skimage.metrics import normalized_root_mse, peak_signal_noise_ratio, structural_similarity

    case, fixture = built["denoise/dsb2018-nuclei"]
    attempt = _attempt(case, fixture, case.reference)
    outcome = case.verify(fixture, attempt)
    truth = np.asarray(fixture.truth["clean"], np.float64)
    answer = np.asarray(attempt.arrays["denoised"], np.float64)
    r = 200.0
    assert outcome.detail["data_range"] == pytest.approx(r, rel=1e-6)
    values = {m.name: m.value for m in outcome.metrics}
    assert values["nrmse"] == pytest.approx(normalized_root_mse(truth, answer), rel=1e-12)
    assert values["ssim_shortfall"] == pytest.approx(1 - structural_similarity(truth, answer, data_range=r), rel=1e-9)
    figures = outcome.detail["figures"]
    psnr_name = next(k for k in figures if k.startswith("psnr_db@range=") and "limit" not in k)
    assert figures[psnr_name] == pytest.approx(peak_signal_noise_ratio(truth, answer, data_range=r), rel=1e-6)
    # the PSNR the nrmse limit stands for: an answer exactly at it has that PSNR
    floor = next(v for k, v in figures.items() if "limit" in k)
    limit = fixture.tolerance["nrmse"]
    at_limit = truth + limit * np.sqrt(np.mean(truth**2))
    assert peak_signal_noise_ratio(truth, at_limit, data_range=r) == pytest.approx(floor, rel=1e-6)
    assert outcome.detail["input_figures"]["nrmse"] > values["nrmse"]


def test_the_stopping_rule_stops_when_the_residual_reaches_the_noise() -> None:
    fixture = deconvolution.build_blurred_specimen(seed=2026, size=128)
    blurred, psf = fixture.data["blurred"], fixture.data["psf"]
    estimate = deconvolution.deconvolve(blurred, psf)
    assert deconvolution.discrepancy(np.asarray(blurred, float), estimate, psf, 2.0) <= deconvolution.DISCREPANCY
    # the input itself is far from explaining the data through the PSF
    assert deconvolution.discrepancy(np.asarray(blurred, float), np.asarray(blurred, float), psf, 2.0) > 1.2


# --------------------------------------------------------------------------- through the MCP tools


def _agent(case, fixture):
    from imagebench.subjects.mcp.tools import AgentSession, CaseView

    return AgentSession(CaseView.of(case), open_session(case, fixture))


@pytest.mark.parametrize("label", ["denoise/synthetic-specimen", "deconvolution/synthetic-beads"])
def test_an_mcp_agent_answers_with_an_image_layer(built, label: str) -> None:
    pytest.importorskip("mcp")
    from imagebench.subjects.mcp.tools import ToolError

    case, fixture = built[label]
    name, data_key = LEAVING[case.namespace]
    agent = _agent(case, fixture)
    layers = {x["name"]: x for x in agent.list_layers()["layers"]}
    assert layers[data_key]["shape"] == [256, 256]
    read = agent.read_layer(data_key, encoding="base64")
    import base64

    given = np.frombuffer(base64.b64decode(read["data"]), dtype=np.dtype(read["dtype"])).reshape(read["shape"])
    assert np.array_equal(given, fixture.data[data_key])
    if case.namespace == deconvolution.DECONVOLUTION:
        psf = np.asarray(agent.read_layer("psf")["data"], np.float64)
        answer = deconvolution.deconvolve(given, psf)
    else:
        answer = restoration.denoise_image(given)
    with pytest.raises(ToolError, match="differs from its input"):
        agent.add_layer(name, "image", data=answer[:-1].tolist())
    with pytest.raises(ToolError, match="must be an? image layer, not labels"):
        agent.add_layer(name, "labels", data=np.zeros((256, 256), int).tolist())
    agent.add_layer(name, "image", data=answer.tolist())
    agent.submit()
    session = open_session(case, fixture)
    agent.apply_to(session)
    outcome = case.verify(fixture, collect_attempt(case, "agent", session.lookup))
    assert outcome.passed, _rows(outcome)
    assert not truth_leaks(dict(fixture.truth), blob=str(agent.list_layers()).encode())


def test_an_mcp_agent_answers_spots_with_a_points_layer() -> None:
    """The spot cases through the same tools: a points layer of (row, col) rows is the answer."""
    pytest.importorskip("mcp")
    from imagebench.cases import spots
    from imagebench.subjects.mcp.tools import ToolError

    case = spots.CASES[0]
    fixture = case.fixture.build(case.namespace, case.case_id)
    agent = _agent(case, fixture)
    image = np.asarray(agent.read_layer("image")["data"])
    found = spots.detect_spots(image, **spots.REFERENCE_PARAMS)
    with pytest.raises(ToolError, match="must be a points layer, not image"):
        agent.add_layer("spots", "image", data=image.tolist())
    agent.add_layer("spots", "points", data=found.tolist())
    session = open_session(case, fixture)
    agent.apply_to(session)
    outcome = case.verify(fixture, collect_attempt(case, "agent", session.lookup))
    assert outcome.passed, _rows(outcome)


def test_the_figures_line_shows_the_restored_figures_not_a_segmentations(built) -> None:
    from imagebench.runs.explain import figures_line

    case, fixture = built[LABELS[0]]
    ref = case.verify(fixture, _attempt(case, fixture, case.reference))
    line = figures_line(ref.detail["figures"], ref.detail["input_figures"])
    r = ref.detail["data_range"]
    assert f"psnr_db@range={r:g} " in line and "the input as given:" in line
    assert "AP@" not in line and "undefined" not in line
