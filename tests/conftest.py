from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not present at {SHARED}")
    return SHARED


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory):
    """A SeaweedFS S3 gateway on loopback with access keys and a bucket; stopped by PID."""
    from tests.servers import start_seaweedfs, stop

    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    yield server
    stop(server.process)


@pytest.fixture(scope="session")
def postgres_database():
    """A fresh database on the PostgreSQL server at 127.0.0.1:5432, dropped afterwards."""
    from tests.servers import fresh_database

    with fresh_database("tokenmill_test") as name:
        yield name
