"""Writing a release's shards as an external shuffle (``tokenmill.spill``, ``tokenmill.phases``):
every input byte is read once, every token written twice (three times with many shards),
whatever the corpus's size.

A global shuffle puts, in each shard, about one document of every input file: at corpus scale a
shard of 10^6 documents draws from ~930,000 of 9,000,000 files, and a shard writer reading its
documents from the inputs would make ~3 ranged reads per document (index, sidecar row group,
tokens), reading each input file once per shard. Instead:

1. route: a task reads a run of input files whole, in order (index, sidecar, tokens), finds each
   document's position in its group's shuffled order (the permutation's inverse) and so its
   shard, and routes it there: its provenance row to ``route-meta`` and its tokens (uncompressed,
   they do not compress) to ``route-tokens``, a range per shard.
2. split (above ``DIRECT_SHARDS`` shards): route sends each document to a range of ~sqrt(shards)
   shards instead, and a split task sends one such range of a run of route tasks on to each
   shard: a shard then reads ~sqrt(shards) times fewer, larger pieces.
3. shards: a task per train shard reads its range's provenance rows (~300 bytes a document),
   sorts them by position, splits train from validation by the text's hash, and so knows where
   each document's tokens go; then it streams its range's tokens, writing each document at its
   offset in the train or validation ``.bin`` (a local temporary file; ``lake.writing``), and
   writes the index and sidecar. The bytes are the same as writing the documents in order.

Steps share every phase through the lake (claims, markers); a killed step resumes from the
committed tasks. Every position of a shard must arrive exactly once: a shard that misses or
repeats one fails naming it.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.lake import Lake
from tokenmill.layout import RELEASE, TOKENIZED_SHARDS, Unit
from tokenmill.megatron import IndexedDataset, write_index
from tokenmill.outputs import HashingFile, MissingInputError, ParquetSink, require_committed
from tokenmill.permutation import Permutation
from tokenmill.phases import Claims, Phase, PlanChangedError, run_job
from tokenmill.release import (
    COPIED_FIELDS,
    RELEASE_SIDECAR,
    SPLITS,
    Plan,
    ReleaseError,
    ReleaseSettings,
    done_key,
    is_valid,
    plan_release,
    shard_name,
    unit_digest,
)
from tokenmill.spill import Source, SpillWriter, clear_data, is_done, read_sources

ROUTE_DOCUMENTS = 1_000_000  # documents a route task reads, about (a task per input file at least)
TOKEN_CHUNK_BYTES = 256 << 20  # tokens a route task holds before writing them out
META_CHUNK_BYTES = 64 << 20
ROWS_PER_GROUP = 1 << 16  # sidecar rows per row group, by position
ROUTE, SPLIT = "route", "split"  # the two levels of routing (the second for many shards)
DIRECT_SHARDS = 256  # up to this many shards, documents are routed to their shard at once
HASH_BLOCK = 16 << 20
PLAN_FILE = "plan.npz"


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
        return f"{RELEASE}/{self.version}/_work/{self.documents}-{self.direct}"

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


def shards_per_range(shards: int, direct: int = DIRECT_SHARDS) -> int:
    return 1 if shards <= direct else math.isqrt(shards - 1) + 1


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


def _read_input(lake: Lake, source: str, documents: int):
    """An input file's sidecar rows, token lengths and tokens, checked against its marker."""
    with lake.open_input(f"{source}/provenance.parquet") as f:
        rows = pq.read_table(f)
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
    sizes = index.lengths.astype(np.int64) * index.dtype.itemsize
    data = lake.read_bytes(f"{source}/tokens.bin")
    offsets = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if not np.array_equal(index.pointers, offsets[:-1]) or offsets[-1] > len(data):
        data = b"".join(data[p : p + s] for p, s in zip(index.pointers, sizes, strict=True))
    tokens = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(sizes), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    return rows, index.lengths.astype(np.int64), tokens


def _writers(writing: Writing, level: str, task: str, ranges: int):
    meta, tokens = writing.level(level)
    return (
        SpillWriter(writing.lake, meta, task, ranges, META_CHUNK_BYTES),
        SpillWriter(writing.lake, tokens, task, ranges, TOKEN_CHUNK_BYTES, False, None),
    )


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
    meta, tokens = _writers(writing, ROUTE, task, -(-shards // per_bucket))
    routed = 0
    for file in range(first, last):
        source = group.files.source(file)
        rows, lengths, data = _read_input(writing.lake, source, group.files.documents[file])
        positions = shuffle.position_of(starts[file] + np.arange(len(lengths)))
        shard = positions // group.per_shard + first_shard
        position = pa.array(positions, pa.int64())
        spans = pc.subtract(rows.column("token_end"), rows.column("token_start"))
        meta.add(
            rows.select([f.name for f in COPIED_FIELDS])
            .append_column("source", pa.array([source] * len(lengths), pa.string()))
            .append_column("source_doc_index", pa.array(np.arange(len(lengths)), pa.int64()))
            .append_column("text_tokens", spans.cast(pa.int64()))
            .append_column("length", pa.array(lengths, pa.int64()))
            .append_column("position", position)
            .append_column("shard", pa.array(shard, pa.int64())),
            shard // per_bucket,
        )
        table = pa.table({"position": position, "tokens": data, "shard": shard})
        tokens.add(table, shard // per_bucket)
        routed += len(lengths)
    tokens.commit({"documents": routed})
    return meta.commit({"documents": routed, "files": last - first})  # the task's marker


def split_task(writing: Writing, task: str) -> dict:
    """The second routing: one range of the first, from a run of route tasks, to its shards."""
    bucket, first, last = writing.split(task)
    routes = tuple(writing.routes())[first:last]
    base = bucket * writing.per_bucket
    meta, tokens = _writers(writing, SPLIT, task, writing.per_bucket)
    meta_prefix, tokens_prefix = writing.level(ROUTE)
    routed = 0
    for table in read_sources(writing.lake, [(meta_prefix, routes)], bucket):
        meta.add(table, table.column("shard").to_numpy() - base)
        routed += table.num_rows
    for table in read_sources(writing.lake, [(tokens_prefix, routes)], bucket):
        tokens.add(table, table.column("shard").to_numpy() - base)
    tokens.commit({"documents": routed})
    return meta.commit({"documents": routed})


class _PlacedDataset:
    """A split of a shard whose documents' sizes are known before their tokens arrive: the
    tokens are written at their offsets as they come (``files[".bin"]``), the sidecar in
    order; each file is committed when the caller's block ends without an error."""

    def __init__(self, lake: Lake, key: str, dtype: np.dtype, lengths: np.ndarray, stack):
        self.key, self.dtype, self.lengths = key, dtype, lengths
        sizes = lengths * dtype.itemsize
        self.offsets = np.zeros(len(lengths), np.int64)
        np.cumsum(sizes[:-1], out=self.offsets[1:])
        self.size = int(sizes.sum())
        self.files = {
            suffix: stack.enter_context(lake.writing(key + suffix))
            for suffix in (".bin", ".idx", ".provenance.parquet")
        }
        self.files[".bin"].truncate(self.size)
        self.hashed = {s: HashingFile(self.files[s]) for s in (".idx", ".provenance.parquet")}
        self.sidecar = ParquetSink(self.hashed[".provenance.parquet"], RELEASE_SIDECAR)
        self.rows = 0

    def add_rows(self, rows: pa.Table) -> None:
        """The next documents' provenance rows, in order."""
        spans = rows.column("text_tokens").to_numpy()
        numbers = np.arange(self.rows, self.rows + rows.num_rows)
        starts = self.offsets[numbers] // self.dtype.itemsize
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
        write_index(self.hashed[".idx"], self.lengths, self.dtype)
        name = self.key.rsplit("/", 1)[1]
        outputs = {name + ".bin": {"bytes": self.size, "sha256": _sha256(self.files[".bin"])}}
        for suffix, file in self.hashed.items():
            outputs[name + suffix] = {"bytes": file.size, "sha256": file.sha256.hexdigest()}
        return outputs

    def counts(self) -> dict:
        return {"documents": len(self.lengths), "tokens": int(self.lengths.sum())}


def _sha256(written) -> str:
    """The SHA-256 of a file written in place (read back: from the page cache)."""
    written.flush()
    digest = hashlib.sha256()
    with open(written.name, "rb") as f:
        while block := f.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def write_shard(writing: Writing, piece: str) -> dict:
    """Train shard ``piece`` (``<group>/<k>``) and the validation documents met there, from
    the routed rows of its range; committed by its done file."""
    lake, plan, settings = writing.lake, writing.plan(), writing.settings
    key = done_key(plan, piece)
    if lake.exists(key):
        return lake.read_json(key)
    name, number = piece.split("/")
    group, number = plan.groups[name], int(number)
    index = plan.pieces().index(piece)
    first = number * group.per_shard
    expected = min(first + group.per_shard, group.documents) - first
    meta_sources, token_sources, at = writing.shard_sources(index)
    tables = list(read_sources(lake, meta_sources, at))
    if not tables:
        raise RouteError(f"release shard {piece}: none of its {expected} documents was routed")
    rows = pa.concat_tables(tables)
    positions = rows.column("position").to_numpy() - first
    order = np.argsort(positions, kind="stable")
    _check_positions(positions[order], expected, piece)
    rows = rows.take(pa.array(order))
    hashes = rows.column("text_hash").to_numpy()
    held_out = is_valid(hashes, settings.validation, settings.split_seed)
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
            split: _PlacedDataset(lake, keys[split], dtype, lengths[keep], stack)
            for split, keep in split_of.items()
        }
        for start in range(0, expected, ROWS_PER_GROUP):
            chunk = rows.slice(start, ROWS_PER_GROUP)
            for split, keep in split_of.items():
                part = chunk.filter(pa.array(keep[start : start + ROWS_PER_GROUP]))
                datasets[split].add_rows(part)
                counted[split]["crawls"].update(part.column("crawl").to_pylist())
                languages = part.column("language").fill_null("unknown")
                counted[split]["languages"].update(languages.to_pylist())
        offsets = np.zeros(expected, np.int64)  # of each position's tokens in its split's file
        for split, keep in split_of.items():
            offsets[keep] = datasets[split].offsets
        files = [datasets[split].files[".bin"] for split in SPLITS]
        targets = held_out.astype(np.int64)
        _place_tokens(lake, token_sources, at, first, targets, offsets, files, piece)
        outputs = {split: datasets[split].close() for split in SPLITS}
    summary = {
        "piece": piece,
        "train": {"name": keys["train"].rsplit("/", 1)[1], **datasets["train"].counts()},
        "valid": datasets["valid"].counts(),
        "outputs": outputs["train"],
    }
    for split in SPLITS:
        summary[split] |= counted[split]
    lake.write_json(key, summary)
    return summary


def _place_tokens(
    lake: Lake, sources: list[Source], index: int, first: int, target, offsets, files, piece: str
) -> None:
    """Each routed document's tokens written at its offset in its split's file (``target``:
    0 train, 1 valid, by position)."""
    descriptors = [f.fileno() for f in files]
    seen = np.zeros(len(offsets), bool)
    for table in read_sources(lake, sources, index):
        at = table.column("position").to_numpy() - first
        if at.size and (at.min() < 0 or at.max() >= len(seen) or seen[at].any()):
            raise RouteError(f"release shard {piece}: tokens routed twice or out of its range")
        seen[at] = True
        tokens = table.column("tokens").combine_chunks()
        bounds = np.frombuffer(tokens.buffers()[1], np.int64, len(tokens) + 1, 8 * tokens.offset)
        data = memoryview(tokens.buffers()[2])
        places = zip(
            target[at].tolist(),
            offsets[at].tolist(),
            bounds[:-1].tolist(),
            bounds[1:].tolist(),
            strict=True,
        )
        for file, offset, begin, end in places:
            os.pwrite(descriptors[file], data[begin:end], offset)
    if not seen.all():
        missing = int(np.flatnonzero(~seen)[0]) + first
        raise RouteError(f"release shard {piece}: no tokens were routed for position {missing}")


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
    """The phases of writing the release's train shards (``tokenmill.phases``): the routing,
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
) -> dict:
    """Every train shard of ``plan`` committed, as step ``step`` of ``steps``, in ``workers``
    processes (this one when 1)."""
    _plans.clear()
    _plans[plan.version] = plan
    writing = Writing(lake, settings, plan.version, documents, direct)
    return run_job(functools.partial(release_job, writing), workers, step, steps, workers <= 1)
