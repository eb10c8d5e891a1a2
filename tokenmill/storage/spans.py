"""Many byte spans copied in one call (`spans.c`), from a buffer or a file's map."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from tokenmill.native import I64, load, pointer

_SPANS = [pointer(np.int64)] * 3
_SIGNATURES = {
    "copy_spans": (None, [pointer(np.uint8), pointer(np.uint8), *_SPANS, I64]),
}


@functools.cache
def library() -> ctypes.CDLL:
    return load(Path(__file__).with_name("libspans.so.1"), _SIGNATURES)


def _checked(at, sizes, places, target: np.ndarray) -> tuple[np.ndarray, ...]:
    at, sizes, places = (np.ascontiguousarray(a, np.int64) for a in (at, sizes, places))
    if len(sizes) and (sizes.min() < 0 or places.min() < 0 or (places + sizes).max() > len(target)):
        raise ValueError("a span lies outside the target")
    return at, sizes, places


def copy_spans(target: np.ndarray, source, at, sizes, places) -> None:
    """``sizes[i]`` bytes at ``at[i]`` of ``source`` (a buffer) to ``places[i]`` of ``target``
    (a uint8 array)."""
    at, sizes, places = _checked(at, sizes, places, target)
    source = np.frombuffer(source, np.uint8)
    if len(sizes) and (at.min() < 0 or (at + sizes).max() > len(source)):
        raise ValueError("a span lies outside the source")
    library().copy_spans(target, source, at, sizes, places, len(sizes))
