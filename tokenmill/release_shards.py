"""Writing a release's shards as an external shuffle (``tokenmill.spill``, ``tokenmill.phases``):
every input byte is read once and written twice, whatever the corpus's size.

A global shuffle puts, in each shard, about one document of every input file: at corpus scale a
shard of 10^6 documents draws from ~930,000 of 9,000,000 files, and a shard writer reading its
documents from the inputs would make ~3 ranged reads per document (index, sidecar row group,
tokens), reading each input file once per shard. Instead two phases:

1. route: a task reads a run of input files whole, in order (index, sidecar, tokens), finds each
   document's position in its group's shuffled order (the permutation's inverse) and so its
   shard, and routes it there: its provenance row to ``route-meta`` and its tokens (uncompressed,
   they do not compress) to ``route-tokens``, each a range per shard.
2. shards: a task per train shard reads its range's provenance rows (~300 bytes a document),
   sorts them by position, splits train from validation by the text's hash, and so knows where
   each document's tokens go; then it streams its range's tokens, writing each document at its
   offset in the train or validation ``.bin`` (a local temporary file; ``lake.writing``), and
   writes the index and sidecar. The bytes are the same as writing the documents in order.

Steps share both phases through the lake (claims, markers); a killed step resumes from the
committed tasks. Every position of a shard must arrive exactly once: a shard that misses or
repeats one fails naming it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
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
META, TOKENS = "route-meta", "route-tokens"
HASH_BLOCK = 16 << 20
PLAN_FILE = "plan.pickle"


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

    def plan(self) -> Plan:
        """The plan the plan step stored (``store_plan``), else made again from the markers."""
        if self.version not in _plans:
            stored = f"{RELEASE}/{self.version}/_work/{PLAN_FILE}"
            if self.lake.exists(stored):
                plan = pickle.loads(self.lake.read_bytes(stored))
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
        return f"{RELEASE}/{self.version}/_work/{self.documents}"


_plans: dict[str, Plan] = {}  # per process: the plan of the version being written


def store_plan(lake: Lake, plan: Plan) -> None:
    """The plan where the steps and their workers load it from (one read of 16 bytes per input
    file) instead of reading every unit's marker again (90,000 at corpus scale)."""
    key = f"{plan.prefix}/_work/{PLAN_FILE}"
    if not lake.exists(key):
        lake.write_bytes(key, pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))


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


def route_task(writing: Writing, task: str) -> dict:
    """Routes every document of a run of input files to its shard."""
    plan = writing.plan()
    name, first, last = writing.routes()[task]
    group = plan.groups[name]
    check_inputs(
        writing.lake, plan, {group.files.units[group.files.unit_of[f]] for f in range(first, last)}
    )
    starts = group.files.starts()
    shuffle = Permutation(int(starts[-1]), group.seed)
    shards, first_range = len(plan.pieces()), _shard_numbers(plan)[name]
    meta = SpillWriter(writing.lake, f"{writing.prefix}/{META}", task, shards, META_CHUNK_BYTES)
    tokens = SpillWriter(
        writing.lake, f"{writing.prefix}/{TOKENS}", task, shards, TOKEN_CHUNK_BYTES, False, None
    )
    routed = 0
    for file in range(first, last):
        source = group.files.source(file)
        rows, lengths, data = _read_input(writing.lake, source, group.files.documents[file])
        positions = shuffle.position_of(starts[file] + np.arange(len(lengths)))
        ranges = positions // group.per_shard + first_range
        position = pa.array(positions, pa.int64())
        spans = pc.subtract(rows.column("token_end"), rows.column("token_start"))
        meta.add(
            rows.select([f.name for f in COPIED_FIELDS])
            .append_column("source", pa.array([source] * len(lengths), pa.string()))
            .append_column("source_doc_index", pa.array(np.arange(len(lengths)), pa.int64()))
            .append_column("text_tokens", spans.cast(pa.int64()))
            .append_column("length", pa.array(lengths, pa.int64()))
            .append_column("position", position),
            ranges,
        )
        tokens.add(pa.table({"position": position, "tokens": data}), ranges)
        routed += len(lengths)
    tokens.commit({"documents": routed})
    return meta.commit({"documents": routed, "files": last - first})  # the task's marker


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
    routes = tuple(writing.routes())
    tables = list(read_sources(lake, [(f"{writing.prefix}/{META}", routes)], index))
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
        tokens = (f"{writing.prefix}/{TOKENS}", routes)
        _place_tokens(lake, tokens, index, first, held_out.astype(np.int64), offsets, files, piece)
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
    lake: Lake, source: Source, index: int, first: int, target, offsets, files, piece: str
) -> None:
    """Each routed document's tokens written at its offset in its split's file (``target``:
    0 train, 1 valid, by position)."""
    descriptors = [f.fileno() for f in files]
    seen = np.zeros(len(offsets), bool)
    for table in read_sources(lake, [source], index):
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
    """The phases of writing the release's train shards (``tokenmill.phases``)."""
    lake, prefix = writing.lake, writing.prefix
    yield Phase(
        "route",
        tuple(writing.routes()),
        functools.partial(route_task, writing),
        functools.partial(is_done, lake, f"{prefix}/{META}"),
        Claims(lake, f"{prefix}/_claims/route"),
    )
    yield Phase(
        "shards",
        tuple(_task_name(piece) for piece in writing.plan().pieces()),
        functools.partial(_write_named, writing),
        functools.partial(_shard_done, writing),
        Claims(lake, f"{prefix}/_claims/shards"),
    )
    for phase in (META, TOKENS):
        clear_data(lake, f"{prefix}/{phase}")


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
) -> dict:
    """Every train shard of ``plan`` committed, as step ``step`` of ``steps``, in ``workers``
    processes (this one when 1)."""
    _plans.clear()
    _plans[plan.version] = plan
    writing = Writing(lake, settings, plan.version, documents)
    return run_job(functools.partial(release_job, writing), workers, step, steps, workers <= 1)
