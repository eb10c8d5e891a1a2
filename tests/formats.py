"""Readers written in the tests from the format descriptions alone, never from the writers."""

from __future__ import annotations

import struct
import zlib

import numpy as np


def read_indexed_dataset(idx: bytes, bin_data: bytes) -> list[list[int]]:
    """Megatron-LM indexed dataset: `.idx` header + lengths + pointers + doc indices."""
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
    assert len(bin_data) == sum(lengths) * width
    return [
        np.frombuffer(bin_data[p : p + n * width], dtype).tolist()
        for p, n in zip(pointers, lengths, strict=True)
    ]


def warc_headers_at(warc_gz: bytes, offset: int) -> dict[str, str]:
    """Headers of the WARC record whose gzip member starts at `offset` (one member per record)."""
    assert warc_gz[offset : offset + 2] == b"\x1f\x8b", f"no gzip member at offset {offset}"
    member = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(warc_gz[offset:])
    head = member.split(b"\r\n\r\n", 1)[0].decode("utf-8")
    lines = head.split("\r\n")
    assert lines[0].startswith("WARC/")
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
