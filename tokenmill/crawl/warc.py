"""Streaming WARC and ARC reader that survives damage and loses no valid record.

Input: ``.warc``, ``.warc.gz``, ``.arc``, ``.arc.gz`` and WET files (``.warc.wet.gz``). WET files
are plain WARC: their extracted text comes as records of type ``conversion`` whose block is the
page's text in UTF-8 (``WarcRecord.is_extracted_text``), never HTTP. ARC records (the Internet
Archive's legacy format) come out as WARC-style records: ``response`` with the ARC URL, date and
IP address under their WARC header names, the ``filedesc://`` record as ``warcinfo``.

Framing. A gzip file is read in one of two layouts, chosen from its first member:

- one record per member (Common Crawl, Heritrix, wget, warcio): a member's end is authoritative.
  A record never runs into the next member, and bytes left in a member after its record (a
  Content-Length too short) are quarantined, never read as a record, so page bytes cannot forge
  one. A missing or unreadable Content-Length is inferred from the member's end.
- a stream (an uncompressed file, or a file gzipped as one member or in blocks): records follow
  each other; a Content-Length that does not land on a record separator is not trusted, and
  reading resynchronizes on the next ``WARC/`` header line. Records are decompressed and yielded
  as they come, in bounded memory. In this layout a page that embeds a WARC record right where a
  too-short Content-Length ends cannot be told from a real record.

Content-Length is read from any letter case, ASCII digits only. A record's ``offset`` is where
its gzip member starts (its own offset in an uncompressed file), so (file, offset) locates it for
lineage and ranged reads; ``inner_offset`` is where it starts inside the decompressed member (0
when it starts its member). ``length`` is the length of its member(s) when it ends its member,
else its uncompressed length. A member that does not decompress, bytes that are no record, a
record shorter than its Content-Length or larger than ``max_record_bytes`` come out as
`BadRecord` with their first ``QUARANTINE_BYTES`` (compressed for gzip-level damage, decompressed
otherwise), and reading goes on after them.
"""

from __future__ import annotations

import re
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from isal import isal_zlib

GZIP_MAGIC = b"\x1f\x8b\x08"
READ_SIZE = 1 << 20
FEED_SIZE = 64 << 10  # compressed bytes per decompressor call: small leftovers per member
DEFAULT_MAX_RECORD_BYTES = 64 << 20
QUARANTINE_BYTES = 1 << 20
MAX_HEADER_BYTES = 1 << 20
# A first member this small holding one record means the file has one record per member.
LAYOUT_PROBE_BYTES = 2 << 20
MAX_DIGITS = 18  # a Content-Length with more digits is no length at all
MAX_ARC_LINE = 8192


class UnusableInputError(ValueError):
    """A whole input file that no retry can read: neither WARC, ARC nor WET, corrupt from its
    first byte, gone, or not a regular file of its source."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason

    def __reduce__(self):  # rebuilt from both arguments when it crosses a process boundary
        return type(self), (self.name, self.reason), self.__dict__


@dataclass(frozen=True, slots=True)
class WarcRecord:
    offset: int
    length: int
    headers: dict[str, str]
    block: bytes  # empty where read without blocks (``iter_records(blocks=False)``)
    inner_offset: int = 0

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

    @property
    def is_extracted_text(self) -> bool:
        """A WET ``conversion`` record: its block is already-extracted text, not HTTP."""
        return self.type == "conversion"


@dataclass(frozen=True, slots=True)
class BadRecord:
    offset: int
    length: int
    reason: str  # a short label to count by
    detail: str
    raw: bytes
    inner_offset: int = 0


class _Source:
    """The file's raw bytes in a window that can be searched and consumed; tracks offsets."""

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

    def drop(self, n: int) -> None:
        del self.buffer[:n]
        self.offset += n

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
                self.drop(pos)
                skipped += pos
                return skipped, raw[:skipped]
            # Keep only a possible partial needle at the end of the window.
            drop = max(len(self.buffer) - len(needle) + 1, 0)
            self.drop(drop)
            skipped += drop
            start = max(start - drop, 0)
            self.fill(len(self.buffer) + READ_SIZE)


class _Text:
    """A file's decompressed bytes in a window, with where each gzip member starts.

    Damage (a corrupt or truncated member, garbage between members) leaves a gap in the text;
    with ``per_member`` every member's end is a boundary too. ``fill`` never extends the
    window's usable part past the first boundary: a record never spans one.
    """

    def __init__(self, source: _Source, gzipped: bool):
        self.source = source
        self.gzipped = gzipped
        self.buf = bytearray()
        self.pos = 0  # position of buf[0] in the text
        self.marks: list[tuple[int, int]] = [(0, 0)]  # (text position, file offset) of members
        self.gaps: list[int] = []
        self.bads: list[tuple[int, BadRecord]] = []
        self.per_member = False
        self.ended = False
        self.done = False  # whether the last fill reached a boundary or the end of the file
        self._inflater = None
        self._fed = 0  # member bytes fed to the inflater and still in the source window
        self._member = 0  # file offset of the member being inflated
        if not gzipped:
            self.buf += source.buffer
            source.drop(len(source.buffer))

    @property
    def end(self) -> int:
        return self.pos + len(self.buf)

    def limit(self) -> int | None:
        """Usable bytes before the next boundary in the window, or None if there is none."""
        for gap in self.gaps:
            if gap >= self.pos:
                return gap - self.pos
        if self.per_member:
            for position, _ in self.marks:
                if position > self.pos:
                    return position - self.pos
        return None

    def fill(self, n: int) -> int:
        """Make at least `n` bytes usable if the segment has them; returns how many are."""
        while True:
            limit = self.limit()
            if limit is not None:
                self.done = True
                return limit
            if len(self.buf) >= n:
                self.done = False
                return len(self.buf)
            if self.ended:
                self.done = True
                return len(self.buf)
            self._more()

    def drop(self, n: int) -> None:
        del self.buf[:n]
        self.pos += n
        while len(self.marks) > 1 and self.marks[1][0] <= self.pos:
            del self.marks[0]

    def cross(self) -> bool:
        """Past the boundary at the window's start; False at the end of the file."""
        self.gaps = [gap for gap in self.gaps if gap > self.pos]
        return bool(self.buf or not self.ended)

    def pending(self, upto: int) -> Iterator[BadRecord]:
        while self.bads and self.bads[0][0] <= upto:
            yield self.bads.pop(0)[1]

    def covered(self, position: int) -> bool:
        """Whether a damaged member already reported covers the text at `position`."""
        offset = self.locate(position)[0]
        return any(bad.offset == offset for _, bad in self.bads)

    def locate(self, position: int) -> tuple[int, int]:
        """File offset of the member holding text `position`, and its offset inside it."""
        if not self.gzipped:
            return position, 0
        for start, offset in reversed(self.marks):
            if start <= position:
                return offset, position - start
        return self.marks[0][1], position - self.marks[0][0]

    def span(self, start: int, end: int, inner: int) -> int:
        """Length of a record: its members' bytes if it ends its member, else its own."""
        if self.gzipped and inner == 0:
            for position, offset in self.marks:
                if position == end:
                    return offset - self.locate(start)[0]
        return end - start

    # Decompression

    def _more(self) -> None:
        source = self.source
        if not self.gzipped:
            chunk = source.stream.read(READ_SIZE)
            if chunk:
                self.buf += chunk
            else:
                self.ended = True
            return
        if self._inflater is None:
            source.fill(len(GZIP_MAGIC))
            if not source.buffer:
                self.ended = True
                return
            if not source.buffer.startswith(GZIP_MAGIC):
                start = source.offset
                skipped, raw = source.skip_until(GZIP_MAGIC, 1)
                detail = "bytes between gzip members"
                self._fail(BadRecord(start, skipped, "garbage_bytes", detail, raw))
                return
            self._inflater = isal_zlib.decompressobj(31)
            self._member = source.offset
            self._fed = 0
            self.marks.append((self.end, source.offset))
        inflater = self._inflater
        try:
            if inflater.unconsumed_tail:
                data = inflater.decompress(inflater.unconsumed_tail, READ_SIZE)
            elif self._fed == len(source.buffer) and not source.fill(self._fed + 1):
                self._damaged("truncated_gzip", "gzip member ends with the file")
                return
            else:
                with memoryview(source.buffer) as view, view[self._fed :][:FEED_SIZE] as piece:
                    self._fed += len(piece)
                    data = inflater.decompress(piece, READ_SIZE)
        except isal_zlib.error as error:
            self._damaged("corrupt_gzip", str(error))
            return
        self.buf += data
        if inflater.eof:
            source.drop(self._fed - len(inflater.unused_data))
            self._inflater = None
            self.marks.append((self.end, source.offset))
        elif self._fed >= 2 * READ_SIZE:  # a long member: keep the source window bounded
            source.drop(self._fed)
            self._fed = 0

    def _damaged(self, reason: str, detail: str) -> None:
        source, start = self.source, self._member
        whole = source.offset == start  # the member's first bytes are still in the window
        raw = bytes(source.buffer[:QUARANTINE_BYTES]) if whole else b""
        self._inflater = None
        if reason == "truncated_gzip":
            source.drop(len(source.buffer))
        else:
            source.skip_until(GZIP_MAGIC, 1 if whole else 0)
        length = source.offset - start
        self._fail(BadRecord(start, length, reason, detail, raw[:length]))

    def _fail(self, bad: BadRecord) -> None:
        self.bads.append((self.end, bad))
        self.gaps.append(self.end)
        self.marks.append((self.end, self.source.offset))


# Formats


class _Warc:
    name = "WARC"
    header_end = b"\r\n\r\n"
    separator = b"\r\n\r\n"

    @staticmethod
    def starts_record(buf: bytearray, pos: int = 0) -> bool:
        return buf.startswith(b"WARC/", pos)

    @staticmethod
    def find_record(buf: bytearray, start: int, stop: int) -> int:
        """Where the first record header line after buf[start] starts in buf[:stop], or -1."""
        pos = buf.find(b"\nWARC/", start, stop)
        return pos + 1 if pos >= 0 else -1

    @staticmethod
    def parse(head: bytes, where: tuple[int, int]) -> tuple[dict[str, str], int | None]:
        del where
        lines = head.decode("utf-8", errors="replace").split("\r\n")
        headers: dict[str, str] = {"WARC-Version": lines[0].strip()}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                name = name.strip()
                headers[_CANONICAL.get(name.lower(), name)] = value.strip()
        return headers, _length(headers.get("Content-Length", ""))


_CANONICAL = {
    name.lower(): name
    for name in (
        "WARC-Type",
        "WARC-Record-ID",
        "WARC-Date",
        "WARC-Target-URI",
        "WARC-Refers-To",
        "WARC-Concurrent-To",
        "WARC-Payload-Digest",
        "WARC-Block-Digest",
        "WARC-IP-Address",
        "WARC-Identified-Content-Language",
        "Content-Type",
        "Content-Length",
    )
}
_ARC_LINE = re.compile(rb"[A-Za-z][A-Za-z0-9+.-]*:\S* \S+ \d{14} [^\n]* \d+\n")
_ARC_NAMESPACE = uuid.UUID("0b5a7f3e-2c41-5d7a-9e1b-6a2f4c8d0e13")


class _Arc:
    """ARC v1/v2: a header line ``URL IP date content-type ... length``, the bytes, a newline."""

    name = "ARC"
    header_end = b"\n"
    separator = b"\n"

    @staticmethod
    def starts_record(buf: bytearray, pos: int = 0) -> bool:
        return _ARC_LINE.match(buf, pos, pos + MAX_ARC_LINE) is not None

    @staticmethod
    def find_record(buf: bytearray, start: int, stop: int) -> int:
        pos = buf.find(b"\n", start, stop)
        while pos >= 0:
            if _ARC_LINE.match(buf, pos + 1, min(stop, pos + 1 + MAX_ARC_LINE)):
                return pos + 1
            pos = buf.find(b"\n", pos + 1, stop)
        return -1

    @staticmethod
    def parse(head: bytes, where: tuple[int, int]) -> tuple[dict[str, str], int | None]:
        fields = head.decode("utf-8", errors="replace").split(" ")
        url, ip, date, content_type = fields[0], fields[1], fields[2], fields[3]
        iso = f"{date[:4]}-{date[4:6]}-{date[6:8]}T{date[8:10]}:{date[10:12]}:{date[12:14]}Z"
        http = url.startswith(("http:", "https:"))
        record_id = uuid.uuid5(_ARC_NAMESPACE, f"{url} {date} {where[0]}/{where[1]}")
        headers = {
            "WARC-Version": "ARC",
            "WARC-Type": "warcinfo" if url.startswith("filedesc:") else "response",
            "WARC-Record-ID": f"<urn:uuid:{record_id}>",
            "WARC-Date": iso,
            "WARC-Target-URI": url,
            "WARC-IP-Address": ip,
            "Content-Type": "application/http; msgtype=response" if http else content_type,
            "ARC-Content-Type": content_type,
            "Content-Length": fields[-1],
        }
        return headers, _length(fields[-1])


def _length(value: str) -> int | None:
    value = value.strip()
    if value.isascii() and value.isdigit() and len(value) <= MAX_DIGITS:
        return int(value)
    return None


# Reading


def iter_records(
    stream: BinaryIO,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    name: str = "input",
    blocks: bool = True,
) -> Iterator[WarcRecord | BadRecord]:
    """Records of a WARC or ARC stream; raises `UnusableInputError` if it is neither. Without
    ``blocks``, records carry their headers, offsets and lengths but not their blocks (an index
    reads every byte, and copies none of them)."""
    source = _Source(stream)
    source.fill(READ_SIZE)
    if not source.buffer:
        return
    fmt = check_format(bytes(source.buffer[:4096]), name)
    text = _Text(source, gzipped=source.buffer.startswith(GZIP_MAGIC[:2]))
    if text.gzipped:
        text.per_member = _one_record_per_member(text, fmt)
    yield from _Reader(text, fmt, max_record_bytes, blocks).records()


def check_format(head: bytes, name: str) -> type[_Warc] | type[_Arc]:
    """Fail fast on inputs that are neither WARC nor ARC (HTML, empty files, ...)."""
    if not head:
        raise UnusableInputError(name, "empty file")
    if head.startswith(GZIP_MAGIC[:2]):
        try:
            head = zlib.decompressobj(31).decompress(head, 64)
        except zlib.error as error:
            raise UnusableInputError(name, f"first gzip member is corrupt ({error})") from error
    if head.startswith(b"filedesc://"):
        return _Arc
    if not head.startswith(b"WARC/"):
        raise UnusableInputError(name, f"not a WARC file, nor ARC (starts with {head[:16]!r})")
    return _Warc


def _one_record_per_member(text: _Text, fmt) -> bool:
    """Whether the first member is small and holds one record (see the module docstring)."""
    text.per_member = True
    usable = text.fill(LAYOUT_PROBE_BYTES)
    if not text.done or usable >= LAYOUT_PROBE_BYTES or text.gaps:
        return False
    return fmt.find_record(text.buf, 0, usable) < 0


_NEWLINES = re.compile(rb"[\r\n]*")
PROBE = 256  # bytes to look at for a record header line


class _Reader:
    def __init__(self, text: _Text, fmt, max_bytes: int, blocks: bool):
        self.text = text
        self.fmt = fmt
        self.max_bytes = max_bytes
        self.blocks = blocks

    def records(self) -> Iterator[WarcRecord | BadRecord]:
        text = self.text
        while True:
            yield from text.pending(text.pos)
            usable = text.fill(1)
            lead = _NEWLINES.match(text.buf, 0, usable).end()
            if lead:
                text.drop(lead)
                continue
            if usable == 0:
                yield from text.pending(text.end)
                if not text.cross():
                    yield from text.pending(float("inf"))
                    return
                continue
            item = self._member() if text.per_member else self._streamed()
            if item is not None:
                yield item

    # One record per member

    def _member(self) -> WarcRecord | BadRecord | None:
        text, fmt = self.text, self.fmt
        usable = text.fill(self.max_bytes + 1)
        if not text.done:
            return self._skip("oversized_record", f"> {self.max_bytes} bytes", None)
        if not fmt.starts_record(text.buf):
            return self._bad(usable, "not_warc_record", f"no {fmt.name} header")
        header_end = text.buf.find(fmt.header_end, 0, min(usable, MAX_HEADER_BYTES))
        if header_end < 0:
            return self._bad(usable, "not_warc_record", f"no end of {fmt.name} header")
        headers, length = fmt.parse(bytes(text.buf[:header_end]), text.locate(text.pos))
        block_start = header_end + len(fmt.header_end)
        sep = fmt.separator
        if length is None:  # the member's end frames the record
            end = usable - len(sep) if text.buf.endswith(sep, 0, usable) else usable
            return self._record(headers, max(end, block_start), block_start, usable)
        end = block_start + length
        if end > usable:
            detail = f"Content-Length {length}, {usable - block_start} bytes present"
            return self._bad(usable, "truncated_record", detail)
        if _NEWLINES.fullmatch(text.buf, end, usable):
            return self._record(headers, end, block_start, usable)
        if text.buf.startswith(sep, end):
            # Whatever follows is no record of its own, even if it looks like one.
            record = self._record(headers, end, block_start, end + len(sep))
            detail = "bytes after the record in its member"
            bad = self._bad(usable - end - len(sep), "bytes_after_record", detail)
            if bad is not None:
                text.bads.insert(0, (text.pos, bad))
            return record
        # A Content-Length that is off: the member's end frames the record.
        end = usable - len(sep) if text.buf.endswith(sep, 0, usable) else usable
        return self._record(headers, end, block_start, usable)

    # A stream of records

    def _streamed(self) -> WarcRecord | BadRecord | None:
        text, fmt = self.text, self.fmt
        text.fill(PROBE)
        if not fmt.starts_record(text.buf):
            return self._resync(0, None, f"no {fmt.name} header")
        header_end = self._find(fmt.header_end, MAX_HEADER_BYTES)
        if header_end < 0:
            return self._resync(1, None, f"no end of {fmt.name} header")
        headers, length = fmt.parse(bytes(text.buf[:header_end]), text.locate(text.pos))
        block_start = header_end + len(fmt.header_end)
        if length is not None and block_start + length <= self.max_bytes:
            end = block_start + length
            usable = text.fill(end + len(fmt.separator) + 1)
            after = (
                _NEWLINES.match(text.buf, end, min(usable, end + 4)).end() if end <= usable else -1
            )
            if text.buf.startswith(fmt.separator, end) or (after == usable and text.done):
                return self._record(headers, end, block_start, after)
        return self._resync(block_start, (headers, length, block_start), "")

    def _find(self, needle: bytes, limit: int) -> int:
        text, start = self.text, 0
        while True:
            usable = text.fill(len(text.buf) + 1) if start else text.fill(1)
            pos = text.buf.find(needle, start, min(usable, limit))
            if pos >= 0 or text.done or usable >= limit:
                return pos
            start = max(usable - len(needle) + 1, 0)

    def _resync(self, start: int, record, detail: str) -> WarcRecord | BadRecord | None:
        """Up to the next record header line after `start`: the record whose Content-Length
        did not land (lenient if it had none), or bytes that are no record."""
        text, fmt = self.text, self.fmt
        searched = start
        while True:
            usable = text.fill(searched + READ_SIZE)
            pos = fmt.find_record(text.buf, searched, min(usable, self.max_bytes))
            if pos >= 0 or text.done or usable >= self.max_bytes:
                break
            searched = max(usable - PROBE, start)
        if pos < 0 and not text.done:
            return self._skip("oversized_record", f"> {self.max_bytes} bytes", start)
        end = pos if pos >= 0 else usable
        if record is None:
            return self._bad(end, "not_warc_record", detail)
        headers, length, block_start = record
        sep = fmt.separator
        if length is None and text.buf.endswith(sep, 0, end):
            return self._record(headers, max(end - len(sep), block_start), block_start, end)
        if length is not None and pos < 0 and block_start + length > end:
            detail = f"Content-Length {length}, {end - block_start} bytes present"
            return self._bad(end, "truncated_record", detail)
        detail = f"Content-Length {length} does not end the record"
        return self._bad(end, "bad_content_length", detail)

    # Results

    def _record(self, headers: dict, end: int, block_start: int, consumed: int) -> WarcRecord:
        text = self.text
        offset, inner = text.locate(text.pos)
        length = text.span(text.pos, text.pos + consumed, inner)
        block = b""
        if self.blocks:
            with memoryview(text.buf) as view:  # one copy: a bytearray's slice is a copy itself
                block = bytes(view[block_start:end])
        text.drop(consumed)
        return WarcRecord(offset, length, headers, block, inner)

    def _bad(self, consumed: int, reason: str, detail: str) -> BadRecord | None:
        text = self.text
        if consumed == text.limit() and text.covered(text.pos):
            text.drop(consumed)
            return None  # part of a damaged member that is reported as such
        offset, inner = text.locate(text.pos)
        length = text.span(text.pos, text.pos + consumed, inner)
        raw = bytes(text.buf[: min(consumed, QUARANTINE_BYTES)])
        text.drop(consumed)
        return BadRecord(offset, length, reason, detail, raw, inner)

    def _skip(self, reason: str, detail: str, stop_at_record: int | None) -> BadRecord:
        """Stream past the segment, or up to the next record header line after window
        position `stop_at_record`, keeping only the first QUARANTINE_BYTES."""
        text, fmt = self.text, self.fmt
        offset, inner = text.locate(text.pos)
        start = text.pos
        raw = bytes(text.buf[:QUARANTINE_BYTES])
        search = stop_at_record
        while True:
            usable = text.fill(len(text.buf) + READ_SIZE)
            if search is not None:
                pos = fmt.find_record(text.buf, search, usable)
                if pos >= 0:
                    text.drop(pos)
                    break
            if text.done:
                text.drop(usable)
                break
            keep = PROBE if search is not None else 0
            text.drop(max(usable - keep, 0))
            search = 0 if search is not None else None
        length = text.pos - start
        return BadRecord(offset, length, reason, detail, raw[:length], inner)
