"""Running the pipeline on a Dagster instance from the command line: register shards as dynamic
partitions and materialize every stage for every partition, as recorded runs."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dagster import AssetKey, DagsterInstance

from data_assets.partitions import (
    crawl_partitions,
    shard_index_partitions,
    shard_key,
    sync_partitions,
)
from tokenmill.lake import Lake
from tokenmill.shards import Shard, register_new_files

# The event log keeps every event; the terminal only gets warnings (the UI shows the rest).
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
PROJECT_DIR = Path(__file__).resolve().parents[1]
STAGE_ASSETS = [
    "raw_crawl",
    "cleaned",
    "dedup_signatures",
    "dedup_clusters",
    "deduplicated",
    "tokenizer",
    "tokenized_shards",
]


def local_instance() -> DagsterInstance:
    """The instance at DAGSTER_HOME, by default .dagster_home/ using the project's dagster.yaml."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(PROJECT_DIR / ".dagster_home")))
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() and not config.is_symlink():
        config.symlink_to(PROJECT_DIR / "dagster.yaml")
    return DagsterInstance.get()


def register(
    instance: DagsterInstance, lake: Lake, crawl: str, files_per_shard: int
) -> list[Shard]:
    """Group newly landed files of a crawl into shards and add them as partitions."""
    new = register_new_files(lake, crawl, files_per_shard)
    sync_partitions(instance, lake)
    return new


@dataclass(frozen=True)
class RunOutcome:
    job: str
    partition: str | None
    run_id: str
    success: bool


def _execute(job_name: str, partition_key: str | None) -> RunOutcome:
    from data_assets.definitions import defs

    job = defs.resolve_job_def(job_name)
    with DagsterInstance.get() as instance:
        result = job.execute_in_process(
            run_config=QUIET_CONSOLE,
            instance=instance,
            partition_key=partition_key,
            raise_on_error=False,
        )
    return RunOutcome(job_name, partition_key, result.run_id, result.success)


def materialize_all(instance: DagsterInstance, lake: Lake, workers: int = 2) -> list[RunOutcome]:
    """Every stage for every partition, in dependency order; shards run `workers` at a time."""
    crawls = instance.get_dynamic_partitions(crawl_partitions.name)
    shard_names = instance.get_dynamic_partitions(shard_index_partitions.name)
    shards = [str(shard_key(Shard(c, s))) for c in crawls for s in shard_names]
    phases = [
        [("ingest_shard", key) for key in shards],
        [("dedup_crawl", crawl) for crawl in crawls],
        [("dedup_shard", key) for key in shards],
        [("build_tokenizer", None)],
        [("tokenize_shard", key) for key in shards],
    ]
    outcomes: list[RunOutcome] = []
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        for phase in phases:
            results = []
            for outcome in pool.map(_execute, *zip(*phase, strict=True)):
                state = "ok" if outcome.success else "FAILED"
                print(f"  {outcome.job:16} {outcome.partition or '-':32} {state}", flush=True)
                results.append(outcome)
            outcomes += results
            failed = [r for r in results if not r.success]
            if failed:
                names = ", ".join(f"{r.job}[{r.partition}] (run {r.run_id})" for r in failed)
                raise RuntimeError(f"runs failed: {names}; see `dagster dev` or the run logs")
    return outcomes


def materialized_partitions(instance: DagsterInstance) -> dict[str, set[str]]:
    return {
        name: set(instance.get_materialized_partitions(AssetKey(name))) for name in STAGE_ASSETS
    }
