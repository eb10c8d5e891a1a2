"""The commands that run the pipeline on the local Dagster instance: register, add-crawl, run,
status, release, retrain-tokenizer and ui."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from tokenmill import PROJECT_DIR
from tokenmill.cli.context import (
    chosen_stages,
    default_lake,
    load_catalog,
    narrowed,
    registrable_crawl,
)

if TYPE_CHECKING:
    from tokenmill.data_assets.datasets import Catalog
    from tokenmill.storage.lake import Lake

RETRAINED_TAG = "tokenmill/retrained"
RELEASED_TAG = "tokenmill/released"


def cmd_register(args: argparse.Namespace) -> None:
    from tokenmill.cli.runner import local_instance, register

    lake = default_lake()
    crawl = registrable_crawl(lake, args.crawl)
    registration = register(
        local_instance(), lake, crawl, args.files_per_unit, verify=not args.no_verify
    )
    for line in registration.describe_refused():
        print(f"refused: {line}", file=sys.stderr)
    units = registration.units
    shown = ", ".join(u.name for u in units[:10]) + (" ..." if len(units) > 10 else "")
    print(f"{len(units)} new units of {args.crawl}: {shown or '-'}")


def cmd_add_crawl(args: argparse.Namespace) -> None:
    from tokenmill.crawl.sources import CrawlSource

    source = CrawlSource(
        crawl=args.crawl,
        paths=args.paths,
        base=args.base,
        prefix=args.prefix,
        endpoint_url=args.endpoint_url,
        region=args.region,
        unsigned=args.unsigned,
        credentials=args.credentials,
        copy=args.copy,
    )
    lake = default_lake()
    source.save(lake)
    print(f"crawl {args.crawl} declared at {lake.uri(CrawlSource.key(args.crawl))}")
    if args.register:
        cmd_register(args)


def cmd_run(args: argparse.Namespace) -> None:
    stages = chosen_stages(args.select)
    catalog = load_catalog(args.recipe, dagster=True)
    lake = default_lake()
    register_and_run(
        lake,
        [registrable_crawl(lake, crawl) for crawl in args.crawl or []],
        args.files_per_unit,
        force=args.force,
        catalog=catalog,
        stages=stages,
        dry_run=args.dry_run,
        release=args.release,
    )


def register_and_run(
    lake: Lake,
    crawls: list[str],
    files_per_unit: int,
    force: bool = False,
    catalog: Catalog | None = None,
    stages: list[str] | None = None,
    dry_run: bool = False,
    release: bool = False,
) -> None:
    """Register the crawls' new files, then materialize what is missing or stale (or, with
    `dry_run`, say what would run); each recipe file left out is reported once, the valid
    recipes run, and the command then fails naming them."""
    from tokenmill.cli.reading import release_lines, summary_rows
    from tokenmill.cli.runner import (
        local_instance,
        materialize_all,
        materialized_partitions,
        out_of_date_plan,
        register,
        sync_partitions,
    )
    from tokenmill.reports.summary import format_table

    catalog = catalog or load_catalog(dagster=True)
    for problem in catalog.problems:
        print(f"recipe left out: {problem}", file=sys.stderr)
    instance = local_instance()
    if dry_run:
        print_plan(out_of_date_plan(instance, lake, catalog, stages, force))
        return
    for crawl in crawls:
        for line in register(instance, lake, crawl, files_per_unit).describe_refused():
            print(f"refused: {line}", file=sys.stderr)
    sync_partitions(instance, lake)
    outcomes = materialize_all(instance, lake, force=force, catalog=catalog, stages=stages)
    print(f"{len(outcomes)} runs succeeded on the instance at {instance.root_directory}")
    if release:
        for dataset in catalog.recipes:
            make_release(lake, dataset, instance)
    materialized = materialized_partitions(instance, catalog)
    rows = summary_rows(lake, catalog)
    for row in rows:
        row["dagster"] = len(materialized.get(row["stage"], ()))
    print(format_table(rows))
    for line in release_lines(lake, catalog.recipes, instance):
        print(line)
    if catalog.problems:
        count = len(catalog.problems)
        raise ValueError(
            f"{count} recipe file{'s' if count > 1 else ''} left out (above); the other "
            "recipes ran. Fix or remove the file, then run again"
        )


def print_plan(plan) -> None:
    """What `tokenmill run` would launch, stage by stage, and why."""
    if not plan.launches:
        print("nothing to run: every partition is up to date")
    for launch in plan.launches:
        count = "" if launch.partitions == [None] else f"{len(launch.partitions)} partitions"
        print(f"  {launch.asset:34} {count:>15}  {launch.why}")
    for asset, why in plan.then:
        print(f"  {asset:34} {why:>15}  then, where the data above them changes")
    print(f"tokenmill run would launch {plan.runs} runs (at most {plan.runs + plan.then_runs})")


def cmd_status(args: argparse.Namespace) -> None:
    """The settings in force, then per recipe and stage what is missing or stale and why, and
    what `tokenmill run` would launch."""
    from tokenmill.cli.reading import release_lines
    from tokenmill.cli.runner import local_instance, plan_of, stage_states
    from tokenmill.recipes.project import project_settings
    from tokenmill.runs.processes import reap

    for line in project_settings().lines():
        print(line)
    instance = local_instance()
    print(f"{'instance':14} {instance.root_directory}")
    for dead in reap(instance):
        print(f"dead run     {dead.run_id} ({dead.job_name}): its process is gone; marked failed")
    catalog = load_catalog(args.recipe, dagster=True)
    for name, why in catalog.left_out:
        print(f"recipe left out: {name}: {why}")
    lake = default_lake()
    print()
    print(f"{'asset':34} {'partitions':>10} {'fresh':>6} {'missing':>7} {'stale':>6}  why")
    states = stage_states(instance, lake, catalog)
    for state in states:
        count = "-" if state.keys == [None] else state.partitions
        print(
            f"{state.asset:34} {count:>10} {state.fresh:>6} "
            f"{len(state.missing):>7} {len(state.stale):>6}  {state.why}"
        )
    releases = release_lines(lake, catalog.recipes, instance)
    if releases:
        print()
        print("\n".join(releases))
    print()
    print_plan(plan_of(states))


def make_release(lake: Lake, dataset, instance=None) -> None:
    """A release of the recipe as its `release:` section says, made on purpose: a recorded
    Dagster run of the recipe's release asset; a version published already is left as it is."""
    from tokenmill.cli.progress import progress
    from tokenmill.cli.reading import release_lines
    from tokenmill.cli.runner import RunsFailedError, definitions_for, execute, local_instance
    from tokenmill.data_assets.jobs import job_name
    from tokenmill.reports.summary import latest_release
    from tokenmill.storage.layout import RELEASE

    instance = instance or local_instance()
    with progress(None, dataset.key_text(RELEASE), unit="steps") as bar:
        outcome = execute(
            job_name(RELEASE),
            None,
            instance,
            definitions_for(lake),
            [dataset.key(RELEASE)],
            tags={RELEASED_TAG: f"tokenmill release by {os.environ.get('USER', '?')}"},
            on_step=bar.update,
        )
    if not outcome.success:
        raise RunsFailedError([outcome])
    print(f"{dataset.key_text(RELEASE)}: run {outcome.run_id}")
    for line in release_lines(lake, [dataset], instance):
        print(line)
    for warning in latest_release(dataset.lake(lake))["warnings"]:
        print(f"warning: {warning}")


def chosen_dataset(name: str | None):
    """The named recipe (or the only one), with its asset keys."""
    catalog = load_catalog()
    return narrowed(catalog, [catalog.chosen(name).prefix], dagster=True).recipes[0]


def cmd_release(args: argparse.Namespace) -> None:
    dataset = chosen_dataset(args.recipe)
    make_release(default_lake(), dataset)


def cmd_retrain_tokenizer(args: argparse.Namespace) -> None:
    """The recipe's tokenizer built again on purpose (trained anew, or read again from its
    path): a run tagged `tokenmill/retrained`, so the UI shows who changed the vocabulary; the
    tokenized shards are then stale and the automation (or `tokenmill run`) re-tokenizes."""
    from tokenmill.cli.runner import RunsFailedError, definitions_for, execute, local_instance
    from tokenmill.data_assets.jobs import job_name
    from tokenmill.storage.layout import TOKENIZER

    dataset = chosen_dataset(args.recipe)
    lake = default_lake()
    before = _tokenizer_sha(dataset.lake(lake))
    outcome = execute(
        job_name(TOKENIZER),
        None,
        local_instance(),
        definitions_for(lake),
        [dataset.key(TOKENIZER)],
        tags={RETRAINED_TAG: f"tokenmill retrain-tokenizer by {os.environ.get('USER', '?')}"},
    )
    if not outcome.success:
        raise RunsFailedError([outcome])
    after = _tokenizer_sha(dataset.lake(lake))
    change = "unchanged" if after == before else f"{before or 'none'} -> {after}"
    print(f"{dataset.key_text(TOKENIZER)}: run {outcome.run_id}, sha256 {change}")


def _tokenizer_sha(lake: Lake) -> str | None:
    from tokenmill.storage.layout import MARKER, TOKENIZER

    key = f"{TOKENIZER}/{MARKER}"
    return lake.read_json(key)["counts"]["sha256"][:16] if lake.exists(key) else None


def cmd_ui(args: argparse.Namespace) -> None:
    from tokenmill.cli.runner import local_instance

    local_instance()
    os.chdir(PROJECT_DIR)
    command = ["dagster", "dev", "-w", "workspace.yaml", "-h", args.host, "-p", str(args.port)]
    os.execvp(command[0], command)
