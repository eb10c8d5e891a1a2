"""Threshold rules and the drop reason of the first one a document fails (a rule whose
threshold is None / 0 / False is off, as in datatrove)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import polars as pl


class ByLanguage(NamedTuple):
    """A threshold per document, by its ``language`` column: ``thresholds`` for the labels
    named, ``default`` for the others (None or 0: the rule is off for them)."""

    thresholds: dict[str, float | None]
    default: float | None

    def of(self, label: str | None) -> float | None:
        return self.thresholds.get(label, self.default)


def _number(threshold: float | None) -> float:
    """A threshold as compared: NaN where the rule is off (NaN fails no comparison)."""
    return float(threshold) if threshold else np.nan


class Rule(NamedTuple):
    label: str
    value: pl.Expr
    op: str  # drop when value `op` threshold: "<", ">" or ">="
    threshold: float | None | ByLanguage
    reason: str | None = None  # the drop reason, when not "<label>=<value><op><threshold>"


OPS = {"<": np.less, ">": np.greater, ">=": np.greater_equal}


def failures(values: np.ndarray, rules: Sequence[Rule], thresholds: Sequence = ()) -> np.ndarray:
    """(documents x rules) whether each document fails each rule, from its rule values (NaN,
    null's stand-in, fails none); ``thresholds``: each rule's, a number or one per document
    (default: the rules' own)."""
    thresholds = thresholds or [rule.threshold for rule in rules]
    fails = np.zeros(values.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        for j, rule in enumerate(rules):
            fails[:, j] = OPS[rule.op](values[:, j], thresholds[j])
    return fails


def _on(rule: Rule) -> bool:
    return isinstance(rule.threshold, ByLanguage) or bool(rule.threshold)


class Judgement(NamedTuple):
    """How a filter judges its signals: its rules in order, documents that are ``empty`` (a
    boolean expression) whatever the rules, and a ``fatal`` column whose value, where set, is
    the reason before any rule's."""

    rules: list[Rule]
    empty: pl.Expr | None = None
    fatal: str | None = None


class Judged(NamedTuple):
    values: np.ndarray  # (documents x rules) every rule's value, NaN for null
    reasons: pl.Series  # null where a document passes


def judging(stats: pl.LazyFrame, judgement: Judgement) -> pl.LazyFrame:
    """The query ``judged_from`` reads: each rule's value as float columns ``0, 1, ...``
    (NaN for null), then ``empty`` (1.0 where empty) and ``fatal`` if the judgement has them."""
    columns = [
        rule.value.cast(pl.Float64).fill_null(np.nan).alias(str(i))
        for i, rule in enumerate(judgement.rules)
    ]
    if judgement.empty is not None:
        columns.append(judgement.empty.fill_null(False).cast(pl.Float64).alias("empty"))
    if judgement.fatal is not None:
        columns.append(pl.col(judgement.fatal).alias("fatal"))
    if any(isinstance(rule.threshold, ByLanguage) for rule in judgement.rules):
        columns.append(pl.col("language").cast(pl.String).alias(_LANGUAGE))
    return stats.select(columns or [pl.lit(0)])  # no column at all: nothing to read


_LANGUAGE = "language of the document"  # judging's column for thresholds by language


def judged_from(frame: pl.DataFrame, judgement: Judgement, documents: int) -> Judged:
    """Per document, every rule's value and ``"<label>=<value><op><threshold>"`` of the first
    rule it fails, in order (null if it fails none), from ``judging``'s result. The messages
    are formatted for the failing documents only: most documents pass, and formatting every
    value is most of a polars ``when/then`` judgement's cost."""
    rules = judgement.rules
    numeric = len(rules) + (judgement.empty is not None)
    matrix = frame[:, :numeric].to_numpy() if numeric else np.empty((documents, 0))
    values = matrix[:, : len(rules)]
    reasons = np.full(documents, None, dtype=object)
    if on := [i for i, rule in enumerate(rules) if _on(rule)]:
        judging_rules = [rules[i] for i in on]
        labels, inverse = _languages(frame, judging_rules)
        thresholds = [
            np.array([_number(rule.threshold.of(label)) for label in labels])[inverse]
            if isinstance(rule.threshold, ByLanguage)
            else rule.threshold
            for rule in judging_rules
        ]
        fails = failures(values[:, on], judging_rules, thresholds)
        rows = np.flatnonzero(fails.any(axis=1))
        first = fails[rows].argmax(axis=1)
        shown = pl.Series(values[:, on][rows, first], dtype=pl.Float64).round(4).cast(pl.Utf8)
        reasons[rows] = [
            judging_rules[j].reason
            or f"{judging_rules[j].label}={text}{judging_rules[j].op}"
            + _threshold_text(judging_rules[j].threshold, labels, inverse, row)
            for row, j, text in zip(rows.tolist(), first.tolist(), shown.to_list(), strict=True)
        ]
    if judgement.empty is not None:
        reasons[matrix[:, -1] == 1] = "empty"
    found = pl.Series("reason", reasons.tolist(), dtype=pl.Utf8)
    if judgement.fatal is not None:
        found = frame["fatal"].fill_null(found).alias("reason")
    return Judged(values, found)


def _languages(frame: pl.DataFrame, rules: Sequence[Rule]) -> tuple[list, np.ndarray | None]:
    """The batch's distinct languages and each document's index among them, when a rule's
    thresholds go by language."""
    if not any(isinstance(rule.threshold, ByLanguage) for rule in rules):
        return [], None
    labels, inverse = np.unique(frame[_LANGUAGE].fill_null("").to_numpy(), return_inverse=True)
    return labels.tolist(), inverse


def _threshold_text(threshold, labels: list, inverse, row: int) -> str:
    if isinstance(threshold, ByLanguage):
        return str(threshold.of(labels[inverse[row]]))
    return str(threshold)


def judged(stats: pl.DataFrame, judgement: Judgement) -> Judged:
    return judged_from(judging(stats.lazy(), judgement).collect(), judgement, stats.height)


def rule_reasons(
    stats: pl.DataFrame, rules: Sequence[Rule], empty: pl.Expr | None = None
) -> pl.Series:
    return judged(stats, Judgement(list(rules), empty)).reasons
