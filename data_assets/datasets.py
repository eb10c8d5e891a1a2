"""What the code location serves: the stages every recipe shares (reading, extraction), once,
and each recipe's own stages (filtering, deduplication, tokenization) as a dataset of its own,
side by side: the recipe's name prefixes their asset keys (`fineweb_en/cleaned`) and their lake
zones (`recipes/fineweb_en/cleaned/...`). A stage's code never sees which recipe it serves: it
runs on a view of the lake that maps its zones (`Lake.with_zones`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dagster import AssetKey
from tokenmill.data_assets.recipe import Recipe, load_recipes, load_shared

from tokenmill import stages as pipeline
from tokenmill.runtime.stage import Stage
from tokenmill.storage.lake import Lake

RECIPES_ZONE = "recipes"


# Read from the stage list when called (not at import), as a new stage module may extend it.
def shared_stages() -> list[Stage]:
    return [stage for stage in pipeline.STAGES if stage.shared]


def recipe_stages() -> list[Stage]:
    return [stage for stage in pipeline.STAGES if not stage.shared]


def shared_assets() -> set[str]:
    """Assets built once for all recipes: the shared stages, their crawl boundaries' bridges
    and the crawls' unit lists."""
    names = {"crawl_units"}
    for stage in shared_stages():
        names.add(stage.name)
        if stage.boundary:
            names |= {stage.boundary.gathered, stage.boundary.reported} - {None}
    return names


def recipe_zones(name: str) -> dict[str, str]:
    """Where a recipe's stages keep their output in the lake."""
    zones = [zone for stage in recipe_stages() for zone in (stage.name, *stage.work_zones)]
    return {zone: f"{RECIPES_ZONE}/{name}/{zone}" for zone in zones}


@dataclass(frozen=True)
class Dataset:
    """The stages one recipe configures (or, without a prefix, the shared ones)."""

    recipe: Recipe
    prefix: str | None = None

    @property
    def stages(self) -> list[Stage]:
        return recipe_stages() if self.prefix else shared_stages()

    def key(self, name: str) -> AssetKey:
        """The asset key of a stage (or of a bridge asset) as this dataset sees it."""
        if self.prefix is None or name in shared_assets():
            return AssetKey(name)
        return AssetKey([self.prefix, name])

    def lake(self, lake: Lake) -> Lake:
        return lake.with_zones(recipe_zones(self.prefix)) if self.prefix else lake

    def op_name(self, name: str) -> str:
        return f"{self.prefix}__{name}" if self.prefix else name


@dataclass(frozen=True)
class Catalog:
    """The shared stages, every valid recipe's dataset, and why any recipe file was left out."""

    shared: Dataset
    recipes: tuple[Dataset, ...]
    problems: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, recipes: list[Recipe], shared: Recipe | None = None, problems=()) -> Catalog:
        shared = shared or load_shared(_shared_settings())
        problems = list(problems)
        valid = []
        for recipe in recipes:
            try:
                valid.append(_check_classifiers(recipe, shared))
            except ValueError as error:
                problems.append(str(error))
        return cls(Dataset(shared), tuple(Dataset(r, r.name) for r in valid), tuple(problems))

    @classmethod
    def load(cls, recipes: str | Path | None = None, shared: str | Path | None = None) -> Catalog:
        """The recipes folder (TOKENMILL_RECIPES) and the shared settings (TOKENMILL_EXTRACTION)."""
        found, problems = load_recipes(_recipe_settings(), recipes)
        return cls.of(found, load_shared(_shared_settings(), shared), problems)

    @property
    def datasets(self) -> tuple[Dataset, ...]:
        return (self.shared, *self.recipes)

    def serving(self, stage: Stage) -> tuple[Dataset, ...]:
        """The datasets that have an asset for `stage`."""
        return (self.shared,) if stage.shared else self.recipes

    def keys(self, stage: Stage) -> list[AssetKey]:
        return [dataset.key(stage.name) for dataset in self.serving(stage)]

    def recipe(self, name: str) -> Dataset:
        for dataset in self.recipes:
            if dataset.prefix == name:
                return dataset
        raise KeyError(f"no recipe named {name!r}; recipes: {[d.prefix for d in self.recipes]}")


def _check_classifiers(recipe: Recipe, shared: Recipe) -> Recipe:
    """A recipe whose classifier rules name classifiers (and labels) the shared score section
    declares."""
    from tokenmill.classifiers.scoring import short_label
    from tokenmill.stages.cleaned import CleanSettings
    from tokenmill.stages.scored import ScoreSettings

    declared = {c.name: c for c in shared.settings(ScoreSettings).declared()}
    rules = recipe.settings(CleanSettings).score_rules()
    for index, rule in enumerate(rules):
        where = f"recipe {recipe.source}: clean.classifier_rules[{index}]"
        classifier = declared.get(rule.classifier)
        if classifier is None:
            raise ValueError(
                f"{where}: classifier {rule.classifier!r} is not declared in the shared "
                f"settings' score section ({shared.source}); declared: {sorted(declared)}"
            )
        labels = [short_label(label) for label in classifier.labels]
        if labels and rule.label not in labels:
            raise ValueError(
                f"{where}: classifier {rule.classifier} stores no label {rule.label!r}; "
                f"declared labels: {labels}"
            )
    return recipe


def _recipe_settings() -> list[type]:
    return [stage.settings for stage in recipe_stages() if stage.settings]


def _shared_settings() -> list[type]:
    return [stage.settings for stage in shared_stages() if stage.settings]
