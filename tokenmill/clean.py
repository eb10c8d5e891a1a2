"""cleaned: WARC responses to filtered text documents with provenance, streamed in batches."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa
import xxhash

from tokenmill.extract import DEFAULT_EXTRACTOR, EXTRACTORS, Extracted, Skip, extract_document
from tokenmill.filters import FilterChain, LanguageFilter, PIIMasker, default_filters
from tokenmill.ingest import RAW, raw_warc_files
from tokenmill.lake import Lake
from tokenmill.language import BACKENDS, DEFAULT_BACKEND, identifier
from tokenmill.outputs import PartitionWriter, StageReport, require_committed
from tokenmill.shards import Shard
from tokenmill.warc import DEFAULT_MAX_RECORD_BYTES, BadRecord, WarcRecord, iter_records

CLEANED = "cleaned"
BATCH_DOCS = 1000
REJECTED_TEXT_CHARS = 2000

PROVENANCE_FIELDS = [
    ("doc_id", pa.string()),
    ("crawl", pa.string()),
    ("shard", pa.string()),
    ("source_file", pa.string()),
    ("record_id", pa.string()),
    ("record_offset", pa.int64()),
    ("record_length", pa.int64()),
    ("url", pa.string()),
    ("warc_date", pa.string()),
]
DOC_SCHEMA = pa.schema(
    PROVENANCE_FIELDS
    + [
        ("charset", pa.string()),
        ("language", pa.string()),
        ("language_score", pa.float64()),
        ("text", pa.string()),
    ]
)
REJECTED_SCHEMA = pa.schema(
    PROVENANCE_FIELDS + [("filter", pa.string()), ("reason", pa.string()), ("text", pa.string())]
)


def doc_id(crawl: str, source_file: str, offset: int) -> str:
    """Stable id of the document extracted from one WARC record."""
    return xxhash.xxh3_64_hexdigest(f"{crawl}/{source_file}@{offset}".encode())


@dataclass
class CleanSettings:
    keep_languages: Sequence[str] = ("en",)
    min_language_score: float = 0.65
    main_content: bool = True
    extractor: str = DEFAULT_EXTRACTOR
    language_backend: str = DEFAULT_BACKEND
    mask_pii: bool = True
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    max_html_bytes: int = 8 << 20
    filters: list[Any] = field(default_factory=default_filters)

    def __post_init__(self):
        if self.extractor not in EXTRACTORS:
            raise ValueError(f"extractor must be one of {EXTRACTORS}, got {self.extractor!r}")
        if self.language_backend not in BACKENDS:
            raise ValueError(
                f"language_backend must be one of {BACKENDS}, got {self.language_backend!r}"
            )

    def chain(self) -> FilterChain:
        language = LanguageFilter(self.keep_languages, self.min_language_score)
        formatters = [PIIMasker()] if self.mask_pii else []
        return FilterChain([language, *self.filters], formatters)


def clean_shard(lake: Lake, shard: Shard, settings: CleanSettings | None = None) -> StageReport:
    settings = settings or CleanSettings()
    raw = require_committed(lake, shard.prefix(RAW), f"raw_crawl {shard}")
    chain = settings.chain()
    report = StageReport()
    for flt in chain.filters:  # zero counts too, so every partition plots every filter
        report.drop(f"filter:{flt.name}", 0)
    with PartitionWriter(lake, shard.prefix(CLEANED), report) as out:
        docs = out.parquet("docs.parquet", DOC_SCHEMA)
        rejected = out.parquet("rejected.parquet", REJECTED_SCHEMA)
        for batch in _batches(_documents(lake, shard, raw, settings, report, rejected)):
            frame = pl.from_arrow(pa.Table.from_pylist(batch, DOC_SCHEMA))
            kept, dropped = chain.apply(frame)
            for name, count in dropped.group_by("filter").len().iter_rows():
                report.drop(f"filter:{name}", count)
            docs.write_table(kept.to_arrow())
            rejected.write_table(
                dropped.with_columns(pl.col("text").str.slice(0, REJECTED_TEXT_CHARS)).to_arrow()
            )
            report.records_out += kept.height
            report.add_preview(
                kept.select("doc_id", "url", "language", "text")
                .head(5)
                .with_columns(pl.col("text").str.slice(0, 200))
                .to_dicts()
            )
        report.counts["filter_drop_rates"] = {
            reason: round(count / max(report.records_in, 1), 4)
            for reason, count in report.dropped.items()
        }
    return report


def _documents(
    lake: Lake, shard: Shard, raw: dict, settings: CleanSettings, report: StageReport, rejected
) -> Iterator[dict[str, Any]]:
    identify = identifier(settings.language_backend)
    for name in raw_warc_files(raw):
        key = f"{shard.prefix(RAW)}/{name}"
        report.bytes_in += lake.size(key)
        with lake.open_stream(key) as stream:
            for record in iter_records(stream, settings.max_record_bytes, name=key):
                if isinstance(record, BadRecord):
                    report.drop(f"unreadable:{record.reason}")
                    continue
                if record.type != "response":
                    continue
                report.records_in += 1
                provenance = _provenance(shard, name, record)
                extracted = _extract(record, settings)
                if isinstance(extracted, Skip):
                    report.drop(f"extract:{extracted.reason}")
                    rejected.write(
                        {
                            **provenance,
                            "filter": f"extract:{extracted.reason}",
                            "reason": extracted.detail or extracted.reason,
                            "text": None,
                        }
                    )
                    continue
                # NFC: the form tokenizer normalizers (GPT-NeoX's, among others) produce, so
                # decoding a document's tokens gives back exactly its text.
                text = unicodedata.normalize("NFC", extracted.text)
                language, score = identify(text)
                yield {
                    **provenance,
                    "charset": extracted.charset,
                    "language": language,
                    "language_score": score,
                    "text": text,
                }


def _extract(record: WarcRecord, settings: CleanSettings) -> Extracted | Skip:
    try:
        return extract_document(
            record.block, settings.max_html_bytes, settings.main_content, settings.extractor
        )
    except Skip as skip:
        return skip
    except Exception as error:  # one record must never fail the shard
        return Skip("extraction_error", f"{type(error).__name__}: {error}"[:500])


def _provenance(shard: Shard, file_name: str, record: WarcRecord) -> dict[str, Any]:
    return {
        "doc_id": doc_id(shard.crawl, file_name, record.offset),
        "crawl": shard.crawl,
        "shard": shard.shard,
        "source_file": f"{shard.prefix(RAW)}/{file_name}",
        "record_id": record.record_id,
        "record_offset": record.offset,
        "record_length": record.length,
        "url": record.target_uri,
        "warc_date": record.date,
    }


def _batches(rows: Iterator[dict[str, Any]], size: int = BATCH_DOCS) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
