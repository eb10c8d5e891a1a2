"""Gopher quality (datatrove GopherQualityFilter)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl

from tokenmill.filters.protocol import Filter
from tokenmill.filters.rules import Rule
from tokenmill.text.word_scan import (
    hash_of,
    library,
    text_totals,
    word_features_of,
    words_in,
)

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")


def _salt(number) -> np.ndarray | np.uint64:
    """A different 64-bit mask per variant number, so one set holds every variant's stop
    words."""
    with np.errstate(over="ignore"):  # wrapping is the point
        return (np.asarray(number, np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)


# What word_scan.c's word_totals counts per document, in its order.
_WORD_TOTALS = ("n_content", "content_chars", "n_alpha", "n_stop")


class GopherQualityFilter(Filter):
    """Gopher quality heuristics: document length, word length, symbols, bullets, ellipses,
    alphabetic words and stop words. Word counts exclude punctuation-only tokens."""

    name = "gopher_quality"
    description = "Gopher quality filter"
    uses_word_features = True
    settings = {
        "min_doc_words": "Fewer words (punctuation-only tokens not counted) drop a document",
        "max_doc_words": "More words drop a document",
        "min_avg_word_length": "A shorter mean word length, in characters, drops a document",
        "max_avg_word_length": "A longer mean word length drops a document",
        "max_symbol_word_ratio": "More '#' and ellipses per word drop a document",
        "max_bullet_lines_ratio": "A larger share of lines starting with a bullet drops it",
        "max_ellipsis_lines_ratio": "A larger share of lines ending in an ellipsis drops it",
        "max_non_alpha_words_ratio": "Named as datatrove's, a minimum: a smaller share of "
        "words with a letter drops a document",
        "min_stop_words": "Fewer stop words drop a document",
        "stop_words": "The stop words; null: the, be, to, of, and, that, have, with (English)",
    }

    def __init__(
        self,
        min_doc_words: int | None = 50,
        max_doc_words: int | None = 100_000,
        min_avg_word_length: float | None = 3,
        max_avg_word_length: float | None = 10,
        max_symbol_word_ratio: float | None = 0.1,
        max_bullet_lines_ratio: float | None = 0.9,
        max_ellipsis_lines_ratio: float | None = 0.3,
        max_non_alpha_words_ratio: float | None = 0.8,
        min_stop_words: int | None = 2,
        stop_words: Iterable[str] | None = None,
    ):
        self.min_doc_words = min_doc_words
        self.max_doc_words = max_doc_words
        self.min_avg_word_length = min_avg_word_length
        self.max_avg_word_length = max_avg_word_length
        self.max_symbol_word_ratio = max_symbol_word_ratio
        self.max_bullet_lines_ratio = max_bullet_lines_ratio
        self.max_ellipsis_lines_ratio = max_ellipsis_lines_ratio
        # named like datatrove's; it is a *minimum* ratio of words with an alphabetic character
        self.max_non_alpha_words_ratio = max_non_alpha_words_ratio
        self.min_stop_words = min_stop_words
        self.stop_words = list(STOP_WORDS if stop_words is None else stop_words)

    signals = (
        "n_words",
        "n_content",
        "content_chars",
        "n_alpha",
        "n_stop",
        "n_hash",
        "n_ellipsis",
        "n_lines",
        "n_bullet_lines",
        "n_ellipsis_lines",
    )

    def measure_key(self) -> tuple:
        return (tuple(self.stop_words),)

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        text = docs["text"].fill_null("")
        n_docs = len(text)
        words = words_in(word_features_of(docs))
        totals = {name: np.zeros(n_docs, np.int64) for name in _WORD_TOTALS}
        stop_hashes = np.unique(np.array([hash_of(w) for w in self.stop_words], dtype=np.uint64))
        if library().word_totals(
            words.chars,
            words.flags,
            words.hashes,
            words.counts,
            n_docs,
            stop_hashes,
            len(stop_hashes),
            *totals.values(),
        ):
            raise MemoryError("counting words")
        return pl.DataFrame({"n_words": words.counts, **totals, **text_totals(text)})

    def measure_variants(self, docs: pl.DataFrame, variants: list[tuple]) -> pl.DataFrame:
        """Other stop words (only they change what it measures) for some rows: those rows'
        stop words counted in one pass over the words, for every variant at once."""
        stats = self.measure(docs)
        words = words_in(word_features_of(docs))
        doc = words.doc
        variant_of_doc = np.full(docs.height, -1, np.int64)
        stop_keys = []
        for number, (flt, rows) in enumerate(variants):
            variant_of_doc[rows] = number
            hashes = np.array([hash_of(w) for w in flt.stop_words], dtype=np.uint64)
            stop_keys.append(hashes ^ _salt(number))
        variant = variant_of_doc[doc]
        chosen = variant >= 0
        keys = words.hashes[chosen] ^ _salt(variant[chosen])
        found = pl.Series(keys).is_in(pl.Series(np.concatenate(stop_keys)).implode()).to_numpy()
        hits = pl.DataFrame({"doc": doc[chosen][found], "key": keys[found]}).unique()
        n_stop = stats["n_stop"].to_numpy().copy()
        in_variants = variant_of_doc >= 0
        n_stop[in_variants] = 0
        if hits.height:
            counted = hits.group_by("doc").len()
            n_stop[counted["doc"].to_numpy()] = counted["len"].to_numpy()
        return stats.with_columns(pl.Series("n_stop", n_stop, dtype=stats["n_stop"].dtype))

    def rules(self) -> list[Rule]:
        n_words = pl.col("n_words")
        n_lines = pl.col("n_lines")
        ellipsis_ratio = pl.col("n_ellipsis") / n_words
        return [
            Rule("n_words", pl.col("n_content"), "<", self.min_doc_words),
            Rule("n_words", pl.col("n_content"), ">", self.max_doc_words),
            Rule(
                "avg_word_len",
                pl.col("content_chars") / pl.col("n_content"),
                "<",
                self.min_avg_word_length,
            ),
            Rule(
                "avg_word_len",
                pl.col("content_chars") / pl.col("n_content"),
                ">",
                self.max_avg_word_length,
            ),
            Rule("hash_word_ratio", pl.col("n_hash") / n_words, ">", self.max_symbol_word_ratio),
            Rule("ellipsis_word_ratio", ellipsis_ratio, ">", self.max_symbol_word_ratio),
            Rule(
                "bullet_lines_ratio",
                pl.col("n_bullet_lines") / n_lines,
                ">",
                self.max_bullet_lines_ratio,
            ),
            Rule(
                "ellipsis_lines_ratio",
                pl.col("n_ellipsis_lines") / n_lines,
                ">",
                self.max_ellipsis_lines_ratio,
            ),
            Rule(
                "alpha_words_ratio",
                pl.col("n_alpha") / n_words,
                "<",
                self.max_non_alpha_words_ratio,
            ),
            Rule("stop_words", pl.col("n_stop"), "<", self.min_stop_words),
        ]
