"""``imagebench calibrate``: reference, baseline and nop on any case set, the verdicts, the store,
and what ``list``, ``reindex`` and the panel's detail say of them (docs/cases.md, Calibration)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case, toy_reference

import imagebench
from imagebench import cli
from imagebench.bundle.load import load_bundle
from imagebench.case.model import Case
from imagebench.executor.calibrated import calibration_line, calibration_notes, read_store, recall
from imagebench.executor.calibration import (
    BASELINE_PASSES,
    CALIBRATION_RECORD,
    NO_BASELINE,
    NO_REFERENCE,
    NOP_PASSES,
    REFERENCE_FAILS,
    CalibrationRecord,
    SubjectScore,
    borne_out,
    calibrate,
    judge,
    read_calibration,
)
from imagebench.records import write_record

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bundles" / "segment-nuclei"
CHEAP = ("segment-nuclei/count-nuclei", "segment-nuclei/empty-field")  # about a second each, three subjects


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test remembers its calibrations in a state folder of its own."""
    monkeypatch.setenv("IMAGEBENCH_STATE", str(tmp_path / "state"))


def otsu_components(session: Any) -> None:
    """The naive counter of the issue: Otsu's threshold, then connected components, nothing else."""
    from scipy import ndimage as ndi
    from skimage.filters import threshold_otsu

    image = np.asarray(session.namespace["image"], dtype=np.float64)
    _, n = ndi.label(image > threshold_otsu(image))
    session.namespace["answer"] = {"count": int(n)}


def empty_mask(session: Any) -> None:
    """A 'reference' that fails: nothing found."""
    image = np.asarray(session.namespace["image"])
    session.namespace["mask"] = np.zeros(image.shape, dtype=bool)
    session.namespace["area"] = 0


def _golden_count_with(**fields: Any) -> Case:
    (case,) = [c for c in load_bundle(EXAMPLE).cases if c.case_id == "golden-count"]
    return replace(case, **fields)


def _only(rows: list, label: str) -> Any:
    (row,) = [r for r in rows if r.label == label]
    return row


# --------------------------------------------------------------------------- the command, on built-in cases


def test_calibrate_on_cheap_builtin_cases_holds_writes_its_record_and_remembers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["calibrate", "-k", CHEAP[0], "-k", CHEAP[1], "--out", str(tmp_path / "out"), "--quiet"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert (
        "| skill | case | kind | metric | limit | reference | margin | baseline | baseline verdict | nop | calibration |"
        in out
    )
    assert (
        "| segment-nuclei | `count-nuclei` | synthetic, golden | `answer_mismatch` | 0 | 0 (count: matched) | exact |"
        in out
    )
    assert "the calibration holds for 2 of 2" in out
    folder = Path(out.split("calibration folder: ", 1)[1].split()[0])
    assert folder.parent == tmp_path / "out" and folder.name.startswith("calibration-")
    record = read_calibration(folder)
    assert {c.label for c in record.cases} == set(CHEAP)
    assert all(c.verdict == "ok" and c.problems == [] for c in record.cases)
    assert set(record.runs) == {"reference", "baseline", "nop"}
    for run in record.runs.values():
        assert (folder / run / "run.json").is_file()
    row = _only(record.cases, CHEAP[0])
    assert row.scores["reference"].passed and row.scores["baseline"].verdict == "fail"
    assert row.scores["nop"].status == "no-result"
    assert borne_out(folder) == ""

    store = read_store()
    assert {label: [v.verdict for v in by_fp.values()] for label, by_fp in store.cases.items()} == {
        CHEAP[0]: ["ok"],
        CHEAP[1]: ["ok"],
    }
    assert cli.main(["list"]) == 0
    listed = capsys.readouterr().out
    assert f"calibration: 2 of {len(imagebench.cases.all_cases())} calibrated ok" in listed
    assert "never calibrated here as they are now" in listed
    assert "calibration warning" not in listed  # every built-in case declares a baseline


def test_calibrate_json_is_the_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["calibrate", "-k", CHEAP[1], "--out", str(tmp_path), "--json"]) == 0
    record = CalibrationRecord.model_validate(json.loads(capsys.readouterr().out))
    assert [c.label for c in record.cases] == [CHEAP[1]] and record.cases[0].verdict == "ok"
    assert record.selection == {"k": [CHEAP[1]], "fixtures": "all"}


def test_calibrate_takes_runs_selection_and_refuses_a_pattern_that_matches_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["calibrate", "-k", "no-such-case"]) == 2
    err = capsys.readouterr().err
    assert "-k 'no-such-case' matched no case" in err and "valid labels:" in err


def test_calibrate_takes_exclude_skill_and_kind_as_run_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the selection flags of run (cli.common.select_from_args) over the cases the catalog offers
    argv = ["calibrate", "--skill", "segment-nuclei", "--exclude", "*3d*", "--kind", "synthetic", "-k", "empty-field"]
    assert cli.main([*argv, "--out", str(tmp_path), "--json"]) == 0
    record = CalibrationRecord.model_validate(json.loads(capsys.readouterr().out))
    assert [c.label for c in record.cases] == [CHEAP[1]]
    assert record.selection["exclude"] == ["*3d*"] and record.selection["skills"] == ["segment-nuclei"]
    assert record.selection["fixtures"] == "synthetic"
    assert cli.main(["calibrate", "--skill", "no-such-skill", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--skill no-such-skill matched no case" in err and "skills: " in err and "segment-nuclei" in err
    assert cli.main(["calibrate", "-k", CHEAP[0], "--kind", "curated", "--out", str(tmp_path)]) == 2
    assert f"no case selected (-k {CHEAP[0]} --kind curated)" in capsys.readouterr().err
    assert cli.main(["calibrate", "--skill", "fibre-angle", "--exclude", "fibre-angle/*", "--out", str(tmp_path)]) == 2
    assert "no case selected (--exclude fibre-angle/* --skill fibre-angle)" in capsys.readouterr().err
    assert len(list(tmp_path.glob("calibration-*"))) == 1  # a refused selection writes no calibration folder


def test_the_calibration_record_has_a_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema"]) == 0
    assert {"calibration", "calibration-store"} <= set(capsys.readouterr().out.split())
    assert cli.main(["schema", "calibration"]) == 0
    assert "CaseCalibration" in capsys.readouterr().out


# --------------------------------------------------------------------------- verdicts that do not hold


def test_a_bundle_case_without_a_baseline_or_reference_says_so_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["calibrate", "--bundle", str(EXAMPLE), "-k", "golden-count", "--out", str(tmp_path), "--quiet"]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert f"warning: segment-nuclei/golden-count: {NO_REFERENCE}; {NO_BASELINE}" in out
    assert "| no baseline | no-result | no reference; no baseline |" in out


def test_a_bundle_case_whose_naive_baseline_passes_is_a_warning_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = _golden_count_with(reference=otsu_components, baseline=otsu_components)
    import imagebench.bundle.load as bundle_load
    import imagebench.cli.bundle as cli_bundle

    bundle = load_bundle(EXAMPLE)
    bundle.cases = [case]
    monkeypatch.setattr(bundle_load, "load_bundle", lambda path: bundle)  # what the catalog's --bundle reads
    argv = ["calibrate", "--bundle", str(EXAMPLE), "--out", str(tmp_path), "--quiet"]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert f"warning: segment-nuclei/golden-count: {BASELINE_PASSES}" in out
    assert "| pass | no-result | baseline passes |" in out

    # list --bundle and reindex read the verdict back for the case as it is
    assert cli.main(["list", "--bundle", str(EXAMPLE)]) == 0
    listed = capsys.readouterr().out
    assert "calibration warning: segment-nuclei/golden-count: its latest calibration" in listed
    assert BASELINE_PASSES in listed
    monkeypatch.setattr(cli_bundle, "_load", lambda path: bundle)
    assert cli.main(["reindex", str(EXAMPLE)]) == 0
    reindexed = capsys.readouterr().out
    assert f"says {BASELINE_PASSES}" in reindexed and "no warnings" not in reindexed
    assert "calibration: 0 of 1 calibrated ok, 1 with a calibration that does not hold" in reindexed
    assert calibration_line(case).startswith("calibration: warning on ") and BASELINE_PASSES in calibration_line(case)

    # the same case with a baseline that changed is no longer the case calibrated
    (seen,) = recall([replace(case, baseline=empty_mask)])
    assert seen.state == "never"


def test_a_dishonest_setup_a_baseline_that_passes_and_a_reference_that_fails(tmp_path: Path) -> None:
    case = replace(make_toy_case(reference=empty_mask), baseline=toy_reference)
    result = calibrate([case], out=tmp_path)
    (row,) = result.cases
    assert row.verdict == "warning" and result.exit_code == 1
    assert row.problems[0].startswith(f"{REFERENCE_FAILS} (wrong-answer")
    assert row.problems[1:] == [BASELINE_PASSES]
    assert row.scores["reference"].verdict == "fail" and row.scores["baseline"].verdict == "pass"
    assert row.scores["nop"].verdict == "fail"
    # the store says so, and a panel's detail of the case shows it
    (seen,) = recall([case])
    assert seen.state == "warning" and seen.problems == tuple(row.problems)
    warnings, summary = calibration_notes([case])
    assert len(warnings) == 1 and REFERENCE_FAILS in warnings[0] and BASELINE_PASSES in warnings[0]
    # the honest case beside it holds
    honest = replace(make_toy_case(case_id="honest"), baseline=empty_mask)
    assert calibrate([honest], out=tmp_path).exit_code == 0


def test_judge_names_each_rule_that_does_not_hold() -> None:
    def s(verdict: str, status: str = "ok") -> SubjectScore:
        return SubjectScore(status=status, verdict=verdict)

    assert judge(True, True, {"reference": s("pass"), "baseline": s("fail", "wrong-answer"), "nop": s("fail")}) == []
    assert judge(True, True, {"reference": s("pass"), "baseline": s("fail"), "nop": s("pass")}) == [NOP_PASSES]
    assert judge(True, False, {"reference": s("pass"), "nop": s("fail")}) == [NO_BASELINE]
    blocked = judge(True, True, {"reference": s("pass"), "baseline": s("blocked", "blocked"), "nop": s("fail")})
    assert blocked and blocked[0].startswith("baseline not scored (blocked")
    errored = judge(True, True, {"reference": s("error", "harness-error"), "baseline": s("fail"), "nop": s("fail")})
    assert errored == [f"{REFERENCE_FAILS} (harness-error)"]


def test_a_case_not_available_here_is_not_run_and_apart(tmp_path: Path) -> None:
    from helpers import UnavailableSpec

    case = replace(make_toy_case(spec=UnavailableSpec()), baseline=empty_mask)
    result = calibrate([case], out=tmp_path)
    (row,) = result.cases
    assert row.verdict == "not-run" and row.not_run and row.problems == []
    assert result.exit_code == 4


def test_a_forged_calibration_record_is_not_borne_out(tmp_path: Path) -> None:
    case = replace(make_toy_case(reference=empty_mask), baseline=toy_reference)
    result = calibrate([case], out=tmp_path)
    forged = result.record.model_copy(
        update={"cases": [c.model_copy(update={"verdict": "ok", "problems": []}) for c in result.record.cases]}
    )
    write_record(result.folder / CALIBRATION_RECORD, forged)
    assert "calibration is not ok" in borne_out(result.folder)  # its own scores say the reference failed
    scores = {
        "reference": SubjectScore(status="ok", verdict="pass"),
        "baseline": SubjectScore(status="wrong-answer", verdict="fail"),
        "nop": SubjectScore(status="no-result", verdict="fail"),
    }
    forged = forged.model_copy(update={"cases": [forged.cases[0].model_copy(update={"scores": scores})]})
    write_record(result.folder / CALIBRATION_RECORD, forged)
    assert "in its reference run, which calibration.json does not say" in borne_out(result.folder)
    from imagebench.cli import _borne_out

    assert _borne_out(str(result.folder)) == borne_out(result.folder)


# --------------------------------------------------------------------------- the panel's detail


def test_the_panel_detail_says_what_calibration_found(tmp_path: Path) -> None:
    from napari_imagebench._model import BenchModel

    case = replace(make_toy_case(), baseline=empty_mask)
    model = BenchModel(cases=lambda: [case], outcome_root=tmp_path)
    assert (
        "calibration: never calibrated here as it is now (imagebench calibrate -k toy/rectangle)"
        in model.detail(case.label).text()
    )
    calibrate([case], out=tmp_path)
    assert "calibration: ok on " in model.detail(case.label).text()
    bare = make_toy_case(case_id="bare")
    assert calibration_line(bare).startswith(f"calibration: {NO_BASELINE}; never calibrated")


# --------------------------------------------------------------------------- reindex: keys the fixture lacks


def _copy_example(tmp_path: Path) -> Path:
    bundle = tmp_path / "segment-nuclei"
    shutil.copytree(EXAMPLE, bundle)
    return bundle


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _reindex(bundle: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert cli.main(["reindex", str(bundle)]) == 0
    return capsys.readouterr().out


def test_reindex_warns_on_a_layer_key_and_a_from_truth_key_the_fixture_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _copy_example(tmp_path)
    clean = _reindex(bundle, capsys)
    assert "which the fixture does not have" not in clean
    fixtures = bundle / "evals" / "fixtures"
    _edit(fixtures / "golden-count" / "case.json", lambda d: d["layers"][0].update(key="img"))
    _edit(
        fixtures / "empty-background" / "case.json",
        lambda d: d["answer"]["ground_truth"]["count"].update(from_truth="nuclei_count"),
    )
    out = _reindex(bundle, capsys)
    assert (
        f"warning: {fixtures / 'golden-count' / 'case.json'}: field 'layers[0].key' of segment-nuclei/golden-count: "
        "layer 'image' presents data key 'img', which the fixture does not have (its data keys: 'image')"
    ) in out
    assert (
        f"warning: {fixtures / 'empty-background' / 'case.json'}: field 'answer.ground_truth' of "
        "segment-nuclei/empty-background: 'from_truth' names truth key 'nuclei_count', which the fixture does not "
        "have (its truth keys: 'count', 'labels')"
    ) in out


def test_reindex_reads_a_curated_cases_keys_from_the_tree_without_building(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = Path(imagebench.__file__).resolve().parent / "data" / "fixtures"
    monkeypatch.setenv("IMAGEBENCH_FIXTURES", str(tree))
    bundle = _copy_example(tmp_path)
    case_json = bundle / "evals" / "fixtures" / "golden-count" / "case.json"

    def curated(d: dict) -> None:
        d["pixels"] = {"curated": {"skill": "segment-nuclei", "case_id": "dsb2018"}}
        d["layers"][0]["key"] = "nuclei"

    _edit(case_json, curated)
    import imagebench.fixtures.tree as tree_module

    def no_build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("reindex built the curated fixture")

    monkeypatch.setattr(tree_module, "load_fixture", no_build)
    out = _reindex(bundle, capsys)
    assert "layer 'image' presents data key 'nuclei', which the fixture does not have (its data keys: 'image')" in out
    assert "'from_truth' names truth key 'count', which the fixture does not have (its truth keys: 'labels')" in out


def test_the_results_table_keeps_the_end_of_a_long_reason() -> None:
    from imagebench.cli.tables import shown_reason

    reason = "opening the session failed: SessionError: " + "x" * 700 + " (data keys: ['image'])"
    shown = shown_reason(reason)
    assert len(shown) <= 600 and shown.endswith("(data keys: ['image'])") and " ... " in shown
    assert shown_reason("short") == "short"
