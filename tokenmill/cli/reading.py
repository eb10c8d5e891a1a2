"""The commands that only read the lake and the recipe files (no Dagster): summary, trace,
trace-release, preview, dropped and recipes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill.cli.context import chosen_crawls, chosen_recipe, default_lake, load_catalog
from tokenmill.cli.errors import UsageError

if TYPE_CHECKING:
    from tokenmill.recipes.catalog import Catalog
    from tokenmill.storage.lake import Lake


def cmd_summary(args: argparse.Namespace) -> None:
    import json

    from tokenmill.reports.summary import (
        format_table,
        language_line,
        languages,
        latest_release,
        legend,
    )

    lake, catalog = default_lake(), load_catalog()
    rows = summary_rows(lake, catalog)
    tokenized = {d.prefix: languages(d.lake(lake)) for d in catalog.recipes}
    if args.json:
        releases = {d.prefix: latest_release(d.lake(lake)) for d in catalog.recipes}
        found = {name: release for name, release in releases.items() if release}
        print(json.dumps({"stages": rows, "releases": found, "languages": tokenized}, indent=1))
        return
    print(format_table(rows), legend(rows), sep="\n\n", end="\n\n")
    for name, found in tokenized.items():
        if found:
            print(language_line(f"{name} (tokenized)", found))
    for line in release_lines(lake, catalog.recipes):
        print(line)


def summary_rows(lake: Lake, catalog: Catalog) -> list[dict]:
    """The shared stages, then each recipe's (`<recipe>/<stage>`, as its asset key)."""
    from tokenmill.reports.summary import stage_rows

    rows = stage_rows(lake, catalog.shared.stages)
    for dataset in catalog.recipes:
        rows += stage_rows(dataset.lake(lake), dataset.stages, f"{dataset.prefix}/")
    return rows


def release_lines(lake: Lake, datasets, instance=None) -> list[str]:
    """Each recipe's latest release: where it is and what it holds, and why it is stale when
    a release made now would be another one (from the units tokenized since it, on
    `instance`; from every unit's marker without one)."""
    from tokenmill.release.plan import release_report
    from tokenmill.storage.outputs import MissingInputError

    lines = []
    for dataset in datasets:
        recipe_lake = dataset.lake(lake)
        try:
            counts = release_report(recipe_lake)["counts"]
        except MissingInputError:
            continue
        where = recipe_lake.uri(f"release/{counts['version']}")
        lines.append(
            f"release {dataset.prefix}: {counts['train_shards']} train shards "
            f"({counts['train_tokens']:,} tokens), {counts['valid_shards']} valid "
            f"({counts['valid_tokens']:,} tokens) at {where}"
        )
        state = release_state(lake, dataset, instance)
        if state.is_stale:
            lines.append(
                f"  (stale: {state.reason}; rebuild with `tokenmill run --release --recipe "
                f"{dataset.prefix}` or `tokenmill release --recipe {dataset.prefix}`)"
            )
    return lines


def release_state(lake: Lake, dataset, instance=None):
    """The recipe's latest release against one made now."""
    if instance is not None:
        from tokenmill.data_assets.release_inputs import release_state

        return release_state(lake, dataset, instance)
    from tokenmill.release.plan import ReleaseSettings
    from tokenmill.release.staleness import release_staleness

    return release_staleness(dataset.lake(lake), dataset.recipe.settings(ReleaseSettings))


def cmd_trace(args: argparse.Namespace) -> None:
    from tokenmill.reports.summary import trace_token
    from tokenmill.storage.layout import Unit

    try:
        unit = Unit.from_key(args.unit)
    except ValueError as error:
        raise UsageError(f"{args.unit!r} is not a unit: {error}") from None
    lake = chosen_recipe(args.recipe).lake(default_lake())
    print_trace(trace_token(lake, unit, args.part, args.position))


def cmd_trace_release(args: argparse.Namespace) -> None:
    from tokenmill.reports.summary import trace_release_token

    lake = chosen_recipe(args.recipe).lake(default_lake())
    found = trace_release_token(lake, args.shard, args.position, args.version)
    print_trace(found)
    print(f"  {'copied from':14} {found['source']} document {found['source_doc_index']}")


def print_trace(found: dict) -> None:
    print(
        f"token {found['position']} = {found['token']!r} (id {found['token_id']})"
        + (" [end of document]" if found["is_end_of_document"] else "")
    )
    for field in ("url", "crawl", "source_file", "record_id", "record_offset", "doc_id"):
        print(f"  {field:14} {found[field]}")
    print(f"  {'context':14} …{found['before']}[[{found['text']}]]{found['after']}…")


def recipe_file(path: str):
    """A recipe file named on the command line, read and checked."""
    from tokenmill.recipes.recipe import Recipe

    try:
        return Recipe.load(path)
    except ValueError as error:
        raise UsageError(str(error)) from None


def cmd_preview(args: argparse.Namespace) -> None:
    """A recipe file against a recipe as built: --against's, the file's namesake, or the first;
    against a recipe file's settings as they stand when --against names a file."""
    from tokenmill.crawl.units import registered_units
    from tokenmill.recipes.recipe import RECIPE_FILE_SUFFIXES
    from tokenmill.reports.preview import preview
    from tokenmill.reports.preview_baseline import Baseline, Tokens, built_baseline
    from tokenmill.reports.preview_report import html_report, text_report
    from tokenmill.stages.cleaned import CleanSettings
    from tokenmill.storage.layout import EXTRACTED, MARKER
    from tokenmill.tokens.tokenization import TokenizeSettings

    lake = default_lake()
    given = recipe_file(args.recipe)
    proposed = given.settings(CleanSettings)
    recipes = {dataset.prefix: dataset for dataset in load_catalog().recipes}
    first = next(iter(recipes.values()), None)
    if args.against and Path(args.against).suffix in RECIPE_FILE_SUFFIXES:
        against = recipe_file(args.against)
        current = Baseline(against.settings(CleanSettings), f"the settings of {against.source}")
        dataset = recipes.get(against.name) or recipes.get(given.name) or first  # its tokens
    else:
        dataset = recipes.get(args.against or given.name) or (None if args.against else first)
        if dataset is None:
            named = f" named {args.against!r}" if args.against else ""
            raise UsageError(
                f"no recipe{named} to compare with; recipes: {', '.join(recipes) or 'none'} "
                "(or give --against a recipe file)"
            )
        current = None
    crawls = chosen_crawls(lake, args.crawl)
    units = [
        unit
        for crawl in crawls
        for unit in registered_units(lake, crawl)
        if lake.exists(f"{unit.prefix(EXTRACTED)}/{MARKER}")
    ]
    if not units:
        raise ValueError(f"nothing extracted yet in {', '.join(crawls) or 'the lake'}")
    if current is None:
        settings = dataset.recipe.settings(CleanSettings)
        data = dataset.lake(lake)
        current = built_baseline(data, units, settings, dataset.prefix, dataset.recipe.source)
    tokens = None
    if dataset:
        append_eod = dataset.recipe.settings(TokenizeSettings).append_eod
        tokens = Tokens(dataset.lake(lake), append_eod)
    result = preview(
        lake,
        units,
        current,
        proposed,
        samples=args.sample,
        tokens=tokens,
        distributions=bool(args.html),  # only the page draws them
    )
    print(text_report(result))
    if args.html:
        Path(args.html).write_text(html_report(result))
        print(f"\nthe report with the distributions, thresholds marked: {args.html}")


def cmd_dropped(args: argparse.Namespace) -> None:
    from tokenmill.crawl.units import registered_units
    from tokenmill.reports.dropped import (
        counts_report,
        dropped_counts,
        dropped_documents,
        text_report,
    )
    from tokenmill.stages.cleaned import CleanSettings

    dataset = chosen_recipe(args.recipe)
    lake = dataset.lake(default_lake())
    crawls = chosen_crawls(lake, args.crawl)
    settings = dataset.recipe.settings(CleanSettings)
    known_filters(settings, args.filter)
    units = (unit for crawl in crawls for unit in registered_units(lake, crawl))
    if args.count:
        print(counts_report(dropped_counts(lake, units, args.filter)))
        return
    found = dropped_documents(lake, units, args.filter, args.limit, args.chars, settings.mask_pii)
    print(text_report(found))


def cmd_contamination(args: argparse.Namespace) -> None:
    from tokenmill.crawl.units import registered_units
    from tokenmill.reports.contamination import contamination, passages, report
    from tokenmill.stages.cleaned import CleanSettings

    dataset = chosen_recipe(args.recipe)
    lake = dataset.lake(default_lake())
    crawls = chosen_crawls(lake, args.crawl)
    wanted = dataset.recipe.settings(CleanSettings).decontamination().sets
    unknown = [name for name in args.set or () if name not in wanted]
    if unknown:
        raise UsageError(
            f"recipe {dataset.prefix} does not decontaminate against {unknown}; its sets: "
            f"{', '.join(wanted) or 'none (clean.decontaminate)'}"
        )
    units = [unit for crawl in crawls for unit in registered_units(lake, crawl)]
    found = contamination(lake, units, args.set)
    print(report(lake, found, passages(lake, units, args.set, args.limit)))


def known_filters(settings, names: list[str] | None) -> None:
    """Each named filter is one of the recipe's."""
    known = [flt.name for flt in settings.chain().filters]
    if settings.decontamination().sets:
        known.append("decontaminate")
    for name in names or ():
        if name not in known:
            raise UsageError(f"no filter named {name!r} in the recipe; filters: {', '.join(known)}")


def add_recipes_folder(folder: Path) -> None:
    from tokenmill.recipes.project import RECIPES_ENV, project_settings, write_project_settings

    settings = project_settings()
    if settings.recipes.source == RECIPES_ENV:
        raise UsageError(f"{RECIPES_ENV} is set: it names the recipes, not the settings file")
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder")
    folder = folder.resolve()
    locations = settings.recipe_locations
    if folder not in locations:
        locations.append(folder)
        write_project_settings(recipes=[str(path) for path in locations])
    print(f"recipe folders in {settings.file}: {', '.join(map(str, locations))}")


def cmd_recipes(args: argparse.Namespace) -> None:
    """The recipes, where their outputs are, recipe files left out and why, and outputs whose
    recipe file is gone; `--remove NAME` deletes such outputs."""
    from tokenmill.recipes.catalog import RECIPES_ZONE

    if args.add_folder:
        add_recipes_folder(Path(args.add_folder))
    catalog = load_catalog()
    lake = default_lake()
    names = set(catalog.names)
    stored = set(lake.list_dirs(RECIPES_ZONE))
    if args.remove:
        if args.remove in names:
            raise UsageError(
                f"recipe {args.remove} is in the recipes folder "
                f"({catalog.recipe(args.remove).recipe.source}): delete its file first"
            )
        if args.remove not in stored:
            kept = ", ".join(sorted(stored - names)) or "none"
            raise UsageError(
                f"no outputs of a recipe named {args.remove!r} in {lake.uri('')}; "
                f"outputs without a recipe file: {kept}"
            )
        lake.delete_prefix(f"{RECIPES_ZONE}/{args.remove}")
        print(f"deleted {lake.uri(f'{RECIPES_ZONE}/{args.remove}')}")
        return
    for dataset in catalog.recipes:
        where = lake.uri(f"{RECIPES_ZONE}/{dataset.prefix}")
        print(f"{dataset.prefix:20} {dataset.recipe.source}  outputs: {where}")
    for name in sorted(stored - names):
        print(
            f"{name:20} (no recipe file) outputs kept: {lake.uri(f'{RECIPES_ZONE}/{name}')}; "
            f"`tokenmill recipes --remove {name}` deletes them"
        )
    if catalog.problems:
        raise ValueError("recipe files left out:\n" + "\n".join(f"  {p}" for p in catalog.problems))
