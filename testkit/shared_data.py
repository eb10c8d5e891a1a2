"""The real data beside the checkout, in ../shared (absent from a user's clone)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_path(*parts: str) -> Path | None:
    """A file or folder of ../shared, or None when it is absent."""
    path = SHARED.joinpath(*parts)
    return path if path.exists() else None


@dataclass(frozen=True)
class HtmlResponse:
    url: str
    html: bytes  # the HTTP payload
    content_type: str
    charset: str | None  # as the HTTP head declares it


def html_responses(names: Iterable[str]) -> Iterator[HtmlResponse]:
    """The HTML responses of ../shared's WARC files ``names`` (those absent: skipped, said)."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    for name in names:
        path = shared_path("corpora", "warc", name)
        if path is None:
            print(f"({name} is absent: skipped)", file=sys.stderr)
            continue
        with path.open("rb") as stream:
            for rec in ArchiveIterator(stream, record_types=WarcRecordType.response):
                head = rec.http_headers  # None: a record without an HTTP head (ClueWeb)
                content_type = (head and head.get("Content-Type")) or "text/html"
                if "html" not in content_type.lower():
                    continue
                url = rec.headers.get("WARC-Target-URI") or ""
                yield HtmlResponse(url, rec.reader.read(), content_type, rec.http_charset)
