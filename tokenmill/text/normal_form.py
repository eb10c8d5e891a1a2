"""NFC in linear time: the Unicode Stream-Safe Text Format before normalization.

Canonical ordering sorts each run of non-starters (combining marks), in quadratic time in
CPython; a page of one letter and a million alternating marks would take hours. UAX #15's
stream-safe format bounds those runs: after 30 non-starters in a row it inserts U+034F
COMBINING GRAPHEME JOINER, a starter that blocks reordering and composition across it. Text
with no such run (every real language: Unicode's own limit) is left unchanged.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

import numpy as np
import polars as pl

from tokenmill.text.code_point_tables import CODE_POINTS, cached_table

MAX_NON_STARTERS = 30  # UAX #15, D4
GRAPHEME_JOINER = "\u034f"


def _is_non_starter(char: str) -> bool:
    """A combining mark, or a character whose canonical decomposition begins with one."""
    return unicodedata.combining(char) != 0 or (
        unicodedata.combining(unicodedata.normalize("NFD", char)[0]) != 0
    )


# Every non-starter lies in this range (tests/test_hostile_text.py checks all code points).
NON_STARTER_RANGE = range(0x0300, 0x1E950)


@cache
def _non_starters() -> list[int]:
    return np.flatnonzero(cached_table("non-starters", _non_starter_table)).tolist()


def _non_starter_table() -> np.ndarray:
    table = np.zeros(CODE_POINTS, dtype=np.bool_)
    table[[c for c in NON_STARTER_RANGE if _is_non_starter(chr(c))]] = True
    return table


@cache
def _long_run() -> re.Pattern:
    """30 non-starters followed by another (built on first use)."""
    chars = "".join(f"\\U{c:08x}" for c in _non_starters())
    return re.compile(f"([{chars}]{{{MAX_NON_STARTERS}}})(?=[{chars}])")


@cache
def _run_past_limit() -> str:
    """The same run for polars' (Rust) regex: 31 non-starters in a row."""
    chars = "".join(f"\\x{{{c:x}}}" for c in _non_starters())
    return f"[{chars}]{{{MAX_NON_STARTERS + 1}}}"


def stream_safe(text: str) -> str:
    """``text`` with a grapheme joiner after every 30 consecutive non-starters."""
    return _long_run().sub("\\1" + GRAPHEME_JOINER, text)


def nfc(text: str) -> str:
    """NFC of the stream-safe form of ``text``: linear time whatever the input."""
    # The quick check answers in linear time without normalizing, except for "maybe", which it
    # only answers when the marks are in canonical order already (no quadratic sort).
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    # Python's regex scans a text for the run far slower than the normalization takes; polars'
    # says whether there is one (almost never: then the stream-safe form is the text itself).
    if pl.Series([text]).str.contains(_run_past_limit()).item():
        text = stream_safe(text)
    return unicodedata.normalize("NFC", text)
