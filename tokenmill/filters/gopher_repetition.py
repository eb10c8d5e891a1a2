"""Gopher repetition (datatrove GopherRepetitionFilter)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import polars as pl

from tokenmill.filters.rules import Judgement, Rule, judged, rule_reasons
from tokenmill.filters.text import doc_keys, explode, find_duplicates
from tokenmill.filters.word_scan import library, word_features_of, words_in

# n-gram statistics are computed on slices of about this many words: their hash tables then stay
# in the CPU cache (3x faster than one table for a batch of 1,000 web pages).
CHUNK_WORDS = 1 << 17
_NGRAM_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)

# Paragraphs are split on a sentinel; a NUL inside web text would be (harmlessly) a split point.
_SENTINEL = "\x00"


class _FlatWords(NamedTuple):
    doc: np.ndarray  # document index of each word
    word_hash: np.ndarray
    cum: np.ndarray  # characters of the words before each position (one more entry)
    n_docs: int
    n_words: np.ndarray  # per document
    doc_start: np.ndarray  # position of each document's first word


def _flat_words(features: pl.Series) -> _FlatWords:
    words = words_in(features)
    cum = np.zeros(len(words.chars) + 1, dtype=np.int64)
    np.cumsum(words.chars, out=cum[1:])
    return _FlatWords(
        doc=words.doc,
        word_hash=words.hashes,
        cum=cum,
        n_docs=len(words.counts),
        n_words=words.counts,
        doc_start=np.cumsum(words.counts) - words.counts,
    )


def _chunks(sizes: np.ndarray, limit: int) -> Iterator[slice]:
    """Consecutive ranges of documents of about ``limit`` words in all (at least one each)."""
    ends = np.cumsum(sizes)
    start = 0
    while start < len(sizes):
        before = ends[start - 1] if start else 0
        stop = max(int(np.searchsorted(ends, before + limit, side="right")), start + 1)
        yield slice(start, stop)
        start = stop


class _Ngrams(NamedTuple):
    """n-grams of one length in word order: start position and key of each, and the number of
    occurrences of its n-gram in its document and whether this one is the first."""

    n: int
    starts: np.ndarray
    keys: np.ndarray
    count: np.ndarray
    first: np.ndarray

    def filter(self, mask: np.ndarray) -> _Ngrams:
        kept = np.flatnonzero(mask)  # once: a boolean mask would be searched for each column
        return _Ngrams(self.n, *(column.take(kept) for column in self[1:]))


def _occurrences(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number of occurrences of each key and whether it is the first (counted in one hash table,
    word_scan.c: several times faster than sorting the keys)."""
    count = np.empty(len(keys), dtype=np.int64)
    first = np.empty(len(keys), dtype=bool)
    if library().count_occurrences(np.ascontiguousarray(keys), len(keys), count, first):
        raise MemoryError("counting n-grams")
    return count, first


def _repeated_ngrams(flat: _FlatWords, sizes: Collection[int], done: np.ndarray):
    """Yield the n-grams occurring at least twice in their document (all words for n = 1) for
    each n of ``sizes``, in increasing order. n-grams never span documents. Documents the caller
    marks in ``done`` (between steps) are left out from then on.

    Keys hash the word sequence and the document, so equal keys mean "same n-gram, same doc"
    (64-bit polynomial hash: collisions are negligible at these sizes). An n-gram can only repeat
    where its (n-1)-gram prefix repeats, so the candidate set shrinks quickly as n grows.
    """
    positions = np.arange(len(flat.doc))
    doc_ends = flat.doc_start + flat.n_words
    words_left = doc_ends[flat.doc] - positions  # words from each position to its doc's end
    starts, keys = positions, doc_keys(flat.doc, flat.word_hash)
    if 1 in sizes:  # most single words repeat: filtering them costs more than it saves
        yield _Ngrams(1, starts, keys, *_occurrences(keys))
    for n in range(2, max(sizes, default=0) + 1):
        extendable = np.flatnonzero((words_left[starts] >= n) & ~done[flat.doc[starts]])
        starts, keys = starts.take(extendable), keys.take(extendable)
        keys = keys * _NGRAM_MULTIPLIER + flat.word_hash[starts + n - 1]
        ngrams = _Ngrams(n, starts, keys, *_occurrences(keys))
        ngrams = ngrams.filter(ngrams.count > 1)
        starts, keys = ngrams.starts, ngrams.keys
        if n in sizes:
            yield ngrams


def _top_ngram_chars(flat: _FlatWords, ngrams: _Ngrams) -> np.ndarray:
    """len(" ".join(top n-gram)) * its count per doc (Counter.most_common: ties -> first seen).

    ``ngrams`` are the repeated n-grams; a doc without any scores its first n-gram once.
    """
    n, cum = ngrams.n, flat.cum
    result = _first_ngram_chars(flat, n)
    if not len(ngrams.starts):
        return result
    first = np.flatnonzero(ngrams.first)
    pos, count = ngrams.starts.take(first), ngrams.count.take(first)
    doc = flat.doc[pos]  # in word order: grouped by document
    doc_start = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
    doc_size = np.diff(np.r_[doc_start, len(doc)])
    most = count == np.repeat(np.maximum.reduceat(count, doc_start), doc_size)
    top = np.flatnonzero(most)
    top = top[np.r_[True, doc[top][1:] != doc[top][:-1]]]  # the first seen of the most frequent
    result[doc[top]] = (cum[pos[top] + n] - cum[pos[top]] + (n - 1)) * count[top]
    return result


def _first_ngram_chars(flat: _FlatWords, n: int) -> np.ndarray:
    has_ngram = flat.n_words >= n
    first = flat.doc_start[has_ngram]
    result = np.zeros(flat.n_docs, dtype=np.int64)
    result[has_ngram] = flat.cum[first + n] - flat.cum[first] + (n - 1)
    return result


def _covered_dup_chars(flat: _FlatWords, ngrams: _Ngrams) -> np.ndarray:
    """Characters of words inside any n-gram that already occurred earlier in the same doc.

    An upper bound of datatrove's greedy find_all_duplicate (whose counted n-grams are disjoint
    repeated n-grams): documents above a threshold are re-checked exactly.
    """
    n, starts, cum = ngrams.n, ngrams.starts[~ngrams.first], flat.cum
    # the union of the spans [start, start + n): sorted spans of equal length only overlap the
    # one before (n-grams never span documents, so neither do overlaps)
    previous_end = np.r_[0, starts[:-1] + n]
    chars = cum[starts + n] - cum[np.maximum(starts, previous_end)]
    return np.bincount(flat.doc[starts], weights=chars, minlength=flat.n_docs)


def _greedy_dup_chars(flat: _FlatWords, ngrams: _Ngrams, docs: np.ndarray) -> np.ndarray:
    """datatrove's find_all_duplicate for each of ``docs`` (exact): walking the words, an n-gram
    seen before counts its characters and the walk jumps past it. n-grams that occur once in
    their document never count, so only the repeated ones (``ngrams``) are walked."""
    n, starts, keys, cum = ngrams.n, ngrams.starts, ngrams.keys, flat.cum
    walked = np.flatnonzero(np.isin(flat.doc[starts], docs))
    starts, keys = starts.take(walked), keys.take(walked)
    totals = np.zeros(flat.n_docs, dtype=np.int64)
    doc, chars = flat.doc.take(starts), cum.take(starts + n) - cum.take(starts)
    if library().walk_repeated(doc, starts, keys, chars, len(starts), n, totals):
        raise MemoryError("walking repeated n-grams")
    return totals[docs]


class GopherRepetitionFilter:
    """Gopher (Rae et al. 2021, table A1) repetition rules, as in datatrove.

    Paragraphs split on 2+ newlines (after strip), lines on 1+ newlines; fractions of repeated
    elements and of their characters over len(text); the most frequent 2/3/4-gram's characters
    and the characters in repeated 5..10-grams over len(text).
    """

    name = "gopher_repetition"
    uses_word_features = True
    settings = {
        "dup_line_frac": "Largest share of lines that repeat an earlier line",
        "dup_para_frac": "Largest share of paragraphs that repeat an earlier paragraph",
        "dup_line_char_frac": "Largest share of characters in repeated lines",
        "dup_para_char_frac": "Largest share of characters in repeated paragraphs",
        "top_n_grams": "[n, limit] pairs: largest share of characters in the most frequent n-gram",
        "dup_n_grams": "[n, limit] pairs: largest share of characters in repeated n-grams",
    }

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
        failed = rule_reasons(stats, self._rules()[:4]).is_not_null().to_numpy()
        ngrams = self._ngram_stats(
            word_features_of(docs), stats["chars"], failed, dict(self.dup_n_grams), stop=True
        )
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
        return Judgement(self._rules(), empty=pl.col("chars") == 0)

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        """Every statistic of every document, whatever the thresholds (see exact_dup_above)."""
        stats = self._element_stats(docs)
        exact_above = {n: self.exact_dup_above for n, _ in self.dup_n_grams}
        nothing_failed = np.zeros(stats.height, dtype=bool)
        ngrams = self._ngram_stats(
            word_features_of(docs), stats["chars"], nothing_failed, exact_above, stop=False
        )
        return stats.with_columns(**ngrams)

    def _element_stats(self, docs: pl.DataFrame) -> pl.DataFrame:
        text = docs["text"].fill_null("")
        n_docs = len(text)
        paragraphs = (
            text.str.strip_chars().str.replace_all(r"\n{2,}", _SENTINEL).str.split(_SENTINEL)
        )
        lines = text.str.replace_all(r"\n+", "\n").str.split("\n")
        stats = {"chars": text.str.len_chars().to_numpy()}
        for prefix, parts in (("para", paragraphs), ("line", lines)):
            for stat, values in find_duplicates(explode(parts), n_docs).items():
                stats[f"{prefix}_{stat}"] = values
        return pl.DataFrame(stats)

    def _ngram_columns(self) -> list[str]:
        return [f"top_{n}" for n, _ in self.top_n_grams] + [f"dup_{n}" for n, _ in self.dup_n_grams]

    def _ngram_stats(
        self,
        words: pl.Series,
        chars: pl.Series,
        failed: np.ndarray,
        exact_above: dict[int, float],
        stop: bool,
    ) -> dict[str, np.ndarray]:
        """Top and duplicated n-gram character counts of the documents not ``failed`` yet (0 for
        the others, which an earlier rule drops anyway), a slice of documents at a time."""
        todo = np.flatnonzero(~failed)
        words, chars = words.gather(todo), chars.gather(todo)
        columns = {name: np.zeros(len(failed)) for name in self._ngram_columns()}
        for part in _chunks(words.list.len().to_numpy(), CHUNK_WORDS):
            found = self._chunk_ngram_stats(
                words[part], np.maximum(chars[part].to_numpy(), 1), exact_above, stop
            )
            for name, values in found.items():
                columns[name][todo[part]] = values
        return columns

    def _chunk_ngram_stats(
        self, words: pl.Series, chars: np.ndarray, exact_above: dict[int, float], stop: bool
    ) -> dict[str, np.ndarray]:
        """The n-gram statistics; repeated n-gram characters are exact where their share is
        above ``exact_above[n]``. With ``stop``, a document failing a rule (the thresholds'
        own) is skipped from then on: later rules cannot change its reason."""
        flat = _flat_words(words)
        top_n = dict(self.top_n_grams)
        dup_n = dict(self.dup_n_grams)
        failed = np.zeros(len(words), dtype=bool)
        columns = {}
        for ngrams in _repeated_ngrams(flat, {*top_n, *dup_n}, failed):
            n = ngrams.n
            if n in top_n:
                top = _top_ngram_chars(flat, ngrams)
                if stop:
                    failed |= top / chars > top_n[n]
                columns[f"top_{n}"] = top
            if n in dup_n:
                covered = _covered_dup_chars(flat, ngrams)
                candidates = np.flatnonzero((covered / chars > exact_above[n]) & ~failed)
                covered[candidates] = _greedy_dup_chars(flat, ngrams, candidates)
                if stop:
                    failed |= covered / chars > dup_n[n]
                columns[f"dup_{n}"] = covered
        return columns

    def _rules(self) -> list[Rule]:
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
