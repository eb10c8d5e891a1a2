"""The documents a recipe dropped, with their text: the recipe's `rejected.parquet` names each
one (provenance, filter, reason) and `extracted`'s `docs.parquet` of the same file holds its
text, under the same `doc_id`. Reads a file's rejections, then its texts only where one is
shown, file after file until ``limit``."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from tokenmill.filters import PIIMasker
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import CLEANED, EXTRACTED, Unit
from tokenmill.storage.outputs import part_files, read_table

SHOWN = ["url", "filter", "reason", "doc_id", "source_file", "record_id"]


def dropped_documents(
    lake: Lake,
    units: Iterable[Unit],
    filters: list[str] | None = None,
    limit: int = 10,
    chars: int = 300,
    mask_pii: bool = True,
) -> pl.DataFrame:
    """Up to ``limit`` documents the recipe of ``lake`` (its zones) dropped in ``units``, by
    ``filters`` (any), with the first ``chars`` characters of their text (PII masked)."""
    found = []
    wanted = limit
    for unit in units:
        rejections = part_files(lake, unit, CLEANED, "rejected.parquet")
        texts = part_files(lake, unit, EXTRACTED, "docs.parquet")
        for rejected_key, docs_key in zip(rejections, texts, strict=False):
            if wanted <= 0:
                break
            rejected = pl.from_arrow(read_table(lake, rejected_key, SHOWN))
            if filters:
                rejected = rejected.filter(pl.col("filter").is_in(filters))
            rejected = rejected.head(wanted)
            if not rejected.height:
                continue
            text = pl.from_arrow(read_table(lake, docs_key, ["doc_id", "text"]))
            rejected = rejected.join(text, on="doc_id", how="left", maintain_order="left")
            found.append(rejected.with_columns(pl.col("text").str.slice(0, chars)))
            wanted -= rejected.height
    if not found:
        return pl.DataFrame(schema={**{c: pl.Utf8 for c in SHOWN}, "text": pl.Utf8})
    shown = pl.concat(found)
    return shown.with_columns(PIIMasker()(shown)) if mask_pii else shown


def text_report(dropped: pl.DataFrame) -> str:
    lines = []
    for row in dropped.iter_rows(named=True):
        lines.append(f"{row['filter']}  {row['reason']}  {row['url']}")
        lines.append(f"    {row['source_file']} {row['record_id']}")
        text = (row["text"] or "(no text: extracted part missing)").replace("\n", " ⏎ ")
        lines.append(f"    {text}")
    return "\n".join(lines) or "no dropped documents"
