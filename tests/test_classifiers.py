"""Quality classifiers trained from a lab's own examples against a sample of the crawl: fastText
for real (no mock), reproducible bytes, held-out figures, and inputs refused by name."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, replace
from pathlib import Path

import fasttext
import polars as pl
import pytest

from testkit.demo_pipeline import extracted_demo_unit
from tokenmill.classifiers.training import (
    FIGURE_FLOOR,
    SMALL_DATA,
    SMALL_DATA_EXAMPLES,
    TRAINING_PHASES,
    ClassifierInputError,
    TrainingProgress,
    TrainingSettings,
    chosen_settings,
    positive_scores,
    train_classifier,
    weak_figures,
)
from tokenmill.cli.main import main as cli
from tokenmill.demo.crawl import sample_articles
from tokenmill.storage.layout import EXTRACTED

CRAWL = "CC-MAIN-CLASSIFY-2026-01"
# a few hundred examples: more epochs, a higher rate, a small model
SMALL = TrainingSettings(dim=16, epoch=25, lr=1.0, bucket=100_000)


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    """A lake with a demo crawl extracted (good pages, spam, foreign, duplicates) and the
    kind of each extracted document, by its URL."""
    root = tmp_path_factory.mktemp("classify")
    lake, unit, truth = extracted_demo_unit(root, CRAWL, files=2, pages_per_file=150, seed=5)
    kinds = {page["url"]: page["kind"] for page in truth["pages"]}
    docs = pl.read_parquet(lake.path(f"{unit.part_prefix(EXTRACTED, 0)}/docs.parquet"))
    return lake, [
        (kinds.get(url, ""), text) for url, text in zip(docs["url"], docs["text"], strict=True)
    ]


@pytest.fixture
def positives(tmp_path) -> Path:
    path = tmp_path / "good.jsonl"
    articles = sample_articles("en", 120, seed=8)
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in articles))
    return path


def test_a_classifier_learns_the_positives_from_the_crawl_and_reports_held_out_figures(
    extracted, positives
):
    lake, docs = extracted
    card = train_classifier(lake, "good_articles", positives, negatives=120, settings=SMALL)
    assert card["positives"]["documents"] == 120 and card["negatives"]["documents"] == 120
    assert card["negatives"]["crawls"] == [CRAWL]
    assert card["held_out"]["documents"] > 0
    assert card["trained_on"] + card["held_out"]["documents"] == 240
    assert set(card["held_out"]) == {"documents", "precision", "recall"}
    stored = json.loads(lake.read_bytes("classifiers/good_articles/card.json"))
    assert stored == card
    model = fasttext.load_model(lake.path("classifiers/good_articles/model.bin"))
    fresh = sample_articles("en", 20, seed=99)  # articles it never saw
    spam = [text for kind, text in docs if kind.startswith("spam")]
    assert spam, "the demo crawl has spam pages"
    mean = lambda texts: sum(positive_scores(model, texts)) / len(texts)  # noqa: E731
    assert mean(fresh) > 0.5 > mean(spam)
    # nothing to score: null, never a crash
    assert positive_scores(model, ["", " \n ", fresh[0]])[:2] == [None, None]


def test_the_same_inputs_and_seed_give_the_same_model_bytes(extracted, positives):
    lake, _ = extracted
    first = train_classifier(lake, "again", positives, negatives=60, settings=SMALL)
    data = lake.read_bytes("classifiers/again/model.bin")
    second = train_classifier(lake, "again", positives, negatives=60, settings=SMALL)
    assert second == first and lake.read_bytes("classifiers/again/model.bin") == data
    other = train_classifier(
        lake, "again", positives, negatives=60, settings=replace(SMALL, seed=1)
    )
    assert other["negatives"]["sample_sha256"] != first["negatives"]["sample_sha256"]


def test_the_phases_are_reported_with_the_documents_each_handles(extracted, positives):
    from tokenmill.crawl.units import registered_units
    from tokenmill.storage.outputs import part_files

    lake, _ = extracted
    (unit,) = registered_units(lake, CRAWL)
    crawled = sum(
        pl.scan_parquet(lake.path(key)).select(pl.len()).collect().item()
        for key in part_files(lake, unit, EXTRACTED)
    )
    seen: list[TrainingProgress] = []
    card = train_classifier(
        lake, "followed", positives, negatives=60, settings=SMALL, progress=seen.append
    )
    finished = [(p.phase, p.documents) for p in seen if p.finished]
    assert finished == [
        ("positives", 120),
        ("negatives", 60),
        ("training", card["trained_on"]),
        ("judging", card["held_out"]["documents"]),
    ]
    assert [p.phase for p in seen if p.finished] == list(TRAINING_PHASES)
    # the crawl's documents are counted as they are read, to the last
    read = [p.documents for p in seen if p.phase == "negatives" and not p.finished]
    assert read[0] == 0 and read == sorted(read) and read[-1] == crawled > 0


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (None, "absent.jsonl", "does not exist"),
        ("", "empty.txt", "holds no document with text"),
        ("\n  \n", "blank.txt", "holds no document with text"),
        ("a,b\n", "table.csv", "expected .txt, .jsonl[.gz] or .parquet"),
        ("{not json\n", "broken.jsonl", "is unreadable"),
    ],
)
def test_unusable_positives_fail_naming_the_file_before_anything_is_written(
    extracted, tmp_path, content, name, message
):
    lake, _ = extracted
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ClassifierInputError, match=re.escape(message)) as error:
        train_classifier(lake, "refused", path)
    assert str(path) in str(error.value)
    assert not lake.exists("classifiers/refused/card.json")


def test_an_unknown_crawl_is_named(extracted, positives):
    lake, _ = extracted
    with pytest.raises(ClassifierInputError, match="CC-MAIN-NOPE"):
        train_classifier(lake, "refused", positives, crawls=["CC-MAIN-NOPE"])


def test_the_command_prints_the_figures_and_where_the_model_is(
    extracted, positives, monkeypatch, capsys
):
    lake, _ = extracted
    monkeypatch.setenv("TOKENMILL_LAKE_URL", lake.url)
    small = ["--dim", "16", "--epoch", "25", "--lr", "1.0", "--bucket", "100000"]
    cli(
        ["train-classifier", "from_cli", "--positives", str(positives), "--negatives", "50", *small]
    )
    settings, described, *_ = capsys.readouterr().out.splitlines()
    assert settings == "settings: 170 examples; set: dim 16, epoch 25, lr 1.0, bucket 100000"
    assert described.startswith("classifier from_cli: 120 positives, 50 negatives from " + CRAWL)
    assert lake.exists("classifiers/from_cli/model.bin")
    with pytest.raises(SystemExit) as exit_:
        cli(["train-classifier", "x", "--positives", str(positives.parent / "none.txt")])
    assert exit_.value.code == 2  # a file argument that names nothing
    err = capsys.readouterr().err
    assert "Traceback" not in err and "none.txt does not exist" in err


def test_the_settings_follow_the_number_of_examples_unless_given():
    few, why = chosen_settings(95)
    default = TrainingSettings()
    assert few == SMALL_DATA and few.bucket * few.dim < default.bucket * default.dim / 100
    assert why.startswith("small-data settings for 95 examples (fewer than 5,000): dim 16,")
    assert "in a model of 800 MB" in why
    mixed, why = chosen_settings(95, {"dim": 8, "seed": 3})
    assert mixed == replace(SMALL_DATA, dim=8, seed=3)
    assert why.endswith("; set: dim 8, seed 3") and "dim 16" not in why
    many, why = chosen_settings(SMALL_DATA_EXAMPLES)
    assert many == TrainingSettings() and why.startswith("fastText's defaults for 5,000 examples")
    with pytest.raises(ValueError, match="unknown training settings"):
        chosen_settings(95, {"epochs": 3})


@pytest.mark.parametrize(
    ("held", "weak"),
    [
        ({"documents": 40, "precision": 0.9, "recall": 0.7}, []),
        ({"documents": 40, "precision": 0.29, "recall": 0.9}, ["precision 0.29"]),
        ({"documents": 40, "precision": None, "recall": 0.0}, ["precision none", "recall 0.0"]),
        ({"documents": 0, "precision": None, "recall": None}, ["no document was held out"]),
    ],
)
def test_held_out_figures_under_the_floor_are_named_with_what_to_try(held, weak):
    warnings = weak_figures(held)
    assert len(warnings) == (1 if weak else 0)
    for words in weak:
        assert words in warnings[0]
    if weak and held["documents"]:
        assert f"under {FIGURE_FLOOR}" in warnings[0] and "--negatives" in warnings[0]


def test_few_examples_get_small_settings_and_weak_figures_a_warning(
    extracted, positives, tmp_path, monkeypatch, capsys
):
    """The trap: a few hundred examples with no flags made an 800 MB model that kept nothing
    well, silently. Negatives like the positives (more generated articles): nothing to learn."""
    lake, _ = extracted
    monkeypatch.setenv("TOKENMILL_LAKE_URL", lake.url)
    alike = tmp_path / "alike.jsonl"
    articles = sample_articles("en", 120, seed=9)
    alike.write_text("".join(json.dumps({"text": text}) + "\n" for text in articles))
    command = ["train-classifier", "alike", "--positives", str(positives)]
    cli([*command, "--negatives-from", str(alike)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("settings: small-data settings for 240 examples (fewer than 5,000)")
    card = lake.read_json("classifiers/alike/card.json")
    assert card["settings"] == asdict(SMALL_DATA) and card["settings_chosen"] == lines[0][10:]
    assert card["model_bytes"] < 10_000_000
    (warning,) = [line for line in lines if line.startswith("warning: ")]
    assert warning == f"warning: {card['warnings'][0]}"
    assert f"under {FIGURE_FLOOR} on {card['held_out']['documents']} documents" in warning
    # a flag given is kept, the others still chosen
    cli([*command, "--dim", "8"])
    assert lake.read_json("classifiers/alike/card.json")["settings"] == asdict(
        replace(SMALL_DATA, dim=8)
    )
