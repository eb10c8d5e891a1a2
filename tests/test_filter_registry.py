"""A built-in filter is one module and its registration: a maximum digit ratio, written here as
a module of its own and registered, is measured and judged by the chain in this process, and,
registered before tokenmill.stages loads (as the built-in ones are), reaches the recipe
settings, the extracted signals, the preview and the settings reference without another edit.
The registry is restored after each test, so the others see the default filters."""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tokenmill.filters import BUILTIN_FILTERS, FilterChain, default_filters, load_filter, registry
from tokenmill.filters.histograms import rule_thresholds
from tokenmill.filters.registry import builtin_filters, register, settings_types, unregister
from tokenmill.filters.signals import EXTRACTED_SIGNALS, SignalProfile
from tokenmill.runtime.plugins import FILTER_MODULES_ENV
from tokenmill.stages.cleaned import CleanSettings

PROJECT_DIR = Path(__file__).resolve().parents[1]
DEFAULTS = ["url", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]

DIGIT_RATIO = '''
import polars as pl

from tokenmill.filters.protocol import Filter
from tokenmill.filters.registry import register
from tokenmill.filters.rules import Rule


@register
class DigitRatioFilter(Filter):
    """Drops documents whose characters are too often digits."""

    name = "digit_ratio"
    description = "Digit ratio filter"
    signals = ("digits", "chars")
    settings = {"max_digit_ratio": "Largest share of a document's characters that are digits"}

    def __init__(self, max_digit_ratio: float | None = 0.25):
        self.max_digit_ratio = max_digit_ratio

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        text = docs["text"].fill_null("")
        return pl.DataFrame(
            {"digits": text.str.count_matches(r"\\d"), "chars": text.str.len_chars()}
        )

    def rules(self) -> list[Rule]:
        ratio = pl.col("digits") / pl.col("chars")
        return [Rule("digit_ratio", ratio, ">", self.max_digit_ratio)]
'''


@pytest.fixture
def lab(tmp_path, monkeypatch) -> Path:
    """A folder on the import path holding the package `lab_builtins` with the filter's module
    (importing it registers the filter)."""
    package = tmp_path / "lab_builtins"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "digit_ratio.py").write_text(DIGIT_RATIO)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.fixture
def digit_ratio(lab):
    """The digit ratio filter registered in this process, unregistered afterwards."""
    module = importlib.import_module("lab_builtins.digit_ratio")
    yield module.DigitRatioFilter
    unregister(module.DigitRatioFilter)
    for name in ("lab_builtins.digit_ratio", "lab_builtins"):
        sys.modules.pop(name, None)
    assert [cls.name for cls in builtin_filters()] == DEFAULTS
    assert not hasattr(registry, "DigitRatioFilterSettings")


def test_the_built_in_filters_are_registered_in_finewebs_order():
    assert [cls.name for cls in BUILTIN_FILTERS] == DEFAULTS == list(settings_types())
    assert [f.name for f in EXTRACTED_SIGNALS.filters] == DEFAULTS
    assert [type(f) for f in default_filters()] == list(builtin_filters())


def test_a_registered_filter_is_measured_and_judged_from_its_stored_signals(digit_ratio):
    assert [cls.name for cls in builtin_filters()] == [*DEFAULTS, "digit_ratio"]
    assert isinstance(default_filters()[-1], digit_ratio)
    columns = list(SignalProfile.builtin().columns())
    assert columns[-2:] == ["digit_ratio.digits", "digit_ratio.chars"]
    assert columns[:-2] == list(EXTRACTED_SIGNALS.columns())  # the others as they were
    profile = SignalProfile([digit_ratio()], [])  # judged on the text it was measured on
    texts = ["Call 555 0123 4567 or 555 0199 now!", "Plain words only, not one number here"]
    docs = pl.DataFrame({"text": texts, "url": ["https://example.com/a"] * 2})
    docs = pl.concat([docs, profile.measure(docs)], how="horizontal")
    assert docs["digit_ratio.digits"].to_list() == [18.0, 0.0]
    assert docs["digit_ratio.chars"].to_list() == [35.0, 37.0]
    chain = FilterChain([digit_ratio()], signals=profile)
    assert chain.stored == {"digit_ratio"}
    kept, rejected = chain.apply(docs)
    assert kept["text"].to_list() == texts[1:]
    assert rejected["reason"].to_list() == ["digit_ratio=0.5143>0.25"]
    assert rule_thresholds(chain) == {"digit_ratio/digit_ratio": [">0.25"]}
    with pytest.raises(ValueError, match="named 'digit_ratio' already"):
        register(digit_ratio)


def test_a_registered_filters_settings_unpickle_by_their_name(digit_ratio):
    kind = settings_types()["digit_ratio"]
    assert (kind.__module__, kind.__name__) == (registry.__name__, "DigitRatioFilterSettings")
    assert getattr(registry, kind.__name__) is kind
    strict = kind(max_digit_ratio=0.1)
    assert pickle.loads(pickle.dumps(strict)) == strict
    assert strict.build().max_digit_ratio == 0.1
    assert kind().build().max_digit_ratio == 0.25
    with pytest.raises(ValueError, match=r"max_digit_ratio: 1.5 is out of range: \[0, 1\]"):
        kind(max_digit_ratio=1.5)


@pytest.mark.integration
def test_the_default_settings_unpickle_in_a_fresh_process_as_a_worker_does():
    settings = CleanSettings(gopher_quality={"min_doc_words": 7}, url={"extra_urls": ["a"]})
    read = (
        "import pickle, sys; settings = pickle.loads(sys.stdin.buffer.read()); "
        "print(type(settings).__name__, type(settings.gopher_quality).__name__,"
        " settings.gopher_quality.min_doc_words, settings.url.extra_urls)"
    )
    done = subprocess.run(
        [sys.executable, "-c", read],
        input=pickle.dumps(settings),
        capture_output=True,
        cwd=PROJECT_DIR,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert done.stdout.decode().split() == [
        "CleanSettings",
        "GopherQualityFilterSettings",
        "7",
        "['a']",
    ]


def test_a_filter_that_does_not_derive_from_filter_keeps_what_it_declares(tmp_path, monkeypatch):
    (tmp_path / "lab_plugins.py").write_text(
        "class Counted:\n"
        "    name = 'counted'\n"
        "    uses_words = True\n"
        "    limit = 3\n"
        "    def __call__(self, docs):\n"
        "        import polars as pl\n"
        "        n = docs['_words'].list.len()\n"
        "        return pl.select(pl.when(n > self.limit).then(pl.lit('long'))).to_series()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(FILTER_MODULES_ENV, "lab_plugins")
    counted = load_filter("lab_plugins.Counted")
    assert (counted.name, counted.uses_words, counted.reads_text, counted.rewrites) == (
        "counted",
        True,
        True,
        False,
    )
    assert counted.limit == 3 and counted.signals == () and counted.rules() == []
    docs = pl.DataFrame({"text": ["one two", "one two three four"], "url": ["u", "u"]})
    kept, rejected = FilterChain([counted], signals=EXTRACTED_SIGNALS).apply(docs)
    assert kept["text"].to_list() == ["one two"] and rejected["reason"].to_list() == ["long"]


# Run in a fresh process: the filter's module is imported (registering it) before
# tokenmill.stages, as the built-in filters are registered when tokenmill.filters loads.
THROUGH_THE_PIPELINE = """
import dataclasses, json, pickle, sys
from pathlib import Path

import lab_builtins.digit_ratio  # the registration
import reference_pages
from testkit.demo_pipeline import extracted_demo_unit
from tokenmill.data_assets.recipe import run_config_class
from tokenmill.recipes.recipe import Recipe
from tokenmill.reports.preview import KEPT, preview
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.stages.cleaned import CleanSettings
from tokenmill.stages.extracted import EXTRACTED_SCHEMA

root = Path(sys.argv[1])
(root / "digits.yaml").write_text("clean:\\n  digit_ratio: {max_digit_ratio: 0.004}\\n")
(root / "typo.yaml").write_text("clean:\\n  digit_ratio: {max_digits: 0.004}\\n")
recipe = Recipe.load(root / "digits.yaml")
strict = recipe.settings(CleanSettings)
try:
    Recipe.load(root / "typo.yaml").settings(CleanSettings)
    typo = None
except ValueError as error:
    typo = str(error)
model = run_config_class(recipe, stage_named("cleaned")).model_json_schema()
lake, unit, _ = extracted_demo_unit(root, "CC-MAIN-TEST-2026-05", 1, 60, 3)
result = preview(lake, [unit], CleanSettings(), strict)
cleaned = run_stage_work(stage_named("cleaned"), lake, strict, unit=unit, workers=1)
print(json.dumps({
    "fields": [f.name for f in dataclasses.fields(CleanSettings)],
    "default": CleanSettings().digit_ratio.max_digit_ratio,
    "recipe": strict.digit_ratio.max_digit_ratio,
    "pickled": pickle.loads(pickle.dumps(strict)) == strict,
    "typo": typo,
    "model": model["$defs"]["DigitRatioFilterSettingsConfig"],
    "schema": EXTRACTED_SCHEMA.names,
    "read": result.columns_read,
    "documents": result.documents,
    "dropped_by": {name: dict(counts) for name, counts in result.dropped_by.items()},
    "newly_dropped": result.transitions[(KEPT, ("digit_ratio", "digit_ratio"))].documents,
    "histogram": sum(result.histograms["digit_ratio/digit_ratio"]["bins"].values()),
    "thresholds": {k: found["digit_ratio/digit_ratio"] for k, found in result.thresholds.items()},
    "cleaned": cleaned.dropped["filter:digit_ratio"],
    "reference": reference_pages.generated("settings"),
}))
"""


@pytest.mark.integration
def test_a_registered_filter_reaches_the_recipe_the_extraction_and_the_preview(lab, tmp_path):
    path = [str(lab), str(PROJECT_DIR), str(PROJECT_DIR / "docs")]
    done = subprocess.run(
        [sys.executable, "-c", THROUGH_THE_PIPELINE, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=PROJECT_DIR,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # the recipe settings: a field after the other filters', set from a recipe file
    first = found["fields"].index(DEFAULTS[0])
    assert found["fields"][first : first + len(DEFAULTS) + 1] == [*DEFAULTS, "digit_ratio"]
    assert (found["default"], found["recipe"], found["pickled"]) == (0.25, 0.004, True)
    assert "clean.digit_ratio: unknown settings ['max_digits']" in found["typo"]
    assert found["model"]["properties"]["max_digit_ratio"]["default"] == 0.004
    # the extraction's signal columns: after the other filters', before the stored rewrites
    schema = found["schema"]
    assert schema.index("digit_ratio.digits") == schema.index("fineweb_quality.n_words") + 1
    assert schema[-2:] == ["pii.cut", "c4_quality.removed_lines"]
    # the preview, judged from the stored signals: the stricter threshold drops more
    assert "text" not in found["read"]
    current, proposed = found["dropped_by"]["current"], found["dropped_by"]["proposed"]
    assert proposed["digit_ratio"] > current.get("digit_ratio", 0)
    assert found["newly_dropped"] > 0 and found["histogram"] == found["documents"]
    assert found["thresholds"] == {"current": [">0.25"], "proposed": [">0.004"]}
    assert found["cleaned"] == proposed["digit_ratio"]  # what materializing it drops
    # the settings reference
    reference = found["reference"]
    assert "`clean.digit_ratio`" in reference and "`max_digit_ratio`" in reference
    assert "Largest share of a document's characters that are digits" in reference
