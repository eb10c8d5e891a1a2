"""What a preview compares with and counts in: the settings a recipe's cleaned partitions were
built with (each unit's marker records them, `CleanSettings.record`), and the recipe's tokens
per document (its tokenized shards' spans; its tokenizer for texts not in them)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from tokenmill.stages.cleaned import BUILT_WITH, CleanSettings
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import CLEANED, MARKER, TOKENIZED_SHARDS, TOKENIZER, Unit
from tokenmill.storage.outputs import is_committed, read_table


@dataclass
class Baseline:
    """The settings each unit is judged by now: those its cleaned partition was built with,
    else `fallback` (the recipe file's, or any settings a caller gives)."""

    fallback: CleanSettings
    source: str = "the given settings"  # where `fallback` comes from
    recipe: str | None = None  # whose built partitions were looked for
    built: dict[str, CleanSettings] = field(default_factory=dict)  # unit key -> settings
    not_built: int = 0
    not_recorded: int = 0  # built by a version that did not record its settings
    _chains: dict[int, object] = field(default_factory=dict, repr=False)

    def settings_for(self, unit: Unit) -> CleanSettings:
        return self.built.get(unit.key, self.fallback)

    def chain_for(self, unit: Unit, lake: Lake):
        settings = self.settings_for(unit)
        if id(settings) not in self._chains:  # units built alike share one settings object
            self._chains[id(settings)] = settings.chain(lake)
        return self._chains[id(settings)]

    def variants(self) -> list[tuple[CleanSettings, int]]:
        """The settings the built units were cleaned with, and how many units each, most
        units first."""
        counts: dict[int, list] = {}
        for settings in self.built.values():
            counts.setdefault(id(settings), [settings, 0])[1] += 1
        return sorted(((s, n) for s, n in counts.values()), key=lambda v: -v[1])

    @property
    def main(self) -> CleanSettings:
        """The settings most units are judged by (their thresholds are the ones drawn)."""
        variants = self.variants()
        unbuilt = self.not_built + self.not_recorded
        return variants[0][0] if variants and variants[0][1] >= unbuilt else self.fallback

    def describe(self) -> list[str]:
        """What the proposed settings are compared with, in a few lines."""
        if self.recipe is None:
            return [f"now: {self.source}"]
        file = f"its file ({self.source})"
        if not self.built:
            why = (
                "no cleaned partition records its settings"
                if self.not_recorded
                else ("nothing is built yet")
            )
            return [f"now: recipe {self.recipe}'s file ({self.source}): {why}"]
        units = len(self.built) + self.not_built + self.not_recorded
        lines = [f"now: recipe {self.recipe} as built ({len(self.built)} of {units} units)"]
        variants = self.variants()
        for settings, count in variants:
            changes = setting_changes(settings, self.fallback)
            said = (
                f"the settings of {file}"
                if not changes
                else (f"settings {file} has changed since: " + "; ".join(changes))
            )
            lines.append(f"  {_units(count) + ' ' if len(variants) > 1 else ''}built with {said}")
        if units > len(self.built):
            lines.append(
                f"  {_units(units - len(self.built))} not built (or not recording their "
                f"settings): judged by {file}"
            )
        return lines


def _units(count: int) -> str:
    return f"{count} unit" + ("s" if count != 1 else "")


def built_baseline(
    lake: Lake, units: Iterable[Unit], fallback: CleanSettings, recipe: str, source: str
) -> Baseline:
    """What `units` of a recipe (`lake`: the recipe's view) were cleaned with; `fallback`
    (its file's settings, read from `source`) for the units not built or not recorded."""
    baseline = Baseline(fallback, source, recipe)
    alike: dict[str, CleanSettings] = {}
    for unit in units:
        marker = f"{unit.prefix(CLEANED)}/{MARKER}"
        if not lake.exists(marker):
            baseline.not_built += 1
            continue
        record = lake.read_json(marker)["counts"].get(BUILT_WITH)
        if record is None:
            baseline.not_recorded += 1
            continue
        text = json.dumps(record, sort_keys=True)
        if text not in alike and json.dumps(fallback.record(), sort_keys=True) == text:
            alike[text] = fallback
        elif text not in alike:
            try:
                alike[text] = CleanSettings.from_record(record)
            except ValueError as error:
                raise ValueError(f"{lake.uri(marker)}: {error}") from None
        baseline.built[unit.key] = alike[text]
    return baseline


def setting_changes(before: CleanSettings, after: CleanSettings) -> list[str]:
    """`clean.<setting>: <before> -> <after>` for each setting that differs."""
    old, new = _flat(before.record() or {}), _flat(after.record() or {})
    return [
        f"clean.{name}: {old.get(name)} -> {new.get(name)}"
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    ]


def _flat(values: dict, prefix: str = "") -> dict:
    flat = {}
    for name, value in values.items():
        if isinstance(value, dict):
            flat |= _flat(value, f"{prefix}{name}.")
        else:
            flat[f"{prefix}{name}"] = value
    return flat


class Tokens:
    """A recipe's tokens per document: exact from its tokenized shards (end-of-document token
    included, as the shards count them), its tokenizer's for other texts. A recipe without a
    tokenizer has its documents' tokens estimated from their words, at the ratio observed in
    the first sibling recipe (`Lake.siblings`) that has tokenized shards (`ratio_from`)."""

    def __init__(self, lake: Lake, append_eod: bool = True):
        from tokenmill.tokens.tokenization import eod_token, load_tokenizer

        self.lake = lake  # the recipe's view
        self.tokenizer = load_tokenizer(lake)[0] if is_committed(lake, TOKENIZER) else None
        self.eod = int(
            append_eod and self.tokenizer is not None and bool(eod_token(self.tokenizer))
        )
        self.sibling = None
        if self.tokenizer is None:
            built = (s for s in lake.siblings(TOKENIZED_SHARDS) if is_committed(s, TOKENIZER))
            self.sibling = next(built, None)

    @property
    def ratio_from(self) -> str | None:
        """The sibling recipe whose shards give the ratio of tokens to words, if one does."""
        return self.sibling.stored_key(TOKENIZED_SHARDS).split("/")[-2] if self.sibling else None

    def of_part(self, unit: Unit, part: int) -> pl.DataFrame | None:
        """`doc_id`, `tokens` of each document in the unit's tokenized file `part`; None while
        the unit is not tokenized."""
        return _spans(self.lake, unit, part)

    def of_sibling_part(self, unit: Unit, part: int) -> pl.DataFrame | None:
        """`of_part` of the sibling recipe that gives the ratio (for the ratio only)."""
        return _spans(self.sibling, unit, part) if self.sibling else None

    def of_texts(self, texts: list[str]) -> list[int]:
        encodings = self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        return [len(encoding.ids) + self.eod for encoding in encodings]


def _spans(lake: Lake, unit: Unit, part: int) -> pl.DataFrame | None:
    prefix = unit.prefix(TOKENIZED_SHARDS)
    if not is_committed(lake, prefix):
        return None
    eod = int(lake.read_json(f"{prefix}/{MARKER}")["counts"].get("eod_id") is not None)
    key = f"{unit.part_prefix(TOKENIZED_SHARDS, part)}/provenance.parquet"
    spans = pl.from_arrow(read_table(lake, key, ["doc_id", "token_start", "token_end"]))
    return spans.select("doc_id", tokens=pl.col("token_end") - pl.col("token_start") + eod)
