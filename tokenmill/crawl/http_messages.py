"""An HTTP response as a WARC stores it: status, headers and the body, decoded in bounded memory.

Every decoder stops at ``max_bytes`` of output while it decodes (a 4 KB gzip bomb never becomes
gigabytes): a body past the cap is a `Skip` (``body_too_large``). Transfer-Encoding ``chunked``
is undone with validated chunk sizes; Content-Encoding ``gzip``, ``deflate`` (zlib or raw),
``br`` and ``zstd`` are decoded, several in a row too. A body labeled compressed that is not
(crawlers that store the decoded body and keep the header) is kept as it is.
"""

from __future__ import annotations

import io
import re
import zlib
from dataclasses import dataclass

import brotli
import zstandard


class Skip(Exception):
    """A record that yields no document; `reason` is a short, countable label."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
DEFAULT_MAX_BODY_BYTES = 8 << 20
STEP = 1 << 20  # output per decoder call
ZSTD_MAX_WINDOW = 8 << 20  # what HTTP clients accept (RFC 9659)
CHUNK_SIZE = re.compile(rb"[ \t]*([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?")
CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.I)
LOOKS_DECODED = re.compile(rb"\s*<")


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def mime(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def declared_charset(self) -> str | None:
        match = CHARSET.search(self.headers.get("content-type", ""))
        return match.group(1).lower() if match else None

    def decoded(self, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> HttpResponse:
        """The response with its body's transfer and content encodings undone."""
        return HttpResponse(
            self.status, self.headers, decode_body(self.body, self.headers, max_bytes)
        )


def parse_http_head(block: bytes) -> HttpResponse:
    """Status and headers of an HTTP response block; its body still encoded."""
    if not block.startswith(b"HTTP/"):  # e.g. Heritrix's dns: responses
        raise Skip("non_http", repr(block[:40]))
    head, sep, body = block.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = block.partition(b"\n\n")
    lines = head.decode("latin-1").splitlines()
    if not sep or not lines or not lines[0].startswith("HTTP/"):
        raise Skip("bad_http", "no HTTP status line and header block")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError) as error:
        raise Skip("bad_http", f"status line {lines[0][:60]!r}") from error
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return HttpResponse(status, headers, body)


def parse_http_response(block: bytes, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> HttpResponse:
    return parse_http_head(block).decoded(max_bytes)


def decode_body(body: bytes, headers: dict[str, str], max_bytes: int) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = dechunk(body, max_bytes)
    codings = [c.strip() for c in headers.get("content-encoding", "").lower().split(",")]
    for coding in reversed([c for c in codings if c and c != "identity"]):
        body = decompress(body, coding, max_bytes)
    return body


def dechunk(body: bytes, max_bytes: int) -> bytes:
    """The chunks' data; a body that does not start with a valid chunk size is kept as it is
    (not actually chunked), one that goes wrong later ends there."""
    out, pos = bytearray(), 0
    while pos < len(body):
        line_end = body.find(b"\r\n", pos, pos + 4096)
        match = CHUNK_SIZE.fullmatch(body, pos, line_end) if line_end >= 0 else None
        if match is None:
            if pos == 0:
                return body
            break
        size = int(match.group(1), 16)
        if size == 0:
            break
        start = line_end + 2
        if len(out) + min(size, len(body) - start) > max_bytes:
            raise Skip("body_too_large", f"chunked body > {max_bytes} bytes")
        out += body[start : start + size]
        pos = start + size + 2
    return bytes(out)


def decompress(body: bytes, coding: str, max_bytes: int) -> bytes:
    """`body` decoded from `coding`, never more than `max_bytes` of it held."""
    try:
        if coding in ("gzip", "x-gzip"):
            if not body.startswith(GZIP_MAGIC):
                return body  # some crawlers (ClueWeb) store the decoded body, keep the header
            return _inflate(body, 16 + zlib.MAX_WBITS, coding, max_bytes)
        if coding == "deflate":
            try:
                return _inflate(body, zlib.MAX_WBITS, coding, max_bytes)
            except zlib.error:
                if LOOKS_DECODED.match(body):
                    return body
                return _inflate(body, -zlib.MAX_WBITS, coding, max_bytes)
        if coding == "br":
            try:
                return _unbrotli(body, max_bytes)
            except brotli.error:
                if LOOKS_DECODED.match(body):
                    return body
                raise
        if coding == "zstd":
            if not body.startswith(ZSTD_MAGIC):
                return body
            return _unzstd(body, max_bytes)
    except (zlib.error, brotli.error, zstandard.ZstdError) as error:
        raise Skip("bad_content_encoding", f"{coding}: {error}") from error
    return body  # an unknown coding: the body goes on as it is (and may look binary)


def _too_large(coding: str, max_bytes: int) -> Skip:
    return Skip("body_too_large", f"{coding} body decompresses past {max_bytes} bytes")


def _inflate(body: bytes, wbits: int, coding: str, max_bytes: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = bytearray(inflater.decompress(body, max_bytes + 1))
    while inflater.unconsumed_tail and len(out) <= max_bytes:
        out += inflater.decompress(inflater.unconsumed_tail, max_bytes + 1 - len(out))
    if len(out) > max_bytes:
        raise _too_large(coding, max_bytes)
    return bytes(out)


def _unbrotli(body: bytes, max_bytes: int) -> bytes:
    decoder = brotli.Decompressor()
    out = bytearray(decoder.process(body, output_buffer_limit=STEP))
    while not decoder.can_accept_more_data() and len(out) <= max_bytes:
        out += decoder.process(b"", output_buffer_limit=STEP)
    if len(out) > max_bytes:
        raise _too_large("br", max_bytes)
    return bytes(out)


def _unzstd(body: bytes, max_bytes: int) -> bytes:
    decoder = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    out = bytearray()
    with decoder.stream_reader(io.BytesIO(body), read_across_frames=True) as reader:
        while len(out) <= max_bytes:
            piece = reader.read(min(STEP, max_bytes + 1 - len(out)))
            if not piece:
                break
            out += piece
    if len(out) > max_bytes:
        raise _too_large("zstd", max_bytes)
    return bytes(out)
