"""release: a recipe's tokenized files as a training-ready release (`tokenmill.release`):
fixed-size, globally shuffled Megatron shards, a validation split, a blend, provenance."""

from __future__ import annotations

from tokenmill.layout import RELEASE, TOKENIZED_SHARDS
from tokenmill.outputs import StageReport
from tokenmill.phases import slots, step_of
from tokenmill.release import (
    RELEASE_SIDECAR,
    ReleaseSettings,
    finish_release,
    is_published,
    plan_release,
)
from tokenmill.release_shards import write_release
from tokenmill.stage import FanOut, Pod, Scope, Stage, Work


def _settings(work: Work) -> ReleaseSettings:
    return work.settings or ReleaseSettings()


def plan(work: Work) -> list[str]:
    """Slots for the steps, named by the release's version; none when this version is
    published already (immutable)."""
    release = plan_release(work.lake, _settings(work))
    return [] if is_published(work.lake, release) else slots(release.version)


def run_share(work: Work, handed: list[str], workers: int) -> dict:
    """This step's share of routing the documents and writing the shards
    (`tokenmill.release_shards`), in `workers` processes at most; what is committed is
    skipped. Each step plans again: steps hand each other only the version."""
    release = plan_release(work.lake, _settings(work))
    step, steps = step_of(release.version, handed, "tokenized files")
    if is_published(work.lake, release):
        return {"tasks_computed": 0, "tasks_found": 0}
    return write_release(work.lake, release, _settings(work), workers, step, steps)


def finish(work: Work, shares: list[dict]) -> StageReport:
    return finish_release(work.lake, plan_release(work.lake, _settings(work)), _settings(work))


def run(work: Work) -> StageReport:
    """The release in one step: planned once."""
    release = plan_release(work.lake, _settings(work))
    if not is_published(work.lake, release):
        write_release(work.lake, release, _settings(work))
    return finish_release(work.lake, release, _settings(work))


STAGE = Stage(
    name=RELEASE,
    scope=Scope.LAKE,
    run=run,
    settings=ReleaseSettings,
    upstream=(TOKENIZED_SHARDS,),
    group="release",
    kinds=("numpy",),
    pod=Pod("2", "4Gi", "2", "6Gi"),
    max_runtime_s=12 * 3600,
    schema=RELEASE_SIDECAR,
    fan_out=FanOut(plan=plan, run=run_share, finish=finish),
    automatic=False,
    description="A versioned, immutable training release of the recipe: train and valid "
    "Megatron shards of about shard_tokens tokens, documents shuffled across every crawl, a "
    "provenance sidecar per shard, manifest.json and blend.txt (Megatron-LM's --data-path).",
)
