"""The datasets of a project: the stages every recipe shares (reading, extraction), once,
and each recipe's own stages (filtering, deduplication, tokenization) as a dataset of its own,
side by side: the recipe's name prefixes their asset keys (`fineweb_en/cleaned`) and their lake
zones (`recipes/fineweb_en/cleaned/...`). A stage's code never sees which recipe it serves: it
runs on a view of the lake that maps its zones (`Lake.with_zones`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from tokenmill import stages as pipeline
from tokenmill.recipes.recipe import Recipe, load_recipes, load_shared, section
from tokenmill.runtime.stage import Stage
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import TOKENIZER

RECIPES_ZONE = "recipes"
# the attribute that marks a log record of a recipe file left out (the commands print those
# themselves, and drop the records)
RECIPE_PROBLEM = "tokenmill_recipe_problem"


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
    """The stages one recipe configures (or, without a prefix, the shared ones). A recipe that
    uses the deployment's tokenizer names the recipe whose tokenizer that is
    (`tokenizer_from`): it has no tokenizer asset of its own, and reads that one."""

    recipe: Recipe
    prefix: str | None = None
    tokenizer_from: str | None = None
    # The last stage it has, for a recipe taken in only to train the tokenizer another reads
    # (`Catalog.lenders`); None: every stage.
    until: str | None = None

    @property
    def stages(self) -> list[Stage]:
        return [stage for stage in pipeline.STAGES if self.has(stage)]

    def key_path(self, name: str) -> list[str]:
        """The asset key of a stage (or of a bridge asset) as this dataset sees it, as a path."""
        if self.prefix is None or name in shared_assets():
            return [name]
        if name == TOKENIZER and self.tokenizer_from:
            return [self.tokenizer_from, name]
        return [self.prefix, name]

    def has(self, stage: Stage) -> bool:
        """Whether this dataset has an asset for `stage`."""
        if self.prefix is None:
            return stage.shared
        if self.until is not None and _position(stage.name) > _position(self.until):
            return False
        return not stage.shared and not (stage.name == TOKENIZER and self.tokenizer_from)

    def key_text(self, name: str) -> str:
        """The asset key as the UI and the command line print it (`fineweb_en/cleaned`)."""
        return "/".join(self.key_path(name))

    def lake(self, lake: Lake) -> Lake:
        if not self.prefix:
            return lake
        zones = recipe_zones(self.prefix)
        if self.tokenizer_from:
            zones[TOKENIZER] = recipe_zones(self.tokenizer_from)[TOKENIZER]
        return lake.with_zones(zones)

    def op_name(self, name: str) -> str:
        return f"{self.prefix}__{name}" if self.prefix else name


def _position(name: str) -> int:
    return [stage.name for stage in pipeline.STAGES].index(name)


class UnknownRecipeError(ValueError):
    """A recipe name that is not among the valid recipes: the message says why (left out,
    and what is wrong with its file) and names the valid ones."""


@dataclass(frozen=True)
class Catalog:
    """The shared stages, every valid recipe's dataset, and why any recipe file was left out."""

    shared: Dataset
    recipes: tuple[Dataset, ...]
    left_out: tuple[tuple[str, str], ...] = field(default=())  # (recipe name, why)
    # Recipes not chosen whose tokenizer a chosen one reads: their stages up to it
    # (`Dataset.until`), so that a run of the chosen recipes makes it.
    lenders: tuple[Dataset, ...] = field(default=())
    dataset_type: ClassVar[type[Dataset]] = Dataset

    @classmethod
    def of(cls, recipes: list[Recipe], shared: Recipe | None = None, left_out=()) -> Catalog:
        shared = shared or load_shared(_shared_settings())
        left_out = list(left_out)
        valid = []
        for recipe in recipes:
            try:
                valid.append(_check_evaluation_sets(_check_classifiers(recipe, shared), shared))
            except ValueError as error:
                left_out.append((recipe.name, str(error)))
        dataset = cls.dataset_type
        datasets = []
        for recipe, tokenizer_from in _tokenizers(valid, shared, left_out):
            datasets.append(dataset(recipe, recipe.name, tokenizer_from))
        return cls(dataset(shared), tuple(datasets), tuple(left_out))

    @classmethod
    def load(cls, recipes: str | Path | None = None, shared: str | Path | None = None) -> Catalog:
        """The recipes and the shared settings the project's settings name
        (`tokenmill.recipes.project`), or these."""
        found, left_out = load_recipes(_recipe_settings(), recipes)
        return cls.of(found, load_shared(_shared_settings(), shared), left_out)

    @property
    def problems(self) -> tuple[str, ...]:
        """Why each recipe file was left out, naming the file and the key."""
        return tuple(why for _, why in self.left_out)

    @property
    def names(self) -> list[str]:
        return [dataset.prefix for dataset in self.recipes]

    @property
    def datasets(self) -> tuple[Dataset, ...]:
        return (self.shared, *self.recipes, *self.lenders)

    def serving(self, stage: Stage) -> tuple[Dataset, ...]:
        """The datasets that have an asset for `stage`."""
        return tuple(dataset for dataset in self.datasets if dataset.has(stage))

    def idle(self, stage: Stage) -> bool:
        """Whether the settings of every dataset that has `stage` leave it nothing to make
        (`Stage.idle`): it is then never launched, nor listed as missing."""
        if stage.idle is None or not stage.settings:
            return False
        return all(
            stage.idle_with(dataset.recipe.settings(stage.settings))
            for dataset in self.serving(stage)
        )

    def recipe(self, name: str) -> Dataset:
        for dataset in self.recipes:
            if dataset.prefix == name:
                return dataset
        valid = ", ".join(self.names) or "none"
        for left, why in self.left_out:
            if left == name:
                raise UnknownRecipeError(
                    f"recipe {name!r} was left out: {why} (valid recipes: {valid})"
                )
        raise UnknownRecipeError(f"no recipe named {name!r}; recipes: {valid}")

    def chosen(self, name: str | None, option: str = "--recipe") -> Dataset:
        """The named recipe; without a name, the only one there is."""
        if name:
            return self.recipe(name)
        if len(self.recipes) != 1:
            valid = ", ".join(self.names) or "none"
            raise UnknownRecipeError(f"name a recipe with {option} (recipes: {valid})")
        return self.recipes[0]


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


def _check_evaluation_sets(recipe: Recipe, shared: Recipe) -> Recipe:
    """A recipe that decontaminates against sets the shared evaluation section declares."""
    from tokenmill.stages.cleaned import CleanSettings
    from tokenmill.stages.eval_index import EvaluationSettings

    declared = [s.name for s in shared.settings(EvaluationSettings).declared()]
    wanted = recipe.settings(CleanSettings).decontamination().sets
    unknown = [name for name in wanted if name not in declared]
    if unknown:
        raise ValueError(
            f"recipe {recipe.source}: clean.decontaminate.sets: {unknown} are not declared in "
            f"the shared settings' evaluation section ({shared.source}); declared: {declared}"
        )
    return recipe


def _tokenizers(
    recipes: list[Recipe], shared: Recipe, left_out: list[tuple[str, str]]
) -> list[tuple[Recipe, str | None]]:
    """Each recipe, and the recipe whose tokenizer it uses when not its own (appending to
    `left_out` the recipes that cannot have one). With a `tokenizer:` section in the shared
    settings, every recipe whose tokenizer section is absent, or holds the same settings, uses
    the deployment's tokenizer: the tokenizer asset of the recipe the section names (by default
    the first of them by name), made with the section's settings. Without one, each recipe has
    its own."""
    from tokenmill.tokens.tokenization import DeploymentTokenizerSettings, TokenizerSettings

    if section(DeploymentTokenizerSettings) not in shared.sections:
        return [(recipe, None) for recipe in recipes]
    deployment = shared.settings(DeploymentTokenizerSettings)
    own = deployment.own()
    name = section(TokenizerSettings)
    users = [
        r
        for r in recipes
        if name not in r.sections or dataclasses.asdict(r.settings(TokenizerSettings)) == own
    ]
    owner = deployment.recipe or min((r.name for r in users), default=None)
    if owner is not None and owner not in {r.name for r in users}:
        why = (
            f"the shared settings ({shared.source}) train the deployment's tokenizer on recipe "
            f"{owner!r} (tokenizer.recipe), which "
            + (
                "has a tokenizer of its own"
                if owner in {r.name for r in recipes}
                else "is not a valid recipe"
            )
        )
        left_out += [(r.name, f"recipe {r.source}: {why}") for r in users]
        return [(recipe, None) for recipe in recipes if recipe not in users]
    chosen = []
    for recipe in recipes:
        if recipe not in users:
            chosen.append((recipe, None))
        elif recipe.name == owner:
            sections = recipe.sections | {name: {k: v for k, v in own.items() if v is not None}}
            chosen.append((Recipe(sections, recipe.source, recipe.name), None))
        else:
            chosen.append((recipe, owner))
    return chosen


def _recipe_settings() -> list[type]:
    return [stage.settings for stage in recipe_stages() if stage.settings]


def _shared_settings() -> list[type]:
    from tokenmill.tokens.tokenization import DeploymentTokenizerSettings

    return [stage.settings for stage in shared_stages() if stage.settings] + [
        DeploymentTokenizerSettings
    ]
