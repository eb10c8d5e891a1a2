"""Tokens another dataset of the lake already made: a new recipe keeps mostly the documents an
existing one keeps, and tokenizing them again was most of what the new recipe cost.

A document's tokens are taken from a sibling dataset's shard of the same file (another recipe
beside this one, see `Lake.siblings`) when that shard was made by the same tokenizer (its
SHA-256) with the same end-of-document token and holds the same document (its id) with the same
text (the sidecar's `text_hash`, xxh3-64 of the text it encoded). Encoding is deterministic, so
the donor's tokens are this text's encoding: the shard is byte for byte what encoding every
document would give, whatever the donor's recipe, and however stale its shard. The donor's
shard is streamed in its order (both recipes keep their documents in extraction order), never
held whole."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from tokenizers import Tokenizer

from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import TOKENIZED_SHARDS
from tokenmill.storage.outputs import (
    SiblingChanged,
    check_unchanged,
    read_table,
    sibling_outputs,
)

SPANS = ["doc_id", "token_start", "token_end"]


DonorChanged = SiblingChanged  # the donor's shard was rewritten while it was read


class Donor:
    """A sibling's committed shard of the same file, streamed document by document."""

    def __init__(self, lake: Lake, prefix: str, marker: dict, dtype: np.dtype):
        self.lake, self.prefix, self.marker, self.dtype = lake, prefix, marker, dtype
        # one row per document (tens of thousands per file): read once, the tokens streamed
        spans = read_table(lake, f"{prefix}/provenance.parquet", [*SPANS, "text_hash"])
        spans = spans.to_pydict()
        self.text_hash = dict(zip(spans["doc_id"], spans.pop("text_hash"), strict=True))
        self._documents = self._stream(spans)
        self._next: tuple[str, np.ndarray] | None = None
        self._exhausted = False

    @classmethod
    def find(cls, lake: Lake, prefix: str, sha256: str, eod_id, dtype) -> Donor | None:
        """The first sibling (by name) whose shard at `prefix` the same tokenizer made."""
        for sibling, marker in sibling_outputs(lake, TOKENIZED_SHARDS, prefix):
            counts = marker.get("counts", {})
            if (
                counts.get("tokenizer_sha256") == sha256
                and counts.get("eod_id") == eod_id
                and counts.get("dtype") == str(np.dtype(dtype))
            ):
                return cls(sibling, prefix, marker, np.dtype(dtype))
        return None

    def _stream(self, spans: dict) -> Iterator[tuple[str, np.ndarray]]:
        itemsize = self.dtype.itemsize
        with self.lake.open_stream(f"{self.prefix}/tokens.bin") as tokens:
            position = 0
            for doc_id, start, end in zip(*(spans[c] for c in SPANS), strict=True):
                if start > position:  # the previous document's end-of-document token
                    tokens.read((start - position) * itemsize)
                data = tokens.read((end - start) * itemsize)
                position = end
                yield doc_id, np.frombuffer(data, self.dtype)

    def tokens(self, doc_id: str, text_hash: int) -> np.ndarray | None:
        """The donor's tokens of `doc_id` if it encoded the same text, and the document comes
        next in the donor's order (documents the donor has before it are passed over; one it
        does not have leaves it in place)."""
        if self.text_hash.get(doc_id) != text_hash:
            return None
        while not self._exhausted:
            if self._next is None:
                self._next = next(self._documents, None)
                if self._next is None:
                    self._exhausted = True
                    return None
            donor_id, ids = self._next
            if donor_id == doc_id:
                self._next = None
                return ids
            self._next = None
        return None

    def check_unchanged(self) -> None:
        check_unchanged(self.lake, self.prefix, self.marker)


def reused_or_encoded(
    tokenizer: Tokenizer,
    doc_ids: list[str],
    texts: list[str],
    text_hashes: list[int],
    donor: Donor | None,
) -> tuple[list, int]:
    """Each document's token ids (an Encoding's list, or a donor's array) and how many came
    from the donor."""
    result = [
        donor.tokens(doc_id, text_hash) if donor else None
        for doc_id, text_hash in zip(doc_ids, text_hashes, strict=True)
    ]
    missing = [index for index, ids in enumerate(result) if ids is None]
    encodings = tokenizer.encode_batch_fast([texts[i] for i in missing], add_special_tokens=False)
    for index, encoding in zip(missing, encodings, strict=True):
        result[index] = encoding.ids
    return result, len(texts) - len(missing)
