"""Releases: a recipe's tokenized files of some crawls as training-ready Megatron datasets —
shards of about `shard_tokens` tokens, documents shuffled across the whole release, a validation
split by a hash of each document's text, a blend, every token traceable to its WARC record.

A release is planned from the tokenized units' markers alone (documents and tokens per file):
its version is a hash of the settings, the tokenizer and every input file's SHA-256. Documents
are numbered across the input files in lake order; position p of a group's shuffled order holds
document `Permutation(N, seed)(p)` (no permutation array, no per-document table: the plan holds
16 bytes per input file). Train shard k of a group is positions [k*D, (k+1)*D) (D documents make
about `shard_tokens` train tokens), without the validation documents met there; those are
collected per shard and concatenated, in shuffled order, into the validation shards by the
finishing step. The shards are written by `tokenmill.release.shards` (an external shuffle,
parallel steps), each committed with a done file; the release is published by its
`_SUCCESS.json`, written last: a reader sees a complete release or none.

Without `weights`, the crawls are one group shuffled together; with them, each weighted crawl
is a group of its own (`train-<crawl>-NNNNN`) and `blend.txt` weights its shards by the crawl's
weight, split by tokens.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from array import array
from collections import Counter
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenmill.crawl.units import registered_crawls, registered_units
from tokenmill.decontamination.removal import DECONTAMINATED_AGAINST
from tokenmill.release.permutation import mix64
from tokenmill.runtime.stage import setting
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    CLEANED,
    MARKER,
    RELEASE,
    TOKEN_PROVENANCE_SCHEMA,
    TOKENIZED_SHARDS,
    Unit,
)
from tokenmill.storage.outputs import (
    LANGUAGES_BY_FILE,
    HashingFile,
    MissingInputError,
    ParquetSink,
    StageReport,
    read_markers,
    require_committed,
)
from tokenmill.tokens.megatron import IndexedDataset, IndexedDatasetWriter

ALL = "all"  # the group of every crawl, without weights
SPLITS = ("train", "valid")
MAX_DOCUMENTS = 2**31 - 2  # Megatron's document index is int32
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


# the sidecar's columns of few distinct values; ids, URLs and numbers are written plain
SIDECAR_DICTIONARY = ["source", "crawl", "source_file", "language"]
# the columns a reader looks documents up by (a token's document, a source document): the
# min and max of ids and URLs per row group narrow nothing and cost time to keep
SIDECAR_STATISTICS = ["doc_index", "token_start", "token_end", "source_doc_index"]


def sidecar_sink(file) -> ParquetSink:
    """The writer of a release shard's provenance sidecar (zstd level 1: a third less CPU than
    3 for about the same bytes, ids and URLs)."""
    return ParquetSink(
        file,
        RELEASE_SIDECAR,
        dictionary=SIDECAR_DICTIONARY,
        statistics=SIDECAR_STATISTICS,
        level=1,
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
    language_weights: dict[str, float] = setting(
        {},
        "Blend weight per language (each language shuffled into shards of its own; every "
        "language of the release must be named); empty: no weighting by language",
    )
    language_temperature: float = setting(
        0.0,
        "Blend each language by its share of tokens to this power (mT5's 0.3 upsamples the "
        "small languages; 1: as they are), each shuffled into shards of its own; 0: off",
    )

    def __post_init__(self):
        if isinstance(self.shard_tokens, int) and self.shard_tokens < 1:
            raise ValueError(f"release.shard_tokens must be 1 or more, not {self.shard_tokens}")
        if isinstance(self.validation, int | float) and not 0 <= self.validation < 1:
            raise ValueError(f"release.validation {self.validation} is not a share in [0, 1)")
        for name, weights in (
            ("weights", self.weights),
            ("language_weights", self.language_weights),
        ):
            for key, weight in (weights or {}).items():
                if not isinstance(weight, int | float) or isinstance(weight, bool) or weight <= 0:
                    raise ValueError(f"release.{name}.{key}: {weight!r} is not a positive number")
        alpha = self.language_temperature
        if isinstance(alpha, int | float) and not 0 <= alpha <= 1:
            raise ValueError(f"release.language_temperature {alpha} is not in [0, 1]")
        chosen = [
            n for n in ("weights", "language_weights", "language_temperature") if getattr(self, n)
        ]
        if len(chosen) > 1:
            raise ValueError(f"release: {' and '.join(chosen)} cannot be set together")

    @property
    def by_language(self) -> bool:
        return bool(self.language_weights or self.language_temperature)

    def record(self) -> dict:
        """The settings as the release's version and manifest hold them: the weighting by
        language only when set (a release without it is the one made before it existed)."""
        values = asdict(self)
        if not self.by_language:
            del values["language_weights"], values["language_temperature"]
        return values


def split_draws(text_hashes: np.ndarray, split_seed: int) -> np.ndarray:
    """Each document's draw in [0, 1): a seeded hash of its text's hash. It is in the
    validation split when its draw is below the share (equal texts, one side; another crawl
    added later moves no document)."""
    with np.errstate(over="ignore"):
        key = np.asarray(text_hashes, dtype=np.uint64) ^ mix64(np.uint64(split_seed + 1))
    draws = mix64(key) >> np.uint64(11)  # 53 bits: exact as a float64
    return draws.astype(np.float64) / float(1 << 53)


def split_warnings(settings: ReleaseSettings, documents: dict[str, int], draws: dict) -> list[str]:
    """What to change when a split of the release is empty: `documents` per split, `draws`
    the lowest and highest of the documents' draws (absent from pieces written without)."""
    total, share = sum(documents.values()), settings.validation
    if not total:
        return []
    if not documents["valid"] and share > 0:
        least = f" to {_above(draws['lowest'])} or more" if "lowest" in draws else ""
        return [
            f"the validation split is empty: at validation {share}, none of the {total:,} "
            f"documents falls in it; set `validation` in the recipe's `release:` section{least} "
            "for at least one validation document"
        ]
    if not documents["train"]:
        most = f" to {_below(draws['highest'])} or less" if "highest" in draws else ""
        return [
            f"the train split is empty: at validation {share}, all {total:,} documents fall in "
            f"the validation split; set `validation` in the recipe's `release:` section{most} "
            "for at least one train document"
        ]
    return []


def _above(draw: float) -> float:
    """The shortest decimal (two significant digits) above `draw`: a share that takes it."""
    step = 10.0 ** (math.floor(math.log10(draw)) - 1) if draw > 0 else 1e-16
    return float(f"{(math.floor(draw / step) + 1) * step:.2g}")


def _below(draw: float) -> float:
    """The shortest decimal (two significant digits) at most `draw`: a share that leaves it."""
    if draw <= 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(draw)) - 1)
    return float(f"{math.floor(draw / step) * step:.2g}")


# -- planning ---------------------------------------------------------------------------------


@dataclass
class InputFiles:
    """A group's tokenized files in lake order: 8 bytes per file for the documents' prefix
    sums, 8 for where it is (its unit's number, its part), whatever the corpus's size."""

    units: list[str] = field(default_factory=list)
    unit_of: array = field(default_factory=lambda: array("i"))
    part: array = field(default_factory=lambda: array("i"))
    documents: array = field(default_factory=lambda: array("q"))  # the group's, in the file
    rows: array = field(default_factory=lambda: array("q"))  # every document of the file
    tokens: int = 0

    def __len__(self) -> int:
        return len(self.documents)

    def add(self, unit: str, part: int, documents: int, rows: int, tokens: int) -> None:
        """A tokenized file (``rows`` documents), of which ``documents`` (``tokens``) are the
        group's."""
        if not self.units or self.units[-1] != unit:
            self.units.append(unit)
        self.unit_of.append(len(self.units) - 1)
        self.part.append(part)
        self.documents.append(documents)
        self.rows.append(rows)
        self.tokens += tokens

    def starts(self) -> np.ndarray:
        """Each file's first document number in the group, and the total at the end."""
        starts = np.zeros(len(self.documents) + 1, np.int64)
        np.cumsum(np.frombuffer(self.documents, np.int64), out=starts[1:])
        return starts

    def source(self, file: int) -> str:
        unit = Unit.from_key(self.units[self.unit_of[file]])
        return unit.part_prefix(TOKENIZED_SHARDS, self.part[file])


# InputFiles' arrays, their codes
PER_FILE = {"unit_of": "i", "part": "i", "documents": "q", "rows": "q"}


@dataclass
class Group:
    files: InputFiles
    seed: int = 0
    per_shard: int = 1  # documents per train shard, validation documents included
    shards: int = 0
    weight: float = 1.0
    language: str | None = None  # a group of one language's documents of its files

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

    def to_bytes(self) -> bytes:
        """The plan as an ``.npz``: its per-file arrays, and JSON for the rest (no pickle: the
        steps load it from the lake)."""
        arrays, groups = {}, {}
        for number, (name, group) in enumerate(self.groups.items()):
            for column, code in PER_FILE.items():
                arrays[f"{number}.{column}"] = np.frombuffer(getattr(group.files, column), code)
            groups[name] = {
                "seed": group.seed,
                "per_shard": group.per_shard,
                "shards": group.shards,
                "weight": group.weight,
                "language": group.language,
                "units": group.files.units,
                "tokens": group.files.tokens,
            }
        header = {
            "version": self.version,
            "tokenizer_sha256": self.tokenizer_sha256,
            "dtype": self.dtype,
            "settings": self.settings,
            "inputs": self.inputs,
            "groups": groups,
        }
        buffer = io.BytesIO()
        np.savez(buffer, header=np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Plan:
        stored = np.load(io.BytesIO(data), allow_pickle=False)
        header = json.loads(stored["header"].tobytes())
        groups = {}
        for number, (name, fields) in enumerate(header.pop("groups").items()):
            files = InputFiles(units=fields.pop("units"), tokens=fields.pop("tokens"))
            for column, code in PER_FILE.items():
                key = (
                    f"{number}.{column}"
                    if f"{number}.{column}" in stored
                    else f"{number}.documents"
                )
                setattr(files, column, array(code, stored[key].tobytes()))  # (rows: all of them)
            groups[name] = Group(files, **fields)
        return cls(groups=groups, **header)


def plan_release(lake: Lake, settings: ReleaseSettings) -> Plan:
    """The release's inputs, version and shards, from the tokenized units' markers; fails
    naming a crawl or setting that cannot be released, before anything is written."""
    crawls = list(settings.crawls) or registered_crawls(lake)
    unknown = sorted(set(settings.weights) - set(crawls))
    if unknown:
        raise ReleaseError(f"release.weights names crawl(s) {unknown} not in the release {crawls}")
    tokenizers: dict[str, set[str]] = {}
    dtypes = set()
    groups: dict[str, Group] = {}
    inputs: dict[str, str] = {}  # unit -> the digest of its tokenized files
    for crawl in crawls:
        before = sum(group.files.tokens for group in groups.values())
        for unit in registered_units(lake, crawl):
            marker = require_committed(
                lake, unit.prefix(TOKENIZED_SHARDS), f"tokenized_shards of {unit}"
            )
            tokenizers.setdefault(marker["counts"]["tokenizer_sha256"], set()).add(crawl)
            dtypes.add(marker["counts"]["dtype"])
            itemsize = np.dtype(marker["counts"]["dtype"]).itemsize
            for part in range(marker["counts"]["files"]):
                rows = marker["outputs"][f"{part:05d}/provenance.parquet"]["rows"]
                tokens = marker["outputs"][f"{part:05d}/tokens.bin"]["bytes"] // itemsize
                for name, documents, own_tokens in _file_groups(
                    settings, crawl, unit, marker, part, rows, tokens
                ):
                    group = groups.setdefault(name, Group(InputFiles()))
                    group.language = name if settings.by_language else None
                    group.files.add(unit.key, part, documents, rows, own_tokens)
            inputs[unit.key] = unit_digest(marker)
        if sum(group.files.tokens for group in groups.values()) == before:
            raise ReleaseError(f"crawl {crawl} has no tokenized documents to release")
    if len(tokenizers) > 1:
        named = "; ".join(f"{sha[:12]}: {sorted(c)}" for sha, c in tokenizers.items())
        raise ReleaseError(f"the crawls were tokenized with different tokenizers ({named})")
    tokenizer = next(iter(tokenizers))
    if settings.by_language:
        groups = dict(sorted(groups.items()))  # by language: the same order whatever the crawls
        weigh_languages(groups, settings)
    for index, (name, group) in enumerate(groups.items()):
        shape_group(group, name, index, settings)
    version = release_version(settings, inputs, tokenizer)
    return Plan(version, groups, tokenizer, dtypes.pop(), settings.record(), inputs)


def _file_groups(settings: ReleaseSettings, crawl, unit, marker, part, rows, tokens):
    """(group, its documents, its tokens) of one tokenized file: the release's one group, its
    crawl's (crawl weights), or one per language of its documents (language weights)."""
    if not settings.by_language:
        return [(crawl if settings.weights else ALL, rows, tokens)]
    found = marker["counts"].get(LANGUAGES_BY_FILE)
    if found is None:
        raise MissingInputError(
            f"{unit}: tokenized before its files counted their languages, which a release "
            "weighting languages needs: rematerialize tokenized_shards"
        )
    per_language = found.get(f"{part:05d}", {})
    return [(language, c["documents"], c["tokens"]) for language, c in per_language.items()]


def weigh_languages(groups: dict[str, Group], settings: ReleaseSettings) -> None:
    """Each language group's blend weight: the one set for it, or its share of the release's
    tokens to the power ``language_temperature`` (normalized when blended)."""
    if settings.language_weights:
        missing = sorted(set(groups) - set(settings.language_weights))
        if missing:
            raise ReleaseError(
                f"release.language_weights does not weigh the release's languages {missing} "
                f"(it holds {sorted(groups)})"
            )
        for name, group in groups.items():
            group.weight = float(settings.language_weights[name])
        return
    total = sum(group.files.tokens for group in groups.values())
    for group in groups.values():
        group.weight = (group.files.tokens / total) ** settings.language_temperature


def release_version(settings: ReleaseSettings, inputs: dict[str, str], tokenizer: str) -> str:
    """A release's version: a hash of its settings, of each input unit's digest in lake order
    (`inputs`: unit -> `unit_digest`) and of the tokenizer."""
    identity = hashlib.sha256(json.dumps(settings.record(), sort_keys=True).encode())
    for unit, digest in inputs.items():
        identity.update(f"{unit}={digest}\n".encode())
    identity.update(tokenizer.encode())
    return identity.hexdigest()[:16]


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
    if not settings.by_language:
        group.weight = settings.weights.get(name, 1.0)


# -- writing (tokenmill.release.shards) ------------------------------------------------------


@dataclass
class Chunk:
    """Documents in release order: their token bytes and their provenance (the tokenized
    sidecar's columns, `source`, `source_doc_index` and the text's token count)."""

    data: list[bytes]
    rows: pa.Table


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
        self.sidecar = sidecar_sink(self.files[".provenance.parquet"])
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


# -- publishing -------------------------------------------------------------------------------


def decontaminated_against(lake: Lake, units: list[str]) -> dict:
    """The evaluation sets the release's documents were decontaminated against, from the
    cleaned units' markers: per set, its file's SHA-256 and how many units it checked (a set
    whose file changed between units lists each version), and the units checked against none."""
    sets: dict[str, Counter] = {}
    unchecked = 0
    prefixes = (Unit.from_key(unit).prefix(CLEANED) for unit in units)
    for marker in read_markers(lake, prefixes):
        found = (marker or {}).get("counts", {}).get(DECONTAMINATED_AGAINST, {})
        unchecked += not found
        for name, sha256 in found.items():
            sets.setdefault(name, Counter())[sha256] += 1
    return {
        "sets": {name: dict(versions) for name, versions in sorted(sets.items())},
        "units_not_checked": unchecked,
    }


def is_published(lake: Lake, plan: Plan) -> bool:
    return lake.exists(f"{plan.prefix}/{MARKER}")


def finish_release(lake: Lake, plan: Plan, settings: ReleaseSettings) -> StageReport:
    """The validation shards, `manifest.json`, `blend.txt` (train) and `blend-valid.txt`, then
    `_SUCCESS.json`, which publishes the release; a published version is returned as it is."""
    published = f"{plan.prefix}/{MARKER}"
    if is_published(lake, plan):
        return StageReport.from_summary(lake.read_json(published))
    missing = [p for p in plan.pieces() if not lake.exists(done_key(plan, p))]
    if missing:
        raise MissingInputError(f"release {plan.version}: pieces not written: {missing[:5]}")
    shards, outputs = [], {}
    totals = {
        split: {"documents": 0, "tokens": 0, "crawls": Counter(), "languages": Counter()}
        for split in SPLITS
    }
    draws = {}  # the lowest and highest split draw of every piece's documents
    for name, group in plan.groups.items():
        for number in range(group.shards):
            done = lake.read_json(done_key(plan, f"{name}/{number}"))
            for end, pick in (("lowest", min), ("highest", max)):
                if end in done.get("draws", {}):
                    draws[end] = pick(draws.get(end, done["draws"][end]), done["draws"][end])
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
    if settings.by_language:
        manifest["blend"] = language_blend(plan, settings)
    manifest["decontamination"] = decontaminated_against(lake, list(plan.inputs))
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
    documents = {split: totals[split]["documents"] for split in SPLITS}
    for warning in split_warnings(settings, documents, draws):
        report.warn(warning)
    report.finish()
    lake.write_json(published, report.summary())  # published: readers see it whole from here
    lake.write_json(f"{RELEASE}/latest.json", {"version": plan.version})
    lake.delete_prefix(f"{plan.prefix}/_valid")
    lake.delete_prefix(f"{plan.prefix}/_pieces")
    lake.delete_prefix(f"{plan.prefix}/_work")  # the shuffle's files, markers and claims
    return report


def language_blend(plan: Plan, settings: ReleaseSettings) -> dict:
    """What the blend does to each language: its share of the release's tokens, its share of
    the blend, and so how many times a training pass over the blend sees its tokens (above 1:
    upsampled, its documents repeated by the trainer's sampling; below: downsampled)."""
    tokens = sum(group.files.tokens for group in plan.groups.values())
    weights = sum(group.weight for group in plan.groups.values())
    how = (
        {"temperature": settings.language_temperature}
        if settings.language_temperature
        else {"weights": dict(settings.language_weights)}
    )
    languages = {}
    for name, group in plan.groups.items():
        share, weight = group.files.tokens / tokens, group.weight / weights
        languages[name] = {
            "tokens": group.files.tokens,
            "token_share": round(share, 6),
            "blend_share": round(weight, 6),
            "repeats": round(weight / share, 4),
        }
    return {"by": "language", **how, "languages": languages}


def done_key(plan: Plan, piece: str) -> str:
    """Where train shard `piece` is committed (by `tokenmill.release.shards`)."""
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
    shards of about `shard_tokens` (a shard ends before the document that would pass it);
    yields (counts, outputs) per shard. Each piece's documents are added in runs."""
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
            data = memoryview(lake.read_bytes(f"{key}.bin"))
            sizes = index.lengths.astype(np.int64)
            ends = np.cumsum(sizes)  # tokens of the piece's documents up to each one
            doc = 0
            while doc < len(index):
                if current is None:
                    shard = shard_name("valid", name, number)
                    current = _Dataset(lake, f"{plan.prefix}/{shard}", plan.dtype).__enter__()
                before = ends[doc - 1] if doc else 0
                room = shard_tokens - current.writer.tokens + before
                fits = int(np.searchsorted(ends, room, side="right")) - doc
                if fits <= 0 and current.writer.tokens:  # the next document starts a shard
                    current.__exit__(None, None, None)
                    yield {"name": current.name, **current.counts()}, current.outputs
                    number, current = number + 1, None
                    continue
                last = doc + max(fits, 1)  # a document longer than a shard: a shard alone
                pointers = index.pointers[doc:last].tolist()
                bytes_ = (sizes[doc:last] * index.dtype.itemsize).tolist()
                pieces = [data[p : p + b] for p, b in zip(pointers, bytes_, strict=True)]
                current.add(Chunk(pieces, rows.slice(doc, last - doc)))
                doc = last
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
