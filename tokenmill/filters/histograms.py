"""Distributions of the filters' rule values as histograms that add up, and their pictures.

Every histogram has the same bins, so a unit's histograms are the sums of its files' and a
crawl's the sums of its units': 100 bins 0.01 wide over [0, 1] (the ratios), then 10 bins per
decade from 1 to 10^7 (counts and lengths); values outside fall in the first or last bin. A
rule's histogram is kept as ``{"bins": {index: count}, "thresholds": ["<50", ...]}`` under
``<filter>/<rule>``: nested counts that `tokenmill.storage.outputs.merge_counts` sums (the
thresholds, not numbers, are kept from the first). Pictures are PNG files drawn here, without a
plotting library: grey bars, a vertical line per threshold.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

from tokenmill.storage.outputs import merge_counts

LINEAR_BINS = 100
BINS_PER_DECADE = 10
DECADES = 7
BINS = LINEAR_BINS + BINS_PER_DECADE * DECADES
THRESHOLDS = "thresholds"

BAR = (150, 150, 150)
BACKGROUND = (255, 255, 255)
MARK_COLORS = {"current": (31, 119, 180), "proposed": (214, 39, 40)}
WIDTH, HEIGHT = 480, 90  # at most, and at least 2 pixels a bin


def bin_of(values: np.ndarray) -> np.ndarray:
    values = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0, posinf=1e300)
    linear = np.clip(values, 0.0, 1.0) * LINEAR_BINS
    above = LINEAR_BINS + np.log10(np.maximum(values, 1.0)) * BINS_PER_DECADE
    position = np.where(values <= 1.0, np.minimum(linear, LINEAR_BINS - 1), above)
    return np.clip(position.astype(np.int64), 0, BINS - 1)


def position_of(value: float) -> float:
    """Where `value` falls on the bin axis, in bins (a threshold line's place)."""
    if value <= 1.0:
        return max(value, 0.0) * LINEAR_BINS
    return min(LINEAR_BINS + np.log10(value) * BINS_PER_DECADE, BINS)


def lower_edge(index: int) -> float:
    if index < LINEAR_BINS:
        return index / LINEAR_BINS
    return 10 ** ((index - LINEAR_BINS) / BINS_PER_DECADE)


def rule_histograms(docs: pl.DataFrame, chain, judged: dict | None = None) -> dict[str, dict]:
    """The histogram of each rule's value over `docs`, for the chain's filters judged from
    stored signals (`<filter>.<signal>` columns); a rule's thresholds as the chain sets them.
    ``judged``: ``chain.judge_stored(docs)``, when the caller has it already."""
    judged = chain.judge_stored(docs) if judged is None else judged
    thresholds = rule_thresholds(chain)
    columns, keys = [], []  # one picture per label: n_words has two thresholds
    for flt in chain.filters:
        if flt.name not in chain.stored:
            continue
        values = judged[flt.name].values
        for i, rule in enumerate(flt.judgement().rules):
            key = f"{flt.name}/{rule.label}"
            if key not in keys:
                keys.append(key)
                columns.append(values[:, i])
    if not keys:
        return {}
    values = np.column_stack(columns)  # (documents x rules): a bin per value, NaN in none
    present = ~np.isnan(values)
    offsets = np.arange(values.shape[1]) * BINS
    cells = (bin_of(np.where(present, values, 0.0)) + offsets)[present]
    counts = np.bincount(cells, minlength=BINS * len(keys)).reshape(len(keys), BINS)
    return {
        key: {
            "bins": {str(i): int(row[i]) for i in np.flatnonzero(row)},
            THRESHOLDS: thresholds[key],
        }
        for key, row in zip(keys, counts, strict=True)
    }


def gathered(lake, markers: Iterable[str], threads: int = 16) -> tuple[dict[str, dict], int]:
    """The sum of the histograms in these markers (read in parallel: a crawl has hundreds of
    units) and how many had none (absent, or written before histograms were kept)."""

    def histograms_in(marker: str) -> dict | None:
        try:
            return lake.read_json(marker).get("histograms")
        except FileNotFoundError:
            return None

    total: dict[str, dict] = {}
    without = 0
    with ThreadPoolExecutor(threads) as pool:
        for histograms in pool.map(histograms_in, markers):
            if histograms is None:
                without += 1
            else:
                total = merge_counts(total, histograms)
    return total, without


def counts_of(histogram: dict) -> np.ndarray:
    counts = np.zeros(BINS, dtype=np.int64)
    for index, count in histogram["bins"].items():
        counts[int(index)] = count
    return counts


def threshold_values(thresholds: Iterable[str]) -> list[float]:
    return [float(t.lstrip("<>=")) for t in thresholds]


def png(counts: np.ndarray, marks: dict[str, list[float]]) -> tuple[bytes, float, float]:
    """A bar chart of `counts` over the bins from the first to the last non-empty one (and any
    mark), with a line at each mark (`marks`: color name → values); the picture and the range
    of values it shows."""
    used = np.flatnonzero(counts)
    ends = [int(position_of(v)) for values in marks.values() for v in values]
    if used.size:
        ends += [int(used[0]), int(used[-1])]
    first = max(0, min(ends, default=0))
    last = min(BINS - 1, max(ends, default=0))
    shown = counts[first : last + 1]
    step = max(2, min(8, WIDTH // len(shown)))  # pixels per bin
    width = len(shown) * step
    image = np.full((HEIGHT, width, 3), BACKGROUND, dtype=np.uint8)
    top = max(int(shown.max()), 1)
    for i, count in enumerate(shown):
        bar = int(round(count / top * (HEIGHT - 2)))
        if bar:
            image[HEIGHT - bar :, i * step : (i + 1) * step - 1] = BAR
    for color, values in marks.items():
        for value in values:
            x = int(round((position_of(value) - first) * step))
            x = max(0, min(width - 2, x - 1))
            image[:, x : x + 2] = MARK_COLORS[color]
    return encode_png(image), lower_edge(first), lower_edge(last + 1)


def encode_png(image: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of an (height, width, 3) array."""
    height, width, _ = image.shape
    rows = b"".join(b"\x00" + row.tobytes() for row in image)

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


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
        drawn = {name: thresholds.get(key, []) for name, thresholds in marks.items()}
        image, low, high = png(counts, {n: threshold_values(t) for n, t in drawn.items()})
        shown = "; ".join(f"{name} {' '.join(t) or 'none'}" for name, t in drawn.items())
        caption = f"{int(counts.sum()):,} documents; {low:.4g} to {high:.4g}; {shown}"
        yield key, caption, "data:image/png;base64," + base64.b64encode(image).decode()


def rule_thresholds(chain) -> dict[str, list[str]]:
    """Each rule's thresholds in the chain (`<filter>/<rule>`: ["<50", ">100000"])."""
    thresholds: dict[str, list[str]] = {}
    for flt in chain.filters:
        for rule in flt.rules():
            listed = thresholds.setdefault(f"{flt.name}/{rule.label}", [])
            if rule.threshold:
                listed.append(f"{rule.op}{rule.threshold}")
    return thresholds


def markdown(histograms: dict[str, dict], note: str = "") -> str:
    """Every rule's picture, for a Dagster metadata entry (the UI shows images in Markdown)."""
    parts = [note] if note else []
    for key, caption, uri in pictures(histograms):
        parts.append(f"**{key}** ({caption})\n\n![{key}]({uri})")
    return "\n\n".join(parts)
