"""The words of `text.split_words`, scanned by compiled code: each word's length, hash and
whether it holds a letter or a non-punctuation character, without making a string per word.

`split_words` runs the regex engine and materializes every word as a string; the filters that
count words only need these features of them. The scanner here follows `text.WORD_PATTERN` and
the joins before it (`text._JOINS`) alternative by alternative, as the regex engine's
leftmost-first search does; the Unicode classes it reads (\\w, \\p{L}, \\p{Ll}, \\d, \\s and
the punctuation) come from that same engine, asked once per code point (`char_classes`), so both
agree on every character. `tests/test_word_scan.py` holds them equal.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numba
import numpy as np
import polars as pl
import pyarrow as pa

from tokenmill.filters.text import (
    _PUNCTUATION_CLASS,
    ABBREVIATIONS,
    WORD_FEATURES,
    WORDS,
    per_text,
    words_of,
)

# Bits of a character's class (`char_classes`).
_WORD, _LETTER, _LOWER, _DIGIT, _SPACE, _PUNCT = 1, 2, 4, 8, 16, 32
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
)


@functools.cache
def char_classes() -> np.ndarray:
    """The class bits of every code point, as polars' regex engine classifies it (~0.4 s)."""
    code_points = np.arange(0x110000, dtype=np.uint32)
    code_points = code_points[(code_points < 0xD800) | (code_points > 0xDFFF)]
    every_char = code_points.astype("<u4").tobytes().decode("utf-32-le")
    chars = pl.Series([every_char]).str.split("").explode()
    table = np.zeros(0x110000, dtype=np.uint8)
    for bit, pattern in _CLASS_PATTERNS:
        table[code_points[chars.str.contains(pattern).to_numpy()]] |= bit
    return table


def _abbreviations() -> tuple[np.ndarray, np.ndarray]:
    words = ABBREVIATIONS.split("|")
    table = np.zeros((len(words), max(map(len, words))), dtype=np.int32)
    for row, word in enumerate(words):
        table[row, : len(word)] = [ord(c) for c in word]
    return table, np.array([len(w) for w in words], dtype=np.int64)


_ABBREVIATIONS, _ABBREVIATION_LENGTHS = _abbreviations()

# Code points the kernels compare with.
_APOSTROPHE, _RIGHT_QUOTE, _UNDERSCORE, _DOT, _HYPHEN, _SLASH = 39, 0x2019, 95, 46, 45, 47


@numba.njit(cache=True)
def _decode(data, start, end, out, kinds, cls):
    """UTF-8 bytes (valid: Arrow strings are) to code points and their classes; their
    number."""
    n = 0
    i = start
    while i < end:
        b = np.int32(data[i])
        if b < 0x80:
            c = b
            i += 1
        elif b < 0xE0:
            c = ((b & 0x1F) << 6) | (data[i + 1] & 0x3F)
            i += 2
        elif b < 0xF0:
            c = ((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)
            i += 3
        else:
            c = (
                ((b & 0x07) << 18)
                | ((data[i + 1] & 0x3F) << 12)
                | ((data[i + 2] & 0x3F) << 6)
                | (data[i + 3] & 0x3F)
            )
            i += 4
        out[n] = c
        kinds[n] = cls[c]
        n += 1
    return n


@numba.njit(cache=True)
def _elision(cp, kinds, n, i):
    """Length of text._ELISION matched at ``i`` (0: none), its alternatives in order."""
    if i >= n:
        return 0
    c = cp[i]
    if (97 <= c <= 122 and c not in (100, 108, 109, 114, 115, 116, 118)) or (
        65 <= c <= 90 and c not in (68, 76, 77, 82, 83, 84, 86)
    ):
        return 1  # [abcefghijknopquwxyzABCEFGHIJKNOPQUWXYZ]
    next_is_word = i + 1 < n and (kinds[i + 1] & _WORD) != 0
    third_is_word = i + 2 < n and (kinds[i + 2] & _WORD) != 0
    following = cp[i + 1] if i + 1 < n else -1
    if c in (115, 83, 100, 68, 109, 77, 116, 84) and next_is_word:
        return 2  # [sSdDmMtT]\w
    if c == 108 or c == 76:  # [lL](?:[lL]\w|[^\WlL])
        if (following == 108 or following == 76) and third_is_word:
            return 3
        if next_is_word and following != 108 and following != 76:
            return 2
    if c in (114, 82, 118, 86):  # [rRvV](?:[eE]\w|[^\WeE])
        if (following == 101 or following == 69) and third_is_word:
            return 3
        if next_is_word and following != 101 and following != 69:
            return 2
    if c >= 0x80 and (kinds[i] & _WORD) != 0:
        return 1  # [^\W\x00-\x7F]
    return 0


@numba.njit(cache=True)
def _join(cp, kinds, n, joined):
    """text._joined in place: each pattern replaces, left to right without overlaps, its
    joining character by "_" (same length: word offsets stay)."""
    i = 0
    while i + 2 < n:  # (\w)['’](ELISION)
        if (cp[i + 1] == _APOSTROPHE or cp[i + 1] == _RIGHT_QUOTE) and (kinds[i] & _WORD):
            length = _elision(cp, kinds, n, i + 2)
            if length:
                cp[i + 1] = _UNDERSCORE
                kinds[i + 1] = joined
                i += 2 + length
                continue
        i += 1
    i = 0
    while i + 2 < n:  # (\w)[\[({](\w)
        joint = cp[i + 1]
        if (
            (joint == 91 or joint == 40 or joint == 123)
            and (kinds[i] & _WORD)
            and (kinds[i + 2] & _WORD)
        ):
            cp[i + 1] = _UNDERSCORE
            kinds[i + 1] = joined
            i += 3
            continue
        i += 1
    i = 0
    while i + 2 < n:  # (\p{L})-(\d)
        if cp[i + 1] == _HYPHEN and (kinds[i] & _LETTER) and (kinds[i + 2] & _DIGIT):
            cp[i + 1] = _UNDERSCORE
            kinds[i + 1] = joined
            i += 3
            continue
        i += 1


@numba.njit(cache=True)
def _url_end(cp, kinds, n, i):
    """End of (?:https?://|www\\.)\\S*[^\\s.,;:!?'"()\\[\\]{}<>] matched at ``i`` (0: none)."""
    c = cp[i]
    start = 0
    if c == 104 and i + 7 <= n and cp[i + 1] == 116 and cp[i + 2] == 116 and cp[i + 3] == 112:
        colon = i + 5 if cp[i + 4] == 115 else i + 4  # https? (an "s" when there is one)
        if colon + 3 <= n and cp[colon] == 58 and cp[colon + 1] == 47 and cp[colon + 2] == 47:
            start = colon + 3
    elif c == 119 and i + 4 <= n and cp[i + 1] == 119 and cp[i + 2] == 119 and cp[i + 3] == 46:
        start = i + 4
    end = 0
    j = start
    while start and j < n and not (kinds[j] & _SPACE):
        if cp[j] not in (46, 44, 59, 58, 33, 63, 39, 34, 40, 41, 91, 93, 123, 125, 60, 62):
            end = j + 1
        j += 1
    return end


@numba.njit(cache=True)
def _scan_doc(cp, kinds, n, abbreviations, lengths, chars, hashes, flags, w):
    """Words of one joined text, appended from ``w`` on: WORD_PATTERN's alternatives tried in
    order at each non-space position (the last, \\S, always matches). Returns the new ``w``.
    Written as one function: a call per word passing arrays costs more than the scan."""
    longest_abbreviation = abbreviations.shape[1]
    i = 0
    while i < n:
        c = cp[i]
        kind = kinds[i]
        if kind & _SPACE:
            i += 1
            continue
        end = 0
        if c == 104 or c == 119:  # h, w: a URL
            end = _url_end(cp, kinds, n, i)
        if not end and (kind & _LETTER) and i + 1 < n and cp[i + 1] == _DOT:
            pairs = 1  # (?:\p{L}\.){2,}|\p{L}\.
            while i + 2 * pairs + 1 < n and (kinds[i + 2 * pairs] & _LETTER):
                if cp[i + 2 * pairs + 1] != _DOT:
                    break
                pairs += 1
            end = i + 2 * pairs
        if not end and (kind & _WORD):
            j = i + 1
            while j < n and (kinds[j] & _WORD):
                j += 1
            # (?:ABBREVIATIONS)\.: they are word characters only, so they are the whole run
            if j < n and cp[j] == _DOT and j - i <= longest_abbreviation:
                for row in range(abbreviations.shape[0]):
                    if lengths[row] == j - i:
                        same = True
                        for k in range(j - i):
                            if cp[i + k] != abbreviations[row, k]:
                                same = False
                                break
                        if same:
                            end = j + 1
                            break
            if not end:  # \w+(?:(?:[.,:/]\d|\.\p{Ll}|[@&]\w)\w*)*
                while j + 1 < n:
                    joint = cp[j]
                    after = kinds[j + 1]
                    if (
                        (joint in (46, 44, 58, 47) and (after & _DIGIT))
                        or (joint == _DOT and (after & _LOWER))
                        or ((joint == 64 or joint == 38) and (after & _WORD))
                    ):
                        j += 2
                        while j < n and (kinds[j] & _WORD):
                            j += 1
                    else:
                        break
                end = j
        if not end and c in (_APOSTROPHE, _RIGHT_QUOTE) and i + 1 < n:
            second = cp[i + 1]  # ['’](?:[sSdDmMtT]|ll|LL|re|RE|ve|VE)
            third = cp[i + 2] if i + 2 < n else -1
            if second in (115, 83, 100, 68, 109, 77, 116, 84):
                end = i + 2
            elif (
                (second == 108 and third == 108)
                or (second == 76 and third == 76)
                or ((second == 114 or second == 118) and third == 101)
                or ((second == 82 or second == 86) and third == 69)
            ):
                end = i + 3
        if not end and c in (_DOT, _HYPHEN, _SLASH):
            j = i + 1  # \.{2,}|-{2,}|/{2,}
            while j < n and cp[j] == c:
                j += 1
            if j - i >= 2:
                end = j
        if not end and c == _APOSTROPHE and i + 1 < n and cp[i + 1] == _APOSTROPHE:
            end = i + 2  # ''
        if not end:
            end = i + 1  # \S
        digest = np.uint64(0xCBF29CE484222325)  # FNV-1a over the code points
        word_flags = 0
        for k in range(i, end):
            digest = (digest ^ np.uint64(cp[k])) * np.uint64(0x100000001B3)
            char_class = kinds[k]
            if char_class & _LETTER:
                word_flags |= ALPHA
            if not (char_class & _PUNCT):
                word_flags |= CONTENT
        chars[w] = end - i
        hashes[w] = digest
        flags[w] = word_flags
        w += 1
        i = end
    return w


@numba.njit(cache=True)
def _scan(data, offsets, cls, abbreviations, lengths):
    n_docs = len(offsets) - 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    cp = np.empty(longest + 1, dtype=np.int32)
    kinds = np.empty(longest + 1, dtype=np.uint8)
    capacity = max(16, (offsets[n_docs] - offsets[0]) // 4)
    counts = np.zeros(n_docs, dtype=np.int64)
    chars = np.empty(capacity, dtype=np.uint32)
    hashes = np.empty(capacity, dtype=np.uint64)
    flags = np.empty(capacity, dtype=np.uint8)
    w = 0
    for d in range(n_docs):
        n = _decode(data, offsets[d], offsets[d + 1], cp, kinds, cls)
        _join(cp, kinds, n, cls[_UNDERSCORE])
        if w + n > capacity:  # a text has at most one word per character
            capacity = max(2 * capacity, w + n)
            chars = _grown(chars, w, capacity)
            hashes = _grown(hashes, w, capacity)
            flags = _grown(flags, w, capacity)
        before = w
        w = _scan_doc(cp, kinds, n, abbreviations, lengths, chars, hashes, flags, before)
        counts[d] = w - before
    return counts, chars[:w].copy(), hashes[:w].copy(), flags[:w].copy()


@numba.njit(cache=True)
def _grown(values, used, capacity):
    grown = np.empty(capacity, dtype=values.dtype)
    grown[:used] = values[:used]
    return grown


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


def scan_words(text: pl.Series) -> Words:
    """The words of ``split_words(text)`` (null text: none)."""
    strings = text.fill_null("").to_arrow()
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    strings = strings.cast(pa.large_string())
    _, offsets, data = strings.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64)[strings.offset :][: len(strings) + 1]
    data = np.zeros(1, np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8)
    return Words(*_scan(data, offsets, char_classes(), _ABBREVIATIONS, _ABBREVIATION_LENGTHS))


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
    chars, hashes, flags = (flat.field(name).to_numpy(zero_copy_only=False) for name in _FIELDS)
    return Words(counts, chars, hashes, flags)


def word_features_of(docs: pl.DataFrame) -> pl.Series:
    """``as_column(scan_words(text))``, computed once per chain (see ``text.WORD_FEATURES``)."""
    return per_text(docs, WORD_FEATURES, lambda text: as_column(scan_words(text)))


def with_words_for(flt, docs: pl.DataFrame) -> pl.DataFrame:
    """``docs`` with the split columns ``flt`` reads (``uses_words``, ``uses_word_features``)."""
    if getattr(flt, "uses_words", False):
        docs = docs.with_columns(words_of(docs).alias(WORDS))
    if getattr(flt, "uses_word_features", False):
        docs = docs.with_columns(word_features_of(docs))
    return docs


def hash_of(word: str) -> int:
    """The hash ``scan_words`` gives ``word``."""
    digest = 0xCBF29CE484222325
    for char in word:
        digest = ((digest ^ ord(char)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return digest
