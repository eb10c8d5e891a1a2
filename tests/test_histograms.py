"""Rule value histograms: fixed bins that add up across files, units and crawls, and the PNG
pictures drawn from them (read back with the tests' own PNG reader)."""

from __future__ import annotations

import base64

import numpy as np
import polars as pl
import pytest

from tests.formats import read_png
from tokenmill.filters import GopherQualityFilter
from tokenmill.filters.chain import FilterChain
from tokenmill.filters.histograms import (
    BINS,
    HEIGHT,
    MARK_COLORS,
    bin_of,
    lower_edge,
    markdown,
    pictures,
    png,
    position_of,
    rule_histograms,
)
from tokenmill.filters.signals import SignalProfile
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


def test_a_picture_shows_the_counts_as_bars_and_each_threshold_as_a_line():
    counts = np.zeros(BINS, dtype=np.int64)
    counts[[105, 110, 116]] = [1, 4, 2]
    image, low, high = png(counts, {"current": [50.0], "proposed": [0.5]})
    pixels = read_png(image)
    first, shown = 50, 117 - 50  # the proposed threshold's bin widens the picture to the left
    assert (low, high) == (lower_edge(first), lower_edge(117))
    step = pixels.shape[1] // shown
    assert pixels.shape == (HEIGHT, shown * step, 3) and step >= 2

    def height(index: int) -> int:  # of the bar in the bin's first pixel column
        column = pixels[:, (index - first) * step]
        return int((column != 255).all(axis=1).sum())

    assert height(110) > height(116) > height(105) > 0 and height(80) == 0  # 4 > 2 > 1 > 0
    line = round((position_of(50.0) - first) * step)
    assert (pixels[:, line - 1] == MARK_COLORS["current"]).all()
    assert (pixels[:, 0] == MARK_COLORS["proposed"]).all()


def test_markdown_embeds_a_png_per_rule():
    histograms = rule_histograms(signals_of(TEXTS), chain())
    text = markdown(histograms, "note")
    assert text.startswith("note") and text.count("](data:image/png;base64,") == len(histograms)
    for key, caption, uri in pictures(histograms):
        assert read_png(base64.b64decode(uri.split(",", 1)[1])).shape[0] == HEIGHT
        assert caption.startswith(f"{len(TEXTS):,} documents") or key != "gopher_quality/n_words"
