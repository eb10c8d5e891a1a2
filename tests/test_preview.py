"""`tokenmill preview` against what is built: a recipe's cleaned partitions record the settings
they were built with, and the preview judges each unit by them; documents whose drop reason
changes are transitions; tokens are the tokenized shards', the tokenizer's for the documents
whose fate changes; per-language counts add up to the totals."""

from __future__ import annotations

import re

import polars as pl
import pytest
from tokenmill.data_assets.datasets import Dataset

from testkit.demo_pipeline import tokenized_demo_crawls
from tokenmill.cli.main import main as cli
from tokenmill.crawl.units import registered_units
from tokenmill.filters import FILTER_MODULES_ENV
from tokenmill.recipes.recipe import Recipe
from tokenmill.reports.preview import KEPT, SIDES, preview
from tokenmill.reports.preview_baseline import Tokens, built_baseline
from tokenmill.reports.preview_report import html_report, text_report
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.stages.cleaned import BUILT_WITH, CleanSettings
from tokenmill.storage.layout import CLEANED, MARKER, TOKENIZED_SHARDS
from tokenmill.storage.outputs import part_files
from tokenmill.tokens.tokenization import load_tokenizer

CRAWL = "CC-MAIN-PREVIEW-2026-01"
LAB = "clean:\n  keep_languages: [en]\ntokenizer:\n  vocab_size: 4000\n"
# German judged by FineWeb's English settings
GERMAN_TOO = CleanSettings(keep_languages=["en", "de"], language_defaults=False)
# German kept: the English stop words rule would drop it
GERMAN_KEPT = CleanSettings(keep_languages=["en", "de"], gopher_quality={"min_stop_words": 0})
LANGUAGE_DROP = ("language", "language")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A recipe `lab` built up to its tokenized shards on a demo crawl of two units."""
    root = tmp_path_factory.mktemp("preview")
    (root / "recipes").mkdir()
    (root / "recipes" / "lab.yaml").write_text(LAB)
    lab = Dataset(Recipe.load(root / "recipes" / "lab.yaml"), "lab")
    lake = tokenized_demo_crawls(root, {CRAWL: 5}, files=4, pages_per_file=60, recipe=lab)
    return root, lake, lab


def judged(built, proposed: CleanSettings, view: str = "lab"):
    """The preview of `proposed` against the recipe's partitions (in `view`'s zones) as built."""
    _, lake, lab = built
    dataset = Dataset(lab.recipe, view)
    units = registered_units(lake, CRAWL)
    settings = lab.recipe.settings(CleanSettings)
    baseline = built_baseline(dataset.lake(lake), units, settings, view, lab.recipe.source)
    return preview(lake, units, baseline, proposed, tokens=Tokens(dataset.lake(lake)))


def test_documents_dropped_for_another_reason_are_a_transition(built):
    result = judged(built, GERMAN_TOO)
    # German documents pass the language filter now, and the stop words rule drops them
    moved = result.transitions[(LANGUAGE_DROP, ("gopher_quality", "stop_words"))]
    assert moved.documents > 0 and moved.samples
    assert all(s["reason_current"] == "language=de" for s in moved.samples)
    assert all(s["reason_proposed"].startswith("stop_words=") for s in moved.samples)
    rules = result.rules
    assert rules["proposed"][LANGUAGE_DROP] < rules["current"][LANGUAGE_DROP]
    assert rules["proposed"][("gopher_quality", "stop_words")] >= moved.documents
    text = text_report(result)
    assert re.search(r"\n  language / language +gopher_quality / stop_words +\d+", text)
    assert "(language=de -> stop_words=" in text
    assert "clean.keep_languages: ['en'] -> ['en', 'de']" in text
    assert "clean.language_defaults: True -> False" in text
    page = html_report(result)
    assert "<h3>documents whose fate changes</h3>" in page and "language=de -&gt;" in page


def test_the_counts_add_up_per_language_and_per_filter(built):
    result = judged(built, GERMAN_KEPT)
    assert result.languages["proposed"]["de"].documents > 0
    for side in SIDES:
        kept, languages = result.kept[side], result.languages[side].values()
        assert sum(t.documents for t in languages) == kept.documents
        assert sum(t.words for t in languages) == kept.words
        assert sum(t.tokens for t in languages) == kept.tokens
        assert kept.documents + sum(result.rules[side].values()) == result.documents
        assert sum(result.dropped_by[side].values()) == sum(result.rules[side].values())
        assert sum(result.language_drops[side].values()) == sum(result.rules[side].values())
    # several languages kept: what each filter drops of each
    text = text_report(result)
    assert "\ndropped per language and filter:\n" in text
    assert re.search(r"\n  de +\d+ +\d+ +[-+]\d+\n", text.split("dropped per language")[1])
    change = result.kept["proposed"].documents - result.kept["current"].documents
    gained, lost = flows(result, "documents")
    assert gained - lost == change > 0


def flows(result, what: str) -> tuple[int, int]:
    """The documents' `what` newly kept, and newly dropped."""
    moved = result.transitions.items()
    gained = sum(getattr(t, what) for (_, then), t in moved if then == KEPT)
    return gained, sum(getattr(t, what) for (now, _), t in moved if now == KEPT)


def test_tokens_now_are_the_tokenized_shards_and_newly_kept_ones_are_tokenized(built):
    root, lake, lab = built
    result = judged(built, GERMAN_KEPT)
    view = lab.lake(lake)
    shards = sum(
        view.read_json(f"{unit.prefix(TOKENIZED_SHARDS)}/{MARKER}")["counts"]["tokens"]
        for unit in registered_units(lake, CRAWL)
    )
    now = result.kept["current"]
    assert now.tokens == shards and now.untokenized_words == 0
    assert not result.token_sources["estimated"] and result.token_sources["tokenized"] > 0
    # the newly kept German documents: their text as the cleaned stage writes it (PII masked,
    # lines removed), tokenized with the recipe's tokenizer, end-of-document token included
    other = Dataset(lab.recipe, "lab_de").lake(lake)
    german = []
    for unit in registered_units(lake, CRAWL):
        run_stage_work(stage_named(CLEANED), other, GERMAN_KEPT, unit=unit, workers=1)
        german += [pl.read_parquet(other.path(key)) for key in part_files(other, unit, CLEANED)]
    texts = pl.concat(german).filter(pl.col("language") == "de")["text"].to_list()
    tokenizer, _ = load_tokenizer(view)
    expected = sum(len(e.ids) + 1 for e in tokenizer.encode_batch(texts, add_special_tokens=False))
    assert result.languages["proposed"]["de"].tokens == expected
    gained, lost = flows(result, "tokens")
    assert result.kept["proposed"].tokens == shards + gained - lost and gained >= expected


def test_units_are_judged_by_the_settings_they_were_built_with(built):
    _, lake, lab = built
    mixed = Dataset(lab.recipe, "lab_mixed").lake(lake)
    first, second = registered_units(lake, CRAWL)
    stricter = CleanSettings(keep_languages=["en"], gopher_quality={"min_doc_words": 150})
    built_now = [
        run_stage_work(stage_named(CLEANED), mixed, settings, unit=unit, workers=1)
        for unit, settings in ((first, lab.recipe.settings(CleanSettings)), (second, stricter))
    ]
    assert mixed.read_json(f"{second.prefix(CLEANED)}/{MARKER}")["counts"][BUILT_WITH]
    result = judged(built, GERMAN_TOO, view="lab_mixed")
    assert result.kept["current"].documents == sum(r.records_out for r in built_now)
    assert result.now[0] == "now: recipe lab_mixed as built (2 of 2 units)"
    said = "\n".join(result.now)
    assert "1 unit built with the settings of its file" in said
    assert "1 unit built with settings its file" in said
    assert "clean.gopher_quality.min_doc_words: 150 -> 50" in said
    # nothing built: its file's settings, said so; tokens not known
    result = judged(built, GERMAN_TOO, view="unbuilt")
    assert result.now == [f"now: recipe unbuilt's file ({lab.recipe.source}): nothing is built yet"]
    plain = preview(
        lake, registered_units(lake, CRAWL), lab.recipe.settings(CleanSettings), GERMAN_TOO
    )
    assert result.kept["current"].documents == plain.kept["current"].documents
    assert result.transitions.keys() == plain.transitions.keys()
    # its tokens: estimated from the words at the ratio of a sibling's shards
    assert result.ratio_from == "lab" and result.token_sources["estimated"] > 0
    assert "~" in text_report(result).split("\n  tokens ")[1].split("\n")[0]


@pytest.mark.integration
def test_preview_compares_an_edited_recipe_with_what_is_built(built, monkeypatch, capsys):
    root, lake, _ = built
    monkeypatch.setenv("TOKENMILL_LAKE_URL", str(root / "lake"))
    monkeypatch.setenv("TOKENMILL_RECIPES", str(root / "recipes"))
    monkeypatch.delenv(FILTER_MODULES_ENV, raising=False)
    edited = root / "edited" / "lab.yaml"  # the recipe's file, edited elsewhere
    edited.parent.mkdir()
    edited.write_text(LAB.replace("[en]", "[en, de]"))
    cli(["preview", str(edited)])
    out = capsys.readouterr().out
    assert out.startswith("now: recipe lab as built (2 of 2 units)\n")
    assert "clean.keep_languages: ['en'] -> ['en', 'de']" in out
    # by German's own stop words and thresholds, the German documents are kept
    assert re.search(r"\n  language / language +kept +\d+", out)
    assert "(language=de -> kept)" in out
    # its file as it stands, given to --against: the same settings, nothing changes
    cli(["preview", str(edited), "--against", str(edited)])
    out = capsys.readouterr().out
    assert f"now: the settings of {edited}" in out and "proposed: the same settings" in out
    assert "documents whose fate changes:\n  none" in out
    with pytest.raises(SystemExit):
        cli(["preview", str(edited), "--against", "nope"])
    err = capsys.readouterr().err
    assert "no recipe named 'nope' to compare with; recipes: lab (or give --against a" in err
