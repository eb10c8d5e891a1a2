"""The recipe: the settings that define a dataset, in one versioned YAML file, applied to every
run however it starts (sensor, automation, backfill, launchpad).

Each stage's run config is generated from its core settings type (`tokenmill.stage`), with the
recipe's values as defaults: a run without config (every automated one) uses the recipe, and
the launchpad shows the recipe's values, which a run may override for itself (the override is
recorded in the run's metadata). The file is read when the code location loads; a section's
hash is part of the code version of the stages it configures, so changing the recipe makes
exactly those stages' partitions stale.

Sections are named after the settings type: `raw`, `extract`, `clean`, `dedup`, `tokenizer`,
`tokenize`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import typing
from pathlib import Path
from typing import Any

import yaml
from dagster import Config
from pydantic import Field, TypeAdapter, ValidationError, create_model

from tokenmill.stage import Stage, settings_fields

DEFAULT_RECIPE = Path(__file__).resolve().parents[1] / "resources" / "recipe.yaml"
RECIPE_ENV = "TOKENMILL_RECIPE"


class PluginFilter(Config):
    path: str = Field(description="Dotted path of a filter class or function, e.g. mylab.f.Spam")
    params: dict[str, str] = Field(
        default_factory=dict,
        description="Keyword arguments for a filter class; values are read as JSON when they "
        "parse (0.3, true, [1, 2]) and as strings otherwise",
    )


# Settings whose core type (plain data) needs a typed form in Dagster's config schema.
CONFIG_TYPES = {"plugin_filters": list[PluginFilter]}


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


@functools.cache
def _adapter(settings: type) -> TypeAdapter:
    return TypeAdapter(settings)


def section(settings: type) -> str:
    return settings.__name__.removesuffix("Settings").lower()


class Recipe:
    def __init__(self, sections: dict[str, dict[str, Any]], source: str):
        self.sections = sections
        self.source = source

    @classmethod
    def load(cls, path: str | Path | None = None) -> Recipe:
        path = Path(path or os.environ.get(RECIPE_ENV) or DEFAULT_RECIPE)
        data = yaml.safe_load(path.read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"recipe {path}: expected a mapping of sections")
        return cls(data, str(path))

    def values(self, settings: type) -> dict[str, Any]:
        given = dict(self.sections.get(section(settings)) or {})
        known = {name for name, *_ in settings_fields(settings)}
        unknown = set(given) - known
        if unknown:
            raise ValueError(
                f"recipe {self.source}: unknown settings {sorted(unknown)} in section "
                f"{section(settings)!r}; known: {sorted(known)}"
            )
        return given

    def settings(self, settings: type, overrides: dict[str, Any] | None = None) -> Any:
        """The core settings of a section, validated by the core type itself (names, rules)
        and by their annotations (types): an error names the recipe and the setting."""
        values = self.values(settings) | (overrides or {})
        try:
            settings(**values)
            return _adapter(settings).validate_python(values)
        except ValidationError as error:
            problems = "; ".join(
                f"{section(settings)}.{'.'.join(map(str, e['loc']))}: {e['msg']}"
                for e in error.errors()
            )
            raise ValueError(f"recipe {self.source}: {problems}") from None
        except (ValueError, TypeError) as error:
            raise ValueError(f"recipe {self.source}: {error}") from error

    def version(self, settings: type | None) -> str:
        if settings is None:
            return "none"
        values = dataclasses.asdict(self.settings(settings))
        return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[
            :12
        ]

    def config_class(self, stage: Stage) -> type[Config]:
        """The stage's run config: its settings' fields, with the recipe's values as defaults."""
        hints = typing.get_type_hints(stage.settings)
        defaults = dataclasses.asdict(self.settings(stage.settings))
        name = "".join(part.title() for part in stage.name.split("_")) + "Config"
        return config_model(name, stage.settings, hints, defaults)

    def overrides(self, settings: type, config: Config) -> dict[str, Any]:
        """The settings a run's config changes from the recipe (other config fields, such as
        how many steps run the stage, are not settings)."""
        given = config.model_dump()
        recipe = dataclasses.asdict(self.settings(settings))
        return {name: given[name] for name in recipe.keys() & given if recipe[name] != given[name]}
