"""The shard format, checked by a reader written here from the format description alone."""

from __future__ import annotations

import io

import numpy as np

from testkit.formats import read_indexed_dataset
from tokenmill.tokens.megatron import IndexedDatasetWriter, token_dtype


def write(docs: list[list[int]], vocab_size: int) -> tuple[bytes, bytes]:
    bin_file, idx_file = io.BytesIO(), io.BytesIO()
    writer = IndexedDatasetWriter(bin_file, token_dtype(vocab_size))
    for doc in docs:
        writer.add_document(np.array(doc, dtype=np.int64))
    writer.write_index(idx_file)
    return idx_file.getvalue(), bin_file.getvalue()


def test_uint16_when_the_vocabulary_fits():
    docs = [[1, 2, 3], [65535, 0], [], [7]]
    idx, data = write(docs, vocab_size=50_280)
    assert idx[17] == 8 and len(data) == 6 * 2
    assert read_indexed_dataset(idx, data) == docs


def test_int32_for_large_vocabularies():
    docs = [[100_000, 1], [200_000]]
    idx, data = write(docs, vocab_size=128_256)
    assert idx[17] == 4
    assert read_indexed_dataset(idx, data) == docs


def test_empty_dataset():
    idx, data = write([], vocab_size=1000)
    assert read_indexed_dataset(idx, data) == [] and data == b""
