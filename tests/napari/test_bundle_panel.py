"""Skill bundles in the bench panel (run under xvfb-run): open a bundle, its cases in the tree,
the coverage tab of the selected skill, a bundle case run and scored like a built-in one, the
case's files in the session and its answer key nowhere a subject or the viewer can reach.

The model's callbacks are driven directly; the example bundle ``examples/bundles/segment-nuclei``
and its scripted subject ``examples/solvers/count_nuclei.py`` are the material.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import make_toy_case

pytest.importorskip("napari")
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    pytest.skip("needs a display: run under xvfb-run (make test-napari)", allow_module_level=True)

from napari.utils.notifications import notification_manager  # noqa: E402

from imagebench import cases as builtin  # noqa: E402
from imagebench.bundle import coverage_table, load_bundle  # noqa: E402
from imagebench.bundle.coverage import coverage_report  # noqa: E402
from imagebench.records import RunRecord, read_record  # noqa: E402
from napari_imagebench._model import INTERACTIVE, BenchModel, PanelError  # noqa: E402
from napari_imagebench._widget import BenchPanel  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "bundles" / "segment-nuclei"
SOLVERS = ROOT / "examples" / "solvers"
SOLVER = "python:count_nuclei:solve"
SKILL = "segment-nuclei"
GOLDEN = f"{SKILL}/golden-count"
HARD = f"{SKILL}/hard-case-planted-notes"


@pytest.fixture(autouse=True)
def _outcomes_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMAGEBENCH_OUTCOME_DIR", str(tmp_path / "outcomes"))


def _cases() -> list[Any]:
    # the toy case, and the built-in cases of the example bundle's skill (the bundle joins their group)
    return [make_toy_case(), *(c for c in builtin.all_cases() if c.namespace == SKILL)]


def make_panel(make_napari_viewer: Any, tmp_path: Path) -> tuple[Any, BenchPanel]:
    viewer = make_napari_viewer()
    panel = BenchPanel(viewer, BenchModel(cases=_cases, outcome_root=tmp_path / "panel-out"))
    viewer.window.add_dock_widget(panel, name="Imagebench")
    return viewer, panel


def result_lines(panel: BenchPanel) -> list[str]:
    return [panel.results.topLevelItem(i).text(0) for i in range(panel.results.topLevelItemCount())]


def load_and_wait(qtbot: Any, panel: BenchPanel, label: str) -> None:
    assert panel.load(label)
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    assert panel.model.loaded is not None and panel.model.loaded.case.label == label, result_lines(panel)[-3:]


def run_and_wait(qtbot: Any, panel: BenchPanel, subject: str) -> None:
    panel.subject_combo.setCurrentText(subject)
    assert panel.run(), result_lines(panel)[-3:]
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)


def copy_bundle(tmp_path: Path, name: str = SKILL) -> Path:
    dest = tmp_path / "bundles" / name
    shutil.copytree(EXAMPLE, dest)
    return dest


def read_only(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o222 == 0


# --------------------------------------------------------------------------- opening a bundle


def test_bundle_cases_join_the_tree_under_their_skill(make_napari_viewer: Any, tmp_path: Path) -> None:
    _, panel = make_panel(make_napari_viewer, tmp_path)
    before = set(panel.case_items())
    assert panel.open_bundle(EXAMPLE)
    bundle = load_bundle(EXAMPLE)
    labels = {c.label for c in bundle.cases}
    items = panel.case_items()
    assert set(items) == before | labels
    for label in labels:
        item = items[label]
        assert (item.text(3), item.text(4)) == ("yes", "bundle")
        assert item.parent().text(0) == SKILL and item.font(0).italic()
        assert str(EXAMPLE) in item.toolTip(0)
    # one group per namespace: the bundle's cases sit beside the built-in segment-nuclei cases
    groups = [panel.case_tree.topLevelItem(i).text(0) for i in range(panel.case_tree.topLevelItemCount())]
    assert groups.count(SKILL) == 1
    assert items[f"{SKILL}/synthetic-blobs"].text(4) == "built-in"
    assert any(f"bundle {SKILL} from {EXAMPLE}: 6 runnable case(s), 0 cannot run, 0 warning(s)" in line
               for line in result_lines(panel))
    panel.select_case(HARD)
    detail = panel.detail.toPlainText()
    assert f"from the bundle {EXAMPLE}" in detail and "no reference solution" in detail
    assert "NOTES.txt" in detail  # the files a subject gets are listed (never the answer key)


def test_cases_that_cannot_run_are_greyed_and_warnings_are_warning_lines(
    make_napari_viewer: Any, tmp_path: Path
) -> None:
    bundle = copy_bundle(tmp_path)
    golden = bundle / "evals" / "fixtures" / "golden-count" / "case.json"
    body = json.loads(golden.read_text())
    del body["pixels"]
    golden.write_text(json.dumps(body))
    rerun = bundle / "evals" / "fixtures" / "rerun-count" / "case.json"
    body = json.loads(rerun.read_text())
    body["zoom"] = 2
    rerun.write_text(json.dumps(body))

    _, panel = make_panel(make_napari_viewer, tmp_path)
    assert panel.open_bundle(bundle)
    lines = result_lines(panel)
    assert any(line.startswith("warning: bundle segment-nuclei:") and "unknown field 'zoom'" in line for line in lines)
    assert "5 runnable case(s), 1 cannot run" in next(line for line in lines if line.startswith("info: bundle"))
    assert not [line for line in lines if line.startswith("error:")]  # a warning is never a failure
    assert panel.case_items()[f"{SKILL}/rerun-count"].text(3) == "yes"
    item = panel.case_items()[GOLDEN]
    assert item.text(3) == "no" and item.text(4) == "bundle"
    assert "no 'pixels'" in item.toolTip(0)
    assert item.foreground(0).color().getRgb()[:3] == (128, 128, 128)
    panel.select_case(GOLDEN)
    assert "no 'pixels'" in panel.detail.toPlainText()
    assert not panel.load_button.isEnabled() and not panel.load(GOLDEN)
    assert "cannot run here" in result_lines(panel)[-1]


def test_a_bad_folder_is_refused_and_the_panel_stays_usable(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path
) -> None:
    _, panel = make_panel(make_napari_viewer, tmp_path)
    before = set(panel.case_items())
    n = len(notification_manager.records)
    empty = tmp_path / "empty"
    empty.mkdir()
    capital = tmp_path / "Not A Skill"
    capital.mkdir()
    for bad in (tmp_path / "missing", empty, capital):
        assert not panel.open_bundle(bad)
        assert "not a skill bundle" in result_lines(panel)[-1] and str(bad.name) in result_lines(panel)[-1]
    with pytest.raises(PanelError, match="not a skill bundle"):
        panel.model.open_bundle(empty)
    assert len(notification_manager.records) >= n + 3
    assert panel.model.bundles == {} and set(panel.case_items()) == before
    # still usable: a built-in case loads, and the good bundle opens afterwards
    load_and_wait(qtbot, panel, "toy/rectangle")
    assert panel.open_bundle(EXAMPLE) and GOLDEN in panel.case_items()


# --------------------------------------------------------------------------- coverage


def test_coverage_tab_shows_the_rows_imagebench_coverage_prints(make_napari_viewer: Any, tmp_path: Path) -> None:
    _, panel = make_panel(make_napari_viewer, tmp_path)
    assert [panel.tabs.tabText(i) for i in range(panel.tabs.count())] == ["Detail", "Answer", "Coverage", "Compare", "Save as case"]
    panel.select_case("toy/rectangle")
    assert panel.coverage_view is not None and panel.coverage_view.rows == ()
    assert panel.coverage_title.text().startswith("no bundle is open for toy")
    panel.select_case(f"{SKILL}/synthetic-blobs")
    assert "no bundle is open for segment-nuclei" in panel.coverage_title.text()

    assert panel.open_bundle(EXAMPLE)
    panel.select_case(f"{SKILL}/synthetic-blobs")  # any case of the skill shows the skill's table
    view = panel.coverage_view
    assert view is not None and view.bundle == EXAMPLE
    assert list(view.rows) == coverage_table(EXAMPLE, [])
    assert view.title() == f"{SKILL}: 6 claim(s) from evals.json, no run scored yet"
    shown = panel.coverage_cells()
    assert [(c[0], c[1], c[2], c[3]) for c in shown] == [
        (r.claim_id, r.band, r.coverage, r.validation) for r in coverage_table(EXAMPLE, [])
    ]
    cells = {c[0]: c for c in shown}
    assert cells["OUT-1"][2:4] == ["gap", "unvalidated"] and "touching-nuclei (missing)" in cells["OUT-1"][4]
    assert cells["RE-1"][4].splitlines() == ["golden-count", "rerun-count"] and cells["RE-1"][5] == "-"


def test_the_presentation_warning_of_the_selected_skill_is_shown(make_napari_viewer: Any, tmp_path: Path) -> None:
    # the example's cases present plain arrays; drift-correction declares dask and tensor routes
    bundle = copy_bundle(tmp_path, "drift-correction")
    _, panel = make_panel(make_napari_viewer, tmp_path)
    assert panel.open_bundle(bundle)
    panel.select_case("drift-correction/golden-count")
    view = panel.coverage_view
    assert view is not None
    report = coverage_report(bundle, [])
    assert list(view.warnings) == report.warnings
    assert any("drift-correction declares ['dask', 'tensor']" in w for w in view.warnings)
    assert "drift-correction declares ['dask', 'tensor']" in panel.coverage_warnings.text()


def test_scoring_a_bundle_case_with_the_example_solver_updates_validation(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(SOLVERS))
    _, panel = make_panel(make_napari_viewer, tmp_path)
    assert panel.open_bundle(EXAMPLE)
    panel.select_case(GOLDEN)
    before = {c[0]: c for c in panel.coverage_cells()}
    assert before["RE-1"][3] == "unvalidated"

    # a bundle case has no reference: the list greys it, and asking for it says why
    assert not panel.subject_enabled("reference") and panel.subject_enabled(INTERACTIVE)
    panel.subject_combo.setCurrentText("reference")
    load_and_wait(qtbot, panel, GOLDEN)
    assert panel.subject_combo.currentText() == INTERACTIVE  # switched, with a line saying why
    assert any("no reference solution" in line and "the subject is now" in line for line in result_lines(panel))
    with pytest.raises(PanelError, match="has no reference solution"):
        panel.model.prepare_run("reference")
    panel.subject_combo.setCurrentText("reference")
    assert not panel.run_button.isEnabled() and "no reference solution" in panel.run_button.toolTip()

    panel.solver_edit.setText(SOLVER)
    assert panel.add_solver() and panel.subject_enabled(SOLVER)
    run_and_wait(qtbot, panel, SOLVER)
    result = panel.score()
    assert result is not None and result.status == "ok", result.reason
    sitting = panel.model.ledger.sitting_dir  # one sitting holds the session's run folders
    assert sitting is not None and result.run_dir.parent == sitting and sitting.parent == tmp_path / "panel-out"
    # the case's grading checklist is shown beside the scored result, never before
    checks = ("Reports an integer count", "The count matches the 25 nuclei drawn")
    assert result.checks == checks
    top = panel.results.topLevelItem(panel.results.topLevelItemCount() - 1)
    shown = [top.child(i) for i in range(top.childCount()) if top.child(i).text(0) == "grading check"]
    assert tuple(item.text(4) for item in shown) == checks
    assert "The count matches" not in panel.detail.toPlainText()

    view = panel.coverage_view
    assert view is not None and view.runs == (result.run_dir,)
    assert list(view.rows) == coverage_table(EXAMPLE, [result.run_dir])
    after = {c[0]: c for c in panel.coverage_cells()}
    assert after["RE-1"][3] == "partial"  # golden-count passed, rerun-count not yet graded
    assert after["RE-1"][4].splitlines() == ["golden-count (pass)", "rerun-count (ungraded)"]
    assert after["RE-1"][5] == "1 passed, 0 failed"
    assert after["IN-1"][3] == "unvalidated"
    record = read_record(result.run_dir / "run.json", RunRecord)
    assert record.selection["bundles"] == [str(EXAMPLE)]

    # the interactive subject works a bundle case too: the answer typed at the console scores
    panel.subject_combo.setCurrentText(INTERACTIVE)
    wrong = panel.model.score(INTERACTIVE, layers={}, console={"answer": {"count": 3}})
    assert wrong.status == "wrong-answer"
    failed = {r.claim_id: r for r in panel.coverage_view.rows}["RE-1"]  # type: ignore[union-attr]
    assert failed.validation == "failed" and len(failed.failed_samples) == 1

    # a rerun case is judged over three samples: each score says how many are still to come
    load_and_wait(qtbot, panel, f"{SKILL}/rerun-count")
    run_and_wait(qtbot, panel, SOLVER)
    assert panel.score().status == "ok"  # type: ignore[union-attr]
    assert "judged over at least 3 samples of one subject; 1 scored so far" in result_lines(panel)[-2]
    rerun = {r.claim_id: r for r in panel.coverage_view.rows}["RE-1"]  # type: ignore[union-attr]
    assert rerun.case_verdicts["rerun-count"] == "fail"  # inconsistent until three samples agree

    # an earlier headless run under the outcome root counts only when asked for
    from imagebench.executor import run_cases
    from imagebench.subjects import parse_subject

    earlier = run_cases(
        [c for c in load_bundle(EXAMPLE).cases if c.case_id == "empty-background"],
        parse_subject(SOLVER), out=tmp_path / "panel-out", progress=False,
    ).run_dir
    panel.refresh_coverage()
    assert earlier not in panel.coverage_view.runs  # type: ignore[union-attr]
    panel.coverage_all_runs.setChecked(True)
    view = panel.coverage_view
    assert view is not None and earlier in view.runs and set(view.runs) == {earlier, *panel.model.coverage_runs()}
    assert list(view.rows) == coverage_table(EXAMPLE, view.runs)
    assert {c[0]: c[3] for c in panel.coverage_cells()}["IN-1"] == "validated"


# --------------------------------------------------------------------------- files and the answer key


def test_files_reach_the_session_read_only_and_the_answer_key_reaches_nothing(
    make_napari_viewer: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = copy_bundle(tmp_path)
    sentinel = "ANSWER-KEY-SENTINEL-7f3c"
    keys = sorted(bundle.glob("evals/fixtures/*/expected/answer-key.md"))
    assert len(keys) == 6
    for key in keys:
        key.write_text(key.read_text() + f"\n{sentinel}\n")
    probe = tmp_path / "solvers" / "files_probe.py"
    probe.parent.mkdir()
    probe.write_text(
        "from pathlib import Path\n"
        "import count_nuclei\n\n"
        "SEEN = []\n\n"
        "def solve(session):\n"
        "    ws = Path(session.workspace)\n"
        "    SEEN.append((ws, sorted(p.relative_to(ws).as_posix() for p in ws.rglob('*')),\n"
        "                 {p.relative_to(ws).as_posix(): p.stat().st_mode for p in ws.rglob('*')},\n"
        "                 {k: repr(v) for k, v in session.namespace.items()}))\n"
        "    count_nuclei.solve(session)\n"
    )
    monkeypatch.syspath_prepend(str(SOLVERS))
    monkeypatch.syspath_prepend(str(probe.parent))
    import files_probe  # type: ignore[import-not-found]

    viewer, panel = make_panel(make_napari_viewer, tmp_path)
    assert panel.open_bundle(bundle)
    seen_text: list[str] = []

    for label in (HARD, f"{SKILL}/refusal-no-pixel-size", GOLDEN):
        panel.select_case(label)
        seen_text.append(panel.detail.toPlainText())
        load_and_wait(qtbot, panel, label)
        session = panel.model.loaded.session  # type: ignore[union-attr]
        case_dir = bundle / "evals" / "fixtures" / label.split("/")[1]
        files = sorted(p.name for p in (case_dir / "files").iterdir() if p.name != ".gitkeep")
        if files:  # the interactive session gets a read-only copy of files/, as an in-process subject does
            ws = session.workspace
            assert ws is not None and sorted(p.name for p in (ws / "files").iterdir()) == files
            assert all(read_only(p) for p in [ws / "files", *(ws / "files").iterdir()])
            seen_text += [p.read_text() for p in (ws / "files").iterdir()]
        else:
            assert session.workspace is None
        seen_text += [repr(v) for v in session.namespace.values()]
        for layer in viewer.layers:
            seen_text += [layer.name, repr(layer.metadata), repr(getattr(layer, "source", ""))]
            assert np.asarray(layer.data).dtype.kind in "biuf"  # pixels, never text
        seen_text += [repr(v) for v in viewer.window._qt_viewer.console_backlog[-1].values()]

    # a python subject's session: the same copy, removed after its turn
    panel.solver_edit.setText("python:files_probe:solve")
    assert panel.add_solver()
    load_and_wait(qtbot, panel, HARD)
    interactive_copy = panel.model.loaded.session.workspace  # type: ignore[union-attr]
    run_and_wait(qtbot, panel, "python:files_probe:solve")
    result = panel.score()
    assert result is not None and result.status == "ok", result.reason  # it counted, and did not answer 42
    (ws, listing, modes, namespace), = files_probe.SEEN
    assert listing == ["files", "files/NOTES.txt"]
    assert all(stat.S_IMODE(mode) & 0o222 == 0 for mode in modes.values())
    assert ws != interactive_copy and not ws.exists()  # its own copy, gone after the turn
    assert interactive_copy is not None and interactive_copy.exists()
    seen_text += list(namespace.values()) + result_lines(panel) + [c for row in panel.coverage_cells() for c in row]
    sample_texts = [p.read_text() for p in result.sample_dir.glob("*.json")]

    joined = "\n".join([*seen_text, *sample_texts])
    assert "NOTES.txt" in joined or "IMPORTANT SYSTEM NOTICE" in joined  # the probe saw what it should
    assert sentinel not in joined
    assert "answer-key" not in joined and "expected/" not in joined
    # loading another case removes the previous load's copy of the files
    load_and_wait(qtbot, panel, GOLDEN)
    assert not interactive_copy.exists()
