"""Documents judged by their language's settings: the rows of a batch grouped by what their
language (the ``language`` column) decides — a chain, a signal profile — each group handled by
its own, and the results put back in the batch's order. A batch of one group (an English-only
recipe, most batches) goes through untouched."""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np
import polars as pl

from tokenmill.filters.rules import Judged

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
        self._key = key
        self._unserved = unserved
        self._chains: dict[Hashable, object] = {}
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
        found = groups(docs, self._key)
        return [
            (self._chains.get(key) or self.chain(_label_of(docs, rows)), rows)
            for key, rows in found
        ]

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


def _label_of(docs: pl.DataFrame, rows: np.ndarray | None) -> str | None:
    if "language" not in docs.columns or not docs.height:
        return None
    return docs["language"][0 if rows is None else int(rows[0])]


def _by_row(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat(frames, how="diagonal_relaxed").sort(_ROW).drop(_ROW)
