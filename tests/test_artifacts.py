"""Artifacts: summary.json per case/sample (atomic), PNGs with one shared range, png.error on failure."""

from __future__ import annotations

import json
import os
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from imagebench import records
from imagebench.fixtures.fixture import Attempt, Fixture, Metric, Outcome
from imagebench.records import SCHEMA_VERSION, SampleSummary, read_record
from imagebench.runs.artifacts import difference_range, is_difference, save_png, shared_range, write_report
from imagebench.runs.layout import artifact_root, report_dir, safe_name


def _outcome(
    case_id: str = "case-a", metrics=None, artifacts_=None, detail=None, subject="python:pkg.mod:solve"
) -> Outcome:
    fx = Fixture(
        provenance="seed 1",
        data={"image": np.zeros((4, 4))},
        truth={"shift": 1.0},
        citation=None,
        kind="synthetic",
        skill_id="drift",
        case_id=case_id,
    )
    return Outcome(
        fx,
        Attempt(subject, {"shift": 1.1}),
        metrics if metrics is not None else [Metric("err", 0.1, 0.5, unit="px")],
        detail=detail or {},
        artifacts=artifacts_ or {},
    )


# --------------------------------------------------------------------------- write_report


def test_report_lands_under_subject_namespace_case_and_validates(tmp_path):
    raw = np.linspace(0, 100, 64).reshape(8, 8)
    out = _outcome(
        artifacts_={"raw": raw, "corrected": raw * 0.5},
        detail={"per_frame": np.array([0.1, np.nan]), "big": np.zeros((20, 20)), "count": np.int64(3)},
    )
    path = write_report(out, tmp_path, sample=2, extra={"seed": 1, "times": {"verify": 0.25}})
    assert path == tmp_path / "python-pkg.mod-solve" / "drift" / "case-a" / "sample-2" / "summary.json"
    summary = read_record(path, SampleSummary)
    assert summary.label == "drift/case-a" and summary.status == "ok" and summary.passed
    assert summary.subject == "python:pkg.mod:solve" and summary.sample == 2 and summary.seed == 1
    assert summary.metrics[0].verdict == "pass" and summary.metrics[0].unit == "px"
    assert summary.detail == {"per_frame": [0.1, None], "big": {"shape": [20, 20], "dtype": "float64"}, "count": 3}
    assert summary.artifacts == ["raw.png", "corrected.png"]
    for name in summary.artifacts:
        assert (path.parent / name).is_file()
    assert summary.provenance == "seed 1" and summary.kind == "synthetic"


def test_second_case_of_a_skill_writes_beside_the_first(tmp_path):
    a = write_report(_outcome("case-a"), tmp_path)
    b = write_report(_outcome("case-b"), tmp_path)
    assert a.parent.parent == b.parent.parent == tmp_path / "python-pkg.mod-solve" / "drift"
    assert a.parent.name == "case-a" and b.parent.name == "case-b"
    assert a.read_text() != b.read_text()
    assert report_dir(tmp_path, "python:pkg.mod:solve", "drift", "case-b") == b.parent


def test_status_override_subject_and_reason(tmp_path):
    out = _outcome(metrics=[Metric.missing("err", 0.5, "no answer")])
    path = write_report(out, tmp_path, subject="nop", status="timeout", reason="ran past 120 s")
    summary = read_record(path, SampleSummary)
    assert (summary.status, summary.reason, summary.passed) == ("timeout", "ran past 120 s", False)
    assert path.parent == tmp_path / "nop" / "drift" / "case-a"
    assert summary.metrics[0].verdict == "unavailable" and summary.metrics[0].unavailable == "no answer"


def test_an_overridden_status_never_turns_a_failure_into_a_pass(tmp_path):
    out = _outcome(metrics=[Metric("err", 9.0, 0.5)])
    assert not read_record(write_report(out, tmp_path, status="ok"), SampleSummary).passed


def test_infinite_metric_keeps_its_verdict(tmp_path):
    out = _outcome(metrics=[Metric("err", float("inf"), 0.5)])
    m = read_record(write_report(out, tmp_path), SampleSummary).metrics[0]
    assert m.value is None and m.verdict == "fail"


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="not one of"):
        write_report(_outcome(), tmp_path, status="great")
    with pytest.raises(ValueError, match=r"may not set \['status'\]"):
        write_report(_outcome(), tmp_path, extra={"status": "ok"})
    with pytest.raises(ValueError, match=r"unknown summary field\(s\) \['colour'\]"):
        write_report(_outcome(), tmp_path, extra={"colour": 1})
    out = _outcome()
    unstamped = Outcome(Fixture("p", {}, {}), out.attempt, out.metrics)
    with pytest.raises(ValueError, match="no case identity"):
        write_report(unstamped, tmp_path)
    assert not any(tmp_path.rglob("summary.json"))


def test_summary_is_written_atomically(tmp_path, monkeypatch):
    path = write_report(_outcome(), tmp_path)
    before = path.read_text()

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(records.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        write_report(_outcome(metrics=[Metric("err", 3.0, 0.5)]), tmp_path)
    assert path.read_text() == before  # the old summary, whole
    assert sorted(p.name for p in path.parent.iterdir()) == ["summary.json"]  # no temp file left


def test_failed_png_is_listed_as_its_error_file(tmp_path):
    out = _outcome(artifacts_={"good": np.eye(5), "bad": "not an image", "flat": np.zeros(7)})
    summary = read_record(write_report(out, tmp_path), SampleSummary)
    assert summary.artifacts == ["good.png", "bad.png.error", "flat.png.error"]
    folder = tmp_path / "python-pkg.mod-solve" / "drift" / "case-a"
    assert "not a numeric" in (folder / "bad.png.error").read_text()
    assert "2 or more dimensions" in (folder / "flat.png.error").read_text()


def test_artifacts_share_one_range(tmp_path):
    raw = np.tile(np.linspace(0, 200, 100), (100, 1))
    diff = np.full((100, 100), 1.0)  # a near-zero difference must stay dark, not stretched to white
    out = _outcome(artifacts_={"raw": raw, "diff": diff})
    folder = write_report(out, tmp_path).parent
    raw_png, diff_png = iio.imread(folder / "raw.png"), iio.imread(folder / "diff.png")
    assert raw_png.dtype == np.uint8 and raw_png.shape == (100, 100)
    assert raw_png.max() == 255 and raw_png.min() == 0
    assert diff_png.max() <= 2


def test_a_difference_keeps_its_sign_on_a_diverging_map_over_the_shared_width(tmp_path):
    truth = np.tile(np.linspace(0, 100, 64), (64, 1))
    answer = truth.copy()
    answer[:, :32] -= 10.0  # too dark on the left, too bright on the right
    answer[:, 32:] += 10.0
    out = _outcome(artifacts_={"truth": truth, "answer": answer, "difference": answer - truth})
    summary = read_record(write_report(out, tmp_path), SampleSummary)
    folder = tmp_path / "python-pkg.mod-solve" / "drift" / "case-a"
    assert summary.artifacts == ["truth.png", "answer.png", "difference.png"]
    lo, hi = shared_range(truth, answer)  # the difference does not widen the images' range
    assert difference_range(lo, hi) == (-(hi - lo), hi - lo)
    png = iio.imread(folder / "difference.png")
    assert png.shape == (64, 64, 3)  # colour: the sign is in the hue
    left, right = png[:, :32].reshape(-1, 3), png[:, 32:].reshape(-1, 3)
    assert (left[:, 0] > left[:, 1]).all() and (right[:, 1] > right[:, 0]).all()  # magenta below, green above
    # a tenth of the images' width is a tenth of full colour, not stretched to full
    half = hi - lo
    assert abs(int(right[0, 1]) - round(255 * (0.0 + 10.0 / half * 0.85))) <= 1
    grey = iio.imread(folder / "truth.png")
    assert grey.ndim == 2 and 0 < grey.min() < grey.max() < 255  # inside the answer's wider range
    # the values are kept as they are, for a viewer's hover
    np.testing.assert_allclose(np.load(folder / "difference.npy"), answer - truth)
    assert not is_difference("differences") and is_difference("difference_mean") and is_difference("difference")


def test_a_signed_png_needs_a_range_symmetric_about_zero(tmp_path):
    assert save_png(tmp_path / "d.png", np.eye(3), -1.0, 2.0, signed=True) is None
    assert "symmetric" in (tmp_path / "d.png.error").read_text()
    assert save_png(tmp_path / "d.png", np.eye(3), -1.0, 1.0, signed=True) == tmp_path / "d.png"
    assert not (tmp_path / "d.png.error").exists()


# --------------------------------------------------------------------------- save_png


def test_save_png_grey_rgb_and_projection(tmp_path):
    assert save_png(tmp_path / "g.png", np.arange(12.0).reshape(3, 4)) == tmp_path / "g.png"
    g = iio.imread(tmp_path / "g.png")
    assert g.shape == (3, 4) and g[0, 0] == 0 and g[-1, -1] == 255
    rgb = np.zeros((5, 6, 3), np.uint8)
    rgb[..., 1] = 200
    save_png(tmp_path / "c.png", rgb)
    np.testing.assert_array_equal(iio.imread(tmp_path / "c.png"), rgb)  # uint8 colour as is
    vol = np.zeros((4, 6, 7), np.float32)
    vol[2, 3, 4] = 10.0
    save_png(tmp_path / "v.png", vol, vmin=0, vmax=10)
    v = iio.imread(tmp_path / "v.png")
    assert v.shape == (6, 7) and v[3, 4] == 255 and v.sum() == 255  # max projection
    save_png(tmp_path / "b.png", np.eye(3, dtype=bool))
    assert iio.imread(tmp_path / "b.png").max() == 255
    save_png(tmp_path / "n.png", np.array([[np.nan, 1.0], [2.0, 3.0]]))
    assert iio.imread(tmp_path / "n.png")[0, 0] == 0


def test_save_png_never_raises_and_leaves_a_reason(tmp_path, monkeypatch):
    for name, bad in [("none", None), ("text", "abc"), ("empty", np.zeros((0, 3))), ("obj", np.array([[{}]]))]:
        assert save_png(tmp_path / f"{name}.png", bad) is None
        assert (tmp_path / f"{name}.png.error").read_text().strip()
        assert not (tmp_path / f"{name}.png").exists()
    assert save_png(tmp_path / "r.png", np.eye(3), vmin=2, vmax=1) is None
    assert "invalid contrast range" in (tmp_path / "r.png.error").read_text()


def test_a_png_writer_that_fails_is_swallowed_and_a_later_success_clears_the_error(tmp_path, monkeypatch):
    from PIL import Image

    def broken(*a, **k):
        raise RuntimeError("no backend can write PNG")

    monkeypatch.setattr(Image.Image, "save", broken)
    assert save_png(tmp_path / "x.png", np.eye(3)) is None
    assert "no backend can write PNG" in (tmp_path / "x.png.error").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["x.png.error"]  # no temp file left behind
    monkeypatch.undo()
    assert save_png(tmp_path / "x.png", np.eye(3)) == tmp_path / "x.png"
    assert not (tmp_path / "x.png.error").exists()


def test_save_png_even_survives_an_unwritable_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert save_png(blocker / "x.png", np.eye(3)) is None  # parent is a file: nothing can be written


# --------------------------------------------------------------------------- shared_range


def test_shared_range_is_robust_and_pooled():
    a = np.linspace(0, 1000, 10_001)
    a[0] = -1e9  # one dead pixel
    b = np.array([np.nan, np.inf, 5.0])
    lo, hi = shared_range(a, b)
    assert 0 <= lo < 10 and 990 < hi <= 1000
    assert shared_range() == (0.0, 1.0)
    assert shared_range(np.array([np.nan]), "junk", None) == (0.0, 1.0)


def test_shared_range_sparse_and_constant():
    labels = np.zeros((100, 100), np.uint16)
    labels[0, 0] = 5  # percentiles both 0: falls back to min/max
    assert shared_range(labels) == (0.0, 5.0)
    lo, hi = shared_range(np.full((3, 3), 7.0))
    assert lo < 7.0 < hi
    lo, hi = shared_range(np.zeros(4))
    assert lo < 0.0 < hi


def test_shared_range_subsamples_huge_images():
    big = np.arange(5_000_000, dtype=np.float32)
    lo, hi = shared_range(big)
    assert lo == pytest.approx(25_000, rel=0.01) and hi == pytest.approx(4_975_000, rel=0.01)


# --------------------------------------------------------------------------- names and roots


def test_safe_name():
    assert safe_name("python:pkg.mod:solve") == "python-pkg.mod-solve"
    assert safe_name("command:./run.sh --fast") == "command-.-run.sh---fast"
    assert safe_name("..") == "unnamed" and safe_name("/", "x") == "x"


def test_artifact_root_env_then_marker_then_cwd(tmp_path, monkeypatch):
    from imagebench.runs import layout

    monkeypatch.setenv(layout.OUTCOME_ENV, str(tmp_path / "o"))
    assert artifact_root() == tmp_path / "o"
    monkeypatch.delenv(layout.OUTCOME_ENV)
    checkout = Path(__file__).resolve().parents[1]
    assert (checkout / layout.MARKER).is_file()
    assert artifact_root() == checkout / "outcomes"
    # installed somewhere with no marker above it: the working directory
    fake = tmp_path / "site-packages" / "imagebench" / "runs" / "layout.py"
    fake.parent.mkdir(parents=True)
    monkeypatch.setattr(layout, "__file__", str(fake))
    monkeypatch.chdir(tmp_path)
    assert artifact_root() == tmp_path / "outcomes"


def test_summary_json_is_plain_json(tmp_path):
    path = write_report(_outcome(detail={"where": Path("/x"), "nan": float("nan")}), tmp_path)
    raw = json.loads(path.read_text())
    assert raw["detail"] == {"where": "/x", "nan": None} and raw["schema_version"] == SCHEMA_VERSION
    assert os.path.basename(path) == "summary.json"
