"""Spans of bytes gathered into one buffer by compiled code (`spans.c`): a release copies each
document's tokens once on its way to a range and once into its shard, ~10^6 spans a shard, in
one call each instead of a Python statement per document."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np


@functools.cache
def library() -> ctypes.CDLL:
    """spans.c, compiled when the project is installed (scripts/hatch_build.py)."""
    path = Path(__file__).with_name("libspans.so.1")
    if not path.exists():
        raise ImportError(
            f"{path} is missing: install the project (uv sync; it needs a C compiler, cc)"
        )
    compiled = ctypes.CDLL(str(path))
    array = functools.partial(np.ctypeslib.ndpointer, flags="C_CONTIGUOUS")
    compiled.gather_spans.restype = ctypes.c_int64
    compiled.gather_spans.argtypes = [
        array(dtype=np.uint64),
        array(dtype=np.int64),
        array(dtype=np.int64),
        array(dtype=np.int64),
        ctypes.c_int64,
        array(dtype=np.uint8),
    ]
    return compiled


def gather(sources: list, which, begins, sizes, out) -> int:
    """Writes ``sizes[i]`` bytes at ``begins[i]`` of ``sources[which[i]]`` into ``out`` (a
    writable buffer), back to back, and returns how many bytes that is. Every span must lie
    inside its source and all of them inside ``out``: checked before anything is copied."""
    which, begins, sizes = (np.ascontiguousarray(a, np.int64) for a in (which, begins, sizes))
    if not len(sizes):
        return 0
    held = [np.frombuffer(source, np.uint8) for source in sources]  # alive during the copy
    target = np.frombuffer(out, np.uint8)
    if not target.flags.writeable:
        raise ValueError("gather: the output buffer is read-only")
    lengths = np.array([len(source) for source in held], np.int64)
    if which.min() < 0 or which.max() >= len(held):
        raise IndexError("gather: a span names no source")
    if begins.min() < 0 or sizes.min() < 0 or np.any(begins + sizes > lengths[which]):
        raise IndexError("gather: a span runs outside its source")
    total = int(sizes.sum())
    if total > len(target):
        raise IndexError(f"gather: {total} bytes do not fit in {len(target)}")
    addresses = np.array([source.ctypes.data for source in held], np.uint64)
    return library().gather_spans(addresses, which, begins, sizes, len(sizes), target)
