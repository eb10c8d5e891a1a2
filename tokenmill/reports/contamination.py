"""What a recipe's decontamination removed: per evaluation set the documents and words, the
items they matched (read from the cleaned units' markers), and the passages themselves with
their URLs (from `contamination.parquet`), for `tokenmill contamination`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from tokenmill.decontamination.index import SetIndex
from tokenmill.decontamination.removal import (
    CONTAMINATION,
    CONTAMINATION_FILE,
    DECONTAMINATED_AGAINST,
)
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import CLEANED, Unit
from tokenmill.storage.outputs import merge_counts, part_files, read_markers, read_table

SHOWN = ["set", "item", "url", "action", "start", "end", "ngram", "doc_id"]


@dataclass
class Contamination:
    units: int = 0  # cleaned units read
    checked: int = 0  # of which decontaminated
    versions: dict[str, set[str]] = field(default_factory=dict)  # set -> SHA-256s seen
    totals: dict[str, dict] = field(default_factory=dict)  # set -> documents, words, items


def contamination(lake: Lake, units: Iterable[Unit], sets: list[str] | None) -> Contamination:
    """The sums of the cleaned markers of ``units``."""
    found = Contamination()
    for marker in read_markers(lake, (unit.prefix(CLEANED) for unit in units)):
        if marker is None:
            continue
        counts = marker["counts"]
        found.units += 1
        if DECONTAMINATED_AGAINST not in counts:
            continue
        found.checked += 1
        for name, sha256 in counts[DECONTAMINATED_AGAINST].items():
            if not sets or name in sets:
                found.versions.setdefault(name, set()).add(sha256)
        wanted = {k: v for k, v in counts[CONTAMINATION].items() if not sets or k in sets}
        found.totals = merge_counts(found.totals, wanted)
    return found


def passages(lake: Lake, units: Iterable[Unit], sets: list[str] | None, limit: int):
    """Up to ``limit`` passages found in ``units``, of ``sets`` (any)."""
    found, wanted = [], limit
    for unit in units:
        for key in part_files(lake, unit, CLEANED, CONTAMINATION_FILE):
            if wanted <= 0:
                break
            if not lake.exists(key):
                continue
            rows = pl.from_arrow(read_table(lake, key, SHOWN))
            if sets:
                rows = rows.filter(pl.col("set").is_in(sets))
            found.append(rows.head(wanted))
            wanted -= found[-1].height
    if not found:
        return pl.DataFrame(schema={c: pl.Utf8 for c in SHOWN})
    return pl.concat(found)


def report(lake: Lake, result: Contamination, shown: pl.DataFrame, top: int = 10) -> str:
    lines = []
    if not result.checked:
        return (
            f"no decontaminated documents: {result.units} cleaned units read, none checked "
            "against an evaluation set (clean.decontaminate names none, or the recipe has not "
            "run since)"
        )
    lines.append(f"{result.checked} of {result.units} cleaned units checked against:")
    for name, versions in sorted(result.versions.items()):
        state = "" if len(versions) == 1 else f" ({len(versions)} versions: rebuild cleaned)"
        lines.append(f"  {name}  sha256 {', '.join(sorted(versions))}{state}")
    lines.append("")
    lines.append(
        f"{'set':20} {'documents':>10} {'dropped':>8} {'words removed':>14} {'items matched':>14}"
    )
    for name in sorted(result.versions):
        total = result.totals.get(name, {})
        lines.append(
            f"{name:20} {total.get('documents', 0):>10,} {total.get('removed_documents', 0):>8,} "
            f"{total.get('words', 0):>14,} {len(total.get('items', {})):>14,}"
        )
    matched = Counter()
    for name, total in result.totals.items():
        for item, times in total.get("items", {}).items():
            matched[(name, item)] += times
    if matched:
        lines += ["", f"items matched most (of {len(matched)}): set, item, passages, its text"]
        indexes = {}
        for (name, item), times in matched.most_common(top):
            preview = _item_text(lake, indexes, name, result.versions[name], item)
            lines.append(f"  {name}  {item}  {times}  {preview!r}")
    if shown.height:
        lines += ["", f"passages (first {shown.height}): set, item, action, URL, characters"]
        for row in shown.iter_rows(named=True):
            lines.append(
                f"  {row['set']}  {row['item']}  {row['action']}  {row['url']}  "
                f"{row['start']}-{row['end']}"
            )
            lines.append(f"      {row['ngram'][:120]!r}")
    return "\n".join(lines)


def _item_text(lake: Lake, indexes: dict, name: str, versions: set[str], item: str) -> str:
    """The start of an item's text, from an index its units were checked against."""
    if name not in indexes:
        try:
            index = SetIndex.read(lake, name, min(versions))
            indexes[name] = dict(zip(index.ids, index.previews, strict=True))
        except FileNotFoundError:
            indexes[name] = {}
    return (indexes[name].get(item) or "")[:80]
