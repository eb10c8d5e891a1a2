"""Classifier filter: keeps documents by the scores the `scored` stage stored (columns
``<classifier>.<label>`` beside the signals), against an absolute minimum (``min``) or the top
share of their crawl (``keep_top``, DCLM's rule: the threshold is read from the crawl's score
distribution, the same for every unit). Rules combine as ``all`` (every rule passes) or ``any``
(the best of them: kept when one passes, as Nemotron-CC's ensemble keeps a document by its best
classifier's percentile).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from tokenmill.classifiers.scoring import TopShare, score_bins, score_column, short_label
from tokenmill.filters.protocol import Filter

COMBINES = ("all", "any")


@dataclass(frozen=True)
class ScoreRule:
    classifier: str
    label: str
    min: float | None = None
    keep_top: float | None = None

    KEYS = ("classifier", "label", "min", "keep_top")

    @classmethod
    def parse(cls, value: Any, where: str) -> ScoreRule:
        if isinstance(value, ScoreRule):
            return value
        if hasattr(value, "model_dump"):  # a run's config
            value = {k: v for k, v in value.model_dump().items() if v is not None}
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping with classifier and min or keep_top")
        unknown = sorted(set(value) - set(cls.KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}; keys: {list(cls.KEYS)}")
        if not value.get("classifier"):
            raise ValueError(f"{where}: no classifier named")
        if not value.get("label"):
            raise ValueError(f"{where}: no label named (the label whose probability is judged)")
        low, top = value.get("min"), value.get("keep_top")
        if (low is None) == (top is None):
            raise ValueError(f"{where}: give either min (a probability) or keep_top (a share)")
        for key, number in (("min", low), ("keep_top", top)):
            if number is not None and (
                not isinstance(number, int | float) or isinstance(number, bool)
            ):
                raise ValueError(f"{where}: {key} must be a number, not {number!r}")
        if low is not None and not 0 <= low <= 1:
            raise ValueError(f"{where}: min {low} is not a probability in [0, 1]")
        if top is not None and not 0 < top <= 1:
            raise ValueError(f"{where}: keep_top {top} is not a share in (0, 1]")
        return cls(
            str(value["classifier"]),
            short_label(str(value["label"])),
            None if low is None else float(low),
            None if top is None else float(top),
        )

    @property
    def column(self) -> str:
        return score_column(self.classifier, self.label)


# (crawl, rule) -> where the crawl's top share starts
CutFinder = Callable[[str, ScoreRule], TopShare]


class ClassifierFilter(Filter):
    name = "classifiers"
    reads_text = False

    def __init__(self, rules: Sequence[ScoreRule], combine: str = "all", cuts: CutFinder = None):
        if combine not in COMBINES:
            raise ValueError(f"classifier_combine must be one of {COMBINES}, not {combine!r}")
        self.score_rules = list(rules)
        self.combine = combine
        self.find_cut = cuts
        self.cuts: dict[tuple[str, str], TopShare] = {}  # (crawl, column) -> the cut used

    @property
    def columns(self) -> list[str]:
        return sorted({rule.column for rule in self.score_rules})

    def cut(self, crawl: str, rule: ScoreRule) -> TopShare:
        key = (crawl, rule.column)
        if key not in self.cuts:
            if self.find_cut is None:
                raise ValueError(f"{rule.column} keep_top: no crawl score distribution to cut")
            self.cuts[key] = self.find_cut(crawl, rule)
        return self.cuts[key]

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        failures = [self._failure(docs, rule) for rule in self.score_rules]
        if self.combine == "all":
            reason = pl.coalesce(failures)
        else:  # dropped only when every rule fails: the first one's reason
            reason = pl.when(pl.all_horizontal(f.is_not_null() for f in failures)).then(failures[0])
        return docs.select(reason.cast(pl.String).alias("reason")).to_series()

    def _failure(self, docs: pl.DataFrame, rule: ScoreRule) -> pl.Expr:
        score = pl.col(rule.column)
        shown = pl.concat_str(pl.lit(f"{rule.column}="), score.round(4).cast(pl.String))
        if rule.min is not None:
            fails = score < rule.min
            message = pl.concat_str(shown, pl.lit(f"<{rule.min}"))
        else:
            bins = score_bins(docs[rule.column].fill_null(0.0).to_numpy())
            doc_ids = docs["doc_id"].to_list()
            kept = np.zeros(docs.height, dtype=bool)
            crawls = docs["crawl"].to_numpy()
            for crawl in set(crawls.tolist()):
                rows = np.flatnonzero(crawls == crawl)
                cut = self.cut(crawl, rule)
                kept[rows] = cut.keeps(bins[rows], [doc_ids[i] for i in rows])
            fails = ~pl.lit(pl.Series(kept))
            message = pl.concat_str(shown, pl.lit(f" below the crawl's top {rule.keep_top}"))
        return (
            pl.when(score.is_null()).then(pl.lit(f"{rule.column}=null")).when(fails).then(message)
        )
