"""segment-nuclei-3d: the synthetic and the real (tensor) case; references pass, baselines and naive answers fail."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from imagebench.case.model import presentation_warnings
from imagebench.case.session import collect_attempt, open_session
from imagebench.cases import all_cases, builders, skills
from imagebench.cases import segmentation3d as s3
from imagebench.fixtures.fixture import Attempt
from imagebench.matching import match_labels

CASES = {c.case_id: c for c in s3.CASES}


def _attempt(labels: Any) -> Attempt:
    return Attempt(subject="test", arrays={"labels": labels})


def _fixture(seed: int) -> Any:
    case = CASES["synthetic-ellipsoids"]
    return replace(case.fixture, seed=seed).build(case.namespace, case.case_id)


def test_registered_with_a_tensor_case() -> None:
    labels = {c.label for c in all_cases()}
    assert {"segment-nuclei-3d/synthetic-ellipsoids", "segment-nuclei-3d/stardist-3d"} <= labels
    assert skills()[s3.SKILL_ID].checklist == ("labels", "tensor")
    assert builders()["nuclei-3d-synthetic"] is s3.build_synthetic_nuclei_3d
    assert CASES["stardist-3d"].presentations == {"tensor"} and CASES["stardist-3d"].kind == "curated"
    assert presentation_warnings({s3.SKILL_ID: s3.SKILLS[0]}, s3.CASES) == []


def test_builder_is_deterministic_touching_and_3d() -> None:
    a, b = s3.build_synthetic_nuclei_3d(seed=4), s3.build_synthetic_nuclei_3d(seed=4)
    assert np.array_equal(a.data["image"], b.data["image"]) and np.array_equal(a.truth["labels"], b.truth["labels"])
    labels = np.asarray(a.truth["labels"])
    assert labels.shape == s3.SHAPE and np.unique(labels[labels > 0]).size == 30
    touching = (labels[:, 1:] != labels[:, :-1]) & (labels[:, 1:] > 0) & (labels[:, :-1] > 0)
    assert touching.sum() > 20  # some nuclei share a face


@pytest.mark.parametrize("seed", [0, 7, 2026])
def test_reference_passes_and_baseline_fails_synthetic(seed: int) -> None:
    case = CASES["synthetic-ellipsoids"]
    fx = _fixture(seed)
    for who, fn, passes in (("reference", case.reference, True), ("baseline", case.baseline, False)):
        session = open_session(case, fx)
        fn(session)
        outcome = case.verify(fx, collect_attempt(case, who, session.lookup))
        assert outcome.passed is passes, (who, {m.name: m.value for m in outcome.metrics})


def test_naive_answers_fail_synthetic() -> None:
    case = CASES["synthetic-ellipsoids"]
    fx = _fixture(2026)
    truth = np.asarray(fx.truth["labels"])
    assert case.verify(fx, _attempt(truth)).passed
    assert not case.verify(fx, _attempt(np.zeros_like(truth))).passed
    # every slice segmented on its own: each nucleus is cut into z pieces that match nothing in 3D
    per_slice = np.zeros_like(truth)
    offset = 0
    from scipy import ndimage as ndi

    for z in range(truth.shape[0]):
        lab, n = ndi.label(truth[z] > 0)
        per_slice[z] = np.where(lab > 0, lab + offset, 0)
        offset += n
    assert not case.verify(fx, _attempt(per_slice)).passed
    # the truth moved by 2 slices in z: boundaries off by two coarse steps
    assert not case.verify(fx, _attempt(np.roll(truth, 2, axis=0))).passed
    bad = case.verify(fx, _attempt(np.zeros(truth.shape[1:], np.int32)))
    assert not bad.scored and bad.status == "unscorable-result"


def test_stardist_case_reference_through_a_client_and_baseline_fail() -> None:
    case = CASES["stardist-3d"]
    assert case.available() == (True, "")
    fx = case.build()
    image = np.asarray(fx.data["image"])
    assert image.shape == (31, 61, 57) and np.unique(np.asarray(fx.truth["labels"])).size == 52

    class _Lazy:
        def __init__(self, array: np.ndarray) -> None:
            self.array = array

        def compute(self, **_: Any) -> np.ndarray:
            return self.array

    class _Client:  # stands in for the plane's client: hands the stack back lazily by id
        def get(self, sid: str) -> _Lazy:
            assert sid == "cache_0123456789ab"
            return _Lazy(image)

    class _Session:
        namespace: dict[str, Any] = {"fixture_tensors": {"nuclei": "cache_0123456789ab"}}
        client = _Client()

    session = _Session()
    case.reference(session)
    outcome = case.verify(fx, _attempt(session.namespace["labels"]))
    assert outcome.passed, {m.name: m.value for m in outcome.metrics}
    case.baseline(session)
    assert not case.verify(fx, _attempt(session.namespace["labels"])).passed
    session.client = None
    with pytest.raises(RuntimeError, match="no client"):
        case.reference(session)


def test_stardist_case_runs_through_the_plane(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow.flight")
    pytest.importorskip("zarr")
    from imagebench.executor import run_cases
    from imagebench.plane import RunPlane
    from imagebench.subjects import ReferenceSubject

    case = CASES["stardist-3d"]
    with RunPlane.start() as plane:
        result = run_cases([case], ReferenceSubject(), out=tmp_path, progress=False, plane=plane)
    (summary,) = result.samples[case.label]
    assert summary.status == "ok", summary.reason


def test_3d_matching_differs_from_slice_matching() -> None:
    fx = _fixture(1)
    truth = np.asarray(fx.truth["labels"])
    r = match_labels(truth, truth)
    assert r.tp == 30 and r.f1 == 1.0
