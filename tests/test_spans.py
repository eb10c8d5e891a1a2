"""Byte spans copied in one call (`tokenmill.storage.spans`, compiled code)."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from tokenmill.storage.spans import copy_spans


@pytest.fixture
def mapped_file(tmp_path):
    data = np.random.default_rng(0).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    path = tmp_path / "tokens.bin"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        yield mapped, data


def test_spans_land_where_they_are_placed(mapped_file):
    mapped, data = mapped_file
    rng = np.random.default_rng(1)
    at = np.sort(rng.integers(0, 99_000, 500))
    sizes = rng.integers(0, 1_000, 500)
    order = rng.permutation(500)  # placed in another order than read
    places = np.empty(500, np.int64)
    places[order] = np.cumsum(sizes[order]) - sizes[order]
    target = np.zeros(int(sizes.sum()) + 7, np.uint8)
    copy_spans(target, mapped, at, sizes, places)
    expected = b"".join(data[at[i] : at[i] + sizes[i]] for i in order)
    assert target[: len(expected)].tobytes() == expected
    assert not target[len(expected) :].any()


def test_a_span_outside_the_source_or_the_target_is_refused(mapped_file):
    mapped, _ = mapped_file
    with pytest.raises(ValueError, match="source"):
        copy_spans(np.zeros(300, np.uint8), mapped, [99_950], [100], [0])
    with pytest.raises(ValueError, match="target"):
        copy_spans(np.zeros(10, np.uint8), mapped, [0], [11], [0])
    with pytest.raises(ValueError, match="target"):
        copy_spans(np.zeros(10, np.uint8), mapped, [0], [1], [-1])
