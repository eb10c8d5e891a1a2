"""The code location: every asset, job, sensor and resource of tokenmill, in one place."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from dagster import BetaWarning, Definitions, EnvVar

warnings.filterwarnings("ignore", category=BetaWarning)

from data_assets import stages  # noqa: E402
from data_assets.jobs import ALL_JOBS  # noqa: E402
from resources.lake import LakeResource  # noqa: E402

PROJECT_DIR = Path(__file__).resolve().parents[1]
DEFAULT_LAKE = PROJECT_DIR / "lake"


def lake_resource() -> LakeResource:
    """TOKENMILL_LAKE_URL (and TOKENMILL_S3_ENDPOINT) in production, ./lake otherwise."""
    if os.environ.get("TOKENMILL_LAKE_URL"):
        return LakeResource(
            url=EnvVar("TOKENMILL_LAKE_URL"),
            endpoint_url=EnvVar("TOKENMILL_S3_ENDPOINT")
            if os.environ.get("TOKENMILL_S3_ENDPOINT")
            else None,
        )
    return LakeResource(url=str(DEFAULT_LAKE))


def build_definitions(lake: LakeResource) -> Definitions:
    return Definitions(
        assets=[
            stages.raw_crawl,
            stages.cleaned,
            stages.dedup_signatures,
            stages.dedup_clusters,
            stages.deduplicated,
            stages.tokenizer,
            stages.tokenized_shards,
        ],
        jobs=ALL_JOBS,
        resources={"lake": lake},
    )


defs = build_definitions(lake_resource())
