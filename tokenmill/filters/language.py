"""Language filter: drops documents whose identified language (the ``language`` and
``language_score`` columns) is not wanted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from tokenmill.filters.protocol import Filter


class LanguageFilter(Filter):
    name = "language"
    reads_text = False

    def __init__(
        self,
        keep: Sequence[str] = ("en",),
        min_score: float = 0.65,
        min_scores: Mapping[str, float] | None = None,
    ):
        self.keep = list(keep)
        self.min_score = min_score
        self.min_scores = dict(min_scores or {})  # a language's own, over min_score

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        language, score = pl.col("language"), pl.col("language_score")
        wrong = language.is_in(self.keep).not_() if self.keep else pl.lit(False)
        minimum, shown = pl.lit(self.min_score), pl.lit(self.min_score)
        if self.min_scores:
            labels = pl.Series(list(self.min_scores), dtype=pl.String)
            scores = list(self.min_scores.values())
            minimum = language.replace_strict(
                labels, pl.Series(scores, dtype=pl.Float64), default=self.min_score
            )
            shown = language.replace_strict(
                labels, pl.Series(map(str, scores), dtype=pl.String), default=str(self.min_score)
            )
        reason = (
            pl.when(wrong)
            .then(pl.format("language={}", language))
            .when(score < minimum)
            .then(pl.format("language_score={}<{}", score.round(3), shown))
        )
        return docs.select(reason.cast(pl.String).alias("reason")).to_series()
