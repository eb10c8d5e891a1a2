"""Writing a release's shards as an external shuffle (``tokenmill.storage.spill``,
``tokenmill.runtime.phases``): every input byte is read once, every token written twice (three times
with many shards), whatever the corpus's size.

A global shuffle puts, in each shard, about one document of every input file: at corpus scale a
shard of 10^6 documents draws from ~930,000 of 9,000,000 files, and a shard writer reading its
documents from the inputs would make ~3 ranged reads per document (index, sidecar row group,
tokens), reading each input file once per shard. Instead:

1. route: a task reads a run of input files whole, in order (index, sidecar, tokens), finds each
   document's position in its group's shuffled order (the permutation's inverse) and so its
   shard, and routes it there: its provenance row to ``route-meta`` and its tokens, as they are
   (raw bytes: they do not compress, and the rows say where each document's end), to
   ``route-tokens``, a range per shard. Both are written together, sorted by position: the
   k-th piece of a range's rows and the k-th piece of its tokens are the same documents.
2. split (above ``DIRECT_SHARDS`` shards): route sends each document to a range of ~sqrt(shards)
   shards instead, and a split task sends one such range of a run of route tasks on to each
   shard: a shard then reads ~sqrt(shards) times fewer, larger pieces.
3. shards: a task per train shard reads its range's provenance rows (~300 bytes a document),
   sorts them by position, splits train from validation by the text's hash, and so knows where
   each document's tokens are; then it writes the train and validation ``.bin`` front to back,
   a window of ``WINDOW_BYTES`` of positions at a time: each piece holds a window's documents
   as one run of bytes (its documents are in position order), read once.

On a local lake whose input files are few and large for the release (``gathers``: each gives
a shard's window several documents, and the inputs stay in the page cache from window to
window), the tokens are not routed: route sends the rows alone, with where each document's
tokens are in its input file, and a shard task reads them from there, file by file, into the
window (from the files' maps, kept from shard to shard), while a thread writes the window
before: every token is written once. Shards are written past the page cache where the file
system allows (``tokenmill.storage.direct_writes``): nothing here reads them again.

Steps share every phase through the lake (claims, markers); a killed step resumes from the
committed tasks. Every position of a shard must arrive exactly once: a shard that misses or
repeats one fails naming it.
"""

from __future__ import annotations

import functools
import math
import mmap
import os
import threading
from collections import Counter, OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.release.permutation import Permutation
from tokenmill.release.plan import (
    COPIED_FIELDS,
    SIDECAR_DICTIONARY,
    SPLITS,
    Plan,
    ReleaseError,
    ReleaseSettings,
    done_key,
    plan_release,
    shard_name,
    sidecar_sink,
    split_draws,
    unit_digest,
)
from tokenmill.runtime.phases import Claims, Phase, PlanChangedError, run_job
from tokenmill.storage.direct_writes import open_direct
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import RELEASE, TOKENIZED_SHARDS, Unit
from tokenmill.storage.outputs import HashingFile, MissingInputError, require_committed
from tokenmill.storage.spans import copy_spans
from tokenmill.storage.spill import (
    Source,
    SpillWriter,
    clear_data,
    is_done,
    range_files,
    read_files,
    read_raw,
    read_raw_into,
)
from tokenmill.tokens.megatron import IndexedDataset, write_index

ROUTE_DOCUMENTS = 1_000_000  # documents a route task reads, about (a task per input file at least)
TOKEN_CHUNK_BYTES = 256 << 20  # tokens a route task holds before writing them out
STAGING_BYTES = 8 << 20  # a route task's routed tokens are written through this much, in order
WINDOW_BYTES = 256 << 20  # tokens a shard task writes at a time
GATHER_WINDOW_BYTES = 32 << 20  # tokens a gathering shard reads while it writes the last ones
UNBOUNDED = 1 << 62
KEPT_BYTES = 768 << 20  # buffers a process keeps for its next task
ROWS_PER_GROUP = 1 << 16  # sidecar rows per row group, by position
ROUTE, SPLIT = "route", "split"  # the two levels of routing (the second for many shards)
DIRECT_SHARDS = 256  # up to this many shards, documents are routed to their shard at once
# tokens (in bytes) a worker process writes at least: below, the release is written here
BYTES_PER_WORKER = 256 << 20
PLAN_FILE = "plan.npz"
WORK_FORMAT = 2  # of the routed files: a killed run's older files are not read
# Documents an input file gives a shard's window, on average, from which shards gather their
# tokens from the input files (a local lake only): with fewer, opening the files a window meets
# costs more than routing the tokens through range files.
GATHER_DOCUMENTS = 4
# Every window reads a little of each input file, so the inputs are read once per window: from
# the page cache when they fit (a release's pod has 6 GiB), else only with one or two windows.
GATHER_CACHED_BYTES = 4 << 30
OPEN_INPUTS = 256  # maps of input files a process keeps for the shards gathering from them


class RouteError(ReleaseError):
    """A shard did not get each of its positions exactly once."""


@dataclass(frozen=True)
class Writing:
    """What a task needs, small enough to hand to a worker process with each task: the plan
    (16 bytes per input file, 144 MB at 9,000,000 files) is made once per process, from the
    markers, and must be the version the step planned."""

    lake: Lake
    settings: ReleaseSettings
    version: str
    documents: int = ROUTE_DOCUMENTS
    direct: int = DIRECT_SHARDS
    gather: bool = False  # shards read their tokens from the input files (``gathers``)

    def plan(self) -> Plan:
        """The plan the plan step stored (``store_plan``), else made again from the markers."""
        if self.version not in _plans:
            stored = f"{RELEASE}/{self.version}/_work/{PLAN_FILE}"
            if self.lake.exists(stored):
                plan = Plan.from_bytes(self.lake.read_bytes(stored))
            else:
                plan = plan_release(self.lake, self.settings)
            if plan.version != self.version:
                raise PlanChangedError(
                    f"release {self.version} was planned from other tokenized files than "
                    f"there are now (now {plan.version}): re-run the stage"
                )
            _plans.clear()
            _plans[plan.version] = plan
        return _plans[self.version]

    def routes(self) -> dict[str, tuple[str, int, int]]:
        key = (self.version, self.documents)
        if key not in _routes:
            _routes.clear()
            _routes[key] = route_tasks(self.plan(), self.documents)
        return _routes[key]

    @property
    def prefix(self) -> str:
        gather = "-gather" if self.gather else ""
        return (
            f"{RELEASE}/{self.version}/_work/f{WORK_FORMAT}-{self.documents}-{self.direct}{gather}"
        )

    @property
    def per_bucket(self) -> int:
        """Shards per range of the first routing: 1 (a range per shard) up to ``direct``
        shards; above, about the square root of the shards, each range split again by a
        second routing, so a shard reads thousands of pieces, not one per file of every
        route task (~75,000 of ~27 KB at 10^10 documents)."""
        return shards_per_range(len(self.plan().pieces()), self.direct)

    def splits(self) -> dict[str, tuple[int, int, int]]:
        """Second-level task name -> (range of the first routing, first and last route task it
        reads): about a route task's bytes each."""
        if self.per_bucket == 1:
            return {}
        buckets = -(-len(self.plan().pieces()) // self.per_bucket)
        return {name: run for bucket in range(buckets) for name, run in self._splits(bucket)}

    def split(self, task: str) -> tuple[int, int, int]:
        """A second-level task's (range, first and last route task), from its name."""
        bucket, first = (int(part) for part in task[1:].split("-"))
        buckets = -(-len(self.plan().pieces()) // self.per_bucket)
        return bucket, first, min(first + buckets, len(self.routes()))

    def _splits(self, bucket: int) -> list[tuple[str, tuple[int, int, int]]]:
        """The second-level tasks of one range of the first routing."""
        buckets = -(-len(self.plan().pieces()) // self.per_bucket)
        names = (f"b{bucket:05d}-{first:06d}" for first in range(0, len(self.routes()), buckets))
        return [(name, self.split(name)) for name in names]

    def level(self, name: str) -> tuple[str, str]:
        """The meta and tokens prefixes of a routing level."""
        return f"{self.prefix}/{name}-meta", f"{self.prefix}/{name}-tokens"

    def shard_sources(self, index: int) -> tuple[list[Source], list[Source], int]:
        """Where shard ``index``'s rows and tokens are: the level and tasks that routed them,
        and the range's number there."""
        per_bucket = self.per_bucket
        if per_bucket == 1:
            tasks, name, at = tuple(self.routes()), ROUTE, index
        else:
            bucket = index // per_bucket
            tasks = tuple(name for name, _ in self._splits(bucket))
            name, at = SPLIT, index - bucket * per_bucket
        meta, tokens = self.level(name)
        return [(meta, tasks)], [(tokens, tasks)], at

    @property
    def itemsize(self) -> int:
        return np.dtype(self.plan().dtype).itemsize


def shards_per_range(shards: int, direct: int = DIRECT_SHARDS) -> int:
    return 1 if shards <= direct else math.isqrt(shards - 1) + 1


def gathers(lake: Lake, plan: Plan) -> bool:
    """Whether the shards read their documents' tokens from the input files themselves
    (the tokens written once) instead of from range files (written twice): on a local lake,
    when each input file gives a shard's window ``GATHER_DOCUMENTS`` documents or more on
    average, and the windows' reads of the inputs stay in the page cache or are few. Not for a
    corpus of millions of files, where a window meets most files for one document or none,
    nor on an object store, where each read is a request."""
    if not lake.is_local:
        return False
    itemsize = np.dtype(plan.dtype).itemsize
    for group in plan.groups.values():
        input_bytes = group.files.tokens * itemsize
        document_bytes = max(input_bytes / max(group.documents, 1), 1)
        per_shard = min(group.per_shard, group.documents)
        per_window = min(per_shard, WINDOW_BYTES / document_bytes)
        windows = group.shards * math.ceil(per_shard / per_window)
        if per_window < GATHER_DOCUMENTS * len(group.files) or (
            input_bytes > GATHER_CACHED_BYTES and windows > 2
        ):
            return False
    return True


_plans: dict[str, Plan] = {}  # per process: the plan of the version being written


def store_plan(lake: Lake, plan: Plan) -> None:
    """The plan where the steps and their workers load it from (one read of 16 bytes per input
    file) instead of reading every unit's marker again (90,000 at corpus scale)."""
    key = f"{plan.prefix}/_work/{PLAN_FILE}"
    if not lake.exists(key):
        lake.write_bytes(key, plan.to_bytes())


def check_inputs(lake: Lake, plan: Plan, units: set[str]) -> None:
    """The tokenized units are still those the plan was made from."""
    for key in sorted(units):
        marker = require_committed(
            lake, Unit.from_key(key).prefix(TOKENIZED_SHARDS), f"tokenized_shards of {key}"
        )
        if unit_digest(marker) != plan.inputs[key]:
            raise PlanChangedError(
                f"tokenized_shards of {key} changed after release {plan.version} was planned: "
                "re-run the stage"
            )


_routes: dict[tuple, dict] = {}


def route_tasks(plan: Plan, documents: int = ROUTE_DOCUMENTS) -> dict[str, tuple[str, int, int]]:
    """Task name -> (group, first file, last file): runs of files of about ``documents``."""
    tasks: dict[str, tuple[str, int, int]] = {}
    for name, group in plan.groups.items():
        tasks |= group_routes(name, group, documents, len(tasks))
    return tasks


def group_routes(name: str, group, documents: int, numbered: int = 0) -> dict:
    """A group's route tasks, numbered from ``numbered``: a run of files starts at the first
    file starting at or after each multiple of ``documents``."""
    starts = group.files.starts()
    bounds = np.unique(np.searchsorted(starts, np.arange(0, starts[-1], documents)))
    bounds = np.append(bounds[bounds < len(group.files)], len(group.files))
    runs = zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    return {
        f"{name}-{numbered + i:06d}": (name, first, last) for i, (first, last) in enumerate(runs)
    }


def _shard_numbers(plan: Plan) -> dict[str, int]:
    """Each group's first range: ranges number the release's train shards across groups."""
    first, numbers = 0, {}
    for name, group in plan.groups.items():
        numbers[name] = first
        first += group.shards
    return numbers


def _read_input(lake: Lake, source: str, documents: int, tokens: bool = True):
    """An input file's sidecar rows, token lengths, tokens (None without ``tokens``), and
    where each document's tokens start there (in bytes), checked against its marker."""
    with lake.open_input(f"{source}/provenance.parquet") as f:
        # few-valued columns stay dictionaries through the routing (sorted, spilled, read back
        # and sorted again: their strings would be copied at every step)
        rows = pq.read_table(f, read_dictionary=SIDECAR_DICTIONARY)
    if "text_hash" not in rows.column_names:
        raise MissingInputError(
            f"{source} was tokenized before documents carried a text hash: "
            "rematerialize tokenized_shards"
        )
    index = IndexedDataset(lake.read_bytes(f"{source}/tokens.idx"), None)
    if not len(index) == rows.num_rows == documents:
        raise MissingInputError(
            f"{source}: {len(index)} documents in tokens.idx, {rows.num_rows} in "
            f"provenance.parquet, {documents} in its unit's marker: rematerialize "
            "tokenized_shards"
        )
    lengths = index.lengths.astype(np.int64)
    if tokens:
        with lake.open_input(f"{source}/tokens.bin") as f:
            buffer = _pool.take(f.size())
            size = f.readinto(memoryview(buffer)[: f.size()])
    else:
        buffer, size = None, lake.size(f"{source}/tokens.bin")
    starts = index.pointers.astype(np.int64)
    if len(starts) and (starts.min() < 0 or (starts + lengths * index.dtype.itemsize).max() > size):
        raise MissingInputError(
            f"{source}: tokens.idx points past the end of tokens.bin ({size} bytes): "
            "rematerialize tokenized_shards"
        )
    return rows, lengths, buffer, starts


class _Pool:
    """Buffers handed out and given back, kept per process up to ``KEPT_BYTES``: memory a
    process touches for the first time costs a page fault per page (~0.6 s a GB on a virtual
    machine), so the tasks of a process read and copy through the same few buffers."""

    def __init__(self):
        self.free: list[bytearray] = []
        self.lock = threading.Lock()

    def take(self, size: int) -> bytearray:
        with self.lock:
            for i, buffer in enumerate(self.free):
                if len(buffer) >= size:
                    return self.free.pop(i)
            self.free.clear()  # all smaller: kept for another kind of task (reading, not windows)
        grain = 1 << max(size.bit_length() - 3, 12)  # sizes within 1/8 share a buffer
        return bytearray(-(-size // grain) * grain)

    def give(self, buffers) -> None:
        with self.lock:
            self.free = sorted([*self.free, *buffers], key=len)
            while sum(map(len, self.free)) > KEPT_BYTES:
                self.free.pop(0)


_pool = _Pool()


class _Routed:
    """Documents on their way to ranges: provenance rows to a level's meta spill, tokens (as
    they are) to its tokens spill, both flushed together sorted by range and position, so the
    k-th piece of a range's rows and the k-th piece of its tokens are the same documents in
    the same order, and a piece's documents are in position order."""

    def __init__(self, writing: Writing, level: str, task: str, ranges: int):
        meta, tokens = writing.level(level)
        lake = writing.lake
        self.meta = SpillWriter(lake, meta, task, ranges, UNBOUNDED, compression="lz4")
        self.tokens = None  # gathering shards read the tokens where they are
        if not writing.gather:
            self.tokens = SpillWriter(lake, tokens, task, ranges, UNBOUNDED, compression=None)
        self.held: list[tuple] = []
        self.held_bytes = self.documents = 0
        self.staging = bytearray(STAGING_BYTES if self.tokens is not None else 0)
        self.behind = _Behind("release-route")

    def add(self, rows: pa.Table, ranges, data, starts: np.ndarray, sizes: np.ndarray) -> None:
        """Documents: their rows (with ``position``), ranges, and their tokens, ``sizes[i]``
        bytes at ``starts[i]`` of ``data`` (a ``bytearray`` goes back to the pool once
        written; None when the shards gather the tokens)."""
        self.held.append((rows, np.asarray(ranges, np.int64), data, starts, sizes))
        self.held_bytes += int(sizes.sum())
        self.documents += rows.num_rows
        if self.held_bytes >= TOKEN_CHUNK_BYTES:
            self.flush()

    def flush(self) -> None:
        """The held documents written by a thread while the caller reads the next ones."""
        if self.held:
            self.behind.submit(self._write, self.held)
            self.held, self.held_bytes = [], 0

    def _write(self, held: list[tuple]) -> None:
        rows, ranges, buffers, starts, sizes = zip(*held, strict=True)
        rows, ranges = pa.concat_tables(rows), np.concatenate(ranges)
        order = np.lexsort((rows.column("position").to_numpy(), ranges))
        self.meta.add(rows.take(order), ranges[order])
        self.meta.flush()
        if self.tokens is None:
            return
        which = np.repeat(np.arange(len(buffers)), [len(s) for s in starts])[order]
        begins, sizes = np.concatenate(starts)[order], np.concatenate(sizes)[order]
        if (largest := int(sizes.max(initial=0))) > len(self.staging):  # a document larger
            self.staging = bytearray(largest)
        stage = functools.partial(_write_staged, buffers, which, begins, sizes, self.staging)
        self.tokens.write_raw(ranges[order], stage)
        _pool.give(buffer for buffer in buffers if isinstance(buffer, bytearray))

    def commit(self, summary: dict) -> dict:
        self.flush()
        self.behind.wait()
        if self.tokens is not None:
            self.tokens.commit(summary)
        return self.meta.commit(summary)

    def __enter__(self) -> _Routed:
        return self

    def __exit__(self, *exc) -> None:
        self.behind.close()


def _write_staged(buffers, which, begins, sizes, staging: bytearray, f, start: int, end: int):
    """Documents ``start`` to ``end`` (``sizes[i]`` bytes at ``begins[i]`` of
    ``buffers[which[i]]``) written to ``f`` in order, copied into ``staging`` (at least as large
    as any of them) a few MB at a time."""
    target = np.frombuffer(staging, np.uint8)
    ends = np.cumsum(sizes[start:end])  # within the run
    done = 0
    while done < len(ends):
        base = int(ends[done] - sizes[start + done])
        stop = int(np.searchsorted(ends, base + len(staging), "right"))
        run = slice(start + done, start + stop)
        places = ends[done:stop] - sizes[run] - base
        for number in np.unique(which[run]).tolist():
            chosen = which[run] == number
            copy_spans(
                target, buffers[number], begins[run][chosen], sizes[run][chosen], places[chosen]
            )
        with memoryview(staging) as view:
            f.write(view[: int(ends[stop - 1]) - base])
        done = stop


def _range_pieces(
    lake: Lake, sources: tuple[list[Source], list[Source], int], gather: bool = False
) -> list[tuple]:
    """A range's pieces of rows and of tokens, in pairs (the same documents; documents without
    tokens, or every document when the shards ``gather`` the tokens, have an empty piece of
    tokens)."""
    meta_sources, token_sources, index = sources
    if gather:
        return [(piece, (piece[0], 0, 0)) for piece in range_files(lake, meta_sources, index)]
    tokens = {
        piece[0].rsplit("/", 1)[1]: piece for piece in range_files(lake, token_sources, index)
    }
    pairs = [
        (piece, tokens.pop(piece[0].rsplit("/", 1)[1], (piece[0], 0, 0)))
        for piece in range_files(lake, meta_sources, index)
    ]
    if tokens:
        raise RouteError(f"routed tokens {min(tokens)} of range {index} have no rows")
    return pairs


def _piece_sizes(rows: pa.Table, tokens: tuple, itemsize: int, gather: bool) -> np.ndarray:
    """Each routed document's size in bytes, checked against its tokens piece (unless the
    shards ``gather`` the tokens: there is none)."""
    sizes = rows.column("length").to_numpy() * itemsize
    if not gather and int(sizes.sum()) != tokens[2]:
        raise RouteError(
            f"routed tokens {tokens[0]} hold {tokens[2]} bytes where their rows say "
            f"{int(sizes.sum())}"
        )
    return sizes


def route_task(writing: Writing, task: str) -> dict:
    """Routes every document of a run of input files to its shard's range (or its group of
    shards', with two levels)."""
    plan = writing.plan()
    name, first, last = writing.routes()[task]
    group = plan.groups[name]
    units = {group.files.units[group.files.unit_of[file]] for file in range(first, last)}
    check_inputs(writing.lake, plan, units)
    starts = group.files.starts()
    shuffle = Permutation(int(starts[-1]), group.seed)
    shards, per_bucket = len(plan.pieces()), writing.per_bucket
    first_shard = _shard_numbers(plan)[name]
    with _Routed(writing, ROUTE, task, -(-shards // per_bucket)) as routed:
        for file in range(first, last):
            source = group.files.source(file)
            rows, lengths, data, at = _read_input(
                writing.lake, source, group.files.rows[file], not writing.gather
            )
            indices = np.arange(len(lengths))
            if group.language is not None:  # the file's documents of the group's language
                language = pc.cast(rows.column("language"), pa.string())
                mine = pc.fill_null(pc.equal(pc.fill_null(language, "und"), group.language), False)
                indices = np.flatnonzero(mine.to_numpy(zero_copy_only=False))
                rows, lengths, at = rows.take(indices), lengths[indices], at[indices]
            if len(indices) != group.files.documents[file]:
                raise MissingInputError(
                    f"{source}: {len(indices)} documents of the group, its marker counted "
                    f"{group.files.documents[file]}: rematerialize tokenized_shards"
                )
            positions = shuffle.position_of(starts[file] + np.arange(len(lengths)))
            shard = positions // group.per_shard + first_shard
            spans = pc.subtract(rows.column("token_end"), rows.column("token_start"))
            meta = (
                rows.select([f.name for f in COPIED_FIELDS])
                .append_column("source", _constant(source, len(lengths)))
                .append_column("source_doc_index", pa.array(indices, pa.int64()))
                .append_column("text_tokens", spans.cast(pa.int64()))
                .append_column("length", pa.array(lengths, pa.int64()))
                .append_column("token_offset", pa.array(at, pa.int64()))  # in bytes
                .append_column("position", pa.array(positions, pa.int64()))
                .append_column("shard", pa.array(shard, pa.int64()))
            )
            routed.add(meta, shard // per_bucket, data, at, lengths * writing.itemsize)
        return routed.commit({"documents": routed.documents, "files": last - first})  # its marker


def _constant(value: str, length: int) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(length, np.int32)), pa.array([value]))


def split_task(writing: Writing, task: str) -> dict:
    """The second routing: one range of the first, from a run of route tasks, to its shards."""
    bucket, first, last = writing.split(task)
    routes = tuple(writing.routes())[first:last]
    base, lake = bucket * writing.per_bucket, writing.lake
    meta_prefix, tokens_prefix = writing.level(ROUTE)
    sources = ([(meta_prefix, routes)], [(tokens_prefix, routes)], bucket)
    pairs = _range_pieces(lake, sources, writing.gather)
    tables = read_files(lake, [meta for meta, _ in pairs])
    routed_tokens = [None] * len(pairs) if writing.gather else read_raw(lake, [t for _, t in pairs])
    with _Routed(writing, SPLIT, task, writing.per_bucket) as routed:
        for (_, tokens), rows, data in zip(pairs, tables, routed_tokens, strict=True):
            sizes = _piece_sizes(rows, tokens, writing.itemsize, writing.gather)
            starts = np.cumsum(sizes) - sizes
            routed.add(rows, rows.column("shard").to_numpy() - base, data, starts, sizes)
        return routed.commit({"documents": routed.documents})


class _SplitDataset:
    """A split of a shard, written front to back: the sidecar rows and the tokens in order;
    each file is committed when the caller's block ends without an error."""

    def __init__(self, lake: Lake, key: str, dtype: np.dtype, lengths: np.ndarray, stack):
        self.key, self.dtype, self.lengths = key, dtype, lengths
        self.starts = np.zeros(len(lengths), np.int64)  # in tokens
        np.cumsum(lengths[:-1], out=self.starts[1:])
        files = {}
        for suffix in (".bin", ".idx", ".provenance.parquet"):
            file = stack.enter_context(lake.writing(key + suffix))
            if suffix == ".bin" and (direct := open_direct(file.name)) is not None:
                stack.callback(direct.close)  # its last block, before the file is committed
                file = direct
            files[suffix] = HashingFile(file)
        self.files, self.tokens = files, files[".bin"]
        self.sidecar = sidecar_sink(files[".provenance.parquet"])
        stack.callback(self.sidecar.writer.close)  # a failed shard's, before its files go
        self.rows = 0

    def add_rows(self, rows: pa.Table) -> None:
        """The next documents' provenance rows, in order."""
        spans = rows.column("text_tokens").to_numpy()
        numbers = np.arange(self.rows, self.rows + rows.num_rows)
        starts = self.starts[numbers]
        self.sidecar.write_table(
            rows.drop_columns(["text_tokens", "length", "position"])
            .append_column("doc_index", pa.array(numbers, pa.int64()))
            .append_column("token_start", pa.array(starts, pa.int64()))
            .append_column("token_end", pa.array(starts + spans, pa.int64()))
        )
        self.rows += rows.num_rows

    def close(self) -> dict:
        """Writes the index; each file's size and SHA-256."""
        self.sidecar.close()
        write_index(self.files[".idx"], self.lengths, self.dtype)
        expected = int(self.lengths.sum()) * self.dtype.itemsize
        if self.tokens.size != expected:
            raise RouteError(f"{self.key}.bin: {self.tokens.size} bytes written of {expected}")
        name = self.key.rsplit("/", 1)[1]
        return {
            name + suffix: {"bytes": file.size, "sha256": file.sha256.hexdigest()}
            for suffix, file in self.files.items()
        }

    def counts(self) -> dict:
        return {"documents": len(self.lengths), "tokens": int(self.lengths.sum())}


def write_shard(writing: Writing, piece: str) -> dict:
    """Train shard ``piece`` (``<group>/<k>``) and the validation documents met there, from
    the routed rows of its range; committed by its done file."""
    lake, plan, settings = writing.lake, writing.plan(), writing.settings
    key = done_key(plan, piece)
    if lake.exists(key):
        return lake.read_json(key)
    name, number = piece.split("/")
    group, number = plan.groups[name], int(number)
    first = number * group.per_shard
    expected = min(first + group.per_shard, group.documents) - first
    sources = writing.shard_sources(plan.pieces().index(piece))
    pairs = _range_pieces(lake, sources, writing.gather)
    tables = list(read_files(lake, [meta for meta, _ in pairs]))
    if not tables:
        raise RouteError(f"release shard {piece}: none of its {expected} documents was routed")
    rows = pa.concat_tables(tables)
    sizes = [
        _piece_sizes(table, tokens, writing.itemsize, writing.gather)
        for table, (_, tokens) in zip(tables, pairs, strict=True)
    ]
    positions = rows.column("position").to_numpy() - first
    order = np.argsort(positions, kind="stable")
    _check_positions(positions[order], expected, piece)
    documents = _Documents(
        np.repeat(np.arange(len(tables)), [table.num_rows for table in tables])[order],
        np.concatenate([np.cumsum(size) - size for size in sizes])[order],
        np.concatenate(sizes)[order],
    )
    del tables, sizes  # the unsorted rows go once sorted: not held beside the windows
    if np.any(order[1:] < order[:-1]):  # rows from a single spill chunk come in order
        rows = rows.take(pa.array(order))
    draws = split_draws(rows.column("text_hash").to_numpy(), settings.split_seed)
    held_out = draws < settings.validation
    lengths = rows.column("length").to_numpy()
    split_of = {"train": ~held_out, "valid": held_out}
    keys = {
        "train": f"{plan.prefix}/{shard_name('train', name, number)}",
        "valid": f"{plan.prefix}/_valid/{name}-{number:05d}",
    }
    counted = {split: {"crawls": Counter(), "languages": Counter()} for split in SPLITS}
    dtype = np.dtype(plan.dtype).newbyteorder("<")
    with ExitStack() as stack:
        datasets = {
            split: _SplitDataset(lake, keys[split], dtype, lengths[keep], stack)
            for split, keep in split_of.items()
        }
        # the sidecars (Arrow and Parquet, which release the GIL) are written beside the tokens
        with _Behind("release-sidecars") as sidecars:
            sidecars.submit(_write_sidecars, rows, split_of, datasets, counted)
            files = [datasets[split].tokens for split in SPLITS]
            if writing.gather:
                check_inputs(lake, plan, set(group.files.units))  # the files it reads are theirs
                _gather_tokens(lake, rows, documents.size, held_out, files)
            else:
                _copy_tokens(lake, [tokens for _, tokens in pairs], documents, held_out, files)
        outputs = {split: datasets[split].close() for split in SPLITS}
    summary = {
        "piece": piece,
        "train": {"name": keys["train"].rsplit("/", 1)[1], **datasets["train"].counts()},
        "valid": datasets["valid"].counts(),
        "outputs": outputs["train"],
        # what an empty split's warning names the share from (`split_warnings`)
        "draws": {"lowest": float(draws.min()), "highest": float(draws.max())},
    }
    for split in SPLITS:
        summary[split] |= counted[split]
    lake.write_json(key, summary)
    return summary


def _write_sidecars(rows: pa.Table, split_of: dict, datasets: dict, counted: dict) -> None:
    """The shard's provenance rows (in position order) to their splits' sidecars, counted by
    crawl and language."""
    for start in range(0, rows.num_rows, ROWS_PER_GROUP):
        chunk = rows.slice(start, ROWS_PER_GROUP)
        for split, keep in split_of.items():
            part = chunk.filter(pa.array(keep[start : start + ROWS_PER_GROUP]))
            datasets[split].add_rows(part)
            counted[split]["crawls"].update(_counts(part.column("crawl")))
            languages = part.column("language").fill_null("unknown")
            counted[split]["languages"].update(_counts(languages))


def _counts(values: pa.ChunkedArray) -> dict:
    counts = pc.value_counts(values)
    values, numbers = counts.field("values").to_pylist(), counts.field("counts").to_pylist()
    return dict(zip(values, numbers, strict=True))


@dataclass
class _Documents:
    """A shard's documents in position order: the routed piece holding each one's tokens,
    their offset there and their size in bytes."""

    piece: np.ndarray
    at: np.ndarray
    size: np.ndarray


def _copy_tokens(lake: Lake, pieces: list, documents: _Documents, target, files) -> None:
    """Each document's tokens, in position order, appended to its split's file (``target``:
    0 train, 1 valid), a window of about ``WINDOW_BYTES`` at a time. A piece's documents are
    in position order, so a window's documents in a piece are one run of its bytes: the runs
    are read, one after the other, into a buffer that then holds the window's documents by
    piece, and copied out from there in position order."""
    ends = np.cumsum(documents.size)
    capacity = min(int(ends[-1]), WINDOW_BYTES + int(documents.size.max()))
    buffers = [_pool.take(capacity), _pool.take(capacity)]
    source, out = map(memoryview, buffers)
    window = np.frombuffer(buffers[1], np.uint8)
    start = 0
    while start < len(ends):
        stop = int(np.searchsorted(ends, ends[start] - documents.size[start] + WINDOW_BYTES))
        stop = max(stop, start + 1)
        piece, size = documents.piece[start:stop], documents.size[start:stop]
        by_piece = np.argsort(piece, kind="stable")
        held = np.empty(stop - start, np.int64)  # where each document is in ``source``
        held[by_piece] = np.cumsum(size[by_piece]) - size[by_piece]
        used, first = np.unique(piece[by_piece], return_index=True)
        run_start = documents.at[start:stop][by_piece[first]]  # in each used piece
        shift = np.zeros(len(pieces), np.int64)
        shift[used] = run_start - held[by_piece[first]]
        wrong = np.flatnonzero(documents.at[start:stop] != held + shift[piece])
        if len(wrong):
            raise RouteError(
                f"routed tokens {pieces[piece[wrong[0]]][0]} are not in position order"
            )
        lengths = np.add.reduceat(size[by_piece], first)
        reads = [
            (pieces[j][0], pieces[j][1] + int(at), int(length))
            for j, at, length in zip(used.tolist(), run_start, lengths, strict=True)
        ]
        read_raw_into(lake, reads, source)
        for split, file in enumerate(files):
            chosen = np.flatnonzero(target[start:stop] == split)
            lengths = size[chosen]
            copy_spans(window, buffers[0], held[chosen], lengths, np.cumsum(lengths) - lengths)
            if filled := int(lengths.sum()):
                file.write(out[:filled])
        start = stop
    del source, out, window
    _pool.give(buffers)


def _gather_tokens(lake: Lake, rows: pa.Table, sizes, target, files) -> None:
    """Each document's tokens (``rows`` in position order, ``sizes`` in bytes) read from its
    input file and appended to its split's file (``target``: 0 train, 1 valid), a window of
    about ``GATHER_WINDOW_BYTES`` at a time: the window's documents are read file by file,
    front to back, into their places in the window (its train documents, then its validation
    ones) while a thread writes the window before it."""
    sources = rows.column("source").combine_chunks().dictionary_encode()
    names, codes = sources.dictionary.to_pylist(), sources.indices.to_numpy()
    offsets = rows.column("token_offset").to_numpy()
    ends = np.cumsum(sizes)
    capacity = min(int(ends[-1]), GATHER_WINDOW_BYTES + int(sizes.max()))
    buffer = _pool.take(2 * capacity)
    halves = [memoryview(buffer)[:capacity], memoryview(buffer)[capacity : 2 * capacity]]
    start = 0
    with _InputFiles(lake) as inputs, _Behind("release-writes") as writes:
        while start < len(ends):
            out = halves[0]
            halves.reverse()  # the next window fills the other half while this one is written
            window = np.frombuffer(out, np.uint8)
            stop = int(np.searchsorted(ends, ends[start] - sizes[start] + GATHER_WINDOW_BYTES))
            stop = max(stop, start + 1)
            size, split = sizes[start:stop], np.asarray(target[start:stop], np.int8)
            by_split = np.argsort(split, kind="stable")
            place = np.empty(stop - start, np.int64)
            place[by_split] = np.cumsum(size[by_split]) - size[by_split]
            code, offset = codes[start:stop], offsets[start:stop]
            by_file = np.lexsort((offset, code))
            by_file = by_file[size[by_file] > 0]
            runs = np.flatnonzero(np.diff(code[by_file], prepend=-1, append=-1))
            for first, last in zip(runs[:-1].tolist(), runs[1:].tolist(), strict=True):
                chosen = by_file[first:last]
                source = names[code[chosen[0]]]
                inputs.copy(source, offset[chosen], size[chosen], place[chosen], window)
            train = int(size[split == 0].sum())
            spans = [(0, train), (train, int(size.sum()))]
            chosen = [(files[n], out[a:b]) for n, (a, b) in enumerate(spans) if b > a]
            writes.submit(_write_window, chosen)
            start = stop
    del out, window, halves, chosen
    _pool.give([buffer])


class _Behind:
    """Work done by a thread, one piece at a time, while the caller prepares the next: what a
    piece was given is the caller's again once the next is submitted (or ``wait`` returns).
    A shard copies its next window from the input files while the last one is written
    and hashed, and its sidecars beside; a route task reads its next input files while the
    last ones' rows are sorted and spilled."""

    def __init__(self, name: str):
        self.thread = ThreadPoolExecutor(1, thread_name_prefix=name)
        self.pending: Future | None = None

    def submit(self, function, *arguments) -> None:
        self.wait()
        self.pending = self.thread.submit(function, *arguments)

    def wait(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        try:
            self.wait()  # what a failed caller gave is not freed under the thread's work
        finally:
            self.thread.shutdown()

    def __enter__(self) -> _Behind:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _write_window(writes: list) -> None:
    for file, data in writes:
        file.write(data)


class _MappedInputs:
    """Read-only maps of the input files that shards gather from, kept per process (up to
    ``GATHER_CACHED_BYTES`` of files, ``OPEN_INPUTS`` maps) from shard to shard, as the buffers
    are: a shard draws a few documents from every page of every input, and a map touched by an
    earlier shard costs no page fault, no read call per document. A shard asks for each file it
    reads once (``mapped``), and gets the map again only while the file is the one mapped (the
    same inode, size and time); a file replaced since is mapped anew. The lake's files are
    replaced by renames, never rewritten in place: a map still holds the file it was made of."""

    def __init__(self):
        self.maps: OrderedDict[str, tuple[tuple, mmap.mmap]] = OrderedDict()
        self.bytes = 0

    def mapped(self, lake: Lake, key: str) -> mmap.mmap:
        path = lake.path(key)
        try:
            descriptor = os.open(path, os.O_RDONLY)
        except FileNotFoundError as error:
            raise MissingInputError(
                f"{lake.uri(key)} is gone since this release routed its documents: "
                "rematerialize tokenized_shards and re-run the stage"
            ) from error
        try:
            found = os.fstat(descriptor)
            identity = (path, found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
            if key in self.maps and self.maps[key][0] == identity:
                self.maps.move_to_end(key)
                return self.maps[key][1]
            self._forget(key)
            while self.maps and (
                len(self.maps) >= OPEN_INPUTS or self.bytes + found.st_size > GATHER_CACHED_BYTES
            ):
                self._forget(next(iter(self.maps)))
            mapped = (
                mmap.mmap(descriptor, found.st_size, prot=mmap.PROT_READ) if found.st_size else b""
            )
        finally:
            os.close(descriptor)  # the map keeps the file
        self.maps[key] = identity, mapped
        self.bytes += len(mapped)
        return mapped

    def _forget(self, key: str) -> None:
        # not closed: a shard may still read it (it is unmapped when nothing holds it)
        if key in self.maps:
            self.bytes -= len(self.maps.pop(key)[1])

    def clear(self) -> None:
        while self.maps:
            self._forget(next(iter(self.maps)))


_inputs = _MappedInputs()


class _InputFiles:
    """The input files one shard gathers from: each checked and mapped (``_MappedInputs``) the
    first time the shard reads it; a file's documents in a window copied from its map in one
    call of compiled code (`tokenmill.storage.spans`)."""

    def __init__(self, lake: Lake):
        self.lake = lake
        self.maps: dict[str, mmap.mmap] = {}

    def __enter__(self) -> _InputFiles:
        return self

    def __exit__(self, *exc) -> None:
        self.maps.clear()

    def copy(self, source: str, offsets, sizes, places, out: np.ndarray) -> None:
        """Documents' tokens, ``sizes[i]`` bytes at ``offsets[i]`` of ``source``'s tokens.bin
        (``offsets`` ascending), to ``places[i]`` of ``out``."""
        key = f"{source}/tokens.bin"
        if key not in self.maps:
            self.maps[key] = _inputs.mapped(self.lake, key)
        mapped = self.maps[key]
        if int((offsets + sizes).max()) > len(mapped):
            raise MissingInputError(
                f"{self.lake.uri(key)} is shorter ({len(mapped)} bytes) than its documents routed "
                "to this release say: rematerialize tokenized_shards and re-run the stage"
            )
        copy_spans(out, mapped, offsets, sizes, places)


def _check_positions(positions: np.ndarray, expected: int, piece: str) -> None:
    if len(positions) == expected and np.array_equal(positions, np.arange(expected)):
        return
    if len(positions) > expected or (len(positions) and np.any(np.diff(positions) == 0)):
        raise RouteError(f"release shard {piece}: a document was routed to it twice")
    raise RouteError(
        f"release shard {piece}: {expected - len(positions)} of its {expected} documents "
        "were not routed to it"
    )


def release_job(writing: Writing):
    """The phases of writing the release's train shards (``tokenmill.runtime.phases``): the routing,
    a second routing when there are many shards, the shards."""
    lake, prefix = writing.lake, writing.prefix

    def routing(level: str, tasks, run) -> Phase:
        done = functools.partial(is_done, lake, writing.level(level)[0])
        return Phase(
            level,
            tuple(tasks),
            functools.partial(run, writing),
            done,
            Claims(lake, f"{prefix}/_claims/{level}"),
        )

    yield routing(ROUTE, writing.routes(), route_task)
    levels = [ROUTE]
    if writing.splits():
        yield routing(SPLIT, writing.splits(), split_task)
        levels.append(SPLIT)
        for spent in writing.level(ROUTE):
            clear_data(lake, spent)
    yield Phase(
        "shards",
        tuple(_task_name(piece) for piece in writing.plan().pieces()),
        functools.partial(_write_named, writing),
        functools.partial(_shard_done, writing),
        Claims(lake, f"{prefix}/_claims/shards"),
    )
    for spent in writing.level(levels[-1]):
        clear_data(lake, spent)


def _task_name(piece: str) -> str:
    return piece.replace("/", "-")


def _piece(task: str) -> str:
    group, number = task.rsplit("-", 1)
    return f"{group}/{int(number)}"


def _write_named(writing: Writing, task: str) -> dict:
    return write_shard(writing, _piece(task))


def _shard_done(writing: Writing, task: str) -> bool:
    return writing.lake.exists(done_key(writing.plan(), _piece(task)))


def write_release(
    lake: Lake,
    plan: Plan,
    settings: ReleaseSettings,
    workers: int = 1,
    step: int = 0,
    steps: int = 1,
    documents: int = ROUTE_DOCUMENTS,
    direct: int = DIRECT_SHARDS,
    gather: bool | None = None,
) -> dict:
    """Every train shard of ``plan`` committed, as step ``step`` of ``steps``, in ``workers``
    processes (this one when 1); the shards gather their tokens from the input files or read
    them routed (``gather``; None: as ``gathers`` chooses)."""
    _plans.clear()
    _plans[plan.version] = plan
    _inputs.clear()  # another release's, or this one's of an earlier try
    gather = gathers(lake, plan) if gather is None else gather
    writing = Writing(lake, settings, plan.version, documents, direct, gather)
    workers = min(workers, worth_a_process(plan))
    return run_job(functools.partial(release_job, writing), workers, step, steps, workers <= 1)


def worth_a_process(plan: Plan) -> int:
    """How many worker processes the release's tokens are worth: a worker's start-up (its
    imports) costs more than writing a small release in this process."""
    tokens = sum(group.files.tokens for group in plan.groups.values())
    return max(1, -(-tokens * np.dtype(plan.dtype).itemsize // BYTES_PER_WORKER))
