"""Rows routed to ranges through the lake (``tokenmill.storage.spill``): what a committed task wrote
for a range is what a reader of that range gets, whatever the chunks and empty ranges; a
marker's size does not grow with the number of ranges."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tokenmill.storage.lake import Lake
from tokenmill.storage.spill import (
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
