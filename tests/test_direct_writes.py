"""Appending past the page cache: the file holds exactly the bytes given, whatever their sizes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tokenmill.storage.direct_writes import BLOCK, DirectAppender, open_direct


def _appender(path: Path, staging_bytes: int = 4 * BLOCK) -> DirectAppender:
    path.touch()
    appender = open_direct(str(path))
    if appender is None:
        pytest.skip(f"no direct writes on {path.parent}'s file system")
    if staging_bytes != len(appender.staging):  # a small staging buffer: writes span it
        appender.close()
        appender = DirectAppender(os.open(path, os.O_WRONLY | os.O_DIRECT), staging_bytes)
    return appender


@pytest.mark.parametrize(
    "sizes",
    [
        [],
        [0],
        [1],
        [BLOCK],
        [BLOCK - 1, 1],
        [BLOCK + 1],
        [3 * BLOCK + 17, 5, 9 * BLOCK, BLOCK - 3, 1],  # across the staging buffer's end
        [4 * BLOCK],
        [40 * BLOCK + 123],
    ],
)
def test_the_file_holds_what_was_written(tmp_path, sizes):
    rng = np.random.default_rng(len(sizes) * 7 + sum(sizes))
    parts = [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for size in sizes]
    path = tmp_path / "tokens.bin"
    appender = _appender(path)
    for part in parts:
        assert appender.write(part) == len(part)
    appender.close()
    appender.close()  # twice: nothing more
    assert path.read_bytes() == b"".join(parts)


def test_memoryviews_and_arrays_are_taken_as_bytes(tmp_path):
    tokens = np.arange(3 * BLOCK + 5, dtype=np.uint16)
    path = tmp_path / "tokens.bin"
    appender = _appender(path, staging_bytes=BLOCK)
    appender.write(memoryview(tokens))
    appender.write(tokens[:7])
    appender.close()
    assert path.read_bytes() == tokens.tobytes() + tokens[:7].tobytes()
