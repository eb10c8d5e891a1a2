"""The shard format, checked by a reader written here from the format description alone."""

from __future__ import annotations

import io
import struct

import numpy as np

from tokenmill.megatron import IndexedDatasetWriter, token_dtype


def read_indexed_dataset(idx: bytes, bin_data: bytes) -> list[list[int]]:
    assert idx[:9] == b"MMIDIDX\x00\x00"
    (version,) = struct.unpack_from("<Q", idx, 9)
    (code,) = struct.unpack_from("<B", idx, 17)
    count, documents = struct.unpack_from("<QQ", idx, 18)
    assert version == 1 and documents == count + 1
    dtype = {8: "<u2", 4: "<i4"}[code]
    pos = 34
    lengths = struct.unpack_from(f"<{count}i", idx, pos)
    pointers = struct.unpack_from(f"<{count}q", idx, pos + 4 * count)
    doc_index = struct.unpack_from(f"<{count + 1}q", idx, pos + 12 * count)
    assert list(doc_index) == list(range(count + 1))
    assert len(idx) == pos + 12 * count + 8 * (count + 1)
    width = np.dtype(dtype).itemsize
    return [
        np.frombuffer(bin_data[p : p + n * width], dtype).tolist()
        for p, n in zip(pointers, lengths, strict=True)
    ]


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
