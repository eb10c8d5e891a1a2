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


def read_png(data: bytes) -> np.ndarray:
    """PNG (RFC 2083): signature, chunks with CRCs, IHDR, zlib-compressed IDAT scanlines; only
    8-bit truecolour, non-interlaced, every scanline of filter type None or Sub."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack_from(">I", data, pos + 8 + length)
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, colour, interlace) == (8, 2, 0)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = 1 + 3 * width
    assert len(raw) == stride * height
    rows = []
    for y in range(height):
        kind, line = raw[y * stride], np.frombuffer(raw[y * stride + 1 : (y + 1) * stride], "u1")
        assert kind in (0, 1), kind
        if kind == 1:  # Sub: each byte adds the byte 3 to its left
            line = line.astype(np.int64)
            for x in range(3, len(line)):
                line[x] = (line[x] + line[x - 3]) % 256
        rows.append(line.astype("u1").reshape(width, 3))
    return np.stack(rows)
