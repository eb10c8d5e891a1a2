"""How long `tokenmill` commands take, start to exit, on a demo lake: `--help`, a usage error,
the read-only commands (no Dagster) and, for reference, `status` (Dagster's instance).

    uv run python benchmarks/bench_cli.py --project DIR [--runs 10] [--baseline CHECKOUT ...]

DIR holds what `tokenmill demo` made there: `lake/`, `dagster_home/` and `tokenmill.yaml` (run
`TOKENMILL_LAKE_URL=DIR/lake DAGSTER_HOME=DIR/dagster_home TOKENMILL_SETTINGS=DIR/tokenmill.yaml
uv run tokenmill demo` first). Each `--baseline` names another checkout (with its own `.venv`):
its `tokenmill` runs the same commands, interleaved with this checkout's, on the same lake.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.results import CHECKOUT, record

UNIT = "CC-MAIN-DEMO-2026-01/00000"
DEMO_RECIPE = "tokenmill/demo/recipes/demo_top_quality.yaml"


def commands(unit: str, proposed: str) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "usage error": ["release", "--recipe", "nope"],
        "recipes": ["recipes"],
        "summary": ["summary"],
        "trace": ["trace", unit, "0", "5", "--recipe", "fineweb_en"],
        "dropped": ["dropped", "--recipe", "fineweb_en", "--limit", "3"],
        "preview": ["preview", proposed, "--against", "fineweb_en"],
        "status (Dagster)": ["status"],
    }


NEW_COMMANDS = {"status (Dagster)"}  # not in a baseline from before `status`


def timed(executable: Path, args: list[str], env: dict, cwd: Path, strict: bool) -> float:
    """Seconds from start to exit; `strict`: the command must succeed (or, for a usage error,
    exit 2). A baseline may lack a command or fail where this checkout does not."""
    started = time.perf_counter()
    done = subprocess.run(
        [str(executable), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    elapsed = time.perf_counter() - started
    if strict and done.returncode not in (0, 2):
        raise RuntimeError(f"tokenmill {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--project", type=Path, required=True, help="a demo's lake and instance")
    parser.add_argument("--runs", type=int, default=10, help="invocations of each command")
    parser.add_argument(
        "--baseline", type=Path, action="append", default=[], help="a checkout to compare with"
    )
    parser.add_argument("--unit", default=UNIT, help="the unit `trace` reads (a demo unit)")
    parser.add_argument(
        "--proposed", default=DEMO_RECIPE, help="the recipe file `preview` tries (the demo's)"
    )
    args = parser.parse_args()
    project = args.project.resolve()
    env = os.environ | {
        "TOKENMILL_LAKE_URL": str(project / "lake"),
        "DAGSTER_HOME": str(project / "dagster_home"),
        "TOKENMILL_SETTINGS": str(project / "tokenmill.yaml"),
    }
    checkouts = {"this": CHECKOUT}
    for baseline in args.baseline:
        checkouts[baseline.resolve().name] = baseline.resolve()
    measured = commands(args.unit, str(Path(args.proposed).resolve()))
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.runs):  # interleaved: a noisy moment costs every command alike
        for name, command in measured.items():
            for label, checkout in checkouts.items():
                executable = checkout / ".venv" / "bin" / "tokenmill"
                if label != "this" and name in NEW_COMMANDS:
                    continue
                times.setdefault((name, label), []).append(
                    timed(executable, command, env, checkout, strict=label == "this")
                )
    rows = []
    baselines = [label for label in checkouts if label != "this"]
    header = f"{'command':18} {'median s':>9} {'max s':>7}"
    header += "".join(f" {label + ' median s':>24} {'ratio':>6}" for label in baselines)
    print(header)
    for name in measured:
        this = times[(name, "this")]
        row = {
            "command": name,
            "median_s": round(statistics.median(this), 3),
            "max_s": round(max(this), 3),
        }
        line = f"{name:18} {row['median_s']:>9.3f} {row['max_s']:>7.3f}"
        for label in baselines:
            if (name, label) not in times:
                line += f" {'-':>24} {'-':>6}"
                continue
            base = statistics.median(times[(name, label)])
            ratio = base / row["median_s"]
            row |= {f"{label} median_s": round(base, 3), f"{label} ratio": round(ratio, 1)}
            line += f" {base:>24.3f} {ratio:>5.1f}x"
        print(line)
        rows.append(row)
    figures = {"commands": rows}
    record(
        "bench_cli",
        figures,
        {
            "project": str(project),
            "runs": args.runs,
            "unit": args.unit,
            "proposed": args.proposed,
            "baselines": [str(path) for path in args.baseline],
            "pythondontwritebytecode": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
        },
    )


if __name__ == "__main__":
    sys.exit(main())
