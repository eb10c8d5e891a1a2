"""PII masking (datatrove PIIFormatter)."""

from __future__ import annotations

import functools
import ipaddress
import re
import string
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from itertools import chain

import numpy as np
import polars as pl

from tokenmill.filters.protocol import Formatter
from tokenmill.text.segmentation import uint32_lists

EMAIL_PATTERN = (
    r"\b[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:(?:[A-Za-z0-9](?:["
    r"A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?|\[(?:(?:25[0-5]|2[0-4][0-9]|["
    r"01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)])"
)
IPV4_PATTERN = (
    r"(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
)
EMAIL_REPLACEMENTS = ("email@example.com", "firstname.lastname@example.org")
# datatrove's "randomly generated" IPs that did not answer pings
IP_REPLACEMENTS = (
    "22.214.171.124",
    "126.96.36.199",
    "188.8.131.52",
    "184.108.40.206",
    "220.127.116.11",
    "18.104.22.168",
)


_EMAIL = re.compile(EMAIL_PATTERN)
# The characters of EMAIL_PATTERN's local part, and the dot between its atoms
_LOCAL_RUN = string.ascii_letters + string.digits + "!#$%&'*+/=?^_`{|}~-."
_BOUNDARY = re.compile(r"\b")


def email_matches(text: str) -> Iterator[re.Match]:
    """``_EMAIL.finditer(text)``, in linear time.

    The regex engine tries every start position, and from each it scans the local part up to
    the "@" before failing on the domain: quadratic on "a.a.a.a…@" or "a-a-a…@b-b-b…". Every
    match holds exactly one "@" (neither part can contain one), the domain does not depend on
    where the local part starts, and the local part is valid from a start position exactly
    when the run of local characters and dots from there to the "@" has no "..", does not end
    with "." and the position is a word boundary. So per "@", the leftmost such position is
    the only one worth trying.
    """
    pos = 0  # where the previous match ended
    at = text.find("@")
    while at >= 0:
        start = _local_start(text, pos, at)
        match = _EMAIL.match(text, start) if start is not None else None
        if match:
            yield match
            pos = match.end()
        at = text.find("@", max(pos, at + 1))


def _local_start(text: str, pos: int, at: int) -> int | None:
    if at == pos or text[at - 1] == ".":
        return None
    window = max(pos, text.rfind("@", pos, at) + 1)
    start = window + len(text[window:at].rstrip(_LOCAL_RUN))
    double_dot = text.rfind("..", start, at)
    if double_dot >= 0:
        start = double_dot + 2
    for candidate in range(start, at):
        if text[candidate] != "." and _BOUNDARY.match(text, candidate):
            return candidate
    return None


class _CyclingReplacer:
    """re.sub with replacements used in turn (datatrove's PIIReplacer), optionally validated.
    The turn starts again in every text: a document's masked text is its own, whichever
    documents were masked before it (the same in every stage and every re-run).

    ``matches``: how Python finds them (default: the pattern's ``finditer``). With
    ``found_by_polars``, polars' Rust regex finds them instead, many times faster on long texts:
    only for a pattern both engines match alike (no word boundary, no look-around, no Unicode
    class), whose matches ``_spans`` can place back."""

    def __init__(
        self,
        pattern: str,
        replacements: Sequence[str],
        is_pii: Callable[[str], bool],
        matches: Callable[[str], Iterator[re.Match]] | None = None,
        found_by_polars: bool = False,
    ):
        self.pattern = pattern
        self.matches = matches or re.compile(pattern).finditer
        self.found_by_polars = found_by_polars
        self.replacements = (
            (replacements,) if isinstance(replacements, str) else tuple(replacements)
        )
        self.is_pii = functools.lru_cache(maxsize=4096)(is_pii)

    def __call__(self, text: str, found: Sequence[str] | None = None) -> str:
        return self.replaced(text, found)[0]

    def replaced(self, text: str, found: Sequence[str] | None = None) -> tuple[str, list[int]]:
        """``text`` masked, and where the values it replaced were in ``text`` (start, end,
        start, end, ...)."""
        spans = (
            ((m.start(), m.end()) for m in self.matches(text))
            if found is None
            else _spans(text, found)
        )
        pieces, done, turn, cut = [], 0, 0, []
        for start, end in spans:
            value = text[start:end]
            if self.is_pii(value):
                value = self.replacements[turn]
                turn = (turn + 1) % len(self.replacements)
                cut += (start, end)
            pieces += (text[done:start], value)
            done = end
        return "".join([*pieces, text[done:]]), cut

    def put_back(self, text: str, cut: Sequence[int]) -> str:
        """``replaced(text)``'s text from its ``cut``: the values there replaced in turn."""
        pieces, done = [], 0
        for turn, (start, end) in enumerate(zip(cut[::2], cut[1::2], strict=True)):
            pieces += (text[done:start], self.replacements[turn % len(self.replacements)])
            done = end
        return "".join([*pieces, text[done:]])

    def masked(self, text: pl.Series, cuts: dict[int, list[int]] | None = None) -> pl.Series:
        """Every text of ``text`` masked; those without a match (or, with polars finding
        them, without one that is PII) are left as they are. ``cuts``: lists by row, to which
        each masked text's ``replaced`` cut is added."""
        candidates = np.flatnonzero(text.str.contains(self.pattern).to_numpy())
        if not len(candidates):
            return text
        if self.found_by_polars:
            found = text.gather(candidates).str.extract_all(self.pattern).to_list()
            keep = [i for i, matches in enumerate(found) if any(map(self.is_pii, matches))]
            candidates, found = candidates[keep], [found[i] for i in keep]
        else:
            found = [None] * len(candidates)
        if not len(candidates):
            return text
        texts = text.gather(candidates).to_list()
        done = [self.replaced(t, f) for t, f in zip(texts, found, strict=True)]
        if cuts is not None:
            for row, (_, cut) in zip(candidates.tolist(), done, strict=True):
                cuts[row] += cut
        return text.scatter(candidates, [masked for masked, _ in done])


def _lists(values: dict[int, list[int]], rows: int) -> pl.Series:
    """A column of ``rows`` lists: ``values[row]``, else empty."""
    order = sorted(values)
    counts = np.zeros(rows, dtype=np.int64)
    counts[order] = [len(values[row]) for row in order]
    flat = np.fromiter(chain.from_iterable(values[row] for row in order), dtype=np.uint32)
    return uint32_lists(counts, flat)


def _spans(text: str, found: Sequence[str]) -> Iterator[tuple[int, int]]:
    """Where the matches ``found`` (in order, not overlapping) are in ``text``: each is the
    first occurrence of its string after the previous one, since a pattern that matches a
    string matches it wherever it occurs (no boundaries, no look-around) and the regex takes
    the leftmost match."""
    at = 0
    for match in found:
        start = text.index(match, at)
        at = start + len(match)
        yield start, at


def is_public_ip(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_global
    except ValueError:
        return False


class PIIMasker(Formatter):
    """Formatter replacing e-mail addresses and public IPv4 addresses (private, loopback and other
    reserved ranges are kept), with datatrove's replacement strings used in turn.

    Only documents where the (Rust) regex finds a candidate are masked in Python.
    """

    name = "pii"
    # Stored beside the signals: where masking replaced values in a document (``measure``'s
    # ``cut``), so that a recipe masking as the extraction measured puts the replacements there
    # without searching the texts again.
    rewrite_signal = "cut"

    def __init__(
        self,
        remove_emails: bool = True,
        remove_ips: bool = True,
        only_remove_public_ips: bool = True,
        email_replacement: Sequence[str] | str = EMAIL_REPLACEMENTS,
        ip_replacement: Sequence[str] | str = IP_REPLACEMENTS,
    ):
        self.key = (
            remove_emails,
            remove_ips,
            only_remove_public_ips,
            tuple(email_replacement),
            tuple(ip_replacement),
        )
        self.replacers: list[_CyclingReplacer] = []
        if remove_emails:
            self.replacers.append(
                _CyclingReplacer(EMAIL_PATTERN, email_replacement, bool, email_matches)
            )
        if remove_ips:
            is_pii = (
                is_public_ip
                if only_remove_public_ips
                else (lambda ip: is_public_ip(ip) or _is_ip(ip))
            )
            self.replacers.append(
                _CyclingReplacer(IPV4_PATTERN, ip_replacement, is_pii, found_by_polars=True)
            )

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        text = docs["text"].fill_null("")
        for replace in self.replacers:
            text = replace.masked(text)
        return text.alias("text")

    def measure_key(self) -> tuple:
        return self.key

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        """Per document: ``new_text`` (``self(docs)``) and ``cut``: where each masker in turn
        replaced values in the text it was given (masker, start, end, ... in characters)."""
        text = docs["text"].fill_null("")
        cuts: dict[int, list[int]] = defaultdict(list)  # of the rows with any
        for number, replace in enumerate(self.replacers):
            found: dict[int, list[int]] = defaultdict(list)
            text = replace.masked(text, found)
            for row, cut in found.items():
                for at in range(0, len(cut), 2):
                    cuts[row] += (number, cut[at], cut[at + 1])
        return pl.DataFrame({"new_text": text, "cut": _lists(cuts, len(text))})

    def rewrite(self, docs: pl.DataFrame) -> pl.Series:
        """``self(docs)`` from the extraction's ``pii.cut`` where every document carries it
        (measured on this same text by a masker of the same settings): the replacements put
        where it says, no text searched."""
        stored = f"{self.name}.{self.rewrite_signal}"
        if stored not in docs.columns or docs[stored].null_count():
            return self(docs)
        text = docs["text"].fill_null("").alias("text")
        rows = np.flatnonzero(docs[stored].list.len().to_numpy())
        if not len(rows):
            return text
        cuts = docs[stored].gather(rows).to_list()
        texts = [
            self._put_back(t, c) for t, c in zip(text.gather(rows).to_list(), cuts, strict=True)
        ]
        return text.scatter(rows, texts)

    def _put_back(self, text: str, cut: list[int]) -> str:
        triples = list(zip(cut[::3], cut[1::3], cut[2::3], strict=True))
        for number, replace in enumerate(self.replacers):
            mine = [at for owner, start, end in triples if owner == number for at in (start, end)]
            if mine:
                text = replace.put_back(text, mine)
        return text

    def mask(self, text: str) -> str:
        """Mask one string (convenience for callers outside polars)."""
        return self(pl.DataFrame({"text": [text]}))[0]


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True
