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
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from tokenmill.filters import FilterChain
from tokenmill.lake import Lake
from tokenmill.layout import EXTRACTED, MARKER, Unit
from tokenmill.outputs import read_batches
from tokenmill.stages.extracted import EXTRACTED_SCHEMA, SIGNALS

KEPT = "kept"
WORDS = "gopher_quality.n_words"  # every document's word count, a stored signal
# Values kept per rule for its picture: enough for a smooth histogram, bounded memory.
PICTURE_VALUES = 200_000


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
    values: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    thresholds: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)


def preview(lake: Lake, units: Iterable[Unit], current, proposed, samples: int = 3) -> Preview:
    """Judge every extracted document of `units` by the `current` and `proposed` clean
    settings (`CleanSettings`)."""
    chains = {"current": current.chain(), "proposed": proposed.chain()}
    result = Preview(columns_read=_columns(chains.values()))
    _note_thresholds(result, chains)
    for unit in units:
        marker = lake.read_json(f"{unit.prefix(EXTRACTED)}/{MARKER}")
        for part in range(marker["counts"]["files"]):
            key = f"{unit.part_prefix(EXTRACTED, part)}/docs.parquet"
            for batch in read_batches(lake, key, result.columns_read):
                _judge(result, pl.from_arrow(batch), chains, samples)
    return result


def _columns(chains) -> list[str]:
    """The extracted columns the chains need: no text when signals judge every filter."""
    needs_text = any(
        getattr(f, "reads_text", True) and f.name not in chain.stored
        for chain in chains
        for f in chain.filters
    )
    if needs_text:
        return EXTRACTED_SCHEMA.names
    return ["doc_id", "url", "language", "language_score", *SIGNALS.columns()]


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
        result.words[name] += int(docs.filter(pl.col("doc_id").is_in(kept["doc_id"]))[WORDS].sum())
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
    _collect_values(result, docs, chains["proposed"])


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


def _note_thresholds(result: Preview, chains: dict) -> None:
    for name, chain in chains.items():
        for flt in chain.filters:
            for rule in getattr(flt, "_rules", list)():
                key = (flt.name, rule.label)
                if rule.threshold:
                    result.thresholds.setdefault(key, {})[name] = f"{rule.op}{rule.threshold}"


def _collect_values(result: Preview, docs: pl.DataFrame, chain: FilterChain) -> None:
    """The proposed recipe's rule values of every document, for the pictures."""
    for flt in chain.filters:
        if flt.name not in chain.stored:
            continue
        stats = docs.select(pl.col(f"{flt.name}.{s}").alias(s) for s in flt.signals)
        for rule in flt._rules():
            values = result.values[(flt.name, rule.label)]
            room = PICTURE_VALUES - len(values)
            if room > 0:
                column = stats.select(rule.value.cast(pl.Float64).fill_nan(None)).to_series()
                values += column.drop_nulls().head(room).to_list()


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
        _histogram(f"{name} / {label}", values, result.thresholds.get((name, label), {}))
        for (name, label), values in sorted(result.values.items())
        if values
    ]
    return (
        "<!doctype html><meta charset=utf-8><title>tokenmill preview</title>"
        "<body style='font-family:sans-serif'>"
        f"<pre>{html.escape(text_report(result))}</pre>"
        "<p>Distributions of the proposed recipe's rule values (up to "
        f"{PICTURE_VALUES:,} documents per rule): <span style='color:#1f77b4'>current</span> "
        "and <span style='color:#d62728'>proposed</span> thresholds.</p>"
        + "".join(pictures)
        + "</body>"
    )


def _histogram(title: str, values: list[float], thresholds: dict[str, str], bins: int = 40):
    marks = {name: float(t.lstrip("<>")) for name, t in thresholds.items() if t.lstrip("<>")}
    ordered = sorted(values)
    low = min(ordered[len(ordered) // 100], *marks.values())
    high = max(ordered[len(ordered) * 99 // 100], *marks.values())
    width = (high - low) / bins or 1.0
    counts = [0] * bins
    for value in ordered:
        counts[min(bins - 1, max(0, int((value - low) / width)))] += 1
    top = max(counts) or 1
    w, h = 480, 140
    bars = "".join(
        f"<rect x='{i * w / bins:.1f}' y='{h - c * h / top:.1f}' width='{w / bins - 1:.1f}' "
        f"height='{c * h / top:.1f}' fill='#999'/>"
        for i, c in enumerate(counts)
    )
    colors = {"current": "#1f77b4", "proposed": "#d62728"}
    lines = "".join(
        f"<line x1='{x:.1f}' x2='{x:.1f}' y1='0' y2='{h}' stroke='{colors[name]}' "
        f"stroke-width='2'><title>{name} {html.escape(thresholds[name])}</title></line>"
        for name, mark in marks.items()
        for x in [(mark - low) / (high - low or 1) * w]
    )
    return (
        f"<h4>{html.escape(title)} ({len(values):,} documents; {low:.4g} to {high:.4g})</h4>"
        f"<svg width='{w}' height='{h}' style='border:1px solid #ccc'>{bars}{lines}</svg>"
    )
