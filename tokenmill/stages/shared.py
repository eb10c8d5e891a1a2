"""What several stages share; a stage module never imports another stage module."""

from __future__ import annotations

import polars as pl

from tokenmill.runtime.stage import Check, Verdict
from tokenmill.storage.layout import RAW_CRAWL, Unit
from tokenmill.storage.outputs import read_batches, require_committed


def preview_of(docs: pl.DataFrame) -> list[dict]:
    """The first documents of a batch, their text cut short: a materialization's preview."""
    preview = docs.select("doc_id", "url", "language", "text").head(5)
    return preview.with_columns(pl.col("text").str.slice(0, 200)).to_dicts()


def provenance_resolves(zone: str) -> Check:
    """A check that every document of `zone` points at a response record of its file's raw
    index."""
    return Check("provenance_resolves", lambda lake, unit: _resolved(lake, unit, zone))


def _resolved(lake, unit: Unit, zone: str) -> Verdict:
    marker = require_committed(lake, unit.prefix(zone), f"{zone} {unit}")
    orphans = docs = 0
    for part in range(marker["counts"]["files"]):
        index = pl.concat(
            [
                pl.from_arrow(b)
                for b in read_batches(
                    lake,
                    f"{unit.part_prefix(RAW_CRAWL, part)}/index.parquet",
                    ["file", "offset", "type"],
                )
            ]
            or [pl.DataFrame(schema={"file": pl.String, "offset": pl.Int64, "type": pl.String})]
        )
        index = index.filter(pl.col("type") == "response").select(
            source_file="file", record_offset="offset"
        )
        part_docs = pl.concat(
            [
                pl.from_arrow(b)
                for b in read_batches(
                    lake,
                    f"{unit.part_prefix(zone, part)}/docs.parquet",
                    ["source_file", "record_offset"],
                )
            ]
            or [pl.DataFrame(schema={"source_file": pl.String, "record_offset": pl.Int64})]
        )
        orphans += part_docs.join(index, on=["source_file", "record_offset"], how="anti").height
        docs += part_docs.height
    return Verdict(
        orphans == 0,
        f"{orphans} of {docs} documents do not resolve to a raw WARC record",
        {"orphans": orphans, "docs": docs},
    )
