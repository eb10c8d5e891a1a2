"""Byte spans of a file read in one call (`tokenmill.spans`, compiled code)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tokenmill.spans import read_spans


@pytest.fixture
def data_file(tmp_path):
    data = np.random.default_rng(0).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    path = tmp_path / "tokens.bin"
    path.write_bytes(data)
    descriptor = os.open(path, os.O_RDONLY)
    yield path, descriptor, data
    os.close(descriptor)


def test_spans_land_where_they_are_placed(data_file):
    path, descriptor, data = data_file
    rng = np.random.default_rng(1)
    at = np.sort(rng.integers(0, 99_000, 500))
    sizes = rng.integers(0, 1_000, 500)
    order = rng.permutation(500)  # placed in another order than read
    places = np.empty(500, np.int64)
    places[order] = np.cumsum(sizes[order]) - sizes[order]
    target = np.zeros(int(sizes.sum()) + 7, np.uint8)
    assert read_spans(descriptor, target, at, sizes, places) == 500
    expected = b"".join(data[at[i] : at[i] + sizes[i]] for i in order)
    assert target[: len(expected)].tobytes() == expected
    assert not target[len(expected) :].any()


def test_a_file_shorter_than_its_spans_says_which_span_came_short(data_file, tmp_path):
    path, descriptor, data = data_file
    target = np.zeros(300, np.uint8)
    at, sizes, places = [0, 50_000, 99_950], [100, 100, 100], [0, 100, 200]
    assert read_spans(descriptor, target, at, sizes, places) == 2  # past its end
    os.truncate(path, 50_050)  # changed since its size was taken
    assert read_spans(descriptor, target, at[:2], sizes[:2], places[:2]) == 1
    assert target[:100].tobytes() == data[:100]


def test_a_span_outside_the_target_is_refused(data_file):
    _, descriptor, data = data_file
    with pytest.raises(ValueError):
        read_spans(descriptor, np.zeros(10, np.uint8), [0], [11], [0])
    with pytest.raises(ValueError):
        read_spans(descriptor, np.zeros(10, np.uint8), [0], [1], [-1])
