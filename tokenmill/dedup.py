"""Exact and MinHash near-duplicate removal within a crawl, FineWeb style, in three steps.

1. signatures (per file of a unit): normalized-content hash and LSH band hashes per document.
2. clusters (per crawl): docs sharing the content hash or any band bucket are linked, one key
   column at a time so memory stays O(documents); each cluster keeps one survivor chosen by a
   deterministic rule, and every other member is listed with its cluster and survivor.
3. deduplicated (per file of a unit): the cleaned documents minus the listed ones.

The stages `dedup_signatures`, `dedup_clusters` and `deduplicated` run these functions.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from tokenmill.lake import Lake
from tokenmill.layout import (
    CLEANED,
    DOC_SCHEMA,
    QUALITY_COLUMN,
    REMOVED_SCHEMA,
    Unit,
    band_column,
    signature_schema,
)
from tokenmill.minhash import MinHasher, TextNorm, band_hashes, optimal_bands_rows
from tokenmill.outputs import (
    PartitionWriter,
    StageReport,
    read_batches,
    require_committed,
)
from tokenmill.stage import Work, setting

SURVIVOR_RULES = ("first_seen", "earliest_date", "lowest_doc_id", "highest_quality")
SHORT_DOC_RULES = ("exact", "keep")
CLUSTERS_FILE = "clusters.parquet"


@dataclass(frozen=True)
class DedupSettings:
    """``survivor`` picks the document each cluster keeps (ties go to the first seen, i.e. the
    lowest position in (unit, file, row) order): ``first_seen``; ``earliest_date`` (WARC
    capture date); ``lowest_doc_id``; ``highest_quality`` (see ``quality_scores``).

    ``norm_numbers`` and ``norm_diacritics`` are the ``TextNorm`` steps (datatrove's defaults).

    ``short_docs`` decides the documents with fewer than ``ngram`` words (and at least one):
    they have no word n-gram, so no MinHash; ``exact`` removes them as exact duplicates only
    (same normalized text), ``keep`` never removes them, as datatrove, which gives them no
    signature. Documents without words are never duplicates under either rule.
    """

    ngram: int = setting(5, "Words per shingle")
    bands: int = setting(14, "LSH bands")
    rows: int = setting(8, "Rows (permutations) per band")
    threshold: float | None = setting(
        None, "Target Jaccard similarity; overrides bands/rows if set"
    )
    seed: int = setting(1, "Seed of the MinHash permutations")
    # datasketch's 64-bit permutation scheme with a 64-bit shingle hash; "affine32" is
    # datasketch's default and about 30 % faster; "datatrove" gives datatrove's (FineWeb's)
    # signatures for the same n-grams, at a fourth to a sixth of the speed (see ``MinHasher``).
    scheme: Literal["affine64", "affine32", "datatrove"] = setting(
        "affine64",
        "MinHash scheme: datasketch's with 64-bit (default) or 32-bit hashes, or datatrove's "
        "(SHA-1 shingles, its permutations: FineWeb's signatures, 4-6x slower)",
    )
    survivor: Literal[SURVIVOR_RULES] = setting(
        "first_seen",
        "Which member of a duplicate cluster is kept: first_seen | earliest_date | "
        "lowest_doc_id | highest_quality (the cleaned docs' quality_score, else most words)",
    )
    norm_numbers: bool = setting(
        True, "Digit runs become 0 before shingling (as datatrove/FineWeb)"
    )
    norm_diacritics: bool = setting(True, "Diacritics dropped before shingling (as datatrove)")
    cluster_memory_gb: float = setting(
        4.0, "Peak memory of each clustering process: the key columns are split into parts"
    )
    cluster_workers: int = setting(1, "Processes computing clustering parts at once")
    short_docs: Literal[SHORT_DOC_RULES] = setting(
        "exact",
        "Docs with fewer words than ngram: removed as exact duplicates only (exact) or never "
        "removed (keep, as datatrove)",
    )

    def __post_init__(self):
        if self.survivor not in SURVIVOR_RULES:
            raise ValueError(f"survivor must be one of {SURVIVOR_RULES}, not {self.survivor!r}")
        if self.short_docs not in SHORT_DOC_RULES:
            raise ValueError(
                f"short_docs must be one of {SHORT_DOC_RULES}, not {self.short_docs!r}"
            )
        if self.threshold is not None and not 0 < self.threshold < 1:
            raise ValueError(f"threshold must lie strictly between 0 and 1, not {self.threshold}")

    def banding(self) -> tuple[int, int]:
        """(bands, rows): as given, or datasketch's optimum for ``threshold`` over the same
        number of permutations (bands × rows)."""
        if self.threshold is None:
            return self.bands, self.rows
        return optimal_bands_rows(self.threshold, self.bands * self.rows)

    def text_norm(self) -> TextNorm:
        return TextNorm(norm_numbers=self.norm_numbers, norm_diacritics=self.norm_diacritics)

    def signature_params(self) -> dict:
        bands, rows = self.banding()
        return {
            "ngram": self.ngram,
            "bands": bands,
            "rows": rows,
            "seed": self.seed,
            "scheme": self.scheme,
            "norm_numbers": self.norm_numbers,
            "norm_diacritics": self.norm_diacritics,
            "short_docs": self.short_docs,
        }


def quality_scores(batch: pa.RecordBatch, word_counts: np.ndarray) -> np.ndarray:
    """The cleaned docs' ``quality_score`` column if they have one (a missing score ranks
    last); otherwise the word count of the normalized text, so that among near-duplicates the
    most complete copy (not a truncated or excerpted one) survives."""
    if QUALITY_COLUMN not in batch.schema.names:
        return word_counts.astype(np.float64)
    given = batch.column(QUALITY_COLUMN).cast(pa.float64())
    return given.fill_null(-np.inf).to_numpy(zero_copy_only=False)


def compute_signatures(work: Work) -> StageReport:
    lake, settings = work.lake, work.settings or DedupSettings()
    source = work.input(CLEANED)
    require_committed(lake, source, f"cleaned {work.unit} file {work.part}")
    bands, rows = settings.banding()
    hasher = MinHasher(
        num_perm=bands * rows,
        ngram=settings.ngram,
        seed=settings.seed,
        scheme=settings.scheme,
        norm=settings.text_norm(),
    )
    schema = signature_schema(bands)
    docs_key = f"{source}/docs.parquet"
    columns = ["doc_id", "warc_date", "text"]
    if QUALITY_COLUMN in _parquet_schema(lake, docs_key).names:
        columns.append(QUALITY_COLUMN)
    report = StageReport()
    with work.writer(report) as out:
        sink = out.parquet("signatures.parquet", schema)
        for batch in read_batches(lake, docs_key, columns):
            texts = batch.column("text")
            hashed = hasher.hash_documents(texts)
            band_values = band_hashes(hashed.signatures, bands, rows)
            exact = hashed.content_hashes
            _unlink_short_docs(batch, hashed.word_counts, band_values, exact, settings, report)
            table = pa.table(
                {
                    "doc_id": batch.column("doc_id"),
                    "warc_date": batch.column("warc_date"),
                    "exact_hash": exact,
                    QUALITY_COLUMN: quality_scores(batch, hashed.word_counts),
                }
                | {band_column(b): band_values[:, b] for b in range(bands)}
            )
            sink.write_table(table)
            report.records_in += batch.num_rows
            report.bytes_in += int(pc.sum(pc.binary_length(texts)).as_py() or 0)
        report.records_out = report.records_in
        report.counts["params"] = settings.signature_params()
    return report


def _unlink_short_docs(batch, word_counts, band_values, exact, settings, report) -> None:
    """Give documents with fewer than ``ngram`` words keys no other document has: band keys
    always (their one-shingle MinHash would only restate their exact hash), the exact hash too
    if they have no words or ``settings.short_docs`` is ``keep``."""
    short = word_counts < settings.ngram
    if not short.any():
        return
    unmatched = short if settings.short_docs == "keep" else word_counts == 0
    doc_ids = batch.column("doc_id")
    band_values[short] = _own_keys(doc_ids.filter(pa.array(short)))[:, None]
    exact[unmatched] = _own_keys(doc_ids.filter(pa.array(unmatched)))
    for name, count in (
        ("docs_without_words", int((word_counts == 0).sum())),
        ("docs_shorter_than_ngram", int((short & (word_counts > 0)).sum())),
    ):
        report.counts[name] = report.counts.get(name, 0) + count


def _own_keys(doc_ids: pa.Array) -> np.ndarray:
    """A key per document that no other document has (doc ids are unique in a crawl)."""
    keys = [xxhash.xxh3_64_intdigest(f"no-words/{doc_id}".encode()) for doc_id in doc_ids]
    return np.array(keys, dtype=np.uint64)


def _parquet_schema(lake: Lake, key: str) -> pa.Schema:
    with lake.open_input(key) as f:
        return pq.read_schema(f)


def compute_clusters(
    lake: Lake, units: list[Unit], settings: DedupSettings, out: PartitionWriter
) -> StageReport:
    """Cluster a crawl's documents and write the removed ones, in (unit, file, row) order, in
    parts of bounded memory (see ``tokenmill.dedup_parts``). Cluster ids are the doc id of the
    cluster's first-seen member, so they do not change with the survivor rule.
    `counts["unit_versions"]` holds, per unit, a hash of its removed rows."""
    from tokenmill.dedup_parts import cluster_crawl  # it builds on this module

    return cluster_crawl(lake, units, settings, out)


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


def filter_part(work: Work, clusters_key: str) -> StageReport:
    """The file's cleaned documents without the ones its crawl's clusters remove."""
    lake, unit = work.lake, work.unit
    source = work.input(CLEANED)
    require_committed(lake, source, f"cleaned {unit} file {work.part}")
    with lake.open_input(clusters_key) as f:
        clusters = pq.read_table(
            f, filters=(pc.field("unit") == unit.name) & (pc.field("part") == work.part)
        )
    removed = pl.from_arrow(clusters.drop_columns(["unit", "part"]))
    report = StageReport()
    with work.writer(report) as out:
        docs = out.parquet("docs.parquet", DOC_SCHEMA)
        removed_docs = out.parquet("removed.parquet", REMOVED_SCHEMA)
        for batch in read_batches(lake, f"{source}/docs.parquet"):
            frame = pl.from_arrow(pa.Table.from_batches([batch]))
            kept = frame.join(removed, on="doc_id", how="anti", maintain_order="left")
            dropped = frame.drop("text").join(
                removed, on="doc_id", how="inner", maintain_order="left"
            )
            docs.write_table(kept.to_arrow())
            removed_docs.write_table(dropped.to_arrow())
            report.records_in += frame.height
            report.records_out += kept.height
            report.bytes_in += int(frame["text"].str.len_bytes().sum() or 0)
            for reason, count in dropped.group_by("reason").len().iter_rows():
                report.drop(reason, count)
            report.add_preview(dropped.head(5).to_dicts())
    return report
