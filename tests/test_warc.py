from __future__ import annotations

import gzip
import io
import random
import tracemalloc

import pyarrow.parquet as pq
import pytest

from tokenmill.crawl.warc import (
    QUARANTINE_BYTES,
    READ_SIZE,
    BadRecord,
    UnusableInputError,
    WarcRecord,
    iter_records,
)
from tokenmill.storage.layout import QUARANTINE_SCHEMA
from tokenmill.storage.outputs import BYTES_PER_BATCH, ParquetSink


def record(n: int, body: bytes = b"", content_length: int | None = None) -> bytes:
    block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + (body or b"<p>page %d</p>" % n)
    length = len(block) if content_length is None else content_length
    head = (
        f"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{n:08d}>\r\n"
        f"WARC-Target-URI: http://example.com/{n}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()
    return head + block + b"\r\n\r\n"


def member(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def read(data: bytes, **kwargs) -> list:
    return list(iter_records(io.BytesIO(data), **kwargs))


def test_offsets_locate_each_gzip_member():
    members = [member(record(i)) for i in range(5)]
    records = read(b"".join(members))
    offsets = [sum(len(m) for m in members[:i]) for i in range(5)]
    assert [r.offset for r in records] == offsets
    assert [r.length for r in records] == [len(m) for m in members]
    assert [r.record_id for r in records] == [f"<urn:uuid:{i:08d}>" for i in range(5)]
    assert records[2].block.endswith(b"<p>page 2</p>")


def test_corrupt_member_is_reported_and_reading_resumes():
    good = [member(record(i)) for i in range(3)]
    broken = bytearray(member(record(99, body=b"x" * 5000)))
    broken[len(broken) // 2 : len(broken) // 2 + 8] = b"\xff" * 8
    records = read(good[0] + bytes(broken) + good[1] + good[2])
    kinds = [type(r).__name__ for r in records]
    assert kinds == ["WarcRecord", "BadRecord", "WarcRecord", "WarcRecord"]
    bad = records[1]
    assert bad.reason == "corrupt_gzip" and bad.offset == len(good[0])
    assert bad.length == len(broken) and bad.raw == bytes(broken)
    assert [r.record_id for r in records if isinstance(r, WarcRecord)][-1] == "<urn:uuid:00000002>"


def test_truncated_record_and_truncated_file():
    clipped = member(record(1, content_length=10_000))
    records = read(member(record(0)) + clipped + member(record(2)))
    assert [getattr(r, "reason", "ok") for r in records] == ["ok", "truncated_record", "ok"]
    cut = member(record(3, body=b"y" * 20_000))
    records = read(member(record(0)) + cut[: len(cut) // 2])
    assert isinstance(records[-1], BadRecord) and records[-1].reason == "truncated_gzip"


def test_garbage_between_members_is_skipped():
    records = read(member(record(0)) + b"GARBAGE" * 10 + member(record(1)))
    assert [getattr(r, "reason", "ok") for r in records] == ["ok", "garbage_bytes", "ok"]


def test_oversized_record_is_skipped_with_bounded_memory():
    big = member(record(1, body=b"z" * 3_000_000))
    records = read(member(record(0)) + big + member(record(2)), max_record_bytes=1_000_000)
    assert [getattr(r, "reason", "ok") for r in records] == ["ok", "oversized_record", "ok"]


def test_plain_uncompressed_warc():
    data = record(0) + record(1) + record(2)[:-40]
    records = read(data)
    assert [r.record_id for r in records[:2]] == ["<urn:uuid:00000000>", "<urn:uuid:00000001>"]
    assert records[1].offset == len(record(0))
    assert records[2].reason == "truncated_record"


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "not a WARC file, nor ARC"),
        (
            gzip.compress(b"<html><body>gzipped page</body></html>", mtime=0),
            "not a WARC file, nor ARC",
        ),
        (b"<html><body>not a warc</body></html>", "not a WARC file, nor ARC"),
    ],
)
def test_unusable_inputs_fail_naming_the_file(data, reason):
    with pytest.raises(UnusableInputError, match=reason) as error:
        read(data, name="landing/c/file.warc.gz")
    assert "landing/c/file.warc.gz" in str(error.value)


def test_empty_input_yields_nothing():
    assert read(b"") == []


def test_real_warc_files(shared):
    expected_responses = {
        "aut-2008-heritrix.warc.gz": 299,
        "cc-main-2020-34-excerpt.warc.gz": 16,
        "clueweb-japanese-quirk.warc.gz": 29,
        "ukwa-2014-datagovuk.warc.gz": 65,
        "wget-2024-sample-0000.warc.gz": 22,
        "wget-2024-sample-0001.warc.gz": 15,
    }
    for name, responses in expected_responses.items():
        with open(shared / "corpora/warc" / name, "rb") as f:
            records = list(iter_records(f, name=name))
        assert not [r for r in records if isinstance(r, BadRecord)], name
        assert sum(r.type == "response" for r in records) == responses, name
    with open(shared / "corpora/warc/truncated-record.warc.gz", "rb") as f:
        records = list(iter_records(f))
    assert [r.reason for r in records] == ["truncated_gzip"]
    with open(shared / "corpora/warc/aut-2008-heritrix.arc.gz", "rb") as f:
        arc = list(iter_records(f, name="aut-2008-heritrix.arc.gz"))
    with open(shared / "corpora/warc/aut-2008-heritrix.warc.gz", "rb") as f:
        warc = list(iter_records(f))
    assert [r.type for r in arc] == ["warcinfo"] + ["response"] * 299
    responses = {(r.target_uri, r.block) for r in warc if r.type == "response"}
    assert {(r.target_uri, r.block) for r in arc[1:]} == responses
    assert len({r.record_id for r in arc}) == 300


# --------------------------------------------------------------------------------------------
# Hostile input: every good record in the file survives, nothing forged gets in

LAYOUTS = ("members", "one_member", "blocks", "plain")


def pack(records: list[bytes], layout: str) -> bytes:
    """A file of `records` as gzip members each, one gzip member, 64 KiB gzip blocks (bgzip
    style, records straddling members) or uncompressed."""
    data = b"".join(records)
    if layout == "members":
        return b"".join(member(r) for r in records)
    if layout == "one_member":
        return member(data)
    if layout == "blocks":
        return b"".join(member(data[i : i + 65536]) for i in range(0, len(data), 65536))
    return data


def good_ids(records) -> list[str]:
    return [r.record_id for r in records if isinstance(r, WarcRecord)]


def with_headers(n: int, body: bytes, content_length: str, name: str = "Content-Length") -> bytes:
    block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
    head = (
        f"WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{n:08d}>\r\n"
        f"WARC-Target-URI: http://example.com/{n}\r\n{name}: {content_length}\r\n\r\n"
    ).encode()
    return head + block + b"\r\n\r\n"


FORGED = record(666, body=b"<p>spam that no crawler fetched</p>")
HOSTILE = {
    "too_long": record(50, content_length=400),
    "too_short": record(50, content_length=30),
    "huge": with_headers(50, b"<p>x</p>", "9" * 30),
    "huge_in_range": with_headers(50, b"<p>x</p>", str(10**15)),
    "lower_case": with_headers(50, b"<p>x</p>", "52", name="content-length"),
    "non_ascii_digits": with_headers(50, b"<p>x</p>", "\u0665\u0661"),
    "not_a_number": with_headers(50, b"<p>x</p>", "fifty"),
    "missing": with_headers(50, b"<p>x</p>", "x", name="X-Nothing"),
    # a page that embeds a WARC record right where its too-short Content-Length ends
    "forging": record(50, body=b"<p>page</p>\r\n\r\n" + FORGED, content_length=55),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_content_length_loses_no_other_record(case, layout):
    before = [record(i, body=b"<p>%d</p>" % i * 50) for i in range(5)]
    after = [record(i, body=b"<p>%d</p>" % i * 50) for i in range(100, 105)]
    records = read(pack([*before, HOSTILE[case], *after], layout))
    ids = good_ids(records)
    expected = [f"<urn:uuid:{i:08d}>" for i in [*range(5), *range(100, 105)]]
    hostile = ("<urn:uuid:00000050>", "<urn:uuid:00000666>")
    assert [i for i in ids if i not in hostile] == expected
    if layout == "members" or case != "forging":
        assert "<urn:uuid:00000666>" not in ids
    lenient = ("lower_case", "non_ascii_digits", "not_a_number", "missing")
    if case in lenient and (layout == "members" or case == "lower_case"):
        # framed by its member, or by its length
        assert "<urn:uuid:00000050>" in ids


@pytest.mark.parametrize("layout", LAYOUTS)
def test_records_read_without_blocks_are_the_same_records(layout):
    """An index reads records without their blocks: the same records, damaged ones too."""
    pages = [record(i, body=b"<p>%d</p>" % i * 50) for i in range(5)]
    data = pack([*pages, *(HOSTILE[case] for case in sorted(HOSTILE))], layout)
    data += member(record(999))[:60]  # a truncated last member
    with_blocks = read(data)
    without = read(data, blocks=False)
    assert len(without) == len(with_blocks) > 5
    for full, bare in zip(with_blocks, without, strict=True):
        if isinstance(full, WarcRecord):
            assert full.block and bare.block == b""
            assert (bare.offset, bare.length, bare.headers, bare.inner_offset) == (
                full.offset,
                full.length,
                full.headers,
                full.inner_offset,
            )
        else:
            assert bare == full


def test_lower_case_content_length_is_used():
    page = [r for r in read(HOSTILE["lower_case"]) if isinstance(r, WarcRecord)]
    assert page[0].block.endswith(b"<p>x</p>")


def test_too_short_content_length_in_a_member_never_forges_a_record():
    records = read(pack([record(0), HOSTILE["forging"], record(1)], "members"))
    assert good_ids(records) == [
        "<urn:uuid:00000000>",
        "<urn:uuid:00000050>",
        "<urn:uuid:00000001>",
    ]
    assert [r.reason for r in records if isinstance(r, BadRecord)] == ["bytes_after_record"]


def test_resynchronizes_on_the_next_warc_header_line():
    garbage = b"<html>not a record</html>\r\n" * 100
    for layout in ("plain", "one_member"):
        data = pack([record(0), garbage, record(1), garbage[:7] + b"\n", record(2)], layout)
        records = read(data)
        assert good_ids(records) == [f"<urn:uuid:{i:08d}>" for i in range(3)], layout
        assert {r.reason for r in records if isinstance(r, BadRecord)} == {"not_warc_record"}


class Trickle(io.RawIOBase):
    """A stream that returns a few bytes per read, like a slow socket."""

    def __init__(self, data: bytes, seed: int):
        self.data, self.pos, self.rng = data, 0, random.Random(seed)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        n = min(size, self.rng.choice([1, 2, 3, 7, 4096, 70_000]))
        chunk = self.data[self.pos : self.pos + n]
        self.pos += len(chunk)
        return chunk


def many_records(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [record(i, body=rng.randbytes(rng.randrange(10, 40_000))) for i in range(count)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_short_reads_at_every_boundary(layout):
    records = many_records(60, seed=3)
    data = pack(records, layout)
    expected = [f"<urn:uuid:{i:08d}>" for i in range(60)]
    for seed in range(3):
        got = list(iter_records(Trickle(data, seed)))
        assert good_ids(got) == expected and not [r for r in got if isinstance(r, BadRecord)]


def member_of_size(n: int, size: int) -> bytes:
    """Record `n` as a stored (level 0) gzip member of exactly `size` bytes."""
    body_length = size - 200
    while True:
        m = gzip.compress(record(n, body=b"b" * body_length), compresslevel=0, mtime=0)
        if len(m) == size:
            return m
        body_length += size - len(m)


@pytest.mark.parametrize("shift", range(0, 9))
def test_member_starting_just_before_a_read_boundary(shift):
    """Several MB: members start 0-8 bytes before each 1 MiB read boundary."""
    pieces = [member_of_size(0, READ_SIZE - shift)]
    pieces += [member_of_size(i, READ_SIZE) for i in range(1, 4)]
    pieces += [member(record(i)) for i in range(4, 8)]
    records = read(b"".join(pieces))
    assert good_ids(records) == [f"<urn:uuid:{i:08d}>" for i in range(8)]
    assert not [r for r in records if isinstance(r, BadRecord)]


@pytest.mark.parametrize("shift", range(-5, 6))
def test_separator_straddling_a_read_boundary(shift):
    """Several MB: a record's end (separator, next WARC/ line) at every byte position around
    the 1 MiB read boundary."""
    size = 100
    while len(first := record(0, body=b"a" * size)) != READ_SIZE - shift:
        size += READ_SIZE - shift - len(first)
    rest = many_records(80, seed=shift)[1:]
    data = first + b"".join(rest)
    assert len(data) > 2 * READ_SIZE and len(first) == READ_SIZE - shift
    for layout_data in (data, member(data)):
        records = read(layout_data)
        assert good_ids(records) == [f"<urn:uuid:{i:08d}>" for i in range(80)]


def test_file_gzipped_as_one_member_streams_records_in_bounded_memory():
    records = many_records(400, seed=5)  # ~8 MB
    data = member(b"".join(records))
    tracemalloc.start()
    try:
        count = sum(isinstance(r, WarcRecord) for r in read_iter(data, max_record_bytes=1 << 20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 400
    assert peak < 8 * READ_SIZE  # a window of a few MiB, not the file


def read_iter(data: bytes, **kwargs):
    return iter_records(io.BytesIO(data), **kwargs)


def test_oversized_record_in_one_member_file_loses_only_itself():
    records = [record(0), record(1, body=b"z" * 3_000_000), record(2)]
    for layout in ("one_member", "plain", "members"):
        got = read(pack(records, layout), max_record_bytes=1_000_000)
        assert good_ids(got) == ["<urn:uuid:00000000>", "<urn:uuid:00000002>"], layout
        assert [r.reason for r in got if isinstance(r, BadRecord)] == ["oversized_record"]


def test_records_sharing_a_member_have_distinct_positions():
    got = read(member(record(0) + record(1) + record(2)))
    assert [(r.offset, r.inner_offset) for r in got] == [
        (0, 0),
        (0, len(record(0))),
        (0, len(record(0)) + len(record(1))),
    ]


def test_corrupt_member_inside_a_stream_keeps_the_records_before_it():
    head = member(record(0) + record(1))
    broken = bytearray(member(record(2, body=random.Random(2).randbytes(5000)) + record(3)))
    broken[len(broken) // 2 : len(broken) // 2 + 8] = b"\xff" * 8
    got = read(head + bytes(broken) + member(record(4)))
    assert good_ids(got) == [f"<urn:uuid:{i:08d}>" for i in (0, 1, 4)]
    assert [r.reason for r in got if isinstance(r, BadRecord)] == ["corrupt_gzip"]


def arc_record(url: str, body: bytes, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return f"{url} 10.0.0.1 20080430204825 text/html {size}\n".encode() + body + b"\n"


ARC_HEAD = arc_record("filedesc://x.arc", b"1 1 InternetArchive\nURL IP-address Archive-date\n")


@pytest.mark.parametrize("layout", ["members", "plain"])
def test_arc_records_read_as_responses(layout):
    pages = [
        arc_record(f"http://a.example/{i}", b"HTTP/1.1 200 OK\r\n\r\n<p>%d</p>" % i)
        for i in range(3)
    ]
    broken = arc_record("http://a.example/bad", b"HTTP/1.1 200 OK\r\n\r\n<p>bad</p>", length=999)
    got = read(pack([ARC_HEAD, pages[0], broken, pages[1], pages[2]], layout))
    responses = [r for r in got if isinstance(r, WarcRecord) and r.type == "response"]
    assert [r.target_uri for r in responses] == [f"http://a.example/{i}" for i in range(3)]
    assert responses[0].block.endswith(b"<p>0</p>") and responses[0].date == "2008-04-30T20:48:25Z"
    reason = "truncated_record" if layout == "members" else "bad_content_length"
    assert [r.reason for r in got if isinstance(r, BadRecord)] == [reason]


def test_wet_conversion_records_are_extracted_text(shared):
    with open(shared / "corpora/warc/cc-2024-single-record.warc.wet.gz", "rb") as f:
        records = list(iter_records(f))
    assert [r.type for r in records] == ["warcinfo", "conversion"]
    text = records[1]
    assert text.is_extracted_text and not records[0].is_extracted_text
    assert text.block.decode("utf-8").startswith("Escopete - Biquipedia")


def test_quarantine_rows_are_buffered_by_bytes_not_count():
    """Counted rows would let 400 corrupt members with 1 MiB of raw bytes each hold 1.2 GB
    before a flush."""
    out = io.BytesIO()
    sink = ParquetSink(out, QUARANTINE_SCHEMA)
    raw = bytes(QUARANTINE_BYTES)
    row = {"file": "f", "offset": 0, "length": len(raw), "reason": "corrupt_gzip", "detail": ""}
    for _ in range(200):
        sink.write({**row, "raw": raw})
        assert sink.pending_bytes <= BYTES_PER_BATCH
    sink.close()
    metadata = pq.ParquetFile(io.BytesIO(out.getvalue())).metadata
    assert metadata.num_rows == 200 and metadata.num_row_groups >= 200 * len(raw) // BYTES_PER_BATCH
