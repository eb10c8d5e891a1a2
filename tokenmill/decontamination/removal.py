"""A recipe's decontamination: its settings, and the documents of a batch that share an n-gram
with an evaluation item dropped (``drop``), or the passages they share cut out with ``window``
characters on each side (``cut``, NeMo Curator's task decontamination), dropping a document
left shorter than ``min_chars``.

Candidates come from the compiled search (`tokenmill.text.ngrams`); each is confirmed by
comparing its words' hashes with the item's before anything is removed, so a document is only
ever removed for an n-gram it shares with an item.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from tokenmill.decontamination.index import SetTable
from tokenmill.text.ngrams import text_words

ACTIONS = ("drop", "cut")
FILTER_NAME = "decontaminate"
# cleaned's marker counts: each set's version (SHA-256) and per set what was removed; and the
# file listing every passage found
DECONTAMINATED_AGAINST = "decontaminated_against"
CONTAMINATION = "contamination"
CONTAMINATION_FILE = "contamination.parquet"
SHOWN_CHARS = 200  # of a matched n-gram, in contamination.parquet and a rejected reason


@dataclass(frozen=True)
class Decontamination:
    """``clean.decontaminate``: the declared sets to check against, the n-gram length in
    normalized words, what to do with a match, and for ``cut`` the characters removed around
    it and the shortest document kept."""

    sets: tuple[str, ...] = ()
    ngram: int = 13
    action: str = "drop"
    window: int = 200
    min_chars: int = 200

    KEYS = ("sets", "ngram", "action", "window", "min_chars")

    @classmethod
    def parse(cls, value: Any, where: str = "clean.decontaminate") -> Decontamination:
        if isinstance(value, Decontamination):
            return value
        if not value:
            return cls()
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a mapping {{sets, ngram, action, ...}}")
        unknown = sorted(set(value) - set(cls.KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}; known: {list(cls.KEYS)}")
        sets = value.get("sets", [])
        if isinstance(sets, str):
            sets = [sets]
        if not isinstance(sets, list | tuple) or not all(isinstance(s, str) for s in sets):
            raise ValueError(f"{where}.sets: a list of declared evaluation set names")
        made = cls(tuple(sets), **{k: value[k] for k in cls.KEYS[1:] if k in value})
        for key, lowest in (("ngram", 1), ("window", 0), ("min_chars", 0)):
            number = getattr(made, key)
            if not isinstance(number, int) or isinstance(number, bool) or number < lowest:
                raise ValueError(f"{where}.{key}: an integer >= {lowest}, got {number!r}")
        if made.action not in ACTIONS:
            raise ValueError(f"{where}.action: one of {list(ACTIONS)}, got {made.action!r}")
        return made

    def record(self) -> dict:
        return {"sets": list(self.sets)} | {k: getattr(self, k) for k in self.KEYS[1:]}


@dataclass
class Outcome:
    """A batch decontaminated: the documents kept (cut ones with their new text), the dropped
    ones' rows with a ``reason``, every confirmed passage (CONTAMINATION_SCHEMA's columns) and
    per set what was removed."""

    kept: pl.DataFrame
    dropped: pl.DataFrame
    passages: list[dict] = field(default_factory=list)
    counts: dict[str, dict] = field(default_factory=dict)


def decontaminate(docs: pl.DataFrame, table: SetTable, settings: Decontamination) -> Outcome:
    """``docs`` (doc_id, url, text, ...) checked against ``table``'s sets."""
    matches = table.table.find(docs["text"]) if docs.height and table.ngrams else None
    if matches is None or not len(matches.doc):
        return Outcome(docs, docs.clear())
    n = table.n
    candidates = np.unique(matches.doc)
    texts = docs["text"].gather(candidates).to_list()
    words = text_words(texts, offsets=True)
    first_word = np.zeros(len(candidates) + 1, dtype=np.int64)
    np.cumsum(words.counts, out=first_word[1:])
    row_of = {int(doc): row for row, doc in enumerate(candidates)}
    spans: dict[int, list[tuple[int, int, int, int]]] = {}  # row -> (start, end, set, item)
    for doc, word, entry in zip(matches.doc, matches.word, matches.entry, strict=True):
        row = row_of[int(doc)]
        at = first_word[row] + word
        owner, item = int(table.owner[entry]), int(table.item[entry])
        first = int(table.first[entry])
        expected = table.sets[owner].item_words(item)[first : first + n]
        if not np.array_equal(words.hashes[at : at + n], expected):
            continue  # a hash collision, not a shared n-gram
        spans.setdefault(row, []).append(
            (int(words.starts[at]), int(words.ends[at + n - 1]), owner, item)
        )
    if not spans:
        return Outcome(docs, docs.clear())
    keep = np.ones(docs.height, dtype=bool)
    new_text: dict[int, str] = {}
    reasons: dict[int, str] = {}
    passages: list[dict] = []
    counts: dict[str, dict] = {}
    doc_ids, urls = docs["doc_id"], docs["url"] if "url" in docs.columns else None
    for row, found in spans.items():
        doc = int(candidates[row])
        text = texts[row]
        starts = words.starts[first_word[row] : first_word[row + 1]]
        ends = words.ends[first_word[row] : first_word[row + 1]]
        merged = _passages(found)
        per_set: dict[int, Counter] = {}
        first_passage = len(passages)
        for start, end, owner, item in merged:
            passages.append(
                {
                    "doc_id": doc_ids[doc],
                    "url": urls[doc] if urls is not None else None,
                    "set": table.sets[owner].name,
                    "item": table.sets[owner].ids[item],
                    "start": start,
                    "end": end,
                    "ngram": _first_ngram(text, starts, ends, start, n)[:SHOWN_CHARS],
                    "action": settings.action,
                }
            )
            per_set.setdefault(owner, Counter())[table.sets[owner].ids[item]] += 1
        all_words = int(words.counts[row])
        if settings.action == "drop":
            keep[doc] = False
            shown = passages[first_passage]
            reasons[doc] = (
                f"shares {n}-grams with {shown['set']} item {shown['item']} at "
                f"{shown['start']}-{shown['end']}: {shown['ngram']!r}"
            )
            removed_chars, removed_words, dropped_doc = len(text), all_words, True
        else:
            cut, removed_words = _cut(text, merged, settings.window, starts)
            removed_chars = len(text) - len(cut)
            dropped_doc = len(cut.strip()) < settings.min_chars
            if dropped_doc:
                keep[doc] = False
                reasons[doc] = (
                    f"{len(cut.strip())} characters left after cutting passages of "
                    f"{', '.join(sorted({table.sets[o].name for _, _, o, _ in merged}))} "
                    f"(min_chars {settings.min_chars})"
                )
                removed_chars, removed_words = len(text), all_words
            else:
                new_text[doc] = cut
        for owner, items in per_set.items():
            entry = counts.setdefault(
                table.sets[owner].name,
                {"documents": 0, "removed_documents": 0, "chars": 0, "words": 0, "items": {}},
            )
            entry["documents"] += 1
            entry["removed_documents"] += int(dropped_doc)
            entry["chars"] += removed_chars
            entry["words"] += removed_words
            for item, times in items.items():
                entry["items"][item] = entry["items"].get(item, 0) + times
    kept_docs = docs
    if new_text:
        index = pl.Series(list(new_text), dtype=pl.Int64)
        replaced = docs["text"].scatter(index, pl.Series(list(new_text.values()), dtype=pl.Utf8))
        kept_docs = docs.with_columns(replaced.alias("text"))
    mask = pl.Series(keep)
    dropped = kept_docs.filter(~mask)
    dropped_rows = [row for row in range(docs.height) if not keep[row]]
    dropped = dropped.with_columns(
        filter=pl.lit(FILTER_NAME),
        reason=pl.Series([reasons[row] for row in dropped_rows], dtype=pl.Utf8),
    )
    return Outcome(kept_docs.filter(mask), dropped, passages, counts)


def _passages(found: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Overlapping n-grams of one item as one passage: (start, end, set, item), in order."""
    merged: list[list[int]] = []
    for start, end, owner, item in sorted(found):
        last = merged[-1] if merged else None
        if last and last[2] == owner and last[3] == item and start <= last[1]:
            last[1] = max(last[1], end)
        else:
            merged.append([start, end, owner, item])
    return [tuple(m) for m in merged]


def _first_ngram(text: str, starts: np.ndarray, ends: np.ndarray, start: int, n: int) -> str:
    """The text of the n-gram that starts at character ``start`` (its words: ``starts``,
    ``ends``)."""
    at = int(np.searchsorted(starts, start))
    return text[start : ends[min(at + n - 1, len(ends) - 1)]]


def _cut(text: str, passages, window: int, starts: np.ndarray) -> tuple[str, int]:
    """``text`` without its passages and ``window`` characters on each side (the pieces left
    joined by a new line), and the number of words removed."""
    cuts: list[list[int]] = []
    for start, end, _, _ in sorted(passages):
        start, end = max(start - window, 0), min(end + window, len(text))
        if cuts and start <= cuts[-1][1]:
            cuts[-1][1] = max(cuts[-1][1], end)
        else:
            cuts.append([start, end])
    pieces, position = [], 0
    for start, end in cuts:
        pieces.append(text[position:start].strip())
        position = end
    pieces.append(text[position:].strip())
    removed = sum(int(((starts >= s) & (starts < e)).sum()) for s, e in cuts)
    return "\n".join(piece for piece in pieces if piece), removed
