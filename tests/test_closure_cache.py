"""The scoring closure's sources and loaded names kept across runs (imagebench.runs.closurecache):
a closure served from the cache is the closure a fresh walk records, byte for byte; an edited
source file is walked afresh; a corrupted, forged or misplaced entry is removed with a warning."""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from imagebench.fixtures.cache import CacheWarning
from imagebench.runs import closure, closurecache
from imagebench.runs.closure import code_closure, memoized_closures, scoring_digest
from imagebench.runs.fingerprint import definition_fingerprint

PROBE = "ccprobe_pkg"


def fresh_process(monkeypatch: pytest.MonkeyPatch, cache: Path | None) -> None:
    """What a new interpreter starts with: no in-process memo, the cache root as given."""
    monkeypatch.setattr(closure, "_SOURCES", {})
    monkeypatch.setattr(closure, "_MODULES", {})
    monkeypatch.setattr(closure, "_NAMES", {})
    monkeypatch.setattr(closurecache, "_CURRENT", None)
    monkeypatch.setenv("IMAGEBENCH_CACHE", str(cache) if cache is not None else "off")


def entries(cache: Path) -> list[Path]:
    return sorted((cache / closurecache.FOLDER).glob("*/*.json"))


def no_getsource(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(obj: object) -> str:
        raise AssertionError(f"the cache should have served the source of {obj!r}")

    monkeypatch.setattr(inspect, "getsource", refuse)


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package of its own (a bundle's verifier module): ``score.verify`` calls ``helper``."""
    root = tmp_path / "src"
    (root / PROBE).mkdir(parents=True)
    (root / PROBE / "__init__.py").write_text("")
    source = root / PROBE / "score.py"
    write_probe(source, "x + 1")
    monkeypatch.syspath_prepend(str(root))
    yield source
    for name in [m for m in sys.modules if m.split(".")[0] == PROBE]:
        del sys.modules[name]


def write_probe(path: Path, body: str) -> None:
    path.write_text(
        textwrap.dedent(
            f"""
            LIMIT = 0.5


            class Scorer:
                def score(self, x):
                    return helper(x) * LIMIT


            def helper(x):
                return {body}


            def verify(x):
                return Scorer().score(x)
            """
        )
    )


def load_probe():
    importlib.invalidate_caches()
    module = importlib.import_module(f"{PROBE}.score")
    return importlib.reload(module)


def test_builtin_closures_from_the_cache_are_byte_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from imagebench import cases

    chosen = [
        c for c in cases.all_cases() if c.label.split("/")[0] in ("drift-correction", "tracking", "count-objects")
    ]
    chosen += [c for c in cases.all_cases() if c.answer is not None][:2]
    assert len(chosen) >= 4
    fresh_process(monkeypatch, None)
    fresh = [json.dumps(code_closure([c.verify]), sort_keys=True) for c in chosen]
    digests = [scoring_digest(c) for c in chosen]
    definitions = [definition_fingerprint(c) for c in chosen]  # builder, reference and verifier sources too

    cache = tmp_path / "cache"
    fresh_process(monkeypatch, cache)
    with memoized_closures():
        filled = [json.dumps(code_closure([c.verify]), sort_keys=True) for c in chosen]
        assert [definition_fingerprint(c) for c in chosen] == definitions
    assert filled == fresh
    assert entries(cache), "a run's walks leave entries for the next run"

    fresh_process(monkeypatch, cache)  # the next run
    no_getsource(monkeypatch)
    with memoized_closures():
        served = [json.dumps(code_closure([c.verify]), sort_keys=True) for c in chosen]
        again = [scoring_digest(c) for c in chosen]
        assert [definition_fingerprint(c) for c in chosen] == definitions
    assert served == fresh
    assert again == digests
    kept = closurecache.current()
    assert kept.hits > 0 and kept.misses == 0


def test_an_edited_source_file_is_walked_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: Path) -> None:
    cache = tmp_path / "cache"
    fresh_process(monkeypatch, cache)
    before = code_closure([load_probe().verify])
    helper = f"{PROBE}.score:helper"
    assert {helper, f"{PROBE}.score:Scorer", f"{PROBE}.score:verify"} <= set(before["code"])
    assert f"{PROBE}.score:LIMIT" in before["constants"]

    fresh_process(monkeypatch, cache)
    assert code_closure([load_probe().verify]) == before
    assert closurecache.current().misses == 0  # all from the cache

    write_probe(probe, "x + 2")  # the same lines, one character changed in the helper
    fresh_process(monkeypatch, cache)
    after = code_closure([load_probe().verify])
    assert after["code"][helper] != before["code"][helper]
    assert closurecache.current().misses > 0
    fresh_process(monkeypatch, None)
    assert code_closure([load_probe().verify]) == after  # what a walk without the cache records


def test_a_changed_function_that_was_not_reloaded_is_read_as_inspect_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: Path
) -> None:
    """The file changed after import (the module not reloaded): the cache keys by the bytes on disk
    now, as inspect.getsource reads them, so it answers what a fresh walk would."""
    cache = tmp_path / "cache"
    fresh_process(monkeypatch, cache)
    module = load_probe()
    code_closure([module.verify])
    write_probe(probe, "x - 1")
    fresh_process(monkeypatch, cache)
    served = code_closure([module.verify])
    fresh_process(monkeypatch, None)
    assert code_closure([module.verify]) == served


@pytest.mark.parametrize("damage", ["truncated", "forged", "misplaced", "not json"])
def test_a_bad_entry_is_removed_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: Path, damage: str
) -> None:
    cache = tmp_path / "cache"
    fresh_process(monkeypatch, cache)
    module = load_probe()
    honest = code_closure([module.verify])
    (entry,) = entries(cache)  # the probe's closure lies in one file
    raw = json.loads(entry.read_text())
    if damage == "truncated":
        entry.write_text(entry.read_text()[:40])
    elif damage == "forged":  # another digest for the helper, the entry's own digest left as it was
        key = next(k for k in raw["sources"] if k.startswith("f:helper:"))
        raw["sources"][key] = "sha256:" + "0" * 64
        entry.write_text(json.dumps(raw))
    elif damage == "misplaced":  # a sound entry of another file, under this file's name
        raw["file"] = "f" * 64
        raw["digest"] = closurecache._content_digest(raw["file"], raw["python"], raw["sources"], raw["names"])
        entry.write_text(json.dumps(raw))
    else:
        entry.write_text("{not json")
    fresh_process(monkeypatch, cache)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = code_closure([module.verify])
    assert again == honest
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(said) == 1 and str(entry) in said[0] and "removed" in said[0], said
    assert entry.is_file()  # written again, from the fresh walk
    assert closurecache.ClosureCacheEntry.model_validate_json(entry.read_text()).file == entry.stem


def test_the_cache_off_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: Path) -> None:
    fresh_process(monkeypatch, None)
    code_closure([load_probe().verify])
    assert closurecache.current().folder is None
    assert not list(tmp_path.rglob("*.json"))


def test_the_closure_cache_lies_where_the_sandbox_masks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A subject that could write an entry could make a changed verifier look unchanged: the
    entries live inside the fixture cache's folder, which every sandbox masks."""
    from imagebench.sandbox.policy import harness_paths

    fresh_process(monkeypatch, tmp_path / "somewhere" / "cache")
    folder = closurecache.current().folder
    assert folder is not None
    masked = [Path(p) for p in harness_paths()]
    assert any(folder.resolve().is_relative_to(p) for p in masked), (folder, masked)
