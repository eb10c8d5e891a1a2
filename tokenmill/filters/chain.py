"""The filter interface and the chain that runs filters in order (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol

import polars as pl

from tokenmill.filters.text import SPLIT_COLUMNS, WORD_COUNTS, rewritten
from tokenmill.filters.word_scan import with_words_for


class FilterResult(NamedTuple):
    """What a filter returns when it also rewrites the text of the documents it keeps."""

    reasons: pl.Series
    text: pl.Series | None = None
    word_counts: pl.Series | None = None  # of the new texts, where known without splitting


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
    return result._replace(reasons=result.reasons.cast(pl.Utf8).alias("reason"))


class FilterChain:
    """Formatters, then filters in order; each filter only sees the survivors of the previous.

    ``apply`` returns ``(kept, rejected)``. ``rejected`` has the input columns (``text`` as the
    rejecting filter saw it) plus ``filter`` (name of the first filter that dropped the document)
    and ``reason``. ``drop_counts`` holds the number of documents each filter dropped in the last
    ``apply`` call, ``total_drop_counts`` the sum over all calls.

    With ``signals`` (a ``tokenmill.filters.signals.SignalProfile``), a filter that the stored
    signal columns serve (``<filter>.<signal>``, measured under the profile's settings on the
    same text it would see) is judged from them instead of measuring the text again, and text
    rewrites wait until a filter reads the text, or the end: the kept documents' text is the
    same either way; a dropped document's text may then be the text before the formatters.
    """

    def __init__(
        self,
        filters: Iterable[DocumentFilter],
        formatters: Iterable[Formatter] = (),
        signals=None,
    ):
        self.filters = list(filters)
        self.formatters = list(formatters)
        names = [f.name for f in self.filters]
        if len(set(names)) != len(names):
            raise ValueError(f"filter names must be unique: {names}")
        self.drop_counts: dict[str, int] = dict.fromkeys(names, 0)
        self.total_drop_counts: dict[str, int] = dict.fromkeys(names, 0)
        self.stored = signals.serves(self.filters, self.formatters) if signals else set()

    def apply(self, docs: pl.DataFrame, finish: bool = True) -> tuple[pl.DataFrame, pl.DataFrame]:
        """``finish=False``: decisions only, the kept documents' text as it stands (no waiting
        rewrites applied)."""
        pending: list = list(self.formatters)  # text transforms not applied to `docs` yet
        rejected = [
            docs.clear().with_columns(filter=pl.lit(None, pl.Utf8), reason=pl.lit(None, pl.Utf8))
        ]
        for flt in self.filters:
            if flt.name in self.stored:
                result = FilterResult(self._judged(flt, docs)) if docs.height else _NONE
                if getattr(flt, "rewrites", False):
                    pending.append(flt)
            else:
                if getattr(flt, "reads_text", True):
                    docs, pending = _transformed(docs, pending), []
                if docs.height:
                    docs = with_words_for(flt, docs)
                result = _as_result(flt(docs), docs.height) if docs.height else _NONE
            drop = result.reasons.is_not_null()
            dropped = docs.filter(drop).with_columns(
                filter=pl.lit(flt.name, pl.Utf8), reason=result.reasons.filter(drop)
            )
            rejected.append(dropped.drop(*SPLIT_COLUMNS, WORD_COUNTS, strict=False))
            self.drop_counts[flt.name] = dropped.height
            self.total_drop_counts[flt.name] += dropped.height
            if result.text is not None:
                docs = rewritten(docs, result.text, result.word_counts)
            docs = docs.filter(~drop)
        if finish:
            docs = _transformed(docs, pending)
        return docs.drop(*SPLIT_COLUMNS, WORD_COUNTS, strict=False), pl.concat(rejected)

    @staticmethod
    def _judged(flt, docs: pl.DataFrame) -> pl.Series:
        stats = docs.select(pl.col(f"{flt.name}.{signal}").alias(signal) for signal in flt.signals)
        return flt.judge(stats).cast(pl.Utf8).alias("reason")


_NONE = FilterResult(pl.Series("reason", [], pl.Utf8))


def _transformed(docs: pl.DataFrame, pending: list) -> pl.DataFrame:
    """``docs`` with the waiting text transforms applied: formatters, and the rewrites of
    filters judged from stored signals (their ``measure`` gives the new text)."""
    for transform in pending:
        if not docs.height:
            break
        if getattr(transform, "rewrites", False):
            rewrite = getattr(transform, "rewrite", None)
            new_text = rewrite(docs) if rewrite else transform.measure(docs)["new_text"]
            docs = rewritten(docs, new_text)
        else:
            docs = rewritten(docs, transform(docs).alias("text"))
    return docs
