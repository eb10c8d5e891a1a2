"""Read-side views of the lake: the per-stage summary table and token tracing."""

from __future__ import annotations

import bisect

import pyarrow.parquet as pq

from tokenmill.clean import CLEANED
from tokenmill.dedup import CLUSTERS, DEDUPLICATED, SIGNATURES
from tokenmill.ingest import RAW
from tokenmill.lake import Lake
from tokenmill.megatron import IndexedDataset
from tokenmill.outputs import MARKER, is_committed
from tokenmill.shards import Shard, crawl_prefix, registered_crawls, registered_shards
from tokenmill.tokenize import TOKENIZED, load_tokenizer

SHARD_STAGES = [
    ("raw_crawl", RAW),
    ("cleaned", CLEANED),
    ("dedup_signatures", SIGNATURES),
    ("deduplicated", DEDUPLICATED),
    ("tokenized_shards", TOKENIZED),
]


def stage_rows(lake: Lake) -> list[dict]:
    """One row per stage: committed partitions and their summed counters."""
    crawls = registered_crawls(lake)
    shards = [s for c in crawls for s in registered_shards(lake, c)]
    rows = []
    for name, stage in SHARD_STAGES:
        rows.append(_row(lake, name, [s.prefix(stage) for s in shards]))
        if stage == SIGNATURES:
            rows.append(_row(lake, "dedup_clusters", [crawl_prefix(CLUSTERS, c) for c in crawls]))
    return rows


def _row(lake: Lake, name: str, prefixes: list[str]) -> dict:
    row = {
        "stage": name,
        "partitions": f"0/{len(prefixes)}",
        "docs_in": 0,
        "docs_out": 0,
        "dropped": 0,
        "tokens": 0,
        "mb_out": 0.0,
    }
    done = 0
    for prefix in prefixes:
        if not is_committed(lake, prefix):
            continue
        done += 1
        summary = lake.read_json(f"{prefix}/{MARKER}")
        row["docs_in"] += summary["records_in"]
        row["docs_out"] += summary["records_out"]
        row["dropped"] += sum(summary["dropped"].values())
        row["tokens"] += summary["counts"].get("tokens", 0)
        row["mb_out"] += summary["bytes_out"] / 1e6
    row["partitions"] = f"{done}/{len(prefixes)}"
    row["mb_out"] = round(row["mb_out"], 2)
    return row


def format_table(rows: list[dict]) -> str:
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = [
        " | ".join(c.ljust(widths[c]) for c in columns),
        "-+-".join("-" * widths[c] for c in columns),
    ]
    lines += [
        " | ".join(
            str(r[c]).rjust(widths[c])
            if isinstance(r[c], int | float)
            else str(r[c]).ljust(widths[c])
            for c in columns
        )
        for r in rows
    ]
    return "\n".join(lines)


def trace_token(lake: Lake, shard: Shard, position: int, window: int = 24) -> dict:
    """Where the token at `position` of a tokenized shard came from, and the text around it."""
    prefix = shard.prefix(TOKENIZED)
    with lake.open_input(f"{prefix}/provenance.parquet") as f:
        sidecar = pq.read_table(f).to_pylist()
    starts = [row["token_start"] for row in sidecar]
    doc = bisect.bisect_right(starts, position) - 1
    if doc < 0 or position < 0:
        raise IndexError(f"token {position} is not in {lake.uri(prefix)}")
    row = sidecar[doc]
    with lake.open_input(f"{prefix}/tokens.bin") as bin_file:
        dataset = IndexedDataset(lake.read_bytes(f"{prefix}/tokens.idx"), bin_file)
        if doc >= len(dataset) or position >= row["token_start"] + dataset.lengths[doc]:
            raise IndexError(f"token {position} is past the end of {lake.uri(prefix)}")
        tokens = dataset.document(doc)
    tokenizer, _ = load_tokenizer(lake)
    at = position - row["token_start"]
    lo, hi = max(0, at - window), min(row["token_end"] - row["token_start"], at + window + 1)
    return {
        **row,
        "position": position,
        "token_id": int(tokens[at]),
        "token": tokenizer.id_to_token(int(tokens[at])),
        "is_end_of_document": at >= row["token_end"] - row["token_start"],
        "before": tokenizer.decode(tokens[lo:at].tolist()),
        "text": tokenizer.decode(tokens[at : at + 1].tolist()),
        "after": tokenizer.decode(tokens[at + 1 : hi].tolist()),
    }
