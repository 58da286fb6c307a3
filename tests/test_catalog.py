"""The catalog (imagebench.catalog): cases from the built-in suite, ``--cases`` modules, installed
packages' ``imagebench.cases`` entry points, bundles and the user's tree, each with its source; the
same flags in every command; a run that records its sources and a resume that opens them again.

The skill under test is written entirely outside ``src/`` into ``tmp_path``: a package
``blobskill`` with a builder, a verifier, a reference and a baseline, and a fake installed
distribution (a ``*.dist-info`` folder with ``entry_points.txt``) that names its case module.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from imagebench import cli
from imagebench.catalog import Catalog, CatalogError, Source, build_catalog, tree_read
from imagebench.records import RunRecord, read_record

REV = "2026.11.0"

#: A label-image skill: find the bright squares, leave their label image; scored by the built-in
#: ``label-image`` verifier by name (objects at IoU 0.5); the baseline leaves the foreground as one
#: label (every square but one missed).
SKILL_MODULE = '''
"""Count bright squares: a skill written outside imagebench."""

import numpy as np

from imagebench.case.model import Case, Collect, Layer, Skill
from imagebench.cases.verifiers import named_verifier
from imagebench.fixtures.fixture import Fixture
from imagebench.fixtures.specs import Procedural

TOLERANCE = {"f1_shortfall": 0.1, "missed_fraction": 0.1, "false_fraction": 0.1, "iou_shortfall": 0.2}


def squares(seed=0, n=3, size=40):
    rng = np.random.default_rng(seed)
    labels = np.zeros((size, size), dtype=np.int32)
    for i in range(n):
        r, c = 2 + 12 * i, int(rng.integers(2, size - 8))
        labels[r : r + 6, c : c + 6] = i + 1
    image = ((labels > 0).astype(np.float32) + rng.normal(0, 0.05, labels.shape)).astype(np.float32)
    return Fixture(provenance=f"squares, seed {seed}", data={"image": image}, truth={"labels": labels})


verify = named_verifier("label-image", {"data": "image", "truth": "labels", "leaving": "labels"})


def reference(session):
    from scipy import ndimage

    labels, _ = ndimage.label(np.asarray(session.namespace["image"]) > 0.5)
    session.namespace["labels"] = labels.astype(np.int32)


def baseline(session):
    session.namespace["labels"] = (np.asarray(session.namespace["image"]) > 0.5).astype(np.int32)


def _case(case_id, seed):
    return Case(
        case_id=case_id,
        namespace="blob-skill",
        task="Label each bright square of `image`; leave the label image as `labels`.",
        persona="You are an image analyst.",
        fixture=Procedural(squares, seed=seed, tolerance=dict(TOLERANCE)),
        layers=(Layer("image", "image", "image"),),
        collect=(Collect("labels", "array", "one label per square", layer="labels"),),
        verify=verify,
        reference=reference,
        baseline=baseline,
        baseline_about="thresholds: every square is one label",
        timeout_s=30.0,
    )


CASES = [_case("three-squares", 1), _case("three-more", 2)]
SKILLS = [Skill("blob-skill", checklist=("array",), about="count bright squares")]
BUILDERS = {"blob-skill.squares": squares}
'''


def write_skill(root: Path, package: str = "blobskill", body: str = SKILL_MODULE) -> Path:
    """The package ``package`` under ``root`` with its case module ``<package>.cases``."""
    folder = root / package
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    (folder / "cases.py").write_text(textwrap.dedent(body))
    return folder / "cases.py"


def install_entry_point(site: Path, dist: str, points: dict[str, str]) -> None:
    """A fake installed distribution ``dist`` in ``site``: its METADATA and entry_points.txt."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{name} = {value}" for name, value in points.items())
    (info / "entry_points.txt").write_text(f"[imagebench.cases]\n{lines}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path, forgotten again after the test (with every module imported from it)."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if name.split(".")[0] in {"blobskill", "otherskill", "dupskill", "brokenskill", "nocases"}:
            del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture(autouse=True)
def _no_user_tree(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("IMAGEBENCH_FIXTURES", raising=False)
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def _forget(package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


# --------------------------------------------------------------------------- each source


def test_the_builtin_cases_come_with_their_source() -> None:
    from imagebench import cases as builtin

    catalog = build_catalog(entry_points=False, env_tree=False)
    assert catalog.labels == [c.label for c in builtin.all_cases()]
    assert {catalog.source_of(label).kind for label in catalog.labels} == {"builtin"}
    assert catalog.skills.keys() == builtin.skills().keys() and not catalog.named
    curated = next(c for c in catalog if c.kind == "curated")
    assert tree_read(curated).kind == "packaged"  # a built-in curated case reads the packaged tree


def test_a_module_by_name_and_by_file(site: Path, tmp_path: Path) -> None:
    write_skill(site)
    catalog = build_catalog(modules=["blobskill.cases"], entry_points=False, env_tree=False)
    mine = [c.label for c in catalog.offered()]
    assert mine == ["blob-skill/three-squares", "blob-skill/three-more"]
    assert catalog.source_of(mine[0]) == Source("module", "blobskill.cases", module="blobskill.cases")
    assert "blob-skill" in catalog.skills and "blob-skill.squares" in catalog.builders
    assert len(catalog) == len(catalog.offered()) + len(
        [c for c in catalog if catalog.source_of(c.label).kind == "builtin"]
    )
    _forget("blobskill")
    # a .py file elsewhere: its folder goes on sys.path, the source keeps the file
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "my_squares.py").write_text(textwrap.dedent(SKILL_MODULE))
    catalog = build_catalog(modules=[str(loose / "my_squares.py")], entry_points=False, env_tree=False)
    source = catalog.source_of("blob-skill/three-squares")
    assert (source.kind, source.module, source.path) == ("module", "my_squares", str(loose / "my_squares.py"))
    assert source.flag == f"--cases {loose / 'my_squares.py'}"
    _forget("my_squares")
    sys.path.remove(str(loose))


def test_a_label_two_sources_give_is_an_error_naming_both(site: Path) -> None:
    write_skill(site)
    write_skill(site, "dupskill")
    with pytest.raises(CatalogError) as err:
        build_catalog(modules=["blobskill.cases", "dupskill.cases"], entry_points=False, env_tree=False)
    text = str(err.value)
    assert "blob-skill/three-squares" in text and "module blobskill.cases" in text and "module dupskill.cases" in text
    # a module that reuses a built-in label
    from imagebench import cases as builtin

    first = builtin.all_cases()[0]
    body = f"from imagebench import cases\nCASES = [cases.get_case({first.label!r})]\n"
    write_skill(site, "otherskill", body)
    with pytest.raises(
        CatalogError, match=f"case {first.label} is provided by the built-in cases and module otherskill.cases"
    ):
        build_catalog(modules=["otherskill.cases"], entry_points=False, env_tree=False)


def test_a_module_that_fails_is_an_error_naming_it(site: Path) -> None:
    write_skill(site, "brokenskill", "import no_such_dependency_here\nCASES = []\n")
    with pytest.raises(
        CatalogError, match=r"module brokenskill.cases: ModuleNotFoundError: No module named 'no_such_dependency_here'"
    ):
        build_catalog(modules=["brokenskill.cases"], entry_points=False, env_tree=False)
    write_skill(site, "nocases", "SKILLS = []\n")
    with pytest.raises(CatalogError, match="field 'CASES' is missing"):
        build_catalog(modules=["nocases.cases"], entry_points=False, env_tree=False)
    write_skill(site, "otherskill", "CASES = ['not a case']\n")
    with pytest.raises(CatalogError, match="field 'CASES' must be a list of imagebench Case, found a str"):
        build_catalog(modules=["otherskill.cases"], entry_points=False, env_tree=False)
    with pytest.raises(CatalogError, match="module not_a_module_anywhere: ModuleNotFoundError"):
        build_catalog(modules=["not_a_module_anywhere"], entry_points=False, env_tree=False)
    with pytest.raises(CatalogError, match="no such file"):
        build_catalog(modules=["./missing_cases.py"], entry_points=False, env_tree=False)


def test_installed_packages_cases_appear_by_themselves(site: Path) -> None:
    write_skill(site)
    install_entry_point(site, "blob-skill-pkg", {"blob-skill": "blobskill.cases"})
    importlib.invalidate_caches()
    catalog = build_catalog(env_tree=False)
    source = catalog.source_of("blob-skill/three-squares")
    assert (source.kind, source.name, source.module, source.dist) == (
        "entry-point",
        "blob-skill",
        "blobskill.cases",
        "blob-skill-pkg",
    )
    assert str(source) == "entry point blob-skill = blobskill.cases (distribution blob-skill-pkg)"
    assert not catalog.named and "blob-skill/three-squares" in [c.label for c in catalog.offered()]


def test_a_broken_entry_point_is_a_warning_and_the_others_load(site: Path) -> None:
    write_skill(site)
    install_entry_point(site, "blob-skill-pkg", {"blob-skill": "blobskill.cases"})
    install_entry_point(site, "broken-pkg", {"broken": "brokenskill.cases", "attr": "blobskill.cases:CASES"})
    write_skill(site, "brokenskill", "raise RuntimeError('this package is broken')\n")
    importlib.invalidate_caches()
    catalog = build_catalog(env_tree=False)
    assert "blob-skill/three-squares" in catalog
    broken = [w for w in catalog.warnings if "entry point broken = brokenskill.cases" in w]
    assert broken and "RuntimeError: this package is broken" in broken[0] and "left out" in broken[0]
    assert any("entry point attr = blobskill.cases:CASES" in w and "names a module" in w for w in catalog.warnings)
    # on the command line: the warning is printed, the command goes on
    assert cli.main(["list"]) == 0


def test_the_users_tree_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers import make_toy_case

    from imagebench.catalog import load

    tree = tmp_path / "tree"
    tree.mkdir()
    seen: list[Path] = []

    def fake_tree_cases(root: Path) -> tuple[list[Any], list[str]]:
        seen.append(root)
        return [make_toy_case("declared", namespace="mine")], ["one declaration was left out"]

    # imagebench.cases.declared.tree_cases is reached through one function: patched here, the real one below
    monkeypatch.setattr(load, "declared_tree_cases", fake_tree_cases)
    catalog = build_catalog(tree=tree, entry_points=False)
    assert seen == [tree.resolve()]
    assert catalog.source_of("mine/declared") == Source("tree", str(tree.resolve()), path=str(tree.resolve()))
    assert catalog.offered()[0].label == "mine/declared" and len(catalog.offered()) == 1
    assert any("one declaration was left out" in w for w in catalog.warnings)
    # $IMAGEBENCH_FIXTURES: the same cases by themselves; a missing tree there is a warning, with --tree an error
    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(tree))
    assert "mine/declared" in build_catalog(entry_points=False) and not build_catalog(entry_points=False).named
    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(tmp_path / "gone"))
    assert any("no such folder" in w for w in build_catalog(entry_points=False).warnings)
    with pytest.raises(CatalogError, match="no such folder"):
        build_catalog(tree=tmp_path / "gone", entry_points=False)


def test_a_declared_tree_case_is_listed_run_resumed_and_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real bench-case.json in the user's tree (imagebench.cases.declared): by itself from
    $IMAGEBENCH_FIXTURES in list, run, a resume and a suite, named as its tree."""
    from user_code import forget_package, write_tree, write_user_package

    code = tmp_path / "code"
    write_user_package(code)
    monkeypatch.syspath_prepend(str(code))
    forget_package("mybench")
    root = tmp_path / "tree"
    write_tree(root)
    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(root))
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "my-skill/squares" in out and f"tree {root.resolve()}" in out and "yours" in out
    assert cli.main(["show", "my-skill/squares"]) == 0
    assert f"source:    tree {root.resolve()}" in capsys.readouterr().out
    runs = tmp_path / "out"
    assert (
        cli.main(["run", "--tree", str(root), "--subject", "reference", "--out", str(runs), "--quiet", "--no-report"])
        == 0
    )
    run = _last_run(runs)
    record = read_record(run / "run.json", RunRecord)
    assert record.cases == ["my-skill/squares"] and record.sources is not None
    assert [(s.kind, s.path) for s in record.sources] == [("tree", str(root.resolve()))]
    (run / "reference" / "my-skill" / "squares" / "sample-0" / "summary.json").unlink()
    monkeypatch.delenv("IMAGEBENCH_FIXTURES")  # the resume opens the recorded tree, not the variable
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(run), "--quiet", "--no-report"]) == 0
    assert "ran 1" in capsys.readouterr().out
    suites = ["--suites-dir", str(tmp_path / "suites"), "--quiet"]
    assert cli.main(["suite", "pin", "mine", "-k", "my-skill/*", "--tree", str(root), "--revision", REV, *suites]) == 0
    assert cli.main(["suite", "verify", "mine", "--tree", str(root), *suites]) == 0
    assert cli.main(["suite", "verify", "mine", *suites]) == 1
    forget_package("mybench")


# --------------------------------------------------------------------------- the commands


def test_list_and_show_name_the_source_and_the_tree(
    site: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_skill(site)
    monkeypatch.setenv("COLUMNS", "250")
    mine = tmp_path / "mytree"
    mine.mkdir()
    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(mine))
    assert cli.main(["list", "--cases", "blobskill.cases"]) == 0
    out = capsys.readouterr().out
    assert "2 cases of module blobskill.cases" in out and "blob-skill/three-squares" in out
    assert "module blobskill.cases" in out and "segment-nuclei/dsb2018 " not in out  # only the named source's
    assert "packaged" in out and str(mine) in out  # both trees, at once
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "segment-nuclei/dsb2018 " in out and "built-in" in out and "packaged" in out
    assert cli.main(["show", "blob-skill/three-more", "--cases", "blobskill.cases"]) == 0
    out = capsys.readouterr().out
    assert "source:    module blobskill.cases" in out and "tree:      -" in out
    assert cli.main(["show", "segment-nuclei/dsb2018"]) == 0
    out = capsys.readouterr().out
    assert "source:    the built-in cases" in out and "tree:      packaged (" in out
    assert cli.main(["show", "blob-skill/three-more"]) == 2  # not given: not found
    assert "no case labelled" in capsys.readouterr().err
    assert cli.main(["list", "--cases", "not_a_module_anywhere"]) == 2
    assert "module not_a_module_anywhere: ModuleNotFoundError" in capsys.readouterr().err


def test_list_selects_among_the_offered_cases_and_its_json_names_source_and_tree(
    site: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_skill(site)
    monkeypatch.setenv("COLUMNS", "250")
    assert cli.main(["list", "--cases", "blobskill.cases", "--exclude", "*more", "--json"]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)  # stdout holds the JSON alone: no trees line, no table
    assert [(r["label"], r["source"], r["tree"]) for r in rows] == [
        ("blob-skill/three-squares", "module blobskill.cases", None)
    ]
    assert cli.main(["list", "--skill", "segment-nuclei", "--kind", "curated", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {(r["source"], r["tree"], r["kind"]) for r in rows} == {("built-in", "packaged", "curated")}
    assert cli.main(["list", "--cases", "blobskill.cases", "-k", "three-more"]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 cases of module blobskill.cases (-k three-more)" in out and "three-squares" not in out
    # the selection is among the named source's cases only: a built-in skill is not on offer
    assert cli.main(["list", "--cases", "blobskill.cases", "--skill", "segment-nuclei"]) == 2
    err = capsys.readouterr().err
    assert "--skill segment-nuclei matched no case" in err and "skills: blob-skill;" in err


def _last_run(out: Path) -> Path:
    return sorted(out.glob("run-*"))[-1]


def test_a_run_records_its_sources_and_a_resume_opens_them_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "work"
    file = write_skill(folder)
    loose = folder / "blobskill" / "cases.py"
    assert file == loose
    out = tmp_path / "out"
    assert (
        cli.main(["run", "--cases", str(file), "--subject", "reference", "--out", str(out), "--quiet", "--no-report"])
        == 0
    )
    run = _last_run(out)
    record = read_record(run / "run.json", RunRecord)
    assert record.cases == ["blob-skill/three-squares", "blob-skill/three-more"]  # only the named source's cases
    assert record.schema_version == 8 and record.sources is not None
    assert [(s.kind, s.module, s.path, s.cases) for s in record.sources] == [
        ("module", "cases", str(file), ["blob-skill/three-squares", "blob-skill/three-more"])
    ]
    # a fresh process would not have the module: forget it, and its folder on sys.path
    _forget("cases")
    sys.path.remove(str(file.parent))
    (run / "reference" / "blob-skill" / "three-more" / "sample-0" / "summary.json").unlink()
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(run), "--quiet", "--no-report"]) == 0
    assert "kept 1 finished unit(s), ran 1" in capsys.readouterr().out
    _forget("cases")
    sys.path.remove(str(file.parent))
    # the module moved: the resume names the cases, where they were recorded from and the flag
    moved = tmp_path / "elsewhere"
    file.parent.rename(moved)
    (run / "reference" / "blob-skill" / "three-more" / "sample-0" / "summary.json").unlink()
    assert cli.main(["run", "--resume", str(run), "--quiet", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "field 'sources'" in err and "blob-skill/three-squares, blob-skill/three-more" in err
    assert f"give --cases {file}" in err
    # given where it is now, the resume runs
    _forget("cases")
    assert cli.main(["run", "--resume", str(run), "--cases", str(moved / "cases.py"), "--quiet", "--no-report"]) == 0
    _forget("cases")
    sys.path.remove(str(moved))


def test_the_resume_command_of_an_interrupt_names_the_catalog_flags_only_when_the_sources_need_them(
    tmp_path: Path,
) -> None:
    """What an interrupted run prints to take it up again (cli.common.resume_command): no --cases
    when run.json's sources find the cases again by themselves; the flags as given when they do
    not (an older run.json without sources, a moved module the flags stand in for)."""
    from imagebench.catalog import build_catalog
    from imagebench.cli.common import resume_command
    from imagebench.executor import run_cases
    from imagebench.subjects import parse_subject

    file = write_skill(tmp_path / "work")
    out = tmp_path / "out"
    argv = ["run", "--cases", str(file), "-k", "three-squares", "--out", str(out), "--quiet", "--no-report"]
    assert cli.main(argv) == 0
    run = _last_run(out)
    args = cli.build_parser(argv).parse_args(argv)
    assert resume_command(args, run) == ["imagebench", "run", "--resume", str(run), "--quiet", "--no-report"]
    # a run.json without sources (cases handed to run_cases alone): the flags go with the command
    catalog = build_catalog(modules=[str(file)], entry_points=False, env_tree=False)
    cases = [c for c in catalog.offered() if c.case_id == "three-squares"]
    bare = run_cases(cases, parse_subject("reference"), out=tmp_path / "bare", progress=False).run_dir
    assert read_record(bare / "run.json", RunRecord).sources is None
    assert resume_command(args, bare)[4:6] == ["--cases", str(file)]
    # the module moved, and the resume was given where it is now: that flag is needed again
    _forget("cases")
    sys.path.remove(str(file.parent))
    moved = tmp_path / "elsewhere"
    file.parent.rename(moved)
    again = ["run", "--resume", str(run), "--cases", str(moved / "cases.py")]
    resumed = cli.build_parser(again).parse_args(again)
    from imagebench.cli.catalog import catalog_from_args

    catalog_from_args(resumed)  # as the resume does: the module is imported from its new place
    assert resume_command(resumed, run) == [
        "imagebench",
        "run",
        "--resume",
        str(run),
        "--cases",
        str(moved / "cases.py"),
    ]
    # no run.json to read: the flags as given
    assert resume_command(resumed, tmp_path / "no-such-run")[4:] == ["--cases", str(moved / "cases.py")]
    _forget("cases")
    sys.path.remove(str(moved))


def test_an_older_run_without_sources_resumes_from_the_builtin_cases(tmp_path: Path) -> None:
    from imagebench.catalog import cases_of_run

    record = RunRecord(
        run_id="run-x", started="now", subject="reference", samples=1, cases=["flatfield/vignetted-field"]
    )
    assert record.sources is None
    assert [c.label for c in cases_of_run(record)] == ["flatfield/vignetted-field"]
    record = RunRecord(run_id="run-x", started="now", subject="reference", samples=1, cases=["blob-skill/x"])
    with pytest.raises(CatalogError, match="--cases MODULE for a module's"):
        cases_of_run(record)


def test_a_new_skill_outside_src_listed_run_pinned_and_compared(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's measurement: a new skill, no edit of the package: an installed package's entry point."""
    write_skill(site)
    install_entry_point(site, "blob-skill-pkg", {"blob-skill": "blobskill.cases"})
    importlib.invalidate_caches()
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "blob-skill/three-squares" in out and "entry-point blob-skill" in out
    # calibrate: the reference passes, the baseline and nop fail every case of the skill
    assert cli.main(["calibrate", "--skill", "blob-skill", "--out", str(tmp_path / "calibration"), "--json"]) == 0
    calibrated = json.loads(capsys.readouterr().out)
    assert {c["label"]: c["verdict"] for c in calibrated["cases"]} == {
        "blob-skill/three-squares": "ok",
        "blob-skill/three-more": "ok",
    }
    # pin the skill's cases into a suite, verify it
    assert cli.main(["suite", "pin", "blobs", "-k", "blob-skill/*", "--revision", REV, "--quiet"]) == 0
    assert cli.main(["suite", "verify", "blobs", "--quiet"]) == 0
    capsys.readouterr()
    # two runs of the suite: the reference and nop, then compare
    out = tmp_path / "out"
    assert cli.main(["run", "--suite", "blobs", "--subject", "reference", "--out", str(out), "--quiet"]) == 0
    a = _last_run(out)
    assert cli.main(["run", "--suite", "blobs", "--subject", "nop", "--out", str(out), "--quiet"]) == 1
    b = _last_run(out)
    assert a != b
    sources = read_record(a / "run.json", RunRecord).sources
    assert sources is not None and [(s.kind, s.name, s.dist) for s in sources] == [
        ("entry-point", "blob-skill", "blob-skill-pkg")
    ]
    capsys.readouterr()
    assert cli.main(["compare", str(a), str(b), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["comparable"] and {c["label"] for c in result["cases"]} == {
        "blob-skill/three-squares",
        "blob-skill/three-more",
    }
    assert result["overall"]["rate_a"] == 1.0 and result["overall"]["rate_b"] == 0.0
    # the baseline is a subject too: it fails the count
    assert (
        cli.main(
            [
                "run",
                "-k",
                "blob-skill/three-squares",
                "--subject",
                "baseline",
                "--out",
                str(out),
                "--quiet",
                "--no-report",
            ]
        )
        == 1
    )


def test_a_suite_member_from_a_module_resolves_again_with_its_flag(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_skill(site)
    suites = tmp_path / "suites"
    args = ["--suites-dir", str(suites), "--quiet"]
    assert (
        cli.main(["suite", "pin", "mods", "-k", "blob-skill/*", "--cases", "blobskill.cases", "--revision", REV, *args])
        == 0
    )
    assert cli.main(["suite", "verify", "mods", "--cases", "blobskill.cases", *args]) == 0
    capsys.readouterr()
    assert cli.main(["suite", "verify", "mods", *args]) == 1
    out = capsys.readouterr().out
    assert out.count("not installed") == 2 and "give the --cases MODULE" in out


def test_a_script_calling_run_cases_gets_a_report(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``executor.run_cases`` from Python with one's own cases: ``imagebench report RUN_DIR`` writes its page,
    and the catalog's records let a resume find the cases again."""
    write_skill(site)
    from imagebench.executor import run_cases
    from imagebench.subjects import ReferenceSubject

    catalog: Catalog = build_catalog(modules=["blobskill.cases"], entry_points=False, env_tree=False)
    cases = catalog.offered()
    result = run_cases(
        cases,
        ReferenceSubject(),
        out=tmp_path / "out",
        progress=False,
        sources=catalog.records([c.label for c in cases]),
    )
    assert result.passed
    assert cli.main(["report", str(result.run_dir), "--quiet"]) == 0
    page = (result.run_dir / "report.html").read_text()
    assert "blob-skill/three-squares" in page


def test_a_module_listing_one_label_twice_and_a_package_shadowing_a_builtin_label(site: Path) -> None:
    body = SKILL_MODULE + "\nCASES = [CASES[0], CASES[0]]\n"
    write_skill(site, "dupskill", body)
    with pytest.raises(CatalogError, match="case blob-skill/three-squares is provided by module dupskill.cases, twice"):
        build_catalog(modules=["dupskill.cases"], entry_points=False, env_tree=False)
    # an installed package may not take a built-in label over: an error naming both, not a silent swap
    from imagebench import cases as builtin

    first = builtin.all_cases()[0]
    write_skill(site, "otherskill", f"from imagebench import cases\nCASES = [cases.get_case({first.label!r})]\n")
    install_entry_point(site, "shadow-pkg", {"shadow": "otherskill.cases"})
    importlib.invalidate_caches()
    with pytest.raises(CatalogError) as err:
        build_catalog(env_tree=False)
    assert f"case {first.label} is provided by the built-in cases and entry point shadow = otherskill.cases" in str(
        err.value
    )


def test_a_report_never_imports_the_modules_a_run_recorded(site: Path, tmp_path: Path) -> None:
    """A run.json names where its cases came from; reading it for people runs none of that code."""
    marker = tmp_path / "imported"
    body = f"from pathlib import Path\nPath({str(marker)!r}).write_text('x')\n" + SKILL_MODULE
    write_skill(site, "otherskill", body)
    from imagebench.executor import run_cases
    from imagebench.subjects import ReferenceSubject

    catalog = build_catalog(modules=["otherskill.cases"], entry_points=False, env_tree=False)
    labels = [c.label for c in catalog.offered()]
    result = run_cases(
        catalog.offered(), ReferenceSubject(), out=tmp_path / "out", progress=False, sources=catalog.records(labels)
    )
    assert marker.is_file() and read_record(result.run_dir / "run.json", RunRecord).sources
    marker.unlink()
    _forget("otherskill")
    assert cli.main(["report", str(result.run_dir), "--quiet"]) == 0
    assert not marker.exists() and "otherskill" not in sys.modules
