"""Pictures of the rules' value distributions (`tokenmill.filters.histograms`): one small PNG a
rule, drawn with Pillow: bars over the rule's values, its thresholds as labelled vertical lines.

The x axis follows the bins: linear over [0, 1], then logarithmic from 1 to 10^7, so every bin
is as wide as the next and ticks, tick labels and threshold lines sit at their true values.
``rule_picture`` says what a picture shows (ranges, ticks, lines), ``png_of`` draws it: the same
histograms and marks give the same PNG bytes (Pillow's own font, no text chunk). A crawl's
materialization and every preview draw a picture per rule: drawn directly, a picture costs a few
milliseconds, not a plotting library's figure.
"""

from __future__ import annotations

import base64
import functools
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tokenmill.filters.histograms import (
    BINS,
    THRESHOLDS,
    counts_of,
    lower_edge,
    position_of,
    threshold_values,
)

WIDTH, HEIGHT = 480, 240  # pixels
BAR = "#969696"
MARK_COLORS = {"current": "#1f77b4", "proposed": "#d62728"}
DASHED = {"current": False, "proposed": True}  # a proposed line on a current one shows both
MAJOR_TICKS = 6  # at most, about
FONT_PX = 10
TITLE_PX = 11
GREYS = 8  # levels from black to white in the PNG's palette (text, axes, their anti-aliasing)
AXES = (48, 24, 470, 213)  # left, top, right, bottom: the plotting area, in pixels
HEADROOM = 1.3  # above the highest bar: room for the threshold labels
TICK, MINOR_TICK = 4, 3  # tick lengths below the axis, in pixels
DASH = (6, 3)  # a dashed line's pixels on, off
LEADING_DIGITS = ((1,), (1, 2, 5), tuple(range(1, 10)))  # of the log part's labelled ticks
NICE_STEPS = (1, 2, 2.5, 5, 10)


def shown_bins(counts: np.ndarray, marks: dict[str, list[float]]) -> tuple[int, int]:
    """The first and last bin a picture shows: every non-empty bin and every mark."""
    used = np.flatnonzero(counts)
    ends = [int(position_of(v)) for values in marks.values() for v in values]
    if used.size:
        ends += [int(used[0]), int(used[-1])]
    return max(0, min(ends, default=0)), min(BINS - 1, max(ends, default=0))


@dataclass(frozen=True)
class Picture:
    """What a rule's picture shows: bins ``first`` to ``last`` with their ``counts``, the y
    axis up to ``y_top``, ticks at true values, and each threshold line as (kind, value on the
    axis, its text); the marks' ``kinds`` (each a row of line texts), and a legend when there
    is more than one."""

    title: str
    first: int
    last: int
    counts: np.ndarray
    y_top: float
    x_ticks: list[float]
    minor_ticks: list[float]
    y_ticks: list[float]
    lines: list[tuple[str, float, str]]
    kinds: list[str]

    @property
    def legend(self) -> list[str]:
        return self.kinds if len(self.kinds) > 1 else []

    @property
    def x_range(self) -> tuple[float, float]:
        return lower_edge(self.first), lower_edge(self.last + 1)

    def x_of(self, value: float) -> float:
        """The pixel column of a value on the x axis."""
        left, _, right, _ = AXES
        share = (position_of(value) - self.first) / (self.last + 1 - self.first)
        return left + share * (right - left)

    def y_of(self, count: float) -> float:
        """The pixel row of a count on the y axis."""
        _, top, _, bottom = AXES
        return bottom - count / self.y_top * (bottom - top)


def rule_picture(key: str, counts: np.ndarray, marks: dict[str, list[str]]) -> Picture:
    """The histogram `counts` of rule `key` over its true values, with a vertical line
    labelled with its threshold text for each of `marks` (kind → thresholds such as "<50";
    kinds "current" and "proposed"), and a legend when there is more than one kind."""
    values = {kind: threshold_values(texts) for kind, texts in marks.items()}
    first, last = shown_bins(counts, values)
    low, high = lower_edge(first), lower_edge(last + 1)
    major, minor = _x_ticks(low, high)
    y_top = max(int(counts.max()), 1) * HEADROOM
    lines = [
        (kind, min(max(value, low), high), text)  # beyond the bins: at the edge
        for kind, texts in marks.items()
        for text, value in zip(texts, values[kind], strict=True)
    ]
    return Picture(
        title=key,
        first=first,
        last=last,
        counts=counts[first : last + 1],
        y_top=y_top,
        x_ticks=major,
        minor_ticks=minor,
        y_ticks=[v for v in nice_ticks(0, y_top, 4, integer=True) if v <= y_top],
        lines=lines,
        kinds=list(marks),
    )


def nice_ticks(low: float, high: float, most: int, integer: bool = False) -> list[float]:
    """Round numbers from ``low`` to ``high``: steps of 1, 2, 2.5 or 5 times a power of ten
    (whole numbers if ``integer``), the smallest giving at most ``most`` intervals."""
    if high <= low:
        return [low]
    magnitude = 10.0 ** math.floor(math.log10((high - low) / most))
    for scale in (magnitude, 10 * magnitude):
        for nice in NICE_STEPS:
            step = nice * scale
            if integer and (step < 1 or step != int(step)):
                continue
            start, end = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
            if end - start <= most:
                ticks = [round(i * step, 10) for i in range(start, end + 1)]
                return [t for t in ticks if low - 1e-9 <= t <= high + 1e-9]
    return [low, high]


def _x_ticks(low: float, high: float) -> tuple[list[float], list[float]]:
    """Ticks at true values: round numbers on the linear part (as many as its share of the
    axis allows), decades on the log part (with 2 and 5 when it spans less than two); the log
    part's other steps as minor ticks."""
    span = position_of(high) - position_of(low)
    major, minor = [], []
    if low < 1:
        top = min(high, 1.0)
        share = (position_of(top) - position_of(low)) / span
        major += nice_ticks(low, top, max(1, round(MAJOR_TICKS * share)))
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
            labelled = nice_ticks(bottom, high, 3)
        major += labelled
        minor += [v for v in inside if v not in labelled]
    return sorted(set(major)), minor


def short_number(value: float) -> str:
    """0.25, 50, 2k, 100k, 10M: a tick label."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))


@functools.cache
def _font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def png_of(picture: Picture) -> bytes:
    """The picture as a PNG of WIDTH x HEIGHT pixels in the palette's colours."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    left, top, right, bottom = AXES
    font, black = _font(FONT_PX), (0, 0, 0)
    edges = [round(picture.x_of(lower_edge(i))) for i in range(picture.first, picture.last + 2)]
    for index, count in enumerate(picture.counts):
        if count:
            box = (edges[index], round(picture.y_of(count)), edges[index + 1], bottom)
            draw.rectangle(box, fill=_rgb(BAR))
    for value in picture.minor_ticks:
        x = round(picture.x_of(value))
        draw.line([(x, bottom), (x, bottom + MINOR_TICK)], fill=black)
    for value in picture.x_ticks:
        x = round(picture.x_of(value))
        draw.line([(x, bottom), (x, bottom + TICK)], fill=black)
        draw.text((x, bottom + TICK + 1), short_number(value), fill=black, font=font, anchor="mt")
    for value in picture.y_ticks:
        y = round(picture.y_of(value))
        draw.line([(left - TICK, y), (left, y)], fill=black)
        draw.text((left - TICK - 2, y), short_number(value), fill=black, font=font, anchor="rm")
    draw.rectangle((left, top, right, bottom), outline=black)
    draw.text((left, top - 4), picture.title, fill=black, font=_font(TITLE_PX), anchor="ls")
    _y_label(image, "documents", font)
    for kind, value, text in picture.lines:
        _mark(draw, picture, kind, value, text, picture.kinds.index(kind))
    _legend(draw, picture.legend, font)
    return _palette_png(image)


def _vertical(draw, x: int, top: int, bottom: int, colour, dashed: bool, width: int = 2) -> None:
    on, off = DASH if dashed else (bottom - top + 1, 0)
    for y in range(top, bottom + 1, on + off):
        draw.rectangle((x, y, x + width - 1, min(y + on - 1, bottom)), fill=colour)


def _mark(draw, picture: Picture, kind: str, value: float, text: str, row: int) -> None:
    """A threshold's line and its text beside it at the top, one row of text per kind; the text
    on the side with more room."""
    left, top, right, bottom = AXES
    colour, x = _rgb(MARK_COLORS[kind]), round(picture.x_of(value))
    _vertical(draw, min(x, right - 1), top, bottom, colour, DASHED[kind])
    font = _font(FONT_PX)
    y = top + round((0.03 + 0.1 * row) * (bottom - top))
    on_right = x - left < (right - left) / 2
    anchor, at = ("la", x + 4) if on_right else ("ra", x - 3)
    box = draw.textbbox((at, y), text, font=font, anchor=anchor)
    draw.rectangle((box[0] - 1, box[1] - 1, box[2] + 1, box[3] + 1), fill="white")
    draw.text((at, y), text, fill=colour, font=font, anchor=anchor)


def _legend(draw, kinds: list[str], font) -> None:
    """Each kind's line and name, right-aligned above the plotting area."""
    _, top, right, _ = AXES
    x = right
    for kind in reversed(kinds):
        width = round(draw.textlength(kind, font=font))
        draw.text((x, top - 4), kind, fill=(0, 0, 0), font=font, anchor="rs")
        x -= width + 4
        y = top - 8
        for start in range(x - 16, x, sum(DASH) if DASHED[kind] else 16):
            end = min(start + (DASH[0] if DASHED[kind] else 16), x) - 1
            draw.rectangle((start, y, end, y + 1), fill=_rgb(MARK_COLORS[kind]))
        x -= 16 + 8


def _y_label(image, text: str, font) -> None:
    """``text`` turned a quarter left, centred along the plotting area's left side."""
    from PIL import Image, ImageDraw

    _, top, _, bottom = AXES
    width = round(font.getlength(text))
    label = Image.new("RGB", (width + 2, FONT_PX + 4), "white")
    ImageDraw.Draw(label).text((1, 1), text, fill=(0, 0, 0), font=font)
    turned = label.rotate(90, expand=True)
    image.paste(turned, (4, (top + bottom - turned.height) // 2))


@functools.cache
def _palette():
    from PIL import Image

    palette = Image.new("P", (1, 1))
    palette.putpalette(palette_colours())
    return palette


def _palette_png(image) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    image.quantize(palette=_palette(), dither=Image.Dither.NONE).save(buffer, "PNG", optimize=True)
    return buffer.getvalue()


def palette_colours() -> list[int]:
    """The few colours a picture is drawn in, as flat RGB bytes: greys, the bars' grey, each
    mark's colour and its tints on white. A PNG of them is a quarter the size of a truecolour
    one (the pictures go into Dagster's event log), and keeps the lines' exact colours."""
    greys = [(round(255 * level),) * 3 for level in np.linspace(0.0, 1.0, GREYS)]
    marks = [np.array(_rgb(c), dtype=float) for c in MARK_COLORS.values()]
    tints = [tuple(round(v) for v in t * c + (1 - t) * 255) for c in marks for t in (1 / 3, 2 / 3)]
    colours = [*greys, _rgb(BAR), *(tuple(int(v) for v in c) for c in marks), *tints]
    return [channel for colour in colours for channel in colour]


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
        picture = rule_picture(key, counts, drawn)
        shown = "; ".join(f"{kind} {' '.join(t) or 'none'}" for kind, t in drawn.items())
        low, high = picture.x_range
        caption = f"{int(counts.sum()):,} documents; {low:.4g} to {high:.4g}; {shown}"
        yield key, caption, "data:image/png;base64," + base64.b64encode(png_of(picture)).decode()


def markdown(histograms: dict[str, dict], note: str = "") -> str:
    """Every rule's picture, for a Dagster metadata entry (the UI shows images in Markdown)."""
    parts = [note] if note else []
    for key, caption, uri in pictures(histograms):
        parts.append(f"**{key}** ({caption})\n\n![{key}]({uri})")
    return "\n\n".join(parts)
