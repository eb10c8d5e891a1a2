"""The documents a recipe dropped, with their text: the recipe's `rejected.parquet` names each
one (provenance, filter, reason) and `extracted`'s `docs.parquet` of the same file holds its
text, under the same `doc_id`. Reads a file's rejections, then its texts only where one is
shown, file after file until ``limit``; or counts them per filter and rule, a file at a time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import polars as pl

from tokenmill.filters import PIIMasker
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import CLEANED, EXTRACTED, Unit
from tokenmill.storage.outputs import part_files, read_table

SHOWN = ["url", "filter", "reason", "doc_id", "source_file", "record_id"]
COUNTED = {"filter": pl.Utf8, "rule": pl.Utf8, "documents": pl.Int64}


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


def dropped_counts(
    lake: Lake, units: Iterable[Unit], filters: list[str] | None = None
) -> pl.DataFrame:
    """How many documents the recipe of ``lake`` dropped in ``units``, per filter and rule (a
    reason's part before its ``=``: ``n_words=12<50`` is rule ``n_words``; a reason without
    one is its own rule), by ``filters`` (any), most first. Reads the two columns of one
    file's rejections at a time."""
    counts: Counter[tuple[str, str]] = Counter()
    for unit in units:
        for key in part_files(lake, unit, CLEANED, "rejected.parquet"):
            rejected = pl.from_arrow(read_table(lake, key, ["filter", "reason"]))
            if filters:
                rejected = rejected.filter(pl.col("filter").is_in(filters))
            rule = pl.col("reason").fill_null("").str.split("=").list.first().alias("rule")
            for name, found, documents in rejected.group_by("filter", rule).len().iter_rows():
                counts[name, found] += documents
    rows = [(name, rule, documents) for (name, rule), documents in counts.items()]
    return pl.DataFrame(rows, schema=COUNTED, orient="row").sort(
        ["documents", "filter", "rule"], descending=[True, False, False]
    )


def counts_report(counts: pl.DataFrame) -> str:
    """The counts as a table, with their total."""
    if not counts.height:
        return "no dropped documents"
    rows = [*counts.iter_rows(), ("total", "", int(counts["documents"].sum()))]
    width = [max(len(str(row[i])) for row in [*rows, tuple(COUNTED)]) for i in range(3)]
    return "\n".join(
        f"{name:{width[0]}}  {rule:{width[1]}}  {documents:>{width[2]}}"
        for name, rule, documents in [tuple(COUNTED), *rows]
    )
