"""The tests' reference clustering: every document in memory, a union-find over them all (what
``dedup_clusters`` did before it worked in bounded phases), to check the stage's decisions
against.

Documents are indices 0..n-1 in a deterministic global order. Key columns (the exact content
hash, then one LSH band at a time) arrive one by one; every group of documents sharing a key
becomes connected. Components are labelled by their smallest member index, so the result does
not depend on the order in which columns or pairs are linked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from tokenmill.dedup.clustering import bucket_edges
from tokenmill.dedup.minhash import shingles


class UnionFind:
    """Disjoint sets over 0..n-1 in numpy arrays.

    Invariant: ``parent[i] <= i``, so each root is the smallest index of its set and the
    structure is acyclic no matter in which order unions arrive.
    """

    def __init__(self, n: int) -> None:
        self.parent = np.arange(n, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.parent)

    def find(self, items: np.ndarray | int) -> np.ndarray:
        """Roots of ``items``."""
        self._compress()
        return self.parent[np.asarray(items, dtype=np.int64)]

    def union_pairs(self, a: np.ndarray, b: np.ndarray) -> None:
        """Merge the sets of a[i] and b[i] for every i."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        while True:
            self._compress()
            root_a, root_b = self.parent[a], self.parent[b]
            pending = root_a != root_b
            if not pending.any():
                return
            a, b, root_a, root_b = a[pending], b[pending], root_a[pending], root_b[pending]
            # Several pairs may hook the same root: the smallest target wins, the rest retry.
            np.minimum.at(self.parent, np.maximum(root_a, root_b), np.minimum(root_a, root_b))

    def roots(self) -> np.ndarray:
        """Root (smallest member index) of every element."""
        self._compress()
        return self.parent.copy()

    def _compress(self) -> None:
        """Point every element straight at its root by pointer doubling."""
        parent = self.parent
        while True:
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand
        self.parent = parent


def link_equal_keys(uf: UnionFind, keys: np.ndarray) -> None:
    """Connect every group of documents sharing a key (keys[i] belongs to document i)."""
    keys = np.asarray(keys)
    if len(keys) != len(uf):
        raise ValueError(f"{len(keys)} keys for {len(uf)} documents")
    uf.union_pairs(*bucket_edges(keys, np.arange(len(keys), dtype=np.int64)))


def cluster(n_docs: int, key_columns: Iterable[np.ndarray]) -> np.ndarray:
    """Component label (its smallest document index) of every document, as int64.

    ``key_columns`` yields uint64 arrays of length ``n_docs`` one at a time, e.g. the exact
    content hashes and then each LSH band column, so only one column is held at once.
    """
    uf = UnionFind(n_docs)
    for keys in key_columns:
        link_equal_keys(uf, keys)
    return uf.roots()


def choose_survivors(components: np.ndarray, rank: np.ndarray | None = None) -> np.ndarray:
    """Per document, the index of the member of its component that is kept.

    The survivor has the lowest ``rank`` (default: the document index), ties going to the lowest
    index, so the choice does not depend on processing order.
    """
    components = np.asarray(components)
    index = np.arange(len(components), dtype=np.int64)
    rank = index if rank is None else np.asarray(rank)
    if len(rank) != len(components):
        raise ValueError(f"{len(rank)} ranks for {len(components)} documents")
    if not len(components):
        return index
    order = np.lexsort((index, rank, components))
    sorted_components = components[order]
    group_starts = np.flatnonzero(
        np.concatenate(([True], sorted_components[1:] != sorted_components[:-1]))
    )
    group_sizes = np.diff(np.append(group_starts, len(order)))
    survivors = np.empty_like(index)
    survivors[order] = np.repeat(order[group_starts], group_sizes)
    return survivors


class Removals(NamedTuple):
    """Documents dropped as duplicates, each with its cluster id and the kept document."""

    doc_index: np.ndarray  # int64, ascending
    cluster_id: np.ndarray  # int64: the survivor's index
    survivor: np.ndarray  # int64


def removals(survivors: np.ndarray) -> Removals:
    """The documents whose survivor is another document."""
    survivors = np.asarray(survivors, dtype=np.int64)
    removed = np.flatnonzero(survivors != np.arange(len(survivors)))
    return Removals(removed, survivors[removed], survivors[removed])


def jaccard(left: str, right: str) -> float:
    """The exact Jaccard similarity of two texts' shingle sets, which MinHash estimates."""
    a, b = set(shingles(left)), set(shingles(right))
    return len(a & b) / len(a | b)
