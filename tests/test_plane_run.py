"""The plane inside a run: uploads, isolation, overwrite flags, skipping, lifetime, and the tensor drift case."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyarrow.flight")
zarr = pytest.importorskip("zarr")

from helpers import make_toy_case, toy_fixture, truth_leaks  # noqa: E402

from imagebench.case.model import Case, Layer, Skill, presentation_warnings  # noqa: E402
from imagebench.cli.tables import results_table  # noqa: E402
from imagebench.executor import run_cases  # noqa: E402
from imagebench.fixtures.fixture import Attempt, Fixture  # noqa: E402
from imagebench.plane import RunPlane  # noqa: E402
from imagebench.plane import process as plane_process  # noqa: E402
from imagebench.records import SampleSummary, read_record  # noqa: E402
from imagebench.runs.layout import sample_dir  # noqa: E402
from imagebench.subjects import NopSubject, ReferenceSubject, parse_subject  # noqa: E402

TENSOR_LAYER = Layer("image", "image", "image", presentation="tensor", chunks=(8, 8), dim_labels=("y", "x"))


def tensor_reference(session: Any) -> None:
    """The toy reference, reading its image lazily through the plane's client."""
    image = session.client.get(session.namespace["fixture_tensors"]["image"]).compute()
    mask = image > 0.5
    session.namespace["mask"] = mask
    session.namespace["area"] = int(mask.sum())


def tensor_case(case_id: str = "lazy-rectangle", **kw: Any) -> Case:
    return make_toy_case(case_id, layers=(TENSOR_LAYER,), reference=tensor_reference, **kw)


@pytest.fixture(scope="module")
def plane() -> Any:
    with RunPlane.start() as p:
        yield p


def _stored(plane: RunPlane) -> dict[str, np.ndarray]:
    client = plane.client
    return {sid: np.asarray(client.get(sid).compute()) for sid in client.list()}


def _built(case: Case) -> Fixture:
    return case.build()


# --------------------------------------------------------------------------- RunPlane


def test_upload_fixture_uploads_only_tensor_data(plane: RunPlane) -> None:
    rng = np.random.default_rng(0)
    fixture = Fixture(
        provenance="test",
        data={"image": rng.random((20, 20)).astype(np.float32), "side": rng.random((6, 6))},
        truth={"mask": rng.random((20, 20)) > 0.5, "secret": rng.random((9, 9))},
        skill_id="toy",
        case_id="two-layers",
    )
    case = replace(
        make_toy_case("two-layers"),
        layers=(TENSOR_LAYER, Layer("side", "side", "image")),
    )
    before = set(plane.client.list())
    ids = plane.upload_fixture(case, fixture)
    assert list(ids) == ["image"]
    assert set(plane.client.list()) - before == {ids["image"]}
    stored = plane.client.get(ids["image"]).compute()
    assert np.array_equal(stored, fixture.data["image"])
    d = plane.client.describe(ids["image"])
    assert d["chunks"] == [8, 8] and d["dim_labels"] == ["y", "x"]
    # the same fixture again: nothing new is uploaded
    assert plane.upload_fixture(case, fixture) == ids
    assert set(plane.client.list()) - before == {ids["image"]}
    assert plane.fixture_ids(case) == ids and ids["image"] in plane.harness_ids()
    for value in _stored(plane).values():
        assert not truth_leaks(dict(fixture.truth), blob=value.tobytes(), array=value)
        assert not np.array_equal(value, fixture.data["side"])  # an array layer's data stays off the plane
    assert plane.overwritten(case) == []


def test_concurrent_presents_of_one_fixture_upload_once(plane: RunPlane) -> None:
    from concurrent.futures import ThreadPoolExecutor

    case = tensor_case("prefetched")
    fixture = case.build()
    before = set(plane.client.list())
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: plane.present(case, fixture), range(4)))
    assert all(a == answers[0] for a in answers)
    assert set(plane.client.list()) - before == {answers[0]["image"]}


def test_points_cannot_be_presented_as_tensor(plane: RunPlane) -> None:
    case = replace(make_toy_case("points"), layers=(Layer("image", "image", "points", presentation="tensor"),))
    with pytest.raises(ValueError, match="only image and labels"):
        plane.upload_fixture(case, toy_fixture())


# --------------------------------------------------------------------------- in a run


def test_truth_never_reaches_the_plane_in_a_run(plane: RunPlane, tmp_path: Path) -> None:
    case = tensor_case("no-leak")
    result = run_cases([case], ReferenceSubject(), samples=2, out=tmp_path, progress=False, plane=plane)
    assert result.verdicts == {case.label: "pass"}
    fixture = _built(case)
    ids = plane.fixture_ids(case)
    assert set(ids) == {"image"}
    stored = _stored(plane)
    assert ids["image"] in stored
    assert set(stored) <= plane.harness_ids()  # the reference uploads nothing of its own
    for value in stored.values():
        assert not truth_leaks(dict(fixture.truth), blob=value.tobytes(), array=value)


@dataclass(frozen=True)
class Tamperer:
    """Writes into the stored fixture behind the plane's back, then solves the case properly."""

    data_dir: Path
    name: str = "tamperer"

    def __call__(self, session: Any) -> None:
        sid = session.namespace["fixture_tensors"]["image"]
        level0 = zarr.open_array(store=str(self.data_dir / "arrays" / sid / "0"), mode="r+")
        level0[0, 0] = float(level0[0, 0]) + 100.0
        tensor_reference(session)


@dataclass(frozen=True)
class OwnUploader:
    """Uploads a result of its own (allowed) and solves the case."""

    name: str = "uploader"

    def __call__(self, session: Any) -> None:
        tensor_reference(session)
        session.namespace["own_id"] = session.client.upload(np.asarray(session.namespace["mask"], np.uint8), "mine")


def test_a_subject_that_overwrites_a_fixture_is_flagged(plane: RunPlane, tmp_path: Path) -> None:
    assert plane.data_dir is not None
    case = tensor_case("tampered")
    result = run_cases([case], Tamperer(plane.data_dir), samples=1, out=tmp_path, progress=False, plane=plane)
    (summary,) = result.samples[case.label]
    assert summary.flags == ["fixture-overwritten"]
    # it solved the case properly, but what it was scored against changed: never a success
    assert summary.status == "fixture-overwritten" and not summary.passed
    assert result.verdicts[case.label] == "fail" and result.exit_code == 1
    from imagebench.scoring.aggregates import aggregate

    figures = aggregate([summary], k=1).figures
    assert all(f.value == 0.0 for name, f in figures.items() if name.startswith("pass")), figures
    on_disk = read_record(sample_dir(result.run_dir, "tamperer", case, 0) / "summary.json", SampleSummary)
    assert on_disk.flags == ["fixture-overwritten"]
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(results_table(result))
    assert "fixture-overwritten" in console.export_text()
    assert plane.overwritten(case) == ["image"]


def test_a_fixture_removed_from_the_store_is_flagged(plane: RunPlane) -> None:
    import shutil

    assert plane.data_dir is not None
    case = tensor_case("removed")
    ids = plane.upload_fixture(case, case.build())
    assert plane.overwritten(case) == []
    shutil.rmtree(plane.data_dir / "arrays" / ids["image"])
    assert plane.overwritten(case) == ["image"]


def test_a_plane_that_dies_mid_run_is_a_harness_error(tmp_path: Path) -> None:
    with RunPlane.start() as dying:

        @dataclass(frozen=True)
        class Killer:
            name: str = "killer"

            def __call__(self, session: Any) -> None:
                tensor_reference(session)
                assert dying.process.proc is not None
                dying.process.proc.kill()
                dying.process.proc.wait()

        case = tensor_case("dies")
        result = run_cases([case], Killer(), out=tmp_path, progress=False, plane=dying)
        (summary,) = result.samples[case.label]
        assert summary.status == "harness-error" and "stopped during the run" in summary.reason
        assert summary.flags == []


def test_own_uploads_are_not_flagged_and_persist(plane: RunPlane, tmp_path: Path) -> None:
    case = tensor_case("own-upload")
    result = run_cases([case], OwnUploader(), out=tmp_path, progress=False, plane=plane)
    (summary,) = result.samples[case.label]
    assert summary.status == "ok" and summary.flags == []
    from imagebench.plane import source_id

    assert source_id("mine") in plane.client.list()  # it stays until the run's plane goes


def test_the_run_owns_its_plane_and_removes_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started: list[RunPlane] = []
    real = RunPlane.try_start.__func__  # type: ignore[attr-defined]

    def spy(cls: type[RunPlane], *a: Any, **kw: Any) -> tuple[RunPlane | None, str]:
        got = real(cls, *a, **kw)
        if got[0] is not None:
            started.append(got[0])
        return got

    monkeypatch.setattr(RunPlane, "try_start", classmethod(spy))
    # an array-only selection starts no plane at all
    run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False)
    assert started == []
    result = run_cases([tensor_case(), make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False)
    assert result.verdicts == {"toy/lazy-rectangle": "pass", "toy/rectangle": "pass"}
    (plane,) = started
    assert not plane.alive and plane.data_dir is not None and not plane.data_dir.exists()
    assert plane.process.proc is not None and plane.process.proc.poll() is not None


@pytest.mark.parametrize("error", [RuntimeError("crash in the run"), KeyboardInterrupt()])
def test_the_plane_stops_when_the_run_is_interrupted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, error: BaseException
) -> None:
    started: list[RunPlane] = []
    real = RunPlane.try_start.__func__  # type: ignore[attr-defined]

    def spy(cls: type[RunPlane], *a: Any, **kw: Any) -> tuple[RunPlane | None, str]:
        got = real(cls, *a, **kw)
        started.append(got[0])  # type: ignore[arg-type]
        return got

    monkeypatch.setattr(RunPlane, "try_start", classmethod(spy))

    def explode(summary: SampleSummary) -> None:
        raise error

    with pytest.raises(type(error)):
        run_cases([tensor_case()], ReferenceSubject(), out=tmp_path, progress=False, on_sample=explode)
    (plane,) = started
    assert plane.process.proc is not None and plane.process.proc.poll() is not None
    assert plane.data_dir is not None and not plane.data_dir.exists()


def test_without_a_plane_tensor_cases_skip_and_array_cases_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The real start-up path, with a server that exits at once.
    monkeypatch.setattr(
        plane_process.PlaneProcess, "argv", lambda self: [sys.executable, "-c", "import sys; sys.exit(4)"]
    )
    result = run_cases([tensor_case(), make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False)
    assert result.verdicts == {"toy/lazy-rectangle": "skipped", "toy/rectangle": "pass"}
    (skipped,) = result.samples["toy/lazy-rectangle"]
    assert skipped.status == "skipped" and "exited with code 4" in skipped.reason
    monkeypatch.setitem(sys.modules, "pyarrow.flight", None)
    result = run_cases([tensor_case()], ReferenceSubject(), out=tmp_path, progress=False)
    assert "pyarrow.flight is not installed" in result.samples["toy/lazy-rectangle"][0].reason


def test_only_tensor_cases_see_the_plane(plane: RunPlane, tmp_path: Path) -> None:
    command = parse_subject(
        'command:echo "url=${IMAGEBENCH_TENSOR_URL:-none}"; test -f fixture_tensors.json && echo ids=yes || echo ids=no'
    )
    lazy, eager = tensor_case("env-lazy"), make_toy_case("env-eager")
    result = run_cases([lazy, eager], command, out=tmp_path, progress=False, plane=plane)
    out_lazy = (sample_dir(result.run_dir, command.name, lazy, 0) / "stdout.txt").read_text()
    out_eager = (sample_dir(result.run_dir, command.name, eager, 0) / "stdout.txt").read_text()
    assert f"url={plane.url}" in out_lazy and "ids=yes" in out_lazy
    assert "url=none" in out_eager and "ids=no" in out_eager

    seen: dict[str, Any] = {}

    @dataclass(frozen=True)
    class Recorder:
        name: str = "recorder"

        def __call__(self, session: Any) -> None:
            seen[session.label] = (session.client, session.namespace.get("fixture_tensors"))

    run_cases([lazy, eager], Recorder(), out=tmp_path, progress=False, plane=plane)
    assert seen[eager.label] == (None, None)
    client, tensors = seen[lazy.label]
    assert client is not None and client.url == plane.url and set(tensors) == {"image"}


# --------------------------------------------------------------------------- coverage


def _toy_skill_cases(presentation: str) -> list[Case]:
    layer = Layer("image", "image", "image", presentation=presentation)  # type: ignore[arg-type]
    return [make_toy_case("cov", namespace="toy-skill", layers=(layer,))]


def test_coverage_warning_until_a_case_presents_tensor(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    skills = {"toy-skill": Skill("toy-skill", checklist=("dask", "tensor"))}
    assert len(presentation_warnings(skills, _toy_skill_cases("array"))) == 1
    assert presentation_warnings(skills, _toy_skill_cases("array") + [replace(tensor_case(), namespace="toy-skill")]) == []

    from imagebench import cases as builtin
    from imagebench import cli

    monkeypatch.setattr(builtin, "all_cases", lambda: _toy_skill_cases("array"))
    monkeypatch.setattr(builtin, "skills", lambda: skills)
    monkeypatch.delenv("IMAGEBENCH_FIXTURES", raising=False)
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "coverage warning" in out and "toy-skill" in out


def test_the_builtin_drift_skill_is_covered_by_the_tensor_case() -> None:
    from imagebench.cases import drift, drift_tensor

    skills = {s.skill_id: s for s in drift.SKILLS}
    assert skills["drift-correction"].checklist == ("dask", "tensor")
    assert len(presentation_warnings(skills, drift.CASES)) == 1
    assert presentation_warnings(skills, drift.CASES + drift_tensor.CASES) == []
    from imagebench import cases as builtin

    assert "drift-correction/large-field-tensor" in [c.label for c in builtin.all_cases()]
    assert not [w for w in presentation_warnings(builtin.skills(), builtin.all_cases()) if "drift-correction" in w]


# --------------------------------------------------------------------------- the tensor drift case


def test_drift_tensor_reference_passes_through_the_plane(plane: RunPlane, tmp_path: Path) -> None:
    from imagebench.cases import drift_tensor

    (case,) = drift_tensor.CASES
    assert case.presentations == {"tensor"}
    result = run_cases([case], ReferenceSubject(), out=tmp_path, progress=False, plane=plane)
    (summary,) = result.samples[case.label]
    assert summary.status == "ok", summary.reason
    assert summary.flags == []
    assert sorted(summary.artifacts) == ["corrected_mean.png", "raw_mean.png"]
    d = plane.client.describe(plane.fixture_ids(case)["movie"])
    assert d["shape"] == [8, 1024, 1024] and d["dtype"] == "uint16" and d["chunks"] == [1, 256, 256]
    assert d["levels"] == [[8, 1024, 1024], [8, 512, 512], [8, 256, 256]]
    nop = run_cases([case], NopSubject(), out=tmp_path, progress=False, plane=plane)
    assert nop.samples[case.label][0].status == "no-result"


def test_drift_tensor_verifier_discriminates() -> None:
    from imagebench.cases import drift_tensor

    (case,) = drift_tensor.CASES
    fixture = case.build()
    truth = np.asarray(fixture.truth["trajectory"])
    assert "trajectory" not in fixture.data and fixture.data["movie"].dtype == np.uint16

    def score(shifts: Any) -> Any:
        return drift_tensor.verify_large_field(fixture, Attempt("t", {"shifts": shifts}))

    assert score(truth + 0.01).passed
    assert not score(np.rint(truth)).passed  # whole-pixel accuracy is not enough
    assert not score(np.zeros_like(truth)).passed
    flipped = score(-truth)
    assert not flipped.passed and "negated" in flipped.detail["hint"]
    wrong = score(np.zeros((3, 2)))
    assert not wrong.passed and all(m.value is None for m in wrong.metrics)


def test_drift_tensor_builder_is_deterministic() -> None:
    from imagebench.cases import drift_tensor

    a = drift_tensor.build_large_field(seed=1, size=256, frames=3)
    b = drift_tensor.build_large_field(seed=1, size=256, frames=3)
    assert np.array_equal(a.data["movie"], b.data["movie"])
    assert np.array_equal(a.truth["trajectory"], b.truth["trajectory"])
    assert a.truth["trajectory"][0].tolist() == [0.0, 0.0]
