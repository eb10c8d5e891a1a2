"""What a recipe change would do, from the stored extraction alone: per filter and rule, the
documents (and words) it newly drops and newly keeps against another recipe, with samples, and
each rule's distribution with both thresholds marked.

Nothing is extracted or written: each extracted part is read once — only the signal columns
when every filter of both recipes is judged from them, the text too when one must measure it —
and both recipes' chains judge it exactly as the cleaned stage does (`FilterChain`), so the
counts are what materializing the recipe gives.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from tokenmill.classifiers.scoring import part_scores, with_scores
from tokenmill.filters.histograms import rule_histograms, rule_thresholds
from tokenmill.filters.signals import EXTRACTED_SIGNALS
from tokenmill.reports.plots import MARK_COLORS
from tokenmill.reports.plots import pictures as rule_pictures
from tokenmill.stages.cleaned import score_columns
from tokenmill.stages.extracted import EXTRACTED_SCHEMA
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import EXTRACTED, MARKER, Unit
from tokenmill.storage.outputs import merge_counts, read_batches

KEPT = "kept"
WORDS = "gopher_quality.n_words"  # every document's word count, a stored signal


@dataclass
class Change:
    """Documents one filter's rule newly drops (or newly keeps)."""

    documents: int = 0
    words: int = 0
    samples: list[dict] = field(default_factory=list)


@dataclass
class Preview:
    documents: int = 0
    kept: dict[str, int] = field(default_factory=lambda: {"current": 0, "proposed": 0})
    words: dict[str, int] = field(default_factory=lambda: {"current": 0, "proposed": 0})
    newly_dropped: dict[tuple[str, str], Change] = field(default_factory=dict)
    newly_kept: dict[tuple[str, str], Change] = field(default_factory=dict)
    dropped_by: dict[str, Counter] = field(
        default_factory=lambda: {"current": Counter(), "proposed": Counter()}
    )
    columns_read: list[str] = field(default_factory=list)
    # the distribution of each rule's value (`tokenmill.filters.histograms`), both recipes'
    # thresholds
    histograms: dict[str, dict] = field(default_factory=dict)
    thresholds: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def preview(lake: Lake, units: Iterable[Unit], current, proposed, samples: int = 3) -> Preview:
    """Judge every extracted document of `units` by the `current` and `proposed` clean
    settings (`CleanSettings`)."""
    chains = {"current": current.chain(lake), "proposed": proposed.chain(lake)}
    result = Preview(columns_read=_columns(chains.values()))
    result.thresholds = {name: rule_thresholds(chain) for name, chain in chains.items()}
    scored = sorted({c for chain in chains.values() for c in score_columns(chain)})
    for unit in units:
        marker = lake.read_json(f"{unit.prefix(EXTRACTED)}/{MARKER}")
        for part in range(marker["counts"]["files"]):
            key = f"{unit.part_prefix(EXTRACTED, part)}/docs.parquet"
            scores = part_scores(lake, unit, part, scored) if scored else None
            offset = 0
            for batch in read_batches(lake, key, result.columns_read):
                docs = EXTRACTED_SIGNALS.completed(pl.from_arrow(batch))
                if scores is not None:
                    docs = with_scores(docs, scores, offset)
                    offset += docs.height
                _judge(result, docs, chains, samples)
    return result


def _columns(chains) -> list[str]:
    """The extracted columns the chains need: no text when signals judge every filter."""
    needs_text = any(
        f.reads_text and f.name not in chain.stored for chain in chains for f in chain.filters
    )
    if needs_text:
        return EXTRACTED_SCHEMA.names
    return ["doc_id", "crawl", "url", "language", "language_score", *EXTRACTED_SIGNALS.columns()]


def _judge(result: Preview, docs: pl.DataFrame, chains: dict, samples: int) -> None:
    if "text" not in docs.columns:  # the chains do not read it; they carry it along
        docs = docs.with_columns(text=pl.lit(None, pl.Utf8))
    verdicts = {}
    for name, chain in chains.items():
        kept, rejected = chain.apply(docs, finish=False)
        verdict = pl.concat(
            [
                kept.select("doc_id", filter=pl.lit(KEPT), reason=pl.lit(None, pl.Utf8)),
                rejected.select("doc_id", "filter", "reason"),
            ]
        )
        verdicts[name] = verdict
        result.kept[name] += kept.height
        result.words[name] += int(
            docs.filter(pl.col("doc_id").is_in(kept["doc_id"].implode()))[WORDS].sum()
        )
        result.dropped_by[name].update(dict(rejected.group_by("filter").len().iter_rows()))
    result.documents += docs.height
    both = (
        docs.select("doc_id", "url", WORDS)
        .join(verdicts["current"], on="doc_id")
        .join(verdicts["proposed"], on="doc_id", suffix="_proposed")
    )
    _count(
        result.newly_dropped,
        both.filter((pl.col("filter") == KEPT) & (pl.col("filter_proposed") != KEPT)),
        "filter_proposed",
        "reason_proposed",
        samples,
    )
    _count(
        result.newly_kept,
        both.filter((pl.col("filter") != KEPT) & (pl.col("filter_proposed") == KEPT)),
        "filter",
        "reason",
        samples,
    )
    result.histograms = merge_counts(result.histograms, rule_histograms(docs, chains["proposed"]))


def _count(changes: dict, flipped: pl.DataFrame, by: str, reason: str, samples: int) -> None:
    flipped = flipped.with_columns(rule=pl.col(reason).str.extract(r"^([^=]+)", 1))
    for (name, rule), group in flipped.group_by(by, "rule", maintain_order=True):
        change = changes.setdefault((name, rule or name), Change())
        change.documents += group.height
        change.words += int(group[WORDS].sum() or 0)
        room = samples - len(change.samples)
        if room > 0:
            change.samples += (
                group.sort("doc_id").head(room).select("url", reason=pl.col(reason)).to_dicts()
            )


def text_report(result: Preview) -> str:
    lines = [
        f"{result.documents:,} extracted documents; columns read: "
        + ("all" if "text" in result.columns_read else "signals only (no text)"),
        f"kept: {result.kept['current']:,} now, {result.kept['proposed']:,} proposed "
        f"({result.kept['proposed'] - result.kept['current']:+,} documents, "
        f"{result.words['proposed'] - result.words['current']:+,} words)",
    ]
    for title, changes in (
        ("newly dropped (by the proposed recipe's filter and rule)", result.newly_dropped),
        ("newly kept (dropped now by)", result.newly_kept),
    ):
        lines.append(f"\n{title}:")
        if not changes:
            lines.append("  none")
        for (name, rule), change in sorted(changes.items(), key=lambda c: -c[1].documents):
            lines.append(
                f"  {name} / {rule}: {change.documents:,} documents, {change.words:,} words"
            )
            lines += [f"      {s['url']}  ({s['reason'] or 'kept'})" for s in change.samples]
    return "\n".join(lines)


def html_report(result: Preview) -> str:
    """The text report and, per rule, its values' histogram with both thresholds marked."""
    pictures = [
        f"<h4>{html.escape(key)}</h4><p>{html.escape(caption)}</p>"
        f"<img alt='{html.escape(key)}' src='{uri}' style='border:1px solid #ccc'>"
        for key, caption, uri in rule_pictures(result.histograms, result.thresholds)
    ]
    return (
        "<!doctype html><meta charset=utf-8><title>tokenmill preview</title>"
        "<body style='font-family:sans-serif'>"
        f"<pre>{html.escape(text_report(result))}</pre>"
        "<p>Distributions of each rule's value over every document read (bins 0.01 wide in "
        f"[0, 1], 10 per decade above 1): <span style='color:{MARK_COLORS['current']}'>"
        f"current</span> and <span style='color:{MARK_COLORS['proposed']}'>proposed</span> "
        "(dashed) thresholds.</p>" + "".join(pictures) + "</body>"
    )
