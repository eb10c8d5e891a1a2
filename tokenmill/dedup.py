"""Exact and MinHash near-duplicate removal within a crawl, FineWeb style, in three steps.

1. signatures (per shard): normalized-content hash and LSH band hashes per document.
2. clusters (per crawl): docs sharing the content hash or any band bucket are linked, one key
   column at a time so memory stays O(documents); each cluster keeps one survivor chosen by a
   deterministic rule, and every other member is listed with its cluster and survivor.
3. deduplicated (per shard): the cleaned documents minus the listed ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.clean import CLEANED, DOC_SCHEMA
from tokenmill.clusters import choose_survivors, cluster
from tokenmill.lake import Lake
from tokenmill.minhash import MinHasher, band_hashes, content_hashes, optimal_bands_rows
from tokenmill.outputs import (
    PartitionWriter,
    StageReport,
    read_batches,
    read_column,
    require_committed,
)
from tokenmill.shards import Shard, crawl_prefix, registered_shards

SIGNATURES = "signatures"
CLUSTERS = "clusters"
DEDUPLICATED = "deduplicated"
SURVIVOR_RULES = ("first_seen", "earliest_date", "lowest_doc_id")

CLUSTER_SCHEMA = pa.schema(
    [
        ("shard", pa.string()),
        ("doc_id", pa.string()),
        ("cluster_id", pa.string()),
        ("survivor_shard", pa.string()),
        ("survivor_doc_id", pa.string()),
        ("reason", pa.string()),
    ]
)
REMOVED_SCHEMA = pa.schema(
    [f for f in DOC_SCHEMA if f.name != "text"]
    + [f for f in CLUSTER_SCHEMA if f.name not in ("shard", "doc_id")]
)


@dataclass(frozen=True)
class DedupSettings:
    ngram: int = 5
    bands: int = 14
    rows: int = 8
    threshold: float | None = None  # a target Jaccard similarity instead of bands × rows
    seed: int = 1
    survivor: str = "first_seen"

    def __post_init__(self):
        if self.survivor not in SURVIVOR_RULES:
            raise ValueError(f"survivor must be one of {SURVIVOR_RULES}, not {self.survivor!r}")

    def banding(self) -> tuple[int, int]:
        if self.threshold is None:
            return self.bands, self.rows
        return optimal_bands_rows(self.threshold, self.bands * self.rows)

    def signature_params(self) -> dict:
        bands, rows = self.banding()
        return {"ngram": self.ngram, "bands": bands, "rows": rows, "seed": self.seed}


def band_column(band: int) -> str:
    return f"band_{band:02d}"


def compute_signatures(lake: Lake, shard: Shard, settings: DedupSettings) -> StageReport:
    source = shard.prefix(CLEANED)
    require_committed(lake, source, f"cleaned {shard}")
    bands, rows = settings.banding()
    hasher = MinHasher(num_perm=bands * rows, ngram=settings.ngram, seed=settings.seed)
    schema = pa.schema(
        [("doc_id", pa.string()), ("warc_date", pa.string()), ("exact_hash", pa.uint64())]
        + [(band_column(b), pa.uint64()) for b in range(bands)]
    )
    report = StageReport()
    with PartitionWriter(lake, shard.prefix(SIGNATURES), report) as out:
        sink = out.parquet("signatures.parquet", schema)
        columns = ["doc_id", "warc_date", "text"]
        for batch in read_batches(lake, f"{source}/docs.parquet", columns):
            texts = batch.column("text").to_pylist()
            band_values = band_hashes(hasher.signatures(texts), bands, rows)
            table = pa.table(
                {
                    "doc_id": batch.column("doc_id"),
                    "warc_date": batch.column("warc_date"),
                    "exact_hash": content_hashes(texts),
                }
                | {band_column(b): band_values[:, b] for b in range(bands)}
            )
            sink.write_table(table)
            report.records_in += batch.num_rows
            report.bytes_in += sum(len(t) for t in texts)
        report.records_out = report.records_in
        report.counts["params"] = settings.signature_params()
    return report


def compute_clusters(lake: Lake, crawl: str, settings: DedupSettings) -> StageReport:
    shards = registered_shards(lake, crawl)
    markers = {s: _signature_marker(lake, s) for s in shards}
    params = {str(s): markers[s]["counts"]["params"] for s in shards}
    if len({repr(p) for p in params.values()}) > 1:
        raise ValueError(
            f"shards of {crawl} have signatures with different parameters "
            f"{params}; rematerialize signatures for the whole crawl"
        )
    bands = next(iter(params.values()))["bands"] if params else 0
    keys = [f"{s.prefix(SIGNATURES)}/signatures.parquet" for s in shards]
    sizes = [markers[s]["outputs"]["signatures.parquet"]["rows"] for s in shards]
    n_docs = sum(sizes)

    def column(name: str) -> np.ndarray:
        chunks = [read_column(lake, key, name).to_numpy() for key in keys]
        return np.concatenate(chunks) if chunks else np.zeros(0, np.uint64)

    def key_columns() -> Iterator[np.ndarray]:
        yield column("exact_hash")
        for band in range(bands):
            yield column(band_column(band))

    components = cluster(n_docs, key_columns())
    survivors = choose_survivors(components, _rank(settings.survivor, column))
    removed = np.flatnonzero(survivors != np.arange(n_docs))
    exact = column("exact_hash")
    is_exact = exact[removed] == exact[survivors[removed]]
    shard_of = np.repeat(np.array([s.shard for s in shards], dtype=object), sizes)
    doc_ids = (
        np.concatenate(
            [read_column(lake, k, "doc_id").to_numpy(zero_copy_only=False) for k in keys]
        )
        if keys
        else np.zeros(0, object)
    )
    report = StageReport(records_in=n_docs, records_out=n_docs - len(removed))
    report.drop("exact_duplicate", int(is_exact.sum()))
    report.drop("near_duplicate", int((~is_exact).sum()))
    report.counts.update(
        shards=len(shards),
        clusters=int(len(np.unique(survivors[removed]))),
        params=next(iter(params.values()), {}) | {"survivor": settings.survivor},
    )
    with PartitionWriter(lake, crawl_prefix(CLUSTERS, crawl), report) as out:
        survivor_ids = doc_ids[survivors[removed]]
        table = pa.table(
            {
                "shard": shard_of[removed],
                "doc_id": doc_ids[removed],
                "cluster_id": survivor_ids,
                "survivor_shard": shard_of[survivors[removed]],
                "survivor_doc_id": survivor_ids,
                "reason": np.where(is_exact, "exact_duplicate", "near_duplicate"),
            },
            schema=CLUSTER_SCHEMA,
        )
        out.parquet("clusters.parquet", CLUSTER_SCHEMA).write_table(table)
        report.add_preview(table.slice(0, 5).to_pylist())
    return report


def _signature_marker(lake: Lake, shard: Shard) -> dict:
    return require_committed(lake, shard.prefix(SIGNATURES), f"dedup signatures of {shard}")


def _rank(rule: str, column) -> np.ndarray | None:
    """Lower rank survives; ties go to the first seen (lowest position in shard order)."""
    if rule == "first_seen":
        return None
    values = column("warc_date" if rule == "earliest_date" else "doc_id")
    return np.unique(values, return_inverse=True)[1].astype(np.int64)


def filter_shard(lake: Lake, shard: Shard) -> StageReport:
    source = shard.prefix(CLEANED)
    require_committed(lake, source, f"cleaned {shard}")
    clusters_prefix = crawl_prefix(CLUSTERS, shard.crawl)
    require_committed(lake, clusters_prefix, f"dedup clusters of crawl {shard.crawl}")
    with lake.open_input(f"{clusters_prefix}/clusters.parquet") as f:
        clusters = pq.read_table(f, filters=pc.field("shard") == shard.shard)
    removed = pl.from_arrow(clusters.drop_columns(["shard"]))
    report = StageReport()
    with PartitionWriter(lake, shard.prefix(DEDUPLICATED), report) as out:
        docs = out.parquet("docs.parquet", DOC_SCHEMA)
        removed_docs = out.parquet("removed.parquet", REMOVED_SCHEMA)
        for batch in read_batches(lake, f"{source}/docs.parquet"):
            frame = pl.from_arrow(pa.Table.from_batches([batch]))
            kept = frame.join(removed, on="doc_id", how="anti", maintain_order="left")
            dropped = frame.drop("text").join(
                removed, on="doc_id", how="inner", maintain_order="left"
            )
            docs.write_table(kept.to_arrow())
            removed_docs.write_table(dropped.to_arrow())
            report.records_in += frame.height
            report.records_out += kept.height
            report.bytes_in += int(frame["text"].str.len_bytes().sum() or 0)
            for reason, count in dropped.group_by("reason").len().iter_rows():
                report.drop(reason, count)
            report.add_preview(dropped.head(5).to_dicts())
    return report
