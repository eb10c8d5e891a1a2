"""From duplicate clusters to the removed list, one range of documents at a time.

``members_task`` (per range of documents): each linked document's label (its cluster's smallest
document, from the components' last rows), with its doc id, exact hash and rank value read from
its own signature files, routed to its label's range. ``removed_task`` (per range of labels):
each cluster's survivor — the lowest rank value, ties to the lowest document — then every other
member as a removed row, routed to its own range. ``write_removed`` writes those rows in document
order. A task holds one range's rows, never the crawl's.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tokenmill.dedup.components import Nodes, smallest_neighbours
from tokenmill.dedup.signature_files import SignatureFiles, gather
from tokenmill.storage.lake import Lake
from tokenmill.storage.spill import Source, SpillWriter, range_files, read_files, read_sources


def members_task(
    lake: Lake,
    files: SignatureFiles,
    sources: list[Source],
    nodes: Nodes,
    index: int,
    rank_column: str | None,
    out: SpillWriter,
) -> dict:
    low = nodes.bounds(index)[0]
    smallest, touched = smallest_neighbours(lake, range_files(lake, sources, index), nodes, index)
    docs = np.flatnonzero(touched).astype(np.int64) + low
    labels = smallest[docs - low]
    del smallest, touched
    columns = ["doc_id", "exact_hash", *([rank_column] if rank_column else [])]
    values = gather(lake, files, docs, columns)
    table = pa.table({"label": labels, "doc": docs}).append_column("doc_id", values["doc_id"])
    table = table.append_column("exact_hash", values["exact_hash"])
    if rank_column:
        table = table.append_column("rank", values[rank_column])
    out.add(table, nodes.of(labels))
    return out.commit({"linked": len(docs)})


def _by_rank(frame: pl.DataFrame, descending: bool) -> pl.DataFrame:
    """Each label's first member by (rank, doc): nulls rank last, as a dense rank filled with
    one past the last rank did."""
    by = ["label", "rank", "doc"] if "rank" in frame.columns else ["label", "doc"]
    order = [False, descending, False][: len(by)]
    frame = frame.sort(by, descending=order, nulls_last=True)
    return frame.unique("label", keep="first", maintain_order=True)


def removed_task(
    lake: Lake,
    files: SignatureFiles,
    sources: list[Source],
    nodes: Nodes,
    index: int,
    descending: bool,
    out: SpillWriter,
) -> dict:
    pieces = range_files(lake, sources, index)

    def frames() -> Iterator[pl.DataFrame]:
        for table in read_files(lake, pieces):
            yield pl.from_arrow(table)

    best, clusters = None, []
    for frame in frames():
        own = frame.filter(pl.col("doc") == pl.col("label"))  # the label is a member
        clusters.append(own.select("label", cluster_id="doc_id"))
        if "rank" in frame.columns:
            best = _by_rank(frame if best is None else pl.concat([best, frame]), descending)
        else:  # first seen: the smallest document, the label itself
            best = own if best is None else pl.concat([best, own])
    if best is None:
        return out.commit({"clusters": 0, "exact_duplicate": 0, "near_duplicate": 0})
    survivors = best.select(
        "label", survivor="doc", survivor_doc_id="doc_id", survivor_hash="exact_hash"
    )
    cluster_ids = pl.concat(clusters)
    exact = near = 0
    for frame in frames():
        joined = frame.join(survivors, on="label").join(cluster_ids, on="label")
        removed = joined.filter(pl.col("doc") != pl.col("survivor")).sort("doc")
        is_exact = (removed["exact_hash"] == removed["survivor_hash"]).to_numpy()
        exact += int(is_exact.sum())
        near += int((~is_exact).sum())
        docs = removed["doc"].to_numpy()
        survivor = removed["survivor"].to_numpy()
        table = pa.table(
            {
                "doc": docs,
                "unit": files.unit_names(docs),
                "part": files.part_numbers(docs),
                "doc_id": removed["doc_id"].to_arrow(),
                "cluster_id": removed["cluster_id"].to_arrow(),
                "survivor_unit": files.unit_names(survivor),
                "survivor_doc_id": removed["survivor_doc_id"].to_arrow(),
                "reason": np.where(is_exact, "exact_duplicate", "near_duplicate"),
            }
        )
        out.add(table, nodes.of(docs))
    return out.commit(
        {"clusters": len(survivors), "exact_duplicate": exact, "near_duplicate": near}
    )


def removed_in_order(
    lake: Lake, sources: list[Source], nodes: Nodes, rows: int, schema: pa.Schema
) -> Iterator[pa.Table]:
    """The removed rows (without ``doc``) in document order, ``rows`` at a time (the last
    slice shorter); one empty slice if none."""
    held: list[pa.Table] = []
    count = 0
    written = False
    for index in range(nodes.ranges):
        tables = list(read_sources(lake, sources, index))
        if not tables:
            continue
        table = pa.concat_tables(tables)
        order = pc.sort_indices(table, [("doc", "ascending")])
        table = table.take(order).drop(["doc"]).cast(schema)
        held.append(table)
        count += table.num_rows
        while count >= rows:
            joined = pa.concat_tables(held)
            yield joined.slice(0, rows).combine_chunks()
            written = True
            held, count = [joined.slice(rows)], count - rows
    if count or not written:
        yield pa.concat_tables(held).combine_chunks() if held else schema.empty_table()
