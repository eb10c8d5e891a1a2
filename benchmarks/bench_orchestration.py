"""Orchestration overhead: the stages as Dagster runs on the local instance against the bare
stage functions on the same shards.

    uv run python benchmarks/bench_orchestration.py [--shards 200] [--pages 10] [--sample 6]
        [--daemon]

A demo crawl of `--shards` tiny shards (one WARC file of `--pages` pages each) is landed twice:
once for the bare stage functions (tokenmill/, no Dagster), once for Dagster runs on a temporary
instance with the project's dagster.yaml (execute_in_process, as data_assets/runner.py runs).

1. Seconds per partition run: `ingest_shard` (raw_crawl + cleaned + dedup_signatures) for one
   partition, `--sample` runs in one warm process, against the bare functions on those shards.
2. The multi-run backfill of every stage over all shards: runs planned as the asset backfill
   daemon plans them (BackfillPolicy.multi_run: MAX_SHARDS_PER_RUN shards per run, the stages
   of one group in one run, phases in dependency order), executed one at a time, against the
   sum of the bare stage times of the whole pipeline.
3. With --daemon: the same backfill launched through `dagster dev` (GraphQL, as the UI does),
   its runs launched by the daemon, each in its own process.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster import RunsFilter  # noqa: E402
from dagster._core.storage.tags import BACKFILL_ID_TAG  # noqa: E402

from benchmarks.measure import print_table, timed  # noqa: E402

CRAWL = "CC-MAIN-ORCH"
TARGET_OVERHEAD = 0.25


def bare_pipeline(lake, shards) -> dict[str, list[float]]:
    """Every stage function on every shard (the crawl-wide ones once): seconds per call."""
    from data_assets.config import CleanConfig, DedupConfig, TokenizerConfig
    from tokenmill.clean import clean_shard
    from tokenmill.dedup import compute_clusters, compute_signatures, filter_shard
    from tokenmill.ingest import land_shard
    from tokenmill.tokenize import build_tokenizer, tokenize_shard

    clean, dedup, tok = CleanConfig().settings(), DedupConfig().settings(), TokenizerConfig()
    per_shard = [
        ("raw_crawl", land_shard),
        ("cleaned", lambda data, shard: clean_shard(data, shard, clean)),
        ("dedup_signatures", lambda data, shard: compute_signatures(data, shard, dedup)),
    ]
    seconds: dict[str, list[float]] = {}
    for name, work in per_shard:
        seconds[name] = [timed(lambda s=s, w=work: w(lake, s))[1] for s in shards]
    seconds["dedup_clusters"] = [timed(lambda: compute_clusters(lake, CRAWL, dedup))[1]]
    seconds["deduplicated"] = [timed(lambda s=s: filter_shard(lake, s))[1] for s in shards]
    seconds["tokenizer"] = [
        timed(lambda: build_tokenizer(lake, tok.path, tok.vocab_size, tok.sample_mb << 20))[1]
    ]
    seconds["tokenized_shards"] = [timed(lambda s=s: tokenize_shard(lake, s))[1] for s in shards]
    return seconds


def backfill_plan(keys: list[str], per_run: int) -> list[tuple[str, str | None, str | None]]:
    """(job, first key, last key) per run, phase by phase, as a multi-run asset backfill."""
    chunks = [keys[i : i + per_run] for i in range(0, len(keys), per_run)]
    runs = [("ingest_shard", c[0], c[-1]) for c in chunks]
    runs += [("dedup_crawl", CRAWL, None)]
    runs += [("dedup_shard", c[0], c[-1]) for c in chunks]
    runs += [("build_tokenizer", None, None)]
    runs += [("tokenize_shard", c[0], c[-1]) for c in chunks]
    return runs


def execute(instance, job_name: str, first: str | None, last: str | None) -> bool:
    from dagster._core.storage.tags import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )

    from data_assets.definitions import defs
    from data_assets.runner import QUIET_CONSOLE

    job = defs.resolve_job_def(job_name)
    if last is None:  # one partition (a crawl), or none
        result = job.execute_in_process(
            run_config=QUIET_CONSOLE, instance=instance, partition_key=first, raise_on_error=False
        )
    else:
        tags = {ASSET_PARTITION_RANGE_START_TAG: first, ASSET_PARTITION_RANGE_END_TAG: last}
        result = job.execute_in_process(
            run_config=QUIET_CONSOLE, instance=instance, tags=tags, raise_on_error=False
        )
    return result.success


def daemon_backfill(root: Path, shards: int, pages: int) -> tuple[int, float, str]:
    """Every stage over every partition as one asset backfill launched through `dagster dev`
    (GraphQL, as the UI does; the daemon launches the runs): (runs, wall s, final status)."""
    from data_assets.runner import STAGE_ASSETS, register
    from tests.dagster_dev import start_dagster_dev, stop_dagster_dev
    from tokenmill.cli import land_demo_crawl
    from tokenmill.lake import Lake

    dev = start_dagster_dev(root)
    try:
        dev.stop_automation()
        lake = Lake.from_url(dev.env["TOKENMILL_LAKE_URL"])
        land_demo_crawl(lake, CRAWL, shards, pages, seed=0)
        with dev.instance() as instance:
            register(instance, lake, CRAWL, files_per_shard=1)
        params = {
            "assetSelection": [{"path": [name]} for name in STAGE_ASSETS],
            "allPartitions": True,
        }
        started = time.perf_counter()
        backfill_id = dev.launch_backfill(params)
        backfill = dev.wait_for_backfill(backfill_id, timeout=3 * 3600)
        wall = time.perf_counter() - started
        with dev.instance() as instance:
            runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
        return len(runs), wall, backfill.status.value
    finally:
        stop_dagster_dev(dev)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=200)
    parser.add_argument("--pages", type=int, default=10, help="pages per shard (one WARC file)")
    parser.add_argument("--sample", type=int, default=6, help="single-partition runs timed")
    parser.add_argument(
        "--daemon",
        action="store_true",
        help="also time the backfill launched through `dagster dev` (slow: minutes)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-orch-") as scratch:
        root = Path(scratch)
        os.environ["DAGSTER_HOME"] = str(root / "dagster_home")
        os.environ["TOKENMILL_LAKE_URL"] = str(root / "lake")

        from data_assets.partitions import shard_key
        from data_assets.runner import local_instance, register
        from data_assets.stages import MAX_SHARDS_PER_RUN
        from tokenmill.cli import land_demo_crawl
        from tokenmill.lake import Lake

        bare_lake, lake = Lake.from_url(str(root / "bare")), Lake.from_url(str(root / "lake"))
        for data in (bare_lake, lake):
            land_demo_crawl(data, CRAWL, args.shards, args.pages, seed=0)
        from tokenmill.shards import register_new_files

        shards = register_new_files(bare_lake, CRAWL, files_per_shard=1)
        instance = local_instance()
        assert register(instance, lake, CRAWL, files_per_shard=1) == shards
        keys = [str(shard_key(shard)) for shard in shards]

        # Warm both paths (imports, extractor and language models) before timing anything.
        bare = bare_pipeline(bare_lake, shards)
        bare_total = sum(sum(v) for v in bare.values())
        ingest_bare = [sum(bare[s][i] for s in INGEST) for i in range(len(shards))]

        execute(instance, "ingest_shard", keys[0], None)
        run_seconds = [
            timed(lambda k=k: execute(instance, "ingest_shard", k, None))[1]
            for k in keys[1 : 1 + args.sample]
        ]
        sample_bare = ingest_bare[1 : 1 + args.sample]

        plan = backfill_plan(keys, MAX_SHARDS_PER_RUN)
        outcomes, wall = timed(lambda: [execute(instance, *run) for run in plan])
        if not all(outcomes):
            raise SystemExit("some backfill runs failed; see the instance at DAGSTER_HOME")
        expected_runs = 3 * math.ceil(len(keys) / MAX_SHARDS_PER_RUN) + 2
        assert len(plan) == expected_runs

        per_run = sum(run_seconds) / len(run_seconds)
        per_bare = sum(sample_bare) / len(sample_bare)
        print_table(
            f"One partition per run: ingest_shard, {args.pages} pages per shard "
            f"({len(run_seconds)} runs, warm process)",
            ["path", "s per partition", "overhead s", "ratio"],
            [
                ["bare raw+clean+signatures", per_bare, 0.0, 1.0],
                [
                    "execute_in_process, local instance",
                    per_run,
                    per_run - per_bare,
                    per_run / per_bare,
                ],
            ],
        )
        overhead = wall / bare_total - 1
        fixed_per_run = (wall - bare_total) / len(plan)
        print_table(
            f"Multi-run backfill: {len(keys)} partitions x every stage, "
            f"{MAX_SHARDS_PER_RUN} shards per run, runs one at a time",
            ["path", "runs", "wall s", "s per partition", "overhead", "target"],
            [
                ["bare stage functions (sum)", 0, bare_total, bare_total / len(keys), "-", "-"],
                [
                    "backfill on the local instance",
                    len(plan),
                    wall,
                    wall / len(keys),
                    f"{overhead:+.1%}",
                    f"<= {TARGET_OVERHEAD:.0%} "
                    + ("met" if overhead <= TARGET_OVERHEAD else "MISSED"),
                ],
            ],
        )
        # The overhead is a fixed cost per run: under target once the bare work of all runs is
        # 1 / TARGET_OVERHEAD times the runs' fixed cost.
        print_table(
            "Fixed cost per run, and the shard size that keeps it under target",
            ["fixed s per run", "bare s per partition now", "bare s per partition needed"],
            [
                [
                    fixed_per_run,
                    bare_total / len(keys),
                    fixed_per_run * len(plan) / (TARGET_OVERHEAD * len(keys)),
                ]
            ],
        )
        if args.daemon:
            runs, daemon_wall, status = daemon_backfill(root / "daemon", args.shards, args.pages)
            print_table(
                f"Asset backfill through dagster dev: {len(keys)} partitions x every stage "
                "(daemon, in_process executor, 2 runs at a time)",
                ["path", "runs", "wall s", "s per partition", "overhead", "status"],
                [
                    ["bare stage functions (sum)", 0, bare_total, bare_total / len(keys), "-", "-"],
                    [
                        "dagster dev backfill",
                        runs,
                        daemon_wall,
                        daemon_wall / len(keys),
                        f"{daemon_wall / bare_total - 1:+.1%}",
                        status,
                    ],
                ],
            )
        print_table(
            "Bare stage time by stage",
            ["stage", "calls", "total s", "mean s"],
            [[name, len(v), sum(v), sum(v) / len(v)] for name, v in bare.items()],
        )
        instance.dispose()


INGEST = ("raw_crawl", "cleaned", "dedup_signatures")

if __name__ == "__main__":
    main()
