"""Gopher repetition (datatrove GopherRepetitionFilter)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from tokenmill.filters.protocol import Filter
from tokenmill.filters.rules import Judgement, Rule, judged, rule_reasons
from tokenmill.text.segmentation import rows_by_scale, scaled
from tokenmill.text.word_scan import (
    Words,
    element_duplicates,
    library,
    word_features_of,
    words_in,
)


def ngram_stats(
    words: Words,
    chars: np.ndarray,
    top_limits: dict[int, float],
    dup_limits: dict[int, float],
    exact_above: dict[int, float],
    stop: bool,
) -> dict[str, np.ndarray]:
    """Per text of ``words`` (``chars`` characters, at least 1): ``top_<n>``, the characters of
    its most frequent n-gram (joined by spaces; the first seen among equals, datatrove's
    ``Counter.most_common``) times its count, and ``dup_<n>``, the characters of the words in
    n-grams repeating an earlier one: exact (datatrove's greedy ``find_all_duplicate``) where
    their share of ``chars`` is above ``exact_above[n]``, an upper bound below. With ``stop``, a
    text that passes a limit (a limit of 0 or None: none) is left at 0 once every rule before
    that one (tops, then dups, in order) is known: later rules cannot change its reason.
    Compiled (word_scan.c), a text at a time: its hash tables stay in the CPU cache."""
    tops, dups = list(top_limits), list(dup_limits)
    top = np.zeros((len(chars), len(tops)), dtype=np.int64)
    dup = np.zeros((len(chars), len(dups)), dtype=np.int64)

    def limits(sizes, found: dict[int, float]) -> np.ndarray:  # a limit of 0 or None: none
        return np.array([found[n] or np.inf for n in sizes], dtype=np.float64)

    if library().ngram_stats(
        words.hashes,
        words.chars,
        words.counts,
        np.ascontiguousarray(chars, dtype=np.float64),
        len(chars),
        np.array(tops, dtype=np.int64),
        limits(tops, top_limits),
        len(tops),
        np.array(dups, dtype=np.int64),
        np.array([exact_above[n] or 0.0 for n in dups], dtype=np.float64),
        limits(dups, dup_limits),
        len(dups),
        stop,
        top,
        dup,
    ):
        raise MemoryError("counting n-grams")
    return {
        **{f"top_{n}": top[:, i] for i, n in enumerate(tops)},
        **{f"dup_{n}": dup[:, i] for i, n in enumerate(dups)},
    }


class GopherRepetitionFilter(Filter):
    """Gopher (Rae et al. 2021, table A1) repetition rules, as in datatrove.

    Paragraphs split on 2+ newlines (after strip), lines on 1+ newlines; fractions of repeated
    elements and of their characters over len(text); the most frequent 2/3/4-gram's characters
    and the characters in repeated 5..10-grams over len(text).
    """

    name = "gopher_repetition"
    description = "Gopher repetition filter"
    uses_word_features = True
    settings = {
        "dup_line_frac": "Largest share of lines that repeat an earlier line",
        "dup_para_frac": "Largest share of paragraphs that repeat an earlier paragraph",
        "dup_line_char_frac": "Largest share of characters in repeated lines",
        "dup_para_char_frac": "Largest share of characters in repeated paragraphs",
        "top_n_grams": "[n, limit] pairs: largest share of characters in the most frequent n-gram",
        "dup_n_grams": "[n, limit] pairs: largest share of characters in repeated n-grams",
    }
    # overlapping n-grams: the most frequent one's characters times its count can pass the
    # text's length
    unbounded = ("top_n_grams",)

    def __init__(
        self,
        dup_line_frac: float | None = 0.3,
        dup_para_frac: float | None = 0.3,
        dup_line_char_frac: float | None = 0.2,
        dup_para_char_frac: float | None = 0.2,
        top_n_grams: Sequence[tuple[int, float]] = ((2, 0.2), (3, 0.18), (4, 0.16)),
        dup_n_grams: Sequence[tuple[int, float]] = (
            (5, 0.15),
            (6, 0.14),
            (7, 0.13),
            (8, 0.12),
            (9, 0.11),
            (10, 0.10),
        ),
    ):
        self.dup_line_frac = dup_line_frac
        self.dup_para_frac = dup_para_frac
        self.dup_line_char_frac = dup_line_char_frac
        self.dup_para_char_frac = dup_para_char_frac
        self.top_n_grams = tuple((int(n), float(t)) for n, t in top_n_grams)
        self.dup_n_grams = tuple((int(n), float(t)) for n, t in dup_n_grams)

    # Stored signals (`measure`) hold the exact repeated n-gram characters of a document only
    # where they exceed this share of its text (an upper bound elsewhere): exact for every
    # threshold at or above it, which covers FineWeb's and a stricter recipe's.
    exact_dup_above = 0.05

    @property
    def signals(self) -> tuple[str, ...]:
        lines = [
            f"{kind}_{stat}" for kind in ("para", "line") for stat in ("n", "dup", "dup_chars")
        ]
        return ("chars", *lines, *self._ngram_columns())

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        stats = self._element_stats(docs)
        failed = rule_reasons(stats, self.rules()[:4]).is_not_null().to_numpy()
        ngrams = self._ngram_stats(docs, stats["chars"], failed, dict(self.dup_n_grams), stop=True)
        return judged(stats.with_columns(**ngrams), self.judgement()).reasons

    def measure_key(self) -> tuple:
        return (tuple(n for n, _ in self.top_n_grams), tuple(n for n, _ in self.dup_n_grams))

    def fits(self, measured_by) -> bool:
        """Signals another instance measured serve this one when they count the same n-grams
        and this one's repeated n-gram limits are ones they are exact at."""
        return (
            type(measured_by) is type(self)
            and self.measure_key() == measured_by.measure_key()
            and all(not t or t >= measured_by.exact_dup_above for _, t in self.dup_n_grams)
        )

    def judgement(self) -> Judgement:
        return Judgement(self.rules(), empty=pl.col("chars") == 0)

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        """Every statistic of every document, whatever the thresholds (see exact_dup_above)."""
        stats = self._element_stats(docs)
        exact_above = {n: self.exact_dup_above for n, _ in self.dup_n_grams}
        nothing_failed = np.zeros(stats.height, dtype=bool)
        ngrams = self._ngram_stats(docs, stats["chars"], nothing_failed, exact_above, stop=False)
        return stats.with_columns(**ngrams)

    def _element_stats(self, docs: pl.DataFrame) -> pl.DataFrame:
        text = docs["text"].fill_null("")
        return pl.DataFrame({"chars": text.str.len_chars(), **element_duplicates(text)})

    def _ngram_columns(self) -> list[str]:
        return [f"top_{n}" for n, _ in self.top_n_grams] + [f"dup_{n}" for n, _ in self.dup_n_grams]

    def _ngram_stats(
        self,
        docs: pl.DataFrame,
        chars: pl.Series,
        failed: np.ndarray,
        exact_above: dict[int, float],
        stop: bool,
    ) -> dict[str, np.ndarray]:
        """Top and duplicated n-gram character counts of the documents not ``failed`` yet (0 for
        the others, which an earlier rule drops anyway); of a document in a language whose
        words the segmenter cuts into syllables, n-grams of n times its ``ngram_scale`` of them,
        under n's name."""
        words = word_features_of(docs)
        columns = {name: np.zeros(len(failed)) for name in self._ngram_columns()}
        for scale, rows in rows_by_scale(docs):
            rows = rows[~failed[rows]]
            found = ngram_stats(
                words_in(words.gather(rows)),
                np.maximum(chars.gather(rows).to_numpy(), 1),
                {scaled(n, scale): limit for n, limit in self.top_n_grams},
                {scaled(n, scale): limit for n, limit in self.dup_n_grams},
                {scaled(n, scale): limit for n, limit in exact_above.items()},
                stop,
            )
            for kind, pairs in (("top", self.top_n_grams), ("dup", self.dup_n_grams)):
                for n, _ in pairs:
                    columns[f"{kind}_{n}"][rows] = found[f"{kind}_{scaled(n, scale)}"]
        return columns

    def rules(self) -> list[Rule]:
        chars = pl.col("chars")
        rules = [
            Rule("dup_para_frac", pl.col("para_dup") / pl.col("para_n"), ">", self.dup_para_frac),
            Rule(
                "dup_para_char_frac", pl.col("para_dup_chars") / chars, ">", self.dup_para_char_frac
            ),
            Rule("dup_line_frac", pl.col("line_dup") / pl.col("line_n"), ">", self.dup_line_frac),
            Rule(
                "dup_line_char_frac", pl.col("line_dup_chars") / chars, ">", self.dup_line_char_frac
            ),
        ]
        rules += [
            Rule(f"top_{n}_gram", pl.col(f"top_{n}") / chars, ">", t) for n, t in self.top_n_grams
        ]
        rules += [
            Rule(f"dup_{n}_gram", pl.col(f"dup_{n}") / chars, ">", t) for n, t in self.dup_n_grams
        ]
        return rules
