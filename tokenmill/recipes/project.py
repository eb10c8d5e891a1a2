"""Where a project's settings come from: the shared settings file, the recipe files and the lake.

Each is taken, in this order, from its environment variable, from the project settings file
(`tokenmill.yaml` in the project folder, or the file TOKENMILL_SETTINGS names) or from the
project's defaults. Every command, the code location and the UI read them the same way, so
what `tokenmill status` prints is what every run uses; nothing depends on what the lake holds.

    # tokenmill.yaml (paths relative to this file)
    extraction: tokenmill/demo/extraction.yaml
    recipes: [resources/recipes, tokenmill/demo/recipes]
    lake: lake                     # a folder or s3://bucket/prefix
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from tokenmill import PROJECT_DIR, layer_folder

SETTINGS_ENV = "TOKENMILL_SETTINGS"
SETTINGS_FILE = "tokenmill.yaml"
RECIPES_ENV = "TOKENMILL_RECIPES"
SHARED_ENV = "TOKENMILL_EXTRACTION"
LAKE_ENV = "TOKENMILL_LAKE_URL"
RESOURCES = layer_folder("resources")
RECIPES_DIR = RESOURCES / "recipes"
SHARED_SETTINGS = RESOURCES / "extraction.yaml"
DEFAULT_LAKE = PROJECT_DIR / "lake"
# setting -> (environment variable, default)
SETTINGS = {
    "extraction": (SHARED_ENV, str(SHARED_SETTINGS)),
    "recipes": (RECIPES_ENV, str(RECIPES_DIR)),
    "lake": (LAKE_ENV, str(DEFAULT_LAKE)),
}


@dataclass(frozen=True)
class Setting:
    value: str
    source: str  # "TOKENMILL_RECIPES", "<path>/tokenmill.yaml" or "default"


@dataclass(frozen=True)
class ProjectSettings:
    file: Path  # the project settings file, whether it exists or not
    extraction: Setting
    recipes: Setting  # folders or files, separated by os.pathsep
    lake: Setting

    @property
    def recipe_locations(self) -> list[Path]:
        return [Path(entry) for entry in self.recipes.value.split(os.pathsep) if entry]

    def lines(self) -> list[str]:
        """What is in force and where each came from, for `tokenmill status`."""
        state = "" if self.file.is_file() else " (absent)"
        lines = [f"settings file  {self.file}{state}"]
        for name in SETTINGS:
            setting = getattr(self, name)
            lines.append(f"{name:14} {setting.value}  [{setting.source}]")
        return lines


def settings_file() -> Path:
    return Path(os.environ.get(SETTINGS_ENV) or PROJECT_DIR / SETTINGS_FILE)


def project_settings() -> ProjectSettings:
    """The settings in force now (read anew on each call: files are small)."""
    file = settings_file()
    given = _read(file)
    chosen = {}
    for name, (env, default) in SETTINGS.items():
        if os.environ.get(env):
            chosen[name] = Setting(os.environ[env], env)
        elif name in given:
            chosen[name] = Setting(_resolved(given[name], file, name), str(file))
        else:
            chosen[name] = Setting(default, "default")
    return ProjectSettings(file, **chosen)


def write_project_settings(**values: str | list[str] | None) -> Path:
    """Set these settings in the project settings file (None removes one; the others are
    kept)."""
    file = settings_file()
    given = {k: v for k, v in (_read(file) | values).items() if v is not None}
    unknown = set(given) - set(SETTINGS)
    if unknown:
        raise ValueError(f"{file}: unknown settings {sorted(unknown)}; known: {list(SETTINGS)}")
    text = "# tokenmill's project settings; an environment variable overrides each one\n"
    file.write_text(text + (yaml.safe_dump(given, sort_keys=False) if given else ""))
    return file


def _read(file: Path) -> dict:
    if not file.is_file():
        return {}
    try:
        data = yaml.safe_load(file.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ValueError(f"project settings {file}: {error}") from None
    if not isinstance(data, dict) or set(data) - set(SETTINGS):
        raise ValueError(
            f"project settings {file}: expected a mapping of {', '.join(SETTINGS)}; "
            f"found {sorted(data) if isinstance(data, dict) else type(data).__name__}"
        )
    return data


def _resolved(value, file: Path, name: str) -> str:
    """Paths relative to the settings file; a lake may also be a URL (s3://...)."""
    entries = value if isinstance(value, list) else [value]
    if not all(isinstance(entry, str) and entry for entry in entries):
        raise ValueError(f"project settings {file}: {name} must be a path or a list of paths")
    base = file.parent
    resolved = [entry if "://" in entry else os.path.normpath(base / entry) for entry in entries]
    return os.pathsep.join(resolved)
