"""Language filter: drops documents whose identified language (the ``language`` and
``language_score`` columns) is not wanted."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from tokenmill.filters.protocol import Filter


class LanguageFilter(Filter):
    name = "language"
    reads_text = False

    def __init__(self, keep: Sequence[str] = ("en",), min_score: float = 0.65):
        self.keep = list(keep)
        self.min_score = min_score

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        language, score = pl.col("language"), pl.col("language_score")
        wrong = language.is_in(self.keep).not_() if self.keep else pl.lit(False)
        reason = (
            pl.when(wrong)
            .then(pl.format("language={}", language))
            .when(score < self.min_score)
            .then(pl.format("language_score={}<{}", score.round(3), pl.lit(self.min_score)))
        )
        return docs.select(reason.cast(pl.String).alias("reason")).to_series()
