"""Files a deployment lets a run read outside the lake: tokenizers and classifier models.

A run config names such a file by a local path or a URI. It is read only when it lies in the
lake or under a directory or URI prefix the deployment lists (comma-separated) in the file
kind's environment variable: a run config cannot make the pipeline read any other file
(``/etc/passwd``, a service-account token, another bucket) with the pods' credentials.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow.fs as pafs

from tokenmill.storage.lake import Lake


class PathNotAllowedError(ValueError):
    """A path outside the lake and the deployment's allowed locations."""


def allowed_locations(lake: Lake, env: str) -> list[str]:
    """The lake's root and the directories or URI prefixes listed in ``env``."""
    lake_root = lake.real_root if lake.is_local else f"s3://{lake.root}"
    listed = os.environ.get(env, "").split(",")
    entries = [_location(entry.strip()) for entry in listed if entry.strip()]
    return [lake_root, *(entry for entry in entries if entry)]


def _location(uri: str) -> str | None:
    """A local path as its real absolute path (symlinks resolved), a URI with its scheme; None
    for a URI with "..", "." or empty segments (object stores do not resolve them)."""
    if "://" not in uri:
        return os.path.realpath(uri)
    if uri.startswith("file://"):
        return os.path.realpath(uri.removeprefix("file://"))
    scheme, path = uri.split("://", 1)
    if posixpath.normpath("/" + path) != "/" + path.rstrip("/"):
        return None
    return f"{scheme}://{path.rstrip('/')}"


def check_location(lake: Lake, uri: str, env: str, what: str) -> str:
    """``uri``'s location if it is inside the lake or an allowed location, else a clear error
    (``what``: the kind of file, for the message)."""
    location = _location(uri)
    allowed = allowed_locations(lake, env)
    if not location or not any(
        location == root or location.startswith(root.rstrip("/") + "/") for root in allowed
    ):
        raise PathNotAllowedError(
            f"{what} path {uri!r} is outside the lake and the allowed {what} locations "
            f"{allowed}; put the file in the lake, or add its directory to {env} "
            "(comma-separated directories or URI prefixes, set by the deployment)"
        )
    return location


@contextmanager
def open_location(lake: Lake, uri: str, env: str, what: str) -> Iterator:
    """A binary stream of a file in the lake or an allowed location: a local path, or an
    s3:// URI read with the lake's own S3 settings (endpoint, keys)."""
    location = check_location(lake, uri, env, what)
    if location.startswith("s3://") and not lake.is_local:
        with lake.fs.open_input_stream(location.removeprefix("s3://")) as f:
            yield f
        return
    filesystem, path = pafs.FileSystem.from_uri(location)
    with filesystem.open_input_stream(path) as f:
        yield f
