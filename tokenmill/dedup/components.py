"""Connected components of the duplicate graph in bounded memory.

Documents are nodes 0..n-1 in ranges of ``width`` (``Nodes``); an edge {a, b} is stored as rows
(u, v) routed to u's range (``tokenmill.storage.spill``). A task holds one range's node state (8
bytes a node) and one file of rows at a time, never the graph.

The tasks alternate the large-star and small-star operations of Kiveris et al., "Connected
Components in MapReduce and Beyond" (SoCC 2014), until neither changes an edge; the graph is then
a star per component around its smallest document, which is each member's label (the root a
union-find keeping smallest members as roots gives: the tests' reference).

- large star at u: m(u) = min(u, neighbours); each edge {u, v} with v > u becomes {v, m(u)}.
  Rows: both directions, under each end's range.
- small star at u: m(u) = min(u, smaller neighbours); each smaller neighbour v and u itself are
  linked to m(u). Rows: once, under the larger end's range.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tokenmill.storage.lake import Lake
from tokenmill.storage.spill import Piece, Source, SpillWriter, range_files, read_files

EDGE_SCHEMA = pa.schema([("u", pa.int64()), ("v", pa.int64())])


@dataclass(frozen=True)
class Nodes:
    """Documents 0..count-1 in ranges of ``width``."""

    count: int
    width: int

    @property
    def ranges(self) -> int:
        return max(1, -(-self.count // self.width))

    def of(self, docs: np.ndarray) -> np.ndarray:
        return np.asarray(docs, dtype=np.int64) // self.width

    def bounds(self, index: int) -> tuple[int, int]:
        return index * self.width, min((index + 1) * self.width, self.count)


def add_edges(out: SpillWriter, nodes: Nodes, a: np.ndarray, b: np.ndarray, both: bool) -> None:
    """Edges {a[i], b[i]} with a < b: as rows in both directions (a large star's input), or
    once under the larger end (a small star's)."""
    u, v = (np.concatenate([a, b]), np.concatenate([b, a])) if both else (b, a)
    out.add(pa.table({"u": u, "v": v}, schema=EDGE_SCHEMA), nodes.of(u))


def _rows(lake: Lake, pieces: list[Piece]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for table in read_files(lake, pieces, ["u", "v"]):
        yield table.column("u").to_numpy(), table.column("v").to_numpy()


def smallest_neighbours(
    lake: Lake, pieces: list[Piece], nodes: Nodes, index: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per node of range ``index``: min(node, its neighbours), and whether it has any."""
    low, high = nodes.bounds(index)
    smallest = np.arange(low, high, dtype=np.int64)
    touched = np.zeros(high - low, dtype=np.bool_)
    for u, v in _rows(lake, pieces):
        np.minimum.at(smallest, u - low, v)
        touched[u - low] = True
    return smallest, touched


def star_task(
    lake: Lake, sources: list[Source], nodes: Nodes, index: int, out: SpillWriter, small: bool
) -> dict:
    """One range's share of a large (``small=False``) or small star; commits ``out`` with
    whether any edge changed."""
    low = nodes.bounds(index)[0]
    pieces = range_files(lake, sources, index)
    smallest, _ = smallest_neighbours(lake, pieces, nodes, index)
    changed, rows = False, 0
    for u, v in _rows(lake, pieces):
        rows += len(u)
        if small:  # every row is (larger end, smaller end)
            m = smallest[u - low]
            moved = v != m
            changed |= bool(moved.any())
            add_edges(out, nodes, m[moved], v[moved], both=True)
        else:
            larger = v > u
            u, v = u[larger], v[larger]
            m = smallest[u - low]
            changed |= bool((m < u).any())
            add_edges(out, nodes, m, v, both=False)
    if small:
        hooked = np.flatnonzero(smallest != np.arange(low, low + len(smallest)))
        add_edges(out, nodes, smallest[hooked], hooked + low, both=True)
    return out.commit({"changed": changed, "rows_in": rows})
