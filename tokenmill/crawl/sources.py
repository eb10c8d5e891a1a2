"""Where a crawl's WARC files are read from, in place.

By default a crawl is the files dropped into the lake's `landing/<crawl>/`. A crawl can also be
declared (`tokenmill crawl add`, stored as `crawls/<crawl>.json`) by

- a paths file in Common Crawl's format (`warc.paths.gz`: one path per line, relative to a
  base URI), or
- a prefix (a local folder or an S3 prefix) whose WARC files make up the crawl,

on the local disk or in any S3-compatible bucket, with its own endpoint and credentials (named
by an environment-variable prefix, never stored) or unsigned for public buckets. Files are read
where they are; `copy: true` makes the raw stage keep a copy in the lake, for sources that may
disappear.

A manifest names a file by a lake key (`landing/...`) or by its source URI.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import lru_cache
from posixpath import normpath
from typing import BinaryIO
from urllib.parse import urlparse

from tokenmill.crawl.warc import UnusableInputError
from tokenmill.storage.lake import Lake, LakeKeyError
from tokenmill.storage.layout import CRAWLS, LANDING, check_name

# Why registration leaves a file out that a listing shows: never read through a link.
IRREGULAR = "symbolic links and other non-regular files"
WARC_SUFFIXES = (".warc.gz", ".warc", ".arc.gz", ".arc", ".wet.gz", ".wet")


def is_warc_name(key: str) -> bool:
    return key.endswith(WARC_SUFFIXES)


def is_uri(ref: str) -> bool:
    """A source URI (`s3://...`, `file://...`, `/abs/path`) rather than a lake key."""
    return ref.startswith("/") or "://" in ref


@dataclass(frozen=True)
class CrawlSource:
    crawl: str
    paths: str | None = None
    base: str | None = None
    prefix: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    unsigned: bool = False
    credentials: str | None = None
    copy: bool = False

    def __post_init__(self):
        check_name(self.crawl, "crawl name")
        if (self.paths is None) == (self.prefix is None):
            raise ValueError(f"crawl {self.crawl}: declare either a paths file or a prefix")
        if self.paths is not None and not self.base:
            raise ValueError(
                f"crawl {self.crawl}: a paths file needs the base URI its paths are relative to"
            )
        if self.credentials and self.unsigned:
            raise ValueError(f"crawl {self.crawl}: credentials and unsigned exclude each other")

    @staticmethod
    def key(crawl: str) -> str:
        return f"{CRAWLS}/{check_name(crawl, 'crawl name')}.json"

    @classmethod
    def declared(cls, lake: Lake, crawl: str) -> bool:
        return lake.exists(cls.key(crawl))

    @staticmethod
    def declared_crawls(lake: Lake) -> list[str]:
        return sorted(
            k.rsplit("/", 1)[1].removesuffix(".json")
            for k in lake.list(CRAWLS)
            if k.endswith(".json")
        )

    @classmethod
    def load(cls, lake: Lake, crawl: str) -> CrawlSource:
        return cls(**lake.read_json(cls.key(crawl)))

    def save(self, lake: Lake) -> None:
        lake.write_json(
            self.key(self.crawl), {k: v for k, v in asdict(self).items() if v not in (None, False)}
        )

    def store(self, uri: str) -> tuple[Lake, str]:
        """The store holding `uri` and the key of `uri` in it."""
        parsed = urlparse(uri)
        if parsed.scheme == "s3":
            return (
                source_store(
                    f"s3://{parsed.netloc}",
                    self.endpoint_url,
                    self.region,
                    self.unsigned,
                    self.credentials,
                ),
                parsed.path.lstrip("/"),
            )
        path = parsed.path if parsed.scheme == "file" else uri
        if parsed.scheme not in ("", "file") or not path.startswith("/"):
            raise ValueError(f"crawl {self.crawl}: unsupported source URI {uri!r}")
        return source_store("/"), path.lstrip("/")

    def root(self) -> str:
        """The declared prefix, or the base of the paths file: every file of the crawl lies
        below it."""
        return (self.prefix or self.base).rstrip("/")

    def files(
        self, lake: Lake, refuse: Callable[[str, str], None], verify: bool = True
    ) -> list[str]:
        """The crawl's WARC files as URIs, in the source's order; paths that cannot be read are
        passed to `refuse(reason, path)` and left out."""
        if self.prefix is not None:
            store, key = self.store(self.prefix.rstrip("/") + "/")
            root = self.prefix.rstrip("/")
            listed = [k for k in store.list(key.rstrip("/")) if is_warc_name(k)]
            named = {f"{root}/{k[len(key) :]}": k for k in listed}
            return regular_only(store, named, key.rstrip("/"), refuse)
        base = self.base.rstrip("/")
        uris, seen = [], set()
        for line in _read_paths(self):
            path = line.strip()
            if not path:
                continue
            normal = normpath(path)
            if is_uri(path) or normal == ".." or normal.startswith("../"):
                refuse("paths outside the base", path)
                continue
            if normal in seen:
                refuse("duplicate paths", path)
                continue
            seen.add(normal)
            uris.append(f"{base}/{normal}")
        if verify and uris:
            store, root_key = self.store(base + "/")
            common = os.path.commonpath([u[len(base) + 1 :] for u in uris])
            listed = {
                f"{base}/{k[len(root_key) :]}"
                for k in store.list(f"{root_key}{common}".rstrip("/") or ".")
            }
            missing = [u for u in uris if u not in listed]
            for uri in missing:
                refuse("missing objects", uri)
            uris = [u for u in uris if u in listed] if missing else uris
            named = {u: f"{root_key}{u[len(base) + 1 :]}" for u in uris}
            uris = regular_only(store, named, root_key.rstrip("/"), refuse)
        return uris


@dataclass(frozen=True)
class LandingSource:
    """Files dropped into the lake's landing zone: the default source of a crawl."""

    crawl: str
    copy: bool = False

    def files(
        self, lake: Lake, refuse: Callable[[str, str], None], verify: bool = True
    ) -> list[str]:
        files = []
        for key in lake.list(f"{LANDING}/{self.crawl}"):
            if not is_warc_name(key):
                continue
            try:
                for part in key.split("/")[2:]:
                    check_name(part, "file name")
            except LakeKeyError:
                refuse("files with invalid names", key)
                continue
            files.append(key)
        return regular_only(lake, {key: key for key in files}, "", refuse)


def regular_only(
    store: Lake, named: dict[str, str], trusted: str, refuse: Callable[[str, str], None]
) -> list[str]:
    """The names (of `named`: name -> key in `store`) whose objects are regular files reached
    without a symbolic link below `trusted`; the others are refused by name, with why."""
    regular = []
    for name, key in named.items():
        if problem := store.irregular(key, trusted):
            refuse(IRREGULAR, f"{name} ({problem})")
        else:
            regular.append(name)
    return regular


def crawl_source(lake: Lake, crawl: str) -> CrawlSource | LandingSource:
    if CrawlSource.declared(lake, crawl):
        return CrawlSource.load(lake, crawl)
    return LandingSource(check_name(crawl, "crawl name"))


def _read_paths(source: CrawlSource) -> list[str]:
    store, key = source.store(source.paths)
    data = store.read_bytes(key)
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8").splitlines()


@lru_cache(maxsize=32)
def source_store(
    root: str,
    endpoint_url: str | None = None,
    region: str | None = None,
    unsigned: bool = False,
    credentials: str | None = None,
) -> Lake:
    """A read-only view of a source bucket or the local file system. Credentials come from
    `<credentials>_ACCESS_KEY_ID` / `<credentials>_SECRET_ACCESS_KEY` in the environment, or
    the AWS SDK's default chain when no prefix is named."""
    if not root.startswith("s3://"):
        return Lake.from_url(root)
    keys = {}
    if credentials:
        keys = {
            "access_key": os.environ[f"{credentials}_ACCESS_KEY_ID"],
            "secret_key": os.environ[f"{credentials}_SECRET_ACCESS_KEY"],
        }
    return Lake.from_url(root, endpoint_url=endpoint_url, region=region, anonymous=unsigned, **keys)


@contextmanager
def open_file(lake: Lake, crawl: str, ref: str) -> Iterator[BinaryIO]:
    """A sequential stream of one of the crawl's files (a lake key or a source URI). A file that
    is gone or is not a regular file of its source (a symbolic link, a folder) raises
    `UnusableInputError` naming it: no retry can read it."""
    if is_uri(ref):
        source = crawl_source(lake, crawl)
        store, key = source.store(ref)
        trusted = source.store(source.root() + "/")[1].rstrip("/")
    else:
        store, key, trusted = lake, ref, ""
    if problem := store.irregular(key, trusted):
        raise UnusableInputError(ref, problem)
    try:
        stream = store.open_stream(key)
    except FileNotFoundError:
        raise UnusableInputError(ref, "missing: no such object") from None
    with stream:
        yield stream


def file_size(lake: Lake, crawl: str, ref: str) -> int:
    if not is_uri(ref):
        return lake.size(ref)
    store, key = crawl_source(lake, crawl).store(ref)
    return store.size(key)
