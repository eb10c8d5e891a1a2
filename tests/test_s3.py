"""The lake on a real S3-compatible store (SeaweedFS on loopback): atomic multipart uploads,
credentials from the environment only, and failures that name the endpoint and bucket."""

from __future__ import annotations

import inspect
import os

import pytest

from tests.servers import free_port
from tokenmill.lake import PART_SIZE, Lake, LakeAccessError
from tokenmill.outputs import MARKER, PartitionWriter, StageReport


@pytest.fixture
def s3_env(seaweedfs, monkeypatch):
    for name, value in seaweedfs.env().items():
        monkeypatch.setenv(name, value)
    return monkeypatch


def s3_lake(seaweedfs, prefix: str, endpoint: str | None = None) -> Lake:
    url = f"s3://{seaweedfs.bucket}/{prefix}"
    return Lake.from_url(url, endpoint_url=endpoint or seaweedfs.endpoint, max_attempts=2)


def test_large_objects_are_uploaded_in_parts_and_read_back(seaweedfs, s3_env, tmp_path):
    lake = s3_lake(seaweedfs, "multipart")
    data = os.urandom(2 * PART_SIZE + 12345)  # above the threshold: three parts
    big = tmp_path / "big.bin"
    big.write_bytes(data)
    lake.put_file("x/big.bin", big)
    head = seaweedfs.client().head_object(Bucket=seaweedfs.bucket, Key="multipart/x/big.bin")
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-3")  # a multipart upload of three parts
    assert lake.read_bytes("x/big.bin") == data
    lake.write_bytes("x/small.json", b"{}")
    small = seaweedfs.client().head_object(Bucket=seaweedfs.bucket, Key="multipart/x/small.json")
    assert "-" not in small["ETag"]
    assert lake.list("x") == ["x/big.bin", "x/small.json"]
    assert seaweedfs.keys("multipart/") == ["multipart/x/big.bin", "multipart/x/small.json"]


def test_a_failed_partition_write_leaves_nothing_behind(seaweedfs, s3_env):
    lake = s3_lake(seaweedfs, "atomic")
    with pytest.raises(RuntimeError), PartitionWriter(lake, "stage/c/0", StageReport()) as out:
        out.open("part.bin").write(os.urandom(3 * PART_SIZE))
        raise RuntimeError("crash before commit")
    assert seaweedfs.keys("atomic/") == []
    with PartitionWriter(lake, "stage/c/0", StageReport()) as out:
        out.open("part.bin").write(b"data")
    assert seaweedfs.keys("atomic/") == ["atomic/stage/c/0/" + MARKER, "atomic/stage/c/0/part.bin"]


def test_credentials_come_only_from_the_environment(seaweedfs, s3_env):
    assert not {"access_key", "secret_key"} & set(inspect.signature(Lake.from_url).parameters)
    s3_env.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    lake = s3_lake(seaweedfs, "creds")
    with pytest.raises(LakeAccessError) as refused:
        lake.list("anything")
    message = str(refused.value)
    assert seaweedfs.endpoint in message and f"'{seaweedfs.bucket}'" in message
    assert "AWS_SECRET_ACCESS_KEY" in message
    with pytest.raises(LakeAccessError, match="refused the credentials"):
        lake.write_bytes("k.json", b"{}")
    s3_env.setenv("AWS_SECRET_ACCESS_KEY", seaweedfs.secret_key)
    s3_lake(seaweedfs, "creds").write_bytes("k.json", b"{}")
    assert seaweedfs.keys("creds/") == ["creds/k.json"]


def test_unreachable_endpoint_is_named(seaweedfs, s3_env):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    lake = s3_lake(seaweedfs, "gone", endpoint=endpoint)
    with pytest.raises(LakeAccessError, match="is unreachable") as unreachable:
        lake.exists("a/b.json")
    assert endpoint in str(unreachable.value) and f"'{seaweedfs.bucket}'" in str(unreachable.value)
    with pytest.raises(LakeAccessError, match="is unreachable"):
        lake.write_bytes("a/b.json", b"{}")


def test_bounded_listing_pages_through_the_bucket(seaweedfs, s3_env):
    lake = s3_lake(seaweedfs, "listing")
    keys = [f"landing/C/{i:03d}.warc.gz" for i in range(7)]
    for key in keys:
        lake.write_bytes(key, b"")
    pages, after = [], ""
    while page := lake.list_after("landing/C", after, 3):
        pages.append(page)
        after = page[-1]
    assert pages == [keys[0:3], keys[3:6], keys[6:7]]
    assert lake.list_dirs("landing") == ["C"]


def test_tokenizer_is_read_from_an_s3_uri_with_the_lakes_settings(seaweedfs, s3_env, shared):
    from tokenmill.tokenize import TOKENIZER_KEY, build_tokenizer

    source = shared / "tokenizers" / "llama-style-32k.tokenizer.json"
    seaweedfs.client().upload_file(str(source), seaweedfs.bucket, "models/llama.json")
    lake = s3_lake(seaweedfs, "tok")
    report = build_tokenizer(lake, f"s3://{seaweedfs.bucket}/models/llama.json", 0, 0)
    assert lake.read_bytes(TOKENIZER_KEY) == source.read_bytes()
    assert report.counts["vocab_size"] == 32003
