"""Case fingerprints: every input by digest, pinned revisions only, and what a subject may see."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    TOY_TOLERANCE,
    make_toy_case,
    toy_fixture,
    toy_reference,
    toy_verify,
)

from imagebench.case.model import Collect, Layer
from imagebench.fixtures import tree
from imagebench.fixtures.fixture import Fixture
from imagebench.fixtures.specs import OnDisk, Procedural
from imagebench.runs.fingerprint import (
    FingerprintError,
    RevisionError,
    agent_visible,
    canonical_json,
    case_fingerprint,
    case_parts,
    check_revision,
    collect_parts,
    digest_json,
    fingerprint_from_parts,
    is_pinned,
    plain,
    role_of,
    scrub,
)

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# The toy fixture as built: its pixels and truth, each by digest.
BUILT = {"built:data:image", "built:truth:mask", "built:truth:secret"}


def other_toy_fixture(seed: int = 0, size: int = 24) -> Fixture:
    """The same pixels as toy_fixture, from a builder with other source code."""
    fx = toy_fixture(seed, size)
    return fx


def other_verify(fixture: Fixture, attempt: Any) -> Any:
    return toy_verify(fixture, attempt)


def build_tree(root: Path, ns: str = "seg", case_id: str = "tiny") -> Path:
    """A one-case fixture tree: an .npy image as data, an .npy mask as truth."""
    folder = root / ns / case_id
    folder.mkdir(parents=True)
    np.save(folder / "image.npy", np.arange(24, dtype=np.float32).reshape(4, 6))
    np.save(folder / "held_out.npy", np.ones((4, 6), dtype=np.uint8))
    tree.write_case_layout(root, ns, case_id, about="tiny", data={"image": "image.npy"}, truth={"secret": "held_out.npy"})
    tree.write_manifest_entry(root, ns, case_id, provenance="made in a test", citation="the test suite")
    return folder


def on_disk_case(root: Path, **kw: Any) -> Any:
    return make_toy_case("tiny", namespace="seg", spec=OnDisk(tolerance=dict(TOY_TOLERANCE), root=root), **kw)


# --------------------------------------------------------------------------- revisions


@pytest.mark.parametrize(
    "revision",
    ["latest", "main", "master", "head", "HEAD", "stable", "dev", "nightly", "Latest", "", "  ", " 2026.11.0", "trunk", "my-branch", "1", "abc123"],
)
def test_floating_or_unpinned_revisions_are_refused(revision: str) -> None:
    assert not is_pinned(revision)
    with pytest.raises(RevisionError, match="revision"):
        check_revision(revision)
    case = dataclasses.replace(make_toy_case(), revision=revision)
    with pytest.raises(RevisionError, match="revision of toy/rectangle"):
        case_fingerprint(case)


@pytest.mark.parametrize("revision", ["2026.11.0", "2026.11", "v1.2.3", "2026.11.0-rc1", "1.2.3.dev4", "a" * 40, "0123456789abcdef" * 4])
def test_pinned_revisions_are_accepted(revision: str) -> None:
    assert check_revision(revision) == revision
    assert DIGEST.match(case_fingerprint(dataclasses.replace(make_toy_case(), revision=revision)))


def test_moving_name_error_says_what_to_give() -> None:
    with pytest.raises(RevisionError) as info:
        check_revision("latest", "revision of suite core")
    msg = str(info.value)
    assert "revision of suite core" in msg and "moving name" in msg and "2026.11.0" in msg and "alias" in msg


# --------------------------------------------------------------------------- procedural fingerprints


def test_fingerprint_is_a_stable_digest_over_label_revision_and_parts() -> None:
    case = make_toy_case()
    fp = case_fingerprint(case)
    assert DIGEST.match(fp)
    assert case_fingerprint(make_toy_case()) == fp  # a fresh but identical case
    parts = case_parts(case)
    assert set(parts) == {"prompt", "persona", "layers", "collect", "class", "timeout", "verifier", "scoring", "tolerance", "fixture", "builder", "seed", "params", *BUILT}
    assert all(DIGEST.match(v) for v in parts.values())
    assert fingerprint_from_parts(case.label, case.revision, parts) == fp
    # the digest of the parts is canonical JSON: key order does not matter
    assert fingerprint_from_parts(case.label, case.revision, dict(reversed(list(parts.items())))) == fp
    # label and revision are part of it
    assert case_fingerprint(make_toy_case("other")) != fp
    assert case_fingerprint(dataclasses.replace(case, revision="2026.12.0")) != fp


CHANGES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("prompt", {"task": make_toy_case().task + " Be quick about `mask` and `area`."}, {"prompt"}),
    ("persona", {"persona": "someone else"}, {"persona"}),
    ("layers", {"layers": (Layer("image", "image", "image", chunks=(8, 8)),)}, {"layers"}),
    ("layer name", {"layers": (Layer("picture", "image", "image"),)}, {"layers"}),
    ("collect", {"collect": (Collect("mask", "array", "the rectangle"),)}, {"collect"}),
    ("class", {"case_class": "hard-case"}, {"class"}),
    ("timeout", {"timeout_s": 31.0}, {"timeout"}),
    ("verifier", {"verify": other_verify}, {"verifier", "scoring"}),
    ("answer", {"answer": {"task_id": "x", "fields": ["a"]}}, {"answer", "scoring"}),
    ("seed", {"fixture": Procedural(toy_fixture, seed=1, tolerance=dict(TOY_TOLERANCE))}, {"seed", *BUILT}),
    ("params", {"fixture": Procedural(toy_fixture, seed=0, params={"size": 20}, tolerance=dict(TOY_TOLERANCE))}, {"params", *BUILT}),
    ("builder", {"fixture": Procedural(other_toy_fixture, seed=0, tolerance=dict(TOY_TOLERANCE))}, {"builder"}),
    ("tolerance", {"fixture": Procedural(toy_fixture, seed=0, tolerance={"mask_error": 0.1, "area_error": 0.05})}, {"tolerance", "scoring"}),
]


@pytest.mark.parametrize("what,change,roles", CHANGES, ids=[c[0] for c in CHANGES])
def test_each_input_moves_exactly_its_part(what: str, change: dict[str, Any], roles: set[str]) -> None:
    base = make_toy_case()
    changed = dataclasses.replace(base, **change)
    a, b = case_parts(base), case_parts(changed)
    differing = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
    assert differing == roles
    assert case_fingerprint(changed) != case_fingerprint(base)


def test_the_reference_solution_is_not_an_input() -> None:
    base = make_toy_case()
    assert case_fingerprint(dataclasses.replace(base, reference=None)) == case_fingerprint(base)
    assert toy_reference is base.reference


def test_params_without_a_stable_form_are_refused() -> None:
    case = make_toy_case(spec=Procedural(toy_fixture, seed=0, params={"size": object()}, tolerance=dict(TOY_TOLERANCE)))
    with pytest.raises(FingerprintError, match=r"fixture params of toy/rectangle.*size.*no stable JSON form"):
        case_fingerprint(case)
    with pytest.raises(FingerprintError, match="no stable JSON form"):
        plain({"x": float("nan")})
    with pytest.raises(FingerprintError, match="expected a string"):
        plain({1: 2})
    arr = plain(np.arange(4, dtype=">i4"))
    assert arr == plain(np.arange(4, dtype="<i4"))  # byte order is not identity
    assert plain(np.float32(0.5)) == 0.5 and plain((1, [2])) == [1, [2]]


def test_prompt_that_is_not_valid_utf8_is_reported_by_role() -> None:
    case = dataclasses.replace(make_toy_case(), task=make_toy_case().task + " \udcff")
    parts, problems = collect_parts(case)
    assert "prompt" not in parts and "persona" in parts
    assert problems and problems[0].startswith("prompt of toy/rectangle") and "UTF-8" in problems[0]
    with pytest.raises(FingerprintError, match="prompt of toy/rectangle"):
        case_fingerprint(case)


def test_unknown_fixture_spec_is_refused_unless_it_declares_its_inputs() -> None:
    from helpers import CountingSpec

    case = make_toy_case(spec=CountingSpec())
    with pytest.raises(FingerprintError, match="CountingSpec.*fingerprint_inputs"):
        case_fingerprint(case)

    @dataclasses.dataclass
    class Declared(CountingSpec):
        version: str = "one"

        def fingerprint_inputs(self) -> dict[str, Any]:
            return {"generator": self.version, "seed": self.seed}

    a = case_parts(make_toy_case(spec=Declared()))
    b = case_parts(make_toy_case(spec=Declared(version="two")))
    assert {"spec:generator", "spec:seed"} <= set(a)
    assert {k for k in a if a[k] != b[k]} == {"spec:generator"}
    assert role_of("spec:generator", "toy/rectangle") == "fixture input 'generator' of toy/rectangle"


def test_meta_digests_are_extra_inputs() -> None:
    digest = digest_json("files/readme.txt")
    case = dataclasses.replace(make_toy_case(), meta={"digests": {"files": digest}})
    assert case_parts(case)["input:files"] == digest
    with pytest.raises(FingerprintError, match="input 'files' of toy/rectangle"):
        case_fingerprint(dataclasses.replace(make_toy_case(), meta={"digests": {"files": "md5:abc"}}))


def test_canonical_json_sorts_keys_without_whitespace() -> None:
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert digest_json({"b": 1, "a": 2}) == digest_json({"a": 2, "b": 1})


# --------------------------------------------------------------------------- on-disk fingerprints


def test_on_disk_fingerprint_uses_manifest_digests_and_case_json(tmp_path: Path) -> None:
    root = tmp_path / "fx"
    folder = build_tree(root)
    case = on_disk_case(root)
    parts = case_parts(case)
    assert {"case.json", "data:image", "truth:secret"} <= set(parts)
    assert "builder" not in parts
    fp = case_fingerprint(case)

    # bytes swapped on disk, manifest untouched: the fingerprint is unchanged (re-hashing is verify's job)
    np.save(folder / "image.npy", np.zeros((4, 6), dtype=np.float32))
    assert case_fingerprint(case) == fp

    # the manifest records new digests: the data part moves, the truth part does not
    tree.write_manifest_entry(root, "seg", "tiny", provenance="made in a test", citation="the test suite")
    after = case_parts(case)
    assert {k for k in parts if parts[k] != after[k]} == {"data:image"}

    # case.json bytes are an input too
    layout = json.loads((folder / "case.json").read_text())
    layout["about"] = "tiny, described differently"
    (folder / "case.json").write_text(json.dumps(layout))
    assert case_parts(case)["case.json"] != after["case.json"]


def test_on_disk_without_a_tree_is_reported_without_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IMAGEBENCH_FIXTURES", raising=False)
    case = make_toy_case("tiny", namespace="seg", spec=OnDisk(tolerance=dict(TOY_TOLERANCE)))
    with pytest.raises(FingerprintError, match=r"fixture tree of seg/tiny: \$IMAGEBENCH_FIXTURES is not set"):
        case_fingerprint(case)
    missing = make_toy_case("tiny", namespace="seg", spec=OnDisk(tolerance=dict(TOY_TOLERANCE), root=tmp_path / "nowhere"))
    _, problems = collect_parts(missing)
    assert problems and "fixture tree of seg/tiny" in problems[0]
    assert str(tmp_path) not in " ".join(problems)


def test_builtin_cases_all_fingerprint() -> None:
    from imagebench import cases as builtin

    seen = set()
    for case in builtin.all_cases():
        fp = case_fingerprint(case)
        assert DIGEST.match(fp) and fp not in seen
        seen.add(fp)


# --------------------------------------------------------------------------- what a subject sees


def test_agent_visible_never_holds_reference_truth_or_verifier(tmp_path: Path) -> None:
    root = tmp_path / "fx"
    build_tree(root)
    case = on_disk_case(root)
    seen = agent_visible(case)
    assert set(seen) == {"label", "revision", "prompt", "persona", "layers", "collect", "data_keys"}
    assert seen["data_keys"] == ["image"]
    assert "Leave:" in seen["prompt"] and "`mask`" in seen["prompt"]
    text = json.dumps(seen)
    for secret in ("toy_verify", "toy_reference", "held_out", "secret", "truth", "mask_error", str(root)):
        assert secret not in text, secret
    # procedural: the fixture is not even built
    built = []

    def builder(seed: int = 0) -> Fixture:
        built.append(seed)
        return toy_fixture(seed)

    agent_visible(make_toy_case(spec=Procedural(builder, seed=3, tolerance=dict(TOY_TOLERANCE))))
    assert built == []


def test_scrub_replaces_paths() -> None:
    assert scrub("/home/me/tree/seg/x.npy: file missing (listed in /home/me/tree/manifest.json)") == (
        "<path>: file missing (listed in <path>)"
    )
    assert scrub("nothing to hide here") == "nothing to hide here"


# --------------------------------------------------------------------------- verifier objects and bundle inputs


@dataclasses.dataclass
class ConfiguredVerifier:
    """A verifier object: its code is its class, its configuration its fields."""

    planted: Any = None
    decline: tuple[str, ...] = ("decline",)

    def __call__(self, fixture: Fixture, attempt: Any) -> Any:
        return toy_verify(fixture, attempt)


class StatefulVerifier:
    def __init__(self) -> None:
        self.state = object()

    def __call__(self, fixture: Fixture, attempt: Any) -> Any:
        return toy_verify(fixture, attempt)


def test_verifier_objects_are_pinned_by_class_and_fields() -> None:
    a = case_parts(dataclasses.replace(make_toy_case(), verify=ConfiguredVerifier(planted=3)))
    b = case_parts(dataclasses.replace(make_toy_case(), verify=ConfiguredVerifier(planted=4)))
    c = case_parts(dataclasses.replace(make_toy_case(), verify=ConfiguredVerifier(planted=3)))
    assert a == c and a["verifier"] != b["verifier"]
    with pytest.raises(FingerprintError, match="must be a dataclass"):
        case_fingerprint(dataclasses.replace(make_toy_case(), verify=StatefulVerifier()))


def test_workspace_files_env_and_grading_meta_are_inputs(tmp_path: Path) -> None:
    files = tmp_path / "files"
    (files / "notes").mkdir(parents=True)
    (files / "notes" / "readme.txt").write_text("pixel size 0.5 um\n")
    meta = {"workspace_files": str(files), "env": {"MODE": "fast"}, "checks": ["counts"], "min_samples": 3, "bundle": str(tmp_path)}
    case = dataclasses.replace(make_toy_case(), meta=meta)
    parts = case_parts(case)
    assert {"input:workspace_files", "input:env", "checks", "min_samples"} <= set(parts)
    # a local path is never an input: moving the bundle does not change the fingerprint
    moved = tmp_path / "elsewhere"
    files.rename(moved)
    assert case_parts(dataclasses.replace(case, meta={**meta, "workspace_files": str(moved), "bundle": "/x"})) == parts
    (moved / "notes" / "readme.txt").write_text("pixel size 0.25 um\n")
    after = case_parts(dataclasses.replace(case, meta={**meta, "workspace_files": str(moved)}))
    assert {k for k in parts if parts[k] != after[k]} == {"input:workspace_files"}
    assert role_of("input:workspace_files", "toy/rectangle") == "input 'workspace_files' of toy/rectangle"
    env = case_parts(dataclasses.replace(case, meta={**meta, "workspace_files": str(moved), "env": {"MODE": "slow"}}))
    assert env["input:env"] != after["input:env"]
    with pytest.raises(FingerprintError, match="input 'workspace_files' of toy/rectangle: the folder is missing"):
        case_fingerprint(dataclasses.replace(case, meta={"workspace_files": str(files)}))


# --------------------------------------------------------------------------- the built fixture, byte for byte


def _fixture(data: dict[str, Any], truth: dict[str, Any]) -> Fixture:
    return Fixture(provenance="test", data=data, truth=truth)


def test_built_fixture_digest_is_canonical_over_dtype_shape_and_bytes() -> None:
    from imagebench.fixtures.fixture_digest import built_fixture_digest, value_digest

    image = np.arange(24, dtype=np.float32).reshape(4, 6)
    base = built_fixture_digest(_fixture({"image": image}, {"count": 3, "nested": {"b": [1, 2.5], "a": None}}))
    assert DIGEST.match(base)
    # key order, byte order and memory layout are not identity
    same = _fixture(
        {"image": np.asfortranarray(image).astype(">f4")}, {"nested": {"a": None, "b": (1, 2.5)}, "count": 3}
    )
    assert built_fixture_digest(same) == base
    assert value_digest(image[:, ::2]) == value_digest(np.ascontiguousarray(image[:, ::2]))
    # every other difference is
    others = [
        ({"image": image.astype(np.float64)}, {"count": 3, "nested": {"b": [1, 2.5], "a": None}}),  # dtype
        ({"image": image.reshape(6, 4)}, {"count": 3, "nested": {"b": [1, 2.5], "a": None}}),  # shape
        ({"image": image + np.float32(1e-3)}, {"count": 3, "nested": {"b": [1, 2.5], "a": None}}),  # a pixel
        ({"image": image}, {"count": 3.0, "nested": {"b": [1, 2.5], "a": None}}),  # 3 is not 3.0
        ({"image": image}, {"count": 3, "nested": {"b": [1, 2.5], "a": 0}}),  # nested truth
        ({"image": image}, {"count": np.int64(3), "nested": {"b": [1, 2.5], "a": None}}),  # a numpy scalar keeps its dtype
        ({"picture": image}, {"count": 3, "nested": {"b": [1, 2.5], "a": None}}),  # a key
        ({}, {"image": image, "count": 3, "nested": {"b": [1, 2.5], "a": None}}),  # data is not truth
    ]
    digests = {built_fixture_digest(_fixture(d, t)) for d, t in others}
    assert base not in digests and len(digests) == len(others)
    assert value_digest(float("nan")) == value_digest(float("nan")) != value_digest(float("inf"))


def test_built_fixture_digest_reads_array_refs_and_sees_tampered_truth(tmp_path: Path) -> None:
    from imagebench.fixtures.fixture_digest import built_fixture_digest, built_parts
    from imagebench.fixtures.refs import FileRef, NpzRef

    image = np.arange(24, dtype=np.uint16).reshape(4, 6)
    mask = np.eye(4, 6, dtype=bool)
    np.save(tmp_path / "image.npy", image)
    np.savez(tmp_path / "truth.npz", mask=mask)
    in_memory = _fixture({"image": image}, {"mask": mask})
    by_ref = _fixture({"image": FileRef(tmp_path / "image.npy")}, {"mask": NpzRef(tmp_path / "truth.npz", "mask")})
    assert built_fixture_digest(by_ref) == built_fixture_digest(in_memory)
    assert set(built_parts(in_memory)) == {"data:image", "truth:mask"}
    # the fixture holds its own read-only copy: writing into it fails, the digest stays
    before = built_fixture_digest(in_memory)
    mask[0, 0] = False
    with pytest.raises(ValueError):
        in_memory.truth["mask"][0, 0] = False
    assert built_fixture_digest(in_memory) == before
    # a ref whose file is gone is named by role, never by path
    (tmp_path / "truth.npz").unlink()
    with pytest.raises(FingerprintError, match=r"built truth 'mask' of the fixture: cannot be read as an array") as info:
        built_fixture_digest(by_ref)
    assert str(tmp_path) not in str(info.value)


def test_built_fixture_digest_refuses_values_without_a_byte_form() -> None:
    from imagebench.fixtures.fixture_digest import built_fixture_digest

    with pytest.raises(FingerprintError, match=r"built truth 'model' of the fixture: a object has no stable byte form"):
        built_fixture_digest(_fixture({}, {"model": object()}))
    with pytest.raises(FingerprintError, match="array of Python objects"):
        built_fixture_digest(_fixture({"x": np.array([1, "a"], dtype=object)}, {}))


def test_builder_helpers_are_covered_by_the_built_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    case = make_toy_case(spec=Procedural(helper_built_fixture, seed=0, tolerance=dict(TOY_TOLERANCE)))
    before = case_parts(case)
    assert {"built:data:image", "built:truth:max_drift"} <= set(before)
    monkeypatch.setattr(sys.modules[__name__], "max_drift", lambda: 8.1)
    after = case_parts(case)
    assert {k for k in before if before[k] != after[k]} == {"built:truth:max_drift"}  # the builder's source did not move
    assert case_fingerprint(case) != fingerprint_from_parts(case.label, case.revision, before)
    assert role_of("built:truth:max_drift", "toy/rectangle") == "built truth 'max_drift' of toy/rectangle"


def test_a_fixture_that_cannot_be_built_is_a_problem_by_role() -> None:
    from helpers import UnavailableSpec

    @dataclasses.dataclass(frozen=True)
    class Declared(UnavailableSpec):
        def fingerprint_inputs(self) -> dict[str, Any]:
            return {"generator": "one"}

    _, problems = collect_parts(make_toy_case(spec=Declared()))
    assert problems == ["built fixture of toy/rectangle: cannot be built here (the toy tree is not on this machine)"]


def max_drift() -> float:
    """A helper a builder calls: its source is not the builder's."""
    return 3.21


def helper_built_fixture(seed: int = 0) -> Fixture:
    fx = toy_fixture(seed)
    return dataclasses.replace(fx, truth={**fx.truth, "max_drift": max_drift()})


def test_a_recorded_leaving_and_the_skills_offered_are_inputs_of_the_fingerprint() -> None:
    base = make_toy_case()
    recorded = dataclasses.replace(base, collect=(*base.collect[:1], dataclasses.replace(base.collect[1], recorded=True)))
    assert case_parts(recorded)["collect"] != case_parts(base)["collect"]
    assert "recorded" not in json.dumps(agent_visible(base)["collect"])  # no other case's digest moved
    assert agent_visible(recorded)["collect"][1]["recorded"] is True
    menu = dataclasses.replace(base, meta={"skills": {"toy": "finds rectangles", "other": "does something else"}})
    assert case_parts(menu)["skills"] != case_parts(dataclasses.replace(base, meta={"skills": {"toy": "x"}}))["skills"]
    assert agent_visible(menu)["skills"] == {"other": "does something else", "toy": "finds rectangles"}
    assert "skills" not in agent_visible(base)
