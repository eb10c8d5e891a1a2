"""Threshold rules and the drop reason of the first one a document fails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import polars as pl


class Rule(NamedTuple):
    label: str
    value: pl.Expr
    op: str  # drop when value `op` threshold
    threshold: float | None


def first_failing(rules: Sequence[Rule]) -> pl.Expr:
    """Reason of the first rule that fails, in order (null if all pass or are disabled)."""
    reasons = []
    for rule in rules:
        if not rule.threshold:  # None / 0 / False disable a rule, as in datatrove
            continue
        value = rule.value.fill_nan(None).cast(pl.Float64)
        fails = value > rule.threshold if rule.op == ">" else value < rule.threshold
        shown = value.round(4).cast(pl.Utf8)
        message = pl.concat_str(
            pl.lit(f"{rule.label}="), shown, pl.lit(f"{rule.op}{rule.threshold}")
        )
        reasons.append(pl.when(fails.fill_null(False)).then(message))
    return pl.coalesce(reasons) if reasons else pl.lit(None, pl.Utf8)


def rule_reasons(
    stats: pl.DataFrame, rules: Sequence[Rule], empty: pl.Expr | None = None
) -> pl.Series:
    reason = first_failing(rules)
    if empty is not None:
        reason = pl.when(empty).then(pl.lit("empty")).otherwise(reason)
    return stats.select(reason.alias("reason")).to_series()
