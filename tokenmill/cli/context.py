"""What every command works on: the project's lake and recipes, as its settings name them
(`tokenmill.recipes.project`), and the arguments that choose among them."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tokenmill.cli.errors import UsageError

if TYPE_CHECKING:
    from tokenmill.recipes.catalog import Catalog, Dataset
    from tokenmill.storage.lake import Lake


def default_lake() -> Lake:
    from tokenmill.recipes.project import project_settings
    from tokenmill.storage.lake import Lake

    url = project_settings().lake.value
    return Lake.from_url(url, endpoint_url=os.environ.get("TOKENMILL_S3_ENDPOINT"))


def load_catalog(recipes: list[str] | None = None, dagster: bool = False) -> Catalog:
    """The project's recipes (only `recipes`, when named: each must be valid); `dagster` for
    the catalog with asset keys that runs need (Dagster is imported once the names are
    checked, so that a mistake is told at once)."""
    from tokenmill.recipes.catalog import Catalog

    return narrowed(Catalog.load(), recipes, dagster)


def narrowed(catalog: Catalog, recipes: list[str] | None, dagster: bool = False) -> Catalog:
    """`catalog` with only the named recipes (every one without names), as the core or the
    Dagster layer (asset keys) sees it; a recipe whose tokenizer a named one reads comes with
    its stages up to that tokenizer."""
    chosen = tuple(catalog.recipe(name) for name in dict.fromkeys(recipes or catalog.names))
    from tokenmill.storage.layout import TOKENIZER

    names = {d.prefix for d in chosen}
    owners = [
        name
        for name in dict.fromkeys(d.tokenizer_from for d in chosen if d.tokenizer_from)
        if name not in names
    ]
    left = tuple(item for item in catalog.left_out if not recipes or item[0] in recipes)
    if dagster:
        from tokenmill.data_assets.datasets import Catalog
    else:
        from tokenmill.recipes.catalog import Catalog

    dataset = Catalog.dataset_type
    return Catalog(
        dataset(catalog.shared.recipe),
        tuple(dataset(d.recipe, d.prefix, d.tokenizer_from) for d in chosen),
        left,
        tuple(dataset(catalog.recipe(name).recipe, name, until=TOKENIZER) for name in owners),
    )


def chosen_recipe(name: str | None, option: str = "--recipe") -> Dataset:
    """The named recipe; without a name, the only one there is."""
    return load_catalog().chosen(name, option)


def chosen_crawls(lake: Lake, names: list[str] | None) -> list[str]:
    """The named crawls (each must be registered), or every registered crawl."""
    from tokenmill.crawl.units import registered_crawls

    registered = registered_crawls(lake)
    unknown = [name for name in names or () if name not in registered]
    if unknown:
        valid = ", ".join(registered) or "none registered yet"
        raise UsageError(f"no registered crawl named {unknown[0]!r}; crawls: {valid}")
    return list(names or registered)


def registrable_crawl(lake: Lake, crawl: str) -> str:
    """A crawl with files to register: landed in the landing zone, or declared (`add-crawl`)."""
    from tokenmill.crawl.sources import CrawlSource
    from tokenmill.crawl.units import landed_crawls

    known = sorted({*landed_crawls(lake), *CrawlSource.declared_crawls(lake)})
    if crawl not in known:
        valid = ", ".join(known) or "none: land files in landing/<crawl>/ or use add-crawl"
        raise UsageError(f"no crawl named {crawl!r} landed or declared; crawls: {valid}")
    return crawl


def chosen_stages(names: list[str] | None) -> list[str] | None:
    """The named stages (each must exist), in lineage order; None for every stage."""
    if not names:
        return None
    from tokenmill.stages import STAGES

    known = [stage.name for stage in STAGES]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UsageError(f"no stage named {unknown[0]!r}; stages: {', '.join(known)}")
    return [name for name in known if name in names]
