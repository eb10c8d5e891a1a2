"""release: a recipe's tokenized files as a training-ready release (`tokenmill.release`):
fixed-size, globally shuffled Megatron shards, a validation split, a blend, provenance."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

from tokenmill.layout import RELEASE, TOKENIZED_SHARDS
from tokenmill.outputs import StageReport
from tokenmill.release import (
    RELEASE_SIDECAR,
    Plan,
    ReleaseSettings,
    finish_release,
    is_published,
    plan_release,
    write_piece,
)
from tokenmill.stage import FanOut, Pod, Scope, Stage, Work


def _settings(work: Work) -> ReleaseSettings:
    return work.settings or ReleaseSettings()


def plan(work: Work) -> list[str]:
    """The train shards to write; none when this version is published already (immutable)."""
    release = plan_release(work.lake, _settings(work))
    return [] if is_published(work.lake, release) else release.pieces()


def run_pieces(work: Work, pieces: list[str], workers: int) -> dict:
    """Write the train shards `pieces` (and their validation documents), in `workers`
    processes at most; pieces already committed are skipped. Each step plans again: steps
    hand each other only piece names."""
    return _write_pieces(work, plan_release(work.lake, _settings(work)), pieces, workers)


def _write_pieces(work: Work, release: Plan, pieces: list[str], workers: int) -> dict:
    settings = _settings(work)
    if is_published(work.lake, release):
        return {"pieces": 0, "documents": 0}
    if workers <= 1 or len(pieces) <= 1:
        done = [write_piece(work.lake, release, piece, settings) for piece in pieces]
    else:  # the plan (16 bytes per input file) handed to each process once, not per piece
        context = (work.lake, release, settings)
        workers = min(workers, len(pieces))
        with ProcessPoolExecutor(workers, initializer=_hold, initargs=context) as pool:
            done = list(pool.map(_write, pieces))
    return {"pieces": len(done), "documents": sum(d["train"]["documents"] for d in done)}


_held: tuple = ()


def _hold(*context) -> None:
    global _held
    _held = context


def _write(piece: str) -> dict:
    lake, release, settings = _held
    return write_piece(lake, release, piece, settings)


def finish(work: Work, summaries: list[dict]) -> StageReport:
    return finish_release(work.lake, plan_release(work.lake, _settings(work)), _settings(work))


def run(work: Work) -> StageReport:
    """The release in one step: planned once."""
    release = plan_release(work.lake, _settings(work))
    _write_pieces(work, release, release.pieces(), 1)
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
    fan_out=FanOut(plan=plan, run=run_pieces, finish=finish),
    automatic=False,
    description="A versioned, immutable training release of the recipe: train and valid "
    "Megatron shards of about shard_tokens tokens, documents shuffled across every crawl, a "
    "provenance sidecar per shard, manifest.json and blend.txt (Megatron-LM's --data-path).",
)
