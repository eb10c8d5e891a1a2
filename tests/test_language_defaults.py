"""FineWeb-2's per-language settings as shipped (tokenmill/languages/fineweb2.json) and their
loader: every value is a real setting of a built-in filter, of the type it holds and in range;
every FineWeb-2 config has one entry, reachable by its lid.176 label or its config name; English
keeps FineWeb's values."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import typing
from importlib.resources import files
from pathlib import Path

import pytest

from tokenmill.filters.registry import settings_types
from tokenmill.languages import defaults
from tokenmill.languages.defaults import known_languages, language_defaults

DATA = json.loads(files("tokenmill.languages").joinpath("fineweb2.json").read_text("utf-8"))
LANGUAGES = DATA["languages"]
KINDS = settings_types()


def _json_type(hint) -> type:
    """The JSON type a setting's annotation (``float | None``, ``list[list[float]]``) wants."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    hint = args[0] if typing.get_origin(hint) in (typing.Union, type(int | None)) else hint
    return list if typing.get_origin(hint) is list else hint


def _fields(filter_name: str) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(KINDS[filter_name])}


def _numbers(value) -> list:
    return [n for v in value for n in _numbers(v)] if isinstance(value, list) else [value]


def test_the_file_names_its_source_commit_and_licence():
    assert re.fullmatch(r"huggingface/fineweb-2 configs/ \(commit [0-9a-f]{40}\)", DATA["source"])
    assert DATA["licence"] == "Apache-2.0"
    assert defaults.source() == DATA["source"]
    notice = files("tokenmill.languages").joinpath("NOTICE.md").read_text("utf-8")
    assert DATA["source"].split("commit ")[1].rstrip(")") in notice
    licence = files("tokenmill.languages").joinpath("FINEWEB2_LICENSE").read_text("utf-8")
    assert "Apache License" in licence and "Version 2.0" in licence


def test_every_fineweb2_config_has_one_entry_reachable_by_label_or_config_name():
    assert len(LANGUAGES) == DATA["configs"] > 1000
    configs = [entry["config"] for entry in LANGUAGES.values()]
    assert len(set(configs)) == len(configs)
    for label, entry in LANGUAGES.items():
        config = entry["config"]
        assert re.fullmatch(r"[a-z]{3}_[A-Z][a-z]{3}", config)
        assert entry["script"] == config.split("_")[1]
        # a lid.176 label (ISO 639-1, else 639-3) or the config's own name
        assert label == config or re.fullmatch(r"[a-z]{2,3}", label), label
        assert language_defaults(label).config == config
        assert language_defaults(config).config == config
        assert language_defaults(config).label == config
    assert known_languages() == set(LANGUAGES) | set(configs) | {"en", "und"}


def test_every_lid176_label_but_english_and_serbo_croatian_has_defaults():
    fasttext = pytest.importorskip("fasttext")
    from tokenmill.text.language import lite_model_path

    labels = {
        label.removeprefix("__label__")
        for label in fasttext.load_model(lite_model_path()).get_labels()
    }
    assert len(labels) == 176
    assert labels - set(LANGUAGES) == {"en", "sh"}


def test_every_filter_key_is_a_setting_of_a_builtin_filter_of_the_type_it_holds():
    for label, entry in LANGUAGES.items():
        assert set(entry["filters"]) <= set(KINDS), label
        for filter_name, values in entry["filters"].items():
            fields = _fields(filter_name)
            assert values and set(values) <= set(fields), (label, filter_name)
            for setting, value in values.items():
                wanted = _json_type(fields[setting].type)
                assert type(value) is wanted, (label, setting, value)
                if setting.endswith("_n_grams"):
                    assert all(type(n) is int and type(t) is float for n, t in value), label


def test_values_are_in_range():
    for label, entry in LANGUAGES.items():
        assert 0 < entry["language_id_threshold"] <= 1, label
        for filter_name, values in entry["filters"].items():
            for setting, value in values.items():
                assert all(n >= 0 for n in _numbers(value)), (label, setting)
            KINDS[filter_name](**values)  # the settings' own range check
        quality = entry["filters"]["gopher_quality"]
        assert quality["min_avg_word_length"] <= quality["max_avg_word_length"], label
        sizes = [n for n, _ in entry["filters"]["gopher_repetition"]["dup_n_grams"]]
        assert sizes == [5, 6, 7, 8, 9, 10], label


def test_fineweb2_every_language_pipeline_settings_are_settings():
    pipeline = defaults.fineweb2_pipeline_settings()
    assert "c4_quality" not in pipeline
    for filter_name, values in pipeline.items():
        KINDS[filter_name](**values)


@pytest.mark.parametrize(
    "label, config, script",
    [
        ("de", "deu_Latn", "Latn"),
        ("fr", "fra_Latn", "Latn"),
        ("ja", "jpn_Jpan", "Jpan"),
        ("zh", "cmn_Hani", "Hani"),
        ("th", "tha_Thai", "Thai"),
        ("sr", "srp_Cyrl", "Cyrl"),
        ("srp_Latn", "srp_Latn", "Latn"),
        ("sq", "als_Latn", "Latn"),  # Tosk Albanian (ISO 639-3 als)
        ("als", "gsw_Latn", "Latn"),  # lid.176's als: Alemannic
        ("ku", "kmr_Latn", "Latn"),
        ("ckb", "ckb_Arab", "Arab"),
        ("yue", "yue_Hani", "Hani"),
    ],
)
def test_languages_resolve_to_their_config_with_stop_words(label, config, script):
    found = language_defaults(label)
    assert (found.label, found.config, found.script) == (label, config, script)
    assert found.stop_words and all(isinstance(word, str) for word in found.stop_words)
    assert tuple(found.filters["gopher_quality"]["stop_words"]) == found.stop_words
    assert 0 < found.language_id_threshold <= 1
    assert {"gopher_quality", "gopher_repetition", "fineweb_quality"} <= set(found.filters)


def test_english_undetermined_and_unknown_labels_have_no_overrides():
    assert "en" not in LANGUAGES and "und" not in LANGUAGES
    english = language_defaults("en")
    assert (english.config, english.script, english.stop_words) == (None, "Latn", None)
    assert english.filters == {} and english.language_id_threshold is None
    for label in ("und", "xx", "__label__de", "DE", ""):
        found = language_defaults(label)
        assert found.label == label and found.config is None and found.script is None
        assert found.filters == {} and found.stop_words is None
    assert {"en", "und", "de", "ja", "zh", "th", "fr"} <= known_languages()
    assert "xx" not in known_languages()


def test_defaults_are_cached_and_read_only():
    found = language_defaults("de")
    assert language_defaults("de") is found
    with pytest.raises(TypeError):
        found.filters["gopher_quality"]["max_avg_word_length"] = 1.0  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.script = "Cyrl"  # type: ignore[misc]
    settings = KINDS["gopher_repetition"](**found.filters["gopher_repetition"])
    assert settings.top_n_grams == [[2, 0.169], [3, 0.153], [4, 0.137]]


def test_the_package_imports_nothing_from_tokenmill():
    package = Path(defaults.__file__).parent
    for module in package.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(name.split(".")[0] == "tokenmill" for name in names), module


def test_parity_tables_are_of_known_languages_and_in_range():
    data = json.loads(files("tokenmill.languages").joinpath("parity.json").read_text("utf-8"))
    english = data["english_median_alpha_share"]
    assert 0.5 < english < 1
    offsets, stop_words, scores = data["alpha_offsets"], data["stop_words"], data["language_scores"]
    assert len(offsets) > 100 and not {"en"} & (set(offsets) | set(stop_words) | set(scores))
    assert set(stop_words) | set(scores) <= set(offsets)
    assert all(0 <= score < 0.65 for score in scores.values())
    for label, offset in offsets.items():
        assert label in LANGUAGES, label
        assert -english <= offset <= 1 - english, label
        config = LANGUAGES[label]["config"]
        for name in (label, config):  # by its label and its config name
            found = language_defaults(name)
            assert (
                found.alpha_offset,
                found.stop_words_reached,
                found.language_score_reached,
            ) == (offset, stop_words.get(label), scores.get(label))
    assert all(reached in (0, 1) for reached in stop_words.values())
    for table in ("word_ratios", "content_word_ratios"):
        assert set(data[table]) <= set(offsets) and len(data[table]) > 100, table
        assert all(0.1 < ratio < 5 for ratio in data[table].values()), table
    for label, ratio in data["content_word_ratios"].items():
        assert language_defaults(LANGUAGES[label]["config"]).content_word_ratio == ratio
    # the languages whose scripts mark only their clauses' ends: Thai, Lao, Tibetan
    assert {"th", "lo", "bo"} <= set(data["sentence_ratios"]) <= set(offsets)
    for label, ratio in data["sentence_ratios"].items():
        assert language_defaults(label).sentence_ratio == ratio > 0.5
        assert LANGUAGES[label]["script"] in ("Thai", "Laoo", "Tibt")
    # measured where the alpha-word rule decides, for the languages of translated help pages
    near = data["alpha_offsets_near_threshold"]
    assert {"de", "es", "fr", "ja", "ru", "zh"} <= set(near) and "en" not in near
    for label, offset in near.items():
        assert label in LANGUAGES and abs(offset) < 0.1, label
        assert language_defaults(LANGUAGES[label]["config"]).alpha_offset_near == offset
