"""Classifier scores as stored signals: the scored stage with real fastText models trained here,
carried over while nothing changed, re-scored per classifier when its model changes; the
crawl's distribution and the recipes' min / keep_top rules in cleaned and preview; declarations
and models refused by name before anything is written."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from tokenmill.data_assets.datasets import Catalog

from testkit.demo_pipeline import extracted_demo_unit
from tokenmill.classifiers.scoring import (
    CLASSIFIER_PATHS_ENV,
    ClassifierError,
    FastTextScorer,
    histogram,
    score_bins,
    top_share,
)
from tokenmill.classifiers.training import TrainingSettings, train_classifier
from tokenmill.demo.crawl import sample_articles
from tokenmill.recipes.recipe import Recipe
from tokenmill.reports.preview import KEPT, preview
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.stages.cleaned import FILTER_SETTINGS, CleanSettings
from tokenmill.stages.scored import ScoreSettings
from tokenmill.storage.layout import CLEANED, EXTRACTED, MARKER, SCORED
from tokenmill.storage.locations import PathNotAllowedError
from tokenmill.storage.outputs import is_committed

CRAWL = "CC-MAIN-SCORE-2026-01"
SMALL = TrainingSettings(dim=16, epoch=25, lr=1.0, bucket=100_000)


def declared(*names: str, **extra) -> ScoreSettings:
    return ScoreSettings(
        classifiers=[
            {"name": n, "model": f"classifiers/{n}/model.bin", "labels": ["hq"], **extra}
            for n in names
        ]
    )


@pytest.fixture(scope="module")
def scored_lake(tmp_path_factory):
    """A demo unit extracted, two classifiers trained on it (seeds 0 and 1) and scored."""
    root = tmp_path_factory.mktemp("scoring")
    lake, unit, truth = extracted_demo_unit(root, CRAWL, files=2, pages_per_file=120, seed=3)
    positives = root / "good.jsonl"
    articles = sample_articles("en", 100, seed=4)
    positives.write_text("".join(json.dumps({"text": t}) + "\n" for t in articles))
    for seed, name in enumerate(("alpha", "beta")):
        train_classifier(lake, name, positives, settings=replace(SMALL, seed=seed))
    run_stage_work(stage_named(SCORED), lake, declared("alpha", "beta"), unit=unit, workers=1)
    run_stage_work(stage_named("score_distribution"), lake, crawl=CRAWL)
    return lake, unit, positives


def scores_of(lake, unit, name: str) -> pl.DataFrame:
    return pl.concat(
        pl.read_parquet(lake.path(f"{unit.part_prefix(SCORED, part)}/{name}.parquet"))
        for part in range(2)
    )


def extracted_docs(lake, unit) -> pl.DataFrame:
    return pl.concat(
        pl.read_parquet(lake.path(f"{unit.part_prefix(EXTRACTED, part)}/docs.parquet"))
        for part in range(2)
    )


def test_every_extracted_document_has_each_classifiers_score_in_order(scored_lake):
    lake, unit, _ = scored_lake
    docs = extracted_docs(lake, unit)
    for name in ("alpha", "beta"):
        scores = scores_of(lake, unit, name)
        assert scores.columns == ["doc_id", "hq"]
        assert scores["doc_id"].to_list() == docs["doc_id"].to_list()
        assert scores["hq"].null_count() == 0 and scores["hq"].is_between(0, 1).all()
    # the two seeds gave two models, and so two sets of scores
    assert not scores_of(lake, unit, "alpha")["hq"].equals(scores_of(lake, unit, "beta")["hq"])
    counts = lake.read_json(f"{unit.prefix(SCORED)}/{MARKER}")["counts"]
    assert counts["classifiers"]["alpha"]["scored"] == docs.height
    card = lake.read_json("classifiers/alpha/card.json")
    assert counts["classifiers"]["alpha"]["version"] == card["model_sha256"]
    # the histograms the crawl distribution is cut from count every document
    assert sum(counts["score_histograms"]["alpha"]["hq"].values()) == docs.height


def test_blank_texts_get_a_null_score_never_a_crash(scored_lake):
    lake, _, _ = scored_lake
    import fasttext

    model = fasttext.load_model(lake.path("classifiers/alpha/model.bin"))
    scorer = FastTextScorer(model, "v", ["__label__hq"], "alpha")
    scores = scorer(["", "  \n\t ", None, "a real sentence about the weather"])["__label__hq"]
    assert scores[:3] == [None, None, None] and 0 <= scores[3] <= 1
    assert histogram(scores) == {str(score_bins([scores[3]])[0]): 1}


def test_a_rerun_carries_unchanged_scores_and_a_new_model_rescores_only_its_classifier(
    scored_lake, tmp_path
):
    lake, unit, positives = scored_lake
    before = {n: scores_of(lake, unit, n) for n in ("alpha", "beta")}
    report = run_stage_work(stage_named(SCORED), lake, declared("alpha", "beta"), unit=unit)
    assert report.counts["classifiers"]["alpha"]["carried_over"] == 2  # both files
    assert all(scores_of(lake, unit, n).equals(before[n]) for n in before)
    # beta retrained with another seed: only beta is scored again
    train_classifier(lake, "beta", positives, settings=replace(SMALL, seed=7))
    report = run_stage_work(stage_named(SCORED), lake, declared("alpha", "beta"), unit=unit)
    assert report.counts["classifiers"]["alpha"].get("carried_over") == 2
    assert "carried_over" not in report.counts["classifiers"]["beta"]
    assert scores_of(lake, unit, "alpha").equals(before["alpha"])
    assert not scores_of(lake, unit, "beta")["hq"].equals(before["beta"]["hq"])
    run_stage_work(stage_named("score_distribution"), lake, crawl=CRAWL)


@pytest.mark.parametrize(
    "model, expected",
    [
        ("classifiers/junk/model.bin", "is not a fastText model"),
        ("classifiers/none/model.bin", "cannot be read"),
    ],
)
def test_a_bad_model_fails_naming_it_before_anything_is_written(
    scored_lake, tmp_path, model, expected
):
    lake, unit, _ = scored_lake
    lake.write_bytes("classifiers/junk/model.bin", b"<html>not a model</html>" * 10)
    committed = [lake.read_bytes(f"{unit.part_prefix(SCORED, p)}/{MARKER}") for p in range(2)]
    settings = ScoreSettings(classifiers=[{"name": "junk", "model": model}])
    with pytest.raises(ClassifierError, match=expected) as error:
        run_stage_work(stage_named(SCORED), lake, settings, unit=unit, workers=1)
    assert model in str(error.value)
    # the parts committed before are as they were; the unit is not committed
    assert committed == [
        lake.read_bytes(f"{unit.part_prefix(SCORED, p)}/{MARKER}") for p in range(2)
    ]
    assert not is_committed(lake, unit.prefix(SCORED))
    run_stage_work(stage_named(SCORED), lake, declared("alpha", "beta"), unit=unit, workers=1)


def test_a_label_the_model_lacks_is_named_with_the_models_labels(scored_lake):
    lake, unit, _ = scored_lake
    settings = ScoreSettings(
        classifiers=[{"name": "alpha", "model": "classifiers/alpha/model.bin", "labels": ["edu"]}]
    )
    with pytest.raises(ClassifierError, match=r"no label __label__edu.*__label__hq"):
        run_stage_work(stage_named(SCORED), lake, settings, unit=unit, workers=1)


def test_a_model_outside_the_lake_needs_an_allowed_location(scored_lake, tmp_path, monkeypatch):
    lake, unit, _ = scored_lake
    outside = tmp_path / "models" / "alpha.bin"
    outside.parent.mkdir()
    outside.write_bytes(lake.read_bytes("classifiers/alpha/model.bin"))
    settings = ScoreSettings(classifiers=[{"name": "alpha", "model": str(outside)}])
    monkeypatch.delenv(CLASSIFIER_PATHS_ENV, raising=False)
    with pytest.raises(PathNotAllowedError, match=CLASSIFIER_PATHS_ENV):
        run_stage_work(stage_named(SCORED), lake, settings, unit=unit, workers=1)
    monkeypatch.setenv(CLASSIFIER_PATHS_ENV, str(outside.parent))
    report = run_stage_work(stage_named(SCORED), lake, settings, unit=unit, workers=1)
    assert report.counts["classifiers"]["alpha"]["scored"] == report.records_in
    # a pinned SHA-256 refuses another file
    pinned = ScoreSettings(classifiers=[{"name": "alpha", "model": str(outside), "sha256": "0"}])
    with pytest.raises(ClassifierError, match="not the pinned 0"):
        run_stage_work(stage_named(SCORED), lake, pinned, unit=unit, workers=1)
    run_stage_work(stage_named(SCORED), lake, declared("alpha", "beta"), unit=unit, workers=1)


def test_declarations_are_checked_when_read():
    with pytest.raises(ValueError, match="either model"):
        ScoreSettings(classifiers=[{"name": "x"}])
    with pytest.raises(ValueError, match="declared twice"):
        ScoreSettings(classifiers=[{"name": "x", "model": "a"}, {"name": "x", "model": "b"}])
    with pytest.raises(ValueError, match="unknown keys"):
        ScoreSettings(classifiers=[{"name": "x", "model": "a", "treshold": 1}])
    with pytest.raises(ValueError, match="either min"):
        CleanSettings(classifier_rules=[{"classifier": "x", "label": "hq"}])
    with pytest.raises(ValueError, match="keep_top 1.5"):
        CleanSettings(classifier_rules=[{"classifier": "x", "label": "hq", "keep_top": 1.5}])


def test_top_share_keeps_the_share_even_when_scores_tie():
    rng = np.random.default_rng(0)
    # a confident model: 60 % of the documents at exactly 1.0, the rest spread
    scores = np.concatenate([np.ones(6000), rng.random(4000)]).astype(np.float32)
    ids = [f"doc{i}" for i in range(len(scores))]
    for share in (0.1, 0.5, 0.75):
        cut = top_share(histogram(scores.tolist()), share)
        kept = cut.keeps(score_bins(scores), ids)
        # ties broken by a hash of the id: the share within binomial noise of the tied bin
        assert abs(kept.sum() - share * len(scores)) <= 4 * math.sqrt(6000 * 0.25)
        assert kept.sum() == cut.keeps(score_bins(scores), ids).sum()  # deterministic
        assert (scores[kept].min() >= scores[~kept].max()) or share > 0.6


def cleaned_ids(lake, unit, rules, combine="all") -> set[str]:
    settings = CleanSettings(
        keep_languages=[],
        min_language_score=0.0,
        skip_filters=list(FILTER_SETTINGS),
        classifier_rules=rules,
        classifier_combine=combine,
    )
    report = run_stage_work(stage_named(CLEANED), lake, settings, unit=unit, workers=1)
    docs = pl.concat(
        pl.read_parquet(lake.path(f"{unit.part_prefix(CLEANED, part)}/docs.parquet"))
        for part in range(2)
    )
    return set(docs["doc_id"]), report


def test_recipes_keep_by_min_and_by_the_crawls_top_share(scored_lake):
    lake, unit, _ = scored_lake
    alpha = scores_of(lake, unit, "alpha")
    kept, _ = cleaned_ids(lake, unit, [{"classifier": "alpha", "label": "hq", "min": 0.5}])
    assert kept == set(alpha.filter(pl.col("hq") >= 0.5)["doc_id"])
    rule = {"classifier": "alpha", "label": "hq", "keep_top": 0.25}
    kept, report = cleaned_ids(lake, unit, [rule])
    threshold = report.counts["classifier_thresholds"]["alpha.hq"][CRAWL]
    assert abs(len(kept) - 0.25 * alpha.height) <= 4 * math.sqrt(alpha.height * 0.25)
    assert abs(threshold["crawl_kept_share"] - 0.25) < 0.01
    # the best scored are the kept ones (up to the tied bin)
    assert alpha.filter(pl.col("doc_id").is_in(list(kept)))["hq"].min() >= threshold["threshold"]
    rejected = pl.read_parquet(lake.path(f"{unit.part_prefix(CLEANED, 0)}/rejected.parquet"))
    assert rejected["reason"].str.contains("alpha.hq=").all()


def test_rules_combine_as_all_or_any(scored_lake):
    lake, unit, _ = scored_lake
    first = {"classifier": "alpha", "label": "hq", "keep_top": 0.3}
    second = {"classifier": "beta", "label": "hq", "keep_top": 0.3}
    by_alpha, _ = cleaned_ids(lake, unit, [first])
    by_beta, _ = cleaned_ids(lake, unit, [second])
    assert by_alpha != by_beta
    assert cleaned_ids(lake, unit, [first, second], "all")[0] == by_alpha & by_beta
    assert cleaned_ids(lake, unit, [first, second], "any")[0] == by_alpha | by_beta


def test_preview_shows_what_a_classifier_threshold_flips(scored_lake):
    lake, unit, _ = scored_lake
    base = dict(keep_languages=[], skip_filters=["url"])
    loose = CleanSettings(
        **base, classifier_rules=[{"classifier": "alpha", "label": "hq", "min": 0.2}]
    )
    strict = CleanSettings(
        **base, classifier_rules=[{"classifier": "alpha", "label": "hq", "keep_top": 0.1}]
    )
    result = preview(lake, [unit], loose, strict)
    flipped = result.transitions.get((KEPT, ("classifiers", "alpha.hq")))
    assert flipped and flipped.documents > 0
    assert result.kept["proposed"].documents < result.kept["current"].documents
    # the counts are what materializing the proposed recipe keeps
    kept, _ = cleaned_ids(lake, unit, strict.classifier_rules)
    assert result.kept["proposed"].documents <= len(kept)


def test_a_recipe_naming_an_undeclared_classifier_or_label_is_left_out(tmp_path):
    shared = tmp_path / "extraction.yaml"
    shared.write_text(
        "score:\n  classifiers:\n    - {name: dclm, model: m.bin, labels: [__label__hq]}\n"
    )
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    rule = "clean:\n  classifier_rules:\n    - {{classifier: {}, label: {}, keep_top: 0.1}}\n"
    (recipes / "good.yaml").write_text(rule.format("dclm", "hq"))
    (recipes / "unknown.yaml").write_text(rule.format("edu", "hq"))
    (recipes / "label.yaml").write_text(rule.format("dclm", "cc"))
    catalog = Catalog.load(recipes, shared)
    assert [d.prefix for d in catalog.recipes] == ["good"]
    problems = "\n".join(catalog.problems)
    assert "unknown.yaml: clean.classifier_rules[0]: classifier 'edu' is not declared" in problems
    assert "label.yaml: clean.classifier_rules[0]: classifier dclm stores no label 'cc'" in problems


def test_only_recipes_with_classifier_rules_wait_for_the_scores(tmp_path):
    from tokenmill.data_assets.assets import dependencies

    shared = tmp_path / "extraction.yaml"
    shared.write_text("score:\n  classifiers:\n    - {name: dclm, model: m.bin}\n")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "plain.yaml").write_text("clean: {}\n")
    (recipes / "by_min.yaml").write_text(
        "clean:\n  classifier_rules: [{classifier: dclm, label: hq, min: 0.5}]\n"
    )
    (recipes / "top.yaml").write_text(
        "clean:\n  classifier_rules: [{classifier: dclm, label: hq, keep_top: 0.1}]\n"
    )
    catalog = Catalog.load(recipes, shared)
    cleaned = stage_named(CLEANED)
    inputs = {
        d.prefix: {k.to_user_string() for k in dependencies(cleaned, d)} for d in catalog.recipes
    }
    assert inputs == {
        "plain": {"extracted"},
        "by_min": {"extracted", "scored"},
        "top": {"extracted", "scored", "unit_score_cuts"},
    }
    assert Recipe.load(recipes / "top.yaml").settings(CleanSettings).score_rules()[0].keep_top


def test_the_crawl_distribution_shows_where_shares_cut_and_metadata_stays_small(scored_lake):
    from tokenmill.data_assets.results import stage_result

    from tokenmill.classifiers.scoring import crawl_top_share

    lake, unit, _ = scored_lake
    report = run_stage_work(stage_named("score_distribution"), lake, crawl=CRAWL)
    shown = report.counts["keep_top_thresholds"]["alpha.hq"]
    assert shown["0.1"] == round(crawl_top_share(lake, CRAWL, "alpha", "hq", 0.1).threshold, 6)
    assert shown["0.01"] >= shown["0.1"] >= shown["0.5"]
    # the units' histograms stay in the lake's markers, out of Dagster's event log
    scored = run_stage_work(stage_named(SCORED), lake, declared("alpha", "beta"), unit=unit)
    assert scored.counts["score_histograms"]
    metadata = stage_result(scored, lake, unit.prefix(SCORED)).metadata
    assert "score_histograms" not in metadata and "classifiers" in metadata


class LengthScorer:
    """A plug-in scorer: the share of a document's first 2,000 characters that are letters."""

    labels = ["__label__letters"]

    def __init__(self, limit: int = 2000):
        self.limit = limit
        self.version = f"letters-v1-{limit}"

    def __call__(self, texts):
        return {
            "__label__letters": [
                sum(c.isalpha() for c in t[: self.limit]) / len(t[: self.limit]) if t else None
                for t in texts
            ]
        }


def test_a_plug_in_scorer_from_an_allowed_module_scores_and_recipes_use_it(
    scored_lake, monkeypatch
):
    from tokenmill.filters import FILTER_MODULES_ENV, FilterNotAllowedError

    lake, unit, _ = scored_lake
    settings = ScoreSettings(
        classifiers=[
            {"name": "letters", "scorer": f"{__name__}.LengthScorer", "params": {"limit": "500"}}
        ]
    )
    monkeypatch.delenv(FILTER_MODULES_ENV, raising=False)
    with pytest.raises(FilterNotAllowedError):
        run_stage_work(stage_named(SCORED), lake, settings, unit=unit, workers=1)
    monkeypatch.setenv(FILTER_MODULES_ENV, __name__.rpartition(".")[0] or __name__)
    report = run_stage_work(stage_named(SCORED), lake, settings, unit=unit, workers=1)
    assert report.counts["classifiers"]["letters"]["version"] == "letters-v1-500"
    scores = scores_of(lake, unit, "letters")
    texts = extracted_docs(lake, unit)["text"].to_list()
    expected = LengthScorer(500)(texts)["__label__letters"]
    assert scores["letters"].to_list() == pytest.approx(expected, rel=1e-6)
    kept, _ = cleaned_ids(lake, unit, [{"classifier": "letters", "label": "letters", "min": 0.8}])
    assert kept == set(scores.filter(pl.col("letters") >= 0.8)["doc_id"])
    run_stage_work(stage_named(SCORED), lake, declared("alpha", "beta"), unit=unit, workers=1)


def test_a_quantized_ftz_model_scores_as_its_bin(scored_lake, tmp_path):
    import fasttext

    lake, unit, _ = scored_lake
    model = fasttext.load_model(lake.path("classifiers/alpha/model.bin"))
    model.quantize(dsub=2)
    model.save_model(str(tmp_path / "alpha.ftz"))
    lake.put_file("classifiers/alpha_q/model.ftz", tmp_path / "alpha.ftz")
    quantized = ScoreSettings(
        classifiers=[
            *declared("alpha").classifiers,
            {"name": "alpha_q", "model": "classifiers/alpha_q/model.ftz"},
        ]
    )
    run_stage_work(stage_named(SCORED), lake, quantized, unit=unit, workers=1)
    full, small = scores_of(lake, unit, "alpha")["hq"], scores_of(lake, unit, "alpha_q")["hq"]
    assert lake.size("classifiers/alpha_q/model.ftz") < lake.size("classifiers/alpha/model.bin")
    # the same ranking, nearly: quantization moves the scores a little
    assert np.corrcoef(full.to_numpy(), small.to_numpy())[0, 1] > 0.9
    run_stage_work(stage_named(SCORED), lake, declared("alpha", "beta"), unit=unit, workers=1)
