"""Orchestration overhead: the stages as Dagster runs on the local instance against the bare
stage functions on the same shards.

    uv run python benchmarks/bench_orchestration.py [--shards 200] [--pages 10] [--sample 6]
        [--daemon]

A demo crawl of `--shards` shards (one WARC file of `--pages` pages each) is landed twice: once
for the bare stage functions (tokenmill/, no Dagster), once for Dagster runs on a temporary
instance with the project's dagster.yaml (execute_in_process, as data_assets/runner.py runs).
Each Dagster run is timed right after the bare functions do the same work (its stages on its
partitions), so both see the same load on a shared machine; one warm-up of each comes first.

1. Seconds per partition run: `ingest_shard` (raw_crawl + cleaned + dedup_signatures) for one
   partition, `--sample` runs, against the bare functions on those shards.
2. The multi-run backfill of every stage over all shards: runs planned as the asset backfill
   daemon plans them (the shard stages' BackfillPolicy.multi_run: max_partitions_per_run shards
   per run, the stages of one group in one run, phases in dependency order), executed one at a
   time, against the sum of the bare stage times of the same work. Events written per run are
   counted from the instance: each is a write to the SQLite event log.
3. With --daemon: the same backfill launched through `dagster dev` (GraphQL, as the UI does),
   its runs launched by the daemon, each in its own process.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster import RunsFilter  # noqa: E402
from dagster._core.storage.tags import BACKFILL_ID_TAG  # noqa: E402

from benchmarks.measure import print_table, timed  # noqa: E402

CRAWL = "CC-MAIN-ORCH"
TARGET_OVERHEAD = 0.25
# (job, partition keys of the run): a range of shards, one crawl, or none (the tokenizer).
Run = tuple[str, list[str]]


def bare_stages(lake) -> dict[str, Callable]:
    """Each stage function with the assets' default settings, taking a shard (or nothing, for
    the crawl-wide stages)."""
    from data_assets.config import CleanConfig, DedupConfig, TokenizerConfig
    from tokenmill.clean import clean_shard
    from tokenmill.dedup import compute_clusters, compute_signatures, filter_shard
    from tokenmill.ingest import land_shard
    from tokenmill.tokenize import build_tokenizer, tokenize_shard

    clean, dedup, tok = CleanConfig().settings(), DedupConfig().settings(), TokenizerConfig()
    return {
        "raw_crawl": lambda shard: land_shard(lake, shard),
        "cleaned": lambda shard: clean_shard(lake, shard, clean),
        "dedup_signatures": lambda shard: compute_signatures(lake, shard, dedup),
        "dedup_clusters": lambda _: compute_clusters(lake, CRAWL, dedup),
        "deduplicated": lambda shard: filter_shard(lake, shard),
        "tokenizer": lambda _: build_tokenizer(lake, tok.path, tok.vocab_size, tok.sample_mb << 20),
        "tokenized_shards": lambda shard: tokenize_shard(lake, shard),
    }


def job_stages(job_name: str) -> list[str]:
    """The stages a job runs, in lineage order (the order its steps run in)."""
    from data_assets.definitions import defs
    from data_assets.runner import STAGE_ASSETS

    keys = defs.resolve_job_def(job_name).asset_layer.executable_asset_keys
    names = {key.to_user_string() for key in keys}
    return [name for name in STAGE_ASSETS if name in names]


def bare_run(stages: dict[str, Callable], run: Run, shard_of: dict) -> dict[str, float]:
    """The work of one run done by the bare functions, step by step: seconds per stage."""
    job, keys = run
    shards = [shard_of.get(key) for key in keys] or [None]
    return {
        stage: sum(timed(lambda f=stages[stage], s=s: f(s))[1] for s in shards)
        for stage in job_stages(job)
    }


def backfill_plan(keys: list[str], per_run: int) -> list[Run]:
    """The runs of a multi-run asset backfill over every stage, phase by phase."""
    chunks = [keys[i : i + per_run] for i in range(0, len(keys), per_run)]
    runs = [("ingest_shard", chunk) for chunk in chunks]
    runs += [("dedup_crawl", [CRAWL])]
    runs += [("dedup_shard", chunk) for chunk in chunks]
    runs += [("build_tokenizer", [])]
    runs += [("tokenize_shard", chunk) for chunk in chunks]
    return runs


def execute(instance, job_name: str, keys: list[str]):
    """One run of a job over one partition, a range of them (as a backfill run), or none."""
    from dagster._core.storage.tags import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )

    from data_assets.definitions import defs
    from data_assets.runner import QUIET_CONSOLE

    job = defs.resolve_job_def(job_name)
    if len(keys) > 1:
        tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]}
        return job.execute_in_process(
            run_config=QUIET_CONSOLE, instance=instance, tags=tags, raise_on_error=False
        )
    return job.execute_in_process(
        run_config=QUIET_CONSOLE,
        instance=instance,
        partition_key=keys[0] if keys else None,
        raise_on_error=False,
    )


def shards_per_run() -> int:
    from data_assets import stages

    return stages.raw_crawl.backfill_policy.max_partitions_per_run


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
        from tokenmill.cli import land_demo_crawl
        from tokenmill.lake import Lake
        from tokenmill.shards import register_new_files

        bare_lake = Lake.from_url(str(root / "bare"))
        land_demo_crawl(bare_lake, CRAWL, args.shards, args.pages, seed=0)
        # The same landed crawl for the Dagster runs: copied, since generating it takes minutes.
        shutil.copytree(root / "bare", root / "lake")
        lake = Lake.from_url(str(root / "lake"))
        shards = register_new_files(bare_lake, CRAWL, files_per_shard=1)
        instance = local_instance()
        assert register(instance, lake, CRAWL, files_per_shard=1) == shards
        keys = [str(shard_key(shard)) for shard in shards]
        shard_of = dict(zip(keys, shards, strict=True))
        stages = bare_stages(bare_lake)

        def paired(run: Run) -> tuple[dict[str, float], float, object]:
            """The run's work bare, then as a Dagster run: (bare s per stage, run s, result)."""
            bare = bare_run(stages, run, shard_of)
            result, seconds = timed(lambda: execute(instance, *run))
            if not result.success:
                raise SystemExit(f"run {result.run_id} ({run[0]}) failed; see DAGSTER_HOME")
            return bare, seconds, result

        # Warm both paths (imports, extractor and language models) before timing anything.
        paired(("ingest_shard", keys[:1]))
        single = [paired(("ingest_shard", [key])) for key in keys[1 : 1 + args.sample]]
        sample_bare = [sum(bare.values()) for bare, _, _ in single]
        run_seconds = [seconds for _, seconds, _ in single]

        per_run = shards_per_run()
        plan = backfill_plan(keys, per_run)
        assert len(plan) == 3 * math.ceil(len(keys) / per_run) + 2
        bare_by_stage: dict[str, list[float]] = defaultdict(list)
        wall, events = 0.0, 0
        for run in plan:
            bare, seconds, result = paired(run)
            for stage, stage_seconds in bare.items():
                bare_by_stage[stage].append(stage_seconds)
            wall += seconds
            events += len(instance.all_logs(result.run_id))
        bare_total = sum(sum(v) for v in bare_by_stage.values())

        per_single = sum(run_seconds) / len(run_seconds)
        per_bare = sum(sample_bare) / len(sample_bare)
        single_events = len(instance.all_logs(single[-1][2].run_id))
        print_table(
            f"One partition per run: ingest_shard, {args.pages} pages per shard "
            f"({len(run_seconds)} runs, warm process)",
            ["path", "s per partition", "overhead s", "ratio", "events per run"],
            [
                ["bare raw+clean+signatures", per_bare, 0.0, 1.0, "-"],
                [
                    "execute_in_process, local instance",
                    per_single,
                    per_single - per_bare,
                    per_single / per_bare,
                    single_events,
                ],
            ],
        )
        overhead = wall / bare_total - 1
        print_table(
            f"Multi-run backfill: {len(keys)} partitions x every stage, "
            f"{per_run} shards per run, runs one at a time",
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
        # Most of the overhead is event-log writes: a fixed number per run plus a few per
        # partition and stage (materialization planned, materialization).
        print_table(
            "Where the overhead goes: events written to the event log",
            ["runs", "events", "events per run", "overhead s per run", "overhead ms per event"],
            [
                [
                    len(plan),
                    events,
                    events / len(plan),
                    (wall - bare_total) / len(plan),
                    1000 * (wall - bare_total) / events,
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
            ["stage", "runs", "total s", "s per run"],
            [[name, len(v), sum(v), sum(v) / len(v)] for name, v in bare_by_stage.items()],
        )
        instance.dispose()


if __name__ == "__main__":
    main()
