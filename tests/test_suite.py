"""Pinned suites: pinning, every resolution failure by role, aliases, and the suite/run commands."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import TOY_TOLERANCE, build_tree, make_toy_case

from imagebench import cli
from imagebench.case.model import Case
from imagebench.fixtures import tree
from imagebench.fixtures.specs import OnDisk
from imagebench.records import RunRecord, read_record
from imagebench.suite.model import (
    SuiteError,
    load_aliases,
    load_suite,
    resolve_revision,
    structural_problems,
    suite_fingerprint,
    write_suite,
)
from imagebench.suite.resolve import case_source, pin_suite, verify_suite
from imagebench.suite.sampling import AssignmentError, assign, verify_assignment

REV = "2026.11.0"


def toy_cases(root: Path) -> list[Case]:
    return [
        make_toy_case("alpha"),
        make_toy_case("beta", seed=1),
        make_toy_case("tiny", namespace="seg", spec=OnDisk(tolerance=dict(TOY_TOLERANCE), root=root)),
    ]


@pytest.fixture
def fx_root(tmp_path: Path) -> Path:
    root = tmp_path / "fx"
    build_tree(root)
    return root


@pytest.fixture
def builtin_toys(monkeypatch: pytest.MonkeyPatch, fx_root: Path) -> list[Case]:
    """Pretend the built-in suite is the toy cases (a list the test may edit in place)."""
    from imagebench import cases as builtin

    toys = toy_cases(fx_root)
    monkeypatch.setattr(builtin, "all_cases", lambda: list(toys))
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("imagebench.cli.run", "imagebench.cli.suite"))
    return toys


def pinned(cases: list[Case], suite_id: str = "core", revision: str = REV) -> Any:
    manifest, problems = pin_suite(suite_id, revision, cases)
    assert problems == [] and manifest is not None
    return manifest


def strings(problems: list[Any]) -> list[str]:
    return [str(p) for p in problems]


# --------------------------------------------------------------------------- pinning


def test_pin_then_verify_resolves_exactly(fx_root: Path) -> None:
    cases = toy_cases(fx_root)
    manifest = pinned(cases)
    assert manifest.labels == ["toy/alpha", "toy/beta", "seg/tiny"]
    assert manifest.ref.revision == REV and manifest.suite_fingerprint.startswith("sha256:")
    assert structural_problems(manifest) == []
    assert verify_suite(manifest, cases) == []


def test_order_is_identity(fx_root: Path) -> None:
    cases = toy_cases(fx_root)
    forward, backward = pinned(cases), pinned(list(reversed(cases)))
    assert {m.fingerprint for m in forward.members} == {m.fingerprint for m in backward.members}
    assert forward.suite_fingerprint != backward.suite_fingerprint
    assert suite_fingerprint("core", REV, forward.members) == forward.suite_fingerprint


def test_pin_refuses_unpinned_case_revisions_and_drifted_bytes(fx_root: Path) -> None:
    cases = toy_cases(fx_root)
    cases[0] = dataclasses.replace(cases[0], revision="latest")
    cases[1] = dataclasses.replace(cases[1], revision="main")
    np.save(fx_root / "seg" / "tiny" / "held_out.npy", np.zeros((4, 6), dtype=np.uint8))
    manifest, problems = pin_suite("core", REV, cases)
    assert manifest is None
    text = "\n".join(strings(problems))
    assert "revision of toy/alpha 'latest' is a moving name" in text
    assert "revision of toy/beta 'main' is a moving name" in text
    manifest, problems = pin_suite("core", REV, toy_cases(fx_root))
    assert manifest is None and strings(problems) == [
        strings(problems)[0]
    ] and problems[0].role == "truth 'mask' of seg/tiny"
    assert pin_suite("core", "HEAD", [make_toy_case()])[0] is None


# --------------------------------------------------------------------------- bad input: every failure, by role


def test_hand_edited_suite_file_reports_every_failure(tmp_path: Path, fx_root: Path) -> None:
    cases = toy_cases(fx_root)
    path = write_suite(tmp_path / "core.json", pinned(cases))
    raw = json.loads(path.read_text())
    raw["members"][0], raw["members"][1] = raw["members"][1], raw["members"][0]  # reordered
    raw["members"][2]["fingerprint"] = "sha256:" + "0" * 64  # fingerprint changed by hand
    raw["members"][0]["parts"]["prompt"] = "sha256:" + "1" * 64  # a part edited
    path.write_text(json.dumps(raw))
    problems = strings(verify_suite(load_suite(path), cases))
    assert any(p.startswith("suite fingerprint of core:") and "reordered" in p for p in problems)
    assert any(p.startswith("fingerprint of seg/tiny:") for p in problems)
    assert any(p.startswith("fingerprint of toy/beta:") for p in problems)
    assert "prompt of toy/beta: changed since the pin" in problems
    assert len(problems) == 4, problems


def test_every_member_failure_is_named_by_role_never_by_path(tmp_path: Path, fx_root: Path) -> None:
    cases = toy_cases(fx_root)
    manifest = pinned(cases)
    installed = [
        # toy/alpha is gone
        dataclasses.replace(cases[1], revision="2026.12.0", task=cases[1].task + " Quickly: `mask`, `area`."),
        cases[2],
    ]
    folder = fx_root / "seg" / "tiny"
    np.save(folder / "image.npy", np.zeros((4, 6), dtype=np.float32))  # a curated data file swapped
    (folder / "held_out.npy").unlink()  # the held-out truth file gone
    problems = verify_suite(manifest, installed)
    text = strings(problems)
    assert (
        "case toy/alpha: not installed: no built-in case or bundle given provides it (give the --cases MODULE, "
        "--bundle DIR or --tree DIR that does)" in text
    )
    assert "revision of toy/beta: the suite pins '2026.11.0', the installed case is '2026.12.0'" in text
    assert "prompt of toy/beta: changed since the pin" in text
    assert any(p.startswith("data 'image' of seg/tiny: the bytes on disk hash to") for p in text)
    assert "truth 'mask' of seg/tiny: its file is missing" in text
    assert len(problems) == 5, text
    for p in text:
        assert str(tmp_path) not in p and "/" not in p.replace("seg/tiny", "").replace("toy/alpha", "").replace("toy/beta", "")


def test_manifest_digest_rewritten_to_match_swapped_bytes_is_still_caught(fx_root: Path) -> None:
    cases = toy_cases(fx_root)
    manifest = pinned(cases)
    np.save(fx_root / "seg" / "tiny" / "held_out.npy", np.zeros((4, 6), dtype=np.uint8))
    tree.write_manifest_entry(fx_root, "seg", "tiny", provenance="made in a test", citation="the test suite")
    assert strings(verify_suite(manifest, cases)) == ["truth 'mask' of seg/tiny: changed since the pin"]


def test_suite_id_revision_and_recorded_pin_mismatches(fx_root: Path) -> None:
    cases = toy_cases(fx_root)
    manifest = pinned(cases)
    other = pinned(cases[:2], suite_id="other", revision="2026.12.0")
    text = strings(verify_suite(manifest, cases, suite_id="extended", revision="2026.12.0", expect=other.ref))
    assert "suite id: asked for 'extended', the suite file pins 'core'" in text
    assert "revision of suite core: asked for '2026.12.0', the suite file pins '2026.11.0'" in text
    assert "suite id: the record names 'other', the suite file pins 'core'" in text
    assert any(p.startswith("suite fingerprint of core: the record pins") for p in text)
    assert len(text) == 5, text


@pytest.mark.parametrize(
    "field,value",
    [("revision", "2026.12.0"), ("suite_id", "extended")],
)
def test_a_suite_file_whose_own_id_or_revision_was_edited_is_refused(
    tmp_path: Path, fx_root: Path, field: str, value: str
) -> None:
    cases = toy_cases(fx_root)
    manifest = pinned(cases)
    path = write_suite(tmp_path / "core.json", manifest)
    raw = json.loads(path.read_text())
    raw[field] = value
    path.write_text(json.dumps(raw))
    edited = load_suite(path)
    sid = edited.suite_id
    problems = strings(verify_suite(edited, cases))
    assert len(problems) == 1 and problems[0].startswith(f"suite fingerprint of {sid}: the file records ")
    assert "the suite id or revision was edited" in problems[0]
    assert structural_problems(edited) and not structural_problems(manifest)
    with pytest.raises(AssignmentError, match=f"suite fingerprint of {sid}"):
        verify_assignment(edited, "all", assign(edited, "all", 0))
    # the suite fingerprint names the suite: the same members under another id or revision are another suite
    assert pinned(cases, suite_id="extended").suite_fingerprint != manifest.suite_fingerprint
    assert pinned(cases, revision="2026.12.0").suite_fingerprint != manifest.suite_fingerprint


def test_unreadable_suite_files(tmp_path: Path, fx_root: Path) -> None:
    path = write_suite(tmp_path / "core.json", pinned(toy_cases(fx_root)))
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(SuiteError, match="not valid JSON"):
        load_suite(path)
    raw = json.loads(text)
    raw["schema_version"] = 3
    path.write_text(json.dumps(raw))
    with pytest.raises(SuiteError, match=r"field 'schema_version' is 3; this imagebench reads suite file version 2$"):
        load_suite(path)
    raw["schema_version"] = 1  # a file pinned before the suite fingerprint covered its id and revision
    path.write_text(json.dumps(raw))
    with pytest.raises(SuiteError, match=r"field 'schema_version' is 1; .*version 2 \(an older file.*pin the suite again\)"):
        load_suite(path)
    raw["schema_version"] = 2
    raw["members"][0]["fingerprint"] = "abc"
    path.write_text(json.dumps(raw))
    with pytest.raises(SuiteError, match=r"field 'members.0.fingerprint'"):
        load_suite(path)
    with pytest.raises(SuiteError, match="is missing"):
        load_suite(tmp_path / "absent.json")


def test_duplicate_labels_in_sources_are_a_problem(fx_root: Path) -> None:
    cases = toy_cases(fx_root)
    manifest = pinned(cases)
    text = strings(verify_suite(manifest, [*cases, make_toy_case("alpha")]))
    assert text == ["case toy/alpha: provided twice (given and given); a label names one case"]


def test_a_bundle_that_cannot_be_loaded_is_named_not_located(tmp_path: Path) -> None:
    source = case_source([tmp_path / "Not A Skill"], builtin=False)
    assert len(source.problems) == 1
    problem = source.problems[0]
    assert problem.role == "bundle Not A Skill" and str(tmp_path) not in problem.reason


# --------------------------------------------------------------------------- aliases


def test_aliases_resolve_to_pins_and_moving_names_are_refused(tmp_path: Path) -> None:
    (tmp_path / "aliases.json").write_text(json.dumps({"schema_version": 1, "aliases": {"stable": REV}}))
    aliases = load_aliases(tmp_path)
    assert resolve_revision("stable", aliases) == (REV, "stable")
    assert resolve_revision("2026.12.0", aliases) == ("2026.12.0", None)
    with pytest.raises(SuiteError, match=r"'latest' is a moving name.*the alias file defines stable"):
        resolve_revision("latest", aliases)
    with pytest.raises(SuiteError, match="no alias file defines it"):
        resolve_revision("stable", load_aliases(tmp_path / "nothing-here"))
    (tmp_path / "aliases.json").write_text(json.dumps({"schema_version": 1, "aliases": {"stable": "main"}}))
    with pytest.raises(SuiteError, match=r"field 'aliases.stable': the target 'main' is a moving name"):
        load_aliases(tmp_path)


# --------------------------------------------------------------------------- the commands


def _run_folder(out: str) -> Path:
    return Path(out.split("run folder: ")[1].split()[0])


def test_cli_pin_and_verify(
    tmp_path: Path, builtin_toys: list[Case], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["suite", "pin", "core", "--revision", REV, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "pinned suite core@2026.11.0: 3 member(s)" in out
    path = tmp_path / "suites" / "core.json"
    assert load_suite(path).labels == ["toy/alpha", "toy/beta", "seg/tiny"]

    assert cli.main(["suite", "pin", "core", "--revision", REV]) == 0
    assert "already pinned with these members" in capsys.readouterr().out
    assert cli.main(["suite", "pin", "core", "--revision", "latest"]) == 2
    assert "'latest' is a moving name" in capsys.readouterr().err
    assert cli.main(["suite", "pin", "core", "-k", "nothing-like-this", "--revision", REV]) == 2
    assert "matched no case" in capsys.readouterr().err

    assert cli.main(["suite", "verify", "core", "--quiet"]) == 0
    assert "resolves exactly: 3 member(s)" in capsys.readouterr().out
    assert cli.main(["suite", "verify", "core"]) == 0  # with the progress line on stderr
    assert "resolves exactly: 3 member(s)" in capsys.readouterr().out

    # a pin cannot move: the same revision with other members is refused, the file unchanged
    before = path.read_text()
    assert cli.main(["suite", "pin", "core", "-k", "toy/*", "--revision", REV]) == 1
    assert "A pin cannot move" in capsys.readouterr().out
    assert path.read_text() == before

    # installed cases drift: verify lists every failure, by role, and exits 1
    builtin_toys[0] = dataclasses.replace(builtin_toys[0], persona="someone new")
    del builtin_toys[1]
    np.save(tmp_path / "fx" / "seg" / "tiny" / "image.npy", np.ones((4, 6), dtype=np.float32))
    assert cli.main(["suite", "verify", str(path), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "FAIL persona of toy/alpha: changed since the pin" in out
    assert "FAIL case toy/beta: not installed" in out
    assert "FAIL data 'image' of seg/tiny: the bytes on disk hash to" in out
    assert "3 failure(s)" in out

    assert cli.main(["suite", "verify", "absent", "--quiet"]) == 1
    assert "no suite file absent.json" in capsys.readouterr().out


def test_cli_run_suite_records_cohort_and_refuses_a_broken_suite(
    tmp_path: Path, builtin_toys: list[Case], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "aliases.json").write_text(json.dumps({"schema_version": 1, "aliases": {"stable": REV}}))
    assert cli.main(["suite", "pin", "core", "--revision", "stable", "--quiet"]) == 0
    manifest = load_suite(tmp_path / "suites" / "core.json")
    assert manifest.revision == REV and manifest.requested == "stable" and manifest.aliases == {"stable": REV}
    capsys.readouterr()

    out = str(tmp_path / "out")
    assert cli.main(["run", "--suite", "core@stable", "--sample", "seeded:2", "--seed", "3", "--out", out, "--quiet"]) == 0
    run_dir = _run_folder(capsys.readouterr().out)
    record = read_record(run_dir / "run.json", RunRecord)
    info = record.extra["suite"]
    assert info["requested"] == "core@stable" and info["alias"] == "stable"
    cohort = info["assignment"]["cohort"]
    assert cohort == {"suite": manifest.ref.model_dump(), "policy": "seeded:2"}
    assert info["assignment"]["seed"] == 3 and record.cases == info["assignment"]["labels"]
    assert len(record.cases) == 2 and record.complete and record.extra["verdicts"]
    assert info["conditions"]["samples"] == 1 and info["conditions"]["scoring"]["registry_hash"]
    assert record.selection["sample"] == "seeded:2" and record.selection["seed"] == 3
    verify_assignment(manifest, "seeded:2", record)

    # the alias moves: the recorded pin still verifies, asking by alias now refuses to run
    (tmp_path / "suites" / "aliases.json").write_text(json.dumps({"schema_version": 1, "aliases": {"stable": "2026.12.0"}}))
    verify_assignment(load_suite(tmp_path / "suites" / "core.json"), "seeded:2", record)
    runs_before = sorted((tmp_path / "out").iterdir())
    assert cli.main(["run", "--suite", "core@stable", "--out", out, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "revision of suite core: asked for '2026.12.0', the suite file pins '2026.11.0'" in err
    assert "refusing to run" in err
    assert sorted((tmp_path / "out").iterdir()) == runs_before  # nothing ran

    # a broken suite is refused before anything runs
    builtin_toys[0] = dataclasses.replace(builtin_toys[0], timeout_s=5.0)
    assert cli.main(["run", "--suite", "core", "--out", out, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "time limit of toy/alpha: changed since the pin" in err and "refusing to run" in err
    assert sorted((tmp_path / "out").iterdir()) == runs_before


def test_cli_run_suite_usage_errors(
    tmp_path: Path, builtin_toys: list[Case], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["suite", "pin", "core", "--revision", REV, "--quiet"]) == 0
    capsys.readouterr()
    out = str(tmp_path / "out")
    assert cli.main(["run", "--sample", "first:1", "--out", out]) == 2
    assert "give --suite too" in capsys.readouterr().err
    assert cli.main(["run", "--suite", "core", "-k", "alpha", "--out", out]) == 2
    assert "-k cannot be combined with --suite" in capsys.readouterr().err
    assert cli.main(["run", "--suite", "core", "--sample", "seeded:9", "--out", out, "--quiet"]) == 2
    assert "seeded:9 asks for 9 members, the suite has 3" in capsys.readouterr().err
    assert cli.main(["run", "--suite", "core", "--sample", "some", "--out", out]) == 2
    assert "expected all, first:N or seeded:N" in capsys.readouterr().err
    assert cli.main(["run", "--suite", "core@latest", "--out", out]) == 2
    assert "'latest' is a moving name" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- bundles


def test_a_suite_with_bundle_members_resolves_only_with_the_bundle(
    tmp_path: Path, builtin_toys: list[Case], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    example = Path(__file__).resolve().parents[1] / "examples" / "bundles" / "segment-nuclei"
    if not example.is_dir():
        pytest.skip("the example bundle is not in this checkout")
    bundle = tmp_path / "bundles" / "segment-nuclei"
    shutil.copytree(example, bundle)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["suite", "pin", "mixed", "-k", "toy/alpha", "-k", "segment-nuclei/*", "--bundle", str(bundle), "--revision", REV, "--quiet"]) == 0
    capsys.readouterr()
    labels = load_suite(tmp_path / "suites" / "mixed.json").labels
    assert labels[0] == "toy/alpha" and len(labels) > 2 and all(x.startswith("segment-nuclei/") for x in labels[1:])
    assert cli.main(["suite", "verify", "mixed", "--bundle", str(bundle), "--quiet"]) == 0
    capsys.readouterr()
    assert cli.main(["suite", "verify", "mixed", "--quiet"]) == 1  # without the bundle its members are not installed
    out = capsys.readouterr().out
    assert out.count("not installed") == len(labels) - 1
    # a file the subject is handed changes: named by role
    planted = [p for p in (bundle / "evals" / "fixtures").glob("*/files/*") if p.is_file() and p.name != ".gitkeep"]
    assert planted
    planted[0].write_text(planted[0].read_text() + "\nedited\n")
    assert cli.main(["suite", "verify", "mixed", "--bundle", str(bundle), "--quiet"]) == 1
    out = capsys.readouterr().out
    case_id = planted[0].parents[1].name
    assert f"FAIL input 'workspace_files' of segment-nuclei/{case_id}: changed since the pin" in out
    assert str(tmp_path) not in out.replace(str(bundle), "")


def test_a_bundle_case_reading_a_curated_fixture_is_rehashed(fx_root: Path) -> None:
    from imagebench.bundle.cases import CuratedRef

    case = make_toy_case("borrowed", spec=CuratedRef("seg", "tiny", dict(TOY_TOLERANCE), root=str(fx_root)))
    manifest = pinned([case])
    assert {"case.json", "data:image", "truth:mask", "curated"} <= set(manifest.members[0].parts)
    np.save(fx_root / "seg" / "tiny" / "held_out.npy", np.zeros((4, 6), dtype=np.uint8))
    problems = strings(verify_suite(manifest, [case]))
    assert len(problems) == 1 and problems[0].startswith("truth 'mask' of toy/borrowed: the bytes on disk hash to")


# --------------------------------------------------------------------------- what a fixture builds to


def max_drift() -> float:
    """A helper the builder below calls: its source is not part of the builder's."""
    return 3.21


def drifting_fixture(seed: int = 0) -> Any:
    from helpers import toy_fixture

    fx = toy_fixture(seed)
    return dataclasses.replace(fx, truth={**fx.truth, "max_drift": max_drift()})


def drifting_case() -> Case:
    from imagebench.fixtures.specs import Procedural

    return make_toy_case("drifty", spec=Procedural(drifting_fixture, seed=0, tolerance=dict(TOY_TOLERANCE)))


def test_a_changed_builder_helper_is_caught_by_the_built_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    cases = [make_toy_case("alpha"), drifting_case()]
    manifest = pinned(cases)
    assert "built:truth:max_drift" in manifest.members[1].parts
    monkeypatch.setattr(sys.modules[__name__], "max_drift", lambda: 8.1)
    problems = verify_suite(manifest, cases)
    assert [p.role for p in problems] == ["built truth 'max_drift' of toy/drifty"]
    assert "the fixture builds to other bytes" in problems[0].reason


def test_a_builder_that_is_not_deterministic_cannot_be_pinned() -> None:
    from imagebench.fixtures.specs import Procedural

    draws = iter(range(100))

    def restless(seed: int = 0) -> Any:
        fx = drifting_fixture(seed)
        return dataclasses.replace(fx, truth={**fx.truth, "draw": next(draws)})

    case = make_toy_case("restless", spec=Procedural(restless, seed=0, tolerance=dict(TOY_TOLERANCE)))
    manifest, problems = pin_suite("core", REV, [case])
    assert manifest is None
    why = "two builds gave other bytes: the builder is not deterministic in its seed and params, so it cannot be pinned"
    assert strings(problems) == [f"built truth 'draw' of toy/restless: {why}"]


def test_cli_verify_and_run_suite_refuse_a_fixture_that_builds_differently(
    tmp_path: Path, builtin_toys: list[Case], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    builtin_toys.append(drifting_case())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["suite", "pin", "core", "--revision", REV, "--quiet"]) == 0
    assert cli.main(["suite", "verify", "core", "--quiet"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sys.modules[__name__], "max_drift", lambda: 8.1)
    assert cli.main(["suite", "verify", "core", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "FAIL built truth 'max_drift' of toy/drifty: changed since the pin" in out and "1 failure(s)" in out
    assert cli.main(["run", "--suite", "core", "--out", str(tmp_path / "out"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "FAIL built truth 'max_drift' of toy/drifty" in err and "refusing to run" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
