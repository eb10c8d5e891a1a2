"""cleaned: a recipe's filtering of the extracted documents, streamed in batches.

Each part reads one file's documents from `extracted` (text, language and the built-in filters'
signals), judges them by the recipe's languages, thresholds and filters — from the stored
signals where they serve (`tokenmill.filters.signals`), measuring the stored text again where
they do not (plug-ins, other measuring settings) — and commits `docs.parquet` (kept documents,
PII masked and C4's line removal applied) and `rejected.parquet` (every dropped one with its
reason). It never reads a WARC file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tokenmill.filters import (
    BUILTIN_FILTERS,
    C4QualityFilter,
    FilterChain,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    LanguageFilter,
    PIIMasker,
    URLFilter,
    config_params,
    load_filter,
)
from tokenmill.filters.settings import filter_field, filter_settings, from_value
from tokenmill.histograms import rule_histograms
from tokenmill.layout import CLEANED, DOC_SCHEMA, EXTRACTED, REJECTED_SCHEMA, UNUSABLE_FILES
from tokenmill.outputs import StageReport, merge_counts, read_batches, require_committed
from tokenmill.stage import Pod, Scope, Stage, Work, setting
from tokenmill.stages.extracted import SIGNALS, preview_of, provenance_resolves

REJECTED_TEXT_CHARS = 2000


FILTER_SETTINGS = {cls.name: filter_settings(cls, __name__) for cls in BUILTIN_FILTERS}
URLFilterSettings = FILTER_SETTINGS[URLFilter.name]
GopherRepetitionFilterSettings = FILTER_SETTINGS[GopherRepetitionFilter.name]
GopherQualityFilterSettings = FILTER_SETTINGS[GopherQualityFilter.name]
C4QualityFilterSettings = FILTER_SETTINGS[C4QualityFilter.name]
FineWebQualityFilterSettings = FILTER_SETTINGS[FineWebQualityFilter.name]


@dataclass(frozen=True)
class CleanSettings:
    keep_languages: list[str] = setting(["en"], "Languages to keep (ISO 639-1); empty keeps all")
    min_language_score: float = setting(0.65, "Minimum language probability")
    mask_pii: bool = setting(True, "Mask e-mail addresses and public IPs")
    skip_filters: list[str] = setting([], "Names of built-in filters to skip")
    # Each built-in filter's thresholds (FineWeb's values by default), named after the filter.
    url: URLFilterSettings = filter_field(URLFilterSettings, "URL blocklist filter")
    gopher_repetition: GopherRepetitionFilterSettings = filter_field(
        GopherRepetitionFilterSettings, "Gopher repetition filter"
    )
    gopher_quality: GopherQualityFilterSettings = filter_field(
        GopherQualityFilterSettings, "Gopher quality filter"
    )
    c4_quality: C4QualityFilterSettings = filter_field(
        C4QualityFilterSettings, "C4 filter (line removal)"
    )
    fineweb_quality: FineWebQualityFilterSettings = filter_field(
        FineWebQualityFilterSettings, "FineWeb quality filter"
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
        for name, kind in FILTER_SETTINGS.items():  # mappings from a recipe or a run's config
            value = from_value(kind, getattr(self, name), f"clean.{name}")
            object.__setattr__(self, name, value)

    def chain(self) -> FilterChain:
        language = LanguageFilter(self.keep_languages, self.min_language_score)
        formatters = [PIIMasker()] if self.mask_pii else []
        if self.filters is not None:
            filters = self.filters
        else:
            filters = [getattr(self, cls.name).build() for cls in BUILTIN_FILTERS]
        filters = [f for f in filters if f.name not in self.skip_filters]
        filters += [
            load_filter(p["path"], config_params(p.get("params", {}))) for p in self.plugin_filters
        ]
        return FilterChain([language, *filters], formatters, signals=SIGNALS)


def run(work: Work) -> StageReport:
    settings = work.settings or CleanSettings()
    extracted = require_committed(
        work.lake, work.input(EXTRACTED), f"extracted {work.unit} file {work.part}"
    )
    chain = settings.chain()
    mask = PIIMasker() if settings.mask_pii else None
    report = StageReport()
    for name, reason in extracted["counts"].get(UNUSABLE_FILES, {}).items():
        report.unusable_file(name, reason)
    for flt in chain.filters:  # zero counts too, so every partition plots every filter
        report.drop(f"filter:{flt.name}", 0)
    with work.writer(report) as out:
        docs = out.parquet("docs.parquet", DOC_SCHEMA)
        rejected = out.parquet("rejected.parquet", REJECTED_SCHEMA)
        for batch in read_batches(work.lake, f"{work.input(EXTRACTED)}/docs.parquet"):
            frame = pl.from_arrow(batch)
            report.records_in += frame.height
            report.bytes_in += batch.nbytes
            report.histograms = merge_counts(report.histograms, rule_histograms(frame, chain))
            kept, dropped = chain.apply(frame)
            for name, count in dropped.group_by("filter").len().iter_rows():
                report.drop(f"filter:{name}", count)
            docs.write_table(kept.select(DOC_SCHEMA.names).to_arrow())
            dropped = dropped.select(REJECTED_SCHEMA.names).with_columns(
                pl.col("text").str.slice(0, REJECTED_TEXT_CHARS)
            )
            if mask and dropped.height:  # judged from signals: dropped before the masking
                dropped = dropped.with_columns(mask(dropped))
            rejected.write_table(dropped.to_arrow())
            report.records_out += kept.height
            report.add_preview(preview_of(kept))
    return report


STAGE = Stage(
    name=CLEANED,
    scope=Scope.UNIT,
    run=run,
    settings=CleanSettings,
    upstream=(EXTRACTED,),
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
