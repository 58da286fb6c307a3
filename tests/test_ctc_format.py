"""The CTC folder format (imagebench.tracking.ctc): round trips, and every malformed input refused by name.

Each dishonest result is also shown to py-ctcmetrics, whose validator must reject it too (so
imagebench is at least as strict), while imagebench's error names the file, the line or frame
and the field.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ctc_peers import peer_ctc, write_pair

from imagebench.tracking import ctc
from imagebench.tracking.synthetic import disc_movie, tracks_from_labels


def small() -> ctc.TimeLapse:
    labels = np.zeros((4, 16, 16), np.uint16)
    labels[0:2, 2:6, 2:6] = 1
    labels[2:4, 2:5, 2:5] = 2
    labels[2:4, 9:13, 9:13] = 3
    return ctc.TimeLapse(labels=labels, lineage=ctc.lineage_from_labels(labels, {2: 1, 3: 1}))


def test_a_movie_round_trips_through_the_folders(tmp_path: Path) -> None:
    movie = disc_movie(seed=4, frames=15, shape=(64, 64))
    seg = (ctc.SegTruth(frame=3, labels=movie.labels[3]),)
    ctc.write_truth(tmp_path / "01_GT", ctc.CtcTruth(tra=movie, seg=seg))
    ctc.write_result(tmp_path / "01_RES", movie)
    truth = ctc.read_truth(tmp_path / "01_GT")
    result = ctc.read_result(tmp_path / "01_RES")
    for back in (truth.tra, result):
        assert np.array_equal(back.labels, movie.labels) and back.lineage == movie.lineage
    assert [s.frame for s in truth.seg] == [3] and np.array_equal(truth.seg[0].labels, movie.labels[3])
    assert (tmp_path / "01_RES" / "mask014.tif").is_file() and (
        tmp_path / "01_GT" / "TRA" / "man_track000.tif"
    ).is_file()
    assert ctc.read_lineage(tmp_path / "01_RES" / "res_track.txt") == movie.lineage
    assert not list((tmp_path / "01_RES").glob(".*.tmp"))  # atomic writes leave no temporary behind


def test_a_long_movie_gets_four_digit_names(tmp_path: Path) -> None:
    labels = np.zeros((1001, 4, 4), np.uint16)
    labels[:, 1, 1] = 1
    movie = ctc.TimeLapse(labels=labels, lineage=ctc.lineage_from_labels(labels))
    ctc.write_result(tmp_path, movie)
    assert (tmp_path / "mask1000.tif").is_file() and (tmp_path / "mask0000.tif").is_file()
    assert ctc.read_result(tmp_path).frames == 1001


def test_the_lineage_schema_has_a_version() -> None:
    schema = ctc.Lineage.model_json_schema()
    assert schema["properties"]["schema_version"]["const"] == 1
    with pytest.raises(ValueError):
        ctc.Track(label=0, begin=0, end=1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 0 3\n", r"res_track.txt: line 1: 3 column\(s\) '1 0 3', expected 4 integers"),
        ("1 0 1 0\n2 2 x 1\n", r"line 2: field 'end' is 'x', expected an integer"),
        ("1 0 1 0\n2 2 3 9\n", r"line 2: field 'parent' is 9, which is not a track of this table"),
        ("1 3 1 0\n", r"line 1: field 'end' is 1, expected >= its begin 3"),
        ("1 0 1 0\n1 2 3 0\n", r"line 2: field 'label' is 1, already the label of line 1"),
        (
            "1 0 2 0\n2 2 3 1\n",
            r"line 2: field 'parent' is 1, which ends at frame 2, expected a parent that ends before",
        ),
        ("1 0 1 -1\n", r"line 1: field 'parent' is -1, expected an integer >= 0"),
        ("0 0 1 0\n", r"line 1: field 'label' is 0, expected an integer >= 1"),
    ],
)
def test_a_malformed_table_is_refused_by_line_and_field(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "res_track.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ctc.CtcFormatError, match=message):
        ctc.read_lineage(path)


def _write_bad_result(root: Path, labels: np.ndarray, table: str) -> tuple[Path, Path]:
    good = small()
    res, gt = write_pair(root, good, good)
    for t in range(labels.shape[0]):
        ctc._write_tiff(res / f"mask{t:03d}.tif", labels[t])
    (res / "res_track.txt").write_text(table, encoding="utf-8")
    return res, gt


def _peer_rejects(res: Path, gt: Path) -> bool:
    pytest.importorskip("ctc_metrics")
    try:
        return peer_ctc(res, gt).get("Valid") == 0
    except Exception:  # the peer fails on some inputs instead of answering "invalid"
        return True


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "label-outside-its-span",
            r"mask003.tif \(frame 3\): label\(s\) \[1\] outside their track's span .*spans frames 0..1",
        ),
        ("label-not-in-the-table", r"mask002.tif \(frame 2\): label\(s\) \[7\] outside .*label 7 is not in the table"),
        (
            "label-reused-after-a-gap",
            r"mask001.tif \(frame 1\): label\(s\) \[1\] absent, but the table says their track is alive",
        ),
        ("track-past-the-last-frame", r"track 3 ends at frame 5, but there are 4 frame\(s\)"),
        ("parent-not-a-track", r"line 2: field 'parent' is 5, which is not a track"),
    ],
)
def test_a_dishonest_result_is_refused_as_the_peer_refuses_it(case: str, message: str, tmp_path: Path) -> None:
    labels = small().labels.copy()
    table = "1 0 1 0\n2 2 3 1\n3 2 3 1\n"
    if case == "label-outside-its-span":
        labels[3, 14:16, 0:2] = 1
    elif case == "label-not-in-the-table":
        labels[2, 14:16, 0:2] = 7
    elif case == "label-reused-after-a-gap":  # 1 leaves at frame 1 and comes back at 2 under the same label
        labels[1][labels[1] == 1] = 0
        labels[3, 14:16, 0:2] = 1
        table = "1 0 3 0\n2 2 3 0\n3 2 3 0\n"
        message = r"mask001.tif \(frame 1\): label\(s\) \[1\] absent"
    elif case == "track-past-the-last-frame":
        table = "1 0 1 0\n2 2 3 1\n3 2 5 1\n"
    elif case == "parent-not-a-track":
        table = "1 0 1 0\n2 2 3 5\n3 2 3 1\n"
    res, gt = _write_bad_result(tmp_path, labels, table)
    with pytest.raises(ctc.CtcFormatError, match=message):
        ctc.read_result(res)
    if case == "track-past-the-last-frame":  # py-ctcmetrics 1.3.3 checks only the frames there are: stricter here
        assert not _peer_rejects(res, gt)
    else:
        assert _peer_rejects(res, gt), f"py-ctcmetrics accepted {case}"


def test_folders_with_holes_or_odd_frames_are_refused(tmp_path: Path) -> None:
    movie = small()
    res = ctc.write_result(tmp_path / "01_RES", movie)
    (res / "mask002.tif").unlink()
    with pytest.raises(ctc.CtcFormatError, match=r"mask\*.tif frame\(s\) \[2\] missing"):
        ctc.read_result(res)
    ctc._write_tiff(res / "mask002.tif", np.zeros((8, 8), np.uint16))
    with pytest.raises(ctc.CtcFormatError, match=r"mask002.tif: shape \(8, 8\), expected \(16, 16\)"):
        ctc.read_result(res)
    ctc._write_tiff(res / "mask002.tif", np.zeros((16, 16), np.float32))
    with pytest.raises(ctc.CtcFormatError, match=r"mask002.tif: pixel type float32, expected an integer label image"):
        ctc.read_result(res)
    (res / "mask002.tif").write_bytes(b"not a tiff")
    with pytest.raises(ctc.CtcFormatError, match=r"mask002.tif: not a readable TIFF"):
        ctc.read_result(res)
    (res / "mask002.tif").unlink()
    ctc._write_tiff(res / "mask002.tif", movie.labels[2])
    (res / "res_track.txt").unlink()
    with pytest.raises(ctc.CtcFormatError, match=r"res_track.txt: no such file"):
        ctc.read_result(res)
    with pytest.raises(ctc.CtcFormatError, match=r"no TRA folder"):
        ctc.read_truth(tmp_path / "nothing")


def test_a_seg_frame_beyond_the_movie_is_refused(tmp_path: Path) -> None:
    movie = small()
    gt = ctc.write_truth(
        tmp_path / "01_GT", ctc.CtcTruth(tra=movie, seg=(ctc.SegTruth(frame=1, labels=movie.labels[1]),))
    )
    ctc._write_tiff(gt / "SEG" / "man_seg009.tif", movie.labels[1])
    with pytest.raises(ctc.CtcFormatError, match=r"man_seg009.tif: frame 9, but the TRA movie has 4 frame\(s\)"):
        ctc.read_truth(gt)


def test_a_gap_becomes_a_new_track_with_the_old_one_as_parent() -> None:
    labels = np.zeros((5, 8, 8), np.uint16)
    labels[[0, 1, 3, 4], 2:4, 2:4] = 1  # absent at frame 2
    movie = tracks_from_labels(labels)
    assert [(t.label, t.begin, t.end, t.parent) for t in movie.lineage.tracks] == [(1, 0, 1, 0), (2, 3, 4, 1)]
    ctc.check_masks(movie)
    with pytest.raises(ctc.CtcFormatError, match="absent"):
        ctc.check_masks(ctc.TimeLapse(labels=labels, lineage=ctc.Lineage(tracks=(ctc.Track(label=1, begin=0, end=4),))))


def test_writing_refuses_an_inconsistent_movie(tmp_path: Path) -> None:
    movie = small()
    bad = ctc.TimeLapse(labels=movie.labels, lineage=ctc.Lineage(tracks=movie.lineage.tracks[:2]))
    with pytest.raises(ctc.CtcFormatError, match=r"label\(s\) \[3\] outside"):
        ctc.write_result(tmp_path / "01_RES", bad)
    assert not (tmp_path / "01_RES").exists()
