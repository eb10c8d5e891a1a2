"""What a recipe costs once the extraction exists: a whole new recipe (filtering, deduplication,
tokenization) built from the stored extraction, against the whole pipeline from scratch (WARC
indexing, extraction, then the same stages), on real pages.

    uv run python benchmarks/bench_recipes.py                    # ../shared's real pages
    uv run python benchmarks/bench_recipes.py --pages DIR [--sample N]
    uv run python benchmarks/bench_recipes.py --warcs DIR

Every stage runs bare (``run_stage_work``, no Dagster) in this process, one worker, one polars
thread (the clustering's parts in child processes, counted; the tokenizer's own threads too): the
two runs take turns for ``BENCH_ROUNDS`` rounds (5) after a warm-up of each; the
median of the per-round ratios is the figure. Both use the tokenizer in ../shared (no training:
a tokenizer is a recipe's choice, not a cost of trying thresholds). The target (issue "Extract
once"): a new recipe costs at most 30 % of the pipeline from scratch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "1")
from tokenmill.data_assets.datasets import recipe_zones

from benchmarks.bench_clean import (
    STRICTER,
    add_input_arguments,
    html_folder_lake,
    landed_input,
    real_warc_lake,
    shared_pages_absent,
    warc_folder_lake,
)
from benchmarks.measure import print_table
from benchmarks.results import record
from testkit.shared_data import shared_path
from tokenmill.recipes.recipe import Recipe
from tokenmill.runtime.budget import cpu_time, enable_watchdog
from tokenmill.runtime.parts import run_stage_work
from tokenmill.runtime.stage import Scope
from tokenmill.stages import STAGES
from tokenmill.stages.cleaned import CleanSettings
from tokenmill.storage.layout import DEDUPLICATED, EXTRACTED, MARKER, TOKENIZED_SHARDS, Unit

TOKENIZER = ("tokenizers", "gpt-neox-style-50k.tokenizer.json")
TARGET = 0.30


def recipe_view(lake, name: str):
    """The lake as recipe `name`'s stages see it, as in a deployment (recipes side by side)."""
    return lake.with_zones(recipe_zones(name))


def run_stages(lake, unit: Unit, recipe: Recipe, stages, clean: CleanSettings) -> None:
    for stage in stages:
        settings = recipe.settings(stage.settings) if stage.settings else None
        if stage.settings is CleanSettings:
            settings = clean
        run_stage_work(
            stage,
            lake,
            settings,
            unit=unit if stage.scope is Scope.UNIT else None,
            crawl=unit.crawl if stage.scope is Scope.CRAWL else None,
            workers=1,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_input_arguments(parser)
    arguments = parser.parse_args()
    tokenizer = shared_path(*TOKENIZER)
    if tokenizer is None or shared_pages_absent(arguments):
        print("(skipped: ../shared is absent)")
        return
    os.environ["TOKENMILL_TOKENIZER_PATHS"] = str(tokenizer.parent)
    recipe = Recipe({"tokenizer": {"path": str(tokenizer)}}, "bench_recipes")
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    enable_watchdog()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)

        def source(folder: Path):
            folder.mkdir()
            if arguments.warcs is not None:
                return warc_folder_lake(folder, arguments.warcs)
            if arguments.pages is not None:
                return html_folder_lake(
                    folder, arguments.pages, arguments.sample, arguments.files, arguments.copies
                )
            return real_warc_lake(folder)

        # From scratch: a lake of its own, where no other recipe left anything to reuse.
        fresh, unit = source(root / "scratch")
        # A new recipe beside the project's, whose outputs are there (built once, unmeasured).
        existing, _ = source(root / "existing")
        split = [s.name for s in STAGES].index(EXTRACTED) + 1
        shared, per_recipe = STAGES[:split], STAGES[split:]
        run_stages(existing, unit, recipe, shared, CleanSettings())
        run_stages(recipe_view(existing, "default"), unit, recipe, per_recipe, CleanSettings())

        def from_scratch() -> None:
            run_stages(fresh, unit, recipe, shared, CleanSettings())
            run_stages(recipe_view(fresh, "default"), unit, recipe, per_recipe, CleanSettings())

        new_recipe = recipe_view(existing, "stricter")
        runs = {
            # everything, the default recipe
            "scratch": from_scratch,
            # a new recipe on the stored extraction: other thresholds, everything below
            "recipe": lambda: run_stages(new_recipe, unit, recipe, per_recipe, STRICTER),
        }
        for work in runs.values():
            work()  # warm-up: models loaded, caches filled
        cpu = {name: [] for name in runs}
        rows = []
        for number in range(1, rounds + 1):
            for name, work in runs.items():
                started = cpu_time()  # with the ended worker processes of dedup_clusters
                work()
                cpu[name].append(cpu_time() - started)
            rows.append([number, cpu["scratch"][-1], cpu["recipe"][-1]])
            rows[-1].append(rows[-1][2] / rows[-1][1])
        kept = new_recipe.read_json(f"{unit.prefix(DEDUPLICATED)}/{MARKER}")["records_out"]
        reused = sum(
            new_recipe.read_json(f"{unit.part_prefix(TOKENIZED_SHARDS, part)}/{MARKER}")["counts"][
                "documents_reused"
            ]
            for part in range(
                new_recipe.read_json(f"{unit.prefix(TOKENIZED_SHARDS)}/{MARKER}")["counts"]["files"]
            )
        )
        landed = landed_input(
            root / "scratch", arguments.pages, arguments.sample, arguments.warcs, arguments.copies
        )
        files = landed["warc_files"]
    shares = [row[-1] for row in rows]
    share = statistics.median(shares)
    print_table(
        f"A new recipe on the stored extraction vs the pipeline from scratch ({files} WARC "
        f"files, {kept} documents after deduplication in the new recipe, the tokens of "
        f"{reused} of them copied from the project's recipe), CPU seconds per round",
        ["round", "from scratch CPU s", "new recipe CPU s", "new / scratch"],
        [
            *rows,
            [
                "median",
                statistics.median(cpu["scratch"]),
                statistics.median(cpu["recipe"]),
                share,
            ],
        ],
    )
    verdict = "met" if share <= TARGET else "NOT met"
    print(f"target: a new recipe <= {TARGET:.0%} of from scratch: {verdict}")
    figures = {
        "bench": "recipes",
        "scratch_cpu_s": cpu["scratch"],
        "recipe_cpu_s": cpu["recipe"],
        "new_recipe_share": share,
        "new_recipe_share_rounds": shares,
        "documents_kept": kept,
        "documents_reused": reused,
    }
    print(json.dumps(figures))
    record("bench_recipes", figures, landed)


if __name__ == "__main__":
    main()
