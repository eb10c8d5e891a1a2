"""MinHash keys another dataset of the lake already computed: recipes over one extraction keep
mostly the same documents, and hashing them again was most of what a second recipe's
`dedup_signatures` cost.

A document's keys (exact-content hash, LSH band hashes, normalized word count) are taken from a
sibling dataset's signature file of the same file (another recipe beside this one, see
`Lake.siblings`) when that file was made with the same signature parameters and words
(`SEGMENTATION`) and holds the same document (its id) with the same text and language
(`text_key`). The keys are a function of exactly those (the language salts the hashes; a
document too short to shingle gets keys made from its id), so they are what hashing would
give, however stale the sibling's file. The sibling's file is read once per file (one row per
document), and its marker is compared at the end: a file rewritten meanwhile lends nothing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash

from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import DEDUP_SIGNATURES, band_column
from tokenmill.storage.outputs import (
    SiblingChanged,
    check_unchanged,
    read_table,
    sibling_outputs,
)
from tokenmill.text import segmenters

SIGNATURES = "signatures.parquet"
TEXT_KEY = "text_key"
SEGMENTATION = "segmentation"  # the words' version (segmenters.SEGMENTATION_VERSION) in a marker
WORDS = "words"


SignatureDonorChanged = SiblingChanged  # the sibling's file was rewritten while it was read


def text_keys(batch: pa.RecordBatch) -> np.ndarray:
    """Per document, xxh3-64 of its text and language: equal keys, equal MinHash keys."""
    languages = (
        batch.column("language").to_pylist()
        if "language" in batch.schema.names
        else [None] * batch.num_rows
    )
    return np.array(
        [
            xxhash.xxh3_64_intdigest(f"{language or ''}\0{text or ''}".encode())
            for text, language in zip(batch.column("text").to_pylist(), languages, strict=True)
        ],
        dtype=np.uint64,
    )


class SignatureDonor:
    """A sibling's committed signature file of the same file, made with the same parameters."""

    def __init__(self, lake: Lake, prefix: str, marker: dict, bands: int):
        self.lake, self.prefix, self.marker = lake, prefix, marker
        columns = ["doc_id", TEXT_KEY, WORDS, "exact_hash", *map(band_column, range(bands))]
        table = read_table(lake, f"{prefix}/{SIGNATURES}", columns)
        self.row_of = {doc_id: row for row, doc_id in enumerate(table.column("doc_id").to_pylist())}
        self.text_keys = table.column(TEXT_KEY).to_numpy()
        self.words = table.column(WORDS).to_numpy()
        self.exact = table.column("exact_hash").to_numpy()
        self.bands = np.column_stack(
            [table.column(band_column(b)).to_numpy() for b in range(bands)]
        ).reshape(table.num_rows, bands)

    @classmethod
    def find(cls, lake: Lake, prefix: str, params: dict) -> SignatureDonor | None:
        """The first sibling (by name) whose signature file at `prefix` has these parameters
        and was made from the same words (a file made before a segmenter changed lends nothing)."""
        for sibling, marker in sibling_outputs(lake, DEDUP_SIGNATURES, prefix):
            counts = marker.get("counts", {})
            if (
                counts.get("params") == params
                and counts.get(TEXT_KEY)
                and counts.get(SEGMENTATION) == segmenters.SEGMENTATION_VERSION
            ):
                return cls(sibling, prefix, marker, params["bands"])
        return None

    def lend(self, doc_ids: list[str], keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which documents the donor holds with the same text key, and their donor rows."""
        rows = np.array([self.row_of.get(doc_id, -1) for doc_id in doc_ids], dtype=np.int64)
        found = rows >= 0
        found[found] = self.text_keys[rows[found]] == keys[found]
        return found, rows[found]

    def check_unchanged(self) -> None:
        check_unchanged(self.lake, self.prefix, self.marker)
