"""Each language's defaults for the built-in filters, by the label language identification gives
it: FineWeb-2's per-language settings (``fineweb2.json``, written by
``scripts/fineweb2_settings.py`` from huggingface/fineweb-2's ``configs/``; see NOTICE.md).

Labels are fastText lid.176's ("de", "ja", "zh", "arz", ...) where FineWeb-2's config is that
label's language in its default script, else FineWeb-2's config name ("srp_Latn", GlotLID's
style); the config name of an entry keyed by a lid.176 label ("deu_Latn" for "de") resolves to it
too. English ("en") keeps FineWeb's own values (no overrides), as do "und" and any label not
known here. Setting names are our filters' (``filters`` maps a filter's name to its settings'
overrides; gopher_quality's include ``stop_words``).

Caveats: FineWeb-2 derived the word-based values (word lengths, stop words, n-grams, newlines per
word) with datatrove's word tokenizer for each language (``word_tokenizer``), and the
``language_id_threshold`` is a GlotLID score, not a lid.176 one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib.resources import files
from types import MappingProxyType
from typing import Any

DATA_FILE = "fineweb2.json"
ENGLISH = "en"
UNDETERMINED = "und"
_EMPTY: Mapping[str, Any] = MappingProxyType({})
# Gopher quality's minimum share of words holding a letter (named as datatrove's), and its
# minimum of distinct stop words.
ALPHA_SHARE = "max_non_alpha_words_ratio"
MIN_STOP_WORDS = "min_stop_words"
# Gopher quality's bounds on a document's words (punctuation tokens not counted).
WORD_BOUNDS = ("min_doc_words", "max_doc_words")
# Languages whose writing puts a period after a number used as an ordinal ("5. artikla",
# "15. května", "2020. május 15."): there a period between a number and a lowercase word ends no
# sentence. By FineWeb-2 config (the language in its scripts).
ORDINAL_PERIODS = frozenset(
    {
        "bos_Latn",
        "ces_Latn",
        "dan_Latn",
        "deu_Latn",
        "ekk_Latn",
        "eus_Latn",
        "fao_Latn",
        "fin_Latn",
        "hrv_Latn",
        "hun_Latn",
        "isl_Latn",
        "lvs_Latn",
        "nno_Latn",
        "nob_Latn",
        "slk_Latn",
        "slv_Latn",
        "srp_Cyrl",
        "srp_Latn",
        "tur_Latn",
    }
)


@dataclass(frozen=True)
class LanguageDefaults:
    """A language's overrides of the filters' defaults (FineWeb's English values). ``config``:
    the FineWeb-2 config they come from ("deu_Latn"; None for English and unknown labels);
    ``stop_words``: None keeps the filter's own; ``filters``: filter name -> setting -> value,
    read-only (pairs such as top_n_grams as tuples)."""

    label: str
    config: str | None = None
    script: str | None = None
    language_id_threshold: float | None = None
    stop_words: tuple[str, ...] | None = None
    filters: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _EMPTY)
    name: str | None = None  # the language's English name (datatrove's tokenizer assignment)
    word_tokenizer: str | None = None  # datatrove's word tokenizer FineWeb-2 measured with
    # Characters that word tokenizer keeps inside a word between two letters, where the word
    # scanner (spaCy's English rules) splits: "-" in German's "E-Mail", "·" in Catalan's
    # "col·lecció" (``word_joins.json``, written by scripts/word_joins.py).
    joins: tuple[str, ...] = ()
    # Measured on its translation of a text English also has (``parity.json``, written by
    # scripts/parity.py; None: not measured): how much lower (negative) or higher its
    # alpha-word share is than English's; how many words it takes per English word (all
    # tokens; and without punctuation tokens, ``content_word_ratio``); for a language that
    # marks only its clauses' ends (Thai, Lao, Tibetan), how many per English sentence
    # (``sentence_ratio``, C4's sentences read it); how many distinct stop words,
    # and which score of the bundled language-ID model, 19 pages in 20 reach at least, where
    # under FineWeb's minimum.
    alpha_offset: float | None = None
    # The same, on technical pages where English's share is near FineWeb's minimum (where the
    # rule decides; ``alpha_offsets_near_threshold``): the threshold follows it where measured.
    alpha_offset_near: float | None = None
    word_ratio: float | None = None
    content_word_ratio: float | None = None
    sentence_ratio: float | None = None
    ordinal_periods: bool = False  # see ORDINAL_PERIODS
    stop_words_reached: int | None = None
    language_score_reached: float | None = None

    def settings_of(self, filter_name: str) -> dict[str, Any]:
        """The settings of a filter this language changes: FineWeb-2's pipeline-wide ones
        (for every language it has a config for), then the language's own."""
        if self.config is None:
            return {}
        shared = fineweb2_pipeline_settings().get(filter_name, _EMPTY)
        return {**shared, **self.filters.get(filter_name, _EMPTY)}

    def fair_settings_of(self, filter_name: str, english: Mapping[str, Any]) -> dict[str, Any]:
        """``settings_of``, each of the language's own thresholds no stricter than FineWeb's
        English value (``english``: the filter's defaults), the alpha-word share's minimum
        English's, lowered where the language's words hold fewer letters on the same text:
        by its offset measured near that minimum (``alpha_offset_near``), else as
        ``_alpha_share`` estimates it from prose (``alpha_offset``, ``word_ratio``): the same
        page passes as its English original would; the bounds on a document's words English's
        times its ``content_word_ratio`` (a page of Finnish holds fewer words than its English
        original, one of Japanese more); and the minimum of stop words no more than its plain
        prose reaches (``stop_words_reached``)."""
        own = self.filters.get(filter_name, _EMPTY)
        values = {
            key: no_stricter(key, value, english[key]) if key in own else value
            for key, value in self.settings_of(filter_name).items()
        }
        measured = self.alpha_offset_near is not None or self.alpha_offset is not None
        if ALPHA_SHARE in english and english[ALPHA_SHARE] and measured:
            # measured with our words (FineWeb-2's value: with its own word tokenizers)
            values[ALPHA_SHARE] = max(0.0, round(self._alpha_share(english[ALPHA_SHARE]), 3))
        if self.content_word_ratio is not None:
            for key in WORD_BOUNDS:
                if english.get(key) is not None and key not in own:
                    values[key] = max(1, round(english[key] * self.content_word_ratio))
        if MIN_STOP_WORDS in english and self.stop_words_reached is not None:
            minimum = values.get(MIN_STOP_WORDS, english[MIN_STOP_WORDS])
            if minimum is not None:
                values[MIN_STOP_WORDS] = min(minimum, self.stop_words_reached)
        return values

    def _alpha_share(self, threshold: float) -> float:
        """The minimum alpha-word share at which a page passes as its English original with
        ``threshold`` would: ``threshold`` moved by the offset measured near it (up, for a
        language whose words hold a letter more often: Spanish's articles and prepositions).
        Without one, estimated from prose, never above ``threshold``: English prose has a
        share ``plain`` (the rest: punctuation); at its threshold a page holds ``extra = plain
        / threshold - 1`` tokens without a letter (numbers, commands, symbols) per English
        prose token. The same page in this language holds its prose in ``word_ratio`` times
        as many tokens, ``own`` of them with a letter, and about as many of those other
        tokens: its share is ``own * word_ratio / (word_ratio + extra)``; without a word ratio
        (or for a threshold above English prose's share) English's lowered by the offset."""
        if self.alpha_offset_near is not None:
            return threshold + self.alpha_offset_near
        plain = _english_share()
        extra = plain / threshold - 1
        if self.word_ratio is None or extra <= 0:
            return threshold + min(self.alpha_offset, 0.0)
        own = plain + self.alpha_offset
        return min(threshold, own * self.word_ratio / (self.word_ratio + extra))


SHIPPED_FILES = (DATA_FILE, "parity.json", "word_joins.json")


@cache
def _shipped(name: str) -> bytes:
    return files(__package__).joinpath(name).read_bytes()


@cache
def _data() -> dict[str, Any]:
    return json.loads(_shipped(DATA_FILE))


@cache
def data_version() -> str:
    """A digest of the values shipped here (FineWeb-2's settings, the parity tables, the word
    joins): what a recipe judging languages other than English by their defaults is made of."""
    digest = hashlib.sha256()
    for name in SHIPPED_FILES:
        digest.update(_shipped(name))
    return digest.hexdigest()[:12]


@cache
def _joins() -> dict[str, list[str]]:
    return json.loads(_shipped("word_joins.json"))["joins"]


@cache
def _parity_file() -> dict[str, Any]:
    return json.loads(_shipped("parity.json"))


@cache
def _parity() -> dict[str, dict[str, Any]]:
    """``parity.json``'s tables, each by config name."""
    data = _parity_file()
    languages = _data()["languages"]
    return {
        table: {languages[label]["config"]: value for label, value in data[table].items()}
        for table in (
            "alpha_offsets",
            "alpha_offsets_near_threshold",
            "word_ratios",
            "content_word_ratios",
            "sentence_ratios",
            "stop_words",
            "language_scores",
        )
    }


def _english_share() -> float:
    return _parity_file()["english_median_alpha_share"]


@cache
def _entries() -> dict[str, dict[str, Any]]:
    """The file's languages by label, and by config name where that is not their label."""
    languages = _data()["languages"]
    aliases = {entry["config"]: entry for label, entry in languages.items()}
    return {**aliases, **languages}


def known_languages() -> frozenset[str]:
    """Every label with defaults here (lid.176 labels and FineWeb-2 config names), "en" and
    "und"."""
    return frozenset(_entries()) | {ENGLISH, UNDETERMINED}


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({key: _frozen(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    return value


@lru_cache(maxsize=4096)
def language_defaults(label: str) -> LanguageDefaults:
    """The defaults for a language label, as the language-ID model gives it (exact, case
    sensitive). English, "und" and unknown labels have no overrides."""
    if label == ENGLISH:
        return LanguageDefaults(label, script="Latn", name="English")
    entry = _entries().get(label)
    if entry is None:
        return LanguageDefaults(label)
    stop_words = entry.get("stop_words")
    filters = dict(entry["filters"])
    if stop_words is not None:
        filters["gopher_quality"] = {**filters.get("gopher_quality", {}), "stop_words": stop_words}
    return LanguageDefaults(
        label=label,
        config=entry["config"],
        script=entry["script"],
        language_id_threshold=entry.get("language_id_threshold"),
        stop_words=None if stop_words is None else tuple(stop_words),
        filters=_frozen(filters),
        name=entry.get("name"),
        word_tokenizer=entry.get("word_tokenizer"),
        joins=tuple(_joins().get(label) or _joins().get(entry["config"]) or ()),
        alpha_offset=_parity()["alpha_offsets"].get(entry["config"]),
        alpha_offset_near=_parity()["alpha_offsets_near_threshold"].get(entry["config"]),
        word_ratio=_parity()["word_ratios"].get(entry["config"]),
        content_word_ratio=_parity()["content_word_ratios"].get(entry["config"]),
        sentence_ratio=_parity()["sentence_ratios"].get(entry["config"]),
        ordinal_periods=entry["config"] in ORDINAL_PERIODS,
        stop_words_reached=_parity()["stop_words"].get(entry["config"]),
        language_score_reached=_parity()["language_scores"].get(entry["config"]),
    )


# FineWeb-2's per-language thresholds: under a lower bound a document is dropped, over an upper
# one too (pairs such as top_n_grams: (n, upper bound) per n).
LOWER_BOUNDS = frozenset({"line_punct_thr", "min_avg_word_length", "max_non_alpha_words_ratio"})
UPPER_BOUNDS = frozenset(
    {"new_line_ratio", "max_avg_word_length", "dup_line_frac", "top_n_grams", "dup_n_grams"}
)


def no_stricter(key: str, value: Any, english: Any) -> Any:
    """A language's ``value`` of setting ``key``, moved to FineWeb's English value where it
    would drop more: FineWeb-2 derived its values from each language's own reference text, and
    on the same content in translation its stricter ones drop some languages' pages far more
    often than English's (benchmarks/bench_languages.py)."""
    if key not in LOWER_BOUNDS | UPPER_BOUNDS:
        return value
    if value is None or english is None:
        return None if english is None else value  # None: the rule is off
    if isinstance(value, list | tuple):
        english_of = dict(english)
        return type(value)(
            (n, no_stricter(key, limit, english_of.get(n, limit))) for n, limit in value
        )
    return min(value, english) if key in LOWER_BOUNDS else max(value, english)


def fineweb2_pipeline_settings() -> Mapping[str, Mapping[str, Any]]:
    """What FineWeb-2's pipeline set for every language, by filter (not in ``filters``: they
    change English's behaviour too; FineWeb-2 also did not run the C4 filter)."""
    return _frozen(_data()["pipeline"])


def source() -> str:
    """Where the values come from: FineWeb-2's repository and commit."""
    return _data()["source"]


# FineWeb-2 has no English config (English keeps FineWeb's settings): GlotLID's label for it.
ENGLISH_CONFIG = "eng_Latn"


@cache
def _by_code() -> dict[str, dict[str, str]]:
    """ISO 639-3 code -> script -> the label of FineWeb-2's config of it."""
    found: dict[str, dict[str, str]] = {}
    for label, entry in _data()["languages"].items():
        code, _, script = entry["config"].partition("_")
        found.setdefault(code, {})[script] = label
    return found


@lru_cache(maxsize=4096)
def script_variants(label: str) -> Mapping[str, str]:
    """For a language FineWeb-2 has in several scripts (Serbian in Cyrillic and in Latin,
    Hindi in Devanagari and romanized): script -> the label of its settings in that script;
    empty for the others."""
    entry = None if label == ENGLISH else _entries().get(label)
    if entry is None:
        return _EMPTY
    variants = _by_code()[entry["config"].partition("_")[0]]
    return MappingProxyType(variants) if len(variants) > 1 else _EMPTY


def same_language(label: str) -> frozenset[str]:
    """The labels that name ``label``'s language: itself, its FineWeb-2 config name (GlotLID's
    label, "deu_Latn" for "de"), the label whose config it is, and its labels in other
    scripts ("srp_Latn" for "sr")."""
    if label in (ENGLISH, ENGLISH_CONFIG):
        return frozenset({ENGLISH, ENGLISH_CONFIG})
    names = {label}
    entry = _entries().get(label)
    if entry is not None:
        names.add(entry["config"])
        names.update(key for key, other in _data()["languages"].items() if other is entry)
        for variant in script_variants(label).values():
            names.update({variant, _entries()[variant]["config"]})
    return frozenset(names)
