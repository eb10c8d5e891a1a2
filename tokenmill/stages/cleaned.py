"""cleaned: a recipe's filtering of the extracted documents, streamed in batches.

Each part reads one file's documents from `extracted` (text, language and the built-in filters'
signals), judges them by the recipe's languages, thresholds and filters — from the stored
signals where they serve (`tokenmill.filters.signals`), measuring the stored text again where
they do not (plug-ins, other measuring settings) — and commits `docs.parquet` (kept documents,
PII masked and C4's line removal applied) and `rejected.parquet` (every dropped one with its
reason). It never reads a WARC file.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import polars as pl

from tokenmill.classifiers.scoring import crawl_top_share, part_scores, with_scores
from tokenmill.decontamination.index import declared_versions, set_table
from tokenmill.decontamination.removal import (
    CONTAMINATION,
    CONTAMINATION_FILE,
    DECONTAMINATED_AGAINST,
    Decontamination,
    decontaminate,
)
from tokenmill.decontamination.removal import FILTER_NAME as DECONTAMINATE
from tokenmill.filters import FilterChain, LanguageFilter, PIIMasker, config_params, load_filter
from tokenmill.filters.classifier import COMBINES, ClassifierFilter, ScoreRule
from tokenmill.filters.histograms import rule_histograms
from tokenmill.filters.per_language import LanguageChains
from tokenmill.filters.registry import settings_types
from tokenmill.filters.settings import from_value, with_filter_settings
from tokenmill.filters.signals import EXTRACTED_SIGNALS, for_language, measured_by_language
from tokenmill.languages.defaults import (
    ENGLISH,
    data_version,
    known_languages,
    language_defaults,
    same_language,
)
from tokenmill.runtime.stage import (
    Pod,
    Scope,
    Stage,
    Work,
    parsed_items,
    setting,
    settings_fields,
)
from tokenmill.stages.shared import preview_of, provenance_resolves
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    CLEANED,
    CONTAMINATION_SCHEMA,
    DOC_DICTIONARY,
    DOC_SCHEMA,
    EVAL_INDEX,
    EXTRACTED,
    PROVENANCE_FIELDS,
    REJECTED_SCHEMA,
    SCORE_DISTRIBUTION,
    SCORED,
    UNUSABLE_FILES,
)
from tokenmill.storage.outputs import (
    MissingInputError,
    StageReport,
    merge_counts,
    read_batches,
    require_committed,
)

_FINEWEB_LANGUAGE_SCORE = 0.65
# The marker count holding the settings a partition was built with (`CleanSettings.record`).
BUILT_WITH = "clean_settings"

# Each registered built-in filter's settings dataclass, by the filter's name, in its order.
FILTER_SETTINGS = settings_types()


@dataclass(frozen=True)
@with_filter_settings(FILTER_SETTINGS, after="skip_filters")  # each under its filter's name
class CleanSettings:
    keep_languages: list[str] = setting(["en"], "Languages to keep (ISO 639-1); empty keeps all")
    min_language_score: float = setting(_FINEWEB_LANGUAGE_SCORE, "Minimum language probability")
    language_defaults: bool = setting(
        True,
        "Judge each language by its own defaults (FineWeb-2's stop words, thresholds and "
        "language-ID threshold for it; FineWeb's for English) where this recipe keeps "
        "FineWeb's value; false: FineWeb's English settings for every language",
    )
    fineweb2_exact: bool = setting(
        False,
        "Take FineWeb-2's values for a language as published; false: a value stricter than "
        "FineWeb's English one is English's (FineWeb-2 derived its values from each "
        "language's own text: on the same content translated, its stricter ones drop some "
        "languages far more often); the minimum alpha-word share is English's lowered by as "
        "much as the language's words hold fewer letters than English's on the same text; the "
        "minimum of stop words and a lid.176 label's language score no more than 19 pages in 20 "
        "of its plain prose reach (tokenmill/languages/parity.json), the score nor FineWeb-2's "
        "threshold for it",
    )
    languages: dict[str, dict] = setting(
        {},
        "Settings of one language, over everything else: {<language>: {<filter>: {<setting>: "
        "value}, min_language_score: p}}, e.g. {de: {gopher_quality: {min_doc_words: 80}}}",
    )
    mask_pii: bool = setting(True, "Mask e-mail addresses and public IPs")
    rejected_text_chars: int = setting(
        0,
        "Copy the first this many characters of each dropped document's text (PII masked) "
        "into rejected.parquet; 0 copies none: every document's text is in extracted's "
        "docs.parquet under the same doc_id",
    )
    skip_filters: list[str] = setting([], "Names of built-in filters to skip")
    # here: each built-in filter's thresholds (FineWeb's values by default), named after it
    classifier_rules: list[dict] = setting(
        [],
        "Keep documents by a declared classifier's scores (the scored stage), after the "
        "built-in filters: {classifier, label, min: a probability} or {classifier, label, "
        "keep_top: the share of the crawl's documents it scores highest, e.g. 0.1 as DCLM}",
    )
    classifier_combine: Literal[COMBINES] = setting(
        "all",
        "all: a document passes every classifier rule; any: one rule suffices (the best of "
        "an ensemble, as Nemotron-CC)",
    )
    decontaminate: dict = setting(
        {},
        "Remove evaluation text from the kept documents, last: {sets: [names of sets the shared "
        "settings' evaluation section declares], ngram: 13 (normalized words), action: drop (the "
        "document) or cut (the shared passage and window characters on each side; a document "
        "left shorter than min_chars is dropped), window: 200, min_chars: 200}",
    )
    plugin_filters: list[dict] = setting(
        [],
        "Your own filters, applied after the built-in ones: {path: dotted path of a filter "
        "class or function, params: {name: value}}",
    )
    # Filter objects given directly (Python callers); overrides the built-in list when set.
    filters: list[Any] | None = field(default=None, metadata={"internal": True})

    def __post_init__(self):
        score = self.min_language_score
        if isinstance(score, int | float) and not 0 <= score <= 1:
            raise ValueError(f"clean.min_language_score: {score} is not in [0, 1]")
        unknown = sorted(set(self.skip_filters) - set(FILTER_SETTINGS))
        if unknown and isinstance(self.skip_filters, list):
            raise ValueError(
                f"clean.skip_filters: unknown filters {unknown}; built-in: {list(FILTER_SETTINGS)}"
            )
        chars = self.rejected_text_chars
        if isinstance(chars, int) and chars < 0:
            raise ValueError(f"clean.rejected_text_chars: {chars} is negative")
        if self.classifier_combine not in COMBINES:
            raise ValueError(
                f"clean.classifier_combine must be one of {COMBINES}, not "
                f"{self.classifier_combine!r}"
            )
        self.score_rules()
        self.decontamination()
        for name, kind in FILTER_SETTINGS.items():  # mappings from a recipe or a run's config
            value = from_value(kind, getattr(self, name), f"clean.{name}")
            object.__setattr__(self, name, value)
        if isinstance(self.languages, dict):
            for label in self.languages:
                self.language_settings(label)  # an unknown language or setting fails here

    def defaults_version(self) -> str | None:
        """The version of the shipped language defaults this recipe's documents are judged by
        (part of its ``cleaned`` stage's code version: new defaults make it stale), or None
        for a recipe that keeps English only or judges every language by its own settings."""
        english = same_language(ENGLISH)
        if not self.language_defaults or (
            self.keep_languages and all(label in english for label in self.keep_languages)
        ):
            return None
        return data_version()

    def language_settings(self, label: str | None) -> dict[str, Any]:
        """The settings documents in language ``label`` are judged by: each built-in filter's
        settings dataclass by its name, and ``min_language_score``. A language's defaults
        (``tokenmill.languages``) replace FineWeb's values this recipe keeps; the recipe's
        ``languages`` entry for it replaces anything."""
        resolved: dict[str, Any] = {name: getattr(self, name) for name in FILTER_SETTINGS}
        resolved["min_language_score"] = self.min_language_score
        if label is None:
            return resolved
        where = f"clean.languages.{label}"
        own = self.languages.get(label, {})
        if label in self.languages:
            if label not in known_languages():
                close = difflib.get_close_matches(label, sorted(known_languages()), n=3)
                raise ValueError(
                    f"{where}: unknown language (labels are the language-ID model's, such as "
                    f"de, ja, zh, or FineWeb-2's such as deu_Latn){'; close: ' if close else ''}"
                    f"{', '.join(close)}"
                )
            if not isinstance(own, dict):
                raise ValueError(f"{where}: expected a mapping of settings, got {own!r}")
            unknown = sorted(set(own) - set(resolved))
            if unknown:
                raise ValueError(f"{where}: unknown settings {unknown}; known: {list(resolved)}")
        defaults = language_defaults(label) if self.language_defaults else None
        for name, kind in FILTER_SETTINGS.items():
            values = resolved[name].values()
            if defaults:
                fineweb = kind().values()
                own_defaults = (
                    defaults.settings_of(name)
                    if self.fineweb2_exact
                    else defaults.fair_settings_of(name, fineweb)
                )
                for key, value in own_defaults.items():
                    if values[key] == fineweb[key]:
                        values[key] = value
            values |= own.get(name) or {}
            resolved[name] = from_value(kind, values, f"{where}.{name}")
        score = own.get("min_language_score")
        # FineWeb-2's language-ID thresholds are its model's (GlotLID: labels like "deu_Latn"),
        # for the documents a model of that kind labels; lid.176's keep the recipe's, or a
        # lower one where the language's scores run low: the score that model gives 19 pages
        # in 20 of its plain prose, or FineWeb-2's threshold
        if score is None and defaults and self.min_language_score == _FINEWEB_LANGUAGE_SCORE:
            if label == defaults.config:
                score = defaults.language_id_threshold
            elif not self.fineweb2_exact:
                lower = (defaults.language_score_reached, defaults.language_id_threshold)
                score = min(v for v in (*lower, self.min_language_score) if v is not None)
        if score is not None:
            if not isinstance(score, int | float) or not 0 <= score <= 1:
                raise ValueError(f"{where}.min_language_score: {score!r} is not in [0, 1]")
            resolved["min_language_score"] = score
        return resolved

    def record(self) -> dict | None:
        """These settings as JSON values, which `from_record` reads back; None for filter
        objects given directly (`filters`), which no record can name."""
        if self.filters is not None:
            return None
        values = {k: v for k, v in asdict(self).items() if k != "filters"}
        return json.loads(json.dumps(values))  # tuples as lists, as a recipe file has them

    @classmethod
    def from_record(cls, record: dict) -> CleanSettings:
        unknown = sorted(set(record) - {name for name, *_ in settings_fields(cls)})
        if unknown:
            raise ValueError(
                f"recorded clean settings {unknown} are unknown here (a filter registered "
                "where the partition was built, and not here?)"
            )
        return cls(**record)

    def decontamination(self) -> Decontamination:
        return Decontamination.parse(self.decontaminate)

    def score_rules(self) -> list[ScoreRule]:
        return parsed_items(self.classifier_rules, ScoreRule.parse, "clean.classifier_rules")

    def chain(self, lake: Lake | None = None, stored: bool = True) -> LanguageChains:
        """The recipe's filters, a chain per language settings (see ``language_settings``);
        ``lake``: where keep_top rules find their crawl's score distribution; ``stored``
        false: measuring the text, never judging from the stored signals."""
        after: list = []  # the filters every language shares (the same objects)
        if rules := self.score_rules():
            cuts = (lambda crawl, rule: _top_share(lake, crawl, rule)) if lake else None
            after.append(ClassifierFilter(rules, self.classifier_combine, cuts))
        after += [
            load_filter(p["path"], config_params(p.get("params", {}))) for p in self.plugin_filters
        ]
        return LanguageChains(
            lambda label: self._chain(label, after, stored),
            self._chain_key,
            eager=[*self.languages, *self.keep_languages],
            # by FineWeb's settings, every language measured by its own defaults is measured again
            unserved=frozenset() if self.language_defaults else measured_by_language(),
        )

    def _own_settings(self, label: str | None) -> bool:
        """Whether documents in ``label`` are judged by settings of their own (else, and for
        languages this recipe drops, by the recipe's)."""
        if label is None or self.filters is not None:
            return False
        if self.keep_languages and label not in self._kept():
            return False
        return label in self.languages or (
            self.language_defaults and language_defaults(label).config is not None
        )

    def _kept(self) -> frozenset[str]:
        """Every label of the kept languages (a GlotLID model's "deu_Latn" for "de")."""
        return frozenset(name for label in self.keep_languages for name in same_language(label))

    def _chain_key(self, label: str | None) -> tuple | None:
        """Languages judged alike share a key: the recipe's settings (None) or their own, and
        the signal profile their documents were measured with. None: the base chain's."""
        if label is None or (self.keep_languages and label not in self._kept()):
            return None  # dropped by the language filter first, whatever follows
        own = self._own_settings(label)
        measured = for_language(label).key()
        if not own and measured == for_language(None).key():
            return None
        return (label if own else None, measured)

    def _chain(self, label: str | None, after: list, stored: bool) -> FilterChain:
        key = self._chain_key(label)
        own = key is not None and key[0] is not None  # (its label: settings of its own)
        settings = self.language_settings(label if own else None)
        language = LanguageFilter(sorted(self._kept()), settings["min_language_score"])
        formatters = [PIIMasker()] if self.mask_pii else []
        if self.filters is not None:
            filters = list(self.filters)
        else:
            filters = [settings[name].build() for name in FILTER_SETTINGS]
        filters = [f for f in filters if f.name not in self.skip_filters]
        signals = for_language(None if key is None else label)
        chain = [language, *filters, *after]
        return FilterChain(chain, formatters, signals=signals if stored else None)


def _top_share(lake: Lake, crawl: str, rule: ScoreRule):
    return crawl_top_share(lake, crawl, rule.classifier, rule.label, rule.keep_top)


def inputs_read(settings: CleanSettings) -> tuple[str, ...]:
    """The stages a recipe's classifier rules and decontamination read besides the extracted
    documents."""
    rules = settings.score_rules()
    evaluation = (EVAL_INDEX,) if settings.decontamination().sets else ()
    if any(rule.keep_top is not None for rule in rules):
        return (SCORED, SCORE_DISTRIBUTION, *evaluation)
    return ((SCORED,) if rules else ()) + evaluation


def score_columns(chain: LanguageChains) -> list[str]:
    return [c for f in chain.filters if isinstance(f, ClassifierFilter) for c in f.columns]


def classifier_cuts(chain: LanguageChains) -> dict:
    """The thresholds keep_top rules were cut at, per score column and crawl."""
    cuts: dict = {}
    for flt in chain.filters:
        if not isinstance(flt, ClassifierFilter):
            continue
        for (crawl, column), cut in flt.cuts.items():
            cuts.setdefault(column, {})[crawl] = {
                "threshold": round(cut.threshold, 6),
                "crawl_kept_share": round(cut.kept_share, 6),
            }
    return cuts


def run(work: Work) -> StageReport:
    settings = work.settings or CleanSettings()
    extracted = require_committed(
        work.lake, work.input(EXTRACTED), f"extracted {work.unit} file {work.part}"
    )
    chain = settings.chain(work.lake)
    columns = score_columns(chain)
    scores = part_scores(work.lake, work.unit, work.part, columns) if columns else None
    offset = 0
    mask = PIIMasker() if settings.mask_pii else None
    report = StageReport()
    for name, reason in extracted["counts"].get(UNUSABLE_FILES, {}).items():
        report.unusable_file(name, reason)
    for flt in chain.filters:  # zero counts too, so every partition plots every filter
        report.drop(f"filter:{flt.name}", 0)
    report.counts[BUILT_WITH] = settings.record()
    rejected_columns = [name for name, _ in PROVENANCE_FIELDS]
    if settings.rejected_text_chars:
        rejected_columns.append("text")
    removal = settings.decontamination()
    table = evaluation_table(work.lake, removal) if removal.sets else None
    if table is not None:
        report.drop(f"filter:{DECONTAMINATE}", 0)
        report.counts[DECONTAMINATED_AGAINST] = {index.name: index.sha256 for index in table.sets}
        report.counts[CONTAMINATION] = {}
    with work.writer(report) as out:
        docs = out.parquet("docs.parquet", DOC_SCHEMA, DOC_DICTIONARY)
        rejected = out.parquet("rejected.parquet", REJECTED_SCHEMA, DOC_DICTIONARY)
        if table is not None:
            passages = out.parquet(CONTAMINATION_FILE, CONTAMINATION_SCHEMA, ["set", "action"])
        for batch in read_batches(work.lake, f"{work.input(EXTRACTED)}/docs.parquet"):
            frame = EXTRACTED_SIGNALS.completed(pl.from_arrow(batch))
            if scores is not None:
                frame = with_scores(frame, scores, offset)
                offset += frame.height
            report.records_in += frame.height
            report.bytes_in += batch.nbytes
            judged = chain.judge_stored(frame)  # the histograms' values and the decisions
            report.histograms = merge_counts(
                report.histograms, rule_histograms(frame, chain, judged)
            )
            kept, dropped = chain.apply(frame, rejected_columns=rejected_columns, judged=judged)
            if table is not None:
                outcome = decontaminate(kept, table, removal)
                kept = outcome.kept
                if outcome.dropped.height:
                    dropped = pl.concat(
                        [dropped, outcome.dropped.select(dropped.columns)], how="vertical_relaxed"
                    )
                if outcome.passages:
                    passages.write_table(
                        pl.DataFrame(outcome.passages, schema=CONTAMINATION_SCHEMA.names)
                        .to_arrow()
                        .cast(CONTAMINATION_SCHEMA)
                    )
                report.counts[CONTAMINATION] = merge_counts(
                    report.counts[CONTAMINATION], outcome.counts
                )
            for name, count in dropped.group_by("filter").len().iter_rows():
                report.drop(f"filter:{name}", count)
            docs.write_table(kept.select(DOC_SCHEMA.names).to_arrow())
            report.count_languages(kept["language"].to_arrow())
            dropped = rejected_text(dropped, settings, mask)
            rejected.write_table(dropped.select(REJECTED_SCHEMA.names).to_arrow())
            report.records_out += kept.height
            report.add_preview(preview_of(kept))
    if cuts := classifier_cuts(chain):
        report.counts["classifier_thresholds"] = cuts
    return report


def evaluation_table(lake: Lake, removal: Decontamination):
    """The n-gram table of the sets ``removal`` names, as the committed eval_index holds them."""
    indexed = declared_versions(lake)
    missing = [name for name in removal.sets if name not in indexed]
    if missing:
        raise MissingInputError(
            f"evaluation sets {missing} are not in the committed eval_index (it holds "
            f"{sorted(indexed)}); materialize eval_index after declaring them"
        )
    versions = {name: indexed[name]["sha256"] for name in removal.sets}
    return set_table(lake, versions, removal.ngram)


def rejected_text(dropped: pl.DataFrame, settings: CleanSettings, mask) -> pl.DataFrame:
    """``dropped`` with the start of its text (masked), or none, as the recipe asks."""
    if not settings.rejected_text_chars:
        return dropped.with_columns(text=pl.lit(None, pl.Utf8))
    dropped = dropped.with_columns(pl.col("text").str.slice(0, settings.rejected_text_chars))
    if mask and dropped.height:  # judged from signals: dropped before the masking
        dropped = dropped.with_columns(mask(dropped))
    return dropped


def plug_in_code(_lake, settings, _unit=None) -> str | None:
    """None when the recipe runs plug-in filters: their code is outside the lake's lineage and
    has no version, so a partition running them is never kept as current."""
    return None if settings is not None and settings.plugin_filters else ""


STAGE = Stage(
    name=CLEANED,
    scope=Scope.UNIT,
    run=run,
    settings=CleanSettings,
    upstream=(EXTRACTED,),
    outside=plug_in_code,
    reads=inputs_read,
    group="clean",
    kinds=("parquet",),
    # a scan of stored columns and text: far lighter than extraction
    pod=Pod("2", "4Gi", "2", "6Gi"),
    checks=(provenance_resolves(CLEANED),),
    schema=DOC_SCHEMA,
    data_files=("docs.parquet",),
    description="The recipe's documents: extracted text judged by the recipe's languages, "
    "thresholds and filters (from the stored signals), PII masked; every dropped document is in "
    "rejected.parquet with its reason.",
)
