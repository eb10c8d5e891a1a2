"""Rows routed to ranges on disk: the external shuffle the crawl-wide steps share.

A task writes rows, each with the range it belongs to (a range of keys, of documents, of a
release's shards, ...), through a ``SpillWriter``: rows are held until they take
``chunk_bytes``, then written as one file, ``<prefix>/<task>.<chunk>.arrows``: per range they
fall in, an Arrow IPC stream of its rows (or, from ``write_raw``, its bytes as they are), one
after the other, and at the end each range's offset (``ranges + 1`` little-endian int64). The
task commits by writing ``<prefix>/_done/<task>.json`` last, listing its files and their sizes,
with a small summary; a reader of range r reads each committed file's footer (once per process:
every range's reader needs it) and then r's rows, a ranged read each on S3, so a marker stays
small whatever the number of ranges and what a killed writer left is never read. A re-run
rewrites the same names with the same bytes (a task's output is a function of its inputs). A
piece holds at most ``chunk_bytes`` of rows: a reader holds one at a time.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict, deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl
import pyarrow as pa

from tokenmill.storage.lake import Lake

DONE = "_done"
RANGE = "__range"  # the column a unique flush adds: a row is unique within its range
UNIQUE_ROWS = 1 << 20
READERS = 8  # ranged reads at once on an object store
PREFETCH_BYTES = 64 << 20
Piece = tuple[str, int, int]  # a file, the offset and length of a range's rows in it


def done_key(prefix: str, task: str) -> str:
    return f"{prefix}/{DONE}/{task}.json"


def is_done(lake: Lake, prefix: str, task: str) -> bool:
    return lake.exists(done_key(prefix, task))


def task_summary(lake: Lake, prefix: str, task: str) -> dict:
    return lake.read_json(done_key(prefix, task))["summary"]


def _first_distinct(table: pa.Table, ranges: np.ndarray) -> tuple[pa.Table, np.ndarray]:
    """Rows sorted by range, each kept once within its range and ``UNIQUE_ROWS`` rows (a
    duplicate further away stays, as one in another chunk does: readers tolerate them), in a
    pass per ``UNIQUE_ROWS``, whatever the number of ranges, holding one such slice's table."""
    keep = np.empty(len(ranges), bool)
    for start in range(0, len(ranges), UNIQUE_ROWS):
        part = pl.from_arrow(table.slice(start, UNIQUE_ROWS))
        part = part.with_columns(pl.Series(RANGE, ranges[start : start + UNIQUE_ROWS]))
        first = part.select(pl.struct(pl.all()).is_first_distinct()).to_series().to_numpy()
        keep[start : start + len(first)] = first
    return table.filter(keep), ranges[keep]


class SpillWriter:
    """The output of one task of a phase under ``prefix``, routed to ``ranges`` ranges."""

    def __init__(
        self,
        lake: Lake,
        prefix: str,
        task: str,
        ranges: int,
        chunk_bytes: int,
        unique: bool = False,
        compression: str | None = "zstd",
    ):
        self.lake, self.prefix, self.task, self.ranges = lake, prefix, task, ranges
        self.chunk_bytes, self.unique = max(int(chunk_bytes), 1), unique
        self.options = pa.ipc.IpcWriteOptions(compression=compression)
        self.held: list[tuple[pa.Table, np.ndarray]] = []
        self.held_bytes = self.chunks = self.bytes = 0
        self.files: list[tuple[str, int]] = []  # each file and its size

    def add(self, table: pa.Table, ranges: np.ndarray) -> None:
        """Rows of ``table``, row i going to range ``ranges[i]``."""
        ranges = np.asarray(ranges, dtype=np.int64)
        size = table.nbytes + 8 * table.num_rows
        if size > self.chunk_bytes and table.num_rows > 1:  # a row group stays a chunk
            step = max(table.num_rows * self.chunk_bytes // size, 1)
            for start in range(0, table.num_rows, step):
                self.add(table.slice(start, step), ranges[start : start + step])
            return
        if table.num_rows:
            self.held.append((table, ranges))
            self.held_bytes += table.nbytes + 8 * table.num_rows
            if self.held_bytes >= self.chunk_bytes:
                self.flush()

    def flush(self) -> None:
        if not self.held:
            return
        table = pa.concat_tables([t for t, _ in self.held]).combine_chunks()
        ranges = np.concatenate([r for _, r in self.held])
        self.held, self.held_bytes = [], 0
        if np.any(ranges[1:] < ranges[:-1]):
            order = np.argsort(ranges, kind="stable")  # within a range, rows keep their order
            ranges = ranges[order]
            table = table.take(order)
        if self.unique:
            table, ranges = _first_distinct(table, ranges)

        def write_rows(f, start: int, end: int) -> None:
            piece = table.slice(start, end - start)
            with pa.ipc.new_stream(f, piece.schema, options=self.options) as writer:
                writer.write_table(piece)

        self._write_chunk(ranges, write_rows)

    def write_raw(self, ranges: np.ndarray, write) -> None:
        """A chunk of bytes, not rows: item i of ``ranges`` (sorted) goes to range
        ``ranges[i]``, and ``write(f, start, end)`` writes the bytes of items ``start`` to
        ``end`` (one range's) to ``f``; a range's reader gets them one after the other."""
        self._write_chunk(np.asarray(ranges, np.int64), write)

    def _write_chunk(self, ranges: np.ndarray, write_rows) -> None:
        """A chunk file: ``write_rows(f, start, end)`` for each run of equal ``ranges``, then
        the footer of each range's end."""
        if not len(ranges):
            return
        bounds = np.flatnonzero(np.diff(ranges)) + 1
        key = f"{self.prefix}/{self.task}.{self.chunks:04d}.arrows"
        ends = np.zeros(self.ranges + 1, "<i8")  # ends[r + 1]: where range r's rows end
        with self.lake.writing(key) as f:
            for start, end in zip([0, *bounds], [*bounds, len(ranges)], strict=True):
                write_rows(f, start, end)
                ends[int(ranges[start]) + 1] = f.tell()
            f.write(np.maximum.accumulate(ends).tobytes())  # a range without rows: empty
            self.files.append((key, f.tell()))
            self.bytes += f.tell()
        self.chunks += 1

    def commit(self, summary: dict | None = None) -> dict:
        self.flush()
        summary = (summary or {}) | {"bytes_written": self.bytes}
        marker = {"ranges": self.ranges, "files": self.files, "summary": summary}
        self.lake.write_json(done_key(self.prefix, self.task), marker)
        return summary


Source = tuple[str, tuple[str, ...]]  # a phase's prefix and its tasks


def range_files(lake: Lake, sources: list[Source], index: int) -> list[Piece]:
    """The row groups the committed tasks of ``sources`` wrote for range ``index``, in source,
    task and chunk order."""
    keys = [done_key(prefix, task) for prefix, tasks in sources for task in tasks]
    footers = []  # each file the tasks wrote: where its footer is
    for marker in _in_order(lake, keys, lambda key: lake.read_json(key)):
        length = 8 * (marker["ranges"] + 1)
        footers.extend((key, size - length, length) for key, size in marker["files"])
    pieces = []
    for (key, _, _), offsets in zip(footers, _in_order(lake, footers, _footer(lake)), strict=True):
        start, end = offsets[index : index + 2].tolist()
        if end > start:
            pieces.append((key, start, end - start))
    return pieces


_footers: OrderedDict[tuple, np.ndarray] = OrderedDict()  # per process: files are immutable
FOOTERS_HELD = 8192
_footers_lock = threading.Lock()


def _footer(lake: Lake):
    """Reads a file's footer, once per process: each reader of a phase's ranges needs one
    entry of every file of the phase (a task per range: their number squared, each a request
    on an object store)."""

    def read(footer: Piece) -> np.ndarray:
        key = (lake.url, *footer)
        with _footers_lock:  # read ahead by threads on an object store
            if key in _footers:
                _footers.move_to_end(key)
                return _footers[key]
        offsets = np.frombuffer(_read_range(lake, footer), "<i8")
        with _footers_lock:
            _footers[key] = offsets
            if len(_footers) > FOOTERS_HELD:
                _footers.popitem(last=False)
        return offsets

    return read


class SpillFileError(FileNotFoundError):
    """A file a committed task listed is gone: the work was deleted under a run."""


def _read_range(lake: Lake, read: Piece, into: memoryview | None = None) -> bytes | None:
    """A piece's bytes, or read into ``into`` (its size)."""
    key, offset, length = read
    if not length:
        return None if into is not None else b""
    try:
        with lake.open_input(key) as f:
            f.seek(offset)
            if into is None:
                return f.read(length)
            if f.readinto(into) != length:
                raise SpillFileError(f"work file {lake.uri(key)} is shorter than its footer says")
            return None
    except FileNotFoundError as error:
        raise SpillFileError(
            f"work file {lake.uri(key)} is missing (deleted under a run): re-run the stage"
        ) from error


def _in_order(lake: Lake, items: list, read, size=lambda item: 0) -> Iterator:
    """``read(item)`` of each item, in order. On an object store, where a read is a request
    with its latency, up to ``READERS`` at once, holding at most ``PREFETCH_BYTES`` (by
    ``size(item)``) ahead: a range's reader meets thousands of small pieces, one per file each
    task wrote."""
    if lake.is_local or len(items) < 2:
        yield from map(read, items)
        return
    with ThreadPoolExecutor(READERS) as pool:
        pending: deque = deque()
        held = 0
        for item in items:
            while pending and (len(pending) >= READERS or held + size(item) > PREFETCH_BYTES):
                future, length = pending.popleft()
                held -= length
                yield future.result()
            pending.append((pool.submit(read, item), size(item)))
            held += size(item)
        while pending:
            yield pending.popleft()[0].result()


def read_files(
    lake: Lake, pieces: list[Piece], columns: list[str] | None = None
) -> Iterator[pa.Table]:
    for data in read_raw(lake, pieces):
        table = pa.ipc.open_stream(data).read_all()
        yield table.select(columns) if columns else table


def read_raw(lake: Lake, pieces: list[Piece]) -> Iterator[bytes]:
    """The bytes of each piece, in order (``SpillWriter.write_raw``'s, or a stream of rows)."""
    yield from _in_order(lake, pieces, functools.partial(_read_range, lake), lambda p: p[2])


def read_raw_into(lake: Lake, pieces: list[Piece], buffer: memoryview) -> None:
    """The pieces' bytes, one after the other, read into ``buffer`` (no copy of each)."""
    ends = np.cumsum([piece[2] for piece in pieces]).tolist()
    places = zip(pieces, [0, *ends[:-1]], ends, strict=True)
    read = [functools.partial(_read_range, lake, piece, buffer[a:b]) for piece, a, b in places]
    for _ in _in_order(lake, read, lambda call: call(), lambda call: call.args[1][2]):
        pass


def read_sources(
    lake: Lake, sources: list[Source], index: int, columns: list[str] | None = None
) -> Iterator[pa.Table]:
    """Range ``index`` of several phases' outputs, one row group at a time."""
    yield from read_files(lake, range_files(lake, sources, index), columns)


def summaries(lake: Lake, sources: list[Source]) -> list[dict]:
    return [task_summary(lake, prefix, task) for prefix, tasks in sources for task in tasks]


def clear_data(lake: Lake, prefix: str) -> None:
    """Deletes a phase's files once every task reading them has committed; its markers (and
    their summaries) stay."""
    for key in lake.list(prefix):
        if not key[len(prefix) :].lstrip("/").startswith(f"{DONE}/"):
            lake.delete(key)
