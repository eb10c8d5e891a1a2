"""MinHash signatures, LSH band keys and exact-duplicate hashes (FineWeb-style, datasketch-exact).

Pipeline per document: ``normalize`` (steps chosen by a ``TextNorm``) -> word n-gram shingles ->
32/64-bit shingle hash -> ``num_perm`` datasketch permutations -> per-permutation minimum.
Everything after normalization runs vectorized with numpy over a whole batch of documents.

Compatibility contract: for every text,

    MinHasher(num_perm, ngram, seed, scheme, norm).signatures([text])[0]
    == datasketch.MinHash(num_perm=num_perm, seed=seed, scheme=scheme, hashfunc=hasher.hashfunc)
       .update_batch([s.encode("utf-8") for s in shingles(text, ngram, norm)]).hashvalues

where ``hasher.hashfunc`` is ``shingle_hash32`` (schemes "affine32" and "legacy") or
``shingle_hash64`` ("affine64"): plain functions of the shingle's UTF-8 bytes.

Scheme "datatrove" instead reproduces datatrove's ``MinhashDedupSignature`` with
``HashConfig(64, "sha1")`` (FineWeb's): for the same word n-grams, the same signature.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, NamedTuple

import numpy as np
import xxhash

Scheme = Literal["affine32", "affine64", "legacy", "datatrove"]
SCHEMES = ("affine32", "affine64", "legacy", "datatrove")

# ---------------------------------------------------------------------------------------------
# Normalization
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextNorm:
    """The optional steps of ``normalize``, both on by default as in datatrove's ``simplify_text``
    (FineWeb's MinHash normalization, ``TextNormConfig`` defaults):

    ``norm_numbers``: every number (decimal digits, optionally one decimal separator and more
    digits: datatrove's pattern) becomes "0", so pages differing only in dates, counters or
    prices are near-duplicates.
    ``norm_diacritics``: each character is replaced by its canonical decomposition without
    nonspacing marks (Unicode category Mn), "é" -> "e", if that leaves at most one character
    (Hangul syllables, which would leave their jamo, stay whole: the same words either way). In
    scripts that write vowels or viramas as marks (Indic, Thai, Hebrew points, ...) this deletes
    them too, as datatrove does.

    Both are table lookups and one numpy pass, not string rewrites: normalizing costs the same
    with or without them.
    """

    norm_numbers: bool = True
    norm_diacritics: bool = True


FINEWEB_NORM = TextNorm()
PLAIN_NORM = TextNorm(norm_numbers=False, norm_diacritics=False)  # tokenmill's norm until 2026-11

_SPACE = 32
_ZERO = ord("0")
_DROPPED = 0xFFFFFFFF  # marks format characters in the code point table; never a code point

# Characters whose NFKD form is plain ASCII. Replacing them by that form before NFKC cannot change
# the NFKC result (NFKC decomposes them to exactly this anyway), but it lets the common
# no-break-space / ellipsis documents pass the cheap "already normalized" check.
_ASCII_COMPAT_CHARS = "\xa0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u2026"
_ASCII_COMPAT = tuple((ch, unicodedata.normalize("NFKD", ch)) for ch in _ASCII_COMPAT_CHARS)

# str.lower() is a per-character table lookup except for these two: U+0130 lowers to two
# characters and capital sigma depends on its context (final sigma). Texts containing them are
# lowered by Python; lowering is idempotent, so the table lookup afterwards changes nothing.
_CONTEXTUAL_LOWER = ("\u0130", "\u03a3")


def _is_separator(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] in "PSZ" or category in ("Cc", "Cs") or char.isspace()


# Planes 4-13 are unassigned and planes 15-16 private use: every code point there maps to
# itself, so the table build skips them (tests check this against the full range).
_MAPPED_RANGES = (range(0x40000), range(0xE0000, 0xF0000))


def _without_marks(char: str) -> str:
    """datatrove's diacritics step ("NFD, then delete Mn") for one character, kept to at most
    one character: a character that would leave several (a Hangul syllable's jamo) stays whole,
    which changes no word boundary and so no Jaccard."""
    kept = "".join(c for c in unicodedata.normalize("NFD", char) if unicodedata.category(c) != "Mn")
    return kept if len(kept) <= 1 else char


def _table_entry(code_point: int, norm: TextNorm = PLAIN_NORM) -> int:
    lowered = chr(code_point).lower()
    if len(lowered) != 1:  # U+0130, lowered by Python beforehand
        return code_point
    if norm.norm_diacritics:
        lowered = _without_marks(lowered)
        if not lowered:
            return _DROPPED
    if _is_separator(lowered):
        return _SPACE
    category = unicodedata.category(lowered)
    if category == "Cf":
        return _DROPPED
    if norm.norm_numbers and category == "Nd":
        return _ZERO
    return ord(lowered)


@functools.cache
def _code_point_table(norm: TextNorm = PLAIN_NORM) -> np.ndarray:
    """Code point -> its lowercase code point, ``_SPACE`` for separators, ``_DROPPED`` for Cf;
    per ``norm``, without its marks (``_DROPPED`` if nothing remains) and digits as "0"."""
    table = np.arange(sys.maxunicode + 1, dtype=np.uint32)
    for code_points in _MAPPED_RANGES:
        table[code_points.start : code_points.stop] = [_table_entry(c, norm) for c in code_points]
    return table


@functools.cache
def _ascii_table(norm: TextNorm) -> np.ndarray:
    return _code_point_table(norm)[:128].astype(np.uint8)


def _nfkc_line(line: str) -> str:
    return line if unicodedata.is_normalized("NFKC", line) else unicodedata.normalize("NFKC", line)


def _nfkc(text: str) -> str:
    """NFKC, plus Python's lower() where a table lookup cannot replace it.

    NFKC runs per line: a newline neither reorders nor composes with its neighbours, so
    NFKC(a + "\\n" + b) == NFKC(a) + "\\n" + NFKC(b), and only lines that need it pay for it.
    """
    if text.isascii():
        return text
    for char, replacement in _ASCII_COMPAT:
        if char in text:
            text = text.replace(char, replacement)
    if not unicodedata.is_normalized("NFKC", text):
        text = "\n".join(map(_nfkc_line, text.split("\n")))
    if any(char in text for char in _CONTEXTUAL_LOWER):
        text = text.lower()
    return text


def _code_points(joined: str) -> np.ndarray:
    """uint8 if all ASCII, else uint32."""
    if joined.isascii():
        return np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _mapped_code_points(code_points: np.ndarray, norm: TextNorm) -> np.ndarray:
    """Lowercased code points with separators as ``_SPACE``, per ``_code_point_table``."""
    if code_points.dtype == np.uint8:
        return _ascii_table(norm)[code_points]
    return _code_point_table(norm)[code_points]


# datatrove's NUMBERS_PATTERN is \p{Nd}+([.,،٫⎖⎗⎘]\p{Nd}+)?: one of these between two digit runs
# joins them into one number.
_DECIMAL_SEPARATORS = np.array([ord(c) for c in ".,\u060c\u066b\u2396\u2397\u2398"], np.uint32)


def _mark_number_tails(mapped, code_points, offsets, deleted: np.ndarray) -> None:
    """Mark in ``deleted`` what goes so that every number leaves one "0" (the table already
    made every digit "0"), exactly as datatrove's pattern substituted left to right: a match is
    a digit run, plus a decimal separator and the next run if present. In a chain run, sep,
    run, sep, run, ... the 2nd, 4th, ... runs join the match before them; the other
    separators stay."""
    digit = mapped == _ZERO
    if not digit.any():
        return
    doc_start = np.zeros(len(mapped) + 1, dtype=bool)
    doc_start[offsets[:-1]] = True
    continues = np.zeros(len(mapped), dtype=bool)
    continues[1:] = digit[:-1] & ~doc_start[1:-1]
    run_starts = np.flatnonzero(digit & ~continues)
    before = run_starts[run_starts >= 2]
    bridged = np.zeros(len(run_starts), dtype=bool)
    bridged[len(run_starts) - len(before) :] = (
        digit[before - 2]
        & np.isin(code_points[before - 1], _DECIMAL_SEPARATORS)
        & ~doc_start[before]
        & ~doc_start[before - 1]
    )
    runs = np.arange(len(run_starts))
    chain_position = runs - np.maximum.accumulate(np.where(bridged, 0, runs))
    joined = run_starts[chain_position % 2 == 1]
    deleted |= digit & continues
    deleted[joined] = True
    deleted[joined - 1] = True


def _lengths_to_offsets(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _remove(values: np.ndarray, positions: np.ndarray, offsets: np.ndarray):
    """Delete sorted ``positions`` from ``values`` and shift the document offsets to match."""
    return np.delete(values, positions), offsets - np.searchsorted(positions, offsets)


def _collapse_spaces(mapped: np.ndarray, offsets: np.ndarray):
    """Space runs -> one space; none at the start or end of a document."""
    starts, stops = offsets[:-1], offsets[1:]
    nonempty = stops > starts
    is_space = mapped == _SPACE
    # A space survives if it ends a run and a word follows it in the same document ...
    survives = is_space.copy()
    survives[:-1] &= ~is_space[1:]
    survives[stops[nonempty] - 1] = False
    # ... unless that run leads its document.
    survivors = np.flatnonzero(survives)
    leading_docs = np.flatnonzero(nonempty)
    leading_docs = leading_docs[is_space[starts[leading_docs]]]
    first_survivor = np.searchsorted(survivors, starts[leading_docs])
    in_doc = first_survivor < len(survivors)
    in_doc[in_doc] = survivors[first_survivor[in_doc]] < stops[leading_docs[in_doc]]
    survives[survivors[first_survivor[in_doc]]] = False
    return _remove(mapped, np.flatnonzero(is_space & ~survives), offsets)


def _to_utf8(code_points: np.ndarray, char_offsets: np.ndarray) -> tuple[bytes, np.ndarray]:
    if code_points.dtype == np.uint8:
        return code_points.tobytes(), char_offsets
    utf8 = code_points.tobytes().decode("utf-32-le").encode("utf-8")
    return utf8, _byte_offsets(code_points, char_offsets)


def _byte_offsets(code_points: np.ndarray, char_offsets: np.ndarray) -> np.ndarray:
    """Where each code point offset falls in the UTF-8 encoding of ``code_points``."""
    if code_points.dtype == np.uint8:
        return char_offsets
    byte_offsets = char_offsets.copy()
    wide = np.flatnonzero(code_points >= 0x80)
    for extra_byte_from in (0x800, 0x10000):
        byte_offsets += np.searchsorted(wide, char_offsets)
        wide = wide[code_points[wide] >= extra_byte_from]
    byte_offsets += np.searchsorted(wide, char_offsets)
    return byte_offsets


def _as_str_list(texts: Iterable[str | None]) -> list[str]:
    if hasattr(texts, "to_pylist"):  # pyarrow arrays
        texts = texts.to_pylist()
    return [text or "" for text in texts]


def normalize_code_points(
    texts: Iterable[str | None], norm: TextNorm = FINEWEB_NORM
) -> tuple[np.ndarray, np.ndarray]:
    """Normalize a batch: the code points of all normalized texts concatenated (uint8 if the
    batch is ASCII, else uint32), plus n+1 offsets into them."""
    prepared = [_nfkc(text) for text in _as_str_list(texts)]
    offsets = _lengths_to_offsets(np.fromiter(map(len, prepared), np.int64, len(prepared)))
    code_points = _code_points("".join(prepared))
    mapped = _mapped_code_points(code_points, norm)
    deleted = mapped == _DROPPED
    if norm.norm_numbers:
        _mark_number_tails(mapped, code_points, offsets, deleted)
    if deleted.any():
        mapped, offsets = _remove(mapped, np.flatnonzero(deleted), offsets)
    return _collapse_spaces(mapped, offsets)


def normalize_utf8(
    texts: Iterable[str | None], norm: TextNorm = FINEWEB_NORM
) -> tuple[bytes, np.ndarray]:
    """Normalize a batch: all normalized texts as one UTF-8 buffer, plus n+1 byte offsets."""
    return _to_utf8(*normalize_code_points(texts, norm))


def normalize_batch(texts: Iterable[str | None], norm: TextNorm = FINEWEB_NORM) -> list[str]:
    """``normalize`` over many texts at once (``None`` counts as the empty text)."""
    data, offsets = normalize_utf8(texts, norm)
    return [data[start:stop].decode() for start, stop in pairwise(offsets)]


def normalize(text: str, norm: TextNorm = FINEWEB_NORM) -> str:
    """Canonical form used for both exact-duplicate hashing and shingling.

    1. Unicode NFKC (compatibility forms: full-width letters, ligatures, no-break spaces, ...).
    2. If ``norm.norm_numbers``: each number becomes "0" (see ``TextNorm``).
    3. ``str.lower()``; if ``norm.norm_diacritics``, each character loses its nonspacing marks
       (see ``TextNorm``).
    4. Every punctuation (P*), symbol (S*), separator (Z*), control (Cc) or surrogate (Cs)
       character, and anything ``str.isspace()`` accepts, becomes a space, so words glued by
       punctuation ("end.Next") stay separate words; format characters (Cf: soft hyphen,
       zero-width joiner, BOM, ...) are deleted. Character classes come from Python's
       ``unicodedata`` tables.
    5. Runs of spaces collapse to one ASCII space; none remain at either end.

    The result is words separated by single spaces; the empty string if no word remains.
    """
    return normalize_batch([text], norm)[0]


def shingles(text: str, ngram: int = 5, norm: TextNorm = FINEWEB_NORM) -> list[str]:
    """Word n-grams of ``normalize(text, norm)``, in order, repeats kept.

    A text with fewer than ``ngram`` words yields one shingle of all its words; a text with no
    words yields none.
    """
    normalized = normalize(text, norm)
    if not normalized:
        return []
    words = normalized.split(" ")
    count = max(len(words) - ngram + 1, 1)
    return [" ".join(words[i : i + ngram]) for i in range(count)]


def content_hashes(texts: Iterable[str | None], norm: TextNorm = FINEWEB_NORM) -> np.ndarray:
    """xxh3_64 of each normalized text's UTF-8 bytes (uint64): equal for exact duplicates."""
    return _utf8_hashes(*normalize_utf8(texts, norm))


def _utf8_hashes(data: bytes, offsets: np.ndarray) -> np.ndarray:
    view = memoryview(data)
    hashes = [xxhash.xxh3_64_intdigest(view[a:b]) for a, b in pairwise(offsets)]
    return np.array(hashes, dtype=np.uint64)


# ---------------------------------------------------------------------------------------------
# Shingle hash: fmix64(polynomial hash of the code points + length mix)
# ---------------------------------------------------------------------------------------------

_MASK64 = (1 << 64) - 1
_POLY_BASE = 0x9E3779B97F4A7C15  # odd, hence invertible modulo 2**64
_POLY_BASE_INV = pow(_POLY_BASE, -1, 1 << 64)
_LENGTH_MIX = 0xD6E8FEB86659FD93
_FMIX64 = (33, 0xFF51AFD7ED558CCD, 33, 0xC4CEB9FE1A85EC53, 33)
_FMIX32 = (16, 0x85EBCA6B, 13, 0xC2B2AE35, 16)


def _fmix64_int(h: int) -> int:
    s1, m1, s2, m2, s3 = _FMIX64
    h = ((h ^ (h >> s1)) * m1) & _MASK64
    h = ((h ^ (h >> s2)) * m2) & _MASK64
    return h ^ (h >> s3)


def shingle_hash64(data: bytes) -> int:
    """64-bit shingle hash of UTF-8 bytes. With c_0..c_{m-1} the code points they decode to:
    fmix64(sum(c_i * BASE**(m-1-i)) + m * MIX) mod 2**64.

    The polynomial form is what makes it vectorizable: the hash of any range of a code point
    buffer follows from one prefix sum over the buffer (see ``_range_poly_hashes``), and working
    on code points spares re-encoding the normalized batch to UTF-8.
    """
    poly = 0
    code_points = data.decode("utf-8", "surrogateescape")
    for char in code_points:
        poly = (poly * _POLY_BASE + ord(char)) & _MASK64
    return _fmix64_int((poly + len(code_points) * _LENGTH_MIX) & _MASK64)


def shingle_hash32(data: bytes) -> int:
    """32-bit shingle hash: the high half of ``shingle_hash64``."""
    return shingle_hash64(data) >> 32


def sha1_hash64(data: bytes) -> int:
    """datatrove's 64-bit shingle hash: the first 8 bytes of SHA-1, little-endian."""
    return int.from_bytes(hashlib.sha1(data).digest()[:8], "little")


def _range_sha1_hashes64(code_points: np.ndarray, starts: np.ndarray, stops: np.ndarray):
    """``sha1_hash64`` of the UTF-8 bytes of code_points[start:stop] for each range."""
    utf8, byte_starts = _to_utf8(code_points, starts)
    byte_stops = _byte_offsets(code_points, stops)
    view = memoryview(utf8)
    digests = b"".join(
        hashlib.sha1(view[a:b]).digest()[:8]
        for a, b in zip(byte_starts.tolist(), byte_stops.tolist(), strict=True)
    )
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


def _fmix(values: np.ndarray) -> np.ndarray:
    """MurmurHash3 finalizer over a uint32 or uint64 array (wraparound intended)."""
    dtype = values.dtype.type
    s1, m1, s2, m2, s3 = map(dtype, _FMIX64 if values.dtype == np.uint64 else _FMIX32)
    values = (values ^ (values >> s1)) * m1
    values = (values ^ (values >> s2)) * m2
    return values ^ (values >> s3)


def _geometric(ratio: int, size: int) -> np.ndarray:
    series = np.full(size, ratio, dtype=np.uint64)
    series[0] = 1
    return np.cumprod(series, dtype=np.uint64)


class _PowerTable:
    """BASE**i and BASE**-i mod 2**64 for i < size, grown on demand (thread-safe: a grown
    table replaces the old pair in one assignment)."""

    def __init__(self) -> None:
        self._tables = (np.ones(1, dtype=np.uint64), np.ones(1, dtype=np.uint64))

    def get(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        tables = self._tables
        if size > len(tables[0]):
            size = max(size, 2 * len(tables[0]))
            tables = (_geometric(_POLY_BASE, size), _geometric(_POLY_BASE_INV, size))
            self._tables = tables
        return tables


_POWER_TABLE = _PowerTable()


def _range_poly_hashes(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Polynomial hash of data[start:stop] for each range, via one prefix sum.

    With prefix[k] = sum_{i<k} data[i] * BASE**-i, the hash of data[l:r] is
    (prefix[r] - prefix[l]) * BASE**(r-1); all arithmetic wraps modulo 2**64.
    """
    powers, inverse_powers = _POWER_TABLE.get(len(data) + 1)
    prefix = np.zeros(len(data) + 1, dtype=np.uint64)
    np.cumsum(data.astype(np.uint64) * inverse_powers[: len(data)], out=prefix[1:])
    return (prefix[stops] - prefix[starts]) * powers[stops - 1]


def _range_shingle_hashes64(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """``shingle_hash64`` of data[start:stop] for each range."""
    lengths = (stops - starts).astype(np.uint64)
    return _fmix(_range_poly_hashes(data, starts, stops) + lengths * np.uint64(_LENGTH_MIX))


def _shingle_spans(data: np.ndarray, offsets: np.ndarray, ngram: int):
    """Code point ranges of every shingle of every document, the shingle count and the word
    count per document."""
    nonempty = offsets[1:] > offsets[:-1]
    spaces = np.flatnonzero(data == 32)
    word_starts = _merge_sorted(spaces + 1, offsets[:-1][nonempty])
    word_stops = _merge_sorted(spaces, offsets[1:][nonempty])
    word_bounds = np.searchsorted(word_starts, offsets)
    first_word, words = word_bounds[:-1], np.diff(word_bounds)
    counts = np.where(words > 0, np.maximum(words - ngram + 1, 1), 0)
    doc = np.repeat(np.arange(len(counts)), counts)
    position = np.arange(len(doc)) - np.repeat(_lengths_to_offsets(counts)[:-1], counts)
    last_offset = np.minimum(position + ngram - 1, words[doc] - 1)
    starts = word_starts[first_word[doc] + position]
    stops = word_stops[first_word[doc] + last_offset]
    return starts, stops, counts, words


def _merge_sorted(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    return np.insert(left, np.searchsorted(left, right), right)


# ---------------------------------------------------------------------------------------------
# MinHash
# ---------------------------------------------------------------------------------------------

_MERSENNE_PRIME = np.uint64((1 << 61) - 1)
_LEGACY_MAX_HASH = np.uint64((1 << 32) - 1)


def _permutations(num_perm: int, seed: int, scheme: Scheme) -> tuple[np.ndarray, np.ndarray]:
    """The (a, b) parameters datasketch.MinHash (or datatrove) draws for this seed and scheme."""
    gen = np.random.RandomState(seed)
    if scheme == "datatrove":
        a = gen.randint(1, _MERSENNE_PRIME, dtype=np.uint64, size=num_perm)
        return a, gen.randint(0, _MERSENNE_PRIME, dtype=np.uint64, size=num_perm)
    if scheme == "legacy":
        pairs = [
            (
                gen.randint(1, _MERSENNE_PRIME, dtype=np.uint64),
                gen.randint(0, _MERSENNE_PRIME, dtype=np.uint64),
            )
            for _ in range(num_perm)
        ]
        a, b = np.array(pairs, dtype=np.uint64).T
        return a.copy(), b.copy()
    width, dtype = (32, np.uint32) if scheme == "affine32" else (64, np.uint64)
    a = gen.randint(0, 1 << (width - 1), num_perm, dtype=dtype) * dtype(2) + dtype(1)
    b = gen.randint(0, 1 << width, num_perm, dtype=dtype)
    return a, b


class DocumentHashes(NamedTuple):
    signatures: np.ndarray  # (docs, num_perm)
    content_hashes: np.ndarray | None  # uint64, see ``content_hashes``
    word_counts: np.ndarray  # int64: words of the normalized text


class MinHasher:
    """Batch MinHash signatures equal to datasketch's, element for element.

    ``scheme`` is datasketch's permutation scheme: "affine32" (its default; uint32 signatures,
    fastest), "affine64" (uint64) or "legacy" (pre-2.0 mersenne-prime scheme, uint64, slow);
    or "datatrove": datatrove's own 64-bit scheme (SHA-1 shingle hash, its Mersenne-prime
    permutations, uint64), for signatures equal to FineWeb's given the same word n-grams.
    A document without words has no shingles and gets the all-maximum signature, like a
    datasketch MinHash that was never updated; all such documents therefore share band keys.
    """

    docs_per_batch = 64  # bounds the normalized text buffer (and its uint64 prefix sums)
    permutation_block = 1 << 20  # max shingles x num_perm values permuted at once

    def __init__(
        self,
        num_perm: int = 112,
        ngram: int = 5,
        seed: int = 1,
        scheme: Scheme = "affine32",
        norm: TextNorm = FINEWEB_NORM,
    ) -> None:
        if scheme not in SCHEMES:
            raise ValueError(f"unknown scheme {scheme!r}")
        if num_perm < 1 or ngram < 1:
            raise ValueError("num_perm and ngram must be positive")
        self.num_perm, self.ngram, self.seed, self.scheme = num_perm, ngram, seed, scheme
        self.norm = norm
        self.a, self.b = _permutations(num_perm, seed, scheme)
        self.hash_bits = 64 if scheme in ("affine64", "datatrove") else 32
        self.dtype = np.dtype(np.uint32 if scheme == "affine32" else np.uint64)
        self.max_hash = _LEGACY_MAX_HASH if scheme == "legacy" else np.iinfo(self.dtype).max

    @property
    def hashfunc(self):
        """The shingle hash to pass to ``datasketch.MinHash(hashfunc=...)`` for equal results
        (scheme "datatrove": the shingle hash of datatrove's ``HashConfig(64, "sha1")``)."""
        if self.scheme == "datatrove":
            return sha1_hash64
        return shingle_hash64 if self.hash_bits == 64 else shingle_hash32

    def signatures(self, texts: Sequence[str | None]) -> np.ndarray:
        """MinHash signatures, shape (len(texts), num_perm)."""
        return self.hash_documents(texts, with_content=False).signatures

    def signatures_and_content_hashes(
        self, texts: Sequence[str | None]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``signatures(texts)`` and ``content_hashes(texts)``, normalizing each text once."""
        hashed = self.hash_documents(texts)
        return hashed.signatures, hashed.content_hashes

    def hash_documents(self, texts: Sequence[str | None], with_content: bool = True):
        """Signatures, content hashes (unless ``with_content`` is false) and normalized word
        counts of ``texts``, normalizing each text once."""
        texts = _as_str_list(texts)
        signatures = np.empty((len(texts), self.num_perm), dtype=self.dtype)
        content = np.empty(len(texts), dtype=np.uint64) if with_content else None
        words = np.empty(len(texts), dtype=np.int64)
        for start in range(0, len(texts), self.docs_per_batch):
            batch = slice(start, start + self.docs_per_batch)
            code_points, offsets = normalize_code_points(texts[batch], self.norm)
            starts, stops, counts, words[batch] = _shingle_spans(code_points, offsets, self.ngram)
            signatures[batch] = self._signatures_of_spans(code_points, starts, stops, counts)
            if with_content:
                content[batch] = _utf8_hashes(*_to_utf8(code_points, offsets))
        return DocumentHashes(signatures, content, words)

    def _signatures_of_spans(self, data, starts, stops, counts) -> np.ndarray:
        if self.scheme == "datatrove":
            return self._min_permuted(_range_sha1_hashes64(data, starts, stops), counts)
        hashes = _range_shingle_hashes64(data, starts, stops)
        if self.hash_bits == 32:
            hashes = (hashes >> np.uint64(32)).astype(np.uint32)
        return self._min_permuted(hashes, counts)

    def _min_permuted(self, hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Per document and permutation, the minimum permuted shingle hash.

        Works on (num_perm, block) slabs so that each slab stays cache-sized and the per-document
        minimum is a reduction over contiguous memory.
        """
        out = np.full((self.num_perm, len(counts)), self.max_hash, dtype=self.dtype)
        docs = np.flatnonzero(counts)
        doc_starts = _lengths_to_offsets(counts[docs])[:-1]
        if self.scheme in ("affine32", "affine64"):
            hashes = _fmix(hashes)
        elif self.scheme == "legacy":
            hashes = hashes.astype(np.uint64)
        block = max(self.permutation_block // self.num_perm, 1)
        for lo in range(0, len(hashes), block):
            hi = min(lo + block, len(hashes))
            first = np.searchsorted(doc_starts, lo, side="right") - 1
            last = np.searchsorted(doc_starts, hi, side="left")
            segments = np.maximum(doc_starts[first:last], lo) - lo
            minima = np.minimum.reduceat(self._permute(hashes[lo:hi]), segments, axis=1)
            rows = docs[first:last]
            out[:, rows] = np.minimum(out[:, rows], minima)
        return out.T.copy()

    def _permute(self, hashes: np.ndarray) -> np.ndarray:
        permuted = self.a[:, None] * hashes
        permuted += self.b[:, None]
        if self.scheme in ("legacy", "datatrove"):
            permuted %= _MERSENNE_PRIME
        if self.scheme == "legacy":
            permuted &= _LEGACY_MAX_HASH
        return permuted


# ---------------------------------------------------------------------------------------------
# LSH bands
# ---------------------------------------------------------------------------------------------


def band_hashes(signatures: np.ndarray, bands: int = 14, rows: int = 8) -> np.ndarray:
    """One uint64 bucket key per (document, band): xxh3_64 of the band's ``rows`` signature
    values as little-endian bytes. Keys are equal iff the band rows are (up to 64-bit collisions).
    """
    n_docs, num_perm = signatures.shape
    if bands * rows > num_perm:
        raise ValueError(f"{bands} bands x {rows} rows needs {bands * rows} > {num_perm} values")
    values = signatures[:, : bands * rows].astype(signatures.dtype.newbyteorder("<"))
    data = np.ascontiguousarray(values).tobytes()
    width = rows * values.itemsize
    hashes = [
        xxhash.xxh3_64_intdigest(data[start : start + width])
        for start in range(0, len(data), width)
    ]
    return np.array(hashes, dtype=np.uint64).reshape(n_docs, bands)


def optimal_bands_rows(threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) minimizing false positives + false negatives around a Jaccard threshold,
    as datasketch.MinHashLSH chooses them with its default equal weights: the first (b, r), b
    then r ascending, with the least sum of the areas under the collision probability
    1 - (1 - s^r)^b below the threshold and above it under its complement.

    datasketch integrates with scipy's adaptive quadrature; these integrands are polynomials of
    degree b * r <= num_perm, which Gauss-Legendre quadrature with num_perm / 2 + 1 nodes
    integrates exactly: the two agree to ~1e-12, while the best and the second-best candidate
    differed by at least 2e-7 at every threshold tested (tests/test_minhash.py).
    """
    nodes, weights = np.polynomial.legendre.leggauss(num_perm // 2 + 1)
    below = threshold / 2 * (nodes + 1)  # the nodes mapped from [-1, 1] to [0, threshold]
    above = threshold + (1 - threshold) / 2 * (nodes + 1)  # and to [threshold, 1]
    best, least_error = (0, 0), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            false_positive = threshold / 2 * (weights @ (1 - (1 - below**r) ** b))
            false_negative = (1 - threshold) / 2 * (weights @ ((1 - above**r) ** b))
            error = 0.5 * false_positive + 0.5 * false_negative
            if error < least_error:
                best, least_error = (b, r), error
    return best
