"""Vectorized document quality filters: the FineWeb filter set on polars DataFrames.

A *filter* is any object with a ``name: str`` and ``__call__(docs) -> pl.Series | FilterResult``
where ``docs`` is a DataFrame with (at least) ``text`` and ``url`` columns. The Series holds one
nullable Utf8 value per document: null keeps it, a string drops it and says why, e.g.
``"dup_line_frac=0.42>0.3"`` (rule name, measured value, threshold). A filter that also rewrites
the text (``C4QualityFilter`` removes lines) returns ``FilterResult(reasons, text)``; the new text
replaces ``text`` for the documents it keeps.

A filter with ``uses_words = True`` finds ``split_words(text)`` in the ``WORDS`` column when run
by a ``FilterChain`` (``words_of(docs)`` reads it, or splits when absent): the chain tokenizes
once for all such filters, and again only the documents whose text a filter rewrote. The
built-in filters that only count words (Gopher quality and repetition) set
``uses_word_features = True`` instead: ``word_scan.word_features_of(docs)`` gives each word's
length, hash and flags, scanned by compiled code without a string per word.

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

Only modules under ``tokenmill.filters`` and the prefixes in ``TOKENMILL_FILTER_MODULES`` can be
loaded (see ``plugins``).

The built-in filters derive from ``protocol.Filter``, which names everything the pipeline reads
of a filter (what it measures, its settings, its rules); ``registry`` lists them, and the signal
profile and the recipe settings derive from it. The chain wraps any other filter in a
``Filter`` (``as_filter``). They mirror HuggingFace datatrove's FineWeb configuration
(GopherRepetition, GopherQuality, C4Quality, FineWebQuality; see ``default_filters``).
datatrove tokenizes English with spaCy; here a regex (``WORD_PATTERN``) approximates spaCy's
tokenizer and another (``c4._SENTENCE_BOUNDARY``) its sentencizer, so word counts can differ on
hyphenated numbers, abbreviations ("e.g." is one spaCy token, two here), URLs, emoticons and
other rare constructs.
"""

from __future__ import annotations

from tokenmill.filters.c4 import C4QualityFilter
from tokenmill.filters.chain import FilterChain
from tokenmill.filters.fineweb import FineWebQualityFilter
from tokenmill.filters.gopher_quality import GopherQualityFilter
from tokenmill.filters.gopher_repetition import GopherRepetitionFilter
from tokenmill.filters.language import LanguageFilter
from tokenmill.filters.pii import PIIMasker, is_public_ip
from tokenmill.filters.plugins import load_filter
from tokenmill.filters.protocol import DocumentFilter, Filter, FilterResult, Formatter
from tokenmill.filters.registry import builtin_filters, register
from tokenmill.filters.url import URLFilter
from tokenmill.runtime.plugins import (
    FILTER_MODULES_ENV,
    FilterNotAllowedError,
    allowed_filter_modules,
    config_params,
)
from tokenmill.text.segmentation import (
    NEW_WORD_COUNTS,
    PUNCTUATION,
    TERMINAL_PUNCTUATION,
    WORD_PATTERN,
    WORDS,
    split_lines,
    split_words,
    words_of,
)
from tokenmill.text.word_scan import count_sentences, word_counts_of

__all__ = [
    "FILTER_MODULES_ENV",
    "NEW_WORD_COUNTS",
    "PUNCTUATION",
    "TERMINAL_PUNCTUATION",
    "WORDS",
    "WORD_PATTERN",
    "BUILTIN_FILTERS",
    "C4QualityFilter",
    "DocumentFilter",
    "Filter",
    "FilterChain",
    "FilterNotAllowedError",
    "FilterResult",
    "FineWebQualityFilter",
    "Formatter",
    "GopherQualityFilter",
    "GopherRepetitionFilter",
    "LanguageFilter",
    "PIIMasker",
    "URLFilter",
    "allowed_filter_modules",
    "count_sentences",
    "default_filters",
    "is_public_ip",
    "config_params",
    "load_filter",
    "register",
    "split_lines",
    "split_words",
    "word_counts_of",
    "words_of",
]


# The registered built-in filters, in FineWeb's order (see `registry`).
BUILTIN_FILTERS = builtin_filters()


def default_filters() -> list[Filter]:
    """The built-in filters with FineWeb's thresholds."""
    return [cls() for cls in builtin_filters()]
