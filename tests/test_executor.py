"""Units on dask.distributed workers: the same results as a serial run, field by field.

One LocalCluster (built by ``executor.local_cluster``, as ``--workers`` does) serves the whole
module; runs reach it through ``scheduler=`` so no test pays for a second start-up.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import TOY_TOLERANCE, make_toy_case, toy_fixture

from imagebench import cli
from imagebench import executor as ex
from imagebench.case.model import Layer
from imagebench.executor import cluster as ex_cluster
from imagebench.executor import run_cases
from imagebench.fixtures.fixture import Fixture, Outcome
from imagebench.records import CaseSummary, RunRecord, SampleSummary, read_record
from imagebench.runs.runner import presents_tensor
from imagebench.runs.verdict import RunResult
from imagebench.subjects import ReferenceSubject

FAST_BUILTIN = ("segment-nuclei/empty-field", "segment-nuclei/count-nuclei")


@pytest.fixture(scope="module")
def cluster() -> Any:
    from distributed import Client

    lc = ex.local_cluster(2)
    client = Client(lc, set_as_default=False)
    try:
        yield lc
    finally:
        client.close()
        ex_cluster.close_local_cluster(lc)


@pytest.fixture(scope="module")
def address(cluster: Any) -> str:
    return cluster.scheduler_address


# --------------------------------------------------------------------------- helpers


def _crashing_verifier(fixture: Fixture, attempt: Any) -> Outcome:
    raise ZeroDivisionError("verifier bug")


def _builtin(*labels: str) -> list[Any]:
    from imagebench import cases

    chosen = [c for c in cases.all_cases() if c.label in labels]
    assert len(chosen) == len(labels)
    return chosen


def _files(result: RunResult) -> dict[str, bytes]:
    """Every file of a run folder below the subject folder, by relative path."""
    root = result.run_dir
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] == result.record.subject
    }


def assert_same_results(a: RunResult, b: RunResult) -> None:
    """Same summaries field by field (times aside), same case summaries (build time aside), same files."""
    assert list(a.samples) == list(b.samples)
    for label in a.samples:
        sa, sb = a.samples[label], b.samples[label]
        assert len(sa) == len(sb)
        for x, y in zip(sa, sb):
            timed = {"times": True, "usage": {"wall_s"}}  # measured times differ run to run
            assert x.model_dump(exclude=timed) == y.model_dump(exclude=timed), label
    for label in a.summaries:
        x = a.summaries[label].model_dump()
        y = b.summaries[label].model_dump()
        x["extra"].pop("build_s")
        y["extra"].pop("build_s")
        assert x == y, label
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == sorted(fb)
    for rel in fa:
        if rel.endswith("summary.json"):
            ra, rb = (read_record(r.run_dir / rel, SampleSummary if "/sample-" in rel else CaseSummary) for r in (a, b))
            da, db = ra.model_dump(), rb.model_dump()
            for d in (da, db):
                d.pop("times", None)
                if isinstance(d.get("usage"), dict):
                    d["usage"].pop("wall_s", None)
                if isinstance(d.get("extra"), dict):
                    d["extra"].pop("build_s", None)
            assert da == db, rel
        else:
            assert fa[rel] == fb[rel], rel  # PNGs byte for byte


# --------------------------------------------------------------------------- the cluster itself


def test_local_cluster_is_single_threaded_quiet_and_pinned(cluster: Any) -> None:
    from distributed import Client

    with Client(cluster, set_as_default=False) as client:
        assert set(client.nthreads().values()) == {1}
        env = client.run(lambda: {k: os.environ.get(k) for k in ex.THREAD_ENV})
        assert all(v == ex.THREAD_ENV for v in env.values())
        port = client.scheduler_info().get("services", {}).get("dashboard")
    assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    # only the scheduler's health endpoint listens (on a free loopback port): no dashboard pages
    import urllib.error
    import urllib.request

    assert port and port != 8787
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as answer:
        assert answer.status == 200
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10)
    assert err.value.code == 404


# --------------------------------------------------------------------------- identical results


def test_distributed_run_matches_serial(tmp_path: Path, address: str) -> None:
    from helpers import CountingSpec, UnavailableSpec

    cases = [
        make_toy_case("rectangle"),
        make_toy_case("offsite", spec=UnavailableSpec("the toy tree is elsewhere")),
        make_toy_case("broken", spec=CountingSpec(fail=True)),
        make_toy_case("vcrash", verify=_crashing_verifier),
        make_toy_case("noref", reference=None),
        *_builtin(*FAST_BUILTIN),
    ]
    serial = run_cases(cases, ReferenceSubject(), samples=2, out=tmp_path / "serial", progress=False)
    spread = run_cases(cases, ReferenceSubject(), samples=2, out=tmp_path / "spread", progress=False, scheduler=address)
    assert_same_results(serial, spread)
    statuses = {label: [s.status for s in ss] for label, ss in spread.samples.items()}
    assert statuses["toy/rectangle"] == ["ok", "ok"]
    assert statuses["toy/offsite"] == ["skipped", "skipped"]
    assert statuses["toy/broken"] == ["harness-error", "harness-error"]
    assert statuses["segment-nuclei/count-nuclei"] == ["ok", "ok"]
    record = read_record(spread.run_dir / "run.json", RunRecord)
    assert record.complete and record.extra["executor"].startswith("dask scheduler")
    assert record.extra["subject_spec"] == "reference"
    assert len(ex.LAST_STATS.worker_s) > 0  # units really ran on workers
    # each unit has exactly one journal line, written after its summary
    from imagebench.runs.journal import read_journal

    units = [(e.label, e.sample) for e in read_journal(spread.run_dir / "journal.jsonl") if e.event == "unit"]
    assert len(units) == len(set(units)) == sum(len(v) for v in spread.samples.values())


@pytest.mark.parametrize("mode", ["worker", "driver"])
def test_each_fixture_is_built_once_per_case(tmp_path: Path, address: str, mode: str) -> None:
    log = tmp_path / f"builds-{mode}.txt"
    case = make_toy_case("counted", spec=FileCountingSpec(str(log)))
    result = ex.run_cases(
        [case],
        ReferenceSubject(),
        samples=4,
        out=tmp_path / mode,
        progress=False,
        parallel=ex.Parallel(scheduler=address, fixture_mode=mode),  # type: ignore[arg-type]
    )
    assert [s.status for s in result.samples["toy/counted"]] == ["ok"] * 4
    assert len(log.read_text().splitlines()) == 1


class FileCountingSpec:
    """A synthetic spec that appends a line to a file each time it builds (works across processes)."""

    kind = "synthetic"
    seed = 0

    def __init__(self, path: str) -> None:
        self.path = path
        self.tolerance = dict(TOY_TOLERANCE)

    def available(self, skill_id: str, case_id: str) -> tuple[bool, str]:
        return True, ""

    def build(self, skill_id: str, case_id: str) -> Fixture:
        from dataclasses import replace

        with open(self.path, "a") as fh:
            fh.write(f"{case_id} {os.getpid()}\n")
        return replace(toy_fixture(0), skill_id=skill_id, case_id=case_id, tolerance=dict(self.tolerance))


# --------------------------------------------------------------------------- tensor cases


def _tensor_reference(session: Any) -> None:
    image = np.asarray(session.client.get(session.namespace["fixture_tensors"]["image"]).compute())
    mask = image > 0.5
    session.namespace["mask"] = mask
    session.namespace["area"] = int(mask.sum())


def test_tensor_case_on_workers_shares_the_driver_plane(tmp_path: Path, address: str) -> None:
    from imagebench.plane import RunPlane

    plane, why = RunPlane.try_start()
    if plane is None:
        pytest.skip(f"no data plane here: {why}")
    case = make_toy_case(
        "lazy", reference=_tensor_reference, layers=(Layer("image", "image", "image", presentation="tensor"),)
    )
    assert presents_tensor(case)
    try:
        serial = run_cases([case], ReferenceSubject(), samples=2, out=tmp_path / "a", progress=False, plane=plane)
        spread = run_cases(
            [case], ReferenceSubject(), samples=2, out=tmp_path / "b", progress=False, plane=plane, scheduler=address
        )
        uploads = plane.harness_ids()
    finally:
        plane.close()
    assert [s.status for s in spread.samples["toy/lazy"]] == ["ok", "ok"]
    assert_same_results(serial, spread)
    assert len(uploads) == 1  # one upload of the fixture's data for the whole run (serial reused it too)


def test_remote_workers_reach_a_plane_off_loopback_with_its_token(
    tmp_path: Path, address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_plane_token import _routable_address

    routable = _routable_address()
    if routable is None:
        pytest.skip("this machine has no address other than loopback")
    monkeypatch.setattr(ex_cluster, "this_host", lambda: "some-other-machine")  # no worker "here"
    monkeypatch.setenv("IMAGEBENCH_PLANE_HOST", routable)
    case = make_toy_case(
        "lazy", reference=_tensor_reference, layers=(Layer("image", "image", "image", presentation="tensor"),)
    )
    result = run_cases([case], ReferenceSubject(), samples=2, out=tmp_path, progress=False, scheduler=address)
    assert [s.status for s in result.samples["toy/lazy"]] == ["ok", "ok"]


def test_remote_workers_cannot_reach_a_loopback_plane(
    tmp_path: Path, address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ex_cluster, "this_host", lambda: "some-other-machine")
    case = make_toy_case("lazy", layers=(Layer("image", "image", "image", presentation="tensor"),))
    with pytest.raises(ex.ExecutorError, match="present a layer as tensor.*no worker of.*IMAGEBENCH_PLANE_HOST"):
        run_cases([case], ReferenceSubject(), out=tmp_path, progress=False, scheduler=address)
    assert not list(tmp_path.iterdir()), "a refused run must not leave a run folder"
    # array cases are fine on those same workers
    result = run_cases([make_toy_case()], ReferenceSubject(), out=tmp_path, progress=False, scheduler=address)
    assert result.passed


# --------------------------------------------------------------------------- what cannot travel


class _Opaque:
    name = "opaque"

    def __call__(self, session: Any) -> None:
        return None


def test_a_subject_without_a_spec_is_refused_before_the_run(tmp_path: Path, address: str) -> None:
    with pytest.raises(ex.ExecutorError, match="no spec string"):
        run_cases([make_toy_case()], _Opaque(), out=tmp_path, progress=False, scheduler=address)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())
    from imagebench.subjects import CommandSubject

    with pytest.raises(ex.ExecutorError, match="keeps its workspace"):
        ex.subject_spec(CommandSubject("true", keep_workspace=True))
    with pytest.raises(ex.ExecutorError, match="not both"):
        ex.Parallel(workers=2, scheduler=address)
    with pytest.raises(ex.ExecutorError, match="at least 1"):
        ex.Parallel(workers=0)
    with pytest.raises(ex.ExecutorError, match="tcp://HOST:PORT"):
        ex.Parallel(scheduler="localhost")


def test_a_unit_whose_case_cannot_be_unpickled_is_a_harness_error(tmp_path: Path, address: str) -> None:
    case = make_toy_case("ghost", spec=Unpicklable())
    result = run_cases([case], ReferenceSubject(), samples=2, out=tmp_path, progress=False, scheduler=address)
    statuses = [s.status for s in result.samples["toy/ghost"]]
    assert statuses == ["harness-error", "harness-error"]
    assert "the executor could not run this unit" in result.samples["toy/ghost"][0].reason


class Unpicklable:
    """A spec that pickles on the driver but raises when a worker unpickles it."""

    kind = "synthetic"

    def __init__(self) -> None:
        self.tolerance = dict(TOY_TOLERANCE)

    def available(self, skill_id: str, case_id: str) -> tuple[bool, str]:
        return True, ""

    def build(self, skill_id: str, case_id: str) -> Fixture:  # pragma: no cover - never reached
        raise AssertionError

    def __reduce__(self) -> tuple[Any, ...]:
        return (_refuse, ())


def _refuse() -> None:
    raise RuntimeError("this spec only exists on the driver")


# --------------------------------------------------------------------------- resume on workers, and the CLI


def test_resume_on_workers_reruns_only_what_is_missing(tmp_path: Path, address: str) -> None:
    cases = [make_toy_case("rectangle"), *_builtin("segment-nuclei/empty-field")]
    first = run_cases(cases, ReferenceSubject(), samples=3, out=tmp_path / "a", progress=False, scheduler=address)
    reference = run_cases(cases, ReferenceSubject(), samples=3, out=tmp_path / "b", progress=False)
    gone = [first.run_dir / "reference/toy/rectangle/sample-1", first.run_dir / "reference/segment-nuclei/empty-field"]
    import shutil

    for path in gone:
        shutil.rmtree(path)
    seen: list[SampleSummary] = []
    resumed = ex.resume_run(
        first.run_dir, cases=cases, progress=False, parallel=ex.Parallel(scheduler=address), on_sample=seen.append
    )
    assert sorted((s.label, s.sample) for s in seen) == [
        ("segment-nuclei/empty-field", 0),
        ("segment-nuclei/empty-field", 1),
        ("segment-nuclei/empty-field", 2),
        ("toy/rectangle", 1),
    ]
    assert resumed.record.complete
    assert_same_results(reference, resumed)


def test_cli_run_on_a_scheduler_and_usage_errors(
    tmp_path: Path, address: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from imagebench import cases as builtin

    monkeypatch.setattr(builtin, "all_cases", lambda: [make_toy_case("rectangle")])
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("imagebench.cli.run",))
    out = str(tmp_path)
    assert cli.main(["run", "--scheduler", address, "--samples", "2", "--out", out, "--quiet"]) == 0
    text = capsys.readouterr().out
    run_dir = Path(text.split("run folder: ")[1].split()[0])
    assert (run_dir / "report.html").is_file() and "report: " in text
    assert len(list(run_dir.glob("reference/toy/rectangle/sample-*/summary.json"))) == 2

    for argv, needle in (
        (["run", "--workers", "0"], "at least 1"),
        (["run", "--workers", "2", "--scheduler", address], "not both"),
        (["run", "--scheduler", "nowhere"], "tcp://HOST:PORT"),
    ):
        assert cli.main([*argv, "--out", out]) == 2, argv
        assert needle in capsys.readouterr().err


# --------------------------------------------------------------------------- serial runs: the prefetching helper


class LockedSpec:
    """A spec that cannot be pickled (it holds a lock): the helper cannot build it."""

    kind = "synthetic"
    seed = 0

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.tolerance = dict(TOY_TOLERANCE)

    def available(self, skill_id: str, case_id: str) -> tuple[bool, str]:
        return True, ""

    def build(self, skill_id: str, case_id: str) -> Fixture:
        from dataclasses import replace

        return replace(toy_fixture(3), skill_id=skill_id, case_id=case_id, tolerance=dict(self.tolerance))


def test_serial_prefetch_builds_ahead_in_a_helper_process_with_the_same_results(tmp_path: Path) -> None:
    log = tmp_path / "builds.txt"
    cases = [
        make_toy_case("first", spec=FileCountingSpec(str(log))),
        make_toy_case("second", spec=FileCountingSpec(str(log))),
        make_toy_case("locked", spec=LockedSpec()),  # not picklable: built here instead
        make_toy_case("third", spec=FileCountingSpec(str(log))),
    ]
    ahead = ex.run_cases(cases, ReferenceSubject(), samples=2, out=tmp_path / "a", progress=False)
    built = dict(line.split() for line in log.read_text().splitlines())
    assert sorted(built) == ["first", "second", "third"]  # once each
    assert built["first"] == str(os.getpid())  # the first case is built here, at once
    assert built["second"] == built["third"] != str(os.getpid())  # the rest ahead, in the helper
    log.unlink()
    inline = ex.run_cases(
        cases, ReferenceSubject(), samples=2, out=tmp_path / "b", progress=False, parallel=ex.Parallel(prefetch=False)
    )
    assert set(dict(line.split() for line in log.read_text().splitlines()).values()) == {str(os.getpid())}
    assert [s.status for s in ahead.samples["toy/locked"]] == ["ok", "ok"]
    assert_same_results(ahead, inline)


def _slow_reference(session: Any) -> None:
    import time

    time.sleep(0.5)  # long enough for the next case to be built and its plane to be up
    from helpers import toy_reference

    toy_reference(session)


def test_serial_run_uploads_the_next_tensor_fixture_once_while_this_case_runs(tmp_path: Path) -> None:
    from imagebench.plane import RunPlane

    plane, why = RunPlane.try_start()
    if plane is None:
        pytest.skip(f"no data plane here: {why}")
    cases = [
        make_toy_case("first", reference=_slow_reference),
        make_toy_case("second", reference=_slow_reference, seed=1),
        make_toy_case(
            "lazy", reference=_tensor_reference, layers=(Layer("image", "image", "image", presentation="tensor"),)
        ),
    ]
    try:
        result = run_cases(cases, ReferenceSubject(), samples=2, out=tmp_path, progress=False, plane=plane)
        uploads = plane.harness_ids()
    finally:
        plane.close()
    assert {label: [s.status for s in ss] for label, ss in result.samples.items()} == {
        "toy/first": ["ok", "ok"],
        "toy/second": ["ok", "ok"],
        "toy/lazy": ["ok", "ok"],
    }
    assert len(uploads) == 1  # uploaded ahead once; run_unit found it there
    assert not any(s.flags for s in result.samples["toy/lazy"])


def test_a_pinned_suite_runs_on_the_cluster(
    tmp_path: Path, address: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from imagebench import cases as builtin
    from imagebench.records import RunRecord, read_record

    monkeypatch.setattr(builtin, "all_cases", lambda: [make_toy_case("rectangle")])
    monkeypatch.chdir(tmp_path)
    assert cli.main(["suite", "pin", "core", "--revision", "2026.11.0", "--quiet"]) == 0
    capsys.readouterr()
    argv = ["run", "--suite", "core", "--scheduler", address, "--samples", "2", "--out", str(tmp_path), "--quiet"]
    assert cli.main(argv) == 0
    run_dir = Path(capsys.readouterr().out.split("run folder: ")[1].split()[0])
    record = read_record(run_dir / "run.json", RunRecord)
    assert record.complete and record.cases == ["toy/rectangle"]
    assert record.extra["suite"]["assignment"]["labels"] == ["toy/rectangle"]
    assert len(list(run_dir.glob("reference/toy/rectangle/sample-*/summary.json"))) == 2
