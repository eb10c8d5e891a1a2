"""A job per stage, in lineage order: what `tokenmill run`, the sensors and a backfill from the
command line launch. Each is sized for its stage (see data_assets/k8s)."""

from __future__ import annotations

from dagster import define_asset_job

from data_assets.k8s import run_tags
from tokenmill.stages import STAGES


def stage_job(stage):
    return define_asset_job(
        f"run_{stage.name}",
        selection=[stage.name],
        tags=run_tags(stage.name),
        description=f"Materialize {stage.name}: {stage.description}",
    )


JOBS = {stage.name: stage_job(stage) for stage in STAGES}
ALL_JOBS = list(JOBS.values())
