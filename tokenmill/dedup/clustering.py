"""The clusters step of dedup: the crawl's duplicate clusters and removed list, every process
within ``cluster_memory_gb`` whatever the crawl's size, as phases of tasks
(``tokenmill.runtime.phases``) that any number of steps share through the lake.

1. Parts. A key column (the exact hash, each LSH band) links the documents sharing a value. A
   part is one column restricted to one range of key values (their top bits), so documents
   sharing a key always meet in one part, which groups them alone (``PartGroups``, bounded
   however skewed the keys) and writes edges linking each group's documents to its first. When
   a column needs more than ``DIRECT_RANGES`` ranges, a scatter phase first routes its keys to
   range files (``tokenmill.storage.spill``), so each signature byte is read once there and each
   part reads only its range; with fewer, parts read the column from the signature files themselves
   (at most twice). One column is scattered and grouped at a time: the scratch space is one
   column's keys.
2. Components (``tokenmill.dedup.components``): the edges routed to ranges of documents, star rounds
   over the ranges until every cluster is a star around its smallest document.
3. Survivors (``tokenmill.dedup.survivors``): per range, each linked document with its label and
rank
   value, each cluster's survivor, the removed rows; written in document order by the caller.

Everything a phase writes lives under ``<PARTS>/<crawl>/<fingerprint>/``, the fingerprint naming
the signature files and the plan: a killed run resumes from the committed tasks, other inputs'
work is deleted before a run starts, and the whole prefix once the removed list is committed.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from tokenmill.dedup.components import Nodes, add_edges, star_task
from tokenmill.dedup.signature_files import (
    SignatureFiles,
    crawl_signatures,
    read_batches,
)
from tokenmill.dedup.survivors import members_task, removed_in_order, removed_task
from tokenmill.runtime.phases import Claims, Phase, release_memory, run_job
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import CLUSTER_SCHEMA, QUALITY_COLUMN, Unit, crawl_prefix
from tokenmill.storage.outputs import PartitionWriter, StageReport
from tokenmill.storage.spill import (
    DONE,
    Source,
    SpillWriter,
    clear_data,
    is_done,
    read_sources,
    summaries,
)

CLAIMS = "_claims"  # a phase's leases on its tasks (tokenmill.runtime.phases)
PARTS = "_dedup_clusters_parts"  # work prefix: <PARTS>/<crawl>/<fingerprint>/<phase>/...
FORMAT = 3  # of the work files; part of the fingerprint
# A part holds, per key in its range, the key and its document index (16 bytes), twice while
# the row-group chunks are joined; grouping then needs an index, a sorted copy and masks (see
# ``bucket_edges``): a worker peaked at 843 MiB for 10M keys. BASE_BYTES covers the
# interpreter, pyarrow and one row group.
BYTES_PER_KEY = 96  # 64 held, and room for the edges the part writes meanwhile
BASE_BYTES = 384 << 20
# A range of documents costs, per document, 8 bytes of node state in the star rounds, and, for
# a linked one, its row (doc id, hashes, label: ~100 bytes) where survivors are chosen.
NODE_BYTES = 512
# A task holds at most this share of its budget in rows routed or read at once: rows of numbers
# (keys, edges), or rows with strings (doc ids), which polars sorts and joins at ~10x their size.
CHUNK_SHARE = 12
STRING_CHUNK_SHARE = 32
DIRECT_RANGES = 2  # a column read this many times from the signature files, not scattered
MAX_ROUNDS = 64  # star rounds: O(log^2 n) in theory, a handful in practice
OUTPUT_ROWS = 1 << 18  # removed documents written at once
IN_PROCESS_DOCS = 100_000  # a crawl this small is clustered without worker processes
RANK_COLUMNS = {  # survivor rule -> (column, descending); lower rank survives
    "earliest_date": ("warc_date", False),
    "lowest_doc_id": ("doc_id", False),
    "highest_quality": (QUALITY_COLUMN, True),
}


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


def data_budget(memory_bytes: int) -> int:
    """What a process may hold beyond the interpreter's baseline."""
    return max(memory_bytes - BASE_BYTES, memory_bytes // 4)


def keys_for(memory_bytes: int) -> int:
    """Keys a part may hold at once within ``memory_bytes``."""
    return max(data_budget(memory_bytes) // BYTES_PER_KEY, 1024)


def ranges_for(n_docs: int, memory_bytes: int) -> int:
    """Key ranges per column such that a part's expected keys fit in ``memory_bytes``."""
    ranges = 1
    while n_docs / ranges > keys_for(memory_bytes):
        ranges *= 2
    return ranges


@dataclass(frozen=True)
class ClusterPlan:
    """How one clustering of ``files`` splits into tasks, and where they write."""

    files: SignatureFiles
    prefix: str  # <PARTS>/<crawl>/<fingerprint>
    key_ranges: int
    max_keys: int
    nodes: Nodes
    chunk_bytes: int
    slices: tuple[tuple[int, int], ...]  # files [first, last) of each scatter task
    survivor: str

    @property
    def scattered(self) -> bool:
        return self.key_ranges > DIRECT_RANGES

    @property
    def columns(self) -> tuple[str, ...]:
        return self.files.columns

    def phase_prefix(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def tasks(self, count: int, letter: str = "r") -> tuple[str, ...]:
        return tuple(f"{letter}{i:05d}" for i in range(count))

    @property
    def node_tasks(self) -> tuple[str, ...]:
        return self.tasks(self.nodes.ranges)

    def sources(self, phase: str) -> list[Source]:
        """A phase over the ranges of documents, as its readers name it."""
        return [(self.phase_prefix(phase), self.node_tasks)]


def plan_clustering(
    files: SignatureFiles,
    work_prefix: str,
    memory_bytes: int,
    survivor: str = "first_seen",
    ranges: int | None = None,
    max_keys: int | None = None,
    node_width: int | None = None,
) -> ClusterPlan:
    """The plan ``memory_bytes`` gives (``ranges``, ``max_keys`` and ``node_width`` force
    smaller pieces than it needs: tests)."""
    ranges = ranges or ranges_for(files.n_docs, memory_bytes)
    if ranges & (ranges - 1):
        raise ValueError(f"ranges must be a power of 2, not {ranges}")
    budget = data_budget(memory_bytes)
    max_keys = max_keys or keys_for(memory_bytes)
    width = max(node_width or budget // NODE_BYTES, 1)
    chunk_bytes = max(budget // CHUNK_SHARE, 1 << 20)
    slices, first, held = [], 0, 0
    for index, rows in enumerate(files.rows):
        held += rows
        if held >= max_keys or index == len(files.rows) - 1:  # a part's keys per slice
            slices.append((first, index + 1))
            first, held = index + 1, 0
    what = [FORMAT, ranges, max_keys, width, chunk_bytes, slices, survivor]
    return ClusterPlan(
        files=files,
        prefix=f"{work_prefix}/{files.fingerprint(*what)}",
        key_ranges=ranges,
        max_keys=max_keys,
        nodes=Nodes(max(files.n_docs, 1), width),
        chunk_bytes=chunk_bytes,
        slices=tuple(slices),
        survivor=survivor,
    )


def prepare(lake: Lake, plan: ClusterPlan) -> None:
    """Before any task: the work of other inputs or plans, and what killed writers left, go."""
    work, fingerprint = plan.prefix.rsplit("/", 1)
    for stale in lake.list_dirs(work):
        if stale != fingerprint:
            lake.delete_prefix(f"{work}/{stale}")
    lake.remove_stray_temporaries(work)


def _writer(
    lake: Lake, plan: ClusterPlan, phase: str, task: str, ranges: int, unique=False, strings=False
):
    chunk = plan.chunk_bytes * CHUNK_SHARE // STRING_CHUNK_SHARE if strings else plan.chunk_bytes
    return SpillWriter(lake, plan.phase_prefix(phase), task, ranges, chunk, unique)


def scatter_task(lake: Lake, plan: ClusterPlan, column: str, task: str) -> dict:
    """One slice of the signature files' ``column`` routed to its key ranges as (key, doc)."""
    files, (first, last) = plan.files, plan.slices[int(task[1:])]
    out = _writer(lake, plan, f"scatter-{column}", task, plan.key_ranges)
    shift = np.uint64(64 - plan.key_ranges.bit_length() + 1)
    for index in range(first, last):
        start = int(files.starts[index])
        for row, batch in read_batches(lake, files, index, [column]):
            keys = batch.column(0).to_numpy()
            docs = np.arange(start + row, start + row + len(keys), dtype=np.int64)
            out.add(pa.table({"key": keys, "doc": docs}), (keys >> shift).astype(np.int64))
    return out.commit({"rows": int(files.starts[last] - files.starts[first])})


def part_keys(lake: Lake, plan: ClusterPlan, part: Part) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(keys, documents) of ``part`` in document order."""
    files = plan.files
    if plan.scattered:
        prefix = plan.phase_prefix(f"scatter-{part.column}")
        tasks = plan.tasks(len(plan.slices), "s")
        for table in read_sources(lake, [(prefix, tasks)], part.index):
            yield table.column("key").to_numpy(), table.column("doc").to_numpy()
        return
    for index, start in enumerate(files.starts[:-1].tolist()):
        for row, batch in read_batches(lake, files, index, [part.column]):
            values = batch.column(0).to_numpy()
            selected = np.flatnonzero(part.selects(values))
            yield values[selected], selected + (start + row)


def part_task(lake: Lake, plan: ClusterPlan, column: str, task: str) -> dict:
    """One part: the edges of its groups, routed to their documents' ranges."""
    part = Part(column, int(task[1:]), plan.key_ranges)
    groups = PartGroups(plan.max_keys)
    out = _writer(lake, plan, f"parts-{column}", task, plan.nodes.ranges, unique=True)
    for keys, docs in part_keys(lake, plan, part):
        for first, other in groups.add(keys, docs):
            add_edges(out, plan.nodes, first, other, both=True)
    first, other = groups.finish()
    add_edges(out, plan.nodes, first, other, both=True)
    return out.commit({"part": part.name} | groups.report())


def _phase(lake: Lake, plan: ClusterPlan, name: str, tasks: tuple[str, ...], run) -> Phase:
    prefix = plan.phase_prefix(name)
    done = functools.partial(is_done, lake, prefix)
    return Phase(name, tasks, run, done, Claims(lake, f"{prefix}/{CLAIMS}"))


def _node_task(function, lake: Lake, plan: ClusterPlan, phase: str, unique: bool, task: str):
    """A task of a phase over the ranges of documents: ``function(index, out)``; its rows
    carry strings unless they are edges (``unique``)."""
    out = _writer(lake, plan, phase, task, plan.nodes.ranges, unique, strings=not unique)
    return function(index=int(task[1:]), out=out)


def cluster_job(lake: Lake, plan: ClusterPlan):
    """The phases of a clustering (``tokenmill.runtime.phases``), each yielded once the ones before
    it are committed."""
    nodes, files = plan.nodes, plan.files

    def node_phase(name: str, function, unique: bool = False) -> Phase:
        run = functools.partial(_node_task, function, lake, plan, name, unique)
        return _phase(lake, plan, name, plan.node_tasks, run)

    def source(phase: Phase) -> Source:
        return (plan.phase_prefix(phase.name), phase.tasks)

    edges: list[Source] = []
    for column in plan.columns:
        if plan.scattered:
            tasks = plan.tasks(len(plan.slices), "s")
            run = functools.partial(scatter_task, lake, plan, column)
            yield (scatter := _phase(lake, plan, f"scatter-{column}", tasks, run))
        run = functools.partial(part_task, lake, plan, column)
        yield (parts := _phase(lake, plan, f"parts-{column}", plan.tasks(plan.key_ranges), run))
        if plan.scattered:
            clear_data(lake, plan.phase_prefix(scatter.name))
        edges.append(source(parts))
    labels = None
    for round_ in range(1, MAX_ROUNDS + 1):
        inputs = edges if labels is None else [source(labels)]
        large_star = functools.partial(star_task, lake, inputs, nodes, small=False)
        yield (large := node_phase(f"large-{round_:02d}", large_star, unique=True))
        small_star = functools.partial(star_task, lake, [source(large)], nodes, small=True)
        yield (labels := node_phase(f"small-{round_:02d}", small_star, unique=True))
        for prefix, _ in [*inputs, source(large)]:
            clear_data(lake, prefix)
        if not any(s["changed"] for s in summaries(lake, [source(large), source(labels)])):
            break
    else:
        raise RuntimeError(f"components did not converge in {MAX_ROUNDS} star rounds")
    rank_column, descending = RANK_COLUMNS.get(plan.survivor, (None, False))
    members = functools.partial(
        members_task, lake, files, [source(labels)], nodes, rank_column=rank_column
    )
    yield (gathered := node_phase("members", members))
    clear_data(lake, plan.phase_prefix(labels.name))
    removed = functools.partial(
        removed_task, lake, files, [source(gathered)], nodes, descending=descending
    )
    yield node_phase("removed", removed)
    clear_data(lake, plan.phase_prefix(gathered.name))


def bucket_edges(keys: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges (first, other) linking each document of a group sharing a key to the group's
    smallest document; ``keys[i]`` belongs to ``docs[i]``.

    The group-by is a sort: polars' arg_sort (one thread: 1.5 s for 10M keys, numpy's argsort
    3.3 s; its index is 4 bytes a key), then only groups of two or more are looked at. numpy's
    np.unique and np.isin are avoided: hash-based in numpy 2.4, 34 s for 10M keys.
    """
    keys = np.asarray(keys)
    docs = np.asarray(docs, dtype=np.int64)
    if len(keys) != len(docs):
        raise ValueError(f"{len(keys)} keys for {len(docs)} documents")
    order = pl.Series(keys, dtype=pl.UInt64).arg_sort().to_numpy()
    sorted_keys = keys[order]
    same = sorted_keys[1:] == sorted_keys[:-1]  # position i + 1 is in the group of position i
    del sorted_keys
    held = np.flatnonzero(np.concatenate((same, [False])) | np.concatenate(([False], same)))
    starts = ~np.concatenate(([False], same))[held]
    held_docs = docs[order[held]]
    del order, held
    group_starts = np.flatnonzero(starts)
    first = np.minimum.reduceat(held_docs, group_starts) if len(held_docs) else held_docs
    group_sizes = np.diff(np.append(group_starts, len(held_docs)))
    first = np.repeat(first, group_sizes)
    linked = first != held_docs
    return first[linked], held_docs[linked]


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


class UnitVersions:
    """Per unit, a hash of the rows that remove its documents, fed a slice of the removed list
    at a time: it changes exactly when the unit's deduplicated output would."""

    COLUMNS = ("part", "doc_id", "cluster_id", "survivor_unit", "survivor_doc_id", "reason")
    ROWS = 1 << 15

    def __init__(self) -> None:
        self.digests: dict = {}  # unit name -> its running sha256

    def add(self, table: pa.Table) -> None:
        for start in range(0, table.num_rows, self.ROWS):  # its strings, a slice at a time
            lines = pl.from_arrow(table.slice(start, self.ROWS)).select(
                "unit",
                line=pl.concat_str(
                    [pl.col(c).cast(pl.String) for c in self.COLUMNS], separator="\t"
                ),
            )
            for (name,), rows in lines.group_by("unit", maintain_order=True):
                digest = self.digests.setdefault(name, hashlib.sha256())
                digest.update((rows["line"].str.join("\n").item() + "\n").encode())

    def versions(self, units: list[Unit]) -> dict[str, str]:
        empty = hashlib.sha256(b"").hexdigest()[:32]
        found = {name: digest.hexdigest()[:32] for name, digest in self.digests.items()}
        return {unit.name: found.get(unit.name, empty) for unit in units}


def run_clustering(
    lake: Lake, plan: ClusterPlan, workers: int = 1, step: int = 0, steps: int = 1
) -> dict:
    """The clustering's tasks as step ``step`` of ``steps`` (``tokenmill.runtime.phases``), in
    ``workers`` processes (in this one for a crawl under ``IN_PROCESS_DOCS``)."""
    small = plan.files.n_docs < IN_PROCESS_DOCS
    return run_job(functools.partial(cluster_job, lake, plan), workers, step, steps, small)


def work_bytes_written(lake: Lake, plan: ClusterPlan) -> int:
    """What every task of the clustering wrote (their markers outlive their files)."""
    markers = [key for key in lake.list(plan.prefix) if f"/{DONE}/" in key]
    return sum(lake.read_json(key)["summary"]["bytes_written"] for key in markers)


def cluster_crawl(
    lake: Lake,
    units: list[Unit],
    settings,
    out: PartitionWriter,
    work_prefix: str | None = None,
    ranges: int | None = None,
    max_keys: int | None = None,
    node_width: int | None = None,
    files: SignatureFiles | None = None,
    prepared: bool = False,
) -> StageReport:
    """The clusters stage: the clustering's tasks not committed yet (by parallel steps, or an
    earlier run), in ``settings.cluster_workers`` processes, then the removed list written to
    ``out`` in document order. Cluster ids are the doc id of the cluster's smallest document, so
    they do not change with the survivor rule. The work files are deleted once the list is
    committed by the caller. ``prepared``: the plan step cleared the work prefix already (a
    fanned-out run), so the finish does not list it again."""
    files = files or crawl_signatures(lake, units)  # the caller's, if it has read them
    plan = plan_clustering(
        files,
        work_prefix or crawl_prefix(PARTS, units[0].crawl),
        int(settings.cluster_memory_gb * 2**30),
        settings.survivor,
        ranges,
        max_keys,
        node_width,
    )
    if not prepared:
        prepare(lake, plan)
    ran = run_clustering(lake, plan, settings.cluster_workers)
    removed, gathered = plan.sources("removed"), plan.sources("members")
    done = summaries(lake, removed)
    exact = sum(s["exact_duplicate"] for s in done)
    near = sum(s["near_duplicate"] for s in done)
    report = out.report
    report.records_in = files.n_docs
    report.records_out = files.n_docs - exact - near
    report.drop("exact_duplicate", exact)
    report.drop("near_duplicate", near)
    report.counts.update(
        units=len(units),
        files=len(files.keys),
        clusters=sum(s["clusters"] for s in done),
        params=files.params | {"survivor": settings.survivor},
        parts=len(plan.columns) * plan.key_ranges,
        key_ranges=plan.key_ranges,
        document_ranges=plan.nodes.ranges,
        linked_docs=sum(s["linked"] for s in summaries(lake, gathered)),
        work_bytes_written=work_bytes_written(lake, plan),
        tasks_computed=ran["tasks_computed"],
    )
    release_memory()
    sink = out.parquet("clusters.parquet", CLUSTER_SCHEMA)
    versions = UnitVersions()
    for number, table in enumerate(
        removed_in_order(lake, removed, plan.nodes, OUTPUT_ROWS, CLUSTER_SCHEMA)
    ):
        sink.write_table(table)
        if number == 0:
            report.add_preview(table.slice(0, 5).to_pylist())
        versions.add(table)
    report.counts["unit_versions"] = versions.versions(units)
    return report
