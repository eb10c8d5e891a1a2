"""release: a recipe's tokenized files as a training-ready release (`tokenmill.release.plan`):
fixed-size, globally shuffled Megatron shards, a validation split, a blend, provenance."""

from __future__ import annotations

from tokenmill.release.plan import (
    RELEASE_SIDECAR,
    Plan,
    ReleaseSettings,
    finish_release,
    is_published,
    plan_release,
)
from tokenmill.release.shards import Writing, store_plan, write_release
from tokenmill.runtime.phases import slots, step_of
from tokenmill.runtime.stage import FanOut, Pod, Scope, Stage, Work
from tokenmill.storage.layout import RELEASE, TOKENIZED_SHARDS
from tokenmill.storage.outputs import StageReport


def _settings(work: Work) -> ReleaseSettings:
    return work.settings or ReleaseSettings()


def plan(work: Work) -> list[str]:
    """Slots for the steps, named by the release's version, whose plan it stores for them;
    none when this version is published already (immutable)."""
    release = plan_release(work.lake, _settings(work))
    if is_published(work.lake, release):
        return []
    store_plan(work.lake, release)
    return slots(release.version)


def _planned(work: Work, version: str | None) -> Plan:
    """The plan the plan step stored for ``version``; made from the markers without one."""
    if version is None:
        return plan_release(work.lake, _settings(work))
    return Writing(work.lake, _settings(work), version).plan()


def run_share(work: Work, handed: list[str], workers: int) -> dict:
    """This step's share of routing the documents and writing the shards
    (`tokenmill.release.shards`), in `workers` processes at most; what is committed is
    skipped. The steps load the plan the plan step stored."""
    release = _planned(work, handed[0].split("/")[0] if handed else None)
    step, steps = step_of(release.version, handed, "tokenized files")
    done = {"version": release.version, "tasks_computed": 0, "tasks_found": 0}
    if is_published(work.lake, release):
        return done
    return done | write_release(work.lake, release, _settings(work), workers, step, steps)


def finish(work: Work, shares: list[dict]) -> StageReport:
    release = _planned(work, shares[0]["version"] if shares else None)
    return finish_release(work.lake, release, _settings(work))


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
    follows="release_inputs",
    description="A versioned, immutable training release of the recipe: train and valid "
    "Megatron shards of about shard_tokens tokens, documents shuffled across every crawl, a "
    "provenance sidecar per shard, manifest.json and blend.txt (Megatron-LM's --data-path).",
)
