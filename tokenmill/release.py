"""Releases: a recipe's tokenized files of some crawls as training-ready Megatron datasets —
shards of about `shard_tokens` tokens, documents shuffled across the whole release, a validation
split by a hash of each document's text, a blend, every token traceable to its WARC record.

A release is planned from the tokenized units' markers alone (documents and tokens per file):
its version is a hash of the settings, the tokenizer and every input file's SHA-256. Documents
are numbered across the input files in lake order; position p of a group's shuffled order holds
document `Permutation(N, seed)(p)`, found by a binary search of the files' document prefix sums
(no permutation array, no per-document table: memory is 8 bytes per input file). Train shard k
of a group is positions [k*D, (k+1)*D) (D documents make about `shard_tokens` train tokens),
without the validation documents met there; those are collected per shard and concatenated, in
shuffled order, into the validation shards by the finishing step. Shards are written by
independent pieces (parallel steps), each committed with a done file; the release is published
by its `_SUCCESS.json`, written last: a reader sees a complete release or none.

Without `weights`, the crawls are one group shuffled together; with them, each weighted crawl
is a group of its own (`train-<crawl>-NNNNN`) and `blend.txt` weights its shards by the crawl's
weight, split by tokens.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import struct
import tempfile
from array import array
from collections import Counter
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenmill.lake import Lake
from tokenmill.layout import MARKER, RELEASE, TOKEN_PROVENANCE_SCHEMA, TOKENIZED_SHARDS, Unit
from tokenmill.megatron import CODE_DTYPES, IndexedDataset, IndexedDatasetWriter
from tokenmill.outputs import (
    HashingFile,
    MissingInputError,
    ParquetSink,
    StageReport,
    require_committed,
)
from tokenmill.permutation import Permutation, mix64
from tokenmill.stage import setting
from tokenmill.units import registered_crawls, registered_units

ALL = "all"  # the group of every crawl, without weights
SPLITS = ("train", "valid")
MAX_DOCUMENTS = 2**31 - 2  # Megatron's document index is int32
CHUNK = 1 << 16  # documents handed to the shard writer at a time
HEADER_BYTES = 9 + 8 + 1 + 8 + 8  # a Megatron index's magic, version, dtype and two counts
WHOLE_INDEX_SHARE = 64  # an index is read whole when a 64th of its documents are needed
COPIED_FIELDS = [
    f for f in TOKEN_PROVENANCE_SCHEMA if f.name not in ("doc_index", "token_start", "token_end")
]
# A release shard's provenance: a row per document, its token span in the shard, the tokenized
# file and document it was copied from, and that document's provenance.
RELEASE_SIDECAR = pa.schema(
    [
        ("doc_index", pa.int64()),
        ("token_start", pa.int64()),
        ("token_end", pa.int64()),
        ("source", pa.string()),
        ("source_doc_index", pa.int64()),
        *COPIED_FIELDS,
    ]
)


class ReleaseError(ValueError):
    """A release that cannot be made from its inputs or settings: the message names them."""


@dataclass(frozen=True)
class ReleaseSettings:
    crawls: list[str] = setting([], "Crawls to release (default: every crawl)")
    seed: int = setting(0, "Seed of the documents' shuffle")
    shard_tokens: int = setting(
        1_000_000_000, "Tokens per shard, about (the last shard of a split may hold fewer)"
    )
    validation: float = setting(
        0.001, "Share of documents in the validation split (by a hash of their text)"
    )
    split_seed: int = setting(
        0, "Seed of the split's hash: the same in every release keeps each document's side"
    )
    weights: dict[str, float] = setting(
        {},
        "Blend weight per crawl (each weighted crawl shuffled into shards of its own); empty: "
        "every crawl shuffled together, weighted by tokens",
    )

    def __post_init__(self):
        if isinstance(self.shard_tokens, int) and self.shard_tokens < 1:
            raise ValueError(f"release.shard_tokens must be 1 or more, not {self.shard_tokens}")
        if isinstance(self.validation, int | float) and not 0 <= self.validation < 1:
            raise ValueError(f"release.validation {self.validation} is not a share in [0, 1)")
        for crawl, weight in (self.weights or {}).items():
            if not isinstance(weight, int | float) or isinstance(weight, bool) or weight <= 0:
                raise ValueError(f"release.weights.{crawl}: {weight!r} is not a positive number")


def is_valid(text_hashes: np.ndarray, share: float, split_seed: int) -> np.ndarray:
    """Which documents are in the validation split: a seeded hash of their text's hash below
    the share (equal texts, one side; another crawl added later moves no document)."""
    with np.errstate(over="ignore"):
        key = np.asarray(text_hashes, dtype=np.uint64) ^ mix64(np.uint64(split_seed + 1))
    draws = mix64(key) >> np.uint64(11)  # 53 bits: exact as a float64
    return draws.astype(np.float64) / float(1 << 53) < share


# -- planning ---------------------------------------------------------------------------------


@dataclass
class InputFiles:
    """A group's tokenized files in lake order: 8 bytes per file for the documents' prefix
    sums, 8 for where it is (its unit's number, its part), whatever the corpus's size."""

    units: list[str] = field(default_factory=list)
    unit_of: array = field(default_factory=lambda: array("i"))
    part: array = field(default_factory=lambda: array("i"))
    documents: array = field(default_factory=lambda: array("q"))
    tokens: int = 0

    def __len__(self) -> int:
        return len(self.documents)

    def starts(self) -> np.ndarray:
        """Each file's first document number in the group, and the total at the end."""
        starts = np.zeros(len(self.documents) + 1, np.int64)
        np.cumsum(np.frombuffer(self.documents, np.int64), out=starts[1:])
        return starts

    def source(self, file: int) -> str:
        unit = Unit.from_key(self.units[self.unit_of[file]])
        return unit.part_prefix(TOKENIZED_SHARDS, self.part[file])


@dataclass
class Group:
    files: InputFiles
    seed: int = 0
    per_shard: int = 1  # documents per train shard, validation documents included
    shards: int = 0
    weight: float = 1.0

    @property
    def documents(self) -> int:
        return int(sum(self.files.documents))


@dataclass(frozen=True)
class Plan:
    version: str
    groups: dict[str, Group]
    tokenizer_sha256: str
    dtype: str
    settings: dict
    inputs: dict[str, str] = field(default_factory=dict)  # unit -> digest of its files

    @property
    def prefix(self) -> str:
        return f"{RELEASE}/{self.version}"

    def pieces(self) -> list[str]:
        return [f"{g}/{k}" for g, group in self.groups.items() for k in range(group.shards)]


def plan_release(lake: Lake, settings: ReleaseSettings) -> Plan:
    """The release's inputs, version and shards, from the tokenized units' markers; fails
    naming a crawl or setting that cannot be released, before anything is written."""
    crawls = list(settings.crawls) or registered_crawls(lake)
    unknown = sorted(set(settings.weights) - set(crawls))
    if unknown:
        raise ReleaseError(f"release.weights names crawl(s) {unknown} not in the release {crawls}")
    tokenizers: dict[str, set[str]] = {}
    dtypes = set()
    identity = hashlib.sha256(json.dumps(asdict(settings), sort_keys=True).encode())
    groups: dict[str, Group] = {}
    inputs: dict[str, str] = {}  # unit -> the digest of its tokenized files
    for crawl in crawls:
        name = crawl if settings.weights else ALL
        files = groups.setdefault(name, Group(InputFiles())).files
        before = files.tokens
        for unit in registered_units(lake, crawl):
            marker = require_committed(
                lake, unit.prefix(TOKENIZED_SHARDS), f"tokenized_shards of {unit}"
            )
            tokenizers.setdefault(marker["counts"]["tokenizer_sha256"], set()).add(crawl)
            dtypes.add(marker["counts"]["dtype"])
            itemsize = np.dtype(marker["counts"]["dtype"]).itemsize
            files.units.append(unit.key)
            for part in range(marker["counts"]["files"]):
                tokens = marker["outputs"][f"{part:05d}/tokens.bin"]
                files.unit_of.append(len(files.units) - 1)
                files.part.append(part)
                files.documents.append(marker["outputs"][f"{part:05d}/provenance.parquet"]["rows"])
                files.tokens += tokens["bytes"] // itemsize
            inputs[unit.key] = unit_digest(marker)
            identity.update(f"{unit.key}={inputs[unit.key]}\n".encode())
        if files.tokens == before:
            raise ReleaseError(f"crawl {crawl} has no tokenized documents to release")
    if len(tokenizers) > 1:
        named = "; ".join(f"{sha[:12]}: {sorted(c)}" for sha, c in tokenizers.items())
        raise ReleaseError(f"the crawls were tokenized with different tokenizers ({named})")
    tokenizer = next(iter(tokenizers))
    identity.update(tokenizer.encode())
    for index, (name, group) in enumerate(groups.items()):
        shape_group(group, name, index, settings)
    version = identity.hexdigest()[:16]
    return Plan(version, groups, tokenizer, dtypes.pop(), asdict(settings), inputs)


def unit_digest(marker: dict) -> str:
    """A tokenized unit's data: the SHA-256 of its files' SHA-256s, by name."""
    files = {name: entry["sha256"] for name, entry in marker["outputs"].items()}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def shape_group(group: Group, name: str, index: int, settings: ReleaseSettings) -> None:
    """How many documents a train shard spans, so that its train tokens are about
    `shard_tokens`, and how many shards that makes."""
    total = group.documents
    per_doc = group.files.tokens / total
    if settings.shard_tokens < per_doc:
        raise ReleaseError(
            f"release.shard_tokens {settings.shard_tokens} is smaller than one document "
            f"({per_doc:.0f} tokens on average in {name})"
        )
    per_shard = round(settings.shard_tokens / per_doc / (1 - settings.validation))
    group.seed = settings.seed * 1_000_003 + index
    group.per_shard = min(MAX_DOCUMENTS, max(1, per_shard))
    group.shards = math.ceil(total / group.per_shard)
    group.weight = settings.weights.get(name, 1.0)


# -- writing a shard --------------------------------------------------------------------------


def _sidecar_rows(lake: Lake, source: str, docs: np.ndarray) -> pa.Table:
    """The sidecar rows of `docs` (ascending) of an input file, reading only the row groups
    that hold them (a shard needs about one document of each file it draws from)."""
    with lake.open_input(f"{source}/provenance.parquet") as f:
        parquet = pq.ParquetFile(f)
        if "text_hash" not in parquet.schema_arrow.names:
            raise MissingInputError(
                f"{source} was tokenized before documents carried a text hash: "
                "rematerialize tokenized_shards"
            )
        sizes = [parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)]
        firsts = np.concatenate([[0], np.cumsum(sizes)])
        groups = np.unique(np.searchsorted(firsts, docs, side="right") - 1)
        table = parquet.read_row_groups(groups.tolist())
    held = np.concatenate([np.arange(firsts[g], firsts[g + 1]) for g in groups])
    return table.take(pa.array(np.searchsorted(held, docs)))


def _pointers(lake: Lake, source: str, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(byte offsets, token counts, token size) of `docs` in an input file's `.bin`, from its
    `.idx`: read whole when many are needed, else entry by entry."""
    key = f"{source}/tokens.idx"
    with lake.open_input(key) as f:
        header = f.read(HEADER_BYTES)
        count = struct.unpack_from("<Q", header, 18)[0]
        if len(docs) * WHOLE_INDEX_SHARE >= count:  # much of it is needed anyway
            index = IndexedDataset(header + f.read(), None)
            return index.pointers[docs], index.lengths[docs], index.dtype.itemsize
        itemsize = CODE_DTYPES[header[17]].itemsize
        lengths, pointers = np.empty(len(docs), np.int64), np.empty(len(docs), np.int64)
        for at, doc in enumerate(docs):
            f.seek(HEADER_BYTES + 4 * int(doc))
            lengths[at] = struct.unpack("<i", f.read(4))[0]
            f.seek(HEADER_BYTES + 4 * count + 8 * int(doc))
            pointers[at] = struct.unpack("<q", f.read(8))[0]
    return pointers, lengths, itemsize


@dataclass
class Chunk:
    """Documents in release order: their token bytes and their provenance (the tokenized
    sidecar's columns, `source`, `source_doc_index` and the text's token count)."""

    data: list[bytes]
    rows: pa.Table

    def take(self, keep: np.ndarray) -> Chunk:
        chosen = np.flatnonzero(keep)
        return Chunk([self.data[i] for i in chosen], self.rows.take(pa.array(chosen)))


def _chunks(lake: Lake, group: Group, positions: np.ndarray, scratch):
    """The documents at `positions` of the group's shuffled order, in that order, CHUNK at a
    time. Each input file is read once, in file order (its index, its sidecar, then its
    documents' tokens in file order), the tokens spilled to the local `scratch` file: a
    shard draws from up to a million files at corpus scale, and reading them in release
    order would read each many times."""
    starts = group.files.starts()
    documents = Permutation(int(starts[-1]), group.seed)(positions)
    files = np.searchsorted(starts, documents, side="right") - 1
    within = documents - starts[files]
    by_file = np.lexsort((within, files))
    offsets = np.zeros(len(positions), np.int64)
    sizes = np.zeros(len(positions), np.int64)
    tables = []
    bounds = np.flatnonzero(np.diff(files[by_file])) + 1
    for rows in np.split(by_file, bounds) if len(by_file) else []:
        file, docs = int(files[rows[0]]), within[rows]
        source = group.files.source(file)
        taken = _sidecar_rows(lake, source, docs)
        pointers, lengths, itemsize = _pointers(lake, source, docs)
        text_tokens = taken.column("token_end").to_numpy() - taken.column("token_start").to_numpy()
        tables.append(
            taken.select([f.name for f in COPIED_FIELDS])
            .append_column("source", pa.array([source] * len(rows), pa.string()))
            .append_column("source_doc_index", pa.array(docs, pa.int64()))
            .append_column("text_tokens", pa.array(text_tokens, pa.int64()))
            .append_column("position", pa.array(rows, pa.int64()))
        )
        begins = pointers.astype(np.int64)
        ends = begins + lengths.astype(np.int64) * itemsize
        with lake.open_input(f"{source}/tokens.bin") as tokens:
            low, high = int(begins.min()), int(ends.max())
            if 4 * int((ends - begins).sum()) >= high - low:  # dense: one read of the range
                tokens.seek(low)
                block = tokens.read(high - low)
                pieces = [block[b - low : e - low] for b, e in zip(begins, ends, strict=True)]
            else:  # documents ascending: pointers too
                pieces = []
                for begin, end in zip(begins, ends, strict=True):
                    tokens.seek(int(begin))
                    pieces.append(tokens.read(int(end - begin)))
        sizes[rows] = ends - begins
        offsets[rows] = scratch.tell() + np.cumsum(ends - begins) - (ends - begins)
        scratch.write(b"".join(pieces))
    if not tables:
        return
    rows = pa.concat_tables(tables)
    rows = rows.take(pc.sort_indices(rows.column("position"))).drop_columns(["position"])
    scratch.flush()
    spilled = mmap.mmap(scratch.fileno(), 0, access=mmap.ACCESS_READ) if sizes.any() else b""
    for first in range(0, len(positions), CHUNK):
        last = min(first + CHUNK, len(positions))
        data = [
            spilled[o : o + s]
            for o, s in zip(offsets[first:last].tolist(), sizes[first:last].tolist(), strict=True)
        ]
        yield Chunk(data, rows.slice(first, len(data)))
    if isinstance(spilled, mmap.mmap):
        spilled.close()


def shard_name(split: str, group: str, number: int) -> str:
    return f"{split}-{number:05d}" if group == ALL else f"{split}-{group}-{number:05d}"


class _Dataset:
    """A Megatron dataset (`<key>.bin`, `<key>.idx`) and its provenance sidecar
    (`<key>.provenance.parquet`), each file committed atomically when the block ends without
    an error, discarded otherwise."""

    def __init__(self, lake: Lake, key: str, dtype: str):
        self.lake, self.key, self.dtype = lake, key, np.dtype(dtype)
        self.stack = ExitStack()
        self.outputs: dict[str, dict] = {}

    def _file(self, suffix: str) -> HashingFile:
        return HashingFile(self.stack.enter_context(self.lake.writing(self.key + suffix)))

    def __enter__(self) -> _Dataset:
        self.stack.__enter__()
        self.files = {suffix: self._file(suffix) for suffix in (".bin", ".provenance.parquet")}
        self.writer = IndexedDatasetWriter(self.files[".bin"], self.dtype)
        self.sidecar = ParquetSink(self.files[".provenance.parquet"], RELEASE_SIDECAR)
        return self

    def add(self, chunk: Chunk) -> None:
        """Append documents: their token bytes and provenance, their spans in this dataset."""
        if not chunk.data:
            return
        lengths = np.fromiter((len(d) for d in chunk.data), np.int64, len(chunk.data))
        lengths //= self.dtype.itemsize
        first_doc, first_token = len(self.writer.lengths), self.writer.tokens
        self.writer.add_documents(np.frombuffer(b"".join(chunk.data), self.dtype), lengths)
        starts = first_token + np.cumsum(lengths) - lengths
        spans = chunk.rows.column("text_tokens").to_numpy()
        numbers = np.arange(first_doc, first_doc + len(lengths))
        self.sidecar.write_table(
            chunk.rows.drop_columns(["text_tokens"])
            .append_column("doc_index", pa.array(numbers, pa.int64()))
            .append_column("token_start", pa.array(starts, pa.int64()))
            .append_column("token_end", pa.array(starts + spans, pa.int64()))
        )

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[1]

    @property
    def documents(self) -> int:
        return len(self.writer.lengths)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.sidecar.close()
            self.files[".idx"] = self._file(".idx")
            self.writer.write_index(self.files[".idx"])
        self.stack.__exit__(exc_type, exc, tb)
        if exc_type is None:
            for suffix, file in self.files.items():
                digest = file.sha256.hexdigest()
                self.outputs[self.name + suffix] = {"bytes": file.size, "sha256": digest}
        return False

    def counts(self) -> dict:
        return {"documents": self.documents, "tokens": self.writer.tokens}


def write_piece(lake: Lake, plan: Plan, piece: str, settings: ReleaseSettings) -> dict:
    """Train shard `piece` (`<group>/<k>`) and the validation documents met there; committed
    by its done file, skipped when that exists (a resumed step)."""
    done_key = _done_key(plan, piece)
    if lake.exists(done_key):
        return lake.read_json(done_key)
    name, number = piece.split("/")
    group, number = plan.groups[name], int(number)
    first = number * group.per_shard
    positions = np.arange(first, min(first + group.per_shard, group.documents))
    train_name = shard_name("train", name, number)
    train = _Dataset(lake, f"{plan.prefix}/{train_name}", plan.dtype)
    valid = _Dataset(lake, f"{plan.prefix}/_valid/{name}-{number:05d}", plan.dtype)
    counted = {split: {"crawls": Counter(), "languages": Counter()} for split in SPLITS}
    with train, valid, tempfile.TemporaryFile() as scratch:
        for chunk in _chunks(lake, group, positions, scratch):
            hashes = chunk.rows.column("text_hash").to_numpy()
            held_out = is_valid(hashes, settings.validation, settings.split_seed)
            for split, keep, dataset in (("train", ~held_out, train), ("valid", held_out, valid)):
                part = chunk.take(keep)
                dataset.add(part)
                counted[split]["crawls"].update(part.rows.column("crawl").to_pylist())
                languages = part.rows.column("language").fill_null("unknown")
                counted[split]["languages"].update(languages.to_pylist())

    summary = {
        "piece": piece,
        "train": {"name": train_name, **train.counts(), **counted["train"]},
        "valid": {**valid.counts(), **counted["valid"]},
        "outputs": train.outputs,
    }
    lake.write_json(done_key, summary)
    return summary


# -- publishing -------------------------------------------------------------------------------


def is_published(lake: Lake, plan: Plan) -> bool:
    return lake.exists(f"{plan.prefix}/{MARKER}")


def finish_release(lake: Lake, plan: Plan, settings: ReleaseSettings) -> StageReport:
    """The validation shards, `manifest.json`, `blend.txt` (train) and `blend-valid.txt`, then
    `_SUCCESS.json`, which publishes the release; a published version is returned as it is."""
    published = f"{plan.prefix}/{MARKER}"
    if is_published(lake, plan):
        return StageReport.from_summary(lake.read_json(published))
    missing = [p for p in plan.pieces() if not lake.exists(_done_key(plan, p))]
    if missing:
        raise MissingInputError(f"release {plan.version}: pieces not written: {missing[:5]}")
    shards, outputs = [], {}
    totals = {
        split: {"documents": 0, "tokens": 0, "crawls": Counter(), "languages": Counter()}
        for split in SPLITS
    }
    for name, group in plan.groups.items():
        for number in range(group.shards):
            done = lake.read_json(_done_key(plan, f"{name}/{number}"))
            train = done["train"]
            shards.append(_shard("train", name, train["name"], train, done["outputs"]))
            outputs |= done["outputs"]
            for split in SPLITS:
                for key in ("documents", "tokens"):
                    totals[split][key] += done[split][key]
                for key in ("crawls", "languages"):
                    totals[split][key].update(done[split][key])
        for shard, written in _valid_shards(lake, plan, name, group, settings.shard_tokens):
            shards.append(_shard("valid", name, shard["name"], shard, written))
            outputs |= written
    manifest = {
        "version": plan.version,
        "settings": plan.settings,
        "tokenizer_sha256": plan.tokenizer_sha256,
        "dtype": plan.dtype,
        "groups": {
            name: {
                "weight": group.weight,
                "seed": group.seed,
                "documents_per_train_shard": group.per_shard,
                "input_files": len(group.files),
            }
            for name, group in plan.groups.items()
        },
        "splits": {
            split: {k: dict(v) if isinstance(v, Counter) else v for k, v in totals[split].items()}
            for split in SPLITS
        },
        "shards": shards,
    }
    by_crawl = {}  # crawl -> a running hash of its units' digests
    for unit, digest in plan.inputs.items():
        by_crawl.setdefault(Unit.from_key(unit).crawl, hashlib.sha256()).update(
            f"{unit}={digest}\n".encode()
        )
    manifest["inputs"] = {
        "units": len(plan.inputs),
        "files": sum(len(group.files) for group in plan.groups.values()),
        "crawls": {crawl: digest.hexdigest() for crawl, digest in sorted(by_crawl.items())},
        "per_unit": "inputs.json",
    }
    extra = {
        "manifest.json": json.dumps(manifest, indent=1, sort_keys=True).encode(),
        "inputs.json": json.dumps(plan.inputs, sort_keys=True).encode(),
        "blend.txt": blend(shards, plan, "train").encode(),
        "blend-valid.txt": blend(shards, plan, "valid").encode(),
    }
    for name, data in extra.items():
        lake.write_bytes(f"{plan.prefix}/{name}", data)
        outputs[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    report = StageReport(
        records_in=totals["train"]["documents"] + totals["valid"]["documents"],
        records_out=totals["train"]["documents"] + totals["valid"]["documents"],
    )
    report.outputs = dict(sorted(outputs.items()))
    report.bytes_out = sum(entry["bytes"] for entry in outputs.values())
    report.counts.update(
        version=plan.version,
        tokenizer_sha256=plan.tokenizer_sha256,
        train_shards=sum(s["split"] == "train" for s in shards),
        valid_shards=sum(s["split"] == "valid" for s in shards),
        train_tokens=totals["train"]["tokens"],
        valid_tokens=totals["valid"]["tokens"],
        valid_documents=totals["valid"]["documents"],
    )
    report.finish()
    lake.write_json(published, report.summary())  # published: readers see it whole from here
    lake.write_json(f"{RELEASE}/latest.json", {"version": plan.version})
    lake.delete_prefix(f"{plan.prefix}/_valid")
    lake.delete_prefix(f"{plan.prefix}/_pieces")
    return report


def _done_key(plan: Plan, piece: str) -> str:
    return f"{plan.prefix}/_pieces/{piece.replace('/', '-')}.json"


def _shard(split: str, group: str, name: str, counts: dict, outputs: dict) -> dict:
    return {
        "name": name,
        "split": split,
        "group": group,
        "documents": counts["documents"],
        "tokens": counts["tokens"],
        "bytes": sum(e["bytes"] for k, e in outputs.items() if k.startswith(name + ".")),
    }


def _valid_shards(lake: Lake, plan: Plan, name: str, group: Group, shard_tokens: int):
    """The validation documents the group's pieces met, in shuffled order, concatenated into
    shards of about `shard_tokens`; yields (counts, outputs) per shard."""
    number, current = 0, None
    try:
        for piece in range(group.shards):
            key = f"{plan.prefix}/_valid/{name}-{piece:05d}"
            index = IndexedDataset(lake.read_bytes(f"{key}.idx"), None)
            with lake.open_input(f"{key}.provenance.parquet") as f:
                rows = pq.read_table(f)
            spans = rows.column("token_end").to_numpy() - rows.column("token_start").to_numpy()
            rows = rows.drop_columns(["doc_index", "token_start", "token_end"]).append_column(
                "text_tokens", pa.array(spans, pa.int64())
            )
            data = lake.read_bytes(f"{key}.bin")
            itemsize = index.dtype.itemsize
            for doc in range(len(index)):
                size = int(index.lengths[doc])
                if current is not None and current.writer.tokens + size > shard_tokens:
                    current.__exit__(None, None, None)
                    yield {"name": current.name, **current.counts()}, current.outputs
                    number, current = number + 1, None
                if current is None:
                    shard = shard_name("valid", name, number)
                    current = _Dataset(lake, f"{plan.prefix}/{shard}", plan.dtype).__enter__()
                start = int(index.pointers[doc])
                current.add(Chunk([data[start : start + size * itemsize]], rows.slice(doc, 1)))
        if current is not None:
            current.__exit__(None, None, None)
            yield {"name": current.name, **current.counts()}, current.outputs
            current = None
    finally:
        if current is not None:  # an error: its temporary files are discarded
            current.__exit__(RuntimeError, RuntimeError("release failed"), None)


def blend(shards: list[dict], plan: Plan, split: str) -> str:
    """Megatron-LM's data path: `weight prefix` pairs, a group's weight split over its shards
    by tokens, the weights summing to 1."""
    chosen = [s for s in shards if s["split"] == split and s["tokens"]]
    group_tokens = Counter()
    for shard in chosen:
        group_tokens[shard["group"]] += shard["tokens"]
    weights = {g: plan.groups[g].weight for g in group_tokens}
    total = sum(weights.values())
    pairs = [
        (weights[s["group"]] / total * s["tokens"] / group_tokens[s["group"]], s["name"])
        for s in chosen
    ]
    return " ".join(f"{weight:.10g} {name}" for weight, name in pairs) + "\n"


def release_report(lake: Lake, version: str | None = None) -> dict:
    """A published release's marker (the latest when `version` is None)."""
    if version is None:
        if not lake.exists(f"{RELEASE}/latest.json"):
            raise MissingInputError("no release is published: materialize release first")
        version = lake.read_json(f"{RELEASE}/latest.json")["version"]
    return require_committed(lake, f"{RELEASE}/{version}", f"release {version}")
