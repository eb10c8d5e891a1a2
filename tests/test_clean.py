"""Extraction and the cleaning stage end to end on a generated crawl: decisions against the
crawl's ground truth, rejections, per-filter counts, run config with plug-in filters."""

from __future__ import annotations

import gzip
import json
import random
import shutil
from collections import Counter

import polars as pl
import pytest
from tokenmill.data_assets.recipe import PluginFilter, config_overrides, run_config_class
from tokenmill.data_assets.results import stage_result

from testkit.demo_pipeline import extracted_demo_unit
from testkit.shared_data import SHARED
from tokenmill.filters import FilterChain, PIIMasker
from tokenmill.filters.signals import EXTRACTED_SIGNALS as SIGNALS
from tokenmill.recipes.recipe import Recipe
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.stages.cleaned import CleanSettings, rejected_text
from tokenmill.stages.extracted import ExtractSettings
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import CLEANED, DOC_SCHEMA, EXTRACTED, MANIFESTS, MARKER
from tokenmill.storage.outputs import StageReport

CRAWL = "CC-MAIN-TEST-2026-02"
BUILTIN = ["url", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    """A lake with one indexed unit of a 2 x 100-page demo crawl, and the crawl's truth."""
    root = tmp_path_factory.mktemp("clean")
    lake, unit, truth = extracted_demo_unit(root, CRAWL, files=2, pages_per_file=100, seed=11)
    return lake, unit, {page["record_id"]: page for page in truth["pages"]}


def run(landed, settings: CleanSettings | None = None):
    """The cleaning stage's report, its documents, every rejection (extraction's and its
    own) and the truth."""
    lake, unit, truth = landed
    report = run_stage_work(stage_named(CLEANED), lake, settings, unit=unit, workers=1)
    assert report.counts["files"] == 2  # one part per WARC file of the unit
    docs = pl.concat([pl.read_parquet(lake.path(k)) for k in _files(lake, unit, CLEANED, "docs")])
    rejected = pl.concat(
        pl.read_parquet(lake.path(k))
        for zone in (EXTRACTED, CLEANED)
        for k in _files(lake, unit, zone, "rejected")
    )
    return report, docs, rejected, truth


def _files(lake, unit, zone: str, name: str) -> list[str]:
    return [f"{unit.part_prefix(zone, part)}/{name}.parquet" for part in range(2)]


def extraction_report(lake, unit) -> StageReport:
    return StageReport.from_summary(lake.read_json(f"{unit.prefix(EXTRACTED)}/{MARKER}"))


@pytest.fixture(scope="module")
def default_run(landed):
    return run(landed)


def kind(page: dict) -> str:
    return page["kind"].split(":")[0]


def test_every_response_is_kept_or_rejected_once(landed, default_run):
    report, docs, rejected, truth = default_run
    extraction = extraction_report(*landed[:2])
    readable = [p for p in truth.values() if p["kind"] != "broken:corrupt_gzip"]
    seen = docs["record_id"].to_list() + rejected["record_id"].to_list()
    assert len(seen) == len(set(seen)) == extraction.records_in
    assert set(seen) <= set(truth)
    assert extraction.records_in >= len(readable) - 2  # truncated records may be unreadable
    assert report.records_in == extraction.records_out  # cleaning reads every extracted doc
    assert report.records_out == docs.height


def test_the_unit_marker_holds_the_distribution_of_every_rule_over_every_document(
    landed, default_run
):
    report = default_run[0]
    lake, unit, _ = landed
    marker = lake.read_json(f"{unit.prefix(CLEANED)}/{MARKER}")
    parts = [lake.read_json(f"{unit.part_prefix(CLEANED, p)}/{MARKER}") for p in range(2)]
    words = "gopher_quality/n_words"
    assert sum(marker["histograms"][words]["bins"].values()) == report.records_in
    assert {key.split("/")[0] for key in marker["histograms"]} == set(BUILTIN)
    for key, histogram in marker["histograms"].items():
        for index, count in histogram["bins"].items():
            assert count == sum(p["histograms"][key]["bins"].get(index, 0) for p in parts)


def test_decisions_match_the_ground_truth(default_run):
    _, docs, rejected, truth = default_run
    kept_kinds = Counter(kind(truth[r]) for r in docs["record_id"])
    rejected_by = {r: f for r, f in rejected.select("record_id", "filter").iter_rows()}
    all_kinds = Counter(kind(p) for p in truth.values())
    assert kept_kinds["foreign"] == kept_kinds["non_html"] == 0
    assert kept_kinds["spam"] <= all_kinds["spam"] // 4
    # duplicates are the dedup stage's job: here they look like any good page
    kept_good = kept_kinds["good"] + kept_kinds["exact_dup"] + kept_kinds["near_dup"]
    assert kept_good >= 0.95 * (all_kinds["good"] + all_kinds["exact_dup"] + all_kinds["near_dup"])
    for record_id, page in truth.items():
        if page["kind"] == "non_html":
            assert rejected_by[record_id] == "extract:non_html"
        if page["kind"].startswith("foreign:"):
            assert rejected_by[record_id] == "language"


def test_kept_documents_carry_language_and_provenance(default_run):
    _, docs, _, truth = default_run
    assert set(docs["language"]) == {"en"}
    assert docs["language_score"].min() >= 0.65
    for row in docs.select("record_id", "url", "record_offset").iter_rows():
        assert (truth[row[0]]["url"], truth[row[0]]["offset"]) == row[1:]
    assert not docs["text"].str.contains("@").any()  # e-mail addresses are masked


def test_rejections_name_filter_and_reason(landed, default_run):
    report, _, rejected, _ = default_run
    extraction = extraction_report(*landed[:2])
    assert rejected["filter"].null_count() == rejected["reason"].null_count() == 0
    assert (rejected["reason"].str.len_chars() > 0).all()
    counts = dict(rejected.group_by("filter").len().iter_rows())
    for name in BUILTIN + ["language"]:
        assert report.dropped[f"filter:{name}"] == counts.get(name, 0)
    assert extraction.dropped["extract:non_html"] == counts["extract:non_html"]


def test_rejected_rows_point_at_the_extracted_text_or_copy_its_start(landed, default_run):
    lake, unit, _ = landed
    _, _, rejected, _ = default_run
    dropped = rejected.filter(~pl.col("filter").str.starts_with("extract:"))
    assert dropped.height and dropped["text"].null_count() == dropped.height
    extracted = pl.concat(
        pl.read_parquet(lake.path(k)) for k in _files(lake, unit, EXTRACTED, "docs")
    ).select("doc_id", "text")
    texts = dropped.join(extracted, on="doc_id", how="left")["text_right"]
    assert texts.null_count() == 0  # every dropped document's text, by its doc_id
    chars = 300
    everything = CleanSettings(rejected_text_chars=chars, gopher_quality={"min_doc_words": 10**5})
    _, _, copied, _ = run(landed, everything)  # drops them all
    copied = copied.filter(~pl.col("filter").str.starts_with("extract:"))
    assert copied["text"].null_count() == 0 and (copied["text"].str.len_chars() <= chars).all()
    starts = copied.join(extracted, on="doc_id").select(pl.col("text_right").str.slice(0, chars))
    assert copied["text"].to_list() == PIIMasker()(starts.rename({"text_right": "text"})).to_list()
    # the demo has no e-mail address: one dropped document that has
    one = pl.DataFrame({"doc_id": ["d"], "text": ["write to jane@mail.example.com today"]})
    (text,) = rejected_text(one, everything, PIIMasker())["text"]
    assert text == "write to email@example.com today"


def test_per_filter_drop_counts_are_numeric_metadata(landed, default_run):
    lake, unit, _ = landed
    report = default_run[0]
    metadata = stage_result(report.finish(), lake, unit.prefix(CLEANED)).metadata
    for name in BUILTIN + ["language"]:
        assert isinstance(metadata[f"dropped filter:{name}"], int)
        assert 0 <= metadata[f"drop_rate filter:{name}"] <= 1
    assert metadata["dropped filter:language"] > 0


PLUGIN = """
import polars as pl

class MaxWords:
    name = "max_words"

    def __init__(self, limit=100_000, label="too_long"):
        self.limit, self.label = limit, label

    def __call__(self, docs):
        words = docs["text"].str.count_matches(r"\\S+")
        return docs.select(
            pl.when(words > self.limit).then(pl.format("{}={}", pl.lit(self.label), words))
        ).to_series()


def few_questions(docs: pl.DataFrame, most=3) -> pl.Series:
    questions = docs["text"].str.count_matches("?", literal=True)
    reason = pl.when(questions > most).then(pl.format("questions={}", questions))
    return docs.select(reason).to_series()


def mentions(text, word):
    return word not in text
"""


def test_run_config_with_plugins_of_every_kind(landed, tmp_path, monkeypatch):
    (tmp_path / "lab_filters.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TOKENMILL_FILTER_MODULES", "lab_filters")
    recipe = Recipe.load()
    config = run_config_class(recipe, stage_named(CLEANED))(
        keep_languages=["en", "de"],
        skip_filters=["c4_quality"],
        plugin_filters=[
            PluginFilter(path="lab_filters.MaxWords", params={"limit": "700", "label": "words"}),
            PluginFilter(path="lab_filters.few_questions", params={"most": "4"}),
            PluginFilter(path="lab_filters.mentions", params={"word": '"Tuesday"'}),
        ],
    )
    settings = recipe.settings(CleanSettings, config_overrides(recipe, CleanSettings, config))
    report, docs, rejected, truth = run(landed, settings)
    by_filter = {name: frame for (name,), frame in rejected.group_by("filter", maintain_order=True)}
    assert "c4_quality" not in by_filter and report.dropped["filter:c4_quality"] == 0
    assert by_filter["max_words"]["reason"].str.starts_with("words=").all()
    assert by_filter["few_questions"]["reason"].str.starts_with("questions=").all()
    assert (by_filter["mentions"]["reason"] == "mentions").all()
    for plugin in ("max_words", "few_questions", "mentions"):
        assert report.dropped[f"filter:{plugin}"] == by_filter[plugin].height > 0
    assert (docs["text"].str.count_matches(r"\S+") <= 700).all()
    assert (docs["text"].str.count_matches("?", literal=True) <= 4).all()
    assert not docs["text"].str.contains("Tuesday", literal=True).any()
    german = [r for r, page in truth.items() if page["kind"] == "foreign:de"]
    german_drops = rejected.filter(pl.col("record_id").is_in(german))
    assert "language" not in set(german_drops["filter"])  # the language filter lets them pass
    kept_german = docs.filter(pl.col("record_id").is_in(german)).height
    assert kept_german > 0 and kept_german + german_drops.height == len(german)


def test_bad_settings_fail_at_once():
    with pytest.raises(ValueError, match="boilerpipe"):  # pydantic's ValidationError
        run_config_class(Recipe.load(), stage_named(EXTRACTED))(extractor="boilerpipe")
    with pytest.raises(ValueError, match="extractor"):
        ExtractSettings(extractor="boilerpipe")
    with pytest.raises(ValueError, match="language_backend"):
        ExtractSettings(language_backend="cld2")
    with pytest.raises(ValueError, match="rejected_text_chars"):
        CleanSettings(rejected_text_chars=-1)


def test_every_builtin_threshold_is_a_recipe_setting_with_finewebs_value():
    import dataclasses
    import inspect

    from tokenmill.filters import BUILTIN_FILTERS, default_filters
    from tokenmill.stages.cleaned import FILTER_SETTINGS

    default = CleanSettings()
    for cls in BUILTIN_FILTERS:
        parameters = set(inspect.signature(cls.__init__).parameters) - {"self"}
        assert set(cls.settings) == parameters, cls.name  # every constructor parameter
        names = [f.name for f in dataclasses.fields(FILTER_SETTINGS[cls.name])]
        assert names == list(cls.settings) and all(cls.settings.values()), cls.name
    built = default.chain().filters[1:]  # after the language filter
    assert [vars(f) for f in built] == [vars(f) for f in default_filters()]
    launchpad = run_config_class(Recipe.load(), stage_named(CLEANED)).to_config_schema()
    fields = launchpad.as_field().config_type.fields
    assert fields["gopher_quality"].config_type.fields["min_doc_words"].default_value == 50
    assert "stop words" in fields["gopher_quality"].config_type.fields["min_stop_words"].description


def test_a_threshold_set_in_the_recipe_or_a_run_changes_what_is_kept(landed, default_run):
    recipe = Recipe({"clean": {"gopher_quality": {"min_doc_words": 400}}}, "long-docs")
    settings = recipe.settings(CleanSettings)
    assert settings.gopher_quality.min_doc_words == 400
    assert settings.gopher_quality.max_doc_words == 100_000  # the others keep FineWeb's
    _, docs, rejected, _ = run(landed, settings)
    _, default_docs, _, _ = default_run[:4]
    assert 0 < docs.height < default_docs.height
    short = rejected.filter(
        (pl.col("filter") == "gopher_quality") & pl.col("reason").str.ends_with("<400")
    )
    assert short.height >= default_docs.height - docs.height
    # The same from a run's config, over the recipe: recorded as the run's override.
    config = run_config_class(Recipe.load(), stage_named(CLEANED))(
        gopher_quality={"min_doc_words": 400}
    )
    overrides = config_overrides(Recipe.load(), CleanSettings, config)
    assert overrides["gopher_quality"]["min_doc_words"] == 400
    assert Recipe.load().settings(CleanSettings, overrides).chain().filters[3].min_doc_words == 400


def test_an_unknown_or_mistyped_setting_fails_naming_the_recipe_and_the_key():
    recipe = Recipe({"clean": {"gopher_quality": {"min_words": 40}}}, "recipes/lab.yaml")
    with pytest.raises(ValueError, match=r"recipes/lab\.yaml.*clean\.gopher_quality.*min_words"):
        recipe.settings(CleanSettings)
    for section, key in (
        ({"gopher_quality": {"min_doc_words": "fifty"}}, r"clean\.gopher_quality\.min_doc_words"),
        ({"min_language_score": "high"}, r"clean\.min_language_score"),
        ({"keep_languages": "en"}, r"clean\.keep_languages"),
    ):
        with pytest.raises(ValueError, match=rf"recipes/lab\.yaml: {key}: Input should be"):
            Recipe({"clean": section}, "recipes/lab.yaml").settings(CleanSettings)


def _extracted_docs(lake, unit) -> pl.DataFrame:
    return pl.concat(pl.read_parquet(lake.path(k)) for k in _files(lake, unit, EXTRACTED, "docs"))


def _random_settings(rng: random.Random) -> CleanSettings:
    """Thresholds a researcher might try, now and then a filter skipped or PII kept."""
    return CleanSettings(
        min_language_score=rng.choice([0.5, 0.65, 0.8]),
        mask_pii=rng.random() > 0.2,
        skip_filters=rng.choice([[], [], [], ["c4_quality"], ["gopher_repetition"]]),
        # another list is measured from the URLs again; a threshold is judged from the signals
        url={"soft_word_threshold": rng.choice([1, 2, 3])}
        | rng.choice([{}, {}, {"banned_words": ["page", "html"]}]),
        gopher_repetition={
            "dup_line_frac": rng.choice([0.1, 0.3, 0.5]),
            "top_n_grams": [[2, rng.choice([0.1, 0.2])], [3, 0.18], [4, 0.16]],
            # below the signals' exact floor (0.05) now and then: measured from the text
            "dup_n_grams": [
                [n, rng.choice([0.06, 0.1, 0.2] + [0.03] * (n == 5))] for n in range(5, 11)
            ],
        },
        gopher_quality={
            "min_doc_words": rng.choice([20, 50, 200]),
            "min_stop_words": rng.choice([1, 2, 4]),
        },
        c4_quality={"min_num_sentences": rng.choice([1, 3, 5, 8])},
        fineweb_quality={
            "line_punct_thr": rng.choice([0.05, 0.12, 0.3]),
            "short_line_length": rng.choice([30, 30, 30, 20]),
        },
    )


def _judged_as_measured(docs: pl.DataFrame, settings: CleanSettings) -> set[str]:
    """The chain judging from stored signals keeps the documents, texts and reasons that the
    chain measuring the text does; the filters the signals served."""
    stored = settings.chain()
    measuring = FilterChain(stored.filters, stored.formatters)
    kept, rejected = stored.apply(docs)
    expected_kept, expected_rejected = measuring.apply(docs.select(DOC_SCHEMA.names))
    assert kept.select(DOC_SCHEMA.names).equals(expected_kept)
    columns = ["doc_id", "filter", "reason"]
    assert (
        rejected.select(columns)
        .sort("doc_id")
        .equals(expected_rejected.select(columns).sort("doc_id"))
    )
    return stored.stored


def test_stored_signals_judge_as_measuring_the_text_does(landed):
    docs = _extracted_docs(*landed[:2])
    texts = SHARED / "corpora" / "text" / "cc-main-2019-30-697docs.jsonl.gz"
    if texts.exists():  # real pages, when ../shared is there
        with gzip.open(texts) as lines:
            rows = [json.loads(line) for line in lines]
        real = pl.DataFrame(
            {"doc_id": [str(i) for i in range(len(rows))], "text": [r["text"] for r in rows]}
        ).with_columns(url=pl.lit("https://cc.example/"), language=pl.lit("en"))
        real = real.with_columns(language_score=pl.lit(0.9))
        real = pl.concat([real, SIGNALS.measure(real)], how="horizontal")
        docs = pl.concat([docs, real], how="diagonal_relaxed")
    rng = random.Random(20261125)
    served = Counter()
    for _ in range(16):
        served.update(_judged_as_measured(docs, _random_settings(rng)))
    # FineWeb's own filters from the stored signals in many tries, from the text in others
    assert all(served[n] >= 4 for n in BUILTIN), served
    assert served["url"] < 16, served
    assert served["gopher_repetition"] < 16 and served["fineweb_quality"] < 16, served
    assert not _judged_as_measured(docs, CleanSettings(mask_pii=False))  # another text


def test_an_extraction_without_the_url_signals_is_judged_as_one_with_them(landed):
    """An extraction from before the URL filter's signals were stored: they are measured from
    the URLs when it is read (`SignalProfile.completed`), and judge as the stored ones do."""
    docs = _extracted_docs(*landed[:2])
    older = docs.drop([c for c in docs.columns if c.startswith("url.")])
    completed = SIGNALS.completed(older)
    assert completed.select(docs.columns).equals(docs)
    settings = CleanSettings(url={"soft_word_threshold": 1}, keep_languages=[])
    assert "url" in settings.chain().stored
    kept, rejected = settings.chain().apply(docs)
    assert (rejected["filter"] == "url").sum() > 0
    kept_older, rejected_older = settings.chain().apply(completed)
    assert kept_older.select(kept.columns).equals(kept)
    assert rejected_older.select(rejected.columns).equals(rejected)


def test_a_recipe_change_never_reads_the_warc_files(landed, tmp_path):
    lake, unit, _ = landed
    copy = tmp_path / "lake"
    shutil.copytree(lake.path(EXTRACTED), copy / EXTRACTED)
    shutil.copytree(lake.path(MANIFESTS), copy / MANIFESTS)
    elsewhere = Lake.from_url(str(copy))  # no landing zone, no raw_crawl: no WARC at all
    settings = CleanSettings(keep_languages=["en", "de"], gopher_quality={"min_doc_words": 100})
    report = run_stage_work(stage_named(CLEANED), elsewhere, settings, unit=unit, workers=1)
    expected = run_stage_work(stage_named(CLEANED), lake, settings, unit=unit, workers=1)
    assert 0 < report.records_out == expected.records_out < report.records_in
    for part in range(2):
        key = f"{unit.part_prefix(CLEANED, part)}/docs.parquet"
        assert pl.read_parquet(elsewhere.path(key)).equals(pl.read_parquet(lake.path(key)))


@pytest.mark.integration
def test_preview_counts_what_materializing_the_recipe_then_gives(landed, tmp_path):
    from tokenmill.reports.preview import KEPT, preview
    from tokenmill.reports.preview_report import html_report, text_report

    lake, unit, _ = landed
    current = CleanSettings()
    proposed = CleanSettings(  # every language, longer documents, any stop words
        keep_languages=[], gopher_quality={"min_doc_words": 150, "min_stop_words": 0}
    )
    result = preview(lake, [unit], current, proposed, samples=2)
    assert "text" not in result.columns_read  # every filter judged from stored signals
    for name, settings in (("current", current), ("proposed", proposed)):
        report = run_stage_work(stage_named(CLEANED), lake, settings, unit=unit, workers=1)
        assert result.kept[name].documents == report.records_out
        for flt, count in result.dropped_by[name].items():
            assert report.dropped[f"filter:{flt}"] == count, flt
    flips = result.kept["proposed"].documents - result.kept["current"].documents
    moved = result.transitions
    dropped = sum(t.documents for (now, _), t in moved.items() if now == KEPT)
    kept = sum(t.documents for (_, then), t in moved.items() if then == KEPT)
    assert kept - dropped == flips and dropped > 0 and kept > 0
    assert (KEPT, ("gopher_quality", "n_words")) in moved
    assert all(len(t.samples) <= 2 for t in moved.values())
    assert "documents whose fate changes" in text_report(result)
    # every document read is in each rule's histogram, both recipes' thresholds marked
    words = result.histograms["gopher_quality/n_words"]
    assert sum(words["bins"].values()) == result.documents
    assert result.thresholds["current"]["gopher_quality/n_words"] == ["<50", ">100000"]
    assert result.thresholds["proposed"]["gopher_quality/n_words"] == ["<150", ">100000"]
    page = html_report(result)
    assert "clean.gopher_quality.min_doc_words: 50 -&gt; 150" in page  # the settings changed
    pictures = page.split("<h3>distributions</h3>")[1]
    assert pictures.count("<img") >= 10 and "min_doc_words" not in pictures  # rules' labels
    assert "current &lt;50 &gt;100000; proposed &lt;150 &gt;100000" in page
    # A plug-in measures the text: the text is read, the counts still match.
    with_plugin = CleanSettings(plugin_filters=[{"path": "tokenmill.filters.PIIMasker"}])
    assert "text" in preview(lake, [unit], current, with_plugin).columns_read
