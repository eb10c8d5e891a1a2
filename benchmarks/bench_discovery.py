"""Landing-zone sensor ticks over a landing zone of 100,000 objects: each tick lists at most
`max_keys_per_tick` keys from where the previous one stopped, so its time stays bounded.

    uv run python benchmarks/bench_discovery.py [--objects 100000] [--max-keys 2000]
        [--files-per-unit 100]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.measure import TABLES, print_table
from benchmarks.results import record
from tokenmill.crawl.units import discover, registered_units
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import LANDING

CRAWL = "CC-MAIN-BENCH-2026-01"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--max-keys", type=int, default=2_000)
    parser.add_argument("--files-per-unit", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        landing = Path(root, LANDING, CRAWL)
        landing.mkdir(parents=True)
        for i in range(args.objects):
            (landing / f"{CRAWL}-{i:06d}.warc.gz").touch()
        lake = Lake.from_url(root)
        positions, ticks = {}, []
        while True:
            started = time.perf_counter()
            new, positions, problems = discover(lake, positions, args.files_per_unit, args.max_keys)
            ticks.append((len(new), time.perf_counter() - started))
            if problems:
                raise RuntimeError(f"discovery found problems: {problems[:3]}")
            if not new:
                break
        units = registered_units(lake, CRAWL)
    seconds = [s for _, s in ticks]
    print_table(
        f"Landing sensor ticks over {args.objects:,} objects (local lake, "
        f"{args.max_keys:,} keys per tick, {args.files_per_unit} files per unit)",
        ["ticks", "units registered", "first tick s", "max tick s", "mean tick s", "total s"],
        [
            [
                len(ticks),
                len(units),
                seconds[0],
                max(seconds),
                sum(seconds) / len(seconds),
                sum(seconds),
            ]
        ],
    )
    landing = {"data": "empty objects in a local lake's landing zone", "objects": args.objects}
    record("bench_discovery", TABLES, landing)


if __name__ == "__main__":
    main()
