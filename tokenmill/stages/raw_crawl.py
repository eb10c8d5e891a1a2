"""raw_crawl: index a unit's WARC files where they are, record by record, in one verified pass.

Each file becomes a part: `index.parquet` (record id, type, URI, date, offset and length in the
source file) and `quarantine.parquet` (unreadable records with their raw bytes and reason; a
file that is not WARC at all is one row with the reason, and its unit still completes). With
`copy`, the file is also copied into the lake in the same pass, for sources that may disappear.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

from tokenmill.crawl.sources import crawl_source, file_size, open_file
from tokenmill.crawl.units import unit_files
from tokenmill.crawl.warc import (
    DEFAULT_MAX_RECORD_BYTES,
    BadRecord,
    UnusableInputError,
    WarcRecord,
    iter_records,
)
from tokenmill.runtime.stage import (
    Check,
    Pod,
    RecordFeed,
    Scope,
    Stage,
    Verdict,
    Work,
    digest,
    setting,
)
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    EXTRACTED,
    INDEX_SCHEMA,
    QUARANTINE_SCHEMA,
    RAW_CRAWL,
    UNUSABLE_FILE,
    UNUSABLE_FILES,
    Unit,
)
from tokenmill.storage.outputs import StageReport, require_committed

MAX_BAD_RECORD_RATE = 0.05


@dataclass(frozen=True)
class RawSettings:
    max_record_mb: int = setting(
        DEFAULT_MAX_RECORD_BYTES >> 20, "Records larger than this are quarantined"
    )


class HashingReader:
    """Reads a stream while hashing it and, optionally, copying every byte to `sink`."""

    def __init__(self, sink: IO[bytes] | None, source=None):
        self.source = source
        self.sink = sink
        self.sha256 = hashlib.sha256()
        self.bytes = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.source.read(size)
        if self.sink is not None:
            self.sink.write(chunk)
        self.sha256.update(chunk)
        self.bytes += len(chunk)
        return chunk


def copy_name(ref: str) -> str:
    """The lake name of a copied source file: its path below the crawl, so that files with the
    same base name in different folders stay apart."""
    return "source/" + ref.split("://", 1)[-1].lstrip("/")


def run(work: Work, consume: Callable[[RecordFeed], object] | None = None) -> StageReport:
    """Index one file of the unit; with ``consume`` (the stage this one feeds, made in the same
    pass), hand it every record as it is read, blocks included."""
    settings = work.settings or RawSettings()
    unit, ref = work.unit, work.file
    copy = crawl_source(work.lake, unit.crawl).copy
    report = StageReport()
    by_type: dict[str, int] = {}
    records = bad = 0
    with work.writer(report) as out:
        index = out.parquet("index.parquet", INDEX_SCHEMA)
        quarantine = out.parquet("quarantine.parquet", QUARANTINE_SCHEMA)
        readable = f"{out.prefix}/{copy_name(ref)}" if copy else ref
        reader = HashingReader(out.open(copy_name(ref)) if copy else None)

        def indexed() -> Iterator[WarcRecord | BadRecord]:
            nonlocal records, bad
            try:
                with open_file(work.lake, unit.crawl, ref) as reader.source:
                    for record in iter_records(
                        reader, settings.max_record_mb << 20, name=ref, blocks=consume is not None
                    ):
                        if isinstance(record, BadRecord):
                            bad += 1
                            report.drop(record.reason)
                            quarantine.write(
                                {
                                    "file": readable,
                                    "offset": record.offset,
                                    "length": record.length,
                                    "reason": record.reason,
                                    "detail": record.detail,
                                    "raw": record.raw,
                                }
                            )
                        else:
                            records += 1
                            by_type[record.type] = by_type.get(record.type, 0) + 1
                            row = {
                                "file": readable,
                                "record_id": record.record_id,
                                "type": record.type,
                                "uri": record.target_uri,
                                "date": record.date,
                                "offset": record.offset,
                                "length": record.length,
                            }
                            index.write(row)
                            if record.type == "response":
                                report.add_preview([row])
                        yield record
                if reader.bytes == 0:
                    raise UnusableInputError(ref, "empty file")
            except UnusableInputError as error:
                report.unusable_file(ref, error.reason)
                quarantine.write(
                    {
                        "file": readable,
                        "offset": 0,
                        "length": reader.bytes,
                        "reason": UNUSABLE_FILE,
                        "detail": error.reason,
                        "raw": None,
                    }
                )
                if consume is not None:
                    raise  # the stage fed says so in its own output

        passing = indexed()
        if consume is not None:
            consume(RecordFeed(passing, readable, lambda: reader.bytes, work.piece))
        for _ in passing:  # nothing is left once the consumer has read to the end
            pass
        report.records_in = records + bad
        report.records_out = records
        report.bytes_in = reader.bytes
        report.counts |= {
            "readable": readable,
            "records_by_type": by_type,
            "file_stats": {
                ref: {
                    "bytes": reader.bytes,
                    "sha256": reader.sha256.hexdigest(),
                    "records": records,
                    "bad_records": bad,
                }
            },
        }
    return report


def bad_record_rate(lake, unit: Unit) -> Verdict:
    summary = require_committed(lake, unit.prefix(RAW_CRAWL), f"raw_crawl {unit}")
    bad = summary["records_in"] - summary["records_out"]
    rate = bad / max(summary["records_in"], 1)
    unusable = summary["counts"].get(UNUSABLE_FILES, {})
    named = "".join(f"; {name}: {reason}" for name, reason in sorted(unusable.items())[:10])
    more = f" and {len(unusable) - 10} more" if len(unusable) > 10 else ""
    return Verdict(
        rate <= MAX_BAD_RECORD_RATE and not unusable,
        f"{bad} of {summary['records_in']} records unreadable ({rate:.2%}, limit "
        f"{MAX_BAD_RECORD_RATE:.2%}), {len(unusable)} unusable files{named}{more}; kept aside "
        "in quarantine.parquet",
        {
            "bad_records": bad,
            "bad_record_rate": rate,
            "unusable_files": len(unusable),
            "unusable": dict(sorted(unusable.items())),
        },
    )


def landed(lake: Lake, _settings, unit: Unit | None) -> str | None:
    """The unit's files and their sizes: read from outside the lake's lineage (None: one is
    unreadable)."""
    sizes = []
    for ref in unit_files(lake, unit):
        try:
            sizes.append((ref, file_size(lake, unit.crawl, ref)))
        except OSError:
            return None
    return digest(sizes)


STAGE = Stage(
    name=RAW_CRAWL,
    scope=Scope.UNIT,
    run=run,
    settings=RawSettings,
    group="ingest",
    kinds=("warc",),
    # reading and parsing gzip: one core per worker, memory for one record at a time
    pod=Pod("2", "2Gi", "2", "4Gi"),
    checks=(Check("bad_record_rate", bad_record_rate, warn_only=True),),
    schema=INDEX_SCHEMA,
    data_files=("index.parquet",),
    shared=True,
    outside=landed,
    feeds=EXTRACTED,
    description="The unit's WARC files indexed where they are, gzip-verified: a per-record index "
    "(record id, URI, offset) and unreadable records kept aside in quarantine.parquet.",
)
