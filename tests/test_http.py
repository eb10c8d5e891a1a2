"""Hostile HTTP bodies: bombs stop at the cap while decompressing, chunk sizes are validated,
charset labels come only from the WHATWG list."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib

import brotli
import pytest
import zstandard

from tokenmill.crawl.extract import decode_html, extract_document
from tokenmill.crawl.http_messages import Skip, dechunk, parse_http_response

PAGE = (
    "<html><body><article><h1>Winter gardens</h1>"
    + "<p>The soil stays cold, so the roots grow slowly and gardeners cover the beds.</p>" * 10
    + "</article></body></html>"
).encode()
CAP = 1 << 20


def response(body: bytes, *headers: str) -> bytes:
    head = "\r\n".join(["HTTP/1.1 200 OK", "Content-Type: text/html", *headers])
    return head.encode("latin-1") + b"\r\n\r\n" + body


ENCODERS = {
    "gzip": lambda data: gzip.compress(data, mtime=0),
    "deflate": zlib.compress,
    "raw-deflate": lambda data: zlib.compress(data, wbits=-15),
    "br": brotli.compress,
    "zstd": zstandard.ZstdCompressor().compress,
}


def coding(name: str) -> str:
    return "deflate" if name == "raw-deflate" else name


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_every_content_encoding_is_decoded(name):
    block = response(ENCODERS[name](PAGE), f"Content-Encoding: {coding(name)}")
    assert "Winter gardens" in extract_document(block, CAP).text


def test_stacked_encodings_are_undone_in_reverse_order():
    body = brotli.compress(gzip.compress(PAGE))
    assert (
        "Winter gardens" in extract_document(response(body, "Content-Encoding: gzip, br"), CAP).text
    )


def bomb(name: str, size: int = 256 << 20) -> bytes:
    """`size` zero bytes compressed, built a MiB at a time."""
    zeros = bytes(1 << 20)
    if name == "br":
        packer = brotli.Compressor(quality=1)
        return b"".join(packer.process(zeros) for _ in range(size >> 20)) + packer.finish()
    if name == "zstd":
        packer = zstandard.ZstdCompressor(level=1).compressobj()
    else:
        packer = zlib.compressobj(9, wbits={"gzip": 31, "deflate": 15, "raw-deflate": -15}[name])
    return b"".join(packer.compress(zeros) for _ in range(size >> 20)) + packer.flush()


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_decompression_bombs_stop_at_the_cap(name):
    """A small body that decompresses to 256 MiB: a Skip once past CAP, in bounded memory and
    time (unbounded, a 4 KB landing file takes 2.2 GB)."""
    block = response(bomb(name), f"Content-Encoding: {coding(name)}")
    assert len(block) < 2 << 20
    started = time.process_time()
    tracemalloc.start()
    try:
        with pytest.raises(Skip) as skipped:
            extract_document(block, CAP)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert skipped.value.reason == "body_too_large"
    assert str(CAP) in skipped.value.detail
    assert time.process_time() - started < 10
    assert peak < 8 * CAP


@pytest.mark.parametrize(
    "body",
    [
        b"-5\r\nabcde\r\n0\r\n\r\n",  # negative size
        b"zz\r\nabc\r\n",  # not hex
        b"0x10\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n",
        b"\xd9\xa5\r\nabcde\r\n",  # non-ASCII digit
        b"ffffffffffffffffffffffff\r\nabc\r\n",  # huge
    ],
)
def test_malformed_chunk_sizes_end_decoding_without_looping(body):
    started = time.process_time()
    out = dechunk(body, CAP)
    assert time.process_time() - started < 1
    assert len(out) <= len(body)


def test_chunked_body_is_capped_and_good_chunks_kept():
    chunk = b"%x\r\n%s\r\n" % (len(PAGE), PAGE)
    assert dechunk(chunk * 3 + b"0\r\n\r\n", CAP) == PAGE * 3
    assert dechunk(b"5\r\nhello\r\n-3\r\nabc\r\n", CAP) == b"hello"
    with pytest.raises(Skip, match="body_too_large"):
        dechunk(chunk * 3000, CAP)


def test_huge_chunk_size_in_a_small_body_keeps_what_is_there():
    assert dechunk(b"7fffffffffffff\r\n" + PAGE, CAP) == PAGE


def test_brotli_page_is_not_rejected_as_binary():
    block = response(brotli.compress(PAGE), "Content-Encoding: br")
    assert parse_http_response(block).body == PAGE


@pytest.mark.parametrize("name", ["br", "zstd", "deflate"])
def test_stale_content_encoding_keeps_the_decoded_body(name):
    assert (
        "Winter gardens" in extract_document(response(PAGE, f"Content-Encoding: {name}"), CAP).text
    )


@pytest.mark.parametrize(
    "label",
    ['"undefined"', "undefined", "punycode", "rot13", "zip", "idna", "x-user-defined", "utf-7"],
)
def test_charset_labels_outside_whatwg_fall_back_to_detection(label):
    """Python's codecs of these labels are no way to read a page: `undefined` raises on any
    input (the page would be lost), `punycode` is quadratic (34 s for 1.2 MB)."""
    body = PAGE * 400  # ~ 0.5 MB
    started = time.process_time()
    text = extract_document(response(body, f"Content-Type: text/html; charset={label}"), 8 << 20)
    assert "Winter gardens" in text.text
    assert time.process_time() - started < 10
    meta = b"<meta charset=" + label.strip('"').encode() + b">"
    html, used = decode_html(meta + PAGE, None)
    assert "Winter gardens" in html and used not in ("undefined", "punycode")


@pytest.mark.parametrize(
    ("label", "codec", "text"),
    [
        ("utf8", "utf-8", "Grüße"),
        ("latin1", "cp1252", "Grüße €5"),
        ("shift_jis", "cp932", "日本語の①"),
        ("KOI8-R", "koi8-r", "Привет"),
        ("gbk", "gb18030", "你好"),
    ],
)
def test_whatwg_labels_map_to_their_encoding(label, codec, text):
    assert decode_html(text.encode(codec), label) == (text, codec)
