"""The project's recipe as the tests see it: its assets' keys, its zones in a lake, and how
stale its assets' partitions are."""

from __future__ import annotations

from dagster import AssetKey, DagsterInstance
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest
from tokenmill.data_assets.datasets import Dataset

from tokenmill.recipes.recipe import DEFAULT_RECIPE, Recipe
from tokenmill.storage.lake import Lake

RECIPE = Dataset(Recipe.load(), DEFAULT_RECIPE.stem)


def key(name: str) -> AssetKey:
    """The asset key of a stage (or bridge) as the project's recipe has it."""
    return RECIPE.key(name)


def label(name: str) -> str:
    return key(name).to_user_string()


def built_stages() -> list:
    """The stages the project's own settings make (eval_index makes nothing while the shared
    settings declare no evaluation set)."""
    from tokenmill.stages import STAGES

    return [s for s in STAGES if not s.idle_with(s.settings() if s.settings else None)]


def recipe_lake(lake: Lake) -> Lake:
    """`lake` as the project's recipe's stages see it (their zones under recipes/)."""
    return RECIPE.lake(lake)


def variant(sections: dict, source: str) -> Recipe:
    """Another version of the project's recipe (same name, so the same assets)."""
    return Recipe(sections, source, name=RECIPE.prefix)


def node(name: str) -> str:
    """The name of a stage's op (or graph) in the project's recipe: its key's path, joined."""
    return "__".join(key(name).path)


def stale_status(defs, instance: DagsterInstance, asset: str, partition: str) -> StaleStatus:
    """The staleness of a partition of a stage's asset, as the UI computes it."""
    resolver = CachingStaleStatusResolver(
        instance, defs.resolve_asset_graph(), LoadingContextForTest(instance)
    )
    return resolver.get_status(key(asset), partition)
