"""How text splits into words and lines, and the text statistics the filters share:
punctuation, words (an approximation of spaCy's English tokenizer), lines, per-document counts
and duplicated elements."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa


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
NON_PUNCTUATION = "[^" + _PUNCTUATION_CLASS[1:]

# Approximates spaCy's English tokenizer (what datatrove's split_into_words uses for "en"): text
# splits on whitespace, punctuation becomes separate tokens, hyphens between letters split off,
# clitics ('s, 're, n't as 't) are tokens; URLs, numbers like 3.5 / 1,000 / 3/4 (and digits
# around a colon), single letters with a period ("J.", "p."), file names ("a.txt") and common
# abbreviations ("U.S.", "e.g.", "Dr.") stay whole; as in spaCy's infix rules, ":" and "/"
# before a letter ("en:wiki") and "." between a lowercase and an uppercase letter
# ("Options.Builder") split; "-5" is two tokens (spaCy keeps it whole). Differs from spaCy
# mostly inside chunks mixing letters and symbols (LaTeX, shell code, "C++", emoticons), which
# spaCy keeps together and this splits, and for contractions ("don't": spaCy "do n't", here
# "don 't").
ABBREVIATIONS = (
    "Mr|Mrs|Ms|Dr|Prof|Jr|St|Mt|Inc|Ltd|Co|co|Corp|vs|Gen|Gov|Sen|Rep|Rev|Adm|Bros|Messrs"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|Ph|Calif|Fla|Mass|Wash"
)
# No \b or \B: word-boundary assertions make Rust's regex engine several times slower.
WORD_PATTERN = (
    r"(?:https?://|www\.)\S*[^\s.,;:!?'\"()\[\]{}<>]"
    rf"|(?:\p{{L}}\.){{2,}}|\p{{L}}\.|(?:{ABBREVIATIONS})\."
    r"|\w+(?:(?:[.,:/]\d|\.\p{Ll}|[@&]\w)\w*)*"
    r"|['’](?:[sSdDmMtT]|ll|LL|re|RE|ve|VE)"
    r"|\.{2,}|-{2,}|/{2,}|''"
    r"|\S"
)

# str.splitlines() line boundaries, normalized to "\n" before splitting.
LINE_BREAKS = "\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]"


def doc_index(n_docs: int) -> pl.Series:
    return pl.Series("doc", np.arange(n_docs, dtype=np.uint32))


class Parts(NamedTuple):
    """The elements of per-document lists, flattened: each one's document index and value."""

    doc: np.ndarray
    values: pl.Series

    def filter(self, mask: np.ndarray) -> Parts:
        return Parts(self.doc[mask], self.values.filter(pl.Series(mask)))


def explode(parts: pl.Series) -> Parts:
    """One element per list element (empty lists contribute none), in document order."""
    frame = pl.DataFrame([doc_index(len(parts)), parts.alias("value")])
    frame = frame.explode("value").drop_nulls("value")
    return Parts(frame["doc"].to_numpy(), frame["value"])


def uint32_lists(counts: np.ndarray, values: np.ndarray) -> pl.Series:
    """A column of lists of unsigned 32-bit integers: ``counts[i]`` of ``values`` (in order)
    in the i-th, built from the flat arrays (not from a Python list per row)."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    flat = pa.array(np.asarray(values, dtype=np.uint32))
    return pl.from_arrow(pa.ListArray.from_arrays(pa.array(offsets), flat))


def count_per_doc(doc: np.ndarray, n_docs: int, weights: np.ndarray | None = None) -> np.ndarray:
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
# The same for the words' features (`word_scan.Words`: length, hash, flags) that the built-in
# filters with ``uses_word_features = True`` count, without a string per word.
WORD_FEATURES = "_word_features"
WORD_LISTS = (WORDS, WORD_FEATURES)
# The text the word scanners read (``segmented_text``), kept by the chain for the documents in a
# language written without spaces.
SEGMENTED = "_segmented"
SPLIT_COLUMNS = (*WORD_LISTS, SEGMENTED)


def per_text(docs: pl.DataFrame, column: str, compute) -> pl.Series:
    """``compute(rows)`` of the documents (a frame of them: ``text``, and ``language`` where
    known), read from ``column`` where the chain holds it (its null rows computed again)."""
    if column not in docs.columns:
        return compute(docs)
    stale = docs[column].is_null()
    if not stale.any():
        return docs[column]
    rows = docs.with_row_index("row").select("row", column)
    fresh = rows.filter(stale).with_columns(compute(docs.filter(stale)).alias(column))
    return pl.concat([rows.filter(~stale), fresh]).sort("row")[column]


def segmented_languages(docs: pl.DataFrame) -> list[str]:
    """The languages of ``docs`` (their ``language`` column) whose words the scanner does
    not find alone: written without spaces (a segmenter finds them), or joined across a
    character the scanner splits at (``LanguageDefaults.joins``)."""
    if "language" not in docs.columns or not docs.height:
        return []
    found = docs["language"].unique().drop_nulls().to_list()
    return sorted(label for label in found if _word_rules(label) != (None, ()))


@functools.cache
def _word_rules(label: str) -> tuple:
    """A language's segmenter (or None) and joining characters."""
    from tokenmill.languages.defaults import language_defaults
    from tokenmill.text.segmenters import segmenter

    return segmenter(label), language_defaults(label).joins


@functools.cache
def line_scale(label: str) -> float:
    """How many of the scanner's words make one English word in the language: its words per
    English word (``LanguageDefaults.content_word_ratio``) where more than 1, else 1. C4's
    minimum of words per line is that many times as many: Japanese "第５条" (three words to
    MeCab) is as short a heading as "Article 5"."""
    from tokenmill.languages.defaults import language_defaults

    ratio = language_defaults(label).content_word_ratio
    return max(1.0, ratio) if ratio else 1.0


@functools.cache
def ngram_scale(label: str) -> float:
    """``line_scale`` where the language's segmenter cuts finer than words (syllables,
    characters: ``segmenters.splits_below_words``), else 1: Gopher repetition's n-grams are n
    times as many of its pieces, as much text as n words."""
    from tokenmill.text.segmenters import splits_below_words

    return line_scale(label) if splits_below_words(label) else 1.0


def rows_by_scale(docs: pl.DataFrame, scale_of=None) -> list[tuple[float, np.ndarray]]:
    """The rows of ``docs`` grouped by their language's scale (``scale_of``, by default
    ``ngram_scale``; 1 without a ``language`` column, or for a null one), smallest first."""
    scale_of = scale_of or ngram_scale
    languages = docs.get_column("language", default=None)
    if languages is None:
        return [(1.0, np.arange(docs.height))]
    scales = {label: scale_of(label) for label in languages.unique().drop_nulls().to_list()}
    of_rows = languages.replace_strict(scales, default=1.0, return_dtype=pl.Float64).to_numpy()
    return [(scale, np.flatnonzero(of_rows == scale)) for scale in sorted(set(of_rows))]


def scaled(n: int, scale: float) -> int:
    """n words of English as a language of ``scale`` pieces per word counts them: n times the
    scale, rounded half up (distinct for distinct n, the scale being at least 1)."""
    return n if scale == 1 else int(n * scale + 0.5)


ZERO_WIDTH_SPACE = "\u200b"


def segmented_text(docs: pl.DataFrame) -> pl.Series:
    """The documents' text as the word scanners read it: for a document in a language written
    without spaces (its ``language``), a space at every word boundary its segmenter finds and
    in place of each zero-width space (a boundary its writer marked); in a language whose words
    join across a hyphen or a middle dot between letters, "_" in its place (one word, as "_"
    joins in ``_JOINS``); the text itself for the others (null text: empty)."""
    text = docs["text"].fill_null("")
    languages = segmented_languages(docs)
    if not languages:
        return text
    return per_text(docs, SEGMENTED, lambda rows: _segmented(rows, languages))


def _segmented(docs: pl.DataFrame, languages: list[str]) -> pl.Series:
    """The texts of ``languages`` segmented: a pass per set of word rules (a segmenter, the
    joining characters), not per language (dozens share the same joins)."""
    text = docs["text"].fill_null("")
    by_rules: dict[tuple, list[str]] = {}
    for label in languages:
        by_rules.setdefault(_word_rules(label), []).append(label)
    for (split, joins), labels in by_rules.items():
        rows = docs["language"].is_in(labels).fill_null(False).arg_true()
        if not len(rows):
            continue
        own = text.gather(rows)
        if split is not None:
            # Khmer, Thai or Myanmar text may mark its word ends with a zero-width space
            own = own.str.replace_all(ZERO_WIDTH_SPACE, " ", literal=True)
            own = pl.Series(split(own.to_list()), dtype=pl.String)
        if joins:
            own = _joined_across(own, joins)
        text = text.scatter(rows, own)
    return text


def _joined_across(text: pl.Series, joins: tuple[str, ...]) -> pl.Series:
    """``text`` with "_" for each of ``joins`` between two letters (one word to the scanner);
    only the texts holding one are searched (a letter class has no literal to look for)."""
    holding = text.str.contains(f"[{''.join(joins)}]")
    rows = holding.arg_true()
    if not len(rows):
        return text
    joined = rf"(\p{{L}})[{''.join(joins)}](\p{{L}})"
    own = text.gather(rows)
    for _ in range(2):  # matches overlap: "E-Mail-Adresse"
        own = own.str.replace_all(joined, "${1}_${2}")
    return text.scatter(rows, own)


def words_of(docs: pl.DataFrame) -> pl.Series:
    """split_words of the documents' text, computed once per chain (see ``WORDS``)."""
    return per_text(docs, WORDS, lambda rows: split_words(segmented_text(rows)))


def knows_words(docs: pl.DataFrame) -> bool:
    """Whether the chain has split the documents' texts (``word_scan.word_counts_of`` is then
    cheap)."""
    return any(column in docs.columns for column in WORD_LISTS)


# The column of a rewriting filter's ``measure`` with its new texts' word counts, when it knows
# them without splitting them (see ``rewritten``).
NEW_WORD_COUNTS = "new_word_counts"
# The same for the new texts as the word scanners read them (``segmented_text``), when the
# filter cut lines out of that text: lines removed, it needs no segmenting again.
NEW_SEGMENTED = "new_segmented"
# Word counts a rewriting filter knew for the texts it rewrote, without splitting them (null:
# unknown, count when needed); beside ``WORDS``, which is null for those texts.
WORD_COUNTS = "_word_counts"


def rewritten(
    docs: pl.DataFrame,
    text: pl.Series,
    word_counts: pl.Series | None = None,
    segmented: pl.Series | None = None,
) -> pl.DataFrame:
    """``docs`` with the new ``text``; their words stay where the text stayed the same, and
    ``word_counts`` (the new texts' ``word_counts_of``, null where unknown) are kept for the
    others, as is ``segmented`` (their ``segmented_text``) where the chain holds one."""
    split = [column for column in SPLIT_COLUMNS if column in docs.columns]
    if not split:
        return docs.with_columns(text.alias("text"))
    unchanged = (docs["text"] == text).fill_null(False)
    earlier = pl.col(WORD_COUNTS) if WORD_COUNTS in docs.columns else pl.lit(None, pl.UInt32)
    known = pl.lit(None, pl.UInt32) if word_counts is None else pl.lit(word_counts)
    new = {SEGMENTED: pl.lit(segmented)} if segmented is not None else {}
    return docs.with_columns(
        text.alias("text"),
        *(
            pl.when(unchanged).then(pl.col(column)).otherwise(new.get(column)).alias(column)
            for column in split
        ),
        pl.when(unchanged).then(earlier).otherwise(known.cast(pl.UInt32)).alias(WORD_COUNTS),
    )


def split_lines(text: pl.Series) -> pl.Series:
    """``str.splitlines()`` for each document: no trailing empty line, [] for empty text."""
    normalized = text.str.replace_all(LINE_BREAKS, "\n")
    without_last_break = normalized.str.strip_suffix("\n")
    lines = without_last_break.str.split("\n")
    return pl.select(pl.when(normalized == "").then([]).otherwise(lines)).to_series()


_DOC_MULTIPLIER = np.uint64(0xC2B2AE3D27D4EB4F)


def doc_keys(doc: np.ndarray, value_hash: np.ndarray) -> np.ndarray:
    """Keys equal for equal values in the same document (64-bit: collisions are negligible)."""
    return value_hash + doc.astype(np.uint64) * _DOC_MULTIPLIER


def find_duplicates(parts: Parts, n_docs: int) -> dict[str, np.ndarray]:
    """datatrove's find_duplicates per document: elements, those seen before and their chars."""
    keys = doc_keys(parts.doc, parts.values.hash(seed=0).to_numpy())
    repeated = ~pl.Series(keys).is_first_distinct().to_numpy()
    chars = parts.values.str.len_chars().to_numpy()
    return {
        "n": count_per_doc(parts.doc, n_docs),
        "dup": count_per_doc(parts.doc, n_docs, repeated),
        "dup_chars": count_per_doc(parts.doc[repeated], n_docs, chars[repeated]),
    }
