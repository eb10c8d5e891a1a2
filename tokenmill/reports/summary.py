"""Read-side views of the lake: the per-stage summary table and token tracing."""

from __future__ import annotations

import bisect

import pyarrow.parquet as pq

from tokenmill.crawl.units import registered_crawls, registered_units
from tokenmill.runtime.stage import Scope
from tokenmill.stages import STAGES
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    MARKER,
    RELEASE,
    TOKENIZED_SHARDS,
    Unit,
    crawl_prefix,
    never_read,
)
from tokenmill.storage.outputs import (
    LANGUAGES,
    WARNINGS,
    MissingInputError,
    is_committed,
    merge_counts,
    require_committed,
)
from tokenmill.tokens.megatron import IndexedDataset


def stage_rows(lake: Lake, stages=STAGES, label: str = "") -> list[dict]:
    """One row per partitioned stage of `stages` (named `label` + its name): committed
    partitions and their summed counters."""
    crawls = registered_crawls(lake)
    units = [u for c in crawls for u in registered_units(lake, c)]
    prefixes = {
        Scope.UNIT: lambda stage: [u.prefix(stage) for u in units],
        Scope.CRAWL: lambda stage: [crawl_prefix(stage, c) for c in crawls],
    }
    return [
        _row(lake, label + stage.name, prefixes[stage.scope](stage.name))
        for stage in stages
        if stage.scope in prefixes
    ]


def _row(lake: Lake, name: str, prefixes: list[str]) -> dict:
    row = {
        "stage": name,
        "partitions": f"0/{len(prefixes)}",
        "docs_in": 0,
        "docs_out": 0,
        "dropped": 0,
        "unread": 0,
        "tokens": 0,
        "mb_out": 0.0,
    }
    done = 0
    for prefix in prefixes:
        if not is_committed(lake, prefix):
            continue
        done += 1
        summary = lake.read_json(f"{prefix}/{MARKER}")
        row["docs_in"] += summary["records_in"]
        row["docs_out"] += summary["records_out"]
        for reason, count in summary["dropped"].items():
            row["unread" if never_read(reason) else "dropped"] += count
        row["tokens"] += summary["counts"].get("tokens", 0)
        row["mb_out"] += summary["bytes_out"] / 1e6
    row["partitions"] = f"{done}/{len(prefixes)}"
    row["mb_out"] = round(row["mb_out"], 2)
    return row


def languages(lake: Lake, stage: str = TOKENIZED_SHARDS) -> dict[str, dict]:
    """Documents and tokens per language in a stage's committed units (their markers'
    ``languages`` counts), most documents first."""
    total: dict[str, dict] = {}
    for crawl in registered_crawls(lake):
        for unit in registered_units(lake, crawl):
            if is_committed(lake, unit.prefix(stage)):
                marker = lake.read_json(f"{unit.prefix(stage)}/{MARKER}")
                total = merge_counts(total, marker["counts"].get(LANGUAGES, {}))
    return dict(sorted(total.items(), key=lambda item: -item[1].get("documents", 0)))


def language_line(name: str, found: dict[str, dict]) -> str:
    """``name: <language> <documents> docs, <tokens> tokens (<share> %); ...``."""
    tokens = sum(counts.get("tokens", 0) for counts in found.values()) or 1
    parts = [
        f"{language} {c['documents']:,} docs, {c.get('tokens', 0):,} tokens "
        f"({100 * c.get('tokens', 0) / tokens:.1f} %)"
        for language, c in found.items()
    ]
    return f"{name} per language: " + "; ".join(parts)


# What each column of the table means, printed under it.
LEGEND = {
    "partitions": "partitions committed, of those registered",
    "docs_in": "documents read (raw_crawl: WARC records; score_distribution: units)",
    "docs_out": "documents kept",
    "dropped": "documents of docs_in left out: docs_in = docs_out + dropped",
    "unread": "not in docs_in: records raw_crawl could not read, met again; unusable files",
    "tokens": "tokens written",
    "mb_out": "megabytes written",
    "dagster": "partitions the Dagster instance shows materialized",
}


def legend(rows: list[dict]) -> str:
    """The meaning of each column of ``rows``' table."""
    columns = [c for c in rows[0] if c in LEGEND] if rows else []
    width = max(map(len, columns), default=0)
    return "\n".join(f"{c.ljust(width)}  {LEGEND[c]}" for c in columns)


def latest_release(lake: Lake) -> dict | None:
    """A recipe's latest release, where it is and its counts (with ``warnings``, what its
    publishing said: an empty split, say); None before the first."""
    from tokenmill.release.plan import release_report

    try:
        counts = release_report(lake)["counts"]
    except MissingInputError:
        return None
    return {
        "location": lake.uri(f"{RELEASE}/{counts['version']}"),
        WARNINGS: [],
        **{k: v for k, v in counts.items() if k != "tokenizer_sha256"},
    }


def format_table(rows: list[dict]) -> str:
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = [
        " | ".join(c.ljust(widths[c]) for c in columns),
        "-+-".join("-" * widths[c] for c in columns),
    ]
    lines += [
        " | ".join(
            str(r[c]).rjust(widths[c])
            if isinstance(r[c], int | float)
            else str(r[c]).ljust(widths[c])
            for c in columns
        )
        for r in rows
    ]
    return "\n".join(lines)


class NoSuchTokenError(IndexError):
    """A part or a token position that the unit's tokenized shards do not hold."""


def trace_token(lake: Lake, unit: Unit, part: int, position: int, window: int = 24) -> dict:
    """Where the token at `position` of a unit's tokenized file came from, and the text around
    it. Raises MissingInputError if the unit has no tokenized shards and NoSuchTokenError for a
    part or position outside them."""
    prefix = _tokenized_part(lake, unit, part)
    keys = (f"{prefix}/tokens.bin", f"{prefix}/tokens.idx", f"{prefix}/provenance.parquet")
    return _trace(lake, *keys, position, lake.uri(prefix), window)


def trace_release_token(
    lake: Lake, shard: str, position: int, version: str | None = None, window: int = 24
) -> dict:
    """Where the token at `position` of a release shard (`train-00000`) came from: the
    release's provenance sidecar names its tokenized file and document, and their source."""
    from tokenmill.release.plan import release_report

    marker = release_report(lake, version)
    prefix = f"{RELEASE}/{marker['counts']['version']}"
    if f"{shard}.bin" not in marker["outputs"]:
        shards = sorted(k[:-4] for k in marker["outputs"] if k.endswith(".bin"))
        raise NoSuchTokenError(f"release {prefix} has no shard {shard!r}; shards: {shards[:10]}")
    keys = (
        f"{prefix}/{shard}.bin",
        f"{prefix}/{shard}.idx",
        f"{prefix}/{shard}.provenance.parquet",
    )
    return _trace(lake, *keys, position, lake.uri(f"{prefix}/{shard}"), window)


def _trace(lake, bin_key, idx_key, sidecar_key, position: int, where: str, window: int) -> dict:
    from tokenmill.tokens.tokenization import load_tokenizer

    if position < 0:
        raise NoSuchTokenError(f"token position must be 0 or more, not {position}")
    with lake.open_input(sidecar_key) as f:
        sidecar = pq.read_table(f).to_pylist()
    starts = [row["token_start"] for row in sidecar]
    doc = bisect.bisect_right(starts, position) - 1
    with lake.open_input(bin_key) as bin_file:
        dataset = IndexedDataset(lake.read_bytes(idx_key), bin_file)
        if doc < 0 or doc >= len(dataset) or position >= starts[doc] + dataset.lengths[doc]:
            total = int(sum(dataset.lengths))
            held = f"tokens 0 to {total - 1}" if total else "no tokens"
            raise NoSuchTokenError(
                f"token {position} is past the end of {where}, which holds {held}"
            )
        tokens = dataset.document(doc)
    row = sidecar[doc]
    tokenizer, _ = load_tokenizer(lake)
    at = position - row["token_start"]
    lo, hi = max(0, at - window), min(row["token_end"] - row["token_start"], at + window + 1)
    return {
        **row,
        "position": position,
        "token_id": int(tokens[at]),
        "token": tokenizer.id_to_token(int(tokens[at])),
        "is_end_of_document": at >= row["token_end"] - row["token_start"],
        "before": tokenizer.decode(tokens[lo:at].tolist()),
        "text": tokenizer.decode(tokens[at : at + 1].tolist()),
        "after": tokenizer.decode(tokens[at + 1 : hi].tolist()),
    }


def _tokenized_part(lake: Lake, unit: Unit, part: int) -> str:
    """The prefix of the unit's tokenized file `part`, checked to be committed."""
    marker = require_committed(
        lake, unit.prefix(TOKENIZED_SHARDS), f"{TOKENIZED_SHARDS} of unit {unit}"
    )
    files = marker["counts"]["files"]
    if not 0 <= part < files:
        numbered = f"{files} files, numbered from 0" if files > 1 else "one file, number 0"
        raise NoSuchTokenError(f"unit {unit} has no file {part}: it has {numbered}")
    return unit.part_prefix(TOKENIZED_SHARDS, part)
