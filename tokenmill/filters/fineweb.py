"""FineWeb quality (datatrove FineWebQualityFilter)."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from tokenmill.filters.protocol import Filter
from tokenmill.filters.rules import Judgement, Rule
from tokenmill.text.segmentation import TERMINAL_PUNCTUATION
from tokenmill.text.word_scan import fineweb_line_counts, word_counts_of


class FineWebQualityFilter(Filter):
    """FineWeb's own rules on non-blank lines (split on "\\n" only, not stripped): share of lines
    ending in terminal punctuation, share of short lines, characters in repeated lines and
    newlines per word."""

    name = "fineweb_quality"
    description = "FineWeb quality filter"
    settings = {
        "line_punct_thr": "Smallest share of lines ending in terminal punctuation",
        "line_punct_exclude_zero": "Keep documents where no line ends so (FineWeb: no)",
        "short_line_thr": "Largest share of short lines",
        "short_line_length": "Lines of at most this many characters are short",
        "char_duplicates_ratio": "Largest share of characters in repeated lines",
        "new_line_ratio": "Largest number of newlines per word",
        "stop_chars": "Characters that end a line as terminal punctuation; null: FineWeb's",
    }
    unbounded = ("new_line_ratio",)

    def __init__(
        self,
        line_punct_thr: float | None = 0.12,
        line_punct_exclude_zero: bool = False,
        short_line_thr: float | None = 0.67,
        short_line_length: int = 30,
        char_duplicates_ratio: float | None = 0.01,
        new_line_ratio: float | None = 0.3,
        stop_chars: Iterable[str] | None = None,
    ):
        self.line_punct_thr = line_punct_thr
        self.line_punct_exclude_zero = line_punct_exclude_zero
        self.short_line_thr = short_line_thr
        self.short_line_length = short_line_length
        self.char_duplicates_ratio = char_duplicates_ratio
        self.new_line_ratio = new_line_ratio
        self.stop_chars = tuple(sorted(TERMINAL_PUNCTUATION if stop_chars is None else stop_chars))

    signals = (
        "n_lines",
        "n_punct",
        "n_short",
        "dup_chars",
        "chars_without_newlines",
        "n_newlines",
        "n_words",
    )

    def measure_key(self) -> tuple:
        return (self.short_line_length, self.stop_chars)

    def judgement(self) -> Judgement:
        return Judgement(self.rules(), empty=pl.col("n_lines") == 0)

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        text = docs["text"].fill_null("")
        n_newlines = text.str.count_matches("\n", literal=True)
        lines = fineweb_line_counts(text, self.stop_chars, self.short_line_length)
        return pl.DataFrame(
            {
                **lines,
                "chars_without_newlines": text.str.len_chars() - n_newlines,
                "n_newlines": n_newlines,
                "n_words": word_counts_of(docs),
            }
        )

    def rules(self) -> list[Rule]:
        punct_ratio = pl.col("n_punct") / pl.col("n_lines")
        if self.line_punct_exclude_zero:
            punct_ratio = pl.when(punct_ratio == 0).then(None).otherwise(punct_ratio)
        return [
            Rule("line_punct_ratio", punct_ratio, "<", self.line_punct_thr),
            Rule(
                "short_line_ratio", pl.col("n_short") / pl.col("n_lines"), ">", self.short_line_thr
            ),
            Rule(
                "char_dup_ratio",
                pl.col("dup_chars") / pl.col("chars_without_newlines"),
                ">",
                self.char_duplicates_ratio,
            ),
            Rule(
                "newline_ratio", pl.col("n_newlines") / pl.col("n_words"), ">", self.new_line_ratio
            ),
        ]
