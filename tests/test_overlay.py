"""The overlay artifact: truth and answer in two colours, and a legend drawn into the pixels, so a
PNG read outside napari says which colour is which."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from imagebench.cases._overlay import GREEN, MAGENTA, WHITE, Overlay, outline_overlay, text_mask


def _painted(rgb: np.ndarray, colour: tuple[float, float, float], lo: float, hi: float) -> np.ndarray:
    return np.all(np.isclose(rgb, lo + np.asarray(colour, np.float32) * (hi - lo)), axis=-1)


def _two_squares() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    image = np.linspace(0.0, 1.0, 64 * 64, dtype=np.float32).reshape(64, 64)
    truth = np.zeros((64, 64), np.int32)
    truth[10:20, 10:20] = 1  # found exactly
    truth[40:50, 40:50] = 2  # missed
    answer = np.zeros((64, 64), np.int32)
    answer[10:20, 10:20] = 1
    answer[5:9, 40:60] = 3  # a false object
    return image, truth, answer


def test_text_is_drawn_in_a_fixed_bitmap_font() -> None:
    short, long = text_mask("truth"), text_mask("no answer")
    assert short.dtype == bool and short.any() and short.shape[0] == long.shape[0]
    assert long.shape[1] > short.shape[1]
    assert np.array_equal(text_mask("truth"), short)  # no anti-aliasing: the same pixels every time
    big = text_mask("truth", 3)
    assert big.shape == (short.shape[0] * 3, short.shape[1] * 3) and big.sum() == 9 * short.sum()


def test_the_outline_overlay_colours_truth_answer_and_both_and_names_them() -> None:
    image, truth, answer = _two_squares()
    rgb = outline_overlay(image, truth, answer)
    lo, hi = Overlay(image).lo, Overlay(image).hi
    assert rgb.shape[1:] == (64, 3) and rgb.shape[0] > 64  # the image, then the legend strip
    picture, legend = rgb[:64], rgb[64:]
    assert _painted(picture[10:20, 10:20], WHITE, lo, hi).any()  # a found object: both outlines coincide
    assert _painted(picture[40:50, 40:50], GREEN, lo, hi).any()  # a missed one: the truth alone
    assert not _painted(picture[40:50, 40:50], MAGENTA, lo, hi).any()
    assert _painted(picture[5:9, 40:60], MAGENTA, lo, hi).any()  # a false one: the answer alone
    for colour in (GREEN, MAGENTA, WHITE):  # each colour is named in the strip
        assert _painted(legend, colour, lo, hi).sum() > 20, colour


def test_without_an_answer_the_legend_says_so_and_nothing_is_magenta() -> None:
    image, truth, _ = _two_squares()
    rgb = outline_overlay(image, truth, None)
    lo, hi = Overlay(image).lo, Overlay(image).hi
    assert not _painted(rgb, MAGENTA, lo, hi).any()
    assert _painted(rgb[:64], GREEN, lo, hi).any() and _painted(rgb[64:], WHITE, lo, hi).any()  # "no answer"


def test_a_narrow_image_wraps_its_legend_and_a_large_one_draws_it_larger() -> None:
    wide, narrow, large = Overlay(np.zeros((64, 200))), Overlay(np.zeros((64, 60))), Overlay(np.zeros((900, 900)))
    entries = [("truth", GREEN), ("answer", MAGENTA)]
    for view in (wide, narrow, large):
        view.legend(entries)
    wide_strip, narrow_strip = wide.shape[0] - 64, narrow.shape[0] - 64
    assert narrow_strip > wide_strip > 0  # two rows where one does not fit
    assert large.shape[0] - 900 > 2 * wide_strip  # the words grow with the image


def test_write_report_writes_the_overlay_as_a_colour_png_with_its_legend(tmp_path: Path) -> None:
    import imageio.v3 as iio

    from imagebench.cases import get_case
    from imagebench.fixtures.fixture import Attempt
    from imagebench.runs.artifacts import write_report

    case = get_case("segment-nuclei/synthetic-blobs")
    fixture = case.fixture.build(case.namespace, case.case_id)
    truth = np.asarray(fixture.truth["labels"])
    wrong = np.where(truth % 3 == 0, 0, truth)  # every third nucleus missed
    outcome = case.verify(fixture, Attempt("test", arrays={"labels": wrong}))
    assert outcome.status == "wrong-answer" and "overlay" in outcome.artifacts
    summary = write_report(outcome, tmp_path)
    png = iio.imread(summary.parent / "overlay.png")
    height = truth.shape[0]
    assert png.ndim == 3 and png.shape[0] > height
    r, g, b = (png[..., i].astype(int) for i in range(3))
    green, magenta = (g > r + 100) & (g > b + 100), (r > g + 100) & (b > g + 100)
    assert green[:height].any()  # the missed nuclei's outlines
    assert green[height:].any() and magenta[height:].any()  # the legend's squares and words
    assert not (summary.parent / "overlay.npy").exists()  # a colour image is shown from its PNG
