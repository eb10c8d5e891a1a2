"""Documents judged by their language's settings: the rows of a batch grouped by what their
language (the ``language`` column) decides — a chain, a signal profile — each group handled by
its own, and the results put back in the batch's order. A batch of one group (an English-only
recipe, most batches) goes through untouched."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable

import numpy as np
import polars as pl

from tokenmill.filters.language import LanguageFilter
from tokenmill.filters.protocol import Filter
from tokenmill.filters.rules import ByLanguage, Judged, Judgement, Rule

_ROW = "_row"


def groups(docs: pl.DataFrame, key: Callable[[str | None], Hashable]) -> list[tuple]:
    """``(key, rows)`` per distinct ``key(language)`` of the documents, in first-seen order;
    ``rows`` is None when every document has the same key."""
    if "language" not in docs.columns or not docs.height:
        return [(key(None), None)]
    labels = docs["language"]
    distinct = labels.unique(maintain_order=True).to_list()
    keys = {label: key(label) for label in distinct}
    if len(set(keys.values())) == 1:
        return [(next(iter(keys.values())), None)]
    codes = {k: i for i, k in enumerate(dict.fromkeys(keys.values()))}
    code_of = pl.Series([codes[keys[label]] for label in distinct], dtype=pl.UInt32)
    per_row = labels.replace_strict(pl.Series(distinct, dtype=labels.dtype), code_of)
    per_row = per_row.to_numpy()
    return [(k, np.flatnonzero(per_row == i)) for k, i in codes.items()]


class LanguageChains:
    """A ``FilterChain`` per set of language settings, as one: ``chain_for(label)`` gives the
    chain a language's documents go through (built on first use); ``base`` is the chain of
    the recipe's own settings, which serves every language without settings of its own and
    names the filters (their thresholds, in reports, are the base chain's)."""

    def __init__(
        self,
        chain_for: Callable[[str | None], object],
        key: Callable[[str | None], Hashable],
        eager: list[str],
        unserved: frozenset[str] = frozenset(),
    ):
        self._chain_for = chain_for
        self._key = functools.cache(key)  # asked of every language of every batch
        self._unserved = unserved
        self._chains: dict[Hashable, object] = {}
        self._merged: dict[frozenset, object] = {}
        self.base = self.chain(None)
        for label in eager:
            self.chain(label)

    def chain(self, label: str | None):
        key = self._key(label)
        if key not in self._chains:
            self._chains[key] = self._chain_for(label)
        return self._chains[key]

    @property
    def filters(self) -> list:
        return self.base.filters

    @property
    def formatters(self) -> list:
        return self.base.formatters

    @property
    def stored(self) -> set[str]:
        """The filters the stored signals judge in every chain: those built so far, less the
        ``unserved`` (measured otherwise for some language whose chain is not built yet)."""
        served = set.intersection(*(set(chain.stored) for chain in self._chains.values()))
        return served - self._unserved

    def _groups(self, docs: pl.DataFrame) -> list[tuple]:
        """(chain, rows) per group of documents; one chain for the whole batch (rows None)
        where its languages' chains differ in thresholds only (``merged``)."""
        found = groups(docs, self._key)
        if len(found) == 1:
            return [(self._chains.get(found[0][0]) or self.chain(language_at(docs, None)), None)]
        labels = {label: self._key(label) for label in docs["language"].unique().to_list()}
        for label, key in labels.items():
            if key not in self._chains:
                self.chain(label)
        keys = frozenset(labels.values())
        if keys not in self._merged:
            self._merged[keys] = merged(self._chains, labels, self.base)
        if self._merged[keys] is not None:
            return [(self._merged[keys], None)]
        return [(self._chains[key], rows) for key, rows in found]

    def judge_stored(self, docs: pl.DataFrame) -> dict[str, Judged]:
        parts = self._groups(docs)
        if len(parts) == 1:
            return parts[0][0].judge_stored(docs)
        whole: dict[str, Judged] = {}
        for chain, rows in parts:
            for name, found in chain.judge_stored(docs[rows]).items():
                if name not in whole:
                    values = np.full((docs.height, found.values.shape[1]), np.nan)
                    whole[name] = Judged(values, pl.Series("reason", [None] * docs.height, pl.Utf8))
                whole[name].values[rows] = found.values
                whole[name] = whole[name]._replace(
                    reasons=whole[name].reasons.scatter(rows, found.reasons)
                )
        return whole

    def apply(
        self,
        docs: pl.DataFrame,
        finish: bool = True,
        rejected_columns: list[str] | None = None,
        judged: dict[str, Judged] | None = None,
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        parts = self._groups(docs)
        if len(parts) == 1:
            return parts[0][0].apply(docs, finish, rejected_columns, judged)
        numbered = docs.with_columns(pl.int_range(docs.height, dtype=pl.Int64).alias(_ROW))
        columns = None if rejected_columns is None else [*rejected_columns, _ROW]
        kept, rejected = [], []
        for chain, rows in parts:
            mine = None
            if judged:
                mine = {
                    name: Judged(found.values[rows], found.reasons.gather(rows))
                    for name, found in judged.items()
                }
            got = chain.apply(numbered[rows], finish, columns, mine)
            kept.append(got[0])
            rejected.append(got[1])
        return _by_row(kept), _by_row(rejected)


def language_at(docs: pl.DataFrame, row) -> str | None:
    """The language of document ``row`` (None: the first), None without languages."""
    if "language" not in docs.columns or not docs.height:
        return None
    return docs["language"][0 if row is None else int(row)]


def _by_row(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames, how="diagonal_relaxed").sort(_ROW).drop(_ROW)


def merged(chains: dict, labels: dict, base):
    """One ``FilterChain`` judging every language of a batch as its own chain does, when
    those chains differ in thresholds only where they judge from the stored signals: a
    threshold per document (``ByLanguage``) instead of a chain per language, so a batch of
    fifty languages is one pass, not fifty; a filter that some chain measures from the text
    must be the same in all (then it measures every row). None when they differ otherwise.
    ``chains``: by key; ``labels``: each language of the batch -> its chain's key."""
    from tokenmill.filters.chain import FilterChain

    own = {label: chains[key] for label, key in labels.items() if chains[key] is not base}
    every = [base, *own.values()]
    names = [f.name for f in base.filters]
    formatting = _kinds(base.formatters)
    for chain in every:
        if [f.name for f in chain.filters] != names or _kinds(chain.formatters) != formatting:
            return None
        if set(chain.stored_formatters) != set(base.stored_formatters):
            return None
    filters = []
    for position, flt in enumerate(base.filters):
        theirs = {label: chain.filters[position] for label, chain in own.items()}
        if all(other is flt or _same_settings(other, flt) for other in theirs.values()):
            filters.append(flt)  # where a chain measures it from the text, all rows are
        elif isinstance(flt, LanguageFilter):
            scores = {label: other.min_score for label, other in theirs.items()}
            filters.append(LanguageFilter(flt.keep, flt.min_score, scores))
        elif all(flt.name in chain.stored for chain in every):
            joined = ThresholdsByLanguage.of(flt, theirs)
            if joined is None:
                return None
            filters.append(joined)
        else:
            return None
    chain = FilterChain(filters, base.formatters)
    chain.stored = set.intersection(*(set(c.stored) for c in every))
    chain.stored_formatters = set(base.stored_formatters)
    return chain


class ThresholdsByLanguage(Filter):
    """A built-in filter whose rules hold, per document, its language's filter's thresholds
    (``ByLanguage``); everything else is ``base``'s (they measure alike, judged from the
    stored signals)."""

    def __init__(self, base: Filter, judgement: Judgement):
        self.base = base
        self._judgement = judgement
        self.name = base.name
        for attribute in ("reads_text", "rewrites", "rewrite_signal", "signals", "text_signals"):
            setattr(self, attribute, getattr(base, attribute))

    @classmethod
    def of(cls, base: Filter, by_label: dict[str, Filter]) -> ThresholdsByLanguage | None:
        mine = base.judgement()
        theirs = {label: flt.judgement() for label, flt in by_label.items()}
        rules = []
        for j, rule in enumerate(mine.rules):
            thresholds = {}
            for label, judgement in theirs.items():
                other = judgement.rules[j] if j < len(judgement.rules) else None
                if not _same_rule(rule, other):
                    return None
                if other.threshold != rule.threshold:
                    thresholds[label] = other.threshold
            if thresholds:
                rule = rule._replace(threshold=ByLanguage(thresholds, rule.threshold))
            rules.append(rule)
        if any(
            len(j.rules) != len(mine.rules) or not _same_judgement(mine, j) for j in theirs.values()
        ):
            return None
        return cls(base, mine._replace(rules=rules))

    def judgement(self) -> Judgement:
        return self._judgement

    def rules(self) -> list[Rule]:
        return self._judgement.rules

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        return self.base.measure(docs)

    def rewrite(self, docs: pl.DataFrame) -> pl.Series:
        return self.base.rewrite(docs)

    def __call__(self, docs: pl.DataFrame):
        raise TypeError(f"{self.name}: judged per language from the stored signals only")


def _same_settings(one: Filter, other: Filter) -> bool:
    return type(one) is type(other) and vars(one) == vars(other)


def _kinds(formatters: list) -> list[tuple]:
    return [(f.name, f.measure_key()) for f in formatters]


def _same_rule(rule: Rule, other: Rule | None) -> bool:
    return (
        other is not None
        and (rule.label, rule.op, rule.reason) == (other.label, other.op, other.reason)
        and rule.value.meta.eq(other.value)
    )


def _same_judgement(mine: Judgement, other: Judgement) -> bool:
    if (mine.empty is None) != (other.empty is None) or mine.fatal != other.fatal:
        return False
    return mine.empty is None or mine.empty.meta.eq(other.empty)
