"""Signals: what the built-in filters measure on a document, stored beside its text so that a
recipe's thresholds judge them without measuring again.

The extraction stage measures every document (whatever its language) with the built-in filters
at FineWeb's settings, on the text they would see in a chain (PII masked; `fineweb_quality`
after `c4_quality`'s line removal), and stores each statistic as a column
`<filter>.<signal>`. A recipe's filter is judged from those columns when they serve it: same
measuring settings (`fits`; a threshold is not one) and the same text before it (the same
formatters and rewriting filters in front). Anything else — other measuring settings, another
order, a plug-in — measures the stored text again: a filter pass, still no extraction.
"""

from __future__ import annotations

import functools

import polars as pl
import pyarrow as pa

from tokenmill.filters.per_language import groups, language_at
from tokenmill.filters.pii import PIIMasker
from tokenmill.filters.protocol import Filter, Formatter
from tokenmill.filters.registry import builtin_filters
from tokenmill.languages.defaults import known_languages, language_defaults
from tokenmill.text.segmentation import NEW_SEGMENTED, NEW_WORD_COUNTS, rewritten
from tokenmill.text.word_scan import with_words_for

# A stored rewrite (`rewrite_signal`) lists positions in its document's text.
REWRITE_TYPE = pa.list_(pa.uint32())


def column(flt: Filter | Formatter, signal: str) -> str:
    return f"{flt.name}.{signal}"


def _text_states(filters: list[Filter], formatters: list[Formatter]) -> dict[str, tuple]:
    """Per filter: the transforms its text went through (formatters, then earlier rewrites)."""
    state: tuple = tuple((f.name, f.measure_key()) for f in formatters)
    states = {}
    for flt in filters:
        states[flt.name] = state
        if flt.rewrites:
            state = (*state, (flt.name, flt.measure_key()))
    return states


class SignalProfile:
    """The filters and formatters the signals are measured with."""

    # Whether each document is measured at its own language's defaults (see ``for_language``).
    by_language = False

    def __init__(self, filters: list[Filter], formatters: list[Formatter]):
        self.filters = filters
        self.formatters = formatters
        self._states = _text_states(filters, formatters)

    @classmethod
    def builtin(cls, language: str | None = None) -> SignalProfile:
        """The registered built-in filters at their defaults (FineWeb's), PII masked; for a
        ``language``, at its own defaults (``tokenmill.languages``: its stop words...)."""
        defaults = language_defaults(language) if language else None
        filters = [
            kind(**(defaults.settings_of(kind.name) if defaults else {}))
            for kind in builtin_filters()
        ]
        return cls(filters, [PIIMasker()])

    def key(self) -> tuple:
        """What its measurements depend on: its filters' and formatters' measuring settings."""
        return tuple((t.name, t.measure_key()) for t in [*self.formatters, *self.filters])

    def columns(self) -> dict[str, pl.DataType]:
        """Every signal column and its type."""
        return {
            column(f, s): pl.Utf8 if s in f.text_signals else pl.Float64
            for f in self.filters
            for s in f.signals
        }

    def fields(self) -> list[pa.Field]:
        """The signal columns, then the stored rewrites (``rewrites()``)."""
        return [
            pa.field(name, pa.string() if kind == pl.Utf8 else pa.float64())
            for name, kind in self.columns().items()
        ] + [pa.field(name, kind) for name, kind in self.rewrites().items()]

    def rewrites(self) -> dict[str, pa.DataType]:
        """The columns where a formatter or rewriting filter keeps what it changes in a text
        (PII: where it replaced values; C4: the lines it removes), read by its ``rewrite``
        in a recipe that the stored signals serve, and their types."""
        return {
            column(t, t.rewrite_signal): REWRITE_TYPE
            for t in [*self.formatters, *self.filters]
            if t.rewrite_signal
        }

    def completed(self, docs: pl.DataFrame) -> pl.DataFrame:
        """``docs`` of an extraction from before some signals were stored, with those that
        need no text (the URL filter's) measured now; other missing columns stay missing."""
        for flt in self.filters:
            missing = [s for s in flt.signals if column(flt, s) not in docs.columns]
            if missing and not flt.reads_text:
                stats = flt.measure(docs)
                docs = docs.with_columns(
                    stats[s].cast(pl.Float64).alias(column(flt, s)) for s in missing
                )
        return docs

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        """The signal columns of `docs` (`text`, `url`), one row per document; with
        ``by_language``, each measured at its language's defaults (``for_language``)."""
        if not self.by_language:
            return self._measure(docs)
        parts = groups(docs, lambda label: for_language(label).key())
        first = language_at(docs, None if parts[0][1] is None else parts[0][1][0])
        if len(parts) == 1:
            return for_language(first)._measure(docs)
        others = [(for_language(language_at(docs, rows[0])), rows) for _, rows in parts[1:]]
        return for_language(first)._measure(docs, others)

    def _measure(self, docs: pl.DataFrame, others: list[tuple] = ()) -> pl.DataFrame:
        """The signals of `docs`; ``others``: (profile, rows) whose rows that profile measures
        instead, where its filter measures otherwise (another language's stop words): in one
        pass over the batch, those filters measuring again only their own rows."""
        columns, rewrites = [], []
        for formatter in self.formatters:
            if stored := formatter.rewrite_signal:
                stats = formatter.measure(docs)
                text = stats["new_text"]
                rewrites.append(stats[stored].alias(column(formatter, stored)))
            else:
                text = formatter(docs)
            docs = docs.with_columns(text.alias("text"))
        types = self.columns()
        for position, flt in enumerate(self.filters):
            docs = with_words_for(flt, docs)
            variants = [
                (theirs, rows)
                for profile, rows in others
                if (theirs := profile.filters[position]).measure_key() != flt.measure_key()
            ]
            stats = flt.measure_variants(docs, variants) if variants else flt.measure(docs)
            for signal in flt.signals:
                name = column(flt, signal)
                columns.append(stats[signal].cast(types[name]).alias(name))
            if flt.rewrites:
                counts = stats.get_column(NEW_WORD_COUNTS, default=None)
                segmented = stats.get_column(NEW_SEGMENTED, default=None)
                docs = rewritten(docs, stats["new_text"], counts, segmented)
            if stored := flt.rewrite_signal:
                rewrites.append(stats[stored].alias(column(flt, stored)))
        return pl.DataFrame(columns + rewrites)

    def serves_formatters(self, formatters: list[Formatter]) -> set[str]:
        """Names of the `formatters` whose stored rewrites apply: the profile's own ones, in
        its order from the first, with its settings."""
        served = set()
        for flt, measured_by in zip(formatters, self.formatters, strict=False):
            if type(flt) is not type(measured_by) or flt.measure_key() != measured_by.measure_key():
                break
            served.add(flt.name)
        return served

    def serves(self, filters: list[Filter], formatters: list[Formatter]) -> set[str]:
        """Names of the `filters` whose stored signals judge them, in a chain with
        `formatters`."""
        states = _text_states(filters, formatters)
        served = set()
        for flt in filters:
            measured_by = next((m for m in self.filters if m.name == flt.name), None)
            if (
                measured_by is not None
                and flt.fits(measured_by)
                and states[flt.name] == self._states[flt.name]
            ):
                served.add(flt.name)
        return served


@functools.cache
def for_language(label: str | None) -> SignalProfile:
    """The signals a document in language ``label`` is measured with at extraction: the
    built-in filters at its language's defaults (FineWeb's for English, and for a language
    without defaults of its own)."""
    return SignalProfile.builtin(label)


@functools.cache
def measured_by_language() -> frozenset[str]:
    """The built-in filters whose signals some language's defaults measure differently from
    FineWeb's (Gopher quality: its stop words)."""
    found = set()
    for kind in builtin_filters():
        fineweb = kind().measure_key()
        for label in known_languages():
            own = language_defaults(label).settings_of(kind.name)
            if own and kind(**own).measure_key() != fineweb:
                found.add(kind.name)
                break
    return frozenset(found)


# The signals every extracted document carries, measured by the registered built-in filters at
# its language's defaults (FineWeb's for English): what recipes judge without measuring again.
EXTRACTED_SIGNALS = SignalProfile.builtin()
EXTRACTED_SIGNALS.by_language = True
