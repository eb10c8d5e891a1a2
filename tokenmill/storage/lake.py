"""The data lake: one interface over a local directory or an S3-compatible bucket.

Keys are relative POSIX paths ("cleaned/CC-MAIN-2024-10/00003/docs.parquet"). Every write is
atomic: readers see either the previous object or the complete new one, never a partial file.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from typing import IO, Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

TEMP_MARKER = ".tmp-"
# Who writes a local temporary (host, process), so the next writer can tell a stray one
# left by a killed process from one still being written.
HOST_ID = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
WRITER = f"{HOST_ID}-{os.getpid()}"
STRAY_AFTER_S = 24 * 3600
MULTIPART_THRESHOLD = 16 << 20
PART_SIZE = 8 << 20
# a listing restarted when a folder vanishes during its walk, before giving up
_LISTING_ATTEMPTS = 5


class LakeKeyError(ValueError):
    """A key that would escape the lake root."""


def is_temporary(name: str) -> bool:
    """A writer's temporary file: its name starts with TEMP_MARKER (see ``writing``). Only
    there: a landed file named "part.tmp-1.warc.gz" is a file like any other."""
    return name.startswith(TEMP_MARKER)


def check_key(key: str) -> str:
    path = PurePosixPath(key)
    if not key or path.is_absolute() or any(part in ("..", "") for part in key.split("/")):
        raise LakeKeyError(f"invalid lake key {key!r}: must be a relative path inside the lake")
    return key


def check_key_part(part: str) -> str:
    """A single path segment taken from user input (crawl name, shard key)."""
    if not part or "/" in part or "\\" in part or part in (".", "..") or part.startswith("."):
        raise LakeKeyError(f"invalid name {part!r}: must be a plain name, not a path")
    return part


class LakeAccessError(Exception):
    """The object store could not be used: refused (``LakeRefusedError``) or unreachable
    (``LakeUnreachableError``)."""


class LakeRefusedError(LakeAccessError):
    """The object store refused our credentials or the bucket does not exist: re-running the
    step as is will not help, so stages fail at once with this."""


class LakeUnreachableError(LakeAccessError):
    """The object store could not be reached (after the SDK's own retries): an outage or a
    restart may end, so stages retry this with backoff before failing with the same message."""


# What an S3 error code means for the operator. Codes as boto3 reports them (the S3 API's, or
# the HTTP status when a response has no body, as for HEAD requests) and as pyarrow does (the
# AWS C++ SDK's error type names, see `pyarrow_s3_error_code`).
S3_ERROR_CODES = {
    **dict.fromkeys(
        [
            "AccessDenied",
            "SignatureDoesNotMatch",
            "InvalidAccessKeyId",
            "ACCESS_DENIED",
            "SIGNATURE_DOES_NOT_MATCH",
            "INVALID_ACCESS_KEY_ID",
            "INVALID_CLIENT_TOKEN_ID",
            "MISSING_AUTHENTICATION_TOKEN",
            "403",
        ],
        "credentials",
    ),
    **dict.fromkeys(["NoSuchBucket", "NO_SUCH_BUCKET"], "no bucket"),
    "NETWORK_CONNECTION": "unreachable",
}
# pyarrow's S3 filesystem raises a plain OSError: the AWS SDK's error type is only in the message,
# which Arrow formats as "AWS Error <TYPE> during <operation> operation: ...", with the HTTP
# status after an UNKNOWN type (arrow/filesystem/s3_internal.h, ErrorToStatus); pyarrow exposes
# no code attribute, so this is the one place a message is parsed.
_PYARROW_AWS_ERROR = re.compile(r"AWS Error (\w+)(?: \(HTTP status (\d+)\))?")


def boto_errors() -> tuple[type[Exception], ...]:
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError, S3UploadFailedError)


def _boto_unreachable_errors() -> tuple[type[Exception], ...]:
    from botocore.exceptions import (
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    return (EndpointConnectionError, ConnectTimeoutError, ConnectionClosedError, ReadTimeoutError)


def pyarrow_s3_error_code(error: OSError) -> str | None:
    """The AWS SDK error type of a pyarrow S3 error (the HTTP status for an UNKNOWN type)."""
    match = _PYARROW_AWS_ERROR.search(str(error))
    if match is None:
        return None
    name, status = match.groups()
    return status if name == "UNKNOWN" and status else name


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error and those it was raised from or during (boto3's S3UploadFailedError is raised
    while handling the ClientError that carries the code)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def s3_failure(error: BaseException) -> str | None:
    """What an S3 error means, from the SDK's error code or type: "credentials", "no bucket",
    "unreachable", or None when it is none of those."""
    from botocore.exceptions import ClientError

    for cause in _chain(error):
        if isinstance(cause, _boto_unreachable_errors()):
            return "unreachable"
        if isinstance(cause, ClientError):
            return S3_ERROR_CODES.get(cause.response.get("Error", {}).get("Code", ""))
        if isinstance(cause, OSError) and (code := pyarrow_s3_error_code(cause)):
            return S3_ERROR_CODES.get(code)
    return None


def explain_s3_failure(kind: str, endpoint: str, bucket: str) -> str:
    if kind == "credentials":
        return (
            f"S3 endpoint {endpoint} refused the credentials for bucket {bucket!r}: check "
            "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (environment or Kubernetes secret)"
        )
    if kind == "unreachable":
        return (
            f"S3 endpoint {endpoint} (bucket {bucket!r}) is unreachable: check "
            "TOKENMILL_S3_ENDPOINT and the network path to it"
        )
    return f"bucket {bucket!r} does not exist at S3 endpoint {endpoint}"


class Lake:
    def __init__(
        self, filesystem: pafs.FileSystem, root: str, url: str, endpoint: str | None = None
    ):
        self.fs = filesystem
        self.root = root.rstrip("/")
        self.url = url
        self.endpoint = endpoint
        self.is_local = isinstance(filesystem, pafs.LocalFileSystem)
        self.real_root = os.path.realpath(self.root or "/") if self.is_local else self.root
        # S3 uploads (see `_upload`); set by `from_url`
        self.endpoint_url: str | None = None
        self.region: str | None = None
        self.max_attempts = 8
        self.anonymous = False
        self.keys: tuple[str | None, str | None] = (None, None)
        self.multipart_threshold = MULTIPART_THRESHOLD
        self.part_size = PART_SIZE
        self._client = None
        # zone -> where its keys are stored (see `with_zones`)
        self.zones: dict[str, str] = {}

    def __getstate__(self) -> dict:
        # A worker process gets the lake without the boto3 client (which does not pickle): it
        # makes its own when it first uploads.
        return self.__dict__ | {"_client": None}

    @contextmanager
    def _s3_errors(self) -> Iterator[None]:
        """Refused credentials and a missing bucket become a LakeRefusedError, connection failures
        a LakeUnreachableError, both naming the endpoint and bucket; a missing key stays
        FileNotFoundError, other errors stay as they are."""
        try:
            yield
        except FileNotFoundError:
            raise
        except (OSError, *boto_errors()) as error:
            kind = None if self.is_local else s3_failure(error)
            if kind is None:
                raise
            explained = explain_s3_failure(kind, str(self.endpoint), self.root.split("/", 1)[0])
            lake_error = LakeUnreachableError if kind == "unreachable" else LakeRefusedError
            raise lake_error(f"{explained} [{error}]") from error

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        max_attempts: int = 8,
        anonymous: bool = False,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> Lake:
        """`/some/dir`, `file:///some/dir` or `s3://bucket/prefix`.

        S3 credentials come only from the environment, through the AWS SDK's default chain
        (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a web identity token, instance metadata),
        never from arguments or config. Failed requests are retried up to `max_attempts` times
        with exponential backoff (the SDKs' standard retry mode); objects above
        MULTIPART_THRESHOLD are uploaded as multipart uploads of PART_SIZE parts.
        """
        parsed = urlparse(url)
        if parsed.scheme == "s3":
            if not parsed.netloc:
                raise ValueError(f"lake URL {url!r} names no bucket (use s3://bucket/prefix)")
            options: dict[str, Any] = {
                "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=max_attempts),
                "region": region or os.environ.get("AWS_REGION", "us-east-1"),
                "connect_timeout": 10,
                "request_timeout": 60,
            }
            if anonymous:
                options["anonymous"] = True
            elif access_key:
                options.update(access_key=access_key, secret_key=secret_key)
            endpoint = "the AWS S3 endpoint"
            if endpoint_url:
                parsed_endpoint = urlparse(endpoint_url)
                options["endpoint_override"] = parsed_endpoint.netloc or parsed_endpoint.path
                options["scheme"] = parsed_endpoint.scheme or "https"
                endpoint = endpoint_url
            root = f"{parsed.netloc}{parsed.path}".rstrip("/")
            lake = cls(pafs.S3FileSystem(**options), root, url, endpoint)
            lake.endpoint_url, lake.region = endpoint_url, options["region"]
            lake.max_attempts = max_attempts
            lake.anonymous, lake.keys = anonymous, (access_key, secret_key)
            return lake
        if parsed.scheme not in ("", "file"):
            raise ValueError(
                f"unsupported lake URL {url!r} (use a directory or s3://bucket/prefix)"
            )
        directory = Path(parsed.path if parsed.scheme == "file" else url).resolve()
        directory.mkdir(parents=True, exist_ok=True)
        return cls(pafs.LocalFileSystem(), str(directory), str(directory))

    def with_zones(self, zones: dict[str, str]) -> Lake:
        """This lake, with the keys of each zone (a key's first folder) in `zones` stored
        under another prefix: `{"cleaned": "recipes/a/cleaned"}` reads and writes
        `cleaned/x` at `recipes/a/cleaned/x`, and lists it as `cleaned/x`. A recipe's stages
        run on such a view, so they use the same keys whichever recipe they serve."""
        view = copy.copy(self)
        view.zones = {**self.zones, **zones}
        return view

    def siblings(self, zone: str) -> list[Lake]:
        """The views of the other datasets stored beside this view's `zone`: with `cleaned`
        at `recipes/a/cleaned`, one view per other folder `recipes/b/`, with every zone this
        view keeps under `recipes/a/` kept under `recipes/b/` instead. Sorted by folder."""
        target = self.zones.get(zone, "")
        if target.count("/") < 2:
            return []
        parent, name, _ = target.rsplit("/", 2)
        own = f"{parent}/{name}/"
        stored = copy.copy(self)  # its folders as stored, past every zone mapping
        stored.zones = {}
        views = []
        for other in stored.list_dirs(parent):
            if other != name:
                views.append(
                    self.with_zones(
                        {
                            z: f"{parent}/{other}/{t[len(own) :]}"
                            for z, t in self.zones.items()
                            if t.startswith(own)
                        }
                    )
                )
        return views

    def stored_key(self, key: str) -> str:
        zone, slash, rest = key.partition("/")
        target = self.zones.get(zone)
        return f"{target}{slash}{rest}" if target else key

    def _key_of(self, stored: str) -> str:
        for zone, target in self.zones.items():
            if stored == target or stored.startswith(target + "/"):
                return zone + stored[len(target) :]
        return stored

    def path(self, key: str) -> str:
        path = f"{self.root}/{check_key(self.stored_key(key))}"
        if self.is_local and os.path.realpath(path) != path:
            # A symlink inside a local lake must not lead reads, writes or deletes out of it.
            real = os.path.realpath(path)
            if not real.startswith(self.real_root.rstrip("/") + "/"):
                raise LakeKeyError(f"lake key {key!r} leads out of the lake through a symlink")
        return path

    def uri(self, key: str) -> str:
        return f"{self.url.rstrip('/')}/{self.stored_key(key)}"

    # reading

    def open_input(self, key: str) -> pafs.NativeFile:
        """A seekable file (Parquet readers need random access)."""
        with self._s3_errors():
            return self.fs.open_input_file(self.path(key))

    def open_stream(self, key: str) -> pafs.NativeFile:
        """A sequential stream, for reading large objects front to back."""
        with self._s3_errors():
            return self.fs.open_input_stream(self.path(key), compression=None)

    def read_bytes(self, key: str) -> bytes:
        with self._s3_errors(), self.open_input(key) as f:
            return f.read()

    def read_json(self, key: str) -> Any:
        return json.loads(self.read_bytes(key))

    def exists(self, key: str) -> bool:
        with self._s3_errors():
            return self.fs.get_file_info(self.path(key)).type == pafs.FileType.File

    def irregular(self, key: str, trusted: str = "") -> str | None:
        """Why `key` is not a regular file reached without a symbolic link below the root, or
        below `trusted` (a prefix of `key` whose folders an operator named): a link, a folder,
        a device, nothing there. None when it is one; objects in a bucket always are."""
        if not self.is_local:
            return None
        below = check_key(key)
        path = self.root
        if trusted and below.startswith(f"{trusted}/"):
            path, below = f"{path}/{trusted}", below[len(trusted) + 1 :]
        for part in below.split("/"):
            path = f"{path}/{part}"
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                return "missing: no such file"
            if stat.S_ISLNK(mode):
                link = path[len(self.root) :].lstrip("/")
                where = "" if link == key else f" below the symbolic link {link}"
                return f"a symbolic link{where}, not a regular file"
        return None if stat.S_ISREG(mode) else "not a regular file"

    def size(self, key: str) -> int:
        with self._s3_errors():
            return self.fs.get_file_info(self.path(key)).size

    def stamp(self, key: str) -> tuple[int, int]:
        """(size, modification time in ns) of an object: what changes when it is replaced."""
        with self._s3_errors():
            info = self.fs.get_file_info(self.path(key))
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(f"no such object {self.uri(key)}")
        return info.size, info.mtime_ns or 0

    def _file_infos(self, selector: pafs.FileSelector) -> list:
        """The selector's file infos; a folder another process removes during the walk (a
        local lake's listing is not atomic) makes the walk start again."""
        for _ in range(_LISTING_ATTEMPTS - 1):
            try:
                with self._s3_errors():
                    return self.fs.get_file_info(selector)
            except FileNotFoundError:
                continue
        with self._s3_errors():
            return self.fs.get_file_info(selector)

    def list(self, prefix: str) -> list[str]:
        """Committed object keys under a prefix, sorted; temporary files are never listed."""
        selector = pafs.FileSelector(
            self.path(prefix.rstrip("/")), allow_not_found=True, recursive=True
        )
        infos = self._file_infos(selector)
        keys = [
            self._key_of(info.path[len(self.root) + 1 :])
            for info in infos
            if info.type == pafs.FileType.File and not is_temporary(info.base_name)
        ]
        return sorted(keys)

    def list_dirs(self, prefix: str) -> list[str]:
        """Names of the folders (common prefixes, on S3) directly under `prefix`, sorted."""
        selector = pafs.FileSelector(self.path(prefix.rstrip("/")), allow_not_found=True)
        infos = self._file_infos(selector)
        return sorted(info.base_name for info in infos if info.type == pafs.FileType.Directory)

    def list_after(self, prefix: str, start_after: str, limit: int) -> list[str]:
        """At most `limit` committed keys under `prefix` that sort after `start_after`: one
        bounded page of a listing that may hold millions of objects (S3 lists from there)."""
        if self.is_local:
            return [key for key in self.list(prefix) if key > start_after][:limit]
        prefix, start_after = self.stored_key(prefix), start_after and self.stored_key(start_after)
        bucket, _, root_key = self.root.partition("/")
        base = f"{root_key}/" if root_key else ""
        pages = (
            self._s3_client()
            .get_paginator("list_objects_v2")
            .paginate(
                Bucket=bucket,
                Prefix=base + check_key(prefix.rstrip("/")) + "/",
                StartAfter=base + start_after if start_after else "",
                PaginationConfig={"MaxItems": limit, "PageSize": min(limit, 1000)},
            )
        )
        with self._s3_errors():
            keys = [
                self._key_of(item["Key"][len(base) :])
                for page in pages
                for item in page.get("Contents", [])
            ]
        return [key for key in keys if not is_temporary(key.rsplit("/", 1)[-1])]

    # writing

    @contextmanager
    def writing(self, key: str) -> Iterator[IO[bytes]]:
        """Write an object atomically: it appears at `key` only if the block completes."""
        final = self.path(key)
        name = PurePosixPath(key).name
        if self.is_local:
            Path(final).parent.mkdir(parents=True, exist_ok=True)
            temp = f"{Path(final).parent}/{TEMP_MARKER}{WRITER}-{uuid.uuid4().hex}-{name}"
        else:
            descriptor, temp = tempfile.mkstemp(prefix=f"tokenmill-{name}-")
            os.close(descriptor)  # reopened below, as the local temporary is
        try:
            with open(temp, "wb") as f:
                yield f
                f.flush()
                if self.is_local:  # a temporary file that is uploaded needs no sync
                    os.fsync(f.fileno())
            if self.is_local:
                os.replace(temp, final)
            else:
                with self._s3_errors():
                    self._upload(temp, final)
        finally:
            if os.path.exists(temp):
                os.remove(temp)

    def _upload(self, local_file: str, final: str) -> None:
        # boto3's transfer manager: a single PUT below the threshold, otherwise a multipart
        # upload whose parts are retried on their own and which is aborted on failure, so an
        # object appears at its key only complete (pyarrow's output stream would complete a
        # half-written multipart upload when it is closed by an exception).
        from boto3.s3.transfer import TransferConfig

        bucket, key = final.split("/", 1)
        config = TransferConfig(
            multipart_threshold=self.multipart_threshold, multipart_chunksize=self.part_size
        )
        self._s3_client().upload_file(local_file, bucket, key, Config=config)

    def _s3_client(self):
        if self._client is None:
            import boto3
            from botocore import UNSIGNED
            from botocore.config import Config

            self._client = boto3.session.Session().client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=self.region,
                aws_access_key_id=self.keys[0],
                aws_secret_access_key=self.keys[1],
                config=Config(
                    signature_version=UNSIGNED if self.anonymous else None,
                    retries={"max_attempts": self.max_attempts, "mode": "standard"},
                    connect_timeout=10,
                    read_timeout=60,
                    s3={"addressing_style": "path"} if self.endpoint_url else None,
                ),
            )
        return self._client

    def write_bytes(self, key: str, data: bytes) -> None:
        with self.writing(key) as f:
            f.write(data)

    def write_json(self, key: str, value: Any) -> None:
        # compact: the C encoder (indent makes json use its Python one: a marker with histograms
        # took 2 ms to write)
        self.write_bytes(key, json.dumps(value, sort_keys=True, separators=(",", ":")).encode())

    def put_file(self, key: str, local_file: str | Path) -> None:
        with self.writing(key) as f, open(local_file, "rb") as src:
            shutil.copyfileobj(src, f, length=8 << 20)

    def delete(self, key: str) -> None:
        with suppress(FileNotFoundError), self._s3_errors():
            self.fs.delete_file(self.path(key))

    def remove_stray_temporaries(self, prefix: str) -> list[str]:
        """Delete the temporary files a killed writer left under `prefix` (local lakes; on S3
        temporaries are local files of the writer, and an upload a kill interrupted is never
        completed). Stray: its process on this host is gone, or it is older than a day."""
        if not self.is_local:
            return []
        removed = []
        for path in Path(self.path(prefix.rstrip("/"))).rglob(f"{TEMP_MARKER}*"):
            host, pid = (path.name[len(TEMP_MARKER) :].split("-") + ["", ""])[:2]
            writer_gone = host == HOST_ID and pid.isdigit() and not _process_exists(int(pid))
            with suppress(FileNotFoundError):  # renamed meanwhile by its live writer
                if writer_gone or time.time() - path.stat().st_mtime > STRAY_AFTER_S:
                    path.unlink()
                    removed.append(str(path))
        return removed

    def delete_prefix(self, prefix: str) -> None:
        """Delete every object under `prefix`; on a local lake, its emptied folders too."""
        for key in self.list(prefix):
            self.delete(key)
        if self.is_local:
            top = Path(self.path(prefix.rstrip("/")))
            folders = sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True)
            for folder in [*folders, top]:  # deepest first
                with suppress(OSError):  # not empty, or already gone
                    folder.rmdir()


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
