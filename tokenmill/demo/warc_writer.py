"""A small, deterministic WARC/1.1 writer.

Every record is written as its own gzip member (the Common Crawl ``.warc.gz`` layout), so the
offset returned for a record is where its gzip member starts and a reader can seek straight to it.
Output is byte-for-byte reproducible: gzip members carry ``mtime=0`` and record ids are derived
with uuid5, never uuid4.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
import zlib
from collections.abc import Mapping
from http import HTTPStatus
from typing import BinaryIO

WARC_VERSION = b"WARC/1.1"
CRLF = b"\r\n"
_RECORD_ID_NAMESPACE = uuid.UUID("6f1e0c3a-8d1b-5c2e-9a47-2b3c4d5e6f70")
_FIRST_HEADERS = ("WARC-Type", "WARC-Date", "WARC-Record-ID")


def make_record_id(*parts: object) -> str:
    """A deterministic ``<urn:uuid:...>`` id derived from ``parts``."""
    name = "/".join(str(part) for part in parts)
    return f"<urn:uuid:{uuid.uuid5(_RECORD_ID_NAMESPACE, name)}>"


def payload_digest(payload: bytes) -> str:
    """``sha1:<base32>`` digest, the format Common Crawl uses for WARC-Payload-Digest."""
    return "sha1:" + base64.b32encode(hashlib.sha1(payload).digest()).decode("ascii")


def gzip_member(data: bytes, level: int = 6) -> bytes:
    """One complete gzip member with a zero mtime, so equal input gives equal bytes."""
    return zlib.compress(data, level=level, wbits=31)


def encode_record(warc_type: str, headers: Mapping[str, str], block: bytes) -> bytes:
    """Serialize one uncompressed WARC record.

    ``Content-Length`` defaults to ``len(block)``; a caller may pass its own value (e.g. to model
    a truncated record). WARC-Type, WARC-Date and WARC-Record-ID come first, as in Common Crawl.
    """
    fields = {"WARC-Type": warc_type, **headers}
    fields.setdefault("Content-Length", str(len(block)))
    ordered = [name for name in _FIRST_HEADERS if name in fields]
    ordered += [name for name in fields if name not in _FIRST_HEADERS]
    head = "".join(f"{name}: {fields[name]}\r\n" for name in ordered).encode("utf-8")
    return WARC_VERSION + CRLF + head + CRLF + block + CRLF + CRLF


def http_response_block(
    body: bytes,
    *,
    content_type: str,
    status: int = 200,
    extra_headers: Mapping[str, str] | None = None,
) -> bytes:
    """An HTTP/1.1 response (status line, headers, blank line, body) as stored in a WARC."""
    reason = HTTPStatus(status).phrase
    headers = {"Content-Type": content_type, "Content-Length": str(len(body))}
    headers.update(extra_headers or {})
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"HTTP/1.1 {status} {reason}\r\n{head}\r\n".encode("latin-1") + body


class WarcWriter:
    """Appends gzip-member-per-record WARC records to a binary stream."""

    def __init__(self, stream: BinaryIO, *, id_seed: str = "tokenmill-warc") -> None:
        self._stream = stream
        self._offset = stream.tell() if stream.seekable() else 0
        self._id_seed = id_seed
        self._records_written = 0

    @property
    def offset(self) -> int:
        """Byte offset where the next member will start."""
        return self._offset

    def write_raw(self, data: bytes) -> tuple[int, int]:
        """Append arbitrary bytes (e.g. a deliberately corrupt member); returns (offset, length)."""
        offset = self._offset
        self._stream.write(data)
        self._offset += len(data)
        return offset, len(data)

    def write_record(
        self, warc_type: str, headers: Mapping[str, str], block: bytes
    ) -> tuple[int, int]:
        """Write one record as its own gzip member; returns (offset, compressed_length).

        A missing WARC-Record-ID is derived from ``id_seed`` and the record's position; a missing
        WARC-Date becomes the epoch (callers should pass real dates; this only keeps output
        reproducible).
        """
        fields = dict(headers)
        if "WARC-Record-ID" not in fields:
            fields["WARC-Record-ID"] = self._next_record_id()
        fields.setdefault("WARC-Date", "1970-01-01T00:00:00Z")
        self._records_written += 1
        return self.write_raw(gzip_member(encode_record(warc_type, fields, block)))

    def write_warcinfo(
        self,
        filename: str,
        *,
        date: str,
        fields: Mapping[str, str] | None = None,
        record_id: str | None = None,
    ) -> tuple[int, int]:
        """The file's leading ``warcinfo`` record, with ``fields`` as application/warc-fields."""
        block = "".join(f"{name}: {value}\r\n" for name, value in (fields or {}).items())
        headers = {
            "WARC-Date": date,
            "WARC-Record-ID": record_id or self._next_record_id(),
            "WARC-Filename": filename,
            "Content-Type": "application/warc-fields",
        }
        return self.write_record("warcinfo", headers, block.encode("utf-8"))

    def write_request(
        self,
        url: str,
        *,
        date: str,
        record_id: str,
        concurrent_to: str | None = None,
        user_agent: str = "tokenmill-demo/1.0",
    ) -> tuple[int, int]:
        """A ``request`` record holding the GET that fetched ``url``."""
        host, _, path = url.split("://", 1)[-1].partition("/")
        block = (
            f"GET /{path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {user_agent}\r\n"
            "Accept: text/html,application/xhtml+xml;q=0.9,*/*;q=0.8\r\n"
            "Accept-Encoding: identity\r\n\r\n"
        ).encode()
        headers = {
            "WARC-Date": date,
            "WARC-Record-ID": record_id,
            "Content-Type": "application/http; msgtype=request",
            "WARC-Target-URI": url,
        }
        if concurrent_to:
            headers["WARC-Concurrent-To"] = concurrent_to
        return self.write_record("request", headers, block)

    def write_response(
        self,
        url: str,
        body: bytes,
        *,
        content_type: str = "text/html; charset=utf-8",
        date: str,
        record_id: str,
        status: int = 200,
        extra_http_headers: Mapping[str, str] | None = None,
        truncate_to: int | None = None,
    ) -> tuple[int, int]:
        """A ``response`` record wrapping an HTTP/1.1 response for ``url``.

        With ``truncate_to`` only that many bytes of the block are stored while Content-Length
        still declares the full block, the way a cut-off download looks.
        """
        block = http_response_block(
            body, content_type=content_type, status=status, extra_headers=extra_http_headers
        )
        headers = {
            "WARC-Date": date,
            "WARC-Record-ID": record_id,
            "Content-Type": "application/http; msgtype=response",
            "WARC-Target-URI": url,
            "WARC-Payload-Digest": payload_digest(body),
        }
        if truncate_to is not None:
            headers["Content-Length"] = str(len(block))
            block = block[:truncate_to]
        return self.write_record("response", headers, block)

    def _next_record_id(self) -> str:
        return make_record_id(self._id_seed, self._records_written)
