"""Running the pipeline on a Dagster instance from the command line: register units as dynamic
partitions and materialize every stage for every partition, as recorded runs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dagster import AssetKey, DagsterInstance

from data_assets.jobs import JOBS
from data_assets.partitions import crawl_partitions, sync_partitions, unit_partitions
from tokenmill.lake import Lake
from tokenmill.stage import Scope
from tokenmill.stages import STAGES
from tokenmill.units import Registration, register_new_files

# The event log keeps every event; the terminal only gets warnings (the UI shows the rest).
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
PROJECT_DIR = Path(__file__).resolve().parents[1]
STAGE_ASSETS = [stage.name for stage in STAGES]


def local_instance() -> DagsterInstance:
    """The instance at DAGSTER_HOME, by default .dagster_home/ using the project's dagster.yaml."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(PROJECT_DIR / ".dagster_home")))
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() and not config.is_symlink():
        config.symlink_to(PROJECT_DIR / "dagster.yaml")
    return DagsterInstance.get()


def register(
    instance: DagsterInstance, lake: Lake, crawl: str, files_per_unit: int, verify: bool = True
) -> Registration:
    """Group the crawl's files that are in no unit yet into units and add them as partitions."""
    registration = register_new_files(lake, crawl, files_per_unit, verify=verify)
    sync_partitions(instance, lake, [crawl])
    return registration


@dataclass(frozen=True)
class RunOutcome:
    job: str
    partition: str | None
    run_id: str
    success: bool


def execute(
    job_name: str, partition_key: str | None, instance: DagsterInstance, lake: Lake | None = None
) -> RunOutcome:
    """Run a job in this process; on `lake` when given (the code location's lake is bound to
    the environment it was imported in)."""
    from data_assets.definitions import defs
    from resources.lake import LakeResource

    job = defs.resolve_job_def(job_name)
    resources = {}
    if lake is not None:
        resources["lake"] = LakeResource(
            url=lake.url, endpoint_url=lake.endpoint_url, max_attempts=lake.max_attempts
        )
    result = job.execute_in_process(
        run_config=QUIET_CONSOLE,
        instance=instance,
        partition_key=partition_key,
        raise_on_error=False,
        resources=resources or None,
    )
    return RunOutcome(job_name, partition_key, result.run_id, result.success)


def materialize_all(instance: DagsterInstance, lake: Lake) -> list[RunOutcome]:
    """Every stage for every partition, in lineage order, one run per partition; each run
    works on its unit's files in parallel worker processes (one per CPU)."""
    partitions = {
        Scope.UNIT: instance.get_dynamic_partitions(unit_partitions.name),
        Scope.CRAWL: instance.get_dynamic_partitions(crawl_partitions.name),
        Scope.LAKE: [None],
    }
    outcomes: list[RunOutcome] = []
    for stage in STAGES:
        results = []
        for key in partitions[stage.scope]:
            outcome = execute(JOBS[stage.name].name, key, instance, lake)
            state = "ok" if outcome.success else "FAILED"
            print(f"  {stage.name:18} {key or '-':40} {state}", flush=True)
            results.append(outcome)
        outcomes += results
        failed = [r for r in results if not r.success]
        if failed:
            names = ", ".join(f"{r.job}[{r.partition}] (run {r.run_id})" for r in failed)
            raise RuntimeError(f"runs failed: {names}; see `tokenmill ui` or the run logs")
    return outcomes


def materialized_partitions(instance: DagsterInstance) -> dict[str, set[str]]:
    return {
        name: set(instance.get_materialized_partitions(AssetKey(name))) for name in STAGE_ASSETS
    }


def partition_counts(instance: DagsterInstance) -> dict[str, int]:
    """How many partitions each stage asset has on the instance."""
    counts = {
        Scope.UNIT: len(instance.get_dynamic_partitions(unit_partitions.name)),
        Scope.CRAWL: len(instance.get_dynamic_partitions(crawl_partitions.name)),
        Scope.LAKE: 1,
    }
    return {stage.name: counts[stage.scope] for stage in STAGES}
