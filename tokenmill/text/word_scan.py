"""The words of `text.split_words`, scanned by compiled code: each word's length, hash and
whether it holds a letter or a non-punctuation character, without making a string per word.

`split_words` runs the regex engine and materializes every word as a string; the filters that
count words only need these features of them. The scanner (`word_scan.c`, compiled when the
project is installed: scripts/hatch_build.py) follows `text.WORD_PATTERN` and the joins before it
(`text._JOINS`) alternative by alternative, as the regex engine's leftmost-first search does; the
Unicode classes it reads (\\w, \\p{L}, \\p{Ll}, \\p{Lu}, \\d, \\s, \\p{P} and the punctuation) come
from that same engine, asked once per code point (`char_classes`), so both agree on every
character. `tests/test_word_scan.py` holds them equal. The same library counts over the words
what the Gopher filters measure (`gopher_repetition.ngram_stats`, `GopherQualityFilter.measure`)
and, over the texts' characters and lines, Gopher quality's symbol and line counts
(`text_totals`), Gopher repetition's repeated lines and paragraphs (`element_duplicates`),
FineWeb quality's line counts (`fineweb_line_counts`) and C4's line rules (`c4_lines`, with its
sentences: `count_sentences`), each held by the tests to the regexes it replaced.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa

from tokenmill.native import I64, load, pointer
from tokenmill.text.code_point_tables import cached_table
from tokenmill.text.segmentation import (
    _PUNCTUATION_CLASS,
    ABBREVIATIONS,
    SEGMENTED,
    WORD_COUNTS,
    WORD_FEATURES,
    WORD_LISTS,
    WORDS,
    per_text,
    segmented_languages,
    segmented_text,
    uint32_lists,
    words_of,
)

# Bits of a character's class (`char_classes`), as word_scan.c reads them.
_WORD, _LETTER, _LOWER, _DIGIT, _SPACE, _PUNCT, _P, _UPPER = 1, 2, 4, 8, 16, 32, 64, 128
# Bits of a word's flags.
ALPHA = 1  # holds a letter (\p{L})
CONTENT = 2  # holds a character that is not punctuation (text.NON_PUNCTUATION)

_CLASS_PATTERNS = (
    (_WORD, r"\w"),
    (_LETTER, r"\p{L}"),
    (_LOWER, r"\p{Ll}"),
    (_DIGIT, r"\d"),
    (_SPACE, r"\s"),
    (_PUNCT, _PUNCTUATION_CLASS),
    (_P, r"\p{P}"),
    (_UPPER, r"\p{Lu}"),
)
# Planes 4 to 13 hold no assigned character and 15 and 16 private use only: class 0 there.
_CLASSIFIED = ((0, 0xD800), (0xE000, 0x40000), (0xE0000, 0xF0000))


def every_character() -> tuple[np.ndarray, pl.Series]:
    """Every code point that may be assigned, and each as a one-character string: what the
    compiled code's character tables are made from, asking polars' Unicode tables."""
    code_points = np.concatenate([np.arange(a, b, dtype=np.uint32) for a, b in _CLASSIFIED])
    every_char = code_points.astype("<u4").tobytes().decode("utf-32-le")
    return code_points, pl.Series([every_char]).str.split("").explode()


@functools.cache
def char_classes() -> np.ndarray:
    """The class bits of every code point, as polars' regex engine classifies it."""
    return cached_table("word-scan-classes", _char_classes)


def _char_classes() -> np.ndarray:
    code_points, chars = every_character()
    table = np.zeros(0x110000, dtype=np.uint8)
    for bit, pattern in _CLASS_PATTERNS:
        table[code_points[chars.str.contains(pattern).to_numpy()]] |= bit
    return table


def _abbreviations() -> np.ndarray:
    words = ABBREVIATIONS.split("|")
    table = np.zeros((len(words), max(map(len, words))), dtype=np.int32)
    for row, word in enumerate(words):
        table[row, : len(word)] = [ord(c) for c in word]
    return table


_ABBREVIATIONS = _abbreviations()
_ABBREVIATION_LENGTHS = (_ABBREVIATIONS != 0).sum(axis=1).astype(np.int64)
# word_scan.c's _ABBREVIATION_TABLE arguments
_ABBREVIATION_ARGUMENTS = (_ABBREVIATIONS, _ABBREVIATION_LENGTHS, *_ABBREVIATIONS.shape)


# The arguments most of word_scan.c's functions start with: UTF-8 texts (bytes, offsets, their
# number) and the character classes, then, for those that find words, the abbreviations.
_TEXTS = [pointer(np.uint8), pointer(np.int64), I64, pointer(np.uint8)]
_ABBREVIATION_TABLE = [pointer(np.int32), pointer(np.int64), I64, I64]
# word_scan.c's functions: (return type, argument types)
_SIGNATURES = {
    "scan_words": (
        I64,
        [
            *_TEXTS,
            *_ABBREVIATION_TABLE,
            pointer(np.int64),
            pointer(np.uint32, nullable=True),
            pointer(np.uint64, nullable=True),
            pointer(np.uint8, nullable=True),
        ],
    ),
    "count_sentences": (ctypes.c_int, [*_TEXTS, *_ABBREVIATION_TABLE, pointer(np.int64)]),
    "text_totals": (None, [*_TEXTS, *[pointer(np.int64)] * 5]),
    "element_duplicates": (ctypes.c_int, [*_TEXTS, *[pointer(np.int64)] * 6]),
    "fineweb_line_counts": (
        ctypes.c_int,
        [
            *_TEXTS[:3],
            ctypes.c_char_p,
            pointer(np.int64),
            I64,
            pointer(np.uint8),
            I64,
            *[pointer(np.int64)] * 4,
        ],
    ),
    "c4_measure": (
        I64,
        [
            *_TEXTS,
            *_ABBREVIATION_TABLE,
            pointer(np.int64),
            ctypes.c_char_p,
            pointer(np.uint32, nullable=True),
            pointer(np.int64, nullable=True),
            pointer(np.uint8),
            pointer(np.int64),
            pointer(np.int8),
            pointer(np.int64),
            pointer(np.int64),
            pointer(np.uint32),
            I64,
            pointer(np.int64),
        ],
    ),
    "word_totals": (
        ctypes.c_int,
        [
            pointer(np.uint32),
            pointer(np.uint8),
            pointer(np.uint64),
            pointer(np.int64),
            I64,
            pointer(np.uint64),
            I64,
            *[pointer(np.int64)] * 4,
        ],
    ),
    "ngram_stats": (
        ctypes.c_int,
        [
            pointer(np.uint64),
            pointer(np.uint32),
            pointer(np.int64),
            pointer(np.float64),
            I64,
            pointer(np.int64),
            pointer(np.float64),
            I64,
            pointer(np.int64),
            pointer(np.float64),
            pointer(np.float64),
            I64,
            ctypes.c_int,
            pointer(np.int64),
            pointer(np.int64),
        ],
    ),
}


@functools.cache
def library() -> ctypes.CDLL:
    """word_scan.c, compiled."""
    return load(Path(__file__).with_name("libword_scan.so.1"), _SIGNATURES)


class Words(NamedTuple):
    """The words of each text, flattened in text order: each one's length in characters, hash
    (equal words of a text hash equally) and flags (``ALPHA``, ``CONTENT``)."""

    counts: np.ndarray  # words per text
    chars: np.ndarray
    hashes: np.ndarray
    flags: np.ndarray

    @property
    def doc(self) -> np.ndarray:
        """The text index of each word."""
        return np.repeat(np.arange(len(self.counts), dtype=np.uint32), self.counts)


def text_buffers(text: pl.Series | pa.Array | list[str]) -> tuple:
    """The UTF-8 bytes of the texts (null: empty), each one's byte offsets in them and their
    number: how the compiled code reads an Arrow string array, without a copy."""
    if isinstance(text, list):
        text = pa.array(text, pa.large_string())
    strings = text.fill_null("").to_arrow() if isinstance(text, pl.Series) else text
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    strings = strings.cast(pa.large_string())
    if strings.null_count:
        strings = strings.fill_null("")
    _, offsets, data = strings.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64)[strings.offset :][: len(strings) + 1]
    data = np.zeros(1, np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8)
    return data, np.ascontiguousarray(offsets), len(strings)


def _texts(text: pl.Series) -> tuple:
    """word_scan.c's ``_TEXTS`` arguments for ``text``: its buffers and the character
    classes."""
    return *text_buffers(text), char_classes()


def scan_words(text: pl.Series) -> Words:
    """The words of ``split_words(text)`` (null text: none)."""
    capacity = int(text.str.len_chars().sum() or 0)  # a word has a character at least
    chars = np.empty(capacity, dtype=np.uint32)
    hashes = np.empty(capacity, dtype=np.uint64)
    flags = np.empty(capacity, dtype=np.uint8)
    counts, found = _scan(text, chars, hashes, flags)
    return Words(counts, chars[:found].copy(), hashes[:found].copy(), flags[:found].copy())


def count_words(text: pl.Series) -> pl.Series:
    """The number of words of ``split_words(text)`` (null text: none), unsigned 32-bit."""
    return pl.Series(_scan(text, None, None, None)[0], dtype=pl.UInt32)


def word_counts_of(docs: pl.DataFrame) -> pl.Series:
    """Lengths of ``words_of(docs)``, counting without splitting where the chain has not split."""
    known = [docs[column].list.len() for column in WORD_LISTS if column in docs.columns]
    if not known:
        return count_words(segmented_text(docs))
    counts = known[0]
    for other in known[1:]:
        counts = counts.fill_null(other)
    if WORD_COUNTS in docs.columns:
        counts = counts.fill_null(docs[WORD_COUNTS])
    stale = counts.is_null().arg_true()
    if len(stale):
        counts = counts.scatter(stale, count_words(segmented_text(docs[stale])))
    return counts


def _scan(text: pl.Series, *words: np.ndarray | None) -> tuple[np.ndarray, int]:
    """Each text's word count and how many words were written to ``words`` (chars, hashes,
    flags; None: counted only)."""
    counts = np.zeros(len(text), dtype=np.int64)
    found = library().scan_words(*_texts(text), *_ABBREVIATION_ARGUMENTS, counts, *words)
    if found < 0:
        raise MemoryError("scanning words")
    return counts, found


# text_totals' counts, in order
TEXT_TOTALS = ("n_hash", "n_ellipsis", "n_lines", "n_bullet_lines", "n_ellipsis_lines")


def text_totals(text: pl.Series) -> dict[str, np.ndarray]:
    """Per text (null: empty): "#" and ellipses ("...", "…"; as ``count_matches`` counts them),
    lines (``str.splitlines()``), lines starting with "•" or "-" after whitespace and lines
    ending with an ellipsis before whitespace (``GopherQualityFilter``)."""
    totals = {name: np.zeros(len(text), dtype=np.int64) for name in TEXT_TOTALS}
    library().text_totals(*_texts(text), *totals.values())
    return totals


def element_duplicates(text: pl.Series) -> dict[str, np.ndarray]:
    """Per text (null: empty), datatrove's ``find_duplicates`` of its paragraphs (``para_``: the
    text stripped, split at runs of two newlines or more and at each NUL) and lines (``line_``:
    split at runs of newlines): ``n`` of them, ``dup`` repeating an earlier one, ``dup_chars``
    the characters of those (``GopherRepetitionFilter``)."""
    names = [f"{kind}_{stat}" for kind in ("para", "line") for stat in ("n", "dup", "dup_chars")]
    found = {name: np.zeros(len(text), dtype=np.int64) for name in names}
    if library().element_duplicates(*_texts(text), *found.values()):
        raise MemoryError("counting repeated lines")
    return found


FINEWEB_LINE_COUNTS = ("n_lines", "n_punct", "n_short", "dup_chars")


def fineweb_line_counts(
    text: pl.Series, stops: Iterable[str], short_length: int
) -> dict[str, np.ndarray]:
    """Per text (null: empty), ``FineWebQualityFilter``'s counts of its non-blank lines (split
    at each "\\n", not stripped; blank: only white space, as polars' ``strip_chars`` strips):
    all of them (``n_lines``), those ending with one of ``stops`` (``n_punct``), those of at most
    ``short_length`` characters (``n_short``), and the characters of those repeating an earlier
    line of the text (``dup_chars``, datatrove's ``find_duplicates``)."""
    stops = set(stops)
    every_line = "" in stops or not stops  # as the regex of no stop strings: every line
    encoded = sorted(stop.encode() for stop in stops if stop)
    found = {name: np.zeros(len(text), dtype=np.int64) for name in FINEWEB_LINE_COUNTS}
    stop_offsets = np.cumsum([0, *map(len, encoded)], dtype=np.int64)
    stop_bytes = np.zeros(256, dtype=np.uint8)
    stop_bytes[[stop[-1] for stop in encoded]] = 1
    data, offsets, n = text_buffers(text)
    if library().fineweb_line_counts(
        data, offsets, n, b"".join(encoded), stop_offsets, len(encoded), stop_bytes,
        short_length, *found.values(),
    ):  # fmt: skip
        raise MemoryError("counting FineWeb's lines")
    if every_line:
        found["n_punct"] = found["n_lines"].copy()
    return found


class C4Lines(NamedTuple):
    """``c4_lines``' findings, per text."""

    new_text: pl.Series
    fatal: np.ndarray  # 0, 1 + the index of its reason, or -1 (see c4_lines)
    sentences: np.ndarray
    removed_lines: pl.Series  # a list of line numbers per text
    lost_words: np.ndarray  # -1: unknown


def c4_lines(
    text: pl.Series, settings: list[int], phrases: list[str], to_remove: pl.Series | None = None
) -> C4Lines:
    """``C4QualityFilter``'s line rules over each text (null: empty), by compiled code
    (word_scan.c's c4_measure says what it finds; ``settings`` in its order), or, ``to_remove``
    given (a list of line numbers per text), those lines removed instead (``fatal`` -1: the
    numbers pass the text's last line)."""
    texts = _texts(text)
    data = texts[0]
    given = given_offsets = None
    if to_remove is not None:
        lists = to_remove.to_arrow()
        lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
        lists = lists.cast(pa.large_list(pa.uint32()))
        given = lists.flatten().to_numpy(zero_copy_only=False).astype(np.uint32)
        given_offsets = np.asarray(lists.offsets, dtype=np.int64) - lists.offsets[0].as_py()
    n = len(text)
    text_out = np.empty(max(len(data), 1), dtype=np.uint8)
    new_offsets = np.zeros(n + 1, dtype=np.int64)
    fatal = np.zeros(n, dtype=np.int8)
    sentences = np.zeros(n, dtype=np.int64)
    lost = np.zeros(n, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    capacity = int(np.count_nonzero(data == 10)) + n  # lines: "\n" breaks, most often
    while True:
        removed = np.empty(capacity, dtype=np.uint32)
        found = library().c4_measure(
            *texts, *_ABBREVIATION_ARGUMENTS, np.array(settings, dtype=np.int64),
            b"".join(phrase.encode() + b"\0" for phrase in phrases) + b"\0",
            given, given_offsets, text_out, new_offsets, fatal, sentences, lost, removed,
            capacity, counts,
        )  # fmt: skip
        if found == -1:
            raise MemoryError("judging C4's lines")
        if found >= 0:
            break
        capacity = -2 - found
    new_text = pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(new_offsets), pa.py_buffer(text_out[: new_offsets[-1]].copy())
    )
    removed_lines = uint32_lists(counts, removed[:found])
    return C4Lines(pl.from_arrow(new_text).cast(pl.String), fatal, sentences, removed_lines, lost)


def count_sentences(lines: pl.Series) -> np.ndarray:
    """Approximate number of spaCy sentences in each (stripped) line (null: empty): the matches
    of ``c4._SENTENCE_BOUNDARY``, plus one, once those of ``c4._NON_SENTENCE_PERIODS`` are
    removed (as ``str.replace_all(_NON_SENTENCE_PERIODS, "$1")`` does)."""
    counts = np.zeros(len(lines), dtype=np.int64)
    failed = library().count_sentences(*_texts(lines), *_ABBREVIATION_ARGUMENTS, counts)
    if failed:
        raise MemoryError("counting sentences")
    return counts


_FIELDS = ("chars", "hash", "flags")


def as_column(words: Words) -> pl.Series:
    """``words`` as a column of one list of (chars, hash, flags) per text."""
    offsets = np.zeros(len(words.counts) + 1, dtype=np.int64)
    np.cumsum(words.counts, out=offsets[1:])
    features = pa.StructArray.from_arrays(
        [pa.array(words.chars), pa.array(words.hashes), pa.array(words.flags)], names=_FIELDS
    )
    return pl.Series(WORD_FEATURES, pa.LargeListArray.from_arrays(pa.array(offsets), features))


def words_in(column: pl.Series) -> Words:
    """The ``Words`` of an ``as_column`` column (a null list: no words)."""
    lists = column.to_arrow()
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    flat = lists.flatten()
    counts = column.list.len().fill_null(0).to_numpy().astype(np.int64)
    # flatten(), not field(): it honours the struct array's own offset
    chars, hashes, flags = (field.to_numpy(zero_copy_only=False) for field in flat.flatten())
    return Words(counts, chars, hashes, flags)


def word_features_of(docs: pl.DataFrame) -> pl.Series:
    """``as_column(scan_words(text))``, computed once per chain (see ``text.WORD_FEATURES``)."""
    return per_text(docs, WORD_FEATURES, lambda rows: as_column(scan_words(segmented_text(rows))))


def with_words_for(flt, docs: pl.DataFrame) -> pl.DataFrame:
    """``docs`` with the split columns ``flt`` (a ``tokenmill.filters.protocol.Filter``) reads:
    ``uses_words``, ``uses_word_features``; and, for one that reads the text, the text of
    the documents in a language written without spaces as the scanners read it (segmented
    once for the chain)."""
    if flt.reads_text and segmented_languages(docs):
        docs = docs.with_columns(segmented_text(docs).alias(SEGMENTED))
    if flt.uses_words:
        docs = docs.with_columns(words_of(docs).alias(WORDS))
    if flt.uses_word_features:
        docs = docs.with_columns(word_features_of(docs))
    return docs


def hash_of(word: str) -> int:
    """The hash ``scan_words`` gives ``word``."""
    digest = 0xCBF29CE484222325
    for char in word:
        digest = ((digest ^ ord(char)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return digest
