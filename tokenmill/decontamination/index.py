"""An evaluation set's index: each item's id, the start of its text and its normalized words'
hashes (`tokenmill.text.ngrams`), one committed `items.parquet` per version of the set file (its
SHA-256), whatever n-gram length a recipe asks; the n-grams of one or more sets are hashed into
one table when a recipe's run first needs them, once per process."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tokenmill.decontamination.sets import EvalSet, read_items
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import EVAL_INDEX, EVAL_SETS
from tokenmill.storage.outputs import (
    PartitionWriter,
    StageReport,
    read_batches,
    require_committed,
)
from tokenmill.text.ngrams import NgramTable, text_words, word_ngrams

ITEMS_FILE = "items.parquet"
SETS_FILE = "sets.json"
PREVIEW_CHARS = 300
ITEMS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),  # its first PREVIEW_CHARS characters
        ("words", pa.large_list(pa.uint64())),
    ]
)
_CACHED_TABLES = 4


def version_prefix(sha256: str) -> str:
    return f"{EVAL_SETS}/{sha256}"


def build_index(lake: Lake, evalset: EvalSet, sha256: str) -> dict:
    """Commit the index of the set file whose SHA-256 is ``sha256`` (unless committed already);
    its counts: items, words, and items without a word."""
    prefix = version_prefix(sha256)
    if lake.exists(f"{prefix}/_SUCCESS.json"):
        return require_committed(lake, prefix, f"index of {evalset.name}")["counts"]
    report = StageReport()
    empty = words = 0
    with PartitionWriter(lake, prefix, report) as out:
        sink = out.parquet(ITEMS_FILE, ITEMS_SCHEMA)
        for ids, texts in read_items(lake, evalset):
            found = text_words(texts)
            offsets = np.zeros(len(texts) + 1, dtype=np.int64)
            np.cumsum(found.counts, out=offsets[1:])
            lists = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(found.hashes))
            previews = pa.array([text[:PREVIEW_CHARS] for text in texts], pa.string())
            sink.write_table(pa.table([pa.array(ids, pa.string()), previews, lists], ITEMS_SCHEMA))
            report.records_in += len(texts)
            empty += int((found.counts == 0).sum())
            words += len(found.hashes)
        report.records_out = report.records_in
        report.counts.update(items=report.records_in, words=words, items_without_words=empty)
    return report.counts


@dataclass(frozen=True)
class SetIndex:
    """A committed index, read: its items' ids and text starts, and their words (item i's are
    ``words[offsets[i]:offsets[i + 1]]``)."""

    name: str
    sha256: str
    ids: list[str]
    previews: list[str]
    offsets: np.ndarray
    words: np.ndarray

    @classmethod
    def read(cls, lake: Lake, name: str, sha256: str) -> SetIndex:
        prefix = version_prefix(sha256)
        require_committed(lake, prefix, f"the index of evaluation set {name} ({sha256[:12]})")
        ids, previews, counts, words = [], [], [], []
        for batch in read_batches(lake, f"{prefix}/{ITEMS_FILE}"):
            ids += batch.column("id").to_pylist()
            previews += batch.column("text").to_pylist()
            lists = batch.column("words")
            counts.append(np.diff(np.asarray(lists.offsets, dtype=np.int64)))
            words.append(np.asarray(lists.flatten(), dtype=np.uint64))
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        if counts:
            np.cumsum(np.concatenate(counts), out=offsets[1:])
        flat = np.concatenate(words) if words else np.zeros(0, np.uint64)
        return cls(name, sha256, ids, previews, offsets, flat)

    def item_words(self, item: int) -> np.ndarray:
        return self.words[self.offsets[item] : self.offsets[item + 1]]


class SetTable:
    """The n-grams of several sets in one table; per entry (an n-gram in hash order): its set,
    item and first word in the item. Memory (``nbytes``): about 30 bytes per n-gram with the
    items' words it confirms a match against, plus the items' ids and text starts."""

    def __init__(self, sets: list[SetIndex], n: int):
        self.sets = sets
        self.n = n
        hashes, owner, item, first = [], [], [], []
        for number, index in enumerate(sets):
            grams, per_item = word_ngrams(index.words, np.diff(index.offsets), n)
            items = np.repeat(np.arange(len(per_item), dtype=np.int32), per_item)
            starts = np.repeat(np.cumsum(per_item) - per_item, per_item)
            hashes.append(grams)
            owner.append(np.full(len(grams), number, dtype=np.int8))
            item.append(items)
            first.append((np.arange(len(grams)) - starts).astype(np.int32))
        grams = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
        self.table = NgramTable(grams, n)
        order = self.table.order
        self.table.order = None  # the per-entry arrays below replace it
        self.owner = np.concatenate(owner)[order] if owner else np.zeros(0, np.int8)
        self.item = np.concatenate(item)[order] if item else np.zeros(0, np.int32)
        self.first = np.concatenate(first)[order] if first else np.zeros(0, np.int32)

    @property
    def ngrams(self) -> int:
        return len(self.table.sorted)

    @property
    def nbytes(self) -> int:
        own = self.owner.nbytes + self.item.nbytes + self.first.nbytes
        words = sum(index.words.nbytes + index.offsets.nbytes for index in self.sets)
        return self.table.sorted.nbytes + self.table.bitmap.nbytes + own + words


_tables: OrderedDict[tuple, SetTable] = OrderedDict()
_tables_lock = threading.Lock()


def set_table(lake: Lake, versions: dict[str, str], n: int) -> SetTable:
    """The table of these sets (name -> SHA-256) for n-grams of n words, read and hashed once
    per process (the last few kept)."""
    key = (lake.uri(EVAL_INDEX), tuple(sorted(versions.items())), n)
    with _tables_lock:
        if key in _tables:
            _tables.move_to_end(key)
            return _tables[key]
    sets = [SetIndex.read(lake, name, sha) for name, sha in sorted(versions.items())]
    table = SetTable(sets, n)
    with _tables_lock:
        _tables[key] = table
        while len(_tables) > _CACHED_TABLES:
            _tables.popitem(last=False)
    return table


def declared_versions(lake: Lake) -> dict[str, dict]:
    """The sets the committed index holds: name -> {sha256, items, words, ...}."""
    return require_committed(lake, EVAL_INDEX, "eval_index")["counts"]["sets"]
