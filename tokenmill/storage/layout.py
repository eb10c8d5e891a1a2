"""Where everything lives in the lake, and the columns of every Parquet output.

Each stage's zone is the stage's name (`cleaned/`, `dedup_signatures/`, ...). A unit of work is
a group of WARC files of one crawl; per-unit stages keep one part per file under it:

    landing/<crawl>/...                    files dropped in (a crawl's default source)
    crawls/<crawl>.json                    a crawl declared by a paths file or a prefix
    manifests/<crawl>/<unit>.json          the unit's files (append-only)
    <stage>/<crawl>/<unit>/_SUCCESS.json   a per-unit stage's committed unit
    <stage>/<crawl>/<unit>/<part>/...      its output for the unit's file number <part>
    <stage>/<crawl>/...                    a per-crawl stage
    <stage>/...                            a stage of the whole lake (the tokenizer)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from tokenmill.storage.lake import LakeKeyError

LANDING = "landing"
CRAWLS = "crawls"
MANIFESTS = "manifests"
MARKER = "_SUCCESS.json"

RAW_CRAWL = "raw_crawl"
EXTRACTED = "extracted"
SCORED = "scored"
SCORE_DISTRIBUTION = "score_distribution"
EVAL_INDEX = "eval_index"
EVAL_SETS = "eval_sets"  # eval_index's index of each version of a set file, by its SHA-256
CLEANED = "cleaned"
DEDUP_SIGNATURES = "dedup_signatures"
DEDUP_CLUSTERS = "dedup_clusters"
DEDUPLICATED = "deduplicated"
TOKENIZER = "tokenizer"
TOKENIZED_SHARDS = "tokenized_shards"
RELEASE = "release"
TOKENIZER_KEY = f"{TOKENIZER}/tokenizer.json"

# Crawl and unit names become lake keys, partition keys and run tags: letters, digits, and
# `-_.` inside, nothing a path, a shell, a terminal or Dagster's key syntax would read.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_name(name: str, what: str = "name") -> str:
    if not isinstance(name, str) or not SAFE_NAME.match(name) or ".." in name:
        raise LakeKeyError(
            f"invalid {what} {name!r}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True, order=True)
class Unit:
    """A group of WARC files of one crawl: the partition of every per-unit stage."""

    crawl: str
    name: str

    def __post_init__(self):
        check_name(self.crawl, "crawl name")
        check_name(self.name, "unit name")

    @property
    def key(self) -> str:
        """The partition key: `<crawl>/<unit>`."""
        return f"{self.crawl}/{self.name}"

    @classmethod
    def from_key(cls, key: str) -> Unit:
        crawl, slash, name = key.partition("/")
        if not slash:
            raise LakeKeyError(f"invalid unit key {key!r}: expected <crawl>/<unit>")
        return cls(crawl, name)

    def prefix(self, zone: str) -> str:
        return f"{zone}/{self.crawl}/{self.name}"

    def part_prefix(self, zone: str, part: int) -> str:
        return f"{self.prefix(zone)}/{part_name(part)}"

    @property
    def manifest_key(self) -> str:
        return f"{MANIFESTS}/{self.crawl}/{self.name}.json"

    def __str__(self) -> str:
        return self.key


def unit_name(index: int) -> str:
    return f"{index:05d}"


def part_name(part: int) -> str:
    return f"{part:05d}"


def crawl_prefix(zone: str, crawl: str) -> str:
    return f"{zone}/{check_name(crawl, 'crawl name')}"


# A whole file no retry can read (not WARC, gone, a symbolic link): the drop and quarantine
# reason, and the counts entry {file: why} that names it in a part's and its unit's marker.
UNUSABLE_FILE = "unusable_file"
UNUSABLE_FILES = "unusable_files"
# extracted meets raw_crawl's unreadable records again and drops them as "unreadable:<why>"
UNREADABLE = "unreadable"


def never_read(reason: str) -> bool:
    """A drop that is not one of the stage's records in: a whole unusable file (one drop per
    file), or an unreadable record met again after raw_crawl."""
    return reason == UNUSABLE_FILE or reason.startswith(f"{UNREADABLE}:")


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
# What every document carries from the WARC record it came from. `source_file` is where the
# record is read from: the source URI (read in place) or the lake key of the raw copy.
PROVENANCE_FIELDS = [
    ("doc_id", pa.string()),
    ("crawl", pa.string()),
    ("unit", pa.string()),
    ("part", pa.int32()),
    ("source_file", pa.string()),
    ("record_id", pa.string()),
    ("record_offset", pa.int64()),
    ("record_length", pa.int64()),
    ("url", pa.string()),
    ("warc_date", pa.string()),
]
DOC_SCHEMA = pa.schema(
    PROVENANCE_FIELDS
    + [
        ("charset", pa.string()),
        ("language", pa.string()),
        ("language_score", pa.float64()),
        ("text", pa.string()),
    ]
)
REJECTED_SCHEMA = pa.schema(
    PROVENANCE_FIELDS + [("filter", pa.string()), ("reason", pa.string()), ("text", pa.string())]
)
# cleaned's contamination.parquet: each passage of a kept document found in an evaluation
# item (start, end: characters into the document's text as extracted; ngram: its first n-gram)
CONTAMINATION_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("url", pa.string()),
        ("set", pa.string()),
        ("item", pa.string()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("ngram", pa.string()),
        ("action", pa.string()),
    ]
)
# The document tables' columns with few distinct values in a file, dictionary-encoded; not the
# others (ids, URLs, offsets, text, signals): a dictionary tried on distinct values costs time
# to write and to read (benchmarks/bench_clean.py).
DOC_DICTIONARY = ["crawl", "unit", "part", "source_file", "charset", "language", "filter", "reason"]
QUALITY_COLUMN = "quality_score"


def band_column(band: int) -> str:
    return f"band_{band:02d}"


def signature_schema(bands: int) -> pa.Schema:
    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("warc_date", pa.string()),
            ("exact_hash", pa.uint64()),
            (QUALITY_COLUMN, pa.float64()),
        ]
        + [(band_column(b), pa.uint64()) for b in range(bands)]
        # what lets another recipe take these keys instead of hashing the same document again
        # (`tokenmill.dedup.signature_reuse`): its text and language's hash, its word count
        + [("text_key", pa.uint64()), ("words", pa.uint32())]
    )


CLUSTER_SCHEMA = pa.schema(
    [
        ("unit", pa.string()),
        ("part", pa.int32()),
        ("doc_id", pa.string()),
        ("cluster_id", pa.string()),
        ("survivor_unit", pa.string()),
        ("survivor_doc_id", pa.string()),
        ("reason", pa.string()),
    ]
)
REMOVED_SCHEMA = pa.schema(
    [f for f in DOC_SCHEMA if f.name != "text"]
    + [f for f in CLUSTER_SCHEMA if f.name not in ("unit", "part", "doc_id")]
)
TOKEN_PROVENANCE_SCHEMA = pa.schema(
    [
        ("doc_index", pa.int64()),
        ("doc_id", pa.string()),
        ("crawl", pa.string()),
        ("source_file", pa.string()),
        ("record_id", pa.string()),
        ("record_offset", pa.int64()),
        ("url", pa.string()),
        ("language", pa.string()),
        ("token_start", pa.int64()),
        ("token_end", pa.int64()),
        # xxh3-64 of the document's text: equal texts, equal hashes (a release's split key)
        ("text_hash", pa.uint64()),
    ]
)
