"""Streaming WARC reader that survives damage.

A `.warc.gz` file is a series of gzip members, one record each; a record's offset is where its
member starts, so (file, offset) locates it for lineage and for ranged reads. A member that does
not decompress, or a record shorter than its Content-Length, is yielded as a `BadRecord` (with
its raw bytes, capped, so it can be kept aside) and reading resumes at the next gzip member.
Plain `.warc` files are read the same way, record by record.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b\x08"
READ_SIZE = 1 << 20
DEFAULT_MAX_RECORD_BYTES = 64 << 20
QUARANTINE_BYTES = 1 << 20
MAX_HEADER_BYTES = 1 << 20


class UnusableInputError(ValueError):
    """A whole input file that cannot be read as WARC."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True, slots=True)
class WarcRecord:
    offset: int
    length: int
    headers: dict[str, str]
    block: bytes

    @property
    def type(self) -> str:
        return self.headers.get("WARC-Type", "")

    @property
    def record_id(self) -> str:
        return self.headers.get("WARC-Record-ID", "")

    @property
    def target_uri(self) -> str:
        return self.headers.get("WARC-Target-URI", "")

    @property
    def date(self) -> str:
        return self.headers.get("WARC-Date", "")


@dataclass(frozen=True, slots=True)
class BadRecord:
    offset: int
    length: int
    reason: str  # a short label to count by
    detail: str
    raw: bytes


class _Source:
    """A byte stream with a window that can be searched and consumed; tracks file offsets."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.buffer = bytearray()
        self.offset = 0
        self.exhausted = False

    def fill(self, at_least: int = 1) -> bool:
        while len(self.buffer) < at_least and not self.exhausted:
            chunk = self.stream.read(READ_SIZE)
            if chunk:
                self.buffer += chunk
            else:
                self.exhausted = True
        return len(self.buffer) >= at_least

    def consume(self, n: int) -> bytes:
        taken = bytes(self.buffer[:n])
        del self.buffer[:n]
        self.offset += n
        return taken

    def find(self, needle: bytes, start: int = 0, limit: int = MAX_HEADER_BYTES) -> int:
        """Position of `needle` in the window at or after `start`, reading on until found, EOF
        or a window of `limit` bytes (-1 if not found)."""
        while True:
            pos = self.buffer.find(needle, start)
            if pos >= 0 or self.exhausted or len(self.buffer) >= limit:
                return pos
            start = max(start, len(self.buffer) - len(needle) + 1)
            self.fill(len(self.buffer) + READ_SIZE)

    def skip(self, n: int) -> tuple[int, bytes]:
        """Consume up to `n` bytes without holding more than a read's worth of them; returns
        how many were there and the first QUARANTINE_BYTES of them."""
        self.fill(min(n, QUARANTINE_BYTES))
        raw = bytes(self.buffer[: min(n, QUARANTINE_BYTES)])
        skipped = 0
        while skipped < n and self.fill():
            step = min(n - skipped, len(self.buffer))
            del self.buffer[:step]
            self.offset += step
            skipped += step
        return skipped, raw

    def skip_until(self, needle: bytes, start: int) -> tuple[int, bytes]:
        """Consume the bytes before the next `needle` at or after window position `start` (or
        up to EOF) in bounded memory; returns how many and the first QUARANTINE_BYTES."""
        self.fill(QUARANTINE_BYTES)
        raw = bytes(self.buffer[:QUARANTINE_BYTES])
        skipped = 0
        while True:
            pos = self.buffer.find(needle, start)
            if pos < 0 and self.exhausted:
                pos = len(self.buffer)
            if pos >= 0:
                del self.buffer[:pos]
                self.offset += pos
                skipped += pos
                return skipped, raw[:skipped]
            # Keep only a possible partial needle at the end of the window.
            drop = max(len(self.buffer) - len(needle) + 1, 0)
            del self.buffer[:drop]
            self.offset += drop
            skipped += drop
            start = max(start - drop, 0)
            self.fill(len(self.buffer) + READ_SIZE)


def iter_records(
    stream: BinaryIO, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, name: str = "input"
) -> Iterator[WarcRecord | BadRecord]:
    """Records of a WARC stream; raises `UnusableInputError` if it is not WARC at all."""
    source = _Source(stream)
    source.fill(READ_SIZE)
    if not source.buffer:
        return
    check_format(bytes(source.buffer[:4096]), name)
    if source.buffer.startswith(GZIP_MAGIC[:2]):
        yield from _iter_gzip_members(source, max_record_bytes)
    else:
        yield from _iter_plain(source, max_record_bytes)


def check_format(head: bytes, name: str) -> None:
    """Fail fast on inputs that are not WARC at all (ARC, HTML, empty files, ...)."""
    if not head:
        raise UnusableInputError(name, "empty file")
    if head.startswith(GZIP_MAGIC[:2]):
        try:
            head = zlib.decompressobj(31).decompress(head, 64)
        except zlib.error as error:
            raise UnusableInputError(name, f"first gzip member is corrupt ({error})") from error
    if head.startswith(b"filedesc://"):
        raise UnusableInputError(name, "legacy ARC format is not supported; convert it to WARC")
    if not head.startswith(b"WARC/"):
        raise UnusableInputError(name, f"not a WARC file (starts with {head[:16]!r})")


def _iter_gzip_members(source: _Source, max_bytes: int) -> Iterator[WarcRecord | BadRecord]:
    while source.fill():
        if not source.buffer.startswith(GZIP_MAGIC):
            yield _skip_to(source, GZIP_MAGIC, 1, "garbage_bytes", "bytes between gzip members")
            continue
        start = source.offset
        raw = bytes(source.buffer[:QUARANTINE_BYTES])
        decompressor = zlib.decompressobj(31)
        content = bytearray()
        oversized = False
        fed = 0  # bytes of the member fed to the decompressor and still in the window
        try:
            while not decompressor.eof:
                if fed == len(source.buffer) and not source.fill(fed + 1):
                    raise EOFError
                piece = bytes(source.buffer[fed : fed + READ_SIZE])
                fed += len(piece)
                while piece and not decompressor.eof:
                    data = decompressor.decompress(piece, READ_SIZE)
                    piece = decompressor.unconsumed_tail
                    oversized = oversized or len(content) + len(data) > max_bytes
                    if oversized:
                        content.clear()
                    else:
                        content += data
                if oversized and not decompressor.eof:
                    # Drop what an oversized record has used so memory stays bounded.
                    source.consume(fed)
                    fed = 0
        except zlib.error as error:
            source.skip_until(GZIP_MAGIC, 0 if oversized else 1)
            yield _bad_since(source, start, raw, "corrupt_gzip", str(error))
            continue
        except EOFError:
            source.skip(len(source.buffer))
            yield _bad_since(source, start, raw, "truncated_gzip", "gzip member ends with the file")
            continue
        source.consume(fed - len(decompressor.unused_data))
        length = source.offset - start
        if oversized:
            yield BadRecord(start, length, "oversized_record", f"> {max_bytes} bytes", raw)
        else:
            yield from _parse_member(bytes(content), start, length, raw[:length])


def _bad_since(source: _Source, start: int, raw: bytes, reason: str, detail: str) -> BadRecord:
    length = source.offset - start
    return BadRecord(start, length, reason, detail, raw[:length])


def _parse_member(data: bytes, offset: int, length: int, raw: bytes):
    pos = 0
    while pos < len(data):
        header_end = data.find(b"\r\n\r\n", pos)
        if not data.startswith(b"WARC/", pos) or header_end < 0:
            yield BadRecord(offset, length, "not_warc_record", "no WARC header in gzip member", raw)
            return
        headers = _parse_headers(data[pos:header_end])
        content_length = _content_length(headers)
        block_start = header_end + 4
        block = data[block_start : block_start + content_length]
        if content_length < 0 or len(block) < content_length:
            detail = f"Content-Length {content_length}, {len(block)} bytes present"
            yield BadRecord(offset, length, "truncated_record", detail, raw)
            return
        yield WarcRecord(offset, length, headers, block)
        pos = block_start + content_length
        while data.startswith(b"\r\n", pos):
            pos += 2


def _iter_plain(source: _Source, max_bytes: int) -> Iterator[WarcRecord | BadRecord]:
    while source.fill():
        while source.buffer.startswith(b"\r\n"):
            source.consume(2)
        if not source.fill():
            return
        start = source.offset
        header_end = source.find(b"\r\n\r\n")
        if not source.buffer.startswith(b"WARC/") or header_end < 0:
            yield _skip_to(source, b"\r\nWARC/", 1, "not_warc_record", "no WARC header")
            continue
        headers = _parse_headers(bytes(source.buffer[:header_end]))
        content_length = _content_length(headers)
        total = header_end + 4 + max(content_length, 0)
        if total > max_bytes:
            # Streamed past, never held: memory stays bounded whatever Content-Length says.
            skipped, raw = source.skip(total)
            reason, detail = (
                ("oversized_record", f"> {max_bytes} bytes")
                if skipped == total
                else ("truncated_record", "record ends with the file")
            )
            yield BadRecord(start, skipped, reason, detail, raw)
            continue
        if not source.fill(total) or content_length < 0:
            yield _bad(source, len(source.buffer), "truncated_record", "record ends with the file")
            continue
        record = source.consume(total)
        yield WarcRecord(start, total, headers, record[header_end + 4 :])


def _parse_headers(raw: bytes) -> dict[str, str]:
    lines = raw.decode("utf-8", errors="replace").split("\r\n")
    headers: dict[str, str] = {"WARC-Version": lines[0].strip()}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip()] = value.strip()
    return headers


def _content_length(headers: dict[str, str]) -> int:
    try:
        return int(headers.get("Content-Length", "-1"))
    except ValueError:
        return -1


def _bad(source: _Source, length: int, reason: str, detail: str) -> BadRecord:
    start = source.offset
    raw = bytes(source.buffer[: min(length, QUARANTINE_BYTES)])
    source.consume(length)
    return BadRecord(start, length, reason, detail, raw)


def _skip_to(
    source: _Source, needle: bytes, search_from: int, reason: str, detail: str
) -> BadRecord:
    """Skip damaged bytes up to the next occurrence of `needle` (kept) or the end of the file."""
    start = source.offset
    skipped, raw = source.skip_until(needle, search_from)
    return BadRecord(start, skipped, reason, detail, raw)
