"""Invariants of committed partitions; asset checks run them after every materialization."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl
import pyarrow.parquet as pq

from tokenmill.clean import CLEANED
from tokenmill.dedup import DEDUPLICATED
from tokenmill.ingest import RAW
from tokenmill.lake import Lake
from tokenmill.megatron import IndexedDataset
from tokenmill.minhash import content_hashes
from tokenmill.outputs import read_batches, require_committed
from tokenmill.shards import Shard
from tokenmill.tokenize import TOKENIZED


@dataclass
class Verdict:
    passed: bool
    description: str
    metadata: dict = field(default_factory=dict)

    @classmethod
    def all(cls, verdicts: list[Verdict], names: list[str]) -> Verdict:
        """One verdict for several partitions: passed if each one passed."""
        if len(verdicts) == 1:
            return verdicts[0]
        failed = [
            f"{name}: {v.description}"
            for name, v in zip(names, verdicts, strict=True)
            if not v.passed
        ]
        return cls(
            not failed,
            "; ".join(failed) or f"passed on all {len(verdicts)} partitions",
            {"partitions": len(verdicts), "failed_partitions": len(failed)},
        )


def _table(lake: Lake, key: str, columns: list[str]) -> pl.DataFrame:
    with lake.open_input(key) as f:
        return pl.from_arrow(pq.read_table(f, columns=columns))


def bad_record_rate(lake: Lake, shard: Shard, max_rate: float) -> Verdict:
    summary = require_committed(lake, shard.prefix(RAW), f"raw_crawl {shard}")
    bad = summary["records_in"] - summary["records_out"]
    rate = bad / max(summary["records_in"], 1)
    return Verdict(
        rate <= max_rate,
        f"{bad} of {summary['records_in']} records unreadable "
        f"({rate:.2%}, limit {max_rate:.2%}); kept aside in quarantine.parquet",
        {"bad_records": bad, "bad_record_rate": rate},
    )


def provenance_resolves(lake: Lake, shard: Shard) -> Verdict:
    """Every cleaned document points at a response record in its shard's raw index."""
    index = _table(lake, f"{shard.prefix(RAW)}/index.parquet", ["file", "offset", "type"])
    index = index.filter(pl.col("type") == "response").select(
        source_file=pl.format("{}/{}", pl.lit(shard.prefix(RAW)), "file"), record_offset="offset"
    )
    docs = _table(
        lake, f"{shard.prefix(CLEANED)}/docs.parquet", ["doc_id", "source_file", "record_offset"]
    )
    orphans = docs.join(index, on=["source_file", "record_offset"], how="anti")
    return Verdict(
        orphans.is_empty(),
        f"{orphans.height} of {docs.height} documents do not resolve to a raw WARC record",
        {"orphans": orphans.height, "docs": docs.height},
    )


def no_exact_duplicates(lake: Lake, shard: Shard) -> Verdict:
    hashes = [
        content_hashes(batch.column("text").to_pylist())
        for batch in read_batches(lake, f"{shard.prefix(DEDUPLICATED)}/docs.parquet", ["text"])
    ]
    values = pl.Series([h for chunk in hashes for h in chunk.tolist()], dtype=pl.UInt64)
    repeated = values.len() - values.n_unique()
    return Verdict(
        repeated == 0,
        f"{repeated} documents repeat another's normalized content",
        {"repeated": repeated},
    )


def shard_is_consistent(lake: Lake, shard: Shard) -> Verdict:
    """`.idx` describes `.bin` exactly and the sidecar has one row per document."""
    prefix = shard.prefix(TOKENIZED)
    idx = lake.read_bytes(f"{prefix}/tokens.idx")
    with lake.open_input(f"{prefix}/tokens.bin") as bin_file:
        dataset = IndexedDataset(idx, bin_file)
        expected = int(dataset.lengths.sum()) * dataset.dtype.itemsize
        actual = lake.size(f"{prefix}/tokens.bin")
    sidecar = _table(lake, f"{prefix}/provenance.parquet", ["doc_index"])
    problems = []
    if expected != actual:
        problems.append(f".bin has {actual} bytes, .idx describes {expected}")
    if sidecar.height != len(dataset):
        problems.append(f"sidecar has {sidecar.height} rows for {len(dataset)} documents")
    return Verdict(
        not problems,
        "; ".join(problems) or "index, tokens and sidecar agree",
        {"documents": len(dataset), "tokens": int(dataset.lengths.sum())},
    )
