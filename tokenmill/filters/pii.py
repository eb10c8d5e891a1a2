"""PII masking (datatrove PIIFormatter)."""

from __future__ import annotations

import ipaddress
import re
import string
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import polars as pl

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
    documents were masked before it (the same in every stage and every re-run)."""

    def __init__(
        self,
        pattern: str,
        replacements: Sequence[str],
        is_pii: Callable[[str], bool],
        matches: Callable[[str], Iterator[re.Match]] | None = None,
    ):
        self.pattern = re.compile(pattern)
        self.matches = matches or self.pattern.finditer
        self.replacements = (
            (replacements,) if isinstance(replacements, str) else tuple(replacements)
        )
        self.is_pii = is_pii
        self._next = 0

    def _replace(self, match: re.Match) -> str:
        if not self.is_pii(match.group(0)):
            return match.group(0)
        replacement = self.replacements[self._next]
        self._next = (self._next + 1) % len(self.replacements)
        return replacement

    def __call__(self, text: str) -> str:
        self._next = 0
        pieces, done = [], 0
        for match in self.matches(text):
            pieces += (text[done : match.start()], self._replace(match))
            done = match.end()
        return "".join([*pieces, text[done:]])


def is_public_ip(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_global
    except ValueError:
        return False


class PIIMasker:
    """Formatter replacing e-mail addresses and public IPv4 addresses (private, loopback and other
    reserved ranges are kept), with datatrove's replacement strings used in turn.

    Only documents where the (Rust) regex finds a candidate go through the Python ``re.sub``.
    """

    name = "pii"

    def __init__(
        self,
        remove_emails: bool = True,
        remove_ips: bool = True,
        only_remove_public_ips: bool = True,
        email_replacement: Sequence[str] | str = EMAIL_REPLACEMENTS,
        ip_replacement: Sequence[str] | str = IP_REPLACEMENTS,
    ):
        self.replacers: list[tuple[str, _CyclingReplacer]] = []
        if remove_emails:
            self.replacers.append(
                (
                    EMAIL_PATTERN,
                    _CyclingReplacer(EMAIL_PATTERN, email_replacement, bool, email_matches),
                )
            )
        if remove_ips:
            is_pii = (
                is_public_ip
                if only_remove_public_ips
                else (lambda ip: is_public_ip(ip) or _is_ip(ip))
            )
            self.replacers.append(
                (IPV4_PATTERN, _CyclingReplacer(IPV4_PATTERN, ip_replacement, is_pii))
            )

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        text = docs["text"].fill_null("")
        for pattern, replace in self.replacers:
            candidates = np.flatnonzero(text.str.contains(pattern).to_numpy())
            if len(candidates):
                masked = [replace(t) for t in text.gather(candidates).to_list()]
                text = text.scatter(candidates, masked)
        return text.alias("text")

    def mask(self, text: str) -> str:
        """Mask one string (convenience for callers outside polars)."""
        return self(pl.DataFrame({"text": [text]}))[0]


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True
