"""An upper bound of the words of an HTML page's whole text, read off its source by compiled
code (`html_words.c`) without parsing it: the extractor asks for the page's words only to
compare them with a threshold, and a bound under it answers for a fraction of an extraction's
cost."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

from tokenmill.native import I64, load

_SIGNATURES = {"html_words_bound": (I64, [ctypes.c_char_p, I64])}


@functools.cache
def library() -> ctypes.CDLL:
    return load(Path(__file__).with_name("libhtml_words.so.1"), _SIGNATURES)


def words_bound(html: str) -> int:
    """At least as many words as resiliparse's whole-page text of ``html`` holds, as
    ``extract._word_count`` counts them, list bullets included."""
    data = html.encode("utf-8", "surrogatepass")
    return library().html_words_bound(data, len(data))
