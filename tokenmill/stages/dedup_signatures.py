"""dedup_signatures: per document, its normalized-content hash and MinHash LSH band hashes."""

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.dedup.minhash import MinHasher, band_hashes
from tokenmill.dedup.settings import DedupSettings, quality_scores, unlink_short_docs
from tokenmill.runtime.stage import Pod, Scope, Stage, Work
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    CLEANED,
    DEDUP_SIGNATURES,
    QUALITY_COLUMN,
    band_column,
    signature_schema,
)
from tokenmill.storage.outputs import StageReport, read_batches, require_committed


def run(work: Work) -> StageReport:
    lake, settings = work.lake, work.settings or DedupSettings()
    source = work.input(CLEANED)
    require_committed(lake, source, f"cleaned {work.unit} file {work.part}")
    bands, rows = settings.banding()
    hasher = MinHasher(
        num_perm=bands * rows,
        ngram=settings.ngram,
        seed=settings.seed,
        scheme=settings.scheme,
        norm=settings.text_norm(),
    )
    schema = signature_schema(bands)
    docs_key = f"{source}/docs.parquet"
    columns = ["doc_id", "warc_date", "text"]
    if QUALITY_COLUMN in _parquet_schema(lake, docs_key).names:
        columns.append(QUALITY_COLUMN)
    report = StageReport()
    with work.writer(report) as out:
        sink = out.parquet("signatures.parquet", schema)
        for batch in read_batches(lake, docs_key, columns):
            texts = batch.column("text")
            hashed = hasher.hash_documents(texts)
            band_values = band_hashes(hashed.signatures, bands, rows)
            exact = hashed.content_hashes
            unlink_short_docs(batch, hashed.word_counts, band_values, exact, settings, report)
            table = pa.table(
                {
                    "doc_id": batch.column("doc_id"),
                    "warc_date": batch.column("warc_date"),
                    "exact_hash": exact,
                    QUALITY_COLUMN: quality_scores(batch, hashed.word_counts),
                }
                | {band_column(b): band_values[:, b] for b in range(bands)}
            )
            sink.write_table(table)
            report.records_in += batch.num_rows
            report.bytes_in += int(pc.sum(pc.binary_length(texts)).as_py() or 0)
        report.records_out = report.records_in
        report.counts["params"] = settings.signature_params()
    return report


def _parquet_schema(lake: Lake, key: str) -> pa.Schema:
    with lake.open_input(key) as f:
        return pq.read_schema(f)


STAGE = Stage(
    name=DEDUP_SIGNATURES,
    scope=Scope.UNIT,
    run=run,
    settings=DedupSettings,
    upstream=(CLEANED,),
    group="dedup",
    kinds=("parquet",),
    pod=Pod("4", "4Gi", "4", "6Gi"),
    schema=signature_schema(DedupSettings().banding()[0]),
    description="Per document: normalized-content hash and MinHash LSH band hashes.",
)
