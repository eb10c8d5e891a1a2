"""What a recipe change would do, from the stored extraction alone: the documents, words and
tokens kept now and proposed, in total and per language; the drops per filter and rule; every
document whose fate changes (kept to dropped, dropped to kept, or dropped for another reason),
as transitions with samples; and each rule's distribution with both thresholds marked.

"Now" is what a recipe's cleaned partitions were built with, unit by unit (`Baseline`), or
given settings. Nothing is extracted or written: each extracted part is read once — only the
signal columns when every filter is judged from them, the text too when one must measure it —
and both chains judge it exactly as the cleaned stage does (`FilterChain`), so the counts are
what materializing the recipe gives. Tokens are the recipe's tokenized shards' where a document
is in them (a document kept now but not in its tokenized unit was removed by deduplication:
none); a document whose fate changes is tokenized with the recipe's tokenizer (its part read
again, for those documents' text); the others' are estimated from their words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from tokenmill.classifiers.scoring import part_scores, with_scores
from tokenmill.filters.histograms import rule_histograms, rule_thresholds
from tokenmill.filters.signals import EXTRACTED_SIGNALS
from tokenmill.reports.preview_baseline import Baseline, Tokens, setting_changes
from tokenmill.stages.cleaned import CleanSettings, score_columns
from tokenmill.stages.extracted import EXTRACTED_SCHEMA
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import EXTRACTED, MARKER, Unit
from tokenmill.storage.outputs import merge_counts, read_batches

WORDS = "gopher_quality.n_words"  # every document's word count, a stored signal
SIDES = ("current", "proposed")
KEPT = ("kept", "")  # a document's fate: kept, or (filter, rule) of its drop
# Where a document's tokens come from (`Preview.token_sources`).
SHARDS, DEDUPLICATED, TOKENIZED, ESTIMATED = "shards", "deduplicated", "tokenized", "estimated"


@dataclass
class Tally:
    """Documents, their words and tokens: `tokens` of those whose tokens are known,
    `untokenized_words` the words of the others (their tokens are estimated from them)."""

    documents: int = 0
    words: int = 0
    tokens: int = 0
    untokenized_words: int = 0
    samples: list[dict] = field(default_factory=list)

    def add(self, rows: pl.DataFrame, samples: int = 0) -> None:
        self.documents += rows.height
        self.words += int(rows[WORDS].sum() or 0)
        self.tokens += int(rows["tokens"].sum() or 0)
        self.untokenized_words += int(rows.filter(pl.col("tokens").is_null())[WORDS].sum() or 0)
        if room := samples - len(self.samples):
            picked = rows.sort("doc_id").head(room)
            self.samples += picked.select("url", *[f"reason_{s}" for s in SIDES]).to_dicts()

    def estimated_tokens(self, per_word: float | None) -> int | None:
        """The tokens, those of documents not tokenized estimated at `per_word` (None when
        some are not and there is no ratio)."""
        if not self.untokenized_words:
            return self.tokens
        return None if per_word is None else self.tokens + round(self.untokenized_words * per_word)


def _sides(kind=Tally) -> dict:
    return {side: kind() for side in SIDES}


@dataclass
class Preview:
    documents: int = 0
    kept: dict[str, Tally] = field(default_factory=_sides)
    languages: dict[str, dict[str, Tally]] = field(default_factory=lambda: _sides(dict))
    # dropped documents per (filter, rule)
    rules: dict[str, Counter] = field(default_factory=lambda: _sides(Counter))
    # dropped documents per (language, filter)
    language_drops: dict[str, Counter] = field(default_factory=lambda: _sides(Counter))
    # (fate now, fate proposed) -> the documents whose fate changes so
    transitions: dict[tuple[tuple[str, str], tuple[str, str]], Tally] = field(default_factory=dict)
    # documents kept on either side by where their tokens come from
    token_sources: Counter = field(default_factory=Counter)
    observed: Tally = field(default_factory=Tally)  # documents with tokens: the ratio
    ratio_from: str | None = None  # the sibling recipe whose shards give the ratio, if one
    columns_read: list[str] = field(default_factory=list)
    now: list[str] = field(default_factory=list)  # what "now" is (`Baseline.describe`)
    changes: list[str] = field(default_factory=list)  # the settings proposed differently
    # the distribution of each rule's value (`tokenmill.filters.histograms`), both recipes'
    # thresholds
    histograms: dict[str, dict] = field(default_factory=dict)
    thresholds: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    @property
    def dropped_by(self) -> dict[str, Counter]:
        """Dropped documents per filter."""
        return {side: _per_filter(self.rules[side]) for side in SIDES}

    @property
    def tokens_per_word(self) -> float | None:
        return self.observed.tokens / self.observed.words if self.observed.words else None


def _per_filter(rules: Counter) -> Counter:
    counts = Counter()
    for (name, _), count in rules.items():
        counts[name] += count
    return counts


def preview(
    lake: Lake,
    units: Iterable[Unit],
    current: CleanSettings | Baseline,
    proposed: CleanSettings,
    samples: int = 3,
    tokens: Tokens | None = None,
    distributions: bool = True,
) -> Preview:
    """Judge every extracted document of `units` by the settings now (`current`: settings,
    or a recipe's as built) and the `proposed` ones; `tokens`: the recipe's, to count them;
    `distributions`: count each rule's histogram too (for the pictures)."""
    units = list(units)
    baseline = current if isinstance(current, Baseline) else Baseline(current)
    now = {unit.key: baseline.chain_for(unit, lake) for unit in units}
    chain = proposed.chain(lake)
    result = Preview(
        columns_read=_columns([*now.values(), chain]),
        now=baseline.describe(),
        changes=setting_changes(baseline.main, proposed),
        ratio_from=tokens.ratio_from if tokens else None,
    )
    result.thresholds = {
        "current": rule_thresholds(baseline.main.chain(lake)),
        "proposed": rule_thresholds(chain),
    }
    for unit in units:
        chains = {"current": now[unit.key], "proposed": chain}
        marker = lake.read_json(f"{unit.prefix(EXTRACTED)}/{MARKER}")
        for part in range(marker["counts"]["files"]):
            _part(result, lake, unit, part, chains, samples, tokens, distributions)
    return result


def _columns(chains) -> list[str]:
    """The extracted columns the chains need: no text when signals judge every filter."""
    needs_text = any(
        f.reads_text and f.name not in chain.stored for chain in chains for f in chain.filters
    )
    if needs_text:
        return EXTRACTED_SCHEMA.names
    return ["doc_id", "crawl", "url", "language", "language_score", *EXTRACTED_SIGNALS.columns()]


def _documents(lake: Lake, unit: Unit, part: int, chains: dict, columns: list[str] | None):
    """The part's extracted documents, batch by batch, with the scores the chains read."""
    key = f"{unit.part_prefix(EXTRACTED, part)}/docs.parquet"
    scored = sorted({c for chain in chains.values() for c in score_columns(chain)})
    scores = part_scores(lake, unit, part, scored) if scored else None
    offset = 0
    for batch in read_batches(lake, key, columns):
        docs = EXTRACTED_SIGNALS.completed(pl.from_arrow(batch))
        if scores is not None:
            docs = with_scores(docs, scores, offset)
            offset += docs.height
        yield docs


def _part(
    result: Preview,
    lake,
    unit,
    part,
    chains,
    samples: int,
    tokens: Tokens | None,
    distributions: bool = True,
):
    shards = tokens.of_part(unit, part) if tokens else None
    sibling = tokens.of_sibling_part(unit, part) if tokens else None
    waiting = []  # documents whose fate changes and whose tokens only their text gives
    for docs in _documents(lake, unit, part, chains, result.columns_read):
        result.documents += docs.height
        if sibling is not None:  # its tokens per word only
            result.observed.add(docs.select("doc_id", WORDS).join(sibling, on="doc_id"))
        if distributions:
            result.histograms = merge_counts(
                result.histograms, rule_histograms(docs, chains["proposed"])
            )
        judged = _judged(docs, chains, shards)
        if tokens and tokens.tokenizer:
            untokenized = pl.col("tokens").is_null() & pl.col("moved") & pl.col("kept_any")
            waiting.append(judged.filter(untokenized))
            judged = judged.filter(~untokenized)
        _tally(result, judged, samples)
    if waiting and (waiting := pl.concat(waiting)).height:
        _tally(result, _tokenized(waiting, lake, unit, part, chains, tokens), samples)


def _judged(docs: pl.DataFrame, chains: dict, shards: pl.DataFrame | None) -> pl.DataFrame:
    """Per document: its fate by each chain (filter and rule, `kept`), its reasons, and its
    tokens where the shards give them (none for one kept now that deduplication removed)."""
    if "text" not in docs.columns:  # the chains do not read it; they carry it along
        docs = docs.with_columns(text=pl.lit(None, pl.Utf8))
    judged = docs.select("doc_id", "url", pl.col("language").fill_null("unknown"), WORDS)
    drop_rule = pl.coalesce(pl.col("reason").str.extract(r"^([^=]+)", 1), pl.col("filter"))
    for side, chain in chains.items():
        kept, rejected = chain.apply(docs, finish=False)
        verdict = pl.concat(
            [
                kept.select(
                    "doc_id",
                    filter=pl.lit(KEPT[0]),
                    rule=pl.lit(KEPT[1]),
                    reason=pl.lit(None, pl.Utf8),
                ),
                rejected.select("doc_id", "filter", rule=drop_rule, reason="reason"),
            ]
        )
        judged = judged.join(
            verdict.select("doc_id", pl.exclude("doc_id").name.suffix(f"_{side}")), on="doc_id"
        )
    kept_now, kept_then = (pl.col(f"filter_{s}") == KEPT[0] for s in SIDES)
    judged = judged.with_columns(
        kept_any=kept_now | kept_then,
        moved=(pl.col("filter_current") != pl.col("filter_proposed"))
        | (pl.col("rule_current") != pl.col("rule_proposed")),
    )
    if shards is None:
        return judged.with_columns(tokens=pl.lit(None, pl.Int64), source=pl.lit(None, pl.Utf8))
    judged = judged.join(shards, on="doc_id", how="left")
    in_shards = pl.col("tokens").is_not_null()
    return judged.with_columns(
        tokens=pl.when(in_shards | ~kept_now).then("tokens").otherwise(0),
        source=pl.when(in_shards)
        .then(pl.lit(SHARDS))
        .when(kept_now)
        .then(pl.lit(DEDUPLICATED))
        .otherwise(pl.lit(None, pl.Utf8)),
    )


def _tokenized(waiting: pl.DataFrame, lake, unit, part, chains, tokens: Tokens) -> pl.DataFrame:
    """`waiting` with the tokens of its documents' text as the side keeping each (now or
    proposed) writes it: its part read again, every column, for those documents."""
    wanted = waiting["doc_id"].implode()
    counted = []
    for docs in _documents(lake, unit, part, chains, None):
        docs = docs.filter(pl.col("doc_id").is_in(wanted))
        for side, chain in chains.items():
            keeps = waiting.filter(pl.col(f"filter_{side}") == KEPT[0])["doc_id"].implode()
            mine = docs.filter(pl.col("doc_id").is_in(keeps))
            if mine.height:
                kept, _ = chain.apply(mine, finish=True)
                counts = tokens.of_texts(kept["text"].to_list())
                counted.append(kept.select("doc_id", counted=pl.Series(counts, dtype=pl.Int64)))
    if not counted:
        return waiting
    found = pl.concat(counted)
    return (
        waiting.join(found, on="doc_id", how="left")
        .with_columns(
            tokens=pl.coalesce("tokens", "counted"),
            source=pl.when(pl.col("counted").is_not_null())
            .then(pl.lit(TOKENIZED))
            .otherwise("source"),
        )
        .drop("counted")
    )


def _tally(result: Preview, judged: pl.DataFrame, samples: int) -> None:
    result.observed.add(judged.filter(pl.col("source").is_in([SHARDS, TOKENIZED])))
    kept = judged.filter("kept_any")
    result.token_sources.update(
        dict(kept.group_by(pl.col("source").fill_null(ESTIMATED)).len().iter_rows())
    )
    for side in SIDES:
        fate = [f"filter_{side}", f"rule_{side}"]
        ours = judged.filter(pl.col(fate[0]) == KEPT[0])
        result.kept[side].add(ours)
        for (language,), rows in ours.group_by("language"):
            result.languages[side].setdefault(language, Tally()).add(rows)
        dropped = judged.filter(pl.col(fate[0]) != KEPT[0])
        result.rules[side].update(
            {(name, rule): n for name, rule, n in dropped.group_by(fate).len().iter_rows()}
        )
        by_language = dropped.group_by("language", fate[0]).len().iter_rows()
        result.language_drops[side].update({(lang, name): n for lang, name, n in by_language})
    fates = ["filter_current", "rule_current", "filter_proposed", "rule_proposed"]
    for (name, rule, name_then, rule_then), rows in judged.filter("moved").group_by(fates):
        key = ((name, rule), (name_then, rule_then))
        result.transitions.setdefault(key, Tally()).add(rows, samples)
