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
    """PNG (RFC 2083): signature, chunks with CRCs, IHDR, zlib-compressed IDAT scanlines, each
    with its filter undone; only non-interlaced 8-bit truecolour (colour type 2), truecolour
    with alpha (6), or palette colour (3, 1 to 8 bits an index, PLTE). The pixels as (height,
    width, 3) colours, or 4 with alpha."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack_from(">I", data, pos + 8 + length)
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        assert kind != b"IHDR" or not chunks, "IHDR comes first"
        chunks.setdefault(kind, []).append(body)
        pos += 12 + length
    assert kind == b"IEND"
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"][0])
    channels = {2: 3, 6: 4, 3: 1}[colour]
    assert interlace == 0 and (depth == 8 or (colour == 3 and depth in (1, 2, 4)))
    step = max(1, channels * depth // 8)  # the filters' distance to "the byte to the left"
    stride = 1 + (width * channels * depth + 7) // 8
    raw = zlib.decompress(b"".join(chunks[b"IDAT"]))
    assert len(raw) == stride * height
    above = bytearray(stride - 1)
    rows = []
    for y in range(height):
        kind, line = raw[y * stride], bytearray(raw[y * stride + 1 : (y + 1) * stride])
        assert kind in range(5), kind
        for x in range(len(line)) if kind else ():  # each byte adds its predictor, mod 256
            left = line[x - step] if x >= step else 0
            up = above[x]
            corner = above[x - step] if x >= step else 0
            if kind == 1:  # Sub
                predicted = left
            elif kind == 2:  # Up
                predicted = up
            elif kind == 3:  # Average
                predicted = (left + up) // 2
            else:  # Paeth: whichever of the three is nearest left + up - corner
                estimate = left + up - corner
                near_left, near_up = abs(estimate - left), abs(estimate - up)
                near_corner = abs(estimate - corner)
                if near_left <= near_up and near_left <= near_corner:
                    predicted = left
                else:
                    predicted = up if near_up <= near_corner else corner
            line[x] = (line[x] + predicted) & 0xFF
        above = line
        rows.append(np.frombuffer(bytes(line), "u1"))
    if colour != 3:
        return np.stack(rows).reshape(height, width, channels)
    (plte,) = chunks[b"PLTE"]
    palette = np.frombuffer(plte, "u1").reshape(-1, 3)
    bits = np.unpackbits(np.stack(rows), axis=1).reshape(height, -1, depth)
    indexes = (bits << np.arange(depth - 1, -1, -1, dtype="u1")).sum(axis=2)[:, :width]
    assert indexes.max() < len(palette)
    return palette[indexes]
