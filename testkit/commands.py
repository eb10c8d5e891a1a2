"""`tokenmill` commands as an operator runs them (a process of their own, its own process group)
on a lake and instance of a test's, and what they leave in the lake."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testkit.faults import snapshot
from tokenmill.storage.lake import Lake

PROJECT_DIR = Path(__file__).resolve().parents[1]
INHERITED = ("TOKENMILL_EXTRACTION", "TOKENMILL_RECIPES", "TOKENMILL_LAKE_URL")


def command_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a project at `root`: its lake, instance and settings file."""
    env = {k: v for k, v in os.environ.items() if k not in INHERITED}
    return env | {
        "TOKENMILL_LAKE_URL": str(root / "lake"),
        "DAGSTER_HOME": str(root / "dagster_home"),
        "TOKENMILL_SETTINGS": str(root / "tokenmill.yaml"),
        **extra,
    }


def start(env: dict[str, str], output: Path, *args: str) -> subprocess.Popen:
    """`tokenmill <args>`, its output (both streams) in `output`."""
    with output.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tokenmill.cli.main", *args],
            cwd=PROJECT_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def run(env: dict[str, str], *args: str, timeout: float = 600) -> str:
    """`tokenmill <args>` to its end; what it printed. It must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "tokenmill.cli.main", *args],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def crawl_outputs(lake: Lake, crawl: str) -> dict[str, str]:
    """Every committed object the pipeline made of `crawl` in a local lake (markers less their
    attempt's own counts), by key: what two ways of running it must leave alike."""
    tops = sorted(p.name for p in Path(lake.root).iterdir() if p.is_dir())
    return {
        key: digest
        for top in tops
        if top not in ("landing", "ops")
        for key, digest in snapshot(lake, top).items()
        if f"/{crawl}/" in f"/{key}"
    }
