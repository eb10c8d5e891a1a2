"""raw_crawl: land a shard's WARC files in the raw zone, verified and indexed in one pass."""

from __future__ import annotations

import hashlib
from typing import IO

import pyarrow as pa

from tokenmill.lake import Lake
from tokenmill.outputs import PartitionWriter, StageReport
from tokenmill.shards import Shard, shard_files
from tokenmill.warc import DEFAULT_MAX_RECORD_BYTES, BadRecord, iter_records

RAW = "raw"

INDEX_SCHEMA = pa.schema(
    [
        ("file", pa.string()),
        ("record_id", pa.string()),
        ("type", pa.string()),
        ("uri", pa.string()),
        ("date", pa.string()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
    ]
)
QUARANTINE_SCHEMA = pa.schema(
    [
        ("file", pa.string()),
        ("offset", pa.int64()),
        ("length", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("raw", pa.binary()),
    ]
)


class CopyingReader:
    """Reads a stream while copying every byte to `sink` and hashing it."""

    def __init__(self, source, sink: IO[bytes]):
        self.source = source
        self.sink = sink
        self.sha256 = hashlib.sha256()
        self.bytes = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.source.read(size)
        self.sink.write(chunk)
        self.sha256.update(chunk)
        self.bytes += len(chunk)
        return chunk


def land_shard(
    lake: Lake, shard: Shard, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> StageReport:
    report = StageReport()
    files = shard_files(lake, shard)
    by_type: dict[str, int] = {}
    file_stats = {}
    with PartitionWriter(lake, shard.prefix(RAW), report) as out:
        index = out.parquet("index.parquet", INDEX_SCHEMA)
        quarantine = out.parquet("quarantine.parquet", QUARANTINE_SCHEMA)
        for landing_key in files:
            name = landing_key.rsplit("/", 1)[1]
            with lake.open_stream(landing_key) as source:
                reader = CopyingReader(source, out.open(name))
                records = bad = 0
                for record in iter_records(reader, max_record_bytes, name=landing_key):
                    if isinstance(record, BadRecord):
                        bad += 1
                        report.drop(record.reason)
                        quarantine.write(
                            {
                                "file": name,
                                "offset": record.offset,
                                "length": record.length,
                                "reason": record.reason,
                                "detail": record.detail,
                                "raw": record.raw,
                            }
                        )
                        continue
                    records += 1
                    by_type[record.type] = by_type.get(record.type, 0) + 1
                    row = {
                        "file": name,
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
                if reader.bytes == 0:
                    report.drop("empty_file")
            report.records_in += records + bad
            report.records_out += records
            report.bytes_in += reader.bytes
            file_stats[name] = {
                "bytes": reader.bytes,
                "sha256": reader.sha256.hexdigest(),
                "records": records,
                "bad_records": bad,
            }
        report.counts = {"files": len(files), "records_by_type": by_type, "file_stats": file_stats}
    return report


def raw_warc_files(report_summary: dict) -> list[str]:
    """Names of a raw partition's WARC files, from its committed marker."""
    return sorted(report_summary["counts"]["file_stats"])
