"""Orchestration overhead: the stages as Dagster runs on the local instance, one run per
partition, against the bare stages (`tokenmill.runtime.parts.run_stage_work`) on the same
partitions.

    uv run python benchmarks/bench_orchestration.py [--units 6] [--files-per-unit 4]
        [--workers 2] [--pages 10] [--daemon]

A demo crawl of `--units` units of `--files-per-unit` WARC files (`--pages` pages each) is landed
twice: once for the bare stages (tokenmill/, no Dagster), once for Dagster runs on a temporary
instance with the project's dagster.yaml (execute_in_process, as tokenmill/cli/runner.py runs).
Both work on a unit's files in `--workers` worker processes (the Dagster runs through
`WorkersResource(processes=W)`, with its memory cap given to the bare stages too) and both run
each stage's checks. Each Dagster run is timed right after the bare stage does the same work
(its stage on its partition), so both see the same load on a shared machine. Both paths first
run every stage, untimed, over a warm-up crawl of one unit of `--workers` files: the worker
processes outlive a run within one process, for both paths, and have then imported every
stage and loaded its models.

1. Seconds per run, by stage: one run per partition (a unit, the crawl, or the lake), against
   the bare stage on the same partition, with the events each run writes.
2. Every stage over every partition, one run per partition in lineage order (as
   `tokenmill run` and a backfill, BackfillPolicy.multi_run(1), plan them), executed one at a
   time, against the sum of the bare stage times. Events written per run are counted from the
   instance: each is a write to the SQLite event log.
3. With --daemon: the same backfill launched through `dagster dev` (GraphQL, as the UI does),
   its runs launched by the daemon, each in its own process (workers: one per CPU).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from dagster import RunsFilter
from dagster._core.storage.tags import BACKFILL_ID_TAG

from benchmarks.measure import TABLES, print_table, timed
from benchmarks.results import record

CRAWL = "CC-MAIN-ORCH"
WARM_UP = "CC-MAIN-ORCH-WARMUP"
TARGET_OVERHEAD = 0.25
Run = tuple[object, str | None]  # (stage, partition key: a unit, the crawl, or None)


def plan(stages, crawl: str, units) -> list[Run]:
    """Every stage over every partition of `crawl`, one run per partition, stage by stage."""
    from tokenmill.runtime.stage import Scope

    partitions = {Scope.UNIT: [u.key for u in units], Scope.CRAWL: [crawl], Scope.LAKE: [None]}
    return [(stage, key) for stage in stages for key in partitions[stage.scope]]


def bare_run(lake, recipe, workers, run: Run) -> None:
    """The work of one run without Dagster: the stage on its partition, then its checks."""
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.runtime.stage import Scope
    from tokenmill.storage.layout import Unit

    stage, key = run
    unit = Unit.from_key(key) if stage.scope is Scope.UNIT else None
    crawl = key if stage.scope is Scope.CRAWL else None
    settings = recipe.settings(stage.settings) if stage.settings else None
    run_stage_work(
        stage,
        lake,
        settings,
        unit=unit,
        crawl=crawl,
        workers=workers.count(),
        memory_limit=workers.memory_limit_bytes(),
    )
    for check in stage.checks:
        check.verify(lake, unit or crawl)


def execute(defs, instance, run: Run):
    from tokenmill.data_assets.jobs import job_name

    from tokenmill.cli.runner import QUIET_CONSOLE

    stage, key = run
    return defs.resolve_job_def(job_name(stage.name)).execute_in_process(
        run_config=QUIET_CONSOLE, instance=instance, partition_key=key, raise_on_error=False
    )


def daemon_backfill(root: Path, units: int, files_per_unit: int, pages: int):
    """Every stage over every partition as one asset backfill launched through `dagster dev`
    (GraphQL, as the UI does; the daemon launches the runs): (runs, wall s, final status)."""
    from testkit.dagster_dev import start_dagster_dev, stop_dagster_dev
    from tokenmill.cli.demo import land_demo_crawl
    from tokenmill.cli.runner import STAGE_ASSETS, register
    from tokenmill.storage.lake import Lake

    dev = start_dagster_dev(root)
    try:
        dev.stop_automation()
        lake = Lake.from_url(dev.env["TOKENMILL_LAKE_URL"])
        land_demo_crawl(lake, CRAWL, units * files_per_unit, pages, seed=0)
        with dev.instance() as instance:
            register(instance, lake, CRAWL, files_per_unit)
        params = {
            "assetSelection": [{"path": [name]} for name in STAGE_ASSETS],
            "allPartitions": True,
        }
        started = time.perf_counter()
        backfill_id = dev.launch_backfill(params)
        backfill = dev.wait_for_backfill(backfill_id, timeout=3 * 3600)
        wall = time.perf_counter() - started
        with dev.instance() as instance:
            runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
        return len(runs), wall, backfill.status.value
    finally:
        stop_dagster_dev(dev)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, default=6)
    parser.add_argument("--files-per-unit", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="worker processes per run")
    parser.add_argument("--pages", type=int, default=10, help="pages per WARC file")
    parser.add_argument(
        "--daemon",
        action="store_true",
        help="also time the backfill launched through `dagster dev` (slow: minutes)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-orch-") as scratch:
        root = Path(scratch)
        os.environ["DAGSTER_HOME"] = str(root / "dagster_home")
        os.environ["TOKENMILL_LAKE_URL"] = str(root / "lake")

        from tokenmill.resources.lake import LakeResource
        from tokenmill.resources.workers import WorkersResource

        from tokenmill.cli.demo import land_demo_crawl
        from tokenmill.cli.runner import local_instance, register
        from tokenmill.crawl.units import register_new_files
        from tokenmill.definitions import build_definitions
        from tokenmill.recipes.recipe import Recipe
        from tokenmill.stages import STAGES
        from tokenmill.storage.lake import Lake

        files = args.units * args.files_per_unit
        bare_lake = Lake.from_url(str(root / "bare"))
        land_demo_crawl(bare_lake, CRAWL, files, args.pages, seed=0)
        land_demo_crawl(bare_lake, WARM_UP, args.workers, 10, seed=1)
        # The same landed crawls for the Dagster runs: copied, since generating them takes
        # minutes.
        shutil.copytree(root / "bare", root / "lake")
        lake = Lake.from_url(str(root / "lake"))
        instance = local_instance()
        registered = {}
        for crawl, per_unit in ((CRAWL, args.files_per_unit), (WARM_UP, args.workers)):
            registered[crawl] = register_new_files(bare_lake, crawl, per_unit).units
            assert register(instance, lake, crawl, per_unit).units == registered[crawl]
        units = registered[CRAWL]
        recipe = Recipe.load()
        workers = WorkersResource(processes=args.workers)
        defs = build_definitions(LakeResource(url=str(lake.url)), workers=workers, recipe=recipe)

        def paired(run: Run) -> tuple[float, float, object]:
            """The run's work bare, then as a Dagster run: (bare s, run s, result)."""
            _, bare = timed(lambda: bare_run(bare_lake, recipe, workers, run))
            result, seconds = timed(lambda: execute(defs, instance, run))
            if not result.success:
                raise SystemExit(f"run {result.run_id} ({run[0].name}) failed; see DAGSTER_HOME")
            return bare, seconds, result

        for run in plan(STAGES, WARM_UP, registered[WARM_UP]):
            paired(run)

        runs = plan(STAGES, CRAWL, units)
        by_stage: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
        for run in runs:
            bare, seconds, result = paired(run)
            by_stage[run[0].name].append((bare, seconds, len(instance.all_logs(result.run_id))))
        timings = [t for stage_runs in by_stage.values() for t in stage_runs]
        bare_total = sum(bare for bare, _, _ in timings)
        wall = sum(seconds for _, seconds, _ in timings)
        events = sum(count for _, _, count in timings)

        rows = []
        for name, stage_runs in by_stage.items():
            n = len(stage_runs)
            bare = sum(b for b, _, _ in stage_runs) / n
            seconds = sum(s for _, s, _ in stage_runs) / n
            rows.append(
                [name, n, bare, seconds, seconds - bare, seconds / bare,
                 sum(e for _, _, e in stage_runs) / n]
            )  # fmt: skip
        print_table(
            f"One partition per run, by stage: units of {args.files_per_unit} files of "
            f"{args.pages} pages, {args.workers} worker processes per run (warm process)",
            ["stage", "runs", "bare s per run", "run s per run", "overhead s", "ratio",
             "events per run"],
            rows,
        )  # fmt: skip
        overhead = wall / bare_total - 1
        print_table(
            f"Every stage over every partition: {len(units)} units of {args.files_per_unit} "
            f"files ({files} files), one run per partition, runs one at a time",
            ["path", "runs", "wall s", "s per unit", "overhead", "target"],
            [
                ["bare stages (sum)", 0, bare_total, bare_total / len(units), "-", "-"],
                [
                    "runs on the local instance",
                    len(runs),
                    wall,
                    wall / len(units),
                    f"{overhead:+.1%}",
                    f"<= {TARGET_OVERHEAD:.0%} "
                    + ("met" if overhead <= TARGET_OVERHEAD else "MISSED"),
                ],
            ],
        )
        # Most of the overhead is event-log writes: a fixed number per run plus a few per
        # asset, check and reported partition (unit_duplicates).
        print_table(
            "Where the overhead goes: events written to the event log",
            ["runs", "events", "events per run", "overhead s per run", "overhead ms per event"],
            [
                [
                    len(runs),
                    events,
                    events / len(runs),
                    (wall - bare_total) / len(runs),
                    1000 * (wall - bare_total) / events,
                ]
            ],
        )
        if args.daemon:
            backfill_runs, daemon_wall, status = daemon_backfill(
                root / "daemon", args.units, args.files_per_unit, args.pages
            )
            print_table(
                f"Asset backfill through dagster dev: every stage over every partition, "
                f"{len(units)} units of {args.files_per_unit} files (daemon)",
                ["path", "runs", "wall s", "s per unit", "overhead", "status"],
                [
                    ["bare stages (sum)", 0, bare_total, bare_total / len(units), "-", "-"],
                    [
                        "dagster dev backfill",
                        backfill_runs,
                        daemon_wall,
                        daemon_wall / len(units),
                        f"{daemon_wall / bare_total - 1:+.1%}",
                        status,
                    ],
                ],
            )
        instance.dispose()
    demo = {
        "data": "a generated demo crawl",
        "units": args.units,
        "files_per_unit": args.files_per_unit,
        "pages_per_file": args.pages,
    }
    record("bench_orchestration", TABLES, demo)


if __name__ == "__main__":
    main()
