"""The tracking cases (issue 27): builders, reference/baseline/nop, the verifier, CTC folders left by a command.

The verifier is checked against :func:`imagebench.tracking.metrics.evaluate_folders` on the same
folders; a command subject that writes a CTC result folder (as an outside tracker would) is
scored, and dishonest folders (a symlinked mask, a huge file, a table naming labels the masks
lack, 10^5 files) are refused with their reason named.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

from imagebench import cases as builtin
from imagebench.case.session import collect_attempt, open_session
from imagebench.cases.tracking import (
    CASES,
    baseline_tracking,
    read_tracking,
    reference_tracking,
    truth_of,
)
from imagebench.cases.tracking_movies import build_tracking_movie
from imagebench.cases.verifiers import named_verifier
from imagebench.executor import run_cases
from imagebench.fixtures.fixture import Attempt
from imagebench.sandbox.policy import SandboxPolicy, unavailable_reason
from imagebench.sandbox.workspace import Refused, Workspace
from imagebench.subjects import CommandSubject
from imagebench.tracking.ctc import CtcTruth, TimeLapse, write_result, write_truth
from imagebench.tracking.metrics import evaluate_folders

PY = shlex.quote(sys.executable)
LABELS = [c.label for c in CASES]


def _fixture(case):
    return case.fixture.build(case.namespace, case.case_id)


def _attempt(case, fixture, solve) -> Attempt:
    session = open_session(case, fixture)
    if solve is not None:
        solve(session)
    return collect_attempt(case, "t", session.lookup)


@pytest.fixture(scope="module")
def built():
    return {c.label: (c, _fixture(c)) for c in CASES}


def test_the_builder_is_seeded_and_reproducible() -> None:
    a, b = build_tracking_movie(seed=7), build_tracking_movie(seed=7)
    assert np.array_equal(a.data["movie"], b.data["movie"])
    assert np.array_equal(a.truth["labels"], b.truth["labels"])
    assert np.array_equal(a.truth["lineage"], b.truth["lineage"])
    c = build_tracking_movie(seed=8)
    assert not np.array_equal(a.truth["lineage"], c.truth["lineage"])
    truth = truth_of(a)  # a valid CTC movie: the lineage checked against the masks
    table = truth.tra.lineage.as_array()
    parents = table[table[:, 3] > 0, 3]
    assert (np.bincount(parents) >= 2).any(), "a tracking movie has divisions"
    assert a.data["movie"].shape == (30, 128, 128) and a.data["movie"].dtype == np.float32
    assert set(a.data).isdisjoint(a.truth)


def test_the_movie_has_border_arrivals_and_departures() -> None:
    truth = truth_of(build_tracking_movie(seed=2026)).tra
    table = truth.lineage.as_array()
    late_orphans = table[(table[:, 1] > 0) & (table[:, 3] == 0)]
    assert len(late_orphans), "nuclei enter after the first frame"
    early_end = [
        t for t in truth.lineage.tracks if t.end < truth.frames - 1 and t.label not in truth.lineage.children()
    ]
    assert early_end, "nuclei leave before the last frame"


@pytest.mark.parametrize("label", LABELS)
def test_reference_passes_baseline_and_nop_fail(built, label: str) -> None:
    case, fixture = built[label]
    ok = case.verify(fixture, _attempt(case, fixture, reference_tracking))
    assert ok.passed, [(m.name, m.value, m.limit) for m in ok.metrics]
    base = case.verify(fixture, _attempt(case, fixture, baseline_tracking))
    assert not base.passed
    assert any(m.value is not None and m.value > m.limit for m in base.metrics)
    nop = case.verify(fixture, _attempt(case, fixture, None))
    assert not nop.passed and all(m.value is None for m in nop.metrics)
    assert "masks" in (nop.detail.get("why") or "")
    assert ok.artifacts["tracks"].ndim == 3 and ok.artifacts["tracks"].shape[2] == 3


def test_the_verifier_agrees_with_the_metrics_on_the_same_folders(built, tmp_path: Path) -> None:
    case, fixture = built["tracking/moving-nuclei"]
    attempt = _attempt(case, fixture, reference_tracking)
    outcome = case.verify(fixture, attempt)
    answer, why = read_tracking(attempt, fixture.truth["labels"].shape)
    assert why is None
    truth = truth_of(fixture)
    write_result(tmp_path / "01_RES", answer)
    write_truth(tmp_path / "01_GT", CtcTruth(tra=truth.tra, seg=truth.seg))
    scores = evaluate_folders(tmp_path / "01_RES", tmp_path / "01_GT", frame_buffer=1)
    got = {m.name: m.value for m in outcome.metrics}
    assert got["tra_shortfall"] == pytest.approx(1 - scores.TRA, abs=1e-12)
    assert got["det_shortfall"] == pytest.approx(1 - scores.DET, abs=1e-12)
    assert got["seg_shortfall"] == pytest.approx(1 - scores.SEG, abs=1e-12)
    assert got["division_f1_shortfall"] == pytest.approx(1 - scores.division_f1, abs=1e-12)
    # the named verifier, the user's keys, gives the same numbers
    renamed = type(fixture)(
        provenance=fixture.provenance,
        data={"raw": fixture.data["movie"]},
        truth={"gt": fixture.truth["labels"], "tree": fixture.truth["lineage"]},
        tolerance=fixture.tolerance,
        skill_id=fixture.skill_id,
        case_id=fixture.case_id,
    )
    verify = named_verifier(
        "ctc-tracking", {"data": "raw", "truth": "gt", "lineage": "tree", "masks": "seg", "tracks": "table"}
    )
    left = Attempt("t", arrays={"seg": attempt.arrays["masks"], "table": attempt.arrays["tracks"]})
    again = verify(renamed, left)
    assert {m.name: m.value for m in again.metrics} == got


def test_a_lineage_that_breaks_the_format_is_unusable_with_its_reason(built) -> None:
    case, fixture = built["tracking/moving-nuclei"]
    attempt = _attempt(case, fixture, reference_tracking)
    table = attempt.arrays["tracks"].copy()
    childless = [i for i, row in enumerate(table) if row[0] not in table[:, 3] and row[2] + 3 < 30]
    table[childless[0], 2] += 3  # a track said to live 3 frames past its masks
    bad = Attempt("t", arrays={"masks": attempt.arrays["masks"], "tracks": table})
    outcome = case.verify(fixture, bad)
    assert not outcome.passed
    assert "absent, but the table says their track is alive" in outcome.detail["why"]
    shapeless = Attempt("t", arrays={"masks": attempt.arrays["masks"], "tracks": table[:, :3]})
    assert "expected (n, 4)" in case.verify(fixture, shapeless).detail["why"]


def test_the_cases_are_listed_with_their_skill() -> None:
    assert "tracking" in builtin.skills()
    assert {c.label for c in builtin.all_cases() if c.namespace == "tracking"} >= set(LABELS)


# --------------------------------------------------------------------------- CTC folders left by a command

# An outside tracker: numpy, scipy and tifffile only (no imagebench in its sandbox). It thresholds
# each frame, labels the components, gives each object the track of the previous frame's object it
# overlaps most (a daughter that shares its mother with a sibling starts a track whose parent the
# mother is), and writes a CTC result folder as such a tool would.
_TRACKER = """
import os, numpy as np, tifffile
from scipy import ndimage as ndi

def track(movie):
    out = np.zeros(movie.shape, np.uint16)
    rows, nxt = {}, 1
    for t in range(movie.shape[0]):
        smooth = ndi.gaussian_filter(movie[t].astype(float), 1.0)
        comp, n = ndi.label(smooth > smooth.mean() + 1.5 * smooth.std())
        claims = {}
        for k in range(1, n + 1):
            under = out[t - 1][comp == k] if t else np.zeros(0, np.uint16)
            under = under[under > 0]
            prev = int(np.bincount(under).argmax()) if under.size else 0
            claims.setdefault(prev, []).append(k)
        for prev, ks in claims.items():
            for k in ks:
                if prev and len(ks) == 1:
                    label = prev
                    rows[label][1] = t
                else:
                    label, nxt = nxt, nxt + 1
                    rows[label] = [t, t, prev if prev and len(ks) == 2 else 0]
                out[t][comp == k] = label
    for label, (b, e, p) in rows.items():
        if p and rows[p][1] >= b:
            rows[label][2] = 0
    return out, [(k, b, e, p) for k, (b, e, p) in sorted(rows.items())]

if __name__ == "__main__":
    ws = os.environ["IMAGEBENCH_WORKSPACE"]
    masks, table = track(np.load(os.path.join(ws, "inputs", "movie.npy")))
    folder = os.path.join(ws, "outputs", "tracks")
    os.makedirs(folder)
    for t in range(masks.shape[0]):
        tifffile.imwrite(os.path.join(folder, f"mask{t:03d}.tif"), masks[t])
    with open(os.path.join(folder, "res_track.txt"), "w") as fh:
        fh.writelines(f"{k} {b} {e} {p}\\n" for k, b, e, p in table)
"""


@pytest.mark.parametrize(
    "sandboxed",
    [pytest.param(True, marks=pytest.mark.skipif(unavailable_reason() is not None, reason="no sandbox")), False],
    ids=["bubblewrap", "no-sandbox"],
)
def test_a_ctc_folder_from_an_outside_tracker_is_scored(tmp_path: Path, sandboxed: bool) -> None:
    """Read back through the workspace, the folder scores exactly what its arrays score in process."""
    case = builtin.get_case("tracking/moving-nuclei")
    subject = CommandSubject(f"{PY} -c {shlex.quote(_TRACKER)}", sandbox=SandboxPolicy(enabled=sandboxed))
    result = run_cases([case], subject, out=tmp_path / "out", progress=False, samples=1, unsealed=True)
    (summary,) = result.samples[case.label]
    assert summary.status in ("ok", "wrong-answer"), summary.reason
    scope: dict = {}
    exec(compile(_TRACKER, "tracker", "exec"), scope)
    fixture = _fixture(case)
    masks, table = scope["track"](fixture.data["movie"])
    direct = case.verify(fixture, Attempt("t", arrays={"masks": masks, "tracks": np.asarray(table)}))
    assert {m.name: m.value for m in summary.metrics} == pytest.approx({m.name: m.value for m in direct.metrics})
    assert all(m.value is not None for m in summary.metrics)


def _ctc_folder(root: Path, movie: TimeLapse) -> Path:
    write_result(root / "outputs" / "tracks", movie)
    return root


@pytest.fixture(scope="module")
def small_movie() -> TimeLapse:
    fixture = build_tracking_movie(seed=3, frames=6, shape=(48, 48), cells=3, max_cells=6, cycle=(2, 4))
    return truth_of(fixture).tra


def test_the_workspace_reads_a_ctc_folder(tmp_path: Path, small_movie: TimeLapse) -> None:
    _ctc_folder(tmp_path, small_movie)
    with Workspace(tmp_path) as ws:
        got = ws.read_ctc_result("outputs/tracks", 1 << 20)
    assert np.array_equal(got.labels, small_movie.labels)
    assert got.lineage == small_movie.lineage


def test_a_symlinked_mask_is_refused(tmp_path: Path, small_movie: TimeLapse) -> None:
    folder = _ctc_folder(tmp_path, small_movie) / "outputs" / "tracks"
    secret = tmp_path / "truth.tif"
    (folder / "mask002.tif").rename(secret)
    os.symlink(secret, folder / "mask002.tif")
    with Workspace(tmp_path) as ws, pytest.raises(Refused, match=r"outputs/tracks/mask002.tif is a symbolic link"):
        ws.read_ctc_result("outputs/tracks", 1 << 20)


def test_a_symlinked_folder_is_refused(tmp_path: Path, small_movie: TimeLapse) -> None:
    write_result(tmp_path / "elsewhere", small_movie)
    (tmp_path / "outputs").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "outputs" / "tracks")
    with Workspace(tmp_path) as ws, pytest.raises(Refused, match=r"outputs/tracks is a symbolic link"):
        ws.read_ctc_result("outputs/tracks", 1 << 20)


def test_a_huge_mask_is_refused_before_it_is_read(tmp_path: Path, small_movie: TimeLapse) -> None:
    folder = _ctc_folder(tmp_path, small_movie) / "outputs" / "tracks"
    with open(folder / "mask001.tif", "r+b") as fh:  # sparse: 8 GiB on paper, nothing on disk
        fh.truncate(8 << 30)
    with Workspace(tmp_path) as ws, pytest.raises(Refused, match=r"mask001.tif is 8.0 GiB, more than the limit"):
        ws.read_ctc_result("outputs/tracks", 1 << 20)


def test_a_tiff_declaring_a_huge_frame_is_refused_before_it_is_decoded(tmp_path: Path, small_movie: TimeLapse) -> None:
    import tifffile

    folder = _ctc_folder(tmp_path, small_movie) / "outputs" / "tracks"
    # a few KiB compressed, 400 MiB decoded
    tifffile.imwrite(folder / "mask000.tif", np.zeros((10_000, 20_000), np.uint16), compression="zlib")
    assert (folder / "mask000.tif").stat().st_size < 2 << 20
    with Workspace(tmp_path) as ws, pytest.raises(Refused, match=r"mask000.tif declares \(10000, 20000\) of uint16"):
        ws.read_ctc_result("outputs/tracks", 4 << 20)


def test_a_table_naming_labels_the_masks_lack_is_refused(tmp_path: Path, small_movie: TimeLapse) -> None:
    folder = _ctc_folder(tmp_path, small_movie) / "outputs" / "tracks"
    with open(folder / "res_track.txt", "a") as fh:
        fh.write("999 0 3 0\n")
    with Workspace(tmp_path) as ws, pytest.raises(Refused, match=r"label\(s\) \[999\] absent, but the table says"):
        ws.read_ctc_result("outputs/tracks", 1 << 20)


def test_a_folder_of_a_hundred_thousand_files_is_refused_unread(tmp_path: Path, small_movie: TimeLapse) -> None:
    folder = _ctc_folder(tmp_path, small_movie) / "outputs" / "tracks"
    for i in range(100_000):
        os.close(os.open(folder / f"junk{i}", os.O_CREAT | os.O_WRONLY, 0o644))
    with Workspace(tmp_path) as ws, pytest.raises(Refused, match=r"holds more than 10000 entries"):
        ws.read_ctc_result("outputs/tracks", 1 << 20)


_DISHONEST = {
    "symlinked-mask": (
        "{write} && cd $IMAGEBENCH_WORKSPACE/outputs && mv tracks/mask003.tif ../m3 && ln -s ../../m3 tracks/mask003.tif",
        "mask003.tif is a symbolic link",
    ),
    "stray-label": ("{write} && echo '4242 0 2 0' >> $IMAGEBENCH_WORKSPACE/outputs/tracks/res_track.txt", "4242"),
    "two-answers": (
        "{write} && cd $IMAGEBENCH_WORKSPACE/outputs && {py} -c 'import numpy; numpy.save(\"masks.npy\", numpy.zeros(3))'",
        "leave one answer",
    ),
}


@pytest.mark.parametrize("route", sorted(_DISHONEST))
def test_a_dishonest_ctc_folder_ends_the_sample_with_its_reason(tmp_path: Path, route: str) -> None:
    """Through a real command subject: the sample is not scored ok, and its reason names the refusal."""
    write = f"{PY} -c {shlex.quote(_TRACKER)}"
    command, reason = _DISHONEST[route]
    case = builtin.get_case("tracking/moving-nuclei")
    subject = CommandSubject(command.format(write=write, py=PY), sandbox=SandboxPolicy(enabled=False))
    result = run_cases([case], subject, out=tmp_path / "out", progress=False, samples=1, unsealed=True)
    (summary,) = result.samples[case.label]
    assert summary.status != "ok"
    text = summary.reason + " ".join(str(m.unavailable) for m in summary.metrics)
    assert reason in text, text
