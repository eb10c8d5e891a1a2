from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from testkit.shared_data import SHARED
from tokenmill.storage.lake import Lake


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not present at {SHARED}")
    return SHARED


@pytest.fixture
def lake(tmp_path) -> Lake:
    """An empty local lake of the test's own."""
    return Lake.from_url(str(tmp_path / "lake"))


@pytest.fixture(scope="module")
def articles() -> list:
    """12 distinct English demo articles (seed 7), for the deduplication tests."""
    import random

    from tokenmill.demo import crawl as demo

    rng = random.Random(7)
    prose = demo.english_prose(rng, demo._seeded_faker("en_US", 7))
    return [demo.english_article(prose, rng) for _ in range(12)]


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory):
    """A SeaweedFS S3 gateway on loopback with access keys and a bucket; stopped by PID."""
    from testkit.servers import start_seaweedfs, stop

    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    yield server
    stop(server.process)


@pytest.fixture(scope="session")
def postgres_database():
    """A fresh database on the PostgreSQL server at 127.0.0.1:5432, dropped afterwards."""
    from testkit.servers import fresh_database

    with fresh_database("tokenmill_test") as name:
        yield name


# The suite runs in two processes (pytest-xdist, `-n 2 --dist loadscope` in pyproject.toml), a
# module's tests in one of them, so its module fixtures (demo pipelines, `dagster dev`) are set
# up once; the modules using the PostgreSQL server share one, since test_faults restarts it.
SHARES_POSTGRES = {"test_faults", "test_production"}
# The longest start first, so neither process is left with one at the end (in this order:
# `--no-loadscope-reorder` in pyproject.toml, or xdist starts the modules with most tests first,
# and the long end-to-end modules, of few tests each, last).
LONGEST_FIRST = [
    "test_docs",
    "postgres",
    "test_concurrent_runs",
    "test_daemon",
    "test_backfill",
    "test_cli",
    "test_automation",
    "test_runtime",
    "test_webui",
    "test_pipeline",
    "test_release_staleness",
    "test_claims",
    "test_dedup",
    "test_progress",
]


def _scope(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return "postgres" if module in SHARES_POSTGRES else module


def pytest_configure(config):
    """The project settings file the tests' commands read and write is their own, never the
    checkout's `tokenmill.yaml` (which `tokenmill demo` writes)."""
    settings = Path(tempfile.mkdtemp(prefix="tokenmill-settings-")) / "tokenmill.yaml"
    os.environ["TOKENMILL_SETTINGS"] = str(settings)


def pytest_collection_modifyitems(items):
    rank = {scope: index for index, scope in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_scope(item.nodeid), len(rank)))


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return ByModule(config, log)
