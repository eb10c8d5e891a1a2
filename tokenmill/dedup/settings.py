"""Exact and MinHash near-duplicate removal within a crawl, FineWeb style: its settings and
what a document's signature holds besides its MinHash bands.

The stages run it in three steps: `dedup_signatures` (per file of a unit: normalized-content
hash and LSH band hashes per document), `dedup_clusters` (per crawl, `tokenmill.dedup.clustering`:
documents sharing a key are linked in parts of bounded memory, each cluster keeps one survivor
chosen by a deterministic rule) and `deduplicated` (per file: the cleaned documents minus the
listed ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import xxhash

from tokenmill.dedup.minhash import MinHasher, TextNorm, optimal_bands_rows
from tokenmill.runtime.stage import setting
from tokenmill.storage.layout import QUALITY_COLUMN

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
        # (a value of the wrong type is its annotation's to refuse, with the setting's name)
        for name in ("ngram", "bands", "rows", "cluster_workers"):
            if isinstance(getattr(self, name), int) and getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more, not {getattr(self, name)}")
        if isinstance(self.cluster_memory_gb, int | float) and self.cluster_memory_gb <= 0:
            raise ValueError(f"cluster_memory_gb must be above 0, not {self.cluster_memory_gb}")
        if self.threshold is not None and not 0 < self.threshold < 1:
            raise ValueError(f"threshold must lie strictly between 0 and 1, not {self.threshold}")

    def banding(self) -> tuple[int, int]:
        """(bands, rows): as given, or datasketch's optimum for ``threshold`` over the same
        number of permutations (bands × rows)."""
        if self.threshold is None:
            return self.bands, self.rows
        return optimal_bands_rows(self.threshold, self.bands * self.rows)

    def hasher(self) -> MinHasher:
        """The MinHash of these settings: its permutations, shingles and normalization."""
        bands, rows = self.banding()
        return MinHasher(
            num_perm=bands * rows,
            ngram=self.ngram,
            seed=self.seed,
            scheme=self.scheme,
            norm=self.text_norm(),
        )

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


def unlink_short_docs(batch, word_counts, band_values, exact, settings, report) -> None:
    """Give documents with fewer than ``ngram`` words keys no other document has: band keys
    always (their one-shingle MinHash would only restate their exact hash), the exact hash too
    if they have no words or ``settings.short_docs`` is ``keep``."""
    short = word_counts < settings.ngram
    if not short.any():
        return
    unmatched = short if settings.short_docs == "keep" else word_counts == 0
    doc_ids = batch.column("doc_id")
    band_values[short] = own_keys(doc_ids.filter(pa.array(short)))[:, None]
    exact[unmatched] = own_keys(doc_ids.filter(pa.array(unmatched)))
    for name, count in (
        ("docs_without_words", int((word_counts == 0).sum())),
        ("docs_shorter_than_ngram", int((short & (word_counts > 0)).sum())),
    ):
        report.counts[name] = report.counts.get(name, 0) + count


def own_keys(doc_ids: pa.Array) -> np.ndarray:
    """A key per document that no other document has (doc ids are unique in a crawl)."""
    keys = [xxhash.xxh3_64_intdigest(f"no-words/{doc_id}".encode()) for doc_id in doc_ids]
    return np.array(keys, dtype=np.uint64)
