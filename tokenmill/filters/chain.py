"""The chain that runs filters in order (see the package docstring; their interface: protocol)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl

from tokenmill.filters.protocol import (
    DocumentFilter,
    Filter,
    FilterResult,
    Formatter,
    as_filter,
    as_formatter,
)
from tokenmill.filters.rules import Judged, judged, judged_from, judging
from tokenmill.text.segmentation import SPLIT_COLUMNS, WORD_COUNTS, rewritten
from tokenmill.text.word_scan import with_words_for


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
        formatters: Iterable[Formatter | DocumentFilter] = (),
        signals=None,
    ):
        self.filters = [as_filter(f) for f in filters]
        self.formatters = [as_formatter(f) for f in formatters]
        names = [f.name for f in self.filters]
        if len(set(names)) != len(names):
            raise ValueError(f"filter names must be unique: {names}")
        self.drop_counts: dict[str, int] = dict.fromkeys(names, 0)
        self.total_drop_counts: dict[str, int] = dict.fromkeys(names, 0)
        self.signals = signals
        self.stored = signals.serves(self.filters, self.formatters) if signals else set()
        # formatters whose stored rewrites apply (masking only the documents it changes)
        self.stored_formatters = signals.serves_formatters(self.formatters) if signals else set()
        self._judged_input: dict[str, Judged] = {}

    def apply(
        self,
        docs: pl.DataFrame,
        finish: bool = True,
        rejected_columns: list[str] | None = None,
        judged: dict[str, Judged] | None = None,
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """``finish=False``: decisions only, the kept documents' text as it stands (no waiting
        rewrites applied). ``rejected_columns``: the input columns ``rejected`` keeps (all).
        ``judged``: ``judge_stored(docs)``, when the caller has it already."""
        pending: list = list(self.formatters)  # text transforms not applied to `docs` yet
        rejected = _Rejected(docs, rejected_columns)
        self._judged_input = judged or {}  # valid while `docs` holds every input row
        for group in self._groups():
            if not self._judged_without_text(group[0]):
                (flt,) = group
                if flt.reads_text:
                    docs, pending = self._transformed(docs, pending), []
                if docs.height:
                    docs = with_words_for(flt, docs)
                result = _as_result(flt(docs), docs.height) if docs.height else _NONE
                docs = self._dropped([flt], [result.reasons], docs, rejected)
                if result.text is not None:
                    kept = result.reasons.is_null()
                    counts, segmented = result.word_counts, result.segmented
                    docs = rewritten(
                        docs,
                        result.text.filter(kept),
                        None if counts is None else counts.filter(kept),
                        None if segmented is None else segmented.filter(kept),
                    )
                continue
            docs = self._dropped(group, self._group_reasons(group, docs), docs, rejected)
            pending += [flt for flt in group if flt.rewrites]
        if finish:
            docs = self._transformed(docs, pending)
        return docs.drop(*SPLIT_COLUMNS, WORD_COUNTS, strict=False), pl.concat(rejected.parts)

    def _transformed(self, docs: pl.DataFrame, pending: list) -> pl.DataFrame:
        """``docs`` with the waiting text transforms applied: formatters (from their stored
        rewrites where those apply), and the rewrites of filters judged from stored signals
        (their ``rewrite``, else their ``measure``, gives the new text)."""
        for transform in pending:
            if not docs.height:
                break
            if isinstance(transform, Filter) or transform.name in self.stored_formatters:
                docs = rewritten(docs, transform.rewrite(docs))
            else:
                docs = rewritten(docs, transform(docs).alias("text"))
        return docs

    def _judged_without_text(self, flt: Filter) -> bool:
        return flt.name in self.stored or not flt.reads_text

    def _groups(self) -> list[list]:
        """The filters in order, runs of those judged without the text (from stored signals,
        or reading other columns) together: each of them decides on every document the run
        receives, and a document's first failing one drops it, as in turn."""
        groups: list[list] = []
        for flt in self.filters:
            joins = groups and self._judged_without_text(flt)
            if joins and self._judged_without_text(groups[-1][0]):
                groups[-1].append(flt)
            else:
                groups.append([flt])
        return groups

    def _group_reasons(self, group: list, docs: pl.DataFrame) -> list[pl.Series]:
        """Each filter's reasons in a run judged without the text: those from stored signals
        on every document (a few column operations), the others only on the documents the
        run's earlier filters keep (the URL filter after the language filter: far fewer)."""
        reasons, failed = [], np.zeros(docs.height, dtype=bool)
        for flt in group:
            if flt.name in self.stored or not failed.any():
                found = self._reasons(flt, docs)
            else:
                found = pl.Series("reason", [None] * docs.height, pl.Utf8)
                if not failed.all():
                    alive = docs.filter(pl.Series(~failed))
                    found = found.scatter(np.flatnonzero(~failed), self._reasons(flt, alive))
            failed |= found.is_not_null().to_numpy()
            reasons.append(found)
        return reasons

    def judge_stored(self, docs: pl.DataFrame) -> dict[str, Judged]:
        """Every filter judged from stored signals, on every document of ``docs``: its rules'
        values (the histograms') and its reasons."""
        stored = [(f, f.judgement()) for f in self.filters if f.name in self.stored]
        queries = [judging(_signals_of(f, docs.lazy()), rules) for f, rules in stored]
        frames = pl.collect_all(queries)  # one call: polars plans them together
        return {
            f.name: judged_from(frame, rules, docs.height)
            for (f, rules), frame in zip(stored, frames, strict=True)
        }

    def _reasons(self, flt, docs: pl.DataFrame) -> pl.Series:
        if not docs.height:
            return _NONE.reasons
        if flt.name in self.stored:
            known = self._judged_input.get(flt.name)
            return known.reasons if known else judged_from_signals(flt, docs).reasons
        result = _as_result(flt(docs), docs.height)
        if result.text is not None:
            raise ValueError(f"filter {flt.name} rewrites text it does not read (reads_text)")
        return result.reasons

    def _dropped(
        self, group: list, reasons: list[pl.Series], docs: pl.DataFrame, rejected: _Rejected
    ) -> pl.DataFrame:
        """``docs`` without those a filter of ``group`` drops (its reason in ``reasons``);
        those go to ``rejected`` with the first such filter's name and reason."""
        failed = np.column_stack([r.is_not_null().to_numpy() for r in reasons])
        drop = failed.any(axis=1)
        first = failed.argmax(axis=1)
        counts = np.bincount(first[drop], minlength=len(group))
        for flt, count in zip(group, counts.tolist(), strict=True):
            self.drop_counts[flt.name] = count
            self.total_drop_counts[flt.name] += count
        if not drop.any():
            return docs
        self._judged_input = {}
        rows = pl.Series(np.flatnonzero(drop))
        names = pl.Series([flt.name for flt in group], dtype=pl.Utf8).gather(first[drop])
        reason = pl.select(pl.coalesce(reasons)).to_series().gather(rows)
        rejected.add(docs, rows, names, reason)
        return docs.filter(pl.Series(~drop))


_NONE = FilterResult(pl.Series("reason", [], pl.Utf8))


def judged_from_signals(flt, docs: pl.DataFrame) -> Judged:
    """``flt`` judged from its stored signal columns (``<filter>.<signal>``)."""
    return judged(_signals_of(flt, docs.lazy()).collect(), flt.judgement())


def _signals_of(flt, docs: pl.LazyFrame) -> pl.LazyFrame:
    """The filter's stored signals, and the documents' language (thresholds by language)."""
    language = [pl.col("language")] if "language" in docs.collect_schema().names() else []
    signals = [pl.col(f"{flt.name}.{signal}").alias(signal) for signal in flt.signals]
    return docs.select(*signals, *language)


class _Rejected:
    """The dropped documents of one ``apply``: ``columns`` of them (all but the split words
    when None), with ``filter`` and ``reason``."""

    def __init__(self, docs: pl.DataFrame, columns: list[str] | None):
        self.columns = columns
        empty = pl.lit(None, pl.Utf8)
        self.parts = [self._columns_of(docs.clear()).with_columns(filter=empty, reason=empty)]

    def add(self, docs: pl.DataFrame, rows: pl.Series, names: pl.Series, reason: pl.Series):
        self.parts.append(self._columns_of(docs)[rows].with_columns(filter=names, reason=reason))

    def _columns_of(self, docs: pl.DataFrame) -> pl.DataFrame:
        if self.columns is None:
            return docs.drop(*SPLIT_COLUMNS, WORD_COUNTS, strict=False)
        return docs.select(self.columns)
