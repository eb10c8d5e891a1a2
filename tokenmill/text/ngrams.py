"""Normalized words and their n-grams: how decontamination compares a document with an evaluation
set, whatever their casing, punctuation, line wrapping or Unicode form.

A word is a run of letters, marks and digits, each character folded (NFKC, then lower case);
everything else (punctuation, symbols, white space) only separates words. A character of a script
written without spaces (Han, Kana, Thai, Lao, Khmer, Myanmar, Tibetan, Yi) is a word by itself
with the marks that follow it: a language's word segmenter cuts a passage differently inside a
longer page than alone, characters never do. Words hash to 64 bits (FNV-1a of their folded
characters), n-grams to 64 bits from their words' hashes. The compiled code (`ngrams.c`) does the
scanning; the character tables come from polars' Unicode tables, asked once per code point.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa

from tokenmill.native import I64, load, pointer
from tokenmill.text.code_point_tables import cached_table
from tokenmill.text.word_scan import every_character, text_buffers

WORD, SINGLE, MARK = 1, 2, 4  # ngrams.c's character classes
UNSPACED_SCRIPTS = (
    "Han",
    "Hiragana",
    "Katakana",
    "Thai",
    "Lao",
    "Khmer",
    "Myanmar",
    "Tibetan",
    "Yi",
)
# a table's bitmap: this many bits per n-gram at least (a lookup in 16 to 32 finds a bit set
# for another n-gram at most once), between these powers of two
_BITS_PER_NGRAM = 16
_MIN_BITS, _MAX_BITS = 12, 40

_TEXTS = [pointer(np.uint8), pointer(np.int64), I64, pointer(np.uint8), pointer(np.int32)]
_SIGNATURES = {
    "text_words": (
        I64,
        [
            *_TEXTS,
            pointer(np.uint64),
            pointer(np.int64),
            pointer(np.int64, nullable=True),
            pointer(np.int64, nullable=True),
        ],
    ),
    "word_ngrams": (
        I64,
        [pointer(np.uint64), pointer(np.int64), I64, I64, pointer(np.uint64), pointer(np.int64)],
    ),
    "find_ngrams": (
        I64,
        [
            *_TEXTS,
            I64,
            pointer(np.uint64),
            I64,
            pointer(np.uint64),
            I64,
            *[pointer(np.int64)] * 3,
            I64,
        ],
    ),
}


@functools.cache
def library():
    """ngrams.c, compiled."""
    return load(Path(__file__).with_name("libngrams.so.1"), _SIGNATURES)


@functools.cache
def character_classes() -> np.ndarray:
    """Each code point's class bits (WORD, SINGLE, MARK)."""
    return cached_table("ngram-classes", _character_classes)


def _character_classes() -> np.ndarray:
    code_points, chars = every_character()
    table = np.zeros(0x110000, dtype=np.uint8)
    word = chars.str.contains(r"[\p{L}\p{M}\p{N}]").to_numpy()
    mark = chars.str.contains(r"\p{M}").to_numpy()
    scripts = "".join(rf"\p{{{script}}}" for script in UNSPACED_SCRIPTS)
    single = chars.str.contains(f"[{scripts}]").to_numpy() & word & ~mark
    table[code_points] = word * WORD | single * SINGLE | mark * MARK
    return table


@functools.cache
def fold_table() -> np.ndarray:
    """Each code point's folded form (NFKC, then lower case) where that is one code point; the
    code point itself otherwise."""
    return cached_table("ngram-folds", _fold_table)


def _fold_table() -> np.ndarray:
    code_points, chars = every_character()
    folded = chars.str.normalize("NFKC").str.to_lowercase()
    single = (folded.str.len_chars() == 1).to_numpy()
    table = np.arange(0x110000, dtype=np.int32)
    table[code_points[single]] = np.frombuffer(
        "".join(folded.filter(pl.Series(single)).to_list()).encode("utf-32-le"), dtype="<u4"
    )
    return table


def _texts(texts: pl.Series | pa.Array | list[str]) -> tuple:
    """ngrams.c's text arguments: the texts' buffers and the two tables."""
    return *text_buffers(texts), character_classes(), fold_table()


class Words(NamedTuple):
    """The words of texts, flattened in text order."""

    counts: np.ndarray  # words per text
    hashes: np.ndarray  # uint64
    starts: np.ndarray | None  # character offsets in its text
    ends: np.ndarray | None


def text_words(texts: pl.Series | pa.Array | list[str], offsets: bool = False) -> Words:
    """Each text's normalized words: hashes and, with ``offsets``, where each one starts and
    ends (characters into its text)."""
    arguments = _texts(texts)
    room = max(int(arguments[1][-1] - arguments[1][0]), 1)
    hashes = np.empty(room, dtype=np.uint64)
    counts = np.empty(arguments[2], dtype=np.int64)
    starts = np.empty(room, dtype=np.int64) if offsets else None
    ends = np.empty(room, dtype=np.int64) if offsets else None
    total = library().text_words(*arguments, hashes, counts, starts, ends)
    return Words(
        counts,
        hashes[:total].copy(),
        None if starts is None else starts[:total].copy(),
        None if ends is None else ends[:total].copy(),
    )


def word_ngrams(hashes: np.ndarray, counts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The hashes of every n-gram of each group of words (``counts`` words per group, their
    ``hashes`` in order) and the number of n-grams per group."""
    hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    out = np.empty(max(len(hashes), 1), dtype=np.uint64)
    per_group = np.empty(len(counts), dtype=np.int64)
    total = library().word_ngrams(hashes, counts, len(counts), n, out, per_group)
    return out[:total].copy(), per_group


class Matches(NamedTuple):
    """N-grams of texts found in a table: per match, the text, its first word and the entry."""

    doc: np.ndarray
    word: np.ndarray
    entry: np.ndarray


class NgramTable:
    """The n-grams of a set, to find in texts: their hashes sorted (``entry``: an n-gram's place
    among them; ``order[entry]``: its place in the hashes given) and a bitmap of their top bits,
    16 to 32 bits per n-gram, which answers most lookups of an absent n-gram in one memory
    read. Memory: 8 bytes per n-gram (and as many for ``order``) plus 2 to 4 for the bitmap."""

    def __init__(self, ngrams: np.ndarray, n: int):
        self.n = n
        self.order = np.argsort(ngrams, kind="stable")
        self.sorted = np.ascontiguousarray(ngrams[self.order], dtype=np.uint64)
        wanted = max(len(self.sorted), 1) * _BITS_PER_NGRAM
        self.bits = min(max(int(np.ceil(np.log2(wanted))), _MIN_BITS), _MAX_BITS)
        self.bitmap = np.zeros(1 << (self.bits - 6), dtype=np.uint64)
        top = self.sorted >> np.uint64(64 - self.bits)
        np.bitwise_or.at(self.bitmap, top >> np.uint64(6), np.uint64(1) << (top & np.uint64(63)))

    @property
    def nbytes(self) -> int:
        return self.sorted.nbytes + self.order.nbytes + self.bitmap.nbytes

    def find(self, texts: pl.Series | pa.Array | list[str]) -> Matches:
        arguments = _texts(texts)
        capacity = 64
        while True:
            doc, word, entry = (np.empty(capacity, dtype=np.int64) for _ in range(3))
            found = library().find_ngrams(
                *arguments, self.n, self.bitmap, self.bits, self.sorted, len(self.sorted),
                doc, word, entry, capacity,
            )  # fmt: skip
            if found < 0:
                raise MemoryError("n-gram search: out of memory")
            if found <= capacity:
                return Matches(doc[:found], word[:found], entry[:found])
            capacity = found
