"""Vectorized document quality filters: the FineWeb filter set on polars DataFrames.

A *filter* is any object with a ``name: str`` and ``__call__(docs) -> pl.Series | FilterResult``
where ``docs`` is a DataFrame with (at least) ``text`` and ``url`` columns. The Series holds one
nullable Utf8 value per document: null keeps it, a string drops it and says why, e.g.
``"dup_line_frac=0.42>0.3"`` (rule name, measured value, threshold). A filter that also rewrites
the text (``C4QualityFilter`` removes lines) returns ``FilterResult(reasons, text)``; the new text
replaces ``text`` for the documents it keeps.

A filter with ``uses_words = True`` finds ``split_words(text)`` in the ``WORDS`` column when run
by a ``FilterChain`` (``words_of(docs)`` reads it, or splits when absent): the chain tokenizes
once for all such filters, and again only the documents whose text a filter rewrote.

A *formatter* has a ``name`` and ``__call__(docs) -> pl.Series`` returning the new text; formatters
run before the filters (see ``PIIMasker``).

``FilterChain(filters, formatters).apply(docs)`` returns ``(kept, rejected)``. Researchers can plug
in their own filters by dotted path with ``load_filter``:

    class MaxLength:  # (a) a class following the interface, instantiated with params
        name = "max_length"

        def __init__(self, limit: int = 100_000):
            self.limit = limit

        def __call__(self, docs: pl.DataFrame) -> pl.Series:
            chars = docs["text"].str.len_chars()
            too_long = pl.when(chars > self.limit).then(pl.format("chars={}", chars))
            return docs.select(chars=chars).select(too_long).to_series()

    # (b) a batch function: first parameter annotated pl.DataFrame (or named ``docs``)
    def no_digits(docs: pl.DataFrame) -> pl.Series: ...

    # (c) a per-document function, applied row by row: True/None keeps, False/str drops
    def has_title(text: str) -> bool | str | None: ...

The built-in filters mirror HuggingFace datatrove's FineWeb configuration (GopherRepetition,
GopherQuality, C4Quality, FineWebQuality; see ``default_filters``). datatrove tokenizes English with
spaCy; here a regex (``WORD_PATTERN``) approximates spaCy's tokenizer and another
(``_SENTENCE_BOUNDARY``) its sentencizer, so word counts can differ on hyphenated numbers,
abbreviations ("e.g." is one spaCy token, two here), URLs, emoticons and other rare constructs.
"""

from __future__ import annotations

import importlib
import inspect
import ipaddress
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
import polars as pl

# --------------------------------------------------------------------------------------------
# Interface


class FilterResult(NamedTuple):
    """What a filter returns when it also rewrites the text of the documents it keeps."""

    reasons: pl.Series
    text: pl.Series | None = None


class DocumentFilter(Protocol):
    name: str

    def __call__(self, docs: pl.DataFrame) -> pl.Series | FilterResult: ...


class Formatter(Protocol):
    name: str

    def __call__(self, docs: pl.DataFrame) -> pl.Series: ...


def _as_result(output: pl.Series | FilterResult, n_docs: int) -> FilterResult:
    result = output if isinstance(output, FilterResult) else FilterResult(output)
    if len(result.reasons) != n_docs:
        raise ValueError(f"filter returned {len(result.reasons)} reasons for {n_docs} documents")
    return FilterResult(result.reasons.cast(pl.Utf8).alias("reason"), result.text)


class FilterChain:
    """Formatters, then filters in order; each filter only sees the survivors of the previous.

    ``apply`` returns ``(kept, rejected)``. ``rejected`` has the input columns (``text`` as the
    rejecting filter saw it) plus ``filter`` (name of the first filter that dropped the document)
    and ``reason``. ``drop_counts`` holds the number of documents each filter dropped in the last
    ``apply`` call, ``total_drop_counts`` the sum over all calls.
    """

    def __init__(self, filters: Iterable[DocumentFilter], formatters: Iterable[Formatter] = ()):
        self.filters = list(filters)
        self.formatters = list(formatters)
        names = [f.name for f in self.filters]
        if len(set(names)) != len(names):
            raise ValueError(f"filter names must be unique: {names}")
        self.drop_counts: dict[str, int] = dict.fromkeys(names, 0)
        self.total_drop_counts: dict[str, int] = dict.fromkeys(names, 0)

    def apply(self, docs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        for formatter in self.formatters:
            docs = docs.with_columns(formatter(docs).alias("text"))
        rejected = [
            docs.clear().with_columns(filter=pl.lit(None, pl.Utf8), reason=pl.lit(None, pl.Utf8))
        ]
        for flt in self.filters:
            if getattr(flt, "uses_words", False) and docs.height:
                docs = docs.with_columns(words_of(docs).alias(WORDS))
            result = (
                _as_result(flt(docs), docs.height)
                if docs.height
                else FilterResult(pl.Series("reason", [], pl.Utf8))
            )
            drop = result.reasons.is_not_null()
            dropped = docs.filter(drop).with_columns(
                filter=pl.lit(flt.name, pl.Utf8), reason=result.reasons.filter(drop)
            )
            rejected.append(dropped.drop(WORDS, strict=False))
            self.drop_counts[flt.name] = dropped.height
            self.total_drop_counts[flt.name] += dropped.height
            if result.text is not None:
                docs = _rewritten(docs, result.text)
            docs = docs.filter(~drop)
        return docs.drop(WORDS, strict=False), pl.concat(rejected)


# --------------------------------------------------------------------------------------------
# Shared text statistics


def _char_class(chars: Iterable[str]) -> str:
    """A regex character class matching exactly ``chars`` (hex escapes: no escaping pitfalls)."""
    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in sorted(set(chars))) + "]"


# datatrove.utils.text.PUNCTUATION and TERMINAL_PUNCTUATION
PUNCTUATION = (
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
    + "".join(chr(x) for a, b in ((0, 9), (11, 13), (13, 32), (127, 160)) for x in range(a, b))
)
TERMINAL_PUNCTUATION = frozenset(
    "!.?\u0589\u061d\u061e\u061f\u06d4\u0700\u0701\u0702\u07f9\u0837\u0839\u083d\u083e"
    "\u0964\u0965\u104a\u104b\u1362\u1367\u1368\u166e\u1735\u1736\u17d4\u17d5\u17d6\u17d9"
    "\u17da\u1803\u1809\u1944\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b\u1b5e\u1b5f\u1b7d"
    "\u1b7e\u1c3b\u1c3c\u1c7e\u1c7f\u203c\u203d\u2047\u2048\u2049\u2e2e\u2e3c\u2e53\u2e54"
    "\u3002\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877\ua8ce\ua8cf\ua92f\ua9c8\ua9c9\uaa5d"
    "\uaa5e\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57\uff01\uff0e\uff1f\uff61\U00010a56"
    "\U00010a57\U00010f55\U00010f56\U00010f57\U00010f58\U00010f59\U00010f86\U00010f87"
    "\U00010f88\U00010f89\U00011047\U00011048\U000110be\U000110bf\U000110c0\U000110c1"
    "\U00011141\U00011142\U00011143\U000111c5\U000111c6\U000111cd\U000111de\U000111df"
    "\U00011238\U00011239\U0001123b\U0001123c\U000112a9\U0001144b\U0001144c\U000115c2"
    "\U000115c3\U000115c9\U000115ca\U000115cb\U000115cc\U000115cd\U000115ce\U000115cf"
    "\U000115d0\U000115d1\U000115d2\U000115d3\U000115d4\U000115d5\U000115d6\U000115d7"
    "\U00011641\U00011642\U0001173c\U0001173d\U0001173e\U00011944\U00011946\U00011a42"
    "\U00011a43\U00011a9b\U00011a9c\U00011c41\U00011c42\U00011ef7\U00011ef8\U00011f43"
    "\U00011f44\U00016a6e\U00016a6f\U00016af5\U00016b37\U00016b38\U00016b44\U00016e98"
    "\U0001bc9f\U0001da88"
)
_PUNCTUATION_CLASS = _char_class(set(PUNCTUATION) | TERMINAL_PUNCTUATION)
_NON_PUNCTUATION = "[^" + _PUNCTUATION_CLASS[1:]
_ENDS_WITH_TERMINAL = _char_class(TERMINAL_PUNCTUATION) + "$"

# Approximates spaCy's English tokenizer (what datatrove's split_into_words uses for "en"): text
# splits on whitespace, punctuation becomes separate tokens, hyphens between letters split off,
# clitics ('s, 're, n't as 't) are tokens; URLs, numbers like 3.5 / 1,000 / 10:30 / 3/4, single
# letters with a period ("J.", "p."), file names ("a.txt") and common abbreviations ("U.S.",
# "e.g.", "Dr.") stay whole; as in spaCy's infix rules, ":" and "/" before a letter ("en:wiki")
# and "." between a lowercase and an uppercase letter ("Options.Builder") split; "-5" is two
# tokens (spaCy keeps it whole). Differs from spaCy mostly inside chunks mixing letters and
# symbols (LaTeX, shell code, "C++", emoticons), which spaCy keeps together and this
# splits, and for contractions ("don't": spaCy "do n't", here "don 't").
_ABBREVIATIONS = (
    "Mr|Mrs|Ms|Dr|Prof|Jr|St|Mt|Inc|Ltd|Co|co|Corp|vs|Gen|Gov|Sen|Rep|Rev|Adm|Bros|Messrs"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|Ph|Calif|Fla|Mass|Wash"
)
# No \b or \B: word-boundary assertions make Rust's regex engine several times slower.
WORD_PATTERN = (
    r"(?:https?://|www\.)\S*[^\s.,;:!?'\"()\[\]{}<>]"
    rf"|(?:\p{{L}}\.){{2,}}|\p{{L}}\.|(?:{_ABBREVIATIONS})\."
    r"|\w+(?:(?:[.,:/]\d|\.\p{Ll}|[@&]\w)\w*)*"
    r"|['’](?:[sSdDmMtT]|ll|LL|re|RE|ve|VE)"
    r"|\.{2,}|-{2,}|/{2,}|''"
    r"|\S"
)

# str.splitlines() line boundaries, normalized to "\n" before splitting.
_LINE_BREAKS = "\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]"
# Paragraphs are split on a sentinel; a NUL inside web text would be (harmlessly) a split point.
_SENTINEL = "\x00"


def _doc_index(n_docs: int) -> pl.Series:
    return pl.Series("doc", np.arange(n_docs, dtype=np.uint32))


class _Parts(NamedTuple):
    """The elements of per-document lists, flattened: each one's document index and value."""

    doc: np.ndarray
    values: pl.Series

    def filter(self, mask: np.ndarray) -> _Parts:
        return _Parts(self.doc[mask], self.values.filter(pl.Series(mask)))


def _explode(parts: pl.Series) -> _Parts:
    """One element per list element (empty lists contribute none), in document order."""
    frame = pl.DataFrame([_doc_index(len(parts)), parts.alias("value")])
    frame = frame.explode("value").drop_nulls("value")
    return _Parts(frame["doc"].to_numpy(), frame["value"])


def _per_doc(doc: np.ndarray, n_docs: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Number of elements (or sum of ``weights``; a boolean mask counts its true ones) of each
    document."""
    if weights is not None and weights.dtype == np.bool_:
        doc, weights = doc[weights], None  # bincount would convert the mask to float weights
    return np.bincount(doc, weights, minlength=n_docs).astype(np.int64)


# spaCy keeps some chunks whole that WORD_PATTERN splits: elisions ("c'est", "l'année", "O'Brien";
# not the clitics 's 'd 'm 't 'll 're 've), a word character before "[", "(" or "{" and a word
# character after it ("Rollene[rediger"), a letter, "-" and a digit ("COVID-19"). Their joining
# character becomes "_" (a word character, not a letter) before matching: the same alternatives
# inside WORD_PATTERN make the regex engine give up its DFA on multilingual text (10x slower).
_ELISION = (
    r"[abcefghijknopquwxyzABCEFGHIJKNOPQUWXYZ]|[sSdDmMtT]\w|[lL](?:[lL]\w|[^\WlL])"
    r"|[rRvV](?:[eE]\w|[^\WeE])|[^\W\x00-\x7F]"
)
_JOINS = (rf"(\w)['’]({_ELISION})", r"(\w)[\[({](\w)", r"(\p{L})-(\d)")


def _joined(text: pl.Series) -> pl.Series:
    for pattern in _JOINS:
        text = text.str.replace_all(pattern, "${1}_${2}")
    return text


def split_words(text: pl.Series) -> pl.Series:
    """Words of each text, as spaCy's English tokenizer would split them (approximately: see
    WORD_PATTERN); a word joined across "'", "[", "(", "{" or "-" has "_" in its place."""
    return _joined(text).str.extract_all(WORD_PATTERN)


# Column of split_words(text) that FilterChain adds for the filters with ``uses_words = True``,
# so that the text is tokenized once for all of them; null for the documents whose text a filter
# rewrote (split again when needed).
WORDS = "_words"


def words_of(docs: pl.DataFrame) -> pl.Series:
    """split_words of the documents' text, computed once per chain (see ``WORDS``)."""
    if WORDS not in docs.columns:
        return split_words(docs["text"].fill_null(""))
    stale = docs[WORDS].is_null()
    if not stale.any():
        return docs[WORDS]
    rows = docs.with_row_index("row").select("row", WORDS)
    fresh = rows.filter(stale).with_columns(
        split_words(docs["text"].filter(stale).fill_null("")).alias(WORDS)
    )
    return pl.concat([rows.filter(~stale), fresh]).sort("row")[WORDS]


def word_counts_of(docs: pl.DataFrame) -> pl.Series:
    """Lengths of ``words_of(docs)``, counting without splitting where the chain has not split."""
    if WORDS not in docs.columns:
        return _word_counts(docs["text"])
    counts = docs[WORDS].list.len()
    stale = counts.is_null().arg_true()
    if len(stale):
        counts = counts.scatter(stale, _word_counts(docs["text"].gather(stale)))
    return counts


def _word_counts(text: pl.Series) -> pl.Series:
    return _joined(text.fill_null("")).str.count_matches(WORD_PATTERN)


def _rewritten(docs: pl.DataFrame, text: pl.Series) -> pl.DataFrame:
    """``docs`` with the new ``text``; their words stay where the text stayed the same."""
    if WORDS not in docs.columns:
        return docs.with_columns(text.alias("text"))
    unchanged = (docs["text"] == text).fill_null(False)
    return docs.with_columns(text.alias("text"), pl.when(unchanged).then(pl.col(WORDS)))


def split_lines(text: pl.Series) -> pl.Series:
    """``str.splitlines()`` for each document: no trailing empty line, [] for empty text."""
    normalized = text.str.replace_all(_LINE_BREAKS, "\n")
    without_last_break = normalized.str.strip_suffix("\n")
    lines = without_last_break.str.split("\n")
    return pl.select(pl.when(normalized == "").then([]).otherwise(lines)).to_series()


def _line_counts(normalized: pl.Series) -> pl.Series:
    """``len(split_lines(text))`` from the text with line breaks normalized to "\\n"."""
    breaks = normalized.str.count_matches("\n", literal=True).cast(pl.Int64)
    last_break = normalized.str.ends_with("\n").cast(pl.Int64)
    return (breaks + 1 - last_break) * (normalized != "").cast(pl.Int64)


_NGRAM_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_DOC_MULTIPLIER = np.uint64(0xC2B2AE3D27D4EB4F)


def _keys(doc: np.ndarray, value_hash: np.ndarray) -> np.ndarray:
    """Keys equal for equal values in the same document (64-bit: collisions are negligible)."""
    return value_hash + doc.astype(np.uint64) * _DOC_MULTIPLIER


def _find_duplicates(parts: _Parts, n_docs: int) -> dict[str, np.ndarray]:
    """datatrove's find_duplicates per document: elements, those seen before and their chars."""
    keys = _keys(parts.doc, parts.values.hash(seed=0).to_numpy())
    repeated = ~pl.Series(keys).is_first_distinct().to_numpy()
    chars = parts.values.str.len_chars().to_numpy()
    return {
        "n": _per_doc(parts.doc, n_docs),
        "dup": _per_doc(parts.doc, n_docs, repeated),
        "dup_chars": _per_doc(parts.doc[repeated], n_docs, chars[repeated]),
    }


class _Rule(NamedTuple):
    label: str
    value: pl.Expr
    op: str  # drop when value `op` threshold
    threshold: float | None


def _first_failing(rules: Sequence[_Rule]) -> pl.Expr:
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


def _reasons(
    stats: pl.DataFrame, rules: Sequence[_Rule], empty: pl.Expr | None = None
) -> pl.Series:
    reason = _first_failing(rules)
    if empty is not None:
        reason = pl.when(empty).then(pl.lit("empty")).otherwise(reason)
    return stats.select(reason.alias("reason")).to_series()


# --------------------------------------------------------------------------------------------
# Gopher repetition (datatrove GopherRepetitionFilter)

# n-gram statistics are computed on slices of about this many words: their hash tables then stay
# in the CPU cache (3x faster than one table for a batch of 1,000 web pages).
CHUNK_WORDS = 1 << 17


class _FlatWords(NamedTuple):
    doc: np.ndarray  # document index of each word
    word_hash: np.ndarray
    cum: np.ndarray  # characters of the words before each position (one more entry)
    n_docs: int
    n_words: np.ndarray  # per document
    doc_start: np.ndarray  # position of each document's first word


def _flat_words(words: pl.Series) -> _FlatWords:
    flat = _explode(words)
    length = flat.values.str.len_chars().to_numpy().astype(np.int64)
    n_words = words.list.len().fill_null(0).to_numpy().astype(np.int64)
    return _FlatWords(
        doc=flat.doc,
        word_hash=flat.values.hash(seed=0).to_numpy(),
        cum=np.concatenate([[0], np.cumsum(length)]),
        n_docs=len(words),
        n_words=n_words,
        doc_start=np.cumsum(n_words) - n_words,
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
        return _Ngrams(self.n, *(column[mask] for column in self[1:]))


def _occurrences(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number of occurrences of each key and whether it is the first (an argsort of integers is
    several times faster than hashing them)."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    order = np.argsort(keys)
    sorted_keys = keys[order]
    group_start = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    size = np.diff(np.r_[group_start, len(keys)])
    count = np.empty(len(keys), dtype=np.int64)
    count[order] = np.repeat(size, size)
    first = np.zeros(len(keys), dtype=bool)
    first[np.minimum.reduceat(order, group_start)] = True
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
    starts, keys = positions, _keys(flat.doc, flat.word_hash)
    if 1 in sizes:  # most single words repeat: filtering them costs more than it saves
        yield _Ngrams(1, starts, keys, *_occurrences(keys))
    for n in range(2, max(sizes, default=0) + 1):
        extendable = (words_left[starts] >= n) & ~done[flat.doc[starts]]
        starts, keys = starts[extendable], keys[extendable]
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
    pos, count = ngrams.starts[ngrams.first], ngrams.count[ngrams.first]
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
    walked = np.isin(flat.doc[starts], docs)
    starts, keys = starts[walked], keys[walked]
    chars = (cum[starts + n] - cum[starts]).tolist()
    totals = np.zeros(flat.n_docs, dtype=np.int64)
    seen: set[int] = set()  # keys include the document: one set serves all
    next_free = 0
    for doc, start, key, length in zip(
        flat.doc[starts].tolist(), starts.tolist(), keys.tolist(), chars, strict=True
    ):
        if start < next_free:
            continue
        if key in seen:
            totals[doc] += length
            next_free = start + n
        else:
            seen.add(key)
    return totals[docs]


class GopherRepetitionFilter:
    """Gopher (Rae et al. 2021, table A1) repetition rules, as in datatrove.

    Paragraphs split on 2+ newlines (after strip), lines on 1+ newlines; fractions of repeated
    elements and of their characters over len(text); the most frequent 2/3/4-gram's characters
    and the characters in repeated 5..10-grams over len(text).
    """

    name = "gopher_repetition"
    uses_words = True

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

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        text = docs["text"].fill_null("")
        n_docs = len(text)
        paragraphs = (
            text.str.strip_chars().str.replace_all(r"\n{2,}", _SENTINEL).str.split(_SENTINEL)
        )
        lines = text.str.replace_all(r"\n+", "\n").str.split("\n")
        stats = {"chars": text.str.len_chars().to_numpy()}
        for prefix, parts in (("para", paragraphs), ("line", lines)):
            for stat, values in _find_duplicates(_explode(parts), n_docs).items():
                stats[f"{prefix}_{stat}"] = values
        stats = pl.DataFrame(stats)
        failed = _reasons(stats, self._rules()[:4]).is_not_null().to_numpy()
        stats = stats.with_columns(**self._ngram_stats(words_of(docs), stats["chars"], failed))
        return _reasons(stats, self._rules(), empty=pl.col("chars") == 0)

    def _ngram_stats(
        self, words: pl.Series, chars: pl.Series, failed: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Top and duplicated n-gram character counts of the documents not ``failed`` yet (0 for
        the others, which an earlier rule drops anyway), a slice of documents at a time."""
        todo = np.flatnonzero(~failed)
        words, chars = words.gather(todo), chars.gather(todo)
        names = [f"top_{n}" for n, _ in self.top_n_grams]
        names += [f"dup_{n}" for n, _ in self.dup_n_grams]
        columns = {name: np.zeros(len(failed)) for name in names}
        for part in _chunks(words.list.len().to_numpy(), CHUNK_WORDS):
            found = self._chunk_ngram_stats(words[part], np.maximum(chars[part].to_numpy(), 1))
            for name, values in found.items():
                columns[name][todo[part]] = values
        return columns

    def _chunk_ngram_stats(self, words: pl.Series, chars: np.ndarray) -> dict[str, np.ndarray]:
        flat = _flat_words(words)
        top_n = dict(self.top_n_grams)
        dup_n = dict(self.dup_n_grams)
        # documents failing a rule: later rules cannot change their reason, so they are skipped
        failed = np.zeros(len(words), dtype=bool)
        columns = {}
        for ngrams in _repeated_ngrams(flat, {*top_n, *dup_n}, failed):
            n = ngrams.n
            if n in top_n:
                top = _top_ngram_chars(flat, ngrams)
                failed |= top / chars > top_n[n]
                columns[f"top_{n}"] = top
            if n in dup_n:
                covered = _covered_dup_chars(flat, ngrams)
                candidates = np.flatnonzero((covered / chars > dup_n[n]) & ~failed)
                covered[candidates] = _greedy_dup_chars(flat, ngrams, candidates)
                failed |= covered / chars > dup_n[n]
                columns[f"dup_{n}"] = covered
        return columns

    def _rules(self) -> list[_Rule]:
        chars = pl.col("chars")
        rules = [
            _Rule("dup_para_frac", pl.col("para_dup") / pl.col("para_n"), ">", self.dup_para_frac),
            _Rule(
                "dup_para_char_frac", pl.col("para_dup_chars") / chars, ">", self.dup_para_char_frac
            ),
            _Rule("dup_line_frac", pl.col("line_dup") / pl.col("line_n"), ">", self.dup_line_frac),
            _Rule(
                "dup_line_char_frac", pl.col("line_dup_chars") / chars, ">", self.dup_line_char_frac
            ),
        ]
        rules += [
            _Rule(f"top_{n}_gram", pl.col(f"top_{n}") / chars, ">", t) for n, t in self.top_n_grams
        ]
        rules += [
            _Rule(f"dup_{n}_gram", pl.col(f"dup_{n}") / chars, ">", t) for n, t in self.dup_n_grams
        ]
        return rules


# --------------------------------------------------------------------------------------------
# Gopher quality (datatrove GopherQualityFilter)

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")


class GopherQualityFilter:
    """Gopher quality heuristics: document length, word length, symbols, bullets, ellipses,
    alphabetic words and stop words. Word counts exclude punctuation-only tokens."""

    name = "gopher_quality"
    uses_words = True

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

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        text = docs["text"].fill_null("")
        n_docs = len(text)
        words = _explode(words_of(docs))
        # a letter is never punctuation: only the other words need the punctuation check
        is_alpha = words.values.str.contains(r"\p{L}").to_numpy()
        is_content = is_alpha.copy()
        others = np.flatnonzero(~is_alpha)
        is_content[others] = words.values.gather(others).str.contains(_NON_PUNCTUATION).to_numpy()
        is_stop = words.values.is_in(self.stop_words).to_numpy()
        stop_words = pl.DataFrame({"doc": words.doc[is_stop], "word": words.values.filter(is_stop)})
        lengths = words.values.str.len_chars().to_numpy()
        per_doc = pl.DataFrame(
            {
                "n_words": _per_doc(words.doc, n_docs),
                "n_content": _per_doc(words.doc, n_docs, is_content),
                "content_chars": _per_doc(words.doc[is_content], n_docs, lengths[is_content]),
                "n_alpha": _per_doc(words.doc, n_docs, is_alpha),
                "n_stop": _per_doc(stop_words.unique()["doc"].to_numpy(), n_docs),
            }
        )
        lines = text.str.replace_all(_LINE_BREAKS, "\n")
        stats = per_doc.with_columns(
            n_hash=text.str.count_matches("#", literal=True),
            n_ellipsis=text.str.count_matches("...", literal=True)
            + text.str.count_matches("…", literal=True),
            n_lines=_line_counts(lines),
            n_bullet_lines=lines.str.count_matches(r"(?m)^[^\S\n]*[•-]"),
            n_ellipsis_lines=lines.str.count_matches(r"(?m)(?:\.\.\.|…)[^\S\n]*$"),
        )
        return _reasons(stats, self._rules())

    def _rules(self) -> list[_Rule]:
        n_words = pl.col("n_words")
        n_lines = pl.col("n_lines")
        ellipsis_ratio = pl.col("n_ellipsis") / n_words
        return [
            _Rule("n_words", pl.col("n_content"), "<", self.min_doc_words),
            _Rule("n_words", pl.col("n_content"), ">", self.max_doc_words),
            _Rule(
                "avg_word_len",
                pl.col("content_chars") / pl.col("n_content"),
                "<",
                self.min_avg_word_length,
            ),
            _Rule(
                "avg_word_len",
                pl.col("content_chars") / pl.col("n_content"),
                ">",
                self.max_avg_word_length,
            ),
            _Rule("hash_word_ratio", pl.col("n_hash") / n_words, ">", self.max_symbol_word_ratio),
            _Rule("ellipsis_word_ratio", ellipsis_ratio, ">", self.max_symbol_word_ratio),
            _Rule(
                "bullet_lines_ratio",
                pl.col("n_bullet_lines") / n_lines,
                ">",
                self.max_bullet_lines_ratio,
            ),
            _Rule(
                "ellipsis_lines_ratio",
                pl.col("n_ellipsis_lines") / n_lines,
                ">",
                self.max_ellipsis_lines_ratio,
            ),
            _Rule(
                "alpha_words_ratio",
                pl.col("n_alpha") / n_words,
                "<",
                self.max_non_alpha_words_ratio,
            ),
            _Rule("stop_words", pl.col("n_stop"), "<", self.min_stop_words),
        ]


# --------------------------------------------------------------------------------------------
# C4 quality (datatrove C4QualityFilter, FineWeb configuration)

CITATION_PATTERN = r"\[\d*]|\[edit]|\[citation needed]"
POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)
_SENTENCE_END = (
    "[.!?\u0589\u061f\u06d4\u0964\u0965\u3002\uff01\uff0e\uff1f\uff61\u203c\u203d\u2047-\u2049]"
)
# Periods that spaCy's tokenizer keeps inside a token (abbreviation exceptions, single letters
# like "J." or "e.g.", ellipses) cannot end a sentence; they are removed before counting.
_NON_SENTENCE_PERIODS = rf"\.{{2,}}|(^|\W)(?:[A-Za-z]|{_ABBREVIATIONS})\."
# spaCy's sentencizer starts a sentence at the first non-punctuation token after a sentence-ending
# punctuation token. Tokens are whitespace separated here (see the module docstring).
_SENTENCE_BOUNDARY = _SENTENCE_END + r"\p{P}*\s[\s\p{P}]*[^\s\p{P}]|\p{Ll}\.\p{Lu}"


def _any_of(substrings: Iterable[str]) -> str:
    """A regex matching any of ``substrings`` (on C4's lines 7x faster than polars'
    ``str.contains_any``)."""
    return "|".join(re.escape(s) for s in substrings)


def _has_words(lines: pl.Expr, minimum: int) -> pl.Expr:
    """Whether each line has at least ``minimum`` whitespace-separated words (a regex search
    stops at the first match, cheaper than counting every word)."""
    if minimum <= 0:
        return pl.lit(True)
    return lines.str.contains(r"\S" + r"\S*\s+\S" * (minimum - 1))


def count_sentences(lines: pl.Expr) -> pl.Expr:
    """Approximate number of spaCy sentences in each (stripped, non-empty) line."""
    without_abbreviations = lines.str.replace_all(_NON_SENTENCE_PERIODS, "$1")
    return without_abbreviations.str.count_matches(_SENTENCE_BOUNDARY) + 1


class C4QualityFilter:
    """C4 rules as FineWeb ran them (``filter_no_terminal_punct=False``).

    Line by line (str.splitlines, stripped): a line with a word longer than ``max_word_length``,
    fewer than ``min_words_per_line`` words, mentioning javascript or a cookie/terms policy is
    removed; "lorem ipsum" or "{" in a surviving line drops the document, as do fewer than
    ``min_num_sentences`` sentences in the kept lines. Returns ``FilterResult`` whose text is the
    kept lines joined by newlines.
    """

    name = "c4_quality"

    def __init__(
        self,
        remove_citations: bool = True,
        filter_no_terminal_punct: bool = False,
        min_num_sentences: int = 5,
        min_words_per_line: int = 3,
        max_word_length: int = 1000,
        filter_lorem_ipsum: bool = True,
        filter_javascript: bool = True,
        filter_curly_bracket: bool = True,
        filter_policy: bool = True,
    ):
        self.remove_citations = remove_citations
        self.filter_no_terminal_punct = filter_no_terminal_punct
        self.min_num_sentences = min_num_sentences
        self.min_words_per_line = min_words_per_line
        self.max_word_length = max_word_length
        self.filter_lorem_ipsum = filter_lorem_ipsum
        self.filter_javascript = filter_javascript
        self.filter_curly_bracket = filter_curly_bracket
        self.filter_policy = filter_policy

    def __call__(self, docs: pl.DataFrame) -> FilterResult:
        text = docs["text"].fill_null("")
        lines = _explode(split_lines(text))
        lines = pl.DataFrame({"doc": lines.doc, "line": lines.values.str.strip_chars()})
        lines = lines.with_columns(
            valid=~self._has_long_word(lines["line"])
            & _has_words(pl.col("line"), self.min_words_per_line)
        )
        if self.remove_citations:
            lines = lines.with_columns(pl.col("line").str.replace_all(CITATION_PATTERN, ""))
        lines = lines.with_columns(lower=pl.col("line").str.to_lowercase())
        lines = lines.with_columns(self._line_flags()).with_columns(
            sentences=pl.when("kept").then(count_sentences(pl.col("line"))).otherwise(0)
        )
        per_doc = lines.group_by("doc", maintain_order=True).agg(
            new_text=pl.col("line").filter("kept").str.join("\n").str.strip_chars(),
            sentences=pl.col("sentences").sum(),
            fatal=pl.col("fatal").drop_nulls().first(),
        )
        stats = pl.DataFrame([_doc_index(len(text))]).join(per_doc, on="doc", how="left")
        stats = stats.sort("doc").with_columns(pl.col("sentences").fill_null(0))
        reason = pl.coalesce(pl.col("fatal"), _first_failing(self._rules()))
        reasons = stats.select(reason.alias("reason")).to_series()
        return FilterResult(reasons, stats["new_text"].fill_null(""))

    def _line_flags(self) -> list[pl.Expr]:
        """Per line: ``kept`` and ``fatal`` (the reason the line drops its whole document), from
        ``valid`` (long words, words per line), ``line`` (without citations) and ``lower``."""
        line, valid = pl.col("line"), pl.col("valid")
        if self.filter_no_terminal_punct:
            valid &= line.str.contains(r"[.?!\"']$") & ~line.str.ends_with("...")
        lower = pl.col("lower")
        lorem = valid & lower.str.contains("lorem ipsum", literal=True) & self.filter_lorem_ipsum
        javascript = lower.str.contains("javascript", literal=True) & self.filter_javascript
        curly = (
            valid & ~javascript & line.str.contains("{", literal=True) & self.filter_curly_bracket
        )
        policy = lower.str.contains(_any_of(POLICY_SUBSTRINGS)) & self.filter_policy
        fatal = pl.when(lorem).then(pl.lit("lorem_ipsum")).when(curly).then(pl.lit("curly_bracket"))
        kept = valid & ~lorem & ~javascript & ~curly & ~policy
        return [kept.alias("kept"), fatal.alias("fatal")]

    def _has_long_word(self, lines: pl.Series) -> pl.Series:
        """Lines with a word longer than ``max_word_length``; only lines longer than that are
        searched (a counted-repetition regex is slow)."""
        flags = pl.Series("has_long_word", np.zeros(len(lines), dtype=bool))
        if self.max_word_length == -1:
            return flags
        candidates = (lines.str.len_chars() > self.max_word_length).arg_true()
        if len(candidates):
            found = lines.gather(candidates).str.contains(rf"\S{{{self.max_word_length + 1}}}")
            flags = flags.scatter(candidates, found)
        return flags

    def _rules(self) -> list[_Rule]:
        threshold = None if self.min_num_sentences == -1 else self.min_num_sentences
        return [_Rule("sentences", pl.col("sentences"), "<", threshold)]


# --------------------------------------------------------------------------------------------
# FineWeb quality (datatrove FineWebQualityFilter)


class FineWebQualityFilter:
    """FineWeb's own rules on non-blank lines (split on "\\n" only, not stripped): share of lines
    ending in terminal punctuation, share of short lines, characters in repeated lines and
    newlines per word."""

    name = "fineweb_quality"

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
        stop_chars = TERMINAL_PUNCTUATION if stop_chars is None else stop_chars
        self._ends_with_stop_char = "(?:" + "|".join(re.escape(c) for c in stop_chars) + ")$"

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        text = docs["text"].fill_null("")
        n_docs = len(text)
        lines = _explode(text.str.split("\n"))
        lines = lines.filter((lines.values.str.strip_chars() != "").to_numpy())
        n_newlines = text.str.count_matches("\n", literal=True)
        ends_with_punct = lines.values.str.contains(self._ends_with_stop_char).to_numpy()
        is_short = (lines.values.str.len_chars() <= self.short_line_length).to_numpy()
        stats = pl.DataFrame(
            {
                "n_lines": _per_doc(lines.doc, n_docs),
                "n_punct": _per_doc(lines.doc, n_docs, ends_with_punct),
                "n_short": _per_doc(lines.doc, n_docs, is_short),
                "dup_chars": _find_duplicates(lines, n_docs)["dup_chars"],
                "chars_without_newlines": text.str.len_chars() - n_newlines,
                "n_newlines": n_newlines,
                "n_words": word_counts_of(docs),
            }
        )
        return _reasons(stats, self._rules(), empty=pl.col("n_lines") == 0)

    def _rules(self) -> list[_Rule]:
        punct_ratio = pl.col("n_punct") / pl.col("n_lines")
        if self.line_punct_exclude_zero:
            punct_ratio = pl.when(punct_ratio == 0).then(None).otherwise(punct_ratio)
        return [
            _Rule("line_punct_ratio", punct_ratio, "<", self.line_punct_thr),
            _Rule(
                "short_line_ratio", pl.col("n_short") / pl.col("n_lines"), ">", self.short_line_thr
            ),
            _Rule(
                "char_dup_ratio",
                pl.col("dup_chars") / pl.col("chars_without_newlines"),
                ">",
                self.char_duplicates_ratio,
            ),
            _Rule(
                "newline_ratio", pl.col("n_newlines") / pl.col("n_words"), ">", self.new_line_ratio
            ),
        ]


# --------------------------------------------------------------------------------------------
# URL filter (in the spirit of datatrove's URLFilter, with a small built-in list)

BLOCKED_DOMAINS = frozenset(
    {
        "pornhub.com",
        "xvideos.com",
        "xnxx.com",
        "xhamster.com",
        "redtube.com",
        "youporn.com",
        "tube8.com",
        "spankbang.com",
        "youjizz.com",
        "brazzers.com",
        "chaturbate.com",
        "livejasmin.com",
        "stripchat.com",
        "bongacams.com",
        "cam4.com",
        "myfreecams.com",
        "onlyfans.com",
        "xtube.com",
        "porn.com",
        "motherless.com",
        "eporner.com",
        "tnaflix.com",
        "beeg.com",
        "hentaihaven.xxx",
        "nhentai.net",
        "adultfriendfinder.com",
        "fapdu.com",
    }
)
# Whole words of the URL (split on non-alphanumerics, case-sensitive as in datatrove).
BANNED_URL_WORDS = frozenset(
    {
        "porn",
        "porno",
        "xxx",
        "sexcam",
        "sexo",
        "hentai",
        "nsfw",
        "milf",
        "bdsm",
        "blowjob",
        "camgirl",
        "cumshot",
        "dildo",
        "escorts",
        "fetish",
        "gangbang",
        "handjob",
        "orgy",
        "pornstar",
        "slut",
        "threesome",
        "upskirt",
        "viagra",
        "cialis",
        "xxxvideos",
        "hardcore",
    }
)
# At least ``soft_word_threshold`` different ones of these drop the URL.
SOFT_BANNED_URL_WORDS = frozenset(
    {
        "sex",
        "sexy",
        "nude",
        "naked",
        "adult",
        "erotic",
        "babes",
        "lingerie",
        "escort",
        "webcam",
        "fuck",
        "pussy",
        "dick",
        "boobs",
        "tits",
        "ass",
        "nipples",
        "amateur",
        "lesbian",
        "gay",
    }
)
# Substrings of the URL with non-alphanumerics removed and lowercased.
BANNED_URL_SUBWORDS = frozenset(
    {
        "pornhub",
        "xvideos",
        "xnxx",
        "xhamster",
        "youjizz",
        "redtube",
        "youporn",
        "chaturbate",
        "livejasmin",
        "brazzers",
        "spankbang",
        "freesex",
        "sexvideo",
        "xxxvideo",
        "pornvideo",
    }
)

_HOST_PATTERN = r"^(?:[A-Za-z][A-Za-z0-9+.-]*://)?(?:[^@/?#]*@)?([^:/?#]+)"


def _normalized_words(words: Iterable[str]) -> list[str]:
    return sorted({re.sub(r"[^a-zA-Z0-9]+", "", w).lower() for w in words} - {""})


class URLFilter:
    """Drops documents whose URL is on a blocklist: the host or one of its parent domains is
    blocked, the URL contains a banned word, ``soft_word_threshold`` soft-banned words, or a
    banned subword. ``extra_*`` arguments extend the built-in lists;
    ``use_integrated_lists=False`` uses only the extra ones."""

    name = "url"

    def __init__(
        self,
        soft_word_threshold: int = 2,
        extra_domains: Iterable[str] = (),
        extra_urls: Iterable[str] = (),
        banned_words: Iterable[str] = (),
        banned_subwords: Iterable[str] = (),
        soft_banned_words: Iterable[str] = (),
        use_integrated_lists: bool = True,
    ):
        builtin = use_integrated_lists
        self.soft_word_threshold = soft_word_threshold
        self.domains = sorted(
            {d.strip().lower() for d in extra_domains} | (BLOCKED_DOMAINS if builtin else set())
        )
        self.urls = sorted({u.strip() for u in extra_urls})
        self.banned_words = _normalized_words(
            [*banned_words, *(BANNED_URL_WORDS if builtin else ())]
        )
        self.soft_banned_words = _normalized_words(
            [*soft_banned_words, *(SOFT_BANNED_URL_WORDS if builtin else ())]
        )
        self.banned_subwords = _normalized_words(
            [*banned_subwords, *(BANNED_URL_SUBWORDS if builtin else ())]
        )

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        url = pl.col("url").fill_null("")
        host = url.str.extract(_HOST_PATTERN, 1).str.to_lowercase().str.strip_suffix(".")
        words = url.str.extract_all(r"[a-zA-Z0-9]+").list.unique()
        normalized = url.str.replace_all(r"[^a-zA-Z0-9]+", "").str.to_lowercase()
        rules = [
            (self.domains, "domain", _any_domain_suffix(host, self.domains)),
            (self.urls, "url", url.is_in(self.urls)),
            (self.banned_words, "banned_word", _any_word(words, self.banned_words)),
            (self.soft_banned_words, "soft_banned_words", self._soft_words_hit(words)),
            (
                self.banned_subwords,
                "banned_subword",
                normalized.str.contains_any(self.banned_subwords),
            ),
        ]
        reasons = [
            pl.when(hit.fill_null(False)).then(pl.lit(label)) for lst, label, hit in rules if lst
        ]
        reason = pl.coalesce(reasons) if reasons else pl.lit(None, pl.Utf8)
        return docs.select(reason.cast(pl.Utf8).alias("reason")).to_series()

    def _soft_words_hit(self, words: pl.Expr) -> pl.Expr:
        n_soft = words.list.eval(pl.element().is_in(self.soft_banned_words)).list.sum()
        return n_soft >= self.soft_word_threshold


def _any_domain_suffix(host: pl.Expr, domains: Sequence[str]) -> pl.Expr:
    alternatives = "|".join(re.escape(d) for d in domains)
    return host.str.contains(rf"(?:^|\.)(?:{alternatives})$")


def _any_word(words: pl.Expr, banned: Sequence[str]) -> pl.Expr:
    return words.list.eval(pl.element().is_in(banned)).list.any()


# --------------------------------------------------------------------------------------------
# PII masking (datatrove PIIFormatter)

EMAIL_PATTERN = (
    r"\b[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:(?:[A-Za-z0-9](?:["
    r"A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?|\[(?:(?:25[0-5]|2[0-4][0-9]|["
    r"01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)])"
)
IPV4_PATTERN = (
    r"(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
)
EMAIL_REPLACEMENTS = ("email@example.com", "firstname.lastname@example.org")
# datatrove's "randomly generated" IPs that did not answer pings
IP_REPLACEMENTS = (
    "22.214.171.124",
    "126.96.36.199",
    "188.8.131.52",
    "184.108.40.206",
    "220.127.116.11",
    "18.104.22.168",
)


class _CyclingReplacer:
    """re.sub with replacements used in turn (datatrove's PIIReplacer), optionally validated."""

    def __init__(self, pattern: str, replacements: Sequence[str], is_pii: Callable[[str], bool]):
        self.pattern = re.compile(pattern)
        self.replacements = (
            (replacements,) if isinstance(replacements, str) else tuple(replacements)
        )
        self.is_pii = is_pii
        self._next = 0

    def _replace(self, match: re.Match) -> str:
        if not self.is_pii(match.group(0)):
            return match.group(0)
        replacement = self.replacements[self._next]
        self._next = (self._next + 1) % len(self.replacements)
        return replacement

    def __call__(self, text: str) -> str:
        return self.pattern.sub(self._replace, text)


def is_public_ip(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_global
    except ValueError:
        return False


class PIIMasker:
    """Formatter replacing e-mail addresses and public IPv4 addresses (private, loopback and other
    reserved ranges are kept), with datatrove's replacement strings used in turn.

    Only documents where the (Rust) regex finds a candidate go through the Python ``re.sub``.
    """

    name = "pii"

    def __init__(
        self,
        remove_emails: bool = True,
        remove_ips: bool = True,
        only_remove_public_ips: bool = True,
        email_replacement: Sequence[str] | str = EMAIL_REPLACEMENTS,
        ip_replacement: Sequence[str] | str = IP_REPLACEMENTS,
    ):
        self.replacers: list[tuple[str, _CyclingReplacer]] = []
        if remove_emails:
            self.replacers.append(
                (EMAIL_PATTERN, _CyclingReplacer(EMAIL_PATTERN, email_replacement, bool))
            )
        if remove_ips:
            is_pii = (
                is_public_ip
                if only_remove_public_ips
                else (lambda ip: is_public_ip(ip) or _is_ip(ip))
            )
            self.replacers.append(
                (IPV4_PATTERN, _CyclingReplacer(IPV4_PATTERN, ip_replacement, is_pii))
            )

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        text = docs["text"].fill_null("")
        for pattern, replace in self.replacers:
            candidates = np.flatnonzero(text.str.contains(pattern).to_numpy())
            if len(candidates):
                masked = [replace(t) for t in text.gather(candidates).to_list()]
                text = text.scatter(candidates, masked)
        return text.alias("text")

    def mask(self, text: str) -> str:
        """Mask one string (convenience for callers outside polars)."""
        return self(pl.DataFrame({"text": [text]}))[0]


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Plug-ins and defaults


def default_filters() -> list[DocumentFilter]:
    """FineWeb's filter order (language identification happens elsewhere)."""
    return [
        URLFilter(),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        C4QualityFilter(),
        FineWebQualityFilter(),
    ]


class BatchFunctionFilter:
    """Wraps ``f(docs: pl.DataFrame) -> pl.Series`` (null = keep, string = drop reason)."""

    def __init__(self, function: Callable[..., pl.Series], name: str, params: dict | None = None):
        self.function = function
        self.name = name
        self.params = params or {}

    def __call__(self, docs: pl.DataFrame) -> pl.Series | FilterResult:
        return self.function(docs, **self.params)


class DocumentFunctionFilter:
    """Wraps ``f(text: str) -> bool | str | None`` applied row by row (slow path).

    True or None keeps the document; False drops it with the filter name as reason, a string
    drops it with that string as reason.
    """

    def __init__(
        self, function: Callable[..., bool | str | None], name: str, params: dict | None = None
    ):
        self.function = function
        self.name = name
        self.params = params or {}

    def _reason(self, text: str) -> str | None:
        verdict = self.function(text, **self.params)
        if verdict is None or verdict is True:
            return None
        return self.name if verdict is False else str(verdict)

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        reasons = [self._reason(text) for text in docs["text"].fill_null("").to_list()]
        return pl.Series("reason", reasons, dtype=pl.Utf8)


def _import(path: str) -> Any:
    module_name, _, attribute = path.rpartition(".")
    if not module_name:
        raise ValueError(f"expected a dotted path 'package.module.object', got {path!r}")
    return getattr(importlib.import_module(module_name), attribute)


def _takes_dataframe(function: Callable) -> bool:
    first = next(iter(inspect.signature(function).parameters.values()), None)
    if first is None:
        return False
    annotation = first.annotation
    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] == "DataFrame"
    return annotation is pl.DataFrame or (
        annotation is inspect.Parameter.empty and first.name == "docs"
    )


def load_filter(path: str, params: dict | None = None) -> DocumentFilter:
    """Filter from a dotted path: a class following the filter interface (instantiated with
    ``params``), a batch function whose first parameter is annotated ``pl.DataFrame`` (or named
    ``docs``), or a per-document function of the text. Extra ``params`` are passed as keyword
    arguments to functions. The name is the object's ``name`` or the last path component."""
    target = _import(path)
    default_name = path.rpartition(".")[2]
    if inspect.isclass(target):
        instance = target(**(params or {}))
        if not getattr(instance, "name", None):
            instance.name = default_name
        return instance
    if not callable(target):
        raise TypeError(f"{path} is neither a filter class nor a function")
    name = getattr(target, "name", default_name)
    wrapper = BatchFunctionFilter if _takes_dataframe(target) else DocumentFunctionFilter
    return wrapper(target, name, params)
