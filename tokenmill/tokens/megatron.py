"""Megatron-LM indexed dataset (`.bin` + `.idx`), as read by Megatron, NeMo and datatrove.

`.bin` holds the tokens of all documents back to back, no header. `.idx` holds: magic
`MMIDIDX\\x00\\x00`, u64 version 1, u8 dtype code, u64 sequence count N, u64 document count N+1,
int32[N] sequence lengths, int64[N] byte pointers into `.bin`, int64[N+1] document indices
(0, 1, ..., N: one sequence per document). All little-endian.
"""

from __future__ import annotations

import struct
from array import array
from typing import IO

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.uint16): 8,
}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 65536 else np.dtype(np.int32)


class IndexedDatasetWriter:
    """Appends documents to `.bin` as they come; only their lengths are kept until `.idx`."""

    def __init__(self, bin_file: IO[bytes], dtype: np.dtype):
        self.bin_file = bin_file
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.lengths = array("i")
        self.tokens = 0

    def add_document(self, tokens: np.ndarray) -> None:
        self.bin_file.write(np.asarray(tokens, dtype=self.dtype).tobytes())
        self.lengths.append(len(tokens))
        self.tokens += len(tokens)

    def add_documents(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Several documents at once: their tokens back to back, and each one's length."""
        self.bin_file.write(np.asarray(tokens, dtype=self.dtype).tobytes())
        self.lengths.extend(np.asarray(lengths, dtype=np.int32).tolist())
        self.tokens += len(tokens)

    def write_index(self, idx_file: IO[bytes]) -> None:
        write_index(idx_file, np.frombuffer(self.lengths, dtype=np.int32), self.dtype)


def write_index(idx_file: IO[bytes], lengths: np.ndarray, dtype: np.dtype) -> None:
    """The `.idx` of documents of `lengths` tokens stored back to back in `.bin`."""
    dtype = np.dtype(dtype).newbyteorder("<")
    lengths = np.asarray(lengths).astype("<i4")
    pointers = np.zeros(len(lengths), dtype="<i8")
    np.cumsum(lengths[:-1].astype(np.int64) * dtype.itemsize, out=pointers[1:])
    count = len(lengths)
    idx_file.write(MAGIC)
    idx_file.write(struct.pack("<Q", VERSION))
    idx_file.write(struct.pack("<B", DTYPE_CODES[dtype.newbyteorder("=")]))
    idx_file.write(struct.pack("<Q", count))
    idx_file.write(struct.pack("<Q", count + 1))
    idx_file.write(lengths.tobytes())
    idx_file.write(pointers.tobytes())
    idx_file.write(np.arange(count + 1, dtype="<i8").tobytes())


class IndexedDataset:
    """Reads an indexed dataset from the bytes of its `.idx` and a seekable `.bin`."""

    def __init__(self, idx: bytes, bin_file):
        if idx[:9] != MAGIC:
            raise ValueError("not a Megatron indexed dataset index (bad magic)")
        version, code, count, _documents = struct.unpack_from("<QBQQ", idx, 9)
        if version != VERSION:
            raise ValueError(f"unsupported index version {version}")
        self.dtype = CODE_DTYPES[code].newbyteorder("<")
        offset = 9 + 8 + 1 + 8 + 8
        self.lengths = np.frombuffer(idx, "<i4", count, offset)
        self.pointers = np.frombuffer(idx, "<i8", count, offset + 4 * count)
        self.bin_file = bin_file

    def __len__(self) -> int:
        return len(self.lengths)

    def document(self, index: int) -> np.ndarray:
        self.bin_file.seek(int(self.pointers[index]))
        data = self.bin_file.read(int(self.lengths[index]) * self.dtype.itemsize)
        return np.frombuffer(data, self.dtype)
