"""Recipes side by side: each recipe file a dataset with its own asset keys and lake zones,
bad recipe files reported without taking the others down, outputs kept until removed."""

from __future__ import annotations

import pytest
from dagster import AssetKey, build_sensor_context
from tokenmill.data_assets.datasets import Catalog, Dataset, recipe_zones
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource

from tokenmill.cli.main import main as cli
from tokenmill.definitions import build_definitions
from tokenmill.recipes.recipe import DEFAULT_RECIPE, Recipe
from tokenmill.storage.lake import Lake

GOOD = DEFAULT_RECIPE.read_text()
BAD = {
    "unknown_key.yaml": ("clean:\n  gopher_quality:\n    min_words: 40\n", "min_words"),
    "wrong_type.yaml": ("clean:\n  min_language_score: high\n", "clean.min_language_score"),
    "out_of_range.yaml": (
        "clean:\n  fineweb_quality:\n    line_punct_thr: 1.5\n",
        "clean.fineweb_quality.line_punct_thr",
    ),
    "unknown_section.yaml": ("cleaning:\n  keep_languages: [de]\n", "'cleaning'"),
    "shares_extraction.yaml": ("extract:\n  extractor: trafilatura\n", "extraction.yaml"),
    "Capitals.yaml": ("clean: {}\n", "'Capitals'"),
    "not_yaml.yaml": ("clean: [\n", "not YAML"),
}


def test_a_lake_view_keeps_a_recipes_zones_in_its_folder(tmp_path):
    lake = Lake.from_url(str(tmp_path / "lake"))
    view = lake.with_zones(recipe_zones("lab"))
    view.write_bytes("cleaned/C/00000/00000/docs.parquet", b"kept")
    view.write_bytes("extracted/C/00000/00000/docs.parquet", b"shared")
    assert lake.exists("recipes/lab/cleaned/C/00000/00000/docs.parquet")
    assert not lake.exists("cleaned/C/00000/00000/docs.parquet")
    assert lake.exists("extracted/C/00000/00000/docs.parquet")  # shared: where it is
    assert view.list("cleaned") == ["cleaned/C/00000/00000/docs.parquet"]
    assert view.list_after("cleaned", "", 10) == ["cleaned/C/00000/00000/docs.parquet"]
    assert view.read_bytes("cleaned/C/00000/00000/docs.parquet") == b"kept"
    assert view.uri("cleaned/C") == f"{lake.url}/recipes/lab/cleaned/C"
    # a recipe's transient work is its own too: two recipes never delete each other's parts
    other = lake.with_zones(recipe_zones("other"))
    assert view.stored_key("_dedup_clusters_parts/C") == "recipes/lab/_dedup_clusters_parts/C"
    assert other.stored_key("_dedup_clusters_parts/C") != view.stored_key("_dedup_clusters_parts/C")
    view.delete_prefix("cleaned/C")
    assert lake.list("recipes") == [] and lake.exists("extracted/C/00000/00000/docs.parquet")


@pytest.fixture
def recipes(tmp_path, monkeypatch):
    """A recipes folder with the project's recipe, a second good one, and every kind of bad
    file."""
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "fineweb_en.yaml").write_text(GOOD)
    (folder / "any_language.yaml").write_text("clean:\n  keep_languages: []\n")
    for name, (text, _) in BAD.items():
        (folder / name).write_text(text)
    (folder / "twin.yaml").write_text("clean: {}\n")
    (folder / "twin.yml").write_text("dedup: {}\n")
    (folder / "notes.txt").write_text("not a recipe")
    monkeypatch.setenv("TOKENMILL_RECIPES", str(folder))
    return folder


def test_a_bad_recipe_file_is_reported_naming_the_file_and_key(recipes):
    catalog = Catalog.load()
    assert [d.prefix for d in catalog.recipes] == ["any_language", "fineweb_en"]
    problems = catalog.problems
    assert len(problems) == len(BAD) + 1
    for name, (_, key) in BAD.items():
        (problem,) = [p for p in problems if f"{recipes / name}:" in p]
        assert key in problem, problem
    (twins,) = [p for p in problems if "twin" in p]
    assert str(recipes / "twin.yaml") in twins and str(recipes / "twin.yml") in twins


def test_the_other_recipes_load_and_the_bad_ones_show_in_the_ui(recipes, tmp_path):
    defs = build_definitions(
        LakeResource(url=str(tmp_path / "lake")), workers=WorkersResource(processes=1)
    )
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"raw_crawl", "extracted", "fineweb_en/cleaned", "any_language/tokenized_shards"} <= keys
    assert not [k for k in keys if k.split("/")[0] in ("twin", "unknown_key", "Capitals")]
    # one job and one automation sensor per stage, whatever the number of recipes
    cleaned = defs.resolve_job_def("run_cleaned")
    assert {k.to_user_string() for k in cleaned.asset_layer.selected_asset_keys} == {
        "fineweb_en/cleaned",
        "any_language/cleaned",
    }
    sensor = defs.resolve_sensor_def("recipe_problems")
    with pytest.raises(Exception, match="recipe file") as failed:
        sensor.evaluate_tick(build_sensor_context())
    assert "min_words" in str(failed.value) and "out_of_range.yaml" in str(failed.value)
    any_language = defs.resolve_assets_def(AssetKey(["any_language", "cleaned"]))
    cleaned = AssetKey(["any_language", "cleaned"])
    assert any_language.group_names_by_key[cleaned] == "any_language/3_clean"


def test_valid_recipes_make_no_problem_sensor(tmp_path):
    defs = build_definitions(
        LakeResource(url=str(tmp_path / "lake")),
        recipes=[Recipe.load(), Recipe({}, "lab.yaml")],
    )
    assert "recipe_problems" not in {s.name for s in defs.sensors}
    crawl_sensor = defs.resolve_sensor_def("crawl_signatures_complete")
    assert crawl_sensor.name == "crawl_signatures_complete"


def test_recipes_command_lists_problems_and_removes_only_deleted_recipes(
    recipes, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("TOKENMILL_LAKE_URL", str(tmp_path / "lake"))
    lake = Lake.from_url(str(tmp_path / "lake"))
    for name in ("any_language", "gone"):
        Dataset(Recipe({}, name), name).lake(lake).write_bytes("cleaned/C/x", b"kept")
    with pytest.raises(SystemExit) as exit_:
        cli(["recipes"])
    assert exit_.value.code == 1
    out, err = capsys.readouterr()
    assert "any_language" in out and f"{recipes / 'any_language.yaml'}" in out
    assert "gone" in out and "tokenmill recipes --remove gone" in out
    assert "recipe files left out" in err and "min_words" in err

    with pytest.raises(SystemExit):  # its file is still there
        cli(["recipes", "--remove", "any_language"])
    assert "delete its file first" in capsys.readouterr().err
    cli(["recipes", "--remove", "gone"])
    assert lake.list("recipes/gone") == [] and lake.list("recipes/any_language") != []
    with pytest.raises(SystemExit):
        cli(["recipes", "--remove", "gone"])
    assert "no outputs of a recipe named 'gone'" in capsys.readouterr().err


@pytest.mark.integration
def test_tokenmill_run_builds_the_valid_recipes_beside_a_bad_one(
    recipes, tmp_path, monkeypatch, capsys, caplog
):
    from tokenmill.cli.demo import land_demo_crawl

    crawl = "CC-MAIN-RECIPES-2026-01"
    for name in [*BAD, "twin.yaml", "twin.yml"]:
        (recipes / name).unlink()
    (recipes / "broken.yaml").write_text("dedup:\n  bands: many\n")
    monkeypatch.setenv("TOKENMILL_LAKE_URL", str(tmp_path / "lake"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    lake = Lake.from_url(str(tmp_path / "lake"))
    land_demo_crawl(lake, crawl, files=1, pages_per_file=20, seed=0)
    with pytest.raises(SystemExit) as exit_:
        cli(["run", "--crawl", crawl, "--files-per-unit", "1"])
    # the valid recipes ran; the bad file is told once, and the command fails
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.count("broken.yaml") == 1, err
    # nor logged again by the definitions the run builds (a terminal shows the log too)
    assert not [r for r in caplog.records if "broken.yaml" in r.getMessage()]
    assert "tokenmill run: 1 recipe file left out (above); the other recipes ran" in err
    for recipe in ("fineweb_en", "any_language"):
        shards = Dataset(Recipe({}, recipe), recipe).lake(lake)
        assert shards.exists(f"tokenized_shards/{crawl}/00000/_SUCCESS.json"), recipe
    assert lake.list_dirs("recipes") == ["any_language", "fineweb_en"]


def test_new_language_defaults_make_a_multilingual_recipes_cleaning_stale(monkeypatch):
    """A recipe that judges languages other than English by the shipped defaults (FineWeb-2's
    values, the parity tables) depends on them: its ``cleaned`` version changes with them; an
    English-only recipe's, or one that judges every language by its own settings, does not."""
    import tokenmill.stages.cleaned as cleaned
    from tokenmill.languages.defaults import data_version
    from tokenmill.stages.cleaned import CleanSettings

    recipes = {
        "english": Recipe({"clean": {"keep_languages": ["en"]}}, "english.yaml"),
        "german": Recipe({"clean": {"keep_languages": ["de"]}}, "german.yaml"),
        "every": Recipe({"clean": {"keep_languages": []}}, "every.yaml"),
        "own": Recipe(
            {"clean": {"keep_languages": ["de"], "language_defaults": False}}, "own.yaml"
        ),
    }
    before = {name: recipe.version(CleanSettings) for name, recipe in recipes.items()}
    assert data_version() == data_version() and len(data_version()) == 12
    monkeypatch.setattr(cleaned, "data_version", lambda: "other-values")
    after = {name: recipe.version(CleanSettings) for name, recipe in recipes.items()}
    assert after["german"] != before["german"] and after["every"] != before["every"]
    assert after["english"] == before["english"] and after["own"] == before["own"]
