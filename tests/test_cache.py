"""The fixture cache (imagebench.fixtures.cache): reuse, corruption, concurrent writers, sealed seeds, off."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import make_toy_case, toy_fixture

from imagebench import cases as builtin
from imagebench import cli
from imagebench.executor import run_cases
from imagebench.fixtures import cache
from imagebench.fixtures.fixture_digest import built_fixture_digest
from imagebench.fixtures.specs import Procedural
from imagebench.runs.fingerprint import definition_fingerprint
from imagebench.runs.runner import prepare_fixture
from imagebench.subjects import ReferenceSubject

BUILDS: list[int] = []


def counted_builder(*, seed: int):
    BUILDS.append(seed)
    return toy_fixture(seed)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(root))
    BUILDS.clear()
    return root


def _counted_case():
    return make_toy_case("counted", spec=Procedural(counted_builder, seed=4, tolerance={"mask_error": 0.05}))


def _entries(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if (p / cache.ENTRY).is_file()] if root.is_dir() else []


def test_a_built_fixture_is_kept_once_and_reused(cache_dir: Path) -> None:
    case = _counted_case()
    first = prepare_fixture(case)
    second = prepare_fixture(case)
    assert BUILDS == [4]  # built once; the second came from the cache
    assert first.fixture is not None and second.fixture is not None
    assert built_fixture_digest(second.fixture) == built_fixture_digest(first.fixture)
    assert first.truth_digest == second.truth_digest
    assert not second.fixture.truth["mask"].flags.writeable  # as read-only as a fresh one
    (entry,) = _entries(cache_dir)
    meta = cache.CacheEntry.model_validate_json((entry / cache.ENTRY).read_text())
    assert meta.label == case.label and meta.seed == 4


def test_real_cases_score_the_same_from_the_cache(cache_dir: Path, tmp_path: Path) -> None:
    from imagebench.runs.runner import run_unit

    cases = [builtin.get_case(label) for label in ("segment-nuclei/count-nuclei", "pick-a-nucleus/synthetic-volume")]
    fresh = [prepare_fixture(c) for c in cases]  # built, and kept
    assert len(_entries(cache_dir)) == 2
    for case, built in zip(cases, fresh, strict=True):
        again = prepare_fixture(case)  # from the cache
        assert built_fixture_digest(again.fixture) == built_fixture_digest(built.fixture)
        a = run_unit(case, ReferenceSubject(), 0, tmp_path / "a", fixture=built)
        b = run_unit(case, ReferenceSubject(), 0, tmp_path / "b", fixture=again)
        assert a.status == b.status == "ok" and [m.value for m in a.metrics] == [m.value for m in b.metrics]


@pytest.mark.parametrize("damage", ["truncated array", "edited digest", "missing array", "not json"])
def test_a_damaged_entry_is_rebuilt_with_a_warning_never_used(cache_dir: Path, damage: str) -> None:
    case = _counted_case()
    prepare_fixture(case)
    (entry,) = _entries(cache_dir)
    array = entry / "a0.npy"
    if damage == "truncated array":
        array.write_bytes(array.read_bytes()[:-16])
    elif damage == "edited digest":
        raw = json.loads((entry / cache.ENTRY).read_text())
        raw["built"] = "sha256:" + "0" * 64
        (entry / cache.ENTRY).write_text(json.dumps(raw))
    elif damage == "missing array":
        array.unlink()
    else:
        (entry / cache.ENTRY).write_text("{not json")
    with pytest.warns(cache.CacheWarning, match="cannot be used"):
        again = prepare_fixture(case)
    assert again.status is None and again.fixture is not None
    assert BUILDS == [4, 4]  # built afresh
    assert len(_entries(cache_dir)) == 1  # and kept again, whole


def test_two_writers_of_one_entry_leave_one_whole_entry(cache_dir: Path) -> None:
    case = _counted_case()
    fixture = case.build()
    definition = definition_fingerprint(case)
    results: list[Path | None] = []
    barrier = threading.Barrier(4)

    def write() -> None:
        barrier.wait()
        results.append(cache.store(case.label, definition, 4, fixture))

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and results[0] is not None
    from imagebench.runs.closurecache import FOLDER  # the closure cache's folder beside the entries

    assert len([p for p in cache_dir.iterdir() if p.name != FOLDER]) == 1  # no leftover of the writers that lost
    loaded = cache.load(case.label, definition, 4)
    assert loaded is not None and built_fixture_digest(loaded) == built_fixture_digest(fixture)


def test_sealed_fixtures_are_never_cached(cache_dir: Path, tmp_path: Path) -> None:
    from imagebench.runs.sealed import Seal

    run_cases([_counted_case()], ReferenceSubject(), out=tmp_path, progress=False, samples=2, sealed=Seal(b"x" * 32))
    assert _entries(cache_dir) == []


def test_off_builds_every_time_and_the_cli_reports_and_clears(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = _counted_case()
    prepare_fixture(case)
    assert cli.main(["cache", "info", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["root"] == str(cache_dir) and facts["entries"] == 1 and facts["bytes"] > 0
    assert cli.main(["cache", "clear"]) == 0
    assert "removed 1 entry" in capsys.readouterr().out and _entries(cache_dir) == []
    monkeypatch.setenv(cache.CACHE_ENV, "off")
    prepare_fixture(case)
    prepare_fixture(case)
    assert BUILDS == [4, 4, 4] and _entries(cache_dir) == []
    assert cli.main(["cache", "info"]) == 0 and "off" in capsys.readouterr().out


def test_the_sandbox_hides_the_cache(cache_dir: Path) -> None:
    from imagebench.sandbox.policy import harness_paths

    assert str(cache_dir.resolve()) in harness_paths()


def test_a_value_the_cache_cannot_store_is_simply_not_cached(cache_dir: Path) -> None:
    fixture = toy_fixture(1)
    odd = type(fixture)(provenance="x", data={"image": np.zeros((2, 2))}, truth={"thing": object()})
    assert cache.store("toy/odd", "sha256:" + "1" * 64, 1, odd) is None
    assert _entries(cache_dir) == []


def test_a_warm_cache_needs_no_prefetch_helper(cache_dir: Path) -> None:
    from imagebench.executor.prefetch import costly, start_prefetch

    cases = [builtin.get_case(label) for label in ("segment-nuclei/count-nuclei", "pick-a-nucleus/synthetic-volume")]
    curated = builtin.get_case("segment-nuclei/dsb2018")
    assert not costly(curated, None)  # read lazily from the tree: nothing to build ahead
    assert costly(cases[1], None) and costly(cases[1], 7)  # not cached yet; a sealed seed never is
    cold = start_prefetch([(c, None) for c in cases], enabled=True)
    assert cold is not None
    cold.close()
    for case in cases:
        prepare_fixture(case)  # kept
    assert not costly(cases[1], None)
    assert start_prefetch([(c, None) for c in cases], enabled=True) is None  # nothing left to build ahead


def test_a_fixture_built_ahead_in_the_helper_is_kept_under_the_drivers_key(cache_dir: Path) -> None:
    """A structured case's verifier is a closure the helper process cannot read the source of, so
    the driver sends the cache key along; the helper's build is then kept, and the next run reuses it."""
    from imagebench.executor.prefetch import Prefetcher, costly

    case = builtin.get_case("segment-nuclei/count-nuclei")
    assert costly(case, None)
    helper = Prefetcher()
    try:
        helper.submit(case, None)
        built = helper.take(case, None)
    finally:
        helper.close()
    assert built is not None and built.fixture is not None
    assert not costly(case, None)  # kept by the helper, under the key the driver computes
    again = prepare_fixture(case)
    assert built_fixture_digest(again.fixture) == built_fixture_digest(built.fixture)
