"""release: a recipe's tokenized files as a training-ready release (`tokenmill.release`):
fixed-size, globally shuffled Megatron shards, a validation split, a blend, provenance."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from itertools import repeat

from tokenmill.layout import RELEASE, TOKENIZED_SHARDS
from tokenmill.outputs import StageReport
from tokenmill.release import (
    RELEASE_SIDECAR,
    ReleaseSettings,
    finish_release,
    plan_release,
    write_piece,
)
from tokenmill.stage import FanOut, Pod, Scope, Stage, Work


def _settings(work: Work) -> ReleaseSettings:
    return work.settings or ReleaseSettings()


def plan(work: Work) -> list[str]:
    release = plan_release(work.lake, _settings(work))
    return release.pieces()


def run_pieces(work: Work, pieces: list[str], workers: int) -> dict:
    """Write the train shards `pieces` (and their validation documents), in `workers`
    processes at most; pieces already committed are skipped."""
    settings = _settings(work)
    release = plan_release(work.lake, settings)
    if workers <= 1 or len(pieces) <= 1:
        done = [write_piece(work.lake, release, piece, settings) for piece in pieces]
    else:
        with ProcessPoolExecutor(min(workers, len(pieces))) as pool:
            arguments = (repeat(work.lake), repeat(release), pieces, repeat(settings))
            done = list(pool.map(write_piece, *arguments))
    return {"pieces": len(done), "documents": sum(d["train"]["documents"] for d in done)}


def finish(work: Work, summaries: list[dict]) -> StageReport:
    return finish_release(work.lake, plan_release(work.lake, _settings(work)), _settings(work))


def run(work: Work) -> StageReport:
    run_pieces(work, plan(work), 1)
    return finish(work, [])


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
    fan_out=FanOut(plan=plan, run=run_pieces, finish=finish),
    automatic=False,
    description="A versioned, immutable training release of the recipe: train and valid "
    "Megatron shards of about shard_tokens tokens, documents shuffled across every crawl, a "
    "provenance sidecar per shard, manifest.json and blend.txt (Megatron-LM's --data-path).",
)
