"""Workers that share nothing with the driver: fixtures' files shipped by digest, results streamed back.

The cluster test starts a scheduler here and two workers, each in a filesystem namespace of its
own (``executor.namespaced``, bubblewrap) that hides the checkout, the fixture tree, the fixture
cache and the outcome folder; the run's results are the serial run's, field by field and byte for
byte. The dishonest variants: a worker told nothing (shipping off) does not reach the driver's
tree (it does not exist there), and a blob whose bytes do not match its digest is refused.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imagebench.executor import Parallel, run_cases
from imagebench.executor import shipping as sh
from imagebench.executor.returned import ReturnError, check_returned, pack, write_returned
from imagebench.fixtures.blobs import BlobError, BlobStore, shipped_root
from imagebench.subjects import ReferenceSubject

CURATED = "segment-nuclei/dsb2018"
LABELS = (CURATED, "segment-nuclei/count-nuclei", "segment-nuclei/empty-field")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- the blob store


def test_a_blob_whose_bytes_do_not_match_its_name_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    good = b"pixels and truth"
    with pytest.raises(BlobError, match="refused: its 6 bytes hash to sha256"):
        store.put(_sha(good), b"forged")
    assert not store.has(_sha(good)) and not any(p.is_file() for p in tmp_path.rglob("*"))
    with pytest.raises(BlobError, match="is not a sha256"):
        store.put("../../etc/passwd", good)
    assert store.put(_sha(good), good).read_bytes() == good and store.has(_sha(good), len(good))


def test_a_corrupt_blob_is_removed_on_use_and_a_folder_built_from_it_is_rebuilt(tmp_path: Path) -> None:
    data = b"0123456789" * 100
    sha = _sha(data)
    store = BlobStore(tmp_path)
    path = store.put(sha, data)
    folder = store.folder("a" * 64, {"ns/case/image.npy": (sha, len(data))})
    assert (folder / "ns/case/image.npy").read_bytes() == data
    # the blob is damaged in place (same size): a fresh store (another process) finds it corrupt
    os.chmod(path, 0o600)
    with open(path, "r+b") as fh:
        fh.write(b"X")
    fresh = BlobStore(tmp_path)
    assert not fresh.has(sha, len(data)) and not path.exists()
    with pytest.raises(BlobError, match="not in the store"):
        fresh.folder("a" * 64, {"ns/case/image.npy": (sha, len(data))})
    fresh.put(sha, data)
    again = fresh.folder("a" * 64, {"ns/case/image.npy": (sha, len(data))})
    assert (again / "ns/case/image.npy").read_bytes() == data


def test_a_folder_refuses_paths_that_leave_it(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    data = b"x"
    store.put(_sha(data), data)
    for rel in ("../outside", "/etc/passwd", "a/../../b", "a//b", ""):
        with pytest.raises(BlobError, match="relative path of plain names"):
            store.folder("b" * 64, {rel: (_sha(data), 1)})
    assert not (tmp_path.parent / "outside").exists()


def test_the_sandbox_hides_the_workers_shipped_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from imagebench.sandbox.policy import harness_paths

    monkeypatch.setenv("IMAGEBENCH_SHIPPED", str(tmp_path / "shipped"))
    assert shipped_root() == tmp_path / "shipped"
    assert os.path.realpath(tmp_path / "shipped") in harness_paths()
    monkeypatch.delenv("IMAGEBENCH_SHIPPED")
    monkeypatch.setenv("IMAGEBENCH_CACHE", "off")  # no cache: still a folder of its own, still hidden
    assert os.path.realpath(shipped_root()) in harness_paths()
    from imagebench.sandbox.policy import SandboxPolicy, sandbox_env

    assert "IMAGEBENCH_SHIPPED" not in sandbox_env({"IMAGEBENCH_SHIPPED": "/x", "PATH": "/usr/bin"}, SandboxPolicy())


# --------------------------------------------------------------------------- what comes back


def test_returned_files_are_checked_before_any_is_written(tmp_path: Path) -> None:
    src = tmp_path / "unit"
    (src / "sub").mkdir(parents=True)
    (src / "summary.json").write_text("{}")
    (src / "sub" / "a.png").write_bytes(b"png")
    (src / "link").symlink_to("/etc/passwd")  # never followed, never sent
    files, digests = pack(src)
    assert sorted(files) == ["sub/a.png", "summary.json"]
    out = tmp_path / "run" / "sample-0"
    forged = dict(files, **{"sub/a.png": b"other"})
    with pytest.raises(ReturnError, match="sub/a.png came back as 5 bytes"):
        write_returned(out, forged, digests)
    escaping = {"summary.json": b"{}", "../../escaped": b"x"}
    with pytest.raises(ReturnError, match="relative path of plain names"):
        check_returned(escaping, None, "unit")
    with pytest.raises(ReturnError, match="no summary.json"):
        check_returned({"a": b""}, None, "unit")
    assert not out.exists() and not (tmp_path / "escaped").exists()
    assert write_returned(out, files, digests) == b"{}" and (out / "sub" / "a.png").read_bytes() == b"png"


def test_a_shipment_lists_the_tree_files_of_a_curated_case_by_their_recorded_digest() -> None:
    from imagebench import cases
    from imagebench.fixtures import tree

    case = cases.get_case(CURATED)
    shipment, sources = sh.shipment_of(case) or (None, {})
    assert shipment is not None
    rels = [f.rel for f in shipment.files]
    assert "manifest.json" in rels and "segment-nuclei/dsb2018/case.json" in rels
    entry = tree.load_manifest(case.fixture.tree_root()).entry("segment-nuclei", "dsb2018")
    for name, spec in entry.files.items():
        (shipped,) = [f for f in shipment.files if f.rel == f"segment-nuclei/dsb2018/{name}"]
        assert shipped.sha256 == spec.sha256 and shipped.size == spec.bytes
    assert sh.shipment_of(cases.get_case("segment-nuclei/count-nuclei")) is None  # procedural: nothing to ship


# --------------------------------------------------------------------------- a share-nothing cluster


@pytest.fixture(scope="module")
def nscluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from imagebench.executor import namespaced

    if namespaced.bwrap() is None:
        pytest.skip("bwrap is not installed")
    with namespaced.namespaced_cluster(2, tmp_path_factory.mktemp("nsworkers")) as cluster:
        yield cluster


@pytest.fixture
def driver_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "driver-cache"
    monkeypatch.setenv("IMAGEBENCH_CACHE", str(cache))
    return cache


def _cases(*labels: str) -> list[Any]:
    from imagebench import cases

    return [cases.get_case(label) for label in labels]


def test_workers_in_their_own_namespace_give_the_serial_results(
    nscluster: Any, tmp_path: Path, driver_cache: Path
) -> None:
    from distributed import Client
    from test_executor import assert_same_results

    import imagebench
    from imagebench.executor import namespaced

    chosen = _cases(*LABELS)
    serial = run_cases(chosen, ReferenceSubject(), samples=2, out=tmp_path / "serial", progress=False)
    spread = run_cases(chosen, ReferenceSubject(), samples=2, out=tmp_path / "spread", progress=False,
                       scheduler=nscluster.address)  # fmt: skip
    assert_same_results(serial, spread)
    assert all(s.status == "ok" for ss in spread.samples.values() for s in ss)
    assert sh.LAST_SHIPPING.bytes_shipped > 0 or sh.LAST_SHIPPING.blobs_cached > 0
    # none of the driver's files exist where the workers ran: no path the driver named was opened there
    tree = chosen[0].fixture.tree_root()
    driver_paths = [Path(imagebench.__file__).parent, tree, tree / "manifest.json", driver_cache, tmp_path,
                    spread.run_dir, Path.cwd()]  # fmt: skip
    with Client(nscluster.address, set_as_default=False) as client:
        assert namespaced.worker_sees(client, driver_paths) == {w: [] for w in client.scheduler_info()["workers"]}
        where = namespaced.worker_imports(client)
    assert len(where) == 2 and all(f.startswith(namespaced.INSIDE + "/code/") for f in where.values())
    # the second run ships nothing: every worker has the blobs in its store
    run_cases(chosen[:1], ReferenceSubject(), samples=2, out=tmp_path / "again", progress=False,
              scheduler=nscluster.address)  # fmt: skip
    assert sh.LAST_SHIPPING.bytes_shipped == 0 and sh.LAST_SHIPPING.blobs_cached >= 3


def test_a_worker_told_nothing_does_not_fall_back_to_the_drivers_paths(
    nscluster: Any, tmp_path: Path, driver_cache: Path
) -> None:
    (curated,) = _cases("segment-nuclei/dsb2018-dim")
    result = run_cases([curated], ReferenceSubject(), samples=2, out=tmp_path, progress=False,
                       parallel=Parallel(scheduler=nscluster.address, ship=False))  # fmt: skip
    statuses = [(s.status, s.reason) for s in result.samples[curated.label]]
    assert all(status == "skipped" and "does not exist" in reason for status, reason in statuses), statuses
    assert sh.LAST_SHIPPING.cases == 0


def test_a_blob_forged_on_the_way_is_refused_by_the_worker(
    nscluster: Any, tmp_path: Path, driver_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (curated,) = _cases("segment-nuclei/dsb2018-dim")
    honest = sh.read_blob

    def forged(path: Path, sha: str) -> bytes:
        data = honest(path, sha)
        return data[:-1] + bytes([data[-1] ^ 0xFF])  # one byte changed after the driver's own check

    monkeypatch.setattr(sh, "read_blob", forged)
    result = run_cases([curated], ReferenceSubject(), samples=2, out=tmp_path, progress=False,
                       scheduler=nscluster.address)  # fmt: skip
    statuses = [(s.status, s.reason) for s in result.samples[curated.label]]
    assert all(st == "harness-error" and "shipped blob was refused" in why for st, why in statuses), statuses


SOLVER = '''
def solve(session):
    """Counts nothing, answers nothing: the verifier decides (the same wherever it runs)."""
    session.notes["ran_from"] = __file__.rsplit("/", 1)[-1]
'''


def test_a_python_file_subject_travels_as_shipped_code(nscluster: Any, tmp_path: Path, driver_cache: Path) -> None:
    from test_executor import assert_same_results

    from imagebench.subjects import parse_subject

    solver = tmp_path / "solvers" / "mine.py"
    solver.parent.mkdir()
    solver.write_text(SOLVER)
    subject = parse_subject(f"python:{solver}:solve")
    chosen = _cases("segment-nuclei/count-nuclei")
    serial = run_cases(chosen, subject, samples=2, out=tmp_path / "serial", progress=False)
    spread = run_cases(chosen, subject, samples=2, out=tmp_path / "spread", progress=False,
                       scheduler=nscluster.address)  # fmt: skip
    assert_same_results(serial, spread)
    assert spread.record.subject == "python-mine.solve"
    assert sh.LAST_SHIPPING.keys == [hashlib.sha256(SOLVER.encode()).hexdigest()]
    assert sh.LAST_SHIPPING.blobs_shipped == 2  # to each worker, which lacked it


def test_a_tree_file_that_does_not_match_its_recorded_digest_is_not_shipped(tmp_path: Path) -> None:
    path = tmp_path / "image.npy"
    path.write_bytes(b"the bytes the manifest was written against")
    recorded = _sha(path.read_bytes())
    assert sh.read_blob(path, recorded) == path.read_bytes()
    path.write_bytes(b"the bytes the manifest was written agains!")  # same size, one byte changed
    with pytest.raises(sh.ShippingError, match=f"the fixture tree records {recorded}"):
        sh.read_blob(path, recorded)


def test_a_sandboxed_subject_on_a_worker_cannot_see_the_workers_store(
    nscluster: Any, tmp_path: Path, driver_cache: Path
) -> None:
    from imagebench.executor import LAST_STATS, namespaced
    from imagebench.sandbox.policy import unavailable_reason
    from imagebench.subjects import parse_subject

    if unavailable_reason() is not None:
        pytest.skip(f"no sandbox here: {unavailable_reason()}")
    store = f"{namespaced.INSIDE}/cache/shipped"
    subject = parse_subject(f"command:ls {store}/folders {store}/blobs 2>&1; echo END")
    result = run_cases(_cases(CURATED), subject, samples=1, out=tmp_path, progress=False,
                       scheduler=nscluster.address)  # fmt: skip
    (sample,) = result.samples[CURATED]
    assert sample.status == "no-result" and LAST_STATS.worker_s  # it ran, on a worker, and left nothing
    (stdout,) = result.run_dir.rglob("stdout.txt")
    text = stdout.read_text()
    assert text.count("No such file or directory") == 2 and text.rstrip().endswith("END"), text


def test_a_blob_corrupted_in_a_workers_store_is_found_removed_and_shipped_again(
    nscluster: Any, tmp_path: Path, driver_cache: Path
) -> None:
    chosen = _cases(CURATED)
    run_cases(chosen, ReferenceSubject(), samples=1, out=tmp_path / "fill", progress=False,
              scheduler=nscluster.address)  # fmt: skip
    shipment, _ = sh.shipment_of(chosen[0]) or (None, {})
    assert shipment is not None
    store = BlobStore(nscluster.caches[0] / "shipped")  # worker 0's store, as seen from here
    blobs = [store.path(f.sha256) for f in shipment.files]
    assert all(blob.is_file() for blob in blobs)
    for blob in blobs:  # one byte changed in place, as a failing disk or a meddler would
        data = bytearray(blob.read_bytes())
        data[-1] ^= 0xFF
        blob.write_bytes(bytes(data))
    result = run_cases(chosen, ReferenceSubject(), samples=2, out=tmp_path / "after", progress=False,
                       scheduler=nscluster.address)  # fmt: skip
    assert [s.status for s in result.samples[CURATED]] == ["ok", "ok"]
    assert sh.LAST_SHIPPING.blobs_shipped == len(blobs)  # worker 0 lacked every one of them, worker 1 none
    for blob in blobs:  # and keeps them again, each matching its name
        assert blob.exists() and _sha(blob.read_bytes()) == blob.name


def test_shipping_is_on_for_an_existing_cluster_and_asked_for_elsewhere() -> None:
    assert Parallel(scheduler="tcp://127.0.0.1:1").ships  # its workers may share no file with this machine
    assert not Parallel(workers=2).ships  # a local cluster's workers see this machine's files
    assert Parallel(workers=2, ship=True).ships and not Parallel(scheduler="tcp://h:1", ship=False).ships
    assert not Parallel(ship=True).ships  # serial: nothing travels


# --------------------------------------------------------------------------- the plane reached from workers


def _plane_off_loopback(monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Bind the run's plane to this machine's routable address; without one, keep loopback but
    force the path that does not pin tensor units to the driver's host (the token path)."""
    from test_plane_token import _routable_address

    from imagebench.executor import workers
    from imagebench.plane import process

    address = _routable_address()
    if address is not None:
        monkeypatch.setenv(process.PLANE_HOST_ENV, address)
    else:
        monkeypatch.setattr(process, "off_loopback", lambda: True)
        monkeypatch.setattr(workers, "off_loopback", lambda: True)
    return address


def _spied_planes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    from imagebench.plane import RunPlane

    started: list[Any] = []
    real = RunPlane.try_start.__func__  # type: ignore[attr-defined]

    def spy(cls: Any, *a: Any, **kw: Any) -> Any:
        plane, reason = real(cls, *a, **kw)
        started.append(plane)
        return plane, reason

    monkeypatch.setattr(RunPlane, "try_start", classmethod(spy))
    return started


def test_a_tensor_case_on_namespaced_workers_reads_the_plane_with_its_token(
    nscluster: Any, tmp_path: Path, driver_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_executor import assert_same_results

    from imagebench.cases import drift_tensor

    (case,) = drift_tensor.CASES
    serial = run_cases([case], ReferenceSubject(), samples=2, out=tmp_path / "serial", progress=False)
    address = _plane_off_loopback(monkeypatch)
    started = _spied_planes(monkeypatch)
    spread = run_cases([case], ReferenceSubject(), samples=2, out=tmp_path / "spread", progress=False,
                       scheduler=nscluster.address)  # fmt: skip
    assert_same_results(serial, spread)
    assert [s.status for s in spread.samples[case.label]] == ["ok", "ok"]
    (plane,) = started
    if address is not None:
        assert plane.url.startswith(f"grpc://{address}:")


def test_a_worker_without_the_units_token_is_refused_by_the_plane(
    nscluster: Any, tmp_path: Path, driver_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from imagebench.cases import drift_tensor
    from imagebench.executor.planes import PresentedPlane

    (case,) = drift_tensor.CASES
    _plane_off_loopback(monkeypatch)
    # a unit that travels with no token, or with one scoped to ids it was not given
    dishonest = iter([None, "ids.cache_000000000000.00.00"])
    monkeypatch.setattr(PresentedPlane, "for_unit", lambda self, mint: replace(self, token=next(dishonest)))
    result = run_cases([case], ReferenceSubject(), samples=1, out=tmp_path / "a", progress=False,
                       scheduler=nscluster.address)  # fmt: skip
    (summary,) = result.samples[case.label]
    assert summary.status == "harness-error" and "read token" in summary.reason, summary.reason
    result = run_cases([case], ReferenceSubject(), samples=1, out=tmp_path / "b", progress=False,
                       scheduler=nscluster.address)  # fmt: skip
    (summary,) = result.samples[case.label]
    assert summary.status == "harness-error" and "did not issue" in summary.reason, summary.reason
