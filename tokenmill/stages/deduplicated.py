"""deduplicated: a unit's cleaned documents without the duplicates its crawl's clusters list."""

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.dedup.minhash import content_hashes
from tokenmill.dedup.settings import CLUSTERS_FILE
from tokenmill.runtime.stage import Check, Pod, Scope, Stage, Verdict, Work
from tokenmill.storage.layout import (
    CLEANED,
    DEDUP_CLUSTERS,
    DEDUPLICATED,
    DOC_DICTIONARY,
    DOC_SCHEMA,
    REMOVED_SCHEMA,
    Unit,
    crawl_prefix,
)
from tokenmill.storage.outputs import (
    MissingInputError,
    StageReport,
    read_batches,
    require_committed,
)


def run(work: Work) -> StageReport:
    clusters = crawl_prefix(DEDUP_CLUSTERS, work.unit.crawl)
    marker = require_committed(work.lake, clusters, f"dedup_clusters of crawl {work.unit.crawl}")
    if work.unit.name not in marker["counts"].get("unit_versions", {}):
        raise MissingInputError(
            f"the dedup_clusters of crawl {work.unit.crawl} do not cover unit {work.unit}: "
            "rematerialize them first"
        )
    return _without_removed(work, f"{clusters}/{CLUSTERS_FILE}")


def _without_removed(work: Work, clusters_key: str) -> StageReport:
    """The file's cleaned documents without the ones its crawl's clusters remove."""
    lake, unit = work.lake, work.unit
    source = work.input(CLEANED)
    require_committed(lake, source, f"cleaned {unit} file {work.part}")
    with lake.open_input(clusters_key) as f:
        clusters = pq.read_table(
            f, filters=(pc.field("unit") == unit.name) & (pc.field("part") == work.part)
        )
    removed = pl.from_arrow(clusters.drop_columns(["unit", "part"]))
    report = StageReport()
    with work.writer(report) as out:
        docs = out.parquet("docs.parquet", DOC_SCHEMA, DOC_DICTIONARY)
        removed_docs = out.parquet("removed.parquet", REMOVED_SCHEMA, DOC_DICTIONARY)
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


def no_exact_duplicates(lake, unit: Unit) -> Verdict:
    marker = require_committed(lake, unit.prefix(DEDUPLICATED), f"deduplicated {unit}")
    seen, repeated = set(), 0
    for part in range(marker["counts"]["files"]):
        key = f"{unit.part_prefix(DEDUPLICATED, part)}/docs.parquet"
        for batch in read_batches(lake, key, ["text"]):
            for value in content_hashes(batch.column("text").to_pylist()).tolist():
                repeated += value in seen
                seen.add(value)
    return Verdict(
        repeated == 0,
        f"{repeated} documents repeat another's normalized content",
        {"repeated": repeated},
    )


STAGE = Stage(
    name=DEDUPLICATED,
    scope=Scope.UNIT,
    run=run,
    upstream=(CLEANED, DEDUP_CLUSTERS),
    group="dedup",
    kinds=("parquet",),
    pod=Pod("2", "2Gi", "2", "3Gi"),
    checks=(Check("no_exact_duplicates", no_exact_duplicates),),
    schema=DOC_SCHEMA,
    data_files=("docs.parquet",),
    description="The unit's cleaned documents without the crawl's duplicates; removed.parquet "
    "lists each removed document with its cluster and survivor.",
)
