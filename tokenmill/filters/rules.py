"""Threshold rules and the drop reason of the first one a document fails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import polars as pl


class Rule(NamedTuple):
    label: str
    value: pl.Expr
    op: str  # drop when value `op` threshold
    threshold: float | None


def active(rules: Sequence[Rule]) -> list[Rule]:
    """The rules that judge: None / 0 / False disable a rule, as in datatrove."""
    return [rule for rule in rules if rule.threshold]


def failures(values: np.ndarray, rules: Sequence[Rule]) -> np.ndarray:
    """(documents x rules) whether each document fails each rule, from its rule values (NaN,
    null's stand-in, fails none)."""
    thresholds = np.array([rule.threshold for rule in rules], dtype=np.float64)
    above = np.array([rule.op == ">" for rule in rules])
    with np.errstate(invalid="ignore"):
        return np.where(above, values > thresholds, values < thresholds)


def rule_values(stats: pl.DataFrame, rules: Sequence[Rule], *extra: pl.Expr) -> pl.DataFrame:
    """Each rule's value per document as float columns ``0, 1, ...`` (NaN for null), then
    ``extra`` (boolean or text columns judged beside them), in one query."""
    values = [
        rule.value.cast(pl.Float64).fill_null(np.nan).alias(str(i)) for i, rule in enumerate(rules)
    ]
    return stats.select(*values, *extra)


def rule_reasons(
    stats: pl.DataFrame, rules: Sequence[Rule], empty: pl.Expr | None = None
) -> pl.Series:
    """Per document, ``"<label>=<value><op><threshold>"`` of the first rule it fails, in order
    (null if it fails none), or ``"empty"`` where ``empty``. The messages are formatted for the
    failing documents only: most documents pass, and formatting every value is most of a
    polars ``when/then`` judgement's cost."""
    rules = active(rules)
    flags = [] if empty is None else [empty.fill_null(False).cast(pl.Float64)]
    values = rule_values(stats, rules, *flags).to_numpy() if rules or flags else None
    reasons = np.full(stats.height, None, dtype=object)
    if rules:
        fails = failures(values[:, : len(rules)], rules)
        rows = np.flatnonzero(fails.any(axis=1))
        first = fails[rows].argmax(axis=1)
        shown = pl.Series(values[rows, first], dtype=pl.Float64).round(4).cast(pl.Utf8).to_list()
        reasons[rows] = [
            f"{rules[j].label}={text}{rules[j].op}{rules[j].threshold}"
            for j, text in zip(first.tolist(), shown, strict=True)
        ]
    if flags:
        reasons[values[:, -1] == 1] = "empty"
    return pl.Series("reason", reasons.tolist(), dtype=pl.Utf8)
