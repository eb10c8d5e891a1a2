"""The settings every command uses come from one place the user can see: the environment, else
the project settings file, else the project's defaults; never from what the lake holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenmill.cli.main import main as cli
from tokenmill.recipes.catalog import Catalog
from tokenmill.recipes.project import (
    RECIPES_DIR,
    SHARED_SETTINGS,
    project_settings,
    write_project_settings,
)

DEMO = Path(__file__).resolve().parents[1] / "tokenmill" / "demo"


@pytest.fixture
def settings_file(tmp_path, monkeypatch) -> Path:
    file = tmp_path / "project" / "tokenmill.yaml"
    file.parent.mkdir()
    monkeypatch.setenv("TOKENMILL_SETTINGS", str(file))
    for env in ("TOKENMILL_EXTRACTION", "TOKENMILL_RECIPES", "TOKENMILL_LAKE_URL"):
        monkeypatch.delenv(env, raising=False)
    return file


def test_without_a_file_the_projects_defaults(settings_file):
    settings = project_settings()
    assert settings.extraction.value == str(SHARED_SETTINGS)
    assert settings.recipes.value == str(RECIPES_DIR)
    assert {s.source for s in (settings.extraction, settings.recipes, settings.lake)} == {"default"}


def test_the_file_names_paths_relative_to_itself_and_the_environment_wins(
    settings_file, monkeypatch, tmp_path
):
    settings_file.write_text("extraction: shared.yaml\nrecipes: [a, /abs/b]\nlake: s3://b/p\n")
    settings = project_settings()
    assert settings.extraction.value == str(settings_file.parent / "shared.yaml")
    assert settings.recipe_locations == [settings_file.parent / "a", Path("/abs/b")]
    assert settings.lake.value == "s3://b/p" and settings.lake.source == str(settings_file)
    monkeypatch.setenv("TOKENMILL_RECIPES", str(tmp_path / "mine"))
    assert project_settings().recipes.source == "TOKENMILL_RECIPES"
    assert project_settings().recipes.value == str(tmp_path / "mine")


def test_writing_keeps_the_other_settings_and_none_removes_one(settings_file):
    write_project_settings(lake="/data/lake", extraction="x.yaml")
    write_project_settings(extraction=None)
    assert "lake: /data/lake" in settings_file.read_text()
    assert project_settings().extraction.source == "default"


@pytest.mark.parametrize(
    "text, says",
    [
        ("recipes: [1, 2]\n", "recipes must be a path or a list of paths"),
        ("recipe: r\n", "expected a mapping of extraction, recipes, lake; found ['recipe']"),
        ("- a\n", "expected a mapping of extraction, recipes, lake; found list"),
    ],
)
def test_a_bad_settings_file_is_named_with_what_is_wrong(settings_file, text, says):
    settings_file.write_text(text)
    with pytest.raises(ValueError, match=str(settings_file)) as error:
        project_settings()
    assert says in str(error.value)


def test_a_classifier_in_the_lake_changes_no_settings(settings_file, tmp_path, monkeypatch):
    """The demo's classifier trained in the lake used to switch every command to the demo's
    settings; now only the settings file does."""
    lake = tmp_path / "lake"
    (lake / "classifiers" / "demo_quality").mkdir(parents=True)
    (lake / "classifiers" / "demo_quality" / "card.json").write_text("{}")
    monkeypatch.setenv("TOKENMILL_LAKE_URL", str(lake))
    assert Catalog.load().names == ["fineweb_en"]
    settings_file.write_text(
        f"extraction: {DEMO / 'extraction.yaml'}\nrecipes: [{RECIPES_DIR}, {DEMO / 'recipes'}]\n"
    )
    assert Catalog.load().names == ["fineweb_en", "demo_top_quality"]


def test_status_prints_the_settings_in_force_and_where_each_comes_from(
    settings_file, tmp_path, monkeypatch, capsys
):
    settings_file.write_text(f"extraction: {DEMO / 'extraction.yaml'}\n")
    monkeypatch.setenv("TOKENMILL_LAKE_URL", str(tmp_path / "lake"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    cli(["status"])
    out = capsys.readouterr().out
    assert f"settings file  {settings_file}\n" in out
    assert f"extraction     {DEMO / 'extraction.yaml'}  [{settings_file}]" in out
    assert f"recipes        {RECIPES_DIR}  [default]" in out
    assert f"lake           {tmp_path / 'lake'}  [TOKENMILL_LAKE_URL]" in out
    cleaned = next(line for line in out.splitlines() if line.startswith("fineweb_en/cleaned "))
    assert cleaned.split() == [
        "fineweb_en/cleaned",
        "0",
        "0",
        "0",
        "0",
        "no",
        "partitions",
        *["yet:", "register", "a", "crawl"],
    ]
    # an empty instance: the evaluation sets' index, the tokenizer and the release are missing
    assert "tokenmill run would launch 3 runs" in out
