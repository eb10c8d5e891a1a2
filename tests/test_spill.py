"""Rows routed to ranges through the lake (``tokenmill.spill``): what a committed task wrote
for a range is what a reader of that range gets, whatever the chunks and empty ranges; a
marker's size does not grow with the number of ranges."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tokenmill.lake import Lake
from tokenmill.spill import (
    SpillFileError,
    SpillWriter,
    clear_data,
    done_key,
    read_sources,
    task_summary,
)


def write_task(lake, task: str, ranges: int, rows: int, chunk_bytes: int, seed: int, **options):
    rng = np.random.default_rng(seed)
    routed = rng.integers(0, ranges, rows) // 3 * 3  # two ranges in three never get a row
    table = pa.table(
        {"value": np.arange(rows) + seed * 10**6, "text": [f"t{i}" for i in range(rows)]}
    )
    writer = SpillWriter(lake, "work/phase", task, ranges, chunk_bytes, **options)
    for start in range(0, rows, 100):
        writer.add(table.slice(start, 100), routed[start : start + 100])
    writer.commit({"rows": rows})
    return table, routed


@pytest.mark.parametrize("compression", ["zstd", None])
def test_each_range_reads_back_its_rows_in_task_and_arrival_order(tmp_path, compression):
    lake = Lake.from_url(str(tmp_path))
    ranges = 50
    written = [
        write_task(lake, task, ranges, 2_000, 4_096, seed, compression=compression)
        for seed, task in enumerate(["a", "b"])
    ]
    sources = [("work/phase", ("a", "b"))]
    for index in range(ranges):
        got = [t.column("value").to_numpy() for t in read_sources(lake, sources, index)]
        got = np.concatenate(got) if got else np.zeros(0, np.int64)
        expected = np.concatenate(
            [t.column("value").to_numpy()[routed == index] for t, routed in written]
        )
        assert np.array_equal(got, expected), index
    assert task_summary(lake, "work/phase", "a")["rows"] == 2_000
    assert len(lake.read_json(done_key("work/phase", "a"))["files"]) > 5  # several chunks


def test_a_marker_does_not_grow_with_the_ranges(tmp_path):
    lake = Lake.from_url(str(tmp_path))
    write_task(lake, "few", 10, 1_000, 1 << 20, 0)
    write_task(lake, "many", 10_000, 1_000, 1 << 20, 0)
    few, many = (len(lake.read_bytes(done_key("work/phase", t))) for t in ("few", "many"))
    assert many < few + 20


def test_a_lost_work_file_is_named(tmp_path):
    lake = Lake.from_url(str(tmp_path))
    write_task(lake, "a", 4, 500, 1 << 20, 0)
    clear_data(lake, "work/phase")  # the files go, the marker stays
    with pytest.raises(SpillFileError, match="work/phase/a.0000.arrows is missing"):
        list(read_sources(lake, [("work/phase", ("a",))], 0))


@pytest.mark.parametrize("gather_bytes", [1 << 20, 100, 1])
def test_raw_bytes_from_several_buffers_read_back_per_range(tmp_path, monkeypatch, gather_bytes):
    """``write_raw``: spans of several buffers, gathered into a buffer of ``GATHER_BYTES`` at
    most (a span larger than it too), each range's bytes back in their order."""
    from tokenmill import spill
    from tokenmill.spill import range_files, read_raw

    monkeypatch.setattr(spill, "GATHER_BYTES", gather_bytes)
    lake = Lake.from_url(str(tmp_path))
    rng = np.random.default_rng(5)
    sources = [rng.bytes(5_000), bytearray(rng.bytes(3_000)), memoryview(rng.bytes(800))]
    n, ranges = 400, 7
    which = rng.integers(0, len(sources), n)
    sizes = rng.integers(0, 300, n)
    begins = np.array(
        [rng.integers(0, len(sources[w]) - z + 1) for w, z in zip(which, sizes, strict=True)]
    )
    routed = np.sort(rng.integers(0, ranges, n) // 2 * 2)  # odd ranges get nothing
    writer = SpillWriter(lake, "work/raw", "t", ranges, 1 << 30, compression=None)
    writer.write_raw(routed, sources, which, begins, sizes)
    writer.commit()
    span = [bytes(sources[w][b : b + z]) for w, b, z in zip(which, begins, sizes, strict=True)]
    for index in range(ranges):
        got = b"".join(read_raw(lake, range_files(lake, [("work/raw", ("t",))], index)))
        assert got == b"".join(s for s, r in zip(span, routed, strict=True) if r == index), index


def test_a_span_outside_its_buffer_is_refused_before_anything_is_copied():
    from tokenmill.spans import gather

    out = bytearray(10)
    with pytest.raises(IndexError, match="outside its source"):
        gather([b"abcdef"], [0, 0], [0, 4], [2, 3], out)
    with pytest.raises(IndexError, match="do not fit"):
        gather([b"abcdef"], [0], [0], [6], bytearray(5))
    with pytest.raises(IndexError, match="names no source"):
        gather([b"abcdef"], [1], [0], [1], out)
    assert out == bytearray(10)
    assert gather([b"abcdef", b"xyz"], [1, 0], [1, 0], [2, 3], out) == 5
    assert bytes(out[:5]) == b"yzabc"
