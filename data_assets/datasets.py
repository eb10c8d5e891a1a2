"""The project's datasets (`tokenmill.recipes.catalog`) as Dagster sees them: asset keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dagster import AssetKey

from tokenmill.recipes import catalog as core
from tokenmill.recipes.catalog import RECIPES_ZONE, recipe_stages, recipe_zones, shared_stages
from tokenmill.runtime.stage import Stage

__all__ = ["RECIPES_ZONE", "Catalog", "Dataset", "recipe_stages", "recipe_zones", "shared_stages"]


@dataclass(frozen=True)
class Dataset(core.Dataset):
    def key(self, name: str) -> AssetKey:
        """The asset key of a stage (or of a bridge asset) as this dataset sees it."""
        return AssetKey(self.key_path(name))


@dataclass(frozen=True)
class Catalog(core.Catalog):
    dataset_type: ClassVar[type[core.Dataset]] = Dataset

    def keys(self, stage: Stage) -> list[AssetKey]:
        return [dataset.key(stage.name) for dataset in self.serving(stage)]
