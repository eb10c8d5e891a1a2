from __future__ import annotations

import hashlib

import pytest

from tokenmill.crawl.units import register_new_files, unit_files
from tokenmill.storage.lake import (
    Lake,
    LakeKeyError,
    LakeRefusedError,
    LakeUnreachableError,
    s3_failure,
)
from tokenmill.storage.layout import Unit
from tokenmill.storage.outputs import MARKER, PartitionWriter, StageReport, is_committed


def test_write_is_atomic(lake):
    lake.write_bytes("a/b.txt", b"old")
    with pytest.raises(RuntimeError), lake.writing("a/b.txt") as f:
        f.write(b"half of the new")
        raise RuntimeError("machine died")
    assert lake.read_bytes("a/b.txt") == b"old"
    assert lake.list("a") == ["a/b.txt"]


def test_temporaries_are_never_listed(lake, tmp_path):
    with lake.writing("x/data.bin") as f:
        f.write(b"1")
        assert lake.list("x") == []
        assert len(list((tmp_path / "lake" / "x").iterdir())) == 1
    assert lake.list("x") == ["x/data.bin"]


@pytest.mark.parametrize("key", ["../etc/passwd", "/etc/passwd", "a/../../b", "a//b", ""])
def test_keys_cannot_escape_the_lake(lake, key):
    with pytest.raises(LakeKeyError):
        lake.path(key)


@pytest.mark.parametrize(
    "crawl", ["../../etc", "..", "a/b", ".hidden", "A|B", "A\x1bB", "A\u202eB", "x" * 129]
)
def test_path_like_partition_keys_are_refused(crawl):
    with pytest.raises(LakeKeyError):
        Unit(crawl, "00000")
    with pytest.raises(LakeKeyError):
        Unit("CC-MAIN-2026-01", crawl)
    with pytest.raises(LakeKeyError):
        Unit.from_key(f"{crawl}/00000")


def test_partition_is_done_only_after_commit(lake):
    with pytest.raises(RuntimeError), PartitionWriter(lake, "s/c/0", StageReport()) as out:
        out.open("part.bin").write(b"data")
        raise RuntimeError("crash before commit")
    assert not is_committed(lake, "s/c/0") and lake.list("s/c/0") == []
    with PartitionWriter(lake, "s/c/0", StageReport()) as out:
        out.open("part.bin").write(b"data")
        out.open("stale-next-time.bin").write(b"x")
    assert is_committed(lake, "s/c/0")
    with PartitionWriter(lake, "s/c/0", StageReport()) as out:
        out.open("part.bin").write(b"data2")
    assert lake.list("s/c/0") == ["s/c/0/" + MARKER, "s/c/0/part.bin"]
    digest = hashlib.sha256(b"data2").hexdigest()
    assert lake.read_json(f"s/c/0/{MARKER}")["outputs"] == {
        "part.bin": {"bytes": 5, "sha256": digest}
    }


def test_unit_registration_is_append_only(lake):
    for name in ["b.warc.gz", "a.warc.gz", "c.warc.gz"]:
        lake.write_bytes(f"landing/C1/{name}", b"")
    first = register_new_files(lake, "C1", files_per_unit=2).units
    assert [u.name for u in first] == ["00000", "00001"]
    assert unit_files(lake, first[0]) == ["landing/C1/a.warc.gz", "landing/C1/b.warc.gz"]
    lake.write_bytes("landing/C1/0-early.warc.gz", b"")
    second = register_new_files(lake, "C1", files_per_unit=2).units
    assert [u.name for u in second] == ["00002"]
    assert unit_files(lake, second[0]) == ["landing/C1/0-early.warc.gz"]
    assert unit_files(lake, first[0]) == ["landing/C1/a.warc.gz", "landing/C1/b.warc.gz"]
    assert register_new_files(lake, "C1", files_per_unit=2).units == []
    with pytest.raises(LakeKeyError, match="not registered"):
        unit_files(lake, Unit("C1", "00007"))


def _client_error(code: str):
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": "message"}}, "PutObject")


def _upload_failed(code: str):
    """boto3's upload_file: S3UploadFailedError raised while handling the ClientError."""
    from boto3.exceptions import S3UploadFailedError

    try:
        try:
            raise _client_error(code)
        except Exception as error:
            raise S3UploadFailedError(f"Failed to upload a to b/c: {error}")  # noqa: B904
    except S3UploadFailedError as upload_error:
        return upload_error


def test_s3_errors_are_classified_by_the_sdks_codes():
    from botocore.exceptions import (
        ConnectionClosedError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    for code in ("AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "403"):
        assert s3_failure(_client_error(code)) == "credentials"
    assert s3_failure(_client_error("NoSuchBucket")) == "no bucket"
    assert s3_failure(_client_error("InternalError")) is None
    assert s3_failure(_client_error("SlowDown: AccessDenied")) is None  # a code, not a substring
    assert s3_failure(_upload_failed("AccessDenied")) == "credentials"
    assert s3_failure(_upload_failed("NoSuchUpload")) is None
    for error in (
        EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
        ConnectionClosedError(endpoint_url="http://127.0.0.1:1"),
        ReadTimeoutError(endpoint_url="http://127.0.0.1:1"),
    ):
        assert s3_failure(error) == "unreachable"
    assert s3_failure(NoCredentialsError()) is None
    # pyarrow's S3 filesystem: an OSError whose message names the AWS SDK's error type
    prefix = "When getting information for key 'a/b' in bucket 'lake': AWS Error"
    arrow = {
        f"{prefix} ACCESS_DENIED during HeadObject operation: No response body.": "credentials",
        f"{prefix} UNKNOWN (HTTP status 403) during HeadObject operation: No response body.": (
            "credentials"
        ),
        f"{prefix} NETWORK_CONNECTION during HeadObject operation: curlCode: 7": "unreachable",
        f"{prefix} NO_SUCH_BUCKET during ListObjectsV2 operation: none": "no bucket",
        f"{prefix} UNKNOWN (HTTP status 301) during HeadBucket operation: moved": None,
        f"{prefix} SLOW_DOWN during PutObject operation: please reduce": None,
        "Access denied by the local file system": None,
    }
    for message, kind in arrow.items():
        assert s3_failure(OSError(message)) == kind, message


def test_unreachable_is_retried_and_refused_is_permanent():
    from tokenmill.data_assets.results import PERMANENT_ERRORS

    assert not issubclass(LakeUnreachableError, PERMANENT_ERRORS)
    assert issubclass(LakeRefusedError, PERMANENT_ERRORS)


def test_a_symlink_never_leads_out_of_a_local_lake(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the lake's")
    lake = Lake.from_url(str(tmp_path / "lake"))
    (tmp_path / "lake" / "landing").mkdir()
    (tmp_path / "lake" / "landing" / "crawl").symlink_to(outside)
    with pytest.raises(LakeKeyError, match="symlink"):
        lake.read_bytes("landing/crawl/secret.txt")
    with pytest.raises(LakeKeyError, match="symlink"):
        lake.delete("landing/crawl/secret.txt")
    with pytest.raises(LakeKeyError, match="symlink"):
        lake.write_bytes("landing/crawl/new.txt", b"x")
    assert (outside / "secret.txt").read_text() == "not the lake's"
    assert not (outside / "new.txt").exists()


class _FolderVanishesOnce:
    """The local filesystem, whose first recursive walk meets a folder another process
    removes meanwhile (the walk then fails as pyarrow's does)."""

    def __init__(self, fs, doomed):
        self._fs, self._doomed, self.walks = fs, doomed, 0

    def get_file_info(self, selector):
        self.walks += 1
        if self.walks == 1:
            import shutil

            shutil.rmtree(self._doomed)
            raise FileNotFoundError(f"Cannot list directory '{self._doomed}'")
        return self._fs.get_file_info(selector)

    def __getattr__(self, name):
        return getattr(self._fs, name)


def test_a_listing_walks_again_when_a_folder_vanishes_during_it(lake, tmp_path):
    lake.write_bytes("work/kept/a.bin", b"1")
    lake.write_bytes("work/scratch/b.bin", b"2")
    lake.fs = _FolderVanishesOnce(lake.fs, tmp_path / "lake" / "work" / "scratch")
    assert lake.list("work") == ["work/kept/a.bin"]
    assert lake.fs.walks == 2
