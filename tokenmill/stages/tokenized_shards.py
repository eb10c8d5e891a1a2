"""tokenized_shards: each deduplicated file as a Megatron indexed dataset with provenance."""

from tokenmill.runtime.stage import Check, Pod, Scope, Stage, Verdict
from tokenmill.storage.layout import (
    DEDUPLICATED,
    TOKEN_PROVENANCE_SCHEMA,
    TOKENIZED_SHARDS,
    TOKENIZER,
    Unit,
)
from tokenmill.storage.outputs import read_batches, require_committed
from tokenmill.tokens.megatron import IndexedDataset
from tokenmill.tokens.tokenization import TokenizeSettings, tokenize_part


def shard_is_consistent(lake, unit: Unit) -> Verdict:
    """Each file's `.idx` describes its `.bin` exactly and its sidecar has one row per
    document."""
    marker = require_committed(lake, unit.prefix(TOKENIZED_SHARDS), f"tokenized_shards {unit}")
    problems, documents, tokens = [], 0, 0
    for part in range(marker["counts"]["files"]):
        prefix = unit.part_prefix(TOKENIZED_SHARDS, part)
        idx = lake.read_bytes(f"{prefix}/tokens.idx")
        with lake.open_input(f"{prefix}/tokens.bin") as bin_file:
            dataset = IndexedDataset(idx, bin_file)
            expected = int(dataset.lengths.sum()) * dataset.dtype.itemsize
        actual = lake.size(f"{prefix}/tokens.bin")
        rows = sum(
            b.num_rows for b in read_batches(lake, f"{prefix}/provenance.parquet", ["doc_index"])
        )
        if expected != actual:
            problems.append(f"{prefix}: .bin has {actual} bytes, .idx describes {expected}")
        if rows != len(dataset):
            problems.append(f"{prefix}: sidecar has {rows} rows for {len(dataset)} documents")
        documents += len(dataset)
        tokens += int(dataset.lengths.sum())
    return Verdict(
        not problems,
        "; ".join(problems) or "index, tokens and sidecar agree",
        {"documents": documents, "tokens": tokens},
    )


STAGE = Stage(
    name=TOKENIZED_SHARDS,
    scope=Scope.UNIT,
    run=tokenize_part,
    settings=TokenizeSettings,
    upstream=(DEDUPLICATED, TOKENIZER),
    group="tokenize",
    kinds=("numpy",),
    pod=Pod("4", "4Gi", "4", "6Gi"),
    checks=(Check("shard_is_consistent", shard_is_consistent),),
    schema=TOKEN_PROVENANCE_SCHEMA,
    description="Megatron indexed datasets (tokens.bin + tokens.idx per file) and "
    "provenance.parquet mapping every document, by token span, to its WARC file and record.",
)
