from __future__ import annotations

import gzip
import io

import pytest

from tokenmill.warc import BadRecord, UnusableInputError, WarcRecord, iter_records


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
        (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "not a WARC or ARC file"),
        (gzip.compress(b"<html><body>gzipped page</body></html>"), "not a WARC or ARC file"),
        (b"<html><body>not a warc</body></html>", "not a WARC or ARC file"),
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
