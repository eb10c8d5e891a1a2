"""What a second recipe costs beside the first, built the way a user builds it: `tokenmill run`
on a fresh project (SQLite instance, local lake); then a copy of the shipped recipe with one
threshold changed (`min_language_score: 0.8`) added to the recipes folder, and `tokenmill run`
again (a run makes each recipe's first release); then the second recipe's release made again
with nothing new: its fixed cost. An asset's cost is the `cpu_s` of its materializations (every
process that did its work), summed. The shared stages (raw_crawl + extracted) are also set
against the bare loop (fastwarc + resiliparse over the same WARC files, in this process, before
and after the runs: the faster of the two): what a user's `tokenmill run` costs over bare
extraction, per-file costs included; its workers' start-up (`start_cpu_s`: imports and models,
once per worker process, and each `tokenmill run` starts its own) is shown apart, and the ratio
with it too. The bare loop is also run one process per file, side by side as the stage's
workers run (`shared_x_bare_parallel`): the same contention for the machine's shared caches and
memory, which adds to CPU seconds on a loaded machine. Then the shared stages are run again
(`tokenmill run --force --select ...`) for ``BENCH_ROUNDS`` rounds in all (3), each after the
bare loop again: the ratio's median over the rounds, interleaved.

    uv run python benchmarks/bench_pay_once.py                 # ../shared's real pages
    uv run python benchmarks/bench_pay_once.py --pages DIR [--sample N] [--files N]
    uv run python benchmarks/bench_pay_once.py --warcs DIR

Targets (issue "Pay once"): the second recipe's stages, tokenized shards and release included,
cost at most 15 % of the pipeline from scratch (the shared stages and the first recipe's), a
release's fixed cost is under a second, and the shared stages at most 1.5x the bare loop.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from benchmarks.bench_clean import (
    CRAWL,
    add_input_arguments,
    cpu_seconds,
    fastwarc_resiliparse,
    input_description,
    input_flags,
    real_warcs,
    shared_pages_absent,
)
from benchmarks.measure import print_table
from benchmarks.results import record
from testkit import commands
from tokenmill import PROJECT_DIR
from tokenmill.recipes.catalog import Catalog
from tokenmill.runtime.parts import available_cpus
from tokenmill.storage.layout import EXTRACTED, LANDING, RAW_CRAWL

TARGET = 0.15
SHARED_TARGET = 1.5  # raw_crawl + extracted over the bare loop
FIRST, SECOND = "fineweb_en", "fineweb_en_strict"
FILES_PER_UNIT = 2
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
START = "start_cpu_s"  # a worker's start-up (imports, models), not in cpu_s
SHARED_STAGES = (RAW_CRAWL, EXTRACTED)


def project(root: Path) -> dict[str, str]:
    """A project of its own under `root`: the shipped recipe, the shipped shared settings."""
    recipes = root / "recipes"
    recipes.mkdir()
    shutil.copy(PROJECT_DIR / "resources" / "recipes" / f"{FIRST}.yaml", recipes)
    (root / "dagster_home").mkdir()
    shutil.copy(PROJECT_DIR / "dagster.yaml", root / "dagster_home")
    return os.environ | {
        "TOKENMILL_LAKE_URL": str(root / "lake"),
        "DAGSTER_HOME": str(root / "dagster_home"),
        "TOKENMILL_SETTINGS": str(root / "tokenmill.yaml"),
        "TOKENMILL_RECIPES": str(recipes),
    }


def add_second_recipe(root: Path) -> None:
    text = (root / "recipes" / f"{FIRST}.yaml").read_text()
    changed = text.replace("min_language_score: 0.65", "min_language_score: 0.8")
    assert changed != text, "the shipped recipe no longer sets min_language_score: 0.65"
    (root / "recipes" / f"{SECOND}.yaml").write_text(changed)


def tokenmill(env: dict[str, str], *args: str) -> float:
    """`tokenmill <args>` to its end (it must succeed); its wall seconds."""
    started = time.perf_counter()
    commands.run(env, *args, timeout=3 * 3600)
    return time.perf_counter() - started


def costs(env: dict[str, str], field: str = "cpu_s") -> dict[str, float]:
    """Each asset's cpu_s (or another metadata ``field``) summed over its materializations."""
    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    with DagsterInstance.get() as instance:
        unfinished = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
        assert not unfinished, unfinished
        spent: dict[str, float] = {}
        for key in instance.get_asset_keys():
            records = instance.fetch_materializations(key, limit=10_000).records
            values = [r.asset_materialization.metadata.get(field) for r in records]
            if any(value is not None for value in values):
                spent[key.to_user_string()] = sum(float(v.value) for v in values if v is not None)
    return spent


def shared_again(env: dict[str, str]) -> tuple[float, float]:
    """The shared stages computed again, as a user forces them (both at once: one pass over
    each file): the cpu_s and the workers' start-up (start_cpu_s) they add."""
    before = costs(env), costs(env, START)
    tokenmill(env, "run", "--force", *(f"--select={stage}" for stage in SHARED_STAGES))
    after = costs(env), costs(env, START)
    return tuple(
        sum(now.get(stage, 0.0) - then.get(stage, 0.0) for stage in SHARED_STAGES)
        for then, now in zip(before, after, strict=True)
    )


def _bare_file(path: str) -> float:
    """The bare loop's CPU seconds on one file, after a warm-up run (in a worker process)."""
    loop = functools.partial(fastwarc_resiliparse, [Path(path)])
    loop()
    return cpu_seconds(loop)[1]


def bare_in_parallel(paths: list[Path]) -> float:
    """The bare loop over `paths`, one process per file and as many at once as the stage runs
    workers: the CPU seconds of all of them."""
    workers = min(len(paths), available_cpus())
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        return sum(pool.map(_bare_file, map(str, paths)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_input_arguments(parser)
    arguments = parser.parse_args()
    if shared_pages_absent(arguments):
        print("(skipped: ../shared is absent)")
        return
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        env = project(root)
        landing = root / "lake" / LANDING / CRAWL
        landing.mkdir(parents=True)
        if arguments.warcs is not None:
            for path in sorted(arguments.warcs.glob("*.warc*")):
                shutil.copy(path, landing)
        elif arguments.pages is not None:
            from benchmarks.bench_clean import html_folder_lake

            html_folder_lake(
                root / "pages", arguments.pages, arguments.sample, arguments.files, arguments.copies
            )
            for path in sorted((root / "pages" / "warc").iterdir()):
                shutil.copy(path, landing)
        else:
            real_warcs(landing)
        paths = sorted(landing.iterdir())
        files, size = len(paths), sum(p.stat().st_size for p in paths)
        units = str(FILES_PER_UNIT)
        bare_loop = functools.partial(fastwarc_resiliparse, paths)
        bare_loop()  # warm-up
        bare = [cpu_seconds(bare_loop)[1]]
        bare_parallel = [bare_in_parallel(paths)]
        # `run` makes each recipe's first release
        wall = {"first": tokenmill(env, "run", "--crawl", CRAWL, "--files-per-unit", units)}
        first, first_start = costs(env), costs(env, START)
        add_second_recipe(root)
        wall["second"] = tokenmill(env, "run", "--files-per-unit", units)
        both = costs(env)
        wall["release again"] = tokenmill(env, "release", "--recipe", SECOND)
        again = costs(env)
        bare.append(cpu_seconds(bare_loop)[1])
        bare_parallel.append(bare_in_parallel(paths))
        # round 1: the first run's shared stages, against the bare loop run before it
        shared_first = [
            sum(spent.get(s, 0.0) for s in SHARED_STAGES) for spent in (first, first_start)
        ]
        rounds = [(bare[0], *shared_first)]
        for _ in range(ROUNDS - 1):
            rounds.append((cpu_seconds(bare_loop)[1], *shared_again(env)))

    shared_names = {stage.name for stage in Catalog.load().shared.stages} | {"crawl_units"}
    rows, totals = [], {"shared": 0.0, FIRST: 0.0, SECOND: 0.0}
    for asset in sorted(both):
        owner = asset.split("/")[0] if "/" in asset else "shared"
        if owner == "shared" and asset not in shared_names:
            continue
        spent = first.get(asset, 0.0) if owner != SECOND else both[asset]
        totals[owner] += spent
        rows.append([asset, round(spent, 2)])
    scratch_cost = totals["shared"] + totals[FIRST]
    ratio = totals[SECOND] / scratch_cost
    release_again = again[f"{SECOND}/release"] - both[f"{SECOND}/release"]  # nothing new
    shared_x_bare = (first["raw_crawl"] + first["extracted"]) / min(bare)
    shared_x_bare_parallel = (first["raw_crawl"] + first["extracted"]) / min(bare_parallel)
    round_ratios = [shared / bare_s for bare_s, shared, _ in rounds]
    shared_x_bare_median = statistics.median(round_ratios)
    started_ratios = [(shared + start) / bare_s for bare_s, shared, start in rounds]
    print_table("cpu_s per asset", ["asset", "cpu_s"], rows)
    summary = [
        ["shared stages", round(totals["shared"], 2)],
        [f"{FIRST} (first recipe)", round(totals[FIRST], 2)],
        ["pipeline from scratch", round(scratch_cost, 2)],
        [f"{SECOND} (second recipe)", round(totals[SECOND], 2)],
        ["second / scratch", f"{ratio:.1%} (target <= {TARGET:.0%})"],
        ["release made again, same inputs (cpu_s)", round(release_again, 2)],
        ["bare loop, before / after the runs (CPU s)", " / ".join(f"{b:.2f}" for b in bare)],
        ["(raw_crawl + extracted) / bare loop", f"{shared_x_bare:.3f} (<= {SHARED_TARGET})"],
        [
            "bare loop, a process per file side by side, before / after (CPU s)",
            " / ".join(f"{b:.2f}" for b in bare_parallel),
        ],
        ["(raw_crawl + extracted) / that", f"{shared_x_bare_parallel:.3f}"],
        [
            f"{len(rounds)} rounds, each the bare loop then the shared stages (CPU s)",
            "; ".join(f"{bare_s:.2f} / {shared:.2f}" for bare_s, shared, _ in rounds),
        ],
        [
            "the shared stages' worker start-up per round (start_cpu_s, not in cpu_s)",
            ", ".join(f"{start:.2f}" for _, _, start in rounds),
        ],
        [
            "(raw_crawl + extracted) / bare loop, median of the rounds",
            f"{shared_x_bare_median:.3f} (<= {SHARED_TARGET}; rounds "
            + ", ".join(f"{r:.3f}" for r in round_ratios)
            + ")",
        ],
        [
            "the same with the workers' start-up, median of the rounds",
            f"{statistics.median(started_ratios):.3f}",
        ],
    ]
    print_table("Second recipe against the pipeline from scratch", ["", "value"], summary)
    print_table(
        "wall seconds per command", ["command", "s"], [[k, round(v, 1)] for k, v in wall.items()]
    )
    figures = {
        "shared_cpu_s": round(totals["shared"], 2),
        "first_recipe_cpu_s": round(totals[FIRST], 2),
        "second_recipe_cpu_s": round(totals[SECOND], 2),
        "second_over_scratch": round(ratio, 4),
        "release_again_cpu_s": round(release_again, 2),
        "bare_cpu_s": [round(b, 3) for b in bare],
        "shared_x_bare": round(shared_x_bare, 3),
        "bare_parallel_cpu_s": [round(b, 3) for b in bare_parallel],
        "shared_x_bare_parallel": round(shared_x_bare_parallel, 3),
        "rounds_bare_and_shared_cpu_s": [[round(b, 3), round(s, 3)] for b, s, _ in rounds],
        "rounds_shared_start_cpu_s": [round(start, 3) for _, _, start in rounds],
        "shared_with_start_x_bare_median": round(statistics.median(started_ratios), 3),
        "shared_x_bare_rounds": [round(r, 3) for r in round_ratios],
        "shared_x_bare_median": round(shared_x_bare_median, 3),
        "per_asset_cpu_s": {row[0]: row[1] for row in rows},
        "wall_s": {k: round(v, 1) for k, v in wall.items()},
    }
    print(figures)
    data = input_description(arguments.pages, arguments.sample, arguments.warcs, arguments.copies)
    given = input_flags(arguments)
    name = "bench_pay_once" + (f": {' '.join(given)}" if given else "")
    record(name, figures, {"data": data, "warc_files": files, "warc_bytes": size})


if __name__ == "__main__":
    main()
