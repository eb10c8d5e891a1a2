"""Recipes: the settings that define a dataset, one versioned YAML file each, applied to every
run however it starts (sensor, automation, backfill, launchpad).

Every recipe file in the recipes folder (`resources/recipes/`, or the folder or single file
TOKENMILL_RECIPES names) is a dataset of its own: its filtering, deduplication and tokenization
assets under its name (`<name>/cleaned`, ...), built from the extraction every recipe shares.
The shared stages' settings (`raw`, `extract`) are in `resources/extraction.yaml`
(TOKENMILL_EXTRACTION): changing them re-extracts the corpus for every recipe.

Each stage's run config is generated from its core settings type (`tokenmill.runtime.stage`), with
the recipe's values as defaults: a run without config (every automated one) uses the recipe, and
the launchpad shows the recipe's values, which a run may override for itself (the override is
recorded in the run's metadata). The files are read when the code location loads; a section's
hash is part of the code version of the stages it configures, so changing a recipe makes
exactly its stages' partitions stale. A file that fails validation is reported (naming the file
and the key) and left out; the other recipes load and run.

Sections are named after the settings type: `raw`, `extract`, `clean`, `dedup`, `tokenizer`,
`tokenize`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from tokenmill.recipes.project import (
    RECIPES_DIR,
    SHARED_ENV,
    SHARED_SETTINGS,
    project_settings,
)
from tokenmill.runtime.stage import settings_fields

DEFAULT_RECIPE = RECIPES_DIR / "fineweb_en.yaml"
RECIPE_FILE_SUFFIXES = (".yaml", ".yml")
# A recipe's name is an asset key prefix, a lake folder and part of job and op names.
RECIPE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")


@functools.cache
def _adapter(settings: type) -> TypeAdapter:
    return TypeAdapter(settings)


def section(settings: type) -> str:
    """The section a settings type is read from: its own name (`CleanSettings`: `clean`), or
    the name it declares (`SECTION`)."""
    return getattr(settings, "SECTION", None) or settings.__name__.removesuffix("Settings").lower()


class Recipe:
    def __init__(self, sections: dict[str, dict[str, Any]], source: str, name: str | None = None):
        self.sections = sections
        self.source = source
        self.name = name or Path(source).stem

    @classmethod
    def load(cls, path: str | Path | None = None) -> Recipe:
        """A recipe file (by default the project's own recipe)."""
        path = Path(path or DEFAULT_RECIPE)
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as error:
            raise ValueError(f"recipe {path}: not YAML: {error}") from None
        except OSError as error:
            raise ValueError(f"recipe {path}: {error.strerror or error}") from None
        if not isinstance(data, dict):
            raise ValueError(f"recipe {path}: expected a mapping of sections")
        return cls(data, str(path))

    def validate(self, settings_types: list[type], elsewhere: str = "") -> Recipe:
        """Raise ValueError naming the file and the key unless every section is one of
        `settings_types`' and holds valid settings (`elsewhere`: where the other sections
        belong, for the message)."""
        if not RECIPE_NAME.match(self.name):
            raise ValueError(
                f"recipe {self.source}: name {self.name!r} is not lower-case letters, digits "
                "and '_' starting with a letter (at most 48): it prefixes asset keys"
            )
        known = {section(t): t for t in settings_types}
        for name in self.sections:
            if name not in known:
                hint = f" ({elsewhere})" if elsewhere else ""
                raise ValueError(
                    f"recipe {self.source}: unknown section {name!r}{hint}; "
                    f"sections: {sorted(known)}"
                )
            if not isinstance(self.sections[name] or {}, dict):
                raise ValueError(f"recipe {self.source}: section {name!r} is not a mapping")
        for settings in known.values():
            self.settings(settings)
        return self

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
            where = section(settings)
            said = str(error) if str(error).startswith(f"{where}.") else f"{where}: {error}"
            raise ValueError(f"recipe {self.source}: {said}") from error

    def version(self, settings: type | None) -> str:
        if settings is None:
            return "none"
        chosen = self.settings(settings)
        values = dataclasses.asdict(chosen)
        # settings that take values from data shipped with tokenmill (the language defaults)
        # say which: new data makes what they built stale
        shipped = getattr(chosen, "defaults_version", None)
        if shipped and (found := shipped()):
            values["defaults_version"] = found
        return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[
            :12
        ]


def recipe_files(location: str | Path | None = None) -> list[Path]:
    """The recipe files of the folders (or files) named by `location`, or by the project's
    settings (`tokenmill.recipes.project`); several are separated by os.pathsep (':')."""
    given = str(location or project_settings().recipes.value)
    files = []
    for entry in filter(None, given.split(os.pathsep)):
        path = Path(entry)
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += sorted(
                p for p in path.iterdir() if p.suffix in RECIPE_FILE_SUFFIXES and p.is_file()
            )
        else:
            raise ValueError(f"recipes: {path} is neither a recipe file nor a folder of them")
    return files


def load_recipes(
    settings_types: list[type], location: str | Path | None = None
) -> tuple[list[Recipe], list[tuple[str, str]]]:
    """The valid recipes of the recipes folder, and (recipe name, problem naming the file and
    the key) for each one left out: a file that fails validation, or two files with one name."""
    recipes, problems = [], []
    for path in recipe_files(location):
        try:
            recipes.append(Recipe.load(path).validate(settings_types, SHARED_HINT))
        except ValueError as error:
            problems.append((path.stem, str(error)))
    by_name: dict[str, list[Recipe]] = {}
    for recipe in recipes:
        by_name.setdefault(recipe.name, []).append(recipe)
    for name, same in by_name.items():
        if len(same) > 1:
            files = ", ".join(r.source for r in same)
            problems.append((name, f"recipes {files}: one name, {name!r}, for {len(same)} recipes"))
    return [r for r in recipes if len(by_name[r.name]) == 1], problems


SHARED_HINT = f"the shared stages' sections are in {SHARED_SETTINGS.name} ({SHARED_ENV})"


def load_shared(settings_types: list[type], path: str | Path | None = None) -> Recipe:
    """The settings of the stages every recipe shares (reading and extraction)."""
    path = Path(path or project_settings().extraction.value)
    shared = Recipe.load(path)
    shared.name = "shared"
    return shared.validate(settings_types, "a recipe's sections are in the recipes folder")
