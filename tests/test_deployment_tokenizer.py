"""One tokenizer per deployment: recipes without a tokenizer of their own (or with the same
settings) use the one the shared settings declare, trained once on the named recipe's text;
a recipe asks for its own by giving other settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey
from tokenmill.data_assets.datasets import Catalog
from tokenmill.resources.lake import LakeResource

from tokenmill.definitions import build_definitions
from tokenmill.recipes.recipe import Recipe
from tokenmill.stages import stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import TOKENIZER

TOKENIZER_STAGE = stage_named(TOKENIZER)


def shared(tokenizer: dict | None) -> Recipe:
    sections = {"raw": {}, "extract": {}} | (
        {"tokenizer": tokenizer} if tokenizer is not None else {}
    )
    return Recipe(sections, "extraction.yaml", "shared")


def recipe(name: str, **sections) -> Recipe:
    return Recipe(sections, f"recipes/{name}.yaml", name)


def catalog(tokenizer: dict | None, *recipes: Recipe) -> Catalog:
    return Catalog.of(list(recipes), shared(tokenizer))


def test_recipes_without_their_own_share_the_named_recipes_tokenizer(tmp_path):
    made = catalog(
        {"recipe": "main", "vocab_size": 8000},
        recipe("aaa", clean={}),
        recipe("main", clean={}),
        recipe("same", tokenizer={"vocab_size": 8000}),  # the same settings: shared
        recipe("own", tokenizer={"vocab_size": 6000}),  # other settings: its own
    )
    assert not made.problems
    by_name = {d.prefix: d for d in made.recipes}
    assert [d.prefix for d in made.serving(TOKENIZER_STAGE)] == ["main", "own"]
    assert by_name["main"].recipe.settings(TOKENIZER_STAGE.settings).vocab_size == 8000
    for name in ("aaa", "same"):
        assert by_name[name].key(TOKENIZER) == AssetKey(["main", TOKENIZER])
        assert TOKENIZER_STAGE not in by_name[name].stages
        view = by_name[name].lake(Lake.from_url(str(tmp_path)))
        assert (
            view.stored_key(f"{TOKENIZER}/tokenizer.json")
            == "recipes/main/tokenizer/tokenizer.json"
        )
        assert view.stored_key("cleaned/x") == f"recipes/{name}/cleaned/x"
    assert by_name["own"].key(TOKENIZER) == AssetKey(["own", TOKENIZER])
    # in the Dagster definitions: one tokenizer asset, which the sharers' shards read
    defs = build_definitions(LakeResource(url=str(tmp_path / "lake")), recipes=made)
    graph = defs.resolve_asset_graph()
    tokenizers = {k for k in graph.get_all_asset_keys() if k.path[-1] == TOKENIZER}
    assert tokenizers == {AssetKey(["main", TOKENIZER]), AssetKey(["own", TOKENIZER])}
    parents = graph.get(AssetKey(["aaa", "tokenized_shards"])).parent_keys
    assert AssetKey(["main", TOKENIZER]) in parents


def test_without_a_named_recipe_the_first_user_by_name_trains_it():
    made = catalog(
        {}, recipe("zeta"), recipe("alpha"), recipe("own", tokenizer={"vocab_size": 600})
    )
    assert [d.prefix for d in made.serving(TOKENIZER_STAGE)] == ["alpha", "own"]
    assert {d.prefix: d.tokenizer_from for d in made.recipes} == {
        "zeta": "alpha",
        "alpha": None,
        "own": None,
    }


def test_without_a_deployment_tokenizer_each_recipe_has_its_own():
    made = catalog(None, recipe("a"), recipe("b"))
    assert [d.prefix for d in made.serving(TOKENIZER_STAGE)] == ["a", "b"]


@pytest.mark.parametrize(
    ("owner", "why"),
    [("gone", "is not a valid recipe"), ("own", "has a tokenizer of its own")],
)
def test_a_named_recipe_that_cannot_train_it_leaves_out_its_users_saying_why(owner, why):
    made = catalog({"recipe": owner}, recipe("a"), recipe("own", tokenizer={"vocab_size": 600}))
    assert [d.prefix for d in made.recipes] == ["own"]
    (problem,) = made.problems
    assert "recipes/a.yaml" in problem and "tokenizer.recipe" in problem and why in problem


def test_a_recipe_file_cannot_name_the_deployments_recipe(tmp_path: Path):
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "a.yaml").write_text("tokenizer:\n  recipe: a\n")
    made = Catalog.load(folder)
    assert not made.recipes
    assert "unknown settings ['recipe']" in made.problems[0]
