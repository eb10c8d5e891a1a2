"""dedup_signatures: per document, its normalized-content hash and MinHash LSH band hashes."""

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from tokenmill.dedup.minhash import band_hashes
from tokenmill.dedup.settings import DedupSettings, quality_scores, unlink_short_docs
from tokenmill.dedup.signature_reuse import (
    SEGMENTATION,
    SIGNATURES,
    TEXT_KEY,
    WORDS,
    SignatureDonor,
    SignatureDonorChanged,
    text_keys,
)
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
from tokenmill.text import segmenters
from tokenmill.text.segmentation import segmented_languages, segmented_text


def run(work: Work) -> StageReport:
    lake, settings = work.lake, work.settings or DedupSettings()
    source = work.input(CLEANED)
    require_committed(lake, source, f"cleaned {work.unit} file {work.part}")
    donor = SignatureDonor.find(lake, work.output, settings.signature_params())
    try:
        return _signatures(work, settings, donor)
    except SignatureDonorChanged:
        return _signatures(work, settings, None)


def _signatures(work: Work, settings: DedupSettings, donor: SignatureDonor | None) -> StageReport:
    lake = work.lake
    bands, rows = settings.banding()
    hasher = settings.hasher()
    schema = signature_schema(bands)
    docs_key = f"{work.input(CLEANED)}/docs.parquet"
    columns = ["doc_id", "warc_date", "text"]
    present = _parquet_schema(lake, docs_key).names
    columns += [c for c in (QUALITY_COLUMN, "language") if c in present]
    report = StageReport()
    reused = 0
    with work.writer(report) as out:
        sink = out.parquet(SIGNATURES, schema)
        for batch in read_batches(lake, docs_key, columns):
            texts = batch.column("text")
            keys = text_keys(batch)
            words = np.zeros(batch.num_rows, dtype=np.int64)
            band_values = np.zeros((batch.num_rows, bands), dtype=np.uint64)
            exact = np.zeros(batch.num_rows, dtype=np.uint64)
            lent = np.zeros(batch.num_rows, dtype=bool)
            if donor is not None:
                lent, rows_lent = donor.lend(batch.column("doc_id").to_pylist(), keys)
                words[lent] = donor.words[rows_lent]
                band_values[lent] = donor.bands[rows_lent]
                exact[lent] = donor.exact[rows_lent]
                reused += int(lent.sum())
            if not lent.all():
                todo = batch.filter(pa.array(~lent))
                hashed = hasher.hash_documents(words_text(todo))
                words[~lent] = hashed.word_counts
                band_values[~lent] = band_hashes(hashed.signatures, bands, rows)
                exact[~lent] = hashed.content_hashes
                if "language" in todo.schema.names:
                    salts = language_salts(todo.column("language"))
                    band_values[~lent] ^= salts[:, None]
                    exact[~lent] ^= salts
            # keys of their own for short documents (the donor's are the same: made from ids)
            unlink_short_docs(batch, words, band_values, exact, settings, report)
            table = pa.table(
                {
                    "doc_id": batch.column("doc_id"),
                    "warc_date": batch.column("warc_date"),
                    "exact_hash": exact,
                    QUALITY_COLUMN: quality_scores(batch, words),
                }
                | {band_column(b): band_values[:, b] for b in range(bands)}
                | {TEXT_KEY: keys, WORDS: words.astype(np.uint32)}
            )
            sink.write_table(table)
            report.records_in += batch.num_rows
            report.bytes_in += int(pc.sum(pc.binary_length(texts)).as_py() or 0)
        report.records_out = report.records_in
        report.counts["params"] = settings.signature_params()
        report.counts[TEXT_KEY] = "xxh3-64 of language, NUL, text"
        report.counts[SEGMENTATION] = segmenters.SEGMENTATION_VERSION
        report.counts["signatures_reused"] = reused
        if donor is not None:
            donor.check_unchanged()
    return report


def words_text(batch: pa.RecordBatch) -> list[str]:
    """The texts to shingle: a document in a language written without spaces with a space at
    each word boundary (``segmented_text``), so its shingles are word n-grams too."""
    if "language" not in batch.schema.names:
        return batch.column("text").to_pylist()
    docs = pl.from_arrow(
        pa.table({"text": batch.column("text"), "language": batch.column("language")})
    )
    if not segmented_languages(docs):
        return batch.column("text").to_pylist()
    return segmented_text(docs).to_list()


def language_salts(languages: pa.Array) -> np.ndarray:
    """Per document, a number its band and content hashes are xor-ed with: equal within a
    language, so documents of different languages never share a bucket (dedup per language,
    as FineWeb-2); zero for English and unknown, whose hashes stay as they were."""
    labels = pl.from_arrow(languages).cast(pl.String).fill_null("en")
    distinct = labels.unique().to_list()
    salts = [0 if label == "en" else xxhash.xxh3_64_intdigest(label.encode()) for label in distinct]
    salt_of = pl.Series(salts, dtype=pl.UInt64)
    return labels.replace_strict(pl.Series(distinct), salt_of).to_numpy().astype(np.uint64)


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
    # 2: words of languages written without spaces; buckets per language. 3: each document's
    # text key and word count, which other recipes' signatures reuse
    version="3",
    description="Per document: normalized-content hash and MinHash LSH band hashes.",
)
