"""The filter interface and the chain that runs filters in order (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol

import polars as pl

from tokenmill.filters.text import WORDS, rewritten, words_of


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
                docs = rewritten(docs, result.text)
            docs = docs.filter(~drop)
        return docs.drop(WORDS, strict=False), pl.concat(rejected)
