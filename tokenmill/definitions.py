"""The code location: every asset, job, sensor and resource of tokenmill, in one place."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
    Definitions,
    EnvVar,
    SensorDefinition,
    in_process_executor,
    sensor,
)

from tokenmill.dagster_internals import read_keys_once_per_tick
from tokenmill.data_assets.assets import stage_assets
from tokenmill.data_assets.conditions import automation_sensors
from tokenmill.data_assets.datasets import Catalog
from tokenmill.data_assets.jobs import stage_jobs
from tokenmill.data_assets.k8s import run_tags
from tokenmill.data_assets.partitions import bridges
from tokenmill.data_assets.release_inputs import followed
from tokenmill.recipes.catalog import RECIPE_PROBLEM
from tokenmill.recipes.project import LAKE_ENV, project_settings
from tokenmill.resources.automation import AlertsResource, DiscoveryResource, tick_seconds
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.locked import locked
from tokenmill.resources.step_io import STEP_IO, LakeStepIOManager
from tokenmill.resources.workers import WorkersResource
from tokenmill.runs.claims import check_claims
from tokenmill.sensors.crawls import crawl_signatures_complete
from tokenmill.sensors.dead_runs import dead_runs
from tokenmill.sensors.failures import record_run_failures
from tokenmill.sensors.landing import landing_zone
from tokenmill.sensors.reconcile import reconcile_landing, reconcile_schedule
from tokenmill.sensors.release import release_inputs_changed
from tokenmill.stages import STAGES

if TYPE_CHECKING:
    from tokenmill.recipes.recipe import Recipe
    from tokenmill.runtime.stage import Stage


def lake_resource() -> LakeResource:
    """TOKENMILL_LAKE_URL (and TOKENMILL_S3_ENDPOINT) in production; otherwise the project
    settings' lake (`tokenmill.yaml`), ./lake by default."""
    if os.environ.get(LAKE_ENV):
        return LakeResource(
            url=EnvVar(LAKE_ENV),
            endpoint_url=EnvVar("TOKENMILL_S3_ENDPOINT")
            if os.environ.get("TOKENMILL_S3_ENDPOINT")
            else None,
        )
    return LakeResource(url=project_settings().lake.value)


def alerts_resource() -> AlertsResource:
    """Failure posts go to TOKENMILL_FAILURE_WEBHOOK when it is set."""
    if os.environ.get("TOKENMILL_FAILURE_WEBHOOK"):
        return AlertsResource(webhook_url=EnvVar("TOKENMILL_FAILURE_WEBHOOK"))
    return AlertsResource()


# Step pods run under a service account without any Role and without a token: only the run's
# coordinator pod (the launcher's service account, helm/service-account-run-coordinator.yaml)
# creates and watches the step Jobs.
STEP_SERVICE_ACCOUNT = "tokenmill-run"
K8S_EXECUTOR_CONFIG = {
    "step_k8s_config": {
        "pod_spec_config": {
            "service_account_name": STEP_SERVICE_ACCOUNT,
            "automount_service_account_token": False,
        }
    }
}


def executor():
    """Steps in the run's process locally; each step in its own pod, sized by its stage's op
    tags, when TOKENMILL_EXECUTOR=k8s (the Helm deployment), whatever launched the run."""
    if os.environ.get("TOKENMILL_EXECUTOR") == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor.configured(K8S_EXECUTOR_CONFIG)
    return in_process_executor


def automation_sensor(
    name: str, stages: tuple[Stage, ...], catalog: Catalog
) -> AutomationConditionSensorDefinition:
    """An automation sensor for every recipe's asset of its stages: each tick evaluates those
    stages' partitions (the daemon runs the sensors in parallel threads), and the runs it
    requests carry their run tags (pod size, queue key) however they are launched."""
    names = [stage.name for stage in stages]
    return AutomationConditionSensorDefinition(
        name,
        target=AssetSelection.assets(*(key for stage in stages for key in catalog.keys(stage))),
        # evaluated in the code server, where automation_cursor's shortcut is installed
        use_user_code_server=True,
        run_tags=run_tags(*names),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=tick_seconds(30),
        description=f"Evaluates the automation conditions of {' and '.join(names)}.",
    )


def recipe_problems(problems: tuple[str, ...]) -> SensorDefinition:
    """The recipe files left out of the code location, as a sensor whose every tick fails
    naming each file and key (the UI shows it in red); the other recipes load and run."""

    @sensor(
        name="recipe_problems",
        minimum_interval_seconds=tick_seconds(300),
        default_status=DefaultSensorStatus.RUNNING,
        description="Fails while a recipe file is invalid, naming it: " + " | ".join(problems),
    )
    def recipe_problems_sensor(context):
        raise ValueError(
            f"{len(problems)} recipe file(s) left out of the code location:\n" + "\n".join(problems)
        )

    return recipe_problems_sensor


def build_definitions(
    lake: LakeResource,
    alerts: AlertsResource | None = None,
    discovery: DiscoveryResource | None = None,
    workers: WorkersResource | None = None,
    recipes: list[Recipe] | Catalog | None = None,
) -> Definitions:
    """Every recipe of the recipes folder (or of `recipes`) beside the shared stages."""
    read_keys_once_per_tick()
    check_claims()
    if isinstance(recipes, Catalog):
        catalog = recipes  # its problems are its caller's to report
    else:
        catalog = Catalog.of(recipes) if recipes is not None else Catalog.load()
        for problem in catalog.problems:
            logging.getLogger("tokenmill").error(
                "recipe left out: %s", problem, extra={RECIPE_PROBLEM: True}
            )
    served = [stage for stage in STAGES if catalog.serving(stage)]
    jobs = stage_jobs(catalog)
    sensors = [
        landing_zone,
        crawl_signatures_complete(catalog),
        release_inputs_changed(catalog),
        record_run_failures,
        dead_runs,
        # none for a stage the automation never launches (a release)
        *(
            automation_sensor(name, stages, catalog)
            for name, stages in automation_sensors(catalog).items()
        ),
    ]
    if catalog.problems:
        sensors.append(recipe_problems(catalog.problems))
    return Definitions(
        assets=[*bridges(catalog), *followed(catalog), *stage_assets(catalog)],
        jobs=[*(jobs[stage.name] for stage in served), reconcile_landing],
        sensors=sensors,
        schedules=[reconcile_schedule],
        executor=executor(),
        resources={
            "lake": locked(lake),
            "alerts": locked(alerts or AlertsResource()),
            "discovery": locked(discovery or DiscoveryResource()),
            "workers": locked(workers or WorkersResource()),
            STEP_IO: locked(LakeStepIOManager(lake=lake)),
        },
    )


defs = build_definitions(lake_resource(), alerts_resource())
