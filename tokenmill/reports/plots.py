"""Pictures of the rules' value distributions (`tokenmill.filters.histograms`): one small PNG a
rule, drawn with matplotlib (Agg, no pyplot), its thresholds as labelled vertical lines.

The x axis follows the bins: linear over [0, 1], then logarithmic from 1 to 10^7, so every bin
is as wide as the next and ticks, tick labels and threshold lines sit at their true values.
The same histograms and marks give the same PNG bytes (matplotlib's default style, no text
chunk), whatever matplotlibrc the user has.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from tokenmill.filters.histograms import (
    BINS,
    THRESHOLDS,
    counts_of,
    lower_edge,
    position_of,
    threshold_values,
)

if TYPE_CHECKING:  # matplotlib is imported when a picture is drawn, not with the module
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

WIDTH, HEIGHT, DPI = 480, 240, 100  # pixels
BAR = "#969696"
MARK_COLORS = {"current": "#1f77b4", "proposed": "#d62728"}
MARK_STYLES = {"current": "-", "proposed": "--"}  # a proposed line on a current one shows both
MAJOR_TICKS = 6  # at most, about
FONT = 7
GREYS = 8  # levels from black to white in the PNG's palette (text, axes, their anti-aliasing)
AXES_BOX = (0.1, 0.11, 0.88, 0.79)  # left, bottom, width, height, in figure fractions
HEADROOM = 1.3  # above the highest bar: room for the threshold labels
MINOR_TICK = 0.015  # below the axis, in axes fractions (matplotlib's minor tick length)
LEADING_DIGITS = ((1,), (1, 2, 5), tuple(range(1, 10)))  # of the log part's labelled ticks

_to_position = np.vectorize(position_of, otypes=[float])  # value -> place on the bin axis
_to_value = np.vectorize(lower_edge, otypes=[float])  # and back (fractional bins too)


def shown_bins(counts: np.ndarray, marks: dict[str, list[float]]) -> tuple[int, int]:
    """The first and last bin a picture shows: every non-empty bin and every mark."""
    used = np.flatnonzero(counts)
    ends = [int(position_of(v)) for values in marks.values() for v in values]
    if used.size:
        ends += [int(used[0]), int(used[-1])]
    return max(0, min(ends, default=0)), min(BINS - 1, max(ends, default=0))


def rule_figure(key: str, counts: np.ndarray, marks: dict[str, list[str]]) -> Figure:
    """The histogram `counts` of rule `key` as bars over its true values, with a vertical line
    labelled with its threshold text for each of `marks` (kind → thresholds such as "<50";
    kinds "current" and "proposed"), and a legend when there is more than one kind."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.style import context

    values = {kind: threshold_values(texts) for kind, texts in marks.items()}
    first, last = shown_bins(counts, values)
    edges = _to_value(np.arange(first, last + 2))
    with context("default"):  # the user's matplotlibrc would change the picture
        figure = Figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI)
        # fixed margins, room for "100k" and the title row: a layout engine would measure every
        # text of every picture again, two thirds of the drawing time
        ax = figure.add_axes(AXES_BOX)
        ax.set_xscale("function", functions=(_to_position, _to_value))
        ax.stairs(counts[first : last + 1], edges, fill=True, color=BAR)
        ax.set_xlim(edges[0], edges[-1])
        ax.set_ylim(0, max(int(counts.max()), 1) * HEADROOM)
        _ticks(ax, edges[0], edges[-1])
        ax.set_ylabel("documents", fontsize=FONT)
        ax.set_title(key, loc="left", fontsize=FONT + 1)
        for row, (kind, texts) in enumerate(marks.items()):
            for text, value in zip(texts, values[kind], strict=True):
                _mark(ax, value, text, kind, row)
        if len(marks) > 1:
            handles = [
                Line2D([], [], color=MARK_COLORS[k], linestyle=MARK_STYLES[k]) for k in marks
            ]
            ax.legend(
                handles,
                list(marks),
                loc="lower right",
                bbox_to_anchor=(1, 1),
                ncols=len(marks),
                frameon=False,
                fontsize=FONT,
                borderaxespad=0.2,
            )
    return figure


def _mark(ax: Axes, value: float, text: str, kind: str, row: int) -> None:
    """A threshold's line and its text beside it at the top, one row of text per kind; the text
    on the side with more room."""
    value = min(max(value, ax.get_xlim()[0]), ax.get_xlim()[1])  # beyond the bins: at the edge
    ax.axvline(
        value,
        color=MARK_COLORS[kind],
        linestyle=MARK_STYLES[kind],
        linewidth=1.2,
        zorder=3,  # over the spine: a threshold at the first or last bin's edge stays seen
        clip_on=False,
    )
    low, high = (float(_to_position(x)) for x in ax.get_xlim())
    right = (float(_to_position(value)) - low) / max(high - low, 1e-9) < 0.5
    ax.annotate(
        text,
        (value, 0.97 - 0.1 * row),
        xycoords=("data", "axes fraction"),
        xytext=(3 if right else -3, 0),
        textcoords="offset points",
        ha="left" if right else "right",
        va="top",
        fontsize=FONT,
        color=MARK_COLORS[kind],
        bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"},
    )


def _ticks(ax: Axes, low: float, high: float) -> None:
    """Ticks at true values: round numbers on the linear part (as many as its share of the
    axis allows), decades on the log part (with 2 and 5 when it spans less than two)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    span = position_of(high) - position_of(low)
    major, minor = [], []
    if low < 1:
        top = min(high, 1.0)
        share = (position_of(top) - position_of(low)) / span
        linear = MaxNLocator(max(1, round(MAJOR_TICKS * share))).tick_values(low, top)
        major += [round(v, 6) for v in linear if low - 1e-9 <= v <= top + 1e-9]
    if high > 1:
        bottom = max(low, 1.0)
        decades = range(math.floor(math.log10(bottom)), math.ceil(math.log10(high)) + 1)
        steps = [m * 10.0**d for d in decades for m in range(1, 10)]
        inside = [v for v in steps if bottom <= v <= high]
        for leading in LEADING_DIGITS:  # the fewest that give three ticks
            labelled = [v for v in inside if round(v / 10 ** math.floor(math.log10(v))) in leading]
            if len(labelled) >= 3:
                break
        if len(labelled) < 3:  # less than half a decade: round numbers
            labelled = [v for v in MaxNLocator(3).tick_values(bottom, high) if bottom <= v <= high]
        major += labelled
        minor += [v for v in inside if v not in labelled]
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(major))))
    # minor ticks as one collection of short lines: matplotlib's own make an object apiece,
    # half the drawing time of a picture spanning decades
    ax.vlines(
        minor,
        -MINOR_TICK,
        0,
        transform=ax.get_xaxis_transform(),
        colors="black",
        linewidth=0.6,
        clip_on=False,
    )
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: short_number(v)))
    ax.yaxis.set_major_locator(MaxNLocator(4, integer=True))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: short_number(v)))
    ax.tick_params(labelsize=FONT)


def short_number(value: float) -> str:
    """0.25, 50, 2k, 100k, 10M: a tick label."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def png_of(figure: Figure) -> bytes:
    """The figure as a PNG of WIDTH x HEIGHT pixels in the palette's colours, the same bytes for
    the same figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.style import context
    from PIL import Image

    canvas = FigureCanvasAgg(figure)
    with context("default"):  # some settings are read while drawing (text hinting, paths)
        canvas.draw()
    rgb = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba()).convert("RGB")
    palette = Image.new("P", (1, 1))
    palette.putpalette(palette_colours())
    buffer = io.BytesIO()
    rgb.quantize(palette=palette, dither=Image.Dither.NONE).save(buffer, "PNG", optimize=True)
    return buffer.getvalue()


def palette_colours() -> list[int]:
    """The few colours a picture is drawn in, as flat RGB bytes: greys, the bars' grey, each
    mark's colour and its tints on white. A PNG of them is a quarter the size of a truecolour
    one (the pictures go into Dagster's event log), and keeps the lines' exact colours."""
    from matplotlib.colors import to_rgb

    greys = [(level,) * 3 for level in np.linspace(0.0, 1.0, GREYS)]
    marks = [np.array(to_rgb(c)) for c in MARK_COLORS.values()]
    tints = [tint * c + (1 - tint) for c in marks for tint in (1 / 3, 2 / 3)]
    colours = [*greys, to_rgb(BAR), *marks, *tints]
    return [round(255 * channel) for colour in colours for channel in colour]


def pictures(
    histograms: dict[str, dict], marks: dict[str, dict[str, list[str]]] | None = None
) -> Iterator[tuple[str, str, str]]:
    """Per rule: its title, a caption (documents, range shown, thresholds) and its PNG as a
    data URI. `marks` names the thresholds drawn per rule ("current" in blue, "proposed" in
    red); by default the histograms' own, as "current"."""
    if marks is None:
        marks = {"current": {key: h[THRESHOLDS] for key, h in histograms.items()}}
    for key, histogram in sorted(histograms.items()):
        counts = counts_of(histogram)
        drawn = {kind: thresholds.get(key, []) for kind, thresholds in marks.items()}
        first, last = shown_bins(counts, {k: threshold_values(t) for k, t in drawn.items()})
        image = png_of(rule_figure(key, counts, drawn))
        shown = "; ".join(f"{kind} {' '.join(t) or 'none'}" for kind, t in drawn.items())
        low, high = lower_edge(first), lower_edge(last + 1)
        caption = f"{int(counts.sum()):,} documents; {low:.4g} to {high:.4g}; {shown}"
        yield key, caption, "data:image/png;base64," + base64.b64encode(image).decode()


def markdown(histograms: dict[str, dict], note: str = "") -> str:
    """Every rule's picture, for a Dagster metadata entry (the UI shows images in Markdown)."""
    parts = [note] if note else []
    for key, caption, uri in pictures(histograms):
        parts.append(f"**{key}** ({caption})\n\n![{key}]({uri})")
    return "\n\n".join(parts)
