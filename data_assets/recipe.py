"""Recipes as Dagster sees them: each stage's run config, generated from its core settings type
(`tokenmill.runtime.stage`) with the recipe's values as defaults. A run without config (every
automated one) uses the recipe; the launchpad shows the recipe's values, which a run may
override for itself (the override is recorded in the run's metadata). Reading and validating
recipe files is the core's (`tokenmill.recipes`)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from dagster import Config
from pydantic import Field, create_model

from tokenmill.recipes.recipe import Recipe
from tokenmill.runtime.stage import Stage, settings_fields


class PluginFilter(Config):
    path: str = Field(description="Dotted path of a filter class or function, e.g. mylab.f.Spam")
    params: dict[str, str] = Field(
        default_factory=dict,
        description="Keyword arguments for a filter class; values are read as JSON when they "
        "parse (0.3, true, [1, 2]) and as strings otherwise",
    )


class ClassifierDeclaration(Config):
    name: str = Field(description="The classifier's name: its scores are <name>.<label>")
    model: str | None = Field(
        default=None, description="fastText model: a lake key, or a path or URI allowed"
    )
    scorer: str | None = Field(default=None, description="Dotted path of a plug-in scorer")
    labels: list[str] = Field(default_factory=list, description="Labels to store (default all)")
    params: dict[str, str] = Field(default_factory=dict, description="A scorer's arguments")
    sha256: str | None = Field(default=None, description="The model's SHA-256, pinned")


class ClassifierRule(Config):
    classifier: str = Field(description="A declared classifier")
    label: str = Field(description="The label whose probability is judged")
    min: float | None = Field(default=None, description="Keep at this probability or more")
    keep_top: float | None = Field(
        default=None, description="Keep this share of the crawl's documents, the best scored"
    )


# Settings whose core type (plain data) needs a typed form in Dagster's config schema.
CONFIG_TYPES = {
    "plugin_filters": list[PluginFilter],
    "classifiers": list[ClassifierDeclaration],
    "classifier_rules": list[ClassifierRule],
}


def config_model(name: str, settings: type, hints: dict, defaults: dict) -> type[Config]:
    """A Dagster config class of a settings dataclass, with `defaults` (the recipe's values)
    and the fields' descriptions; a field that holds settings of its own (a filter's
    thresholds) becomes a nested form."""
    fields = {}
    for field, kind, _, description in settings_fields(settings):
        if dataclasses.is_dataclass(hints[field]):
            kind = config_model(
                hints[field].__name__ + "Config",
                hints[field],
                typing.get_type_hints(hints[field]),
                defaults[field],
            )
            default = Field(default_factory=kind, description=description)
        else:
            kind = CONFIG_TYPES.get(field, hints[field])
            default = Field(default=defaults[field], description=description)
        fields[field] = (kind, default)
    return create_model(name, __base__=Config, **fields)


def run_config_class(recipe: Recipe, stage: Stage) -> type[Config]:
    """The stage's run config: its settings' fields, with the recipe's values as defaults."""
    hints = typing.get_type_hints(stage.settings)
    defaults = dataclasses.asdict(recipe.settings(stage.settings))
    name = "".join(part.title() for part in stage.name.split("_")) + "Config"
    return config_model(name, stage.settings, hints, defaults)


def config_overrides(recipe: Recipe, settings: type, config: Config) -> dict[str, Any]:
    """The settings a run's config changes from the recipe (other config fields, such as
    how many steps run the stage, are not settings)."""
    given = _without_nulls(config.model_dump())
    wanted = _without_nulls(dataclasses.asdict(recipe.settings(settings)))
    return {name: given[name] for name in wanted.keys() & given if wanted[name] != given[name]}


def _without_nulls(value: Any) -> Any:
    """Values as a recipe writes them: a config form's unset optional keys (None) left out of
    the mappings in lists (a classifier rule gives min or keep_top, not both)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [
            {k: _without_nulls(v) for k, v in item.items() if v is not None}
            if isinstance(item, dict)
            else _without_nulls(item)
            for item in value
        ]
    return value
