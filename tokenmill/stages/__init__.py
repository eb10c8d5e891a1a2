"""Every stage of the pipeline, in lineage order: the one list the orchestration, the summary
and the tests are built from. A new stage is a module here and its name below."""

from __future__ import annotations

import importlib

from tokenmill.runtime.stage import Stage

NAMES = (
    "raw_crawl",
    "extracted",
    "scored",
    "score_distribution",
    "eval_index",
    "cleaned",
    "dedup_signatures",
    "dedup_clusters",
    "deduplicated",
    "tokenizer",
    "tokenized_shards",
    "release",
)


def __getattr__(name: str):
    # imported on first use: a worker process running one stage imports that stage's module
    # (and its libraries) alone
    if name == "STAGES":
        stages = tuple(importlib.import_module(f"{__name__}.{n}").STAGE for n in NAMES)
        globals()["STAGES"] = stages
        return stages
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def stage_named(name: str) -> Stage:
    stages = globals().get("STAGES") or __getattr__("STAGES")
    for stage in stages:
        if stage.name == name:
            return stage
    raise KeyError(f"no stage named {name!r}; stages: {[s.name for s in stages]}")
