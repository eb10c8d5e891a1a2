"""What a filter and a formatter can do, named in one place with its default.

``DocumentFilter`` is the least a plug-in gives: a ``name`` and ``__call__(docs)``. ``Filter``
is what the pipeline reads of every filter in a chain: the built-in ones derive from it and
declare what they measure (``signals``), their settings and how they judge (``rules``); any
other filter (a plug-in, a caller's object) is wrapped by ``as_filter``, keeping what it
declares of ``reads_text``, ``uses_words`` and ``uses_word_features``. ``Formatter`` is the
same for formatters (``as_formatter``).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple, Protocol

import numpy as np
import polars as pl

from tokenmill.filters.rules import Judgement, Rule, judged


class FilterResult(NamedTuple):
    """What a filter returns when it also rewrites the text of the documents it keeps."""

    reasons: pl.Series
    text: pl.Series | None = None
    word_counts: pl.Series | None = None  # of the new texts, where known without splitting
    segmented: pl.Series | None = None  # the new texts as the word scanners read them


class DocumentFilter(Protocol):
    name: str

    def __call__(self, docs: pl.DataFrame) -> pl.Series | FilterResult: ...


class Filter:
    """A filter's capabilities, each with its default (a filter that reads the text and
    measures nothing the extraction stores)."""

    name: str
    # What the recipe's settings call the filter (a built-in filter's settings field).
    description: ClassVar[str] = ""
    # Constructor parameter -> description: a built-in filter's recipe settings.
    settings: ClassVar[dict[str, str]] = {}
    # Settings whose default is a fraction but which can pass 1 (ratios such as newlines per
    # word): not held to [0, 1].
    unbounded: ClassVar[tuple[str, ...]] = ()
    # What ``measure`` gives per document, stored by the extraction as ``<name>.<signal>``;
    # numbers, but for those in ``text_signals``.
    signals: tuple[str, ...] = ()
    text_signals: tuple[str, ...] = ()
    # False: it judges other columns (``url``, ``language``), never the text.
    reads_text: bool = True
    # True: ``rewrite`` (by default ``measure``'s ``new_text``) gives the text it keeps.
    rewrites: bool = False
    # The column of ``measure`` that says where it rewrote a text, stored beside the signals.
    rewrite_signal: str | None = None
    # The split columns the chain hands it: ``WORDS`` (``split_words``), ``WORD_FEATURES``.
    uses_words: bool = False
    uses_word_features: bool = False

    def __call__(self, docs: pl.DataFrame) -> pl.Series | FilterResult:
        return judged(self.measure(docs), self.judgement()).reasons

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        """Every signal of every document, whatever the thresholds."""
        raise NotImplementedError(f"filter {self.name} measures no signals")

    def measure_key(self) -> tuple:
        """The settings its signals depend on (not its thresholds)."""
        return ()

    def measure_variants(self, docs: pl.DataFrame, variants: list[tuple]) -> pl.DataFrame:
        """``measure(docs)``, but for each (filter, rows) of ``variants`` (this filter's kind,
        other measuring settings: another language's), those rows as that filter measures
        them."""
        own = [(rows, flt.measure(docs[rows])) for flt, rows in variants]
        return with_rows(self.measure(docs), own)

    def rules(self) -> list[Rule]:
        """Its thresholds on its signals, in order."""
        return []

    def judgement(self) -> Judgement:
        return Judgement(self.rules())

    def fits(self, measured_by: Filter) -> bool:
        """Whether the signals ``measured_by`` measured are what this filter would measure."""
        return type(measured_by) is type(self) and self.measure_key() == measured_by.measure_key()

    def rewrite(self, docs: pl.DataFrame) -> pl.Series:
        return self.measure(docs)["new_text"]


class Formatter:
    """A text transform run before the filters: ``__call__(docs)`` gives the new text."""

    name: str
    # The column of ``measure`` that says where it changed a text, stored beside the signals,
    # which ``rewrite`` puts back without searching the text again.
    rewrite_signal: str | None = None

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        raise NotImplementedError

    def measure_key(self) -> tuple:
        return ()

    def rewrite(self, docs: pl.DataFrame) -> pl.Series:
        return self(docs)


# What a filter that does not derive from `Filter` may declare for itself.
DECLARABLE = ("reads_text", "uses_words", "uses_word_features")


class _Wrapped:
    """Another object's name and call, and its other attributes (a plug-in's own settings)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name = inner.name
        for capability in DECLARABLE:
            if hasattr(inner, capability):
                setattr(self, capability, getattr(inner, capability))

    def __call__(self, docs: pl.DataFrame):
        return self.inner(docs)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.inner, name)


class WrappedFilter(_Wrapped, Filter):
    pass


class WrappedFormatter(_Wrapped, Formatter):
    pass


def as_filter(flt: Any) -> Filter:
    return flt if isinstance(flt, Filter) else WrappedFilter(flt)


def as_formatter(formatter: Any) -> Formatter:
    return formatter if isinstance(formatter, Formatter) else WrappedFormatter(formatter)


def with_rows(stats: pl.DataFrame, own: list[tuple]) -> pl.DataFrame:
    """``stats`` with, for each (rows, frame) of ``own``, that frame (the same columns) in
    place of those rows."""
    if not own:
        return stats
    mask = np.zeros(stats.height, dtype=bool)
    parts = []
    for rows, frame in own:
        mask[rows] = True
        parts.append(frame.select(stats.columns).with_columns(pl.Series("_row", rows, pl.Int64)))
    numbered = stats.with_columns(pl.int_range(stats.height, dtype=pl.Int64).alias("_row"))
    parts.append(numbered.filter(pl.Series(~mask)))
    return pl.concat(parts, how="vertical_relaxed").sort("_row").drop("_row")
