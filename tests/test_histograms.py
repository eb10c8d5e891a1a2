"""Rule value histograms: fixed bins that add up across files, units and crawls, and the
pictures drawn from them (what a picture shows inspected before drawing; the PNGs read back
with the tests' own PNG reader)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from testkit.formats import read_png
from tokenmill.filters import GopherQualityFilter
from tokenmill.filters.chain import FilterChain
from tokenmill.filters.histograms import BINS, bin_of, lower_edge, position_of, rule_histograms
from tokenmill.filters.signals import SignalProfile
from tokenmill.reports.plots import (
    AXES,
    BAR,
    HEIGHT,
    MARK_COLORS,
    WIDTH,
    markdown,
    nice_ticks,
    pictures,
    png_of,
    rule_picture,
    short_number,
)
from tokenmill.storage.outputs import merge_counts


@pytest.mark.parametrize(
    "value,expected",
    [(0.0, 0), (0.5, 50), (0.999, 99), (1.0, 99), (1.5, 101), (50.0, 116), (1e9, BINS - 1)],
)
def test_each_value_falls_in_its_bin(value, expected):
    assert bin_of(np.array([value]))[0] == expected


def test_every_bin_holds_the_values_between_its_edges():
    values = np.concatenate(
        [np.random.default_rng(1).random(5000), 10 ** (7 * np.random.default_rng(2).random(5000))]
    )
    bins = bin_of(values)
    lower = np.array([lower_edge(i) for i in bins])
    upper = np.array([lower_edge(i + 1) for i in bins])
    inside = (lower <= values * (1 + 1e-12)) & (values <= upper * (1 + 1e-12))
    assert inside.all(), values[~inside][:5]
    assert all(position_of(lower_edge(i)) == pytest.approx(i) for i in range(1, BINS))


def signals_of(texts: list[str]) -> pl.DataFrame:
    """Documents with their stored Gopher quality signals, as `extracted` writes them."""
    docs = pl.DataFrame({"doc_id": [str(i) for i in range(len(texts))], "text": texts})
    flt = GopherQualityFilter()
    stats = flt.measure(docs)
    return docs.with_columns(stats.select(pl.all().name.prefix(f"{flt.name}.")))


def chain(**thresholds) -> FilterChain:
    profile = SignalProfile([GopherQualityFilter()], [])
    return FilterChain([GopherQualityFilter(**thresholds)], signals=profile)


TEXTS = [" ".join(["word"] * n) + " the and of" for n in (3, 40, 60, 80, 200, 700, 5000)] * 3


def test_histograms_of_parts_add_up_to_the_histogram_of_the_whole():
    docs = signals_of(TEXTS)
    whole = rule_histograms(docs, chain())
    halves = merge_counts(
        rule_histograms(docs.head(10), chain()), rule_histograms(docs.tail(-10), chain())
    )
    assert halves == whole
    words = whole["gopher_quality/n_words"]
    assert sum(words["bins"].values()) == len(TEXTS)
    assert words["thresholds"] == ["<50", ">100000"]  # one picture, both thresholds
    assert rule_histograms(docs, chain(min_doc_words=20))["gopher_quality/n_words"][
        "thresholds"
    ] == ["<20", ">100000"]


def counts_at(bins: dict[int, int]) -> np.ndarray:
    counts = np.zeros(BINS, dtype=np.int64)
    counts[list(bins)] = list(bins.values())
    return counts


COUNTS = counts_at({105: 1, 110: 4, 116: 2})  # 3.2 to 4, 10 to 12.6, 39.8 to 50.1
MARKS = {"current": ["<50"], "proposed": [">0.5"]}


def lines_of(picture) -> dict[str, list[float]]:
    """Each threshold line's value on the axis, by colour."""
    lines: dict[str, list[float]] = {}
    for kind, value, _ in picture.lines:
        lines.setdefault(MARK_COLORS[kind], []).append(value)
    return lines


def test_a_picture_shows_the_counts_over_their_true_values_and_each_threshold_as_a_line():
    picture = rule_picture("gopher_quality/n_words", COUNTS, MARKS)
    first, last = 50, 116  # the proposed threshold (bin 50) widens the picture to the left
    assert (picture.first, picture.last) == (first, last)
    assert picture.x_range == pytest.approx((0.5, lower_edge(last + 1)))
    assert list(picture.counts) == list(COUNTS[first : last + 1])
    assert lines_of(picture) == {MARK_COLORS["current"]: [50.0], MARK_COLORS["proposed"]: [0.5]}
    assert [text for _, _, text in picture.lines] == ["<50", ">0.5"]
    assert picture.title == "gopher_quality/n_words" and picture.y_top >= 4
    assert picture.legend == ["current", "proposed"]


def test_the_x_axis_is_linear_then_logarithmic_as_the_bins_are_with_true_tick_labels():
    picture = rule_picture("a/ratio_and_count", counts_at({0: 1, 150: 1}), {})
    assert picture.x_range == pytest.approx((0.0, lower_edge(151)))
    # every bin as wide: a value's place on the axis is its place on the bin axis
    left, right = picture.x_of(0.0), picture.x_of(lower_edge(151))
    for value in (0.25, 0.5, 1.0, 7.0, 100.0, 31_000.0):
        x = picture.x_of(value)
        assert (x - left) / (right - left) == pytest.approx(position_of(value) / 151)
    ticks = {value: short_number(value) for value in picture.x_ticks}
    assert {0.0: "0", 1.0: "1", 10.0: "10", 1e3: "1k", 1e5: "100k"}.items() <= ticks.items()
    assert sorted(ticks) == list(ticks) and all(0 <= t <= lower_edge(151) for t in ticks)
    assert not set(picture.minor_ticks) & set(ticks) and 2.0 in picture.minor_ticks


@pytest.mark.parametrize(
    "bins,expected",
    [
        ({0: 5, 90: 1}, [0.0, 0.2, 0.4, 0.6, 0.8]),  # ratios: round numbers
        ({103: 5, 112: 2}, [2.0, 5.0, 10.0]),  # under two decades: 2 and 5 too
        ({110: 1, 160: 1}, [10.0, 100.0, 1e3, 1e4, 1e5, 1e6]),  # decades
        ({101: 1, 102: 1}, [1.5, 1.75]),  # under half a decade (1.26 to 2): round numbers
    ],
)
def test_ticks_fit_the_range_shown(bins, expected):
    assert rule_picture("a/b", counts_at(bins), {}).x_ticks == pytest.approx(expected)


@pytest.mark.parametrize(
    "low,high,most,integer,expected",
    [
        (0, 13, 4, True, [0, 5, 10]),
        (0, 2.6, 4, True, [0, 1, 2]),
        (0, 1.3, 4, True, [0, 1]),
        (0, 0.91, 6, False, [0, 0.2, 0.4, 0.6, 0.8]),
        (0, 130, 4, True, [0, 50, 100]),
    ],
)
def test_nice_ticks_are_round_numbers_in_the_range(low, high, most, integer, expected):
    assert nice_ticks(low, high, most, integer) == pytest.approx(expected)


def test_an_empty_histogram_is_drawn_as_empty_axes_with_its_thresholds():
    empty = np.zeros(BINS, dtype=np.int64)
    picture = rule_picture("a/b", empty, {"current": []})
    assert picture.x_range == pytest.approx((0.0, 0.01)) and not picture.lines
    assert not picture.legend and not picture.counts.any()
    picture = rule_picture("a/b", empty, {"current": ["<50"]})
    assert lines_of(picture) == {MARK_COLORS["current"]: [50.0]}
    assert read_png(png_of(picture)).shape[:2] == (HEIGHT, WIDTH)


def rgb(colour: str) -> np.ndarray:
    """A "#rrggbb" colour's channels."""
    return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])


def colour_rows(pixels: np.ndarray, colour: str, x: float) -> float:
    """How much of the plotting area's height the colour covers at column x (+-1)."""
    left, top, right, bottom = AXES
    column = round(x)
    near = np.abs(pixels[top:bottom, column - 1 : column + 2] - rgb(colour))
    near = near.sum(axis=2).min(axis=1) < 60
    return near.mean()


def test_the_png_has_the_set_size_and_each_threshold_line_and_bar_where_the_picture_puts_it():
    picture = rule_picture("gopher_quality/n_words", COUNTS, MARKS)
    pixels = read_png(png_of(picture))[:, :, :3].astype(int)
    assert pixels.shape == (HEIGHT, WIDTH, 3)
    assert colour_rows(pixels, MARK_COLORS["current"], picture.x_of(50.0)) > 0.9  # solid
    assert colour_rows(pixels, MARK_COLORS["proposed"], picture.x_of(0.5)) > 0.4  # dashed
    assert colour_rows(pixels, MARK_COLORS["proposed"], picture.x_of(0.5)) < 0.9
    for colour in MARK_COLORS.values():
        assert colour_rows(pixels, colour, picture.x_of(5.0)) == 0
    # the bars: 4 documents in bin 110 (10 to 12.6) fill 4 / y_top of the height, 1 in bin 105
    grey = rgb(BAR)
    _, top, _, bottom = AXES
    for bin_, count in ((110, 4), (105, 1)):
        x = round(picture.x_of((lower_edge(bin_) + lower_edge(bin_ + 1)) / 2))
        filled = (np.abs(pixels[top:bottom, x] - grey).sum(axis=1) < 30).sum()
        assert filled == pytest.approx(count / picture.y_top * (bottom - top), abs=2)


DRAW = """
import sys
import numpy as np
from tokenmill.reports.plots import png_of, rule_picture
counts = np.zeros(170, dtype=np.int64)
counts[[105, 110, 116]] = [1, 4, 2]
sys.stdout.buffer.write(png_of(rule_picture("gopher_quality/n_words", counts, {marks!r})))
"""


def test_the_same_histogram_gives_the_same_png_bytes():
    picture = rule_picture("gopher_quality/n_words", COUNTS, MARKS)
    image = png_of(picture)
    assert png_of(picture) == image == png_of(rule_picture("gopher_quality/n_words", COUNTS, MARKS))
    assert b"Software" not in image and b"tEXt" not in image
    # another process, other string hashes: the same bytes
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    draw = [sys.executable, "-c", DRAW.format(marks=MARKS)]
    assert subprocess.run(draw, env=env, capture_output=True, check=True).stdout == image
    assert png_of(rule_picture("gopher_quality/n_words", COUNTS, {"current": ["<50"]})) != image


def test_markdown_embeds_a_png_per_rule():
    histograms = rule_histograms(signals_of(TEXTS), chain())
    text = markdown(histograms, "note")
    assert text.startswith("note") and text.count("](data:image/png;base64,") == len(histograms)
    for key, caption, uri in pictures(histograms):
        assert read_png(base64.b64decode(uri.split(",", 1)[1])).shape[:2] == (HEIGHT, WIDTH)
        assert caption.startswith(f"{len(TEXTS):,} documents") or key != "gopher_quality/n_words"
    words = dict((key, caption) for key, caption, _ in pictures(histograms))
    assert words["gopher_quality/n_words"].endswith("; current <50 >100000")
