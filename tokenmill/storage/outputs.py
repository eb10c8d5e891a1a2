"""How every stage writes and reads its partitions: one mechanism for all stages.

A partition's outputs live under one lake prefix. Each file is committed atomically, and the
partition counts as done only once `_SUCCESS.json` (file list with sizes and row counts, and the
stage's counters) is written, last. A re-run first removes the marker, so a crash midway never
leaves a partition that looks done with a mix of old and new files, and then the temporary
files a killed writer left behind.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, UNUSABLE_FILE, UNUSABLE_FILES

ROWS_PER_BATCH = 2048
BYTES_PER_BATCH = 64 << 20  # rows holding raw bytes (quarantine) flush by size, not count
PREVIEW_ROWS = 5
WARNINGS = "warnings"  # the counts entry of `StageReport.warn`
LANGUAGES = "languages"  # the counts entry of `StageReport.count_languages`
# A tokenized unit's documents and tokens per language per file ("00000": {language: ...}),
# where a release weighting languages finds them.
LANGUAGES_BY_FILE = "languages_by_file"


SUMMARY_FIELDS = (
    "records_in",
    "records_out",
    "bytes_in",
    "bytes_out",
    "dropped",
    "counts",
    "outputs",
    "histograms",
)


class MissingInputError(FileNotFoundError):
    """An upstream partition that has not been committed."""


@dataclass
class StageReport:
    """Counters a stage collects while it streams; becomes materialization metadata."""

    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    dropped: Counter = field(default_factory=Counter)
    counts: dict[str, Any] = field(default_factory=dict)
    preview: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, dict[str, int]] = field(default_factory=dict)
    # rule value distributions (`tokenmill.filters.histograms`): kept in markers, summed per unit
    histograms: dict[str, dict] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    seconds: float = 0.0
    # CPU seconds of every process that did this work (not kept in markers: a resumed part's
    # earlier attempt is not counted again)
    cpu_s: float = 0.0
    # Of cpu_s, the stage this one fed in the same pass (`Stage.feeds`); and, for that stage,
    # its parts made so (neither kept in markers: a pass makes the bytes two passes make)
    fed_cpu_s: float = 0.0
    fed_parts: int = 0
    # CPU seconds the worker processes spent starting (importing the stage's libraries, loading
    # its models: `Stage.prepare`) before the parts they began with; not in cpu_s
    start_cpu_s: float = 0.0

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] += n

    def unusable_file(self, name: str, reason: str) -> None:
        """A whole input file no retry can read: counted, and named with why in the counts."""
        self.drop(UNUSABLE_FILE)
        self.counts[UNUSABLE_FILES] = {**self.counts.get(UNUSABLE_FILES, {}), name: reason}

    def count_languages(self, languages, tokens=None) -> None:
        """Documents (and ``tokens``: each document's) per language, added to the counts'
        ``languages`` (``{"de": {"documents": n, "tokens": t}}``, summed over parts)."""
        columns = {"language": pc.fill_null(pc.cast(languages, pa.string()), "und")}
        sums = [("language", "count")]
        if tokens is not None:
            columns["tokens"] = pa.array(tokens, pa.int64())
            sums.append(("tokens", "sum"))
        grouped = pa.table(columns).group_by("language").aggregate(sums).to_pylist()
        found = {
            row["language"]: {"documents": row["language_count"]}
            | ({"tokens": row["tokens_sum"]} if tokens is not None else {})
            for row in grouped
        }
        self.counts[LANGUAGES] = merge_counts(self.counts.get(LANGUAGES, {}), found)

    def warn(self, message: str) -> None:
        """What a user should change about a result that is not an error (an empty split,
        say): kept in the marker's counts, shown in the materialization's metadata."""
        self.counts.setdefault(WARNINGS, []).append(message)

    def add_preview(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            if len(self.preview) >= PREVIEW_ROWS:
                return
            self.preview.append(row)

    def finish(self) -> StageReport:
        self.seconds = time.perf_counter() - self.started
        return self

    def data_version(self, files: tuple[str, ...] = ()) -> str:
        """Changes exactly when the content of the committed files named `files` (every file
        when empty) does: downstream partitions are stale after a re-run only if it produced
        different data for them."""
        digests = {
            name: entry["sha256"]
            for name, entry in sorted(self.outputs.items())
            if not files or name.rsplit("/", 1)[-1] in files
        }
        return hashlib.sha256(json.dumps(digests).encode()).hexdigest()[:32]

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> StageReport:
        """The report ``summary()`` was taken from, less its timing (a resumed part's preview is
        its values as text, which is how the metadata shows them)."""
        fields = {k: summary[k] for k in SUMMARY_FIELDS if k != "dropped" and k in summary}
        preview = [dict(pairs) for pairs in summary.get("preview", [])]
        return cls(**fields, dropped=Counter(summary["dropped"]), preview=preview)

    def summary(self) -> dict[str, Any]:
        return {
            "records_in": self.records_in,
            "records_out": self.records_out,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "dropped": dict(sorted(self.dropped.items())),
            "counts": self.counts,
            "outputs": self.outputs,
            **({"histograms": self.histograms} if self.histograms else {}),
            # kept (as pairs: the marker's keys are sorted) so a resumed unit shows the same
            # preview as one run in one go
            "preview": json.loads(
                json.dumps([list(row.items()) for row in self.preview], default=str)
            ),
        }


def combine(reports: dict[str, StageReport]) -> StageReport:
    """One report for the parts of a unit, by part name: counters summed, counts merged (numbers
    summed, mappings merged key by key, the first of anything else), first previews kept, and
    outputs named `<part>/<file>`."""
    total = StageReport()
    for label, report in reports.items():
        total.records_in += report.records_in
        total.records_out += report.records_out
        total.bytes_in += report.bytes_in
        total.bytes_out += report.bytes_out
        total.dropped.update(report.dropped)
        total.seconds += report.seconds
        total.cpu_s += report.cpu_s
        total.fed_cpu_s += report.fed_cpu_s
        total.start_cpu_s += report.start_cpu_s
        total.add_preview(report.preview)
        total.counts = merge_counts(total.counts, report.counts)
        total.histograms = merge_counts(total.histograms, report.histograms)
        total.outputs.update({f"{label}/{name}": entry for name, entry in report.outputs.items()})
    return total


# Counts that say how a part was made, not what it holds: the same for every part of a unit.
SETTINGS_COUNTS = frozenset(
    {
        "params",
        "readable",
        "tokenizer_sha256",
        "dtype",
        "eod_id",
        "source",
        "classifier_thresholds",
        "clean_settings",
    }
)


def merge_counts(into: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    merged = dict(into)
    for name, value in more.items():
        if name not in merged:
            merged[name] = value
        elif (
            name in SETTINGS_COUNTS
            or isinstance(value, bool)
            or not isinstance(value, int | float | dict)
        ):
            continue
        elif isinstance(value, dict):
            merged[name] = merge_counts(merged[name], value)
        else:
            merged[name] += value
    return merged


# Writes of at least this many bytes are hashed in a thread while the file takes them: both
# release the GIL, so on a second core the hash costs no time (a release's shards: 256 MB
# windows).
HASH_BESIDE_BYTES = 1 << 20


class HashingFile:
    """A write-only file that keeps the sha256 of what passes through it."""

    def __init__(self, file: IO[bytes]):
        self.file = file
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data) -> int:
        self.size += len(data)
        if len(data) < HASH_BESIDE_BYTES:
            self.sha256.update(data)
            return self.file.write(data)
        failed: list[BaseException] = []

        def update() -> None:
            try:
                self.sha256.update(data)
            except BaseException as error:  # re-raised in the writing thread
                failed.append(error)

        hashing = threading.Thread(target=update, name="sha256")
        hashing.start()
        try:
            return self.file.write(data)
        finally:
            hashing.join()  # the caller may reuse data's buffer once this returns
            if failed:
                raise failed[0]

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        self.file.flush()

    @property
    def closed(self) -> bool:
        return self.file.closed


class ParquetSink:
    """Streams rows into a zstd Parquet file, one row group per batch of `rows_per_batch` rows
    or `bytes_per_batch` bytes of string and binary values, whichever comes first.
    ``dictionary``: the columns to dictionary-encode (all by default; trying it on a column of
    distinct short strings, ids and URLs, costs time and bytes). ``statistics``: the columns
    whose row groups record their min and max (all by default); ``level``: zstd's."""

    def __init__(
        self,
        file: IO[bytes],
        schema: pa.Schema,
        rows_per_batch: int = ROWS_PER_BATCH,
        bytes_per_batch: int = BYTES_PER_BATCH,
        dictionary: list[str] | None = None,
        statistics: list[str] | None = None,
        level: int = 3,
    ):
        self.schema = schema
        self.writer = pq.ParquetWriter(
            file,
            schema,
            compression="zstd",
            compression_level=level,
            use_dictionary=True if dictionary is None else dictionary,
            write_statistics=True if statistics is None else statistics,
        )
        self.rows_per_batch = rows_per_batch
        self.bytes_per_batch = bytes_per_batch
        self.pending: list[dict[str, Any]] = []
        self.pending_bytes = 0
        self.rows = 0

    def write(self, row: dict[str, Any]) -> None:
        self.pending.append(row)
        self.pending_bytes += sum(len(v) for v in row.values() if isinstance(v, (bytes, str)))
        if len(self.pending) >= self.rows_per_batch or self.pending_bytes >= self.bytes_per_batch:
            self.flush()

    def write_table(self, table: pa.Table) -> None:
        self.flush()
        if table.num_rows:
            self.writer.write_table(table.select(self.schema.names).cast(self.schema))
            self.rows += table.num_rows

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.Table.from_pylist(self.pending, self.schema))
            self.rows += len(self.pending)
            self.pending = []
            self.pending_bytes = 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


class PartitionWriter:
    """Writes the outputs of one partition under `prefix`; use as a context manager."""

    def __init__(self, lake: Lake, prefix: str, report: StageReport, stamp: dict | None = None):
        self.lake = lake
        self.stamp = stamp or {}
        self.prefix = prefix.rstrip("/")
        self.report = report
        self.files: ExitStack = ExitStack()
        self.sinks: dict[str, ParquetSink] = {}
        self.written: dict[str, HashingFile] = {}

    def __enter__(self) -> PartitionWriter:
        self.lake.delete(f"{self.prefix}/{MARKER}")
        self.lake.remove_stray_temporaries(self.prefix)
        self.files.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        for sink in self.sinks.values():
            if exc_type is None:
                sink.close()
            else:
                with suppress(Exception):  # its temporary file is discarded below anyway
                    sink.writer.close()
        # Closing the files commits them (or, after an error, discards the temporaries).
        self.files.__exit__(exc_type, exc, tb)
        if exc_type is None:
            self._commit()
        return False

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def open(self, name: str) -> HashingFile:
        self.written[name] = HashingFile(
            self.files.enter_context(self.lake.writing(self.key(name)))
        )
        return self.written[name]

    def parquet(
        self, name: str, schema: pa.Schema, dictionary: list[str] | None = None
    ) -> ParquetSink:
        self.sinks[name] = ParquetSink(self.open(name), schema, dictionary=dictionary)
        return self.sinks[name]

    def _commit(self) -> None:
        written = {self.key(name) for name in self.written}
        for stale in set(self.lake.list(self.prefix)) - written - {self.key(MARKER)}:
            self.lake.delete(stale)
        for name, file in self.written.items():
            entry = {"bytes": file.size, "sha256": file.sha256.hexdigest()}
            if name in self.sinks:
                entry["rows"] = self.sinks[name].rows
            self.report.outputs[name] = entry
        self.report.bytes_out = sum(entry["bytes"] for entry in self.report.outputs.values())
        self.report.finish()
        self.lake.write_json(self.key(MARKER), self.report.summary() | self.stamp)


def is_committed(lake: Lake, prefix: str) -> bool:
    return lake.exists(f"{prefix.rstrip('/')}/{MARKER}")


def read_markers(
    lake: Lake, prefixes: Iterable[str], threads: int = 16
) -> Iterator[dict[str, Any] | None]:
    """The markers of these partitions, in order (None: not committed), read in parallel: a
    crawl has hundreds of units, a release thousands."""

    def read(prefix: str) -> dict[str, Any] | None:
        try:
            return lake.read_json(f"{prefix.rstrip('/')}/{MARKER}")
        except FileNotFoundError:
            return None

    with ThreadPoolExecutor(threads) as pool:
        yield from pool.map(read, prefixes)


class SiblingChanged(Exception):
    """Another dataset's output was committed again while it was read: nothing read from it is
    used."""


def sibling_outputs(lake: Lake, zone: str, prefix: str) -> Iterator[tuple[Lake, dict[str, Any]]]:
    """Each other dataset beside this one (`Lake.siblings`, by name) whose output at `prefix`
    (in `zone`) is committed, with its marker."""
    for sibling in lake.siblings(zone):
        if is_committed(sibling, prefix):
            yield sibling, sibling.read_json(f"{prefix.rstrip('/')}/{MARKER}")


def check_unchanged(lake: Lake, prefix: str, marker: dict[str, Any]) -> None:
    """Raise SiblingChanged unless the output at `prefix` still has the marker it was read with."""
    if lake.read_json(f"{prefix.rstrip('/')}/{MARKER}") != marker:
        raise SiblingChanged(f"{lake.stored_key(prefix)} was rewritten meanwhile")


def require_committed(lake: Lake, prefix: str, what: str) -> dict[str, Any]:
    marker = f"{prefix.rstrip('/')}/{MARKER}"
    if not lake.exists(marker):
        raise MissingInputError(f"{what} is not materialized: no {lake.uri(marker)}")
    return lake.read_json(marker)


def part_files(lake: Lake, unit, zone: str, name: str = "docs.parquet") -> list[str]:
    """The key of `name` in each part (file) of the unit's committed output in `zone`; none
    while it is not committed."""
    prefix = unit.prefix(zone)
    if not is_committed(lake, prefix):
        return []
    parts = lake.read_json(f"{prefix}/{MARKER}")["counts"]["files"]
    return [f"{unit.part_prefix(zone, part)}/{name}" for part in range(parts)]


def read_batches(
    lake: Lake, key: str, columns: list[str] | None = None, batch_size: int = ROWS_PER_BATCH
) -> Iterator[pa.RecordBatch]:
    # one thread: stages run a worker per core already, and Arrow's threads spent more CPU
    # (a tenth more on an extracted part) than they saved in time
    with lake.open_input(key) as f:
        yield from pq.ParquetFile(f).iter_batches(
            batch_size=batch_size, columns=columns, use_threads=False
        )


def read_table(lake: Lake, key: str, columns: list[str]) -> pa.Table:
    with lake.open_input(key) as f:
        return pq.read_table(f, columns=columns)


def read_column(lake: Lake, key: str, column: str) -> pa.ChunkedArray:
    return read_table(lake, key, [column]).column(column)
