"""The clusters step of dedup in parts of bounded memory, each an independent task.

Document i of a crawl is row i of its signature files taken in (unit, file) order, as in every
dedup step. A key column (the exact hash, each LSH band) links the documents sharing a value. A part
is one key column restricted to one range of key values (their top bits), so documents sharing
a key always meet in the same part and each part finds its groups alone: ``run_part`` reads its
column of every signature file one row group at a time, keeps the keys in its range, and
commits the edges linking each group's documents to the group's first document to one Parquet
file. ``union`` then reads only these edge files: its memory grows with the linked documents,
not with the crawl. ``cluster_crawl`` drives it all and writes the stage's removed list. A part
holds at most the keys its memory allows however skewed they are (``PartGroups``). The parts are
independent tasks: worker processes of one step (``run_parts``), or shares of them in parallel
steps planned by ``prepare_parts`` (the stage's ``FanOut``, pods on Kubernetes).

Parts re-read their column once per range instead of first scattering every key to range files
(datatrove's way): the signature files are columnar, so a part reads 8 bytes per document, and
under the default 4 GiB a column is one range up to ~60M documents and two up to ~120M; a
scatter step would pay off only from a few ranges on, i.e. beyond a few hundred million.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.clusters import bucket_edges, choose_survivors, edge_components, sorted_unique
from tokenmill.lake import Lake
from tokenmill.layout import (
    CLUSTER_SCHEMA,
    DEDUP_SIGNATURES,
    QUALITY_COLUMN,
    Unit,
    band_column,
    crawl_prefix,
    part_name,
)
from tokenmill.outputs import PartitionWriter, StageReport, require_committed
from tokenmill.worker_errors import WorkerDiedError

PARTS = "_dedup_clusters_parts"  # work prefix: <PARTS>/<crawl>/<fingerprint>/<part>.parquet
FORMAT = 1  # of the part files; part of the fingerprint
# A part holds, per key in its range, the key and its document index (16 bytes), twice while
# the row-group chunks are joined; grouping then needs an index, a sorted copy and masks (see
# ``bucket_edges``): a worker peaked at 843 MiB for 10M keys. BASE_BYTES covers the
# interpreter, pyarrow and one row group.
BYTES_PER_KEY = 64
BASE_BYTES = 384 << 20
READ_ROWS = 1 << 20
EDGE_SCHEMA = pa.schema([("first", pa.int64()), ("doc", pa.int64())])
PART_METADATA = b"tokenmill.clusters.part"
EDGE_BATCH = 4 << 20  # edges the union links at once
OUTPUT_ROWS = 1 << 18  # removed documents written at once
IN_PROCESS_DOCS = 100_000  # a crawl this small is clustered without worker processes
RANK_COLUMNS = {  # survivor rule -> (column, descending); lower rank survives
    "earliest_date": ("warc_date", False),
    "lowest_doc_id": ("doc_id", False),
    "highest_quality": (QUALITY_COLUMN, True),
}


class SignatureFileError(ValueError):
    """A signature file that is missing, truncated or not the one its marker describes."""


class PartFileError(ValueError):
    """A part file that is missing or does not belong to the run."""


@dataclass(frozen=True)
class SignatureFiles:
    """The committed signature files of a crawl in (unit, file) order, as their markers
    describe them: document i is row ``i - starts[f]`` of file f."""

    keys: tuple[str, ...]
    rows: tuple[int, ...]
    sizes: tuple[int, ...]
    digests: tuple[str, ...]
    units: tuple[str, ...]
    parts: tuple[int, ...]
    params: dict = field(default_factory=dict)

    @property
    def columns(self) -> tuple[str, ...]:
        """The key columns: the exact-content hash, then every LSH band."""
        return ("exact_hash", *(band_column(b) for b in range(self.params.get("bands", 0))))

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum([0, *self.rows])

    @property
    def n_docs(self) -> int:
        return int(sum(self.rows))

    def fingerprint(self, ranges: int) -> str:
        """Names the parts of one clustering of exactly these files."""
        what = [FORMAT, ranges, self.columns, self.keys, self.rows, self.digests]
        return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:16]

    def _file_of(self, docs: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.starts, docs, side="right") - 1

    def unit_names(self, docs: np.ndarray) -> pa.Array:
        return pa.array(self.units, pa.string()).take(self._file_of(docs))

    def part_numbers(self, docs: np.ndarray) -> pa.Array:
        return pa.array(self.parts, pa.int32()).take(self._file_of(docs))


def crawl_signatures(lake: Lake, units: list[Unit]) -> SignatureFiles:
    """The signature files of a crawl's units; all must be signed with the same parameters."""
    keys, outputs, params, names, parts = [], [], [], [], []
    for unit in units:
        marker = require_committed(
            lake, unit.prefix(DEDUP_SIGNATURES), f"dedup_signatures of {unit}"
        )
        for part in range(marker["counts"]["files"]):
            name = f"{part_name(part)}/signatures.parquet"
            if name not in marker["outputs"]:
                raise SignatureFileError(
                    f"{lake.uri(unit.prefix(DEDUP_SIGNATURES))}: its marker lists no {name}; "
                    "rematerialize dedup_signatures for that unit"
                )
            keys.append(f"{unit.part_prefix(DEDUP_SIGNATURES, part)}/signatures.parquet")
            outputs.append(marker["outputs"][name])
            params.append(marker["counts"]["params"])
            names.append(unit.name)
            parts.append(part)
    for key, own in zip(keys, params, strict=True):
        if own != params[0]:
            raise ValueError(
                f"units of {units[0].crawl} have signatures with different parameters: "
                f"{lake.uri(key)} was signed with {own}, {lake.uri(keys[0])} with "
                f"{params[0]}; rematerialize dedup_signatures for the whole crawl"
            )
    return SignatureFiles(
        keys=tuple(keys),
        rows=tuple(o["rows"] for o in outputs),
        sizes=tuple(o["bytes"] for o in outputs),
        digests=tuple(o["sha256"] for o in outputs),
        units=tuple(names),
        parts=tuple(parts),
        params=params[0] if params else {},
    )


def check_files(lake: Lake, files: SignatureFiles) -> None:
    """Every signature file is there with the size its marker gives (before any work starts)."""
    for key, size in zip(files.keys, files.sizes, strict=True):
        check_file(lake, key, size)


def check_file(lake: Lake, key: str, size: int) -> None:
    if not lake.exists(key):
        raise SignatureFileError(f"signature file {lake.uri(key)} is missing")
    if lake.size(key) != size:
        raise SignatureFileError(
            f"signature file {lake.uri(key)} has {lake.size(key)} bytes, its marker says {size} "
            "(truncated or rewritten): rematerialize its signatures"
        )


def read_batches(
    lake: Lake, files: SignatureFiles, index: int, columns: list[str]
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(first row, batch) of one signature file, checked against its marker; a missing,
    truncated or unreadable file fails naming it."""
    key, uri = files.keys[index], lake.uri(files.keys[index])
    try:
        check_file(lake, key, files.sizes[index])
        with lake.open_input(key) as f:
            parquet = pq.ParquetFile(f)
            if parquet.metadata.num_rows != files.rows[index]:
                raise SignatureFileError(
                    f"signature file {uri} has {parquet.metadata.num_rows} rows, its marker "
                    f"says {files.rows[index]}"
                )
            row = 0
            for batch in parquet.iter_batches(batch_size=READ_ROWS, columns=columns):
                yield row, batch
                row += batch.num_rows
    except (pa.ArrowException, OSError) as error:
        raise SignatureFileError(f"signature file {uri} is unreadable: {error}") from error


@dataclass(frozen=True)
class Part:
    """The keys of ``column`` whose top bits are ``index`` out of ``ranges`` (a power of 2)."""

    column: str
    index: int = 0
    ranges: int = 1

    @property
    def name(self) -> str:
        return f"{self.column}.{self.index:05d}-of-{self.ranges:05d}"

    def selects(self, keys: np.ndarray) -> np.ndarray:
        if self.ranges == 1:
            return np.ones(len(keys), dtype=bool)
        shift = np.uint64(64 - self.ranges.bit_length() + 1)
        return (keys >> shift) == np.uint64(self.index)


def keys_for(memory_bytes: int) -> int:
    """Keys a part may hold at once within ``memory_bytes``."""
    return max(memory_bytes - BASE_BYTES, 1 << 20) // BYTES_PER_KEY


def ranges_for(n_docs: int, memory_bytes: int) -> int:
    """Key ranges per column such that a part's expected keys fit in ``memory_bytes``."""
    ranges = 1
    while n_docs / ranges > keys_for(memory_bytes):
        ranges *= 2
    return ranges


def plan_parts(files: SignatureFiles, memory_bytes: int, ranges: int | None = None) -> list[Part]:
    ranges = ranges or ranges_for(files.n_docs, memory_bytes)
    if ranges & (ranges - 1):
        raise ValueError(f"ranges must be a power of 2, not {ranges}")
    return [Part(column, index, ranges) for column in files.columns for index in range(ranges)]


def part_key(prefix: str, files: SignatureFiles, part: Part) -> str:
    return f"{prefix}/{files.fingerprint(part.ranges)}/{part.name}.parquet"


def run_part(
    lake: Lake, files: SignatureFiles, part: Part, out_key: str, max_keys: int | None = None
) -> dict:
    """One part as a task of its own (a process, a pod): reads the part's keys from every
    signature file, commits the edges of its groups to ``out_key`` atomically. It holds at most
    ``max_keys`` keys at once (see ``PartGroups``), however skewed the keys are."""
    started = time.perf_counter()
    groups = PartGroups(max_keys or np.iinfo(np.int64).max)
    fingerprint = files.fingerprint(part.ranges)
    with contextlib.ExitStack() as stack:
        f = stack.enter_context(lake.writing(out_key))
        # the part's report is known at the end only: the file's metadata is its footer's
        writer = stack.enter_context(
            pq.ParquetWriter(f, EDGE_SCHEMA, compression="zstd", use_dictionary=False)
        )

        def write(edges: tuple[np.ndarray, np.ndarray]) -> None:
            first, other = edges
            for i in range(0, len(first), READ_ROWS):
                table = pa.table(
                    {"first": first[i : i + READ_ROWS], "doc": other[i : i + READ_ROWS]}
                )
                writer.write_table(table.cast(EDGE_SCHEMA))

        for index, start in enumerate(files.starts[:-1].tolist()):
            for row, batch in read_batches(lake, files, index, [part.column]):
                values = batch.column(0).to_numpy()
                selected = np.flatnonzero(part.selects(values))
                for edges in groups.add(values[selected], selected + (start + row)):
                    write(edges)
        write(groups.finish())
        report = {"part": part.name} | groups.report()
        writer.add_key_value_metadata(
            {PART_METADATA: json.dumps(report | {"fingerprint": fingerprint})}
        )
    return report | {"seconds": round(time.perf_counter() - started, 3)}


class PartGroups:
    """The groups of one part's keys, fed in document order, in blocks of at most
    ``max_keys`` keys: the bound on a part's memory whatever the key distribution.

    A part's range is planned from the crawl's size, so it expects ``n_docs / ranges`` keys;
    keys shared by many documents (a boilerplate page copied a million times) crowd one range.
    While the part's keys fit, they are one block grouped at the end (``bucket_edges``). Once
    they do not, the block is grouped, its edges written, and only its distinct keys kept with
    their first document (16 bytes instead of a key's 64): keys of later blocks found among
    them are linked to that document, the others grouped as a block of their own. A key's
    copies then cost nothing, and distinct keys, being hashes, spread evenly over the ranges.
    The edges differ from one block's only in which member a group's later members link to
    (its first document either way), so the clusters are the same."""

    SEEN_COST = 4  # a kept key (key, first document) weighs a fourth of a block's key

    def __init__(self, max_keys: int):
        self.max_keys = max_keys
        self.keys: list[np.ndarray] = []
        self.docs: list[np.ndarray] = []
        self.held = 0
        self.seen_keys = np.empty(0, np.uint64)  # ascending
        self.seen_first = np.empty(0, np.int64)
        self.total = self.edges = self.blocks = self.peak = 0

    def add(self, keys: np.ndarray, docs: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        self.total += len(keys)
        while len(keys):
            # a block of at least an eighth of the bound: should the distinct keys alone outgrow
            # it (they cannot, unless the crawl grew after planning), blocks stay large
            take = self._room() if self.held else max(self._room(), self.max_keys // 8, 1)
            self.keys.append(keys[:take])
            self.docs.append(docs[:take])
            self.held += len(self.keys[-1])
            keys, docs = keys[take:], docs[take:]
            if self._room() <= 0:
                yield self._block(keep=True)

    def _room(self) -> int:
        return self.max_keys - self.held - len(self.seen_keys) // self.SEEN_COST

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        return self._block(keep=False)

    def report(self) -> dict:
        return {
            "keys": self.total,
            "edges": self.edges,
            "blocks": self.blocks,
            "peak_keys": self.peak,
        }

    def _block(self, keep: bool) -> tuple[np.ndarray, np.ndarray]:
        keys = np.concatenate(self.keys) if self.keys else np.empty(0, np.uint64)
        docs = np.concatenate(self.docs) if self.docs else np.empty(0, np.int64)
        self.keys, self.docs = [], []
        self.peak = max(self.peak, self.held + len(self.seen_keys) // self.SEEN_COST)
        self.held = 0
        self.blocks += 1
        known_first = known_docs = np.empty(0, np.int64)
        if len(self.seen_keys):
            at = np.minimum(np.searchsorted(self.seen_keys, keys), len(self.seen_keys) - 1)
            known = self.seen_keys[at] == keys
            known_first, known_docs = self.seen_first[at[known]], docs[known]
            keys, docs = keys[~known], docs[~known]
        first, other = bucket_edges(keys, docs)
        if keep:
            self._keep(keys, docs)
        first, other = np.concatenate([known_first, first]), np.concatenate([known_docs, other])
        self.edges += len(first)
        return first, other

    def _keep(self, keys: np.ndarray, docs: np.ndarray) -> None:
        """Add the block's new keys, each with its first document."""
        new = pl.DataFrame({"key": pl.Series(keys, dtype=pl.UInt64), "doc": docs})
        new = new.group_by("key").agg(pl.col("doc").min())
        kept = pl.concat([pl.DataFrame({"key": self.seen_keys, "doc": self.seen_first}), new])
        kept = kept.sort("key")
        self.seen_keys, self.seen_first = kept["key"].to_numpy(), kept["doc"].to_numpy()


def part_info(lake: Lake, key: str) -> dict | None:
    """What a committed part file says of itself; None if there is none."""
    if not lake.exists(key):
        return None
    with lake.open_input(key) as f:
        return json.loads(pq.read_metadata(f).metadata[PART_METADATA])


@dataclass
class PartsRun:
    keys: list[str]  # every part file of the run, in plan order
    ran: list[dict]  # reports of the parts computed now
    reused: list[str]  # parts already committed by an earlier run


def prepare_parts(
    lake: Lake, files: SignatureFiles, prefix: str, memory_bytes: int, ranges: int | None = None
) -> list[str]:
    """The keys of the clustering's part files under ``prefix``, in plan order. Run before any
    part: it deletes the parts of other inputs and what killed writers left."""
    parts = plan_parts(files, memory_bytes, ranges)
    fingerprint = files.fingerprint(parts[0].ranges)
    for stale in lake.list_dirs(prefix):
        if stale != fingerprint:
            lake.delete_prefix(f"{prefix}/{stale}")
    lake.remove_stray_temporaries(prefix)
    return [part_key(prefix, files, part) for part in parts]


def run_parts(
    lake: Lake,
    files: SignatureFiles,
    prefix: str,
    memory_bytes: int,
    workers: int = 1,
    ranges: int | None = None,
    max_keys: int | None = None,
    only: list[str] | None = None,
) -> PartsRun:
    """Every part not yet committed under ``prefix`` (or those of ``only``, keys planned by
    ``prepare_parts``), in ``workers`` processes: the memory a part took is given back before
    the union; a killed run resumes from the parts it committed. A crawl of fewer than
    ``IN_PROCESS_DOCS`` documents is clustered in this process: its parts are small, and
    starting workers would cost more than the parts."""
    keys = prepare_parts(lake, files, prefix, memory_bytes, ranges) if only is None else only
    parts = [planned_part(lake, files, key) for key in keys]
    committed = [part_info(lake, key) is not None for key in keys]
    todo = [(p, k) for p, k, done in zip(parts, keys, committed, strict=True) if not done]
    reused = [p.name for p, done in zip(parts, committed, strict=True) if done]
    run = PartsRun(keys, [], reused)
    max_keys = max_keys or keys_for(memory_bytes)
    if not todo:
        return run
    if files.n_docs < IN_PROCESS_DOCS:
        run.ran.extend(run_part(lake, files, p, k, max_keys) for p, k in todo)
        return run
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max(1, min(workers, len(todo))), mp_context=context) as pool:
        futures = [(p, k, pool.submit(run_part, lake, files, p, k, max_keys)) for p, k in todo]
        for part, key, future in futures:
            try:
                run.ran.append(future.result())
            except BrokenProcessPool as error:
                raise WorkerDiedError(
                    f"a worker process died computing part {part.name} ({lake.uri(key)}), "
                    "killed (a signal: the pod's memory limit, an operator) or crashed; a retry "
                    "resumes from the committed parts"
                ) from error
    return run


def planned_part(lake: Lake, files: SignatureFiles, key: str) -> Part:
    """The part a key of ``prepare_parts`` names, checked to belong to these signature files."""
    fingerprint, name = key.rsplit("/", 2)[-2:]
    column, _, numbers = name.removesuffix(".parquet").rpartition(".")
    index, _, ranges = numbers.partition("-of-")
    part = Part(column, int(index), int(ranges))
    if part_key(key.rsplit("/", 2)[0], files, part) != key:
        raise PartFileError(
            f"part {lake.uri(key)} was planned for other signature files than the crawl's "
            f"now (fingerprint {fingerprint}): re-run the clustering"
        )
    return part


def _edges(lake: Lake, files: SignatureFiles, keys: list[str]) -> Iterator[pa.Table]:
    for key in keys:
        info = part_info(lake, key)
        if info is None:
            raise PartFileError(f"part file {lake.uri(key)} is missing: re-run the clustering")
        if info["fingerprint"] != key.rsplit("/", 2)[-2]:
            raise PartFileError(f"part file {lake.uri(key)} belongs to another run")
        with lake.open_input(key) as f:
            yield pq.read_table(f)


def union(lake: Lake, files: SignatureFiles, part_keys: list[str]):
    """(docs, components): the linked documents, ascending, and the smallest document of
    each one's cluster, from the part files alone. Reads them twice: once to mark the linked
    documents (one byte per document of the crawl: sorting and merging the lists of linked
    documents took ~90 bytes per linked document), once to link them, in batches of EDGE_BATCH
    edges."""
    linked = np.zeros(files.n_docs, dtype=np.bool_)
    for table in _edges(lake, files, part_keys):
        for column in table.columns:
            linked[column.to_numpy()] = True
        del table
    docs = np.flatnonzero(linked).astype(np.int64, copy=False)
    del linked

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        held: list[pa.Table] = []
        for table in _edges(lake, files, part_keys):
            held.append(table)
            if sum(t.num_rows for t in held) >= EDGE_BATCH:
                yield _pairs(held)
                held = []
        yield _pairs(held)

    return docs, edge_components(docs, batches())


def _pairs(tables: list[pa.Table]) -> tuple[np.ndarray, np.ndarray]:
    if not tables:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    table = pa.concat_tables(tables)
    return table.column("first").to_numpy(), table.column("doc").to_numpy()


def gather(lake: Lake, files: SignatureFiles, docs: np.ndarray, columns: list[str]) -> pa.Table:
    """The rows of ``docs`` (ascending document indices) in ``columns``, streaming the files."""
    pieces = []
    starts = files.starts
    for index in range(len(files.keys)):
        low, high = np.searchsorted(docs, starts[index : index + 2])
        if low == high:
            continue
        rows = docs[low:high] - starts[index]
        for row, batch in read_batches(lake, files, index, columns):
            a, b = np.searchsorted(rows, [row, row + batch.num_rows])
            if a < b:
                pieces.append(pa.Table.from_batches([batch.take(rows[a:b] - row)]))
    if not pieces:
        return pa.table({c: pa.array([], _column_type(c)) for c in columns})
    return pa.concat_tables(pieces)


def _column_type(column: str) -> pa.DataType:
    return {"doc_id": pa.string(), "warc_date": pa.string(), QUALITY_COLUMN: pa.float64()}.get(
        column, pa.uint64()
    )


def rank(values: pa.ChunkedArray, descending: bool) -> np.ndarray:
    """Dense rank, nulls last: among any documents it orders them as a rank over the whole
    crawl would, so it can be taken over the linked documents only."""
    series = pl.from_arrow(values)
    return series.rank("dense", descending=descending).fill_null(len(series) + 1).to_numpy()


class UnitVersions:
    """Per unit, a hash of the rows that remove its documents, fed a slice of the removed list
    at a time: it changes exactly when the unit's deduplicated output would."""

    COLUMNS = ("part", "doc_id", "cluster_id", "survivor_unit", "survivor_doc_id", "reason")

    def __init__(self) -> None:
        self.digests: dict = {}  # unit name -> its running sha256

    def add(self, table: pa.Table) -> None:
        lines = pl.from_arrow(table).select(
            "unit",
            line=pl.concat_str([pl.col(c).cast(pl.String) for c in self.COLUMNS], separator="\t"),
        )
        for (name,), rows in lines.group_by("unit", maintain_order=True):
            digest = self.digests.setdefault(name, hashlib.sha256())
            digest.update((rows["line"].str.join("\n").item() + "\n").encode())

    def versions(self, units: list[Unit]) -> dict[str, str]:
        empty = hashlib.sha256(b"").hexdigest()[:32]
        found = {name: digest.hexdigest()[:32] for name, digest in self.digests.items()}
        return {unit.name: found.get(unit.name, empty) for unit in units}


def cluster_crawl(
    lake: Lake,
    units: list[Unit],
    settings,
    out: PartitionWriter,
    work_prefix: str | None = None,
    ranges: int | None = None,
    max_keys: int | None = None,
    planned: list[str] | None = None,
    files: SignatureFiles | None = None,
) -> StageReport:
    """The clusters stage: parts (in ``settings.cluster_workers`` processes), union, survivors,
    the removed list written to ``out``. With ``planned`` (the keys of ``prepare_parts``), the
    parts were computed elsewhere (parallel steps): a missing one fails naming its file. Cluster
    ids are the doc id of the cluster's first-seen member, so they do not change with the
    survivor rule. The part files are deleted once the list is committed by the caller."""
    files = files or crawl_signatures(lake, units)  # the caller's, if it has read them
    prefix = work_prefix or crawl_prefix(PARTS, units[0].crawl)
    memory = int(settings.cluster_memory_gb * 2**30)
    if planned is None:
        workers = settings.cluster_workers
        planned = run_parts(lake, files, prefix, memory, workers, ranges, max_keys).keys
    for key in planned:
        planned_part(lake, files, key)
    docs, components = union(lake, files, planned)
    rule = RANK_COLUMNS.get(settings.survivor)
    values = gather(lake, files, docs, ["doc_id", "exact_hash", *([rule[0]] if rule else [])])
    survivors = choose_survivors(components, rank(values[rule[0]], rule[1]) if rule else None)
    removed = np.flatnonzero(survivors != np.arange(len(docs)))
    survivor = survivors[removed]
    cluster_of = np.searchsorted(docs, components[removed])
    exact = values["exact_hash"].to_numpy()
    is_exact = exact[removed] == exact[survivor]
    doc_ids = values["doc_id"]
    report = out.report
    report.records_in = files.n_docs
    report.records_out = files.n_docs - len(removed)
    report.drop("exact_duplicate", int(is_exact.sum()))
    report.drop("near_duplicate", int((~is_exact).sum()))
    report.counts.update(
        units=len(units),
        files=len(files.keys),
        clusters=len(sorted_unique(survivor)),
        params=files.params | {"survivor": settings.survivor},
        parts=len(planned),
        linked_docs=len(docs),
    )
    sink = out.parquet("clusters.parquet", CLUSTER_SCHEMA)
    versions = UnitVersions()
    # In slices: the strings of the removed rows would otherwise all be held at once.
    for start in range(0, max(len(removed), 1), OUTPUT_ROWS):
        rows = slice(start, start + OUTPUT_ROWS)
        table = pa.table(
            {
                "unit": files.unit_names(docs[removed[rows]]),
                "part": files.part_numbers(docs[removed[rows]]),
                "doc_id": doc_ids.take(removed[rows]),
                "cluster_id": doc_ids.take(cluster_of[rows]),
                "survivor_unit": files.unit_names(docs[survivor[rows]]),
                "survivor_doc_id": doc_ids.take(survivor[rows]),
                "reason": np.where(is_exact[rows], "exact_duplicate", "near_duplicate"),
            },
            schema=CLUSTER_SCHEMA,
        )
        sink.write_table(table)
        if start == 0:
            report.add_preview(table.slice(0, 5).to_pylist())
        versions.add(table)
    report.counts["unit_versions"] = versions.versions(units)
    return report
