"""A job per stage, in lineage order: what `tokenmill run`, the sensors and a backfill from the
command line launch. A recipe stage's job holds every recipe's asset of the stage (a run may
select some of them). Each is sized for its stage (see data_assets/k8s)."""

from __future__ import annotations

from dagster import define_asset_job
from tokenmill.data_assets.datasets import Catalog
from tokenmill.data_assets.k8s import run_tags

from tokenmill.stages import STAGES


def job_name(stage_name: str) -> str:
    return f"run_{stage_name}"


def stage_jobs(catalog: Catalog) -> dict:
    return {
        stage.name: define_asset_job(
            job_name(stage.name),
            selection=catalog.keys(stage),
            tags=run_tags(stage.name),
            description=f"Materialize {stage.name}: {stage.description}",
        )
        for stage in STAGES
        if catalog.serving(stage)
    }
