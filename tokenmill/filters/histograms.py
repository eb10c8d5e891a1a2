"""Distributions of the filters' rule values as histograms that add up.

Every histogram has the same bins, so a unit's histograms are the sums of its files' and a
crawl's the sums of its units': 100 bins 0.01 wide over [0, 1] (the ratios), then 10 bins per
decade from 1 to 10^7 (counts and lengths); values outside fall in the first or last bin. A
rule's histogram is kept as ``{"bins": {index: count}, "thresholds": ["<50", ...]}`` under
``<filter>/<rule>``: nested counts that `tokenmill.storage.outputs.merge_counts` sums (the
thresholds, not numbers, are kept from the first). `tokenmill.reports.plots` draws them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl

from tokenmill.storage.outputs import merge_counts, read_markers

LINEAR_BINS = 100
BINS_PER_DECADE = 10
DECADES = 7
BINS = LINEAR_BINS + BINS_PER_DECADE * DECADES
THRESHOLDS = "thresholds"


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


def gathered(
    lake, prefixes: Iterable[str], counts: tuple[str, ...] = ()
) -> tuple[dict[str, dict], int, dict]:
    """The sum of the histograms in these partitions' markers, how many had none (absent, or
    written before histograms were kept), and the sums of the named ``counts`` of their
    reports."""
    total: dict[str, dict] = {}
    summed: dict = {}
    without = 0
    for found in read_markers(lake, prefixes):
        if found is None or found.get("histograms") is None:
            without += 1
        else:
            total = merge_counts(total, found["histograms"])
        own = (found or {}).get("counts", {})
        summed = merge_counts(summed, {name: own[name] for name in counts if name in own})
    return total, without, summed


def counts_of(histogram: dict) -> np.ndarray:
    counts = np.zeros(BINS, dtype=np.int64)
    for index, count in histogram["bins"].items():
        counts[int(index)] = count
    return counts


def threshold_values(thresholds: Iterable[str]) -> list[float]:
    return [float(t.lstrip("<>=")) for t in thresholds]


def rule_thresholds(chain) -> dict[str, list[str]]:
    """Each rule's thresholds in the chain (`<filter>/<rule>`: ["<50", ">100000"])."""
    thresholds: dict[str, list[str]] = {}
    for flt in chain.filters:
        for rule in flt.rules():
            listed = thresholds.setdefault(f"{flt.name}/{rule.label}", [])
            if rule.threshold:
                listed.append(f"{rule.op}{rule.threshold}")
    return thresholds
