"""The benchmarks' record: every run appends one JSON line to benchmarks/results.jsonl with what
it measured, on what input, on which machine, and the command that runs it again;
benchmarks/report.py renders the latest line of each benchmark as benchmarks/RESULTS.md.

A trial run whose figures should not become the record writes elsewhere:
``BENCH_RESULTS=/tmp/trial.jsonl uv run python benchmarks/<script>.py ...``.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tokenmill.runtime.parts import available_cpus

CHECKOUT = Path(__file__).resolve().parents[1]
RESULTS = CHECKOUT / "benchmarks" / "results.jsonl"
RESULTS_MD = RESULTS.with_name("RESULTS.md")  # the report made from it (report.py)
RESULTS_ENV = "BENCH_RESULTS"
# Environment variables that change what a benchmark measures (BENCH_ROUNDS, ...): part of the
# command that reproduces a run.
SETTINGS_PREFIX = "BENCH_"


def record(benchmark: str, figures: dict, input: dict) -> dict | None:
    """Append a run's line to the results file and return it. `figures` is what the benchmark
    measured (the JSON object it prints, or its printed tables); `input` names the data it
    measured on and its size. A run that measured nothing (its data absent) is not recorded."""
    if not figures:
        print("(nothing measured: no line recorded)", file=sys.stderr)
        return None
    line = {
        "benchmark": benchmark,
        "figures": figures,
        "input": input,
        "machine": machine(),
        "command": command(),
        "commit": commit(),
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    path = Path(os.environ.get(RESULTS_ENV) or RESULTS)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line, default=_plain) + "\n")
    print(f"(recorded in {path})", file=sys.stderr)
    return line


def machine() -> dict:
    return {
        "cores": available_cpus(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        # the machine may be shared: how busy it was when the run ended
        "load_average": [round(load, 2) for load in os.getloadavg()],
    }


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for row in info:
                if row.startswith("model name"):
                    return row.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def command() -> str:
    """The shell command that runs this benchmark again, from the checkout."""
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(CHECKOUT):
        script = script.relative_to(CHECKOUT)
    settings = [
        f"{name}={shlex.quote(value)}"
        for name, value in sorted(os.environ.items())
        if name.startswith(SETTINGS_PREFIX) and name != RESULTS_ENV
    ]
    return " ".join([*settings, "uv run python", shlex.join([str(script), *sys.argv[1:]])])


def commit() -> str | None:
    """The checkout's commit, with ``-dirty`` when files other than the record itself (and the
    report made from it) differ from it: runs recorded one after another stay on their commit."""
    try:
        described = _git("describe", "--always", "--abbrev=12")
        changed = _git(
            "status", "--porcelain", "--untracked-files=no", "--", ".",
            *(f":!{path.relative_to(CHECKOUT)}" for path in (RESULTS, RESULTS_MD)),
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (described + "-dirty" if changed else described) or None


def _git(*arguments: str) -> str:
    done = subprocess.run(
        ["git", *arguments], cwd=CHECKOUT, capture_output=True, text=True, timeout=10
    )
    return done.stdout.strip()


def _plain(value: Any) -> Any:
    """numpy scalars and paths, as JSON has them."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)
