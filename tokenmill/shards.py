"""Crawls, shards and where each stage keeps them in the lake.

WARC files arrive in `landing/<crawl>/`. Registering a crawl groups files that are not yet in a
shard into new shards (`00000`, `00001`, ...) and records each shard's file list in
`manifests/<crawl>/<shard>.json`. Manifests are append-only, so a shard's content never changes
once registered, whatever arrives later.

Output layout: `<stage>/<crawl>/<shard>/...` for per-shard stages and `<stage>/<crawl>/...` for
per-crawl stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenmill.lake import Lake, check_key_part

LANDING = "landing"
MANIFESTS = "manifests"
WARC_SUFFIXES = (".warc.gz", ".warc", ".arc.gz", ".arc")


@dataclass(frozen=True, order=True)
class Shard:
    crawl: str
    shard: str

    def __post_init__(self):
        check_key_part(self.crawl)
        check_key_part(self.shard)

    def prefix(self, stage: str) -> str:
        return f"{stage}/{self.crawl}/{self.shard}"

    @property
    def manifest_key(self) -> str:
        return f"{MANIFESTS}/{self.crawl}/{self.shard}.json"

    def __str__(self) -> str:
        return f"{self.crawl}/{self.shard}"


def crawl_prefix(stage: str, crawl: str) -> str:
    return f"{stage}/{check_key_part(crawl)}"


def shard_name(index: int) -> str:
    return f"{index:05d}"


def landing_files(lake: Lake, crawl: str) -> list[str]:
    return [
        key
        for key in lake.list(f"{LANDING}/{check_key_part(crawl)}")
        if key.endswith(WARC_SUFFIXES)
    ]


def registered_shards(lake: Lake, crawl: str) -> list[Shard]:
    keys = lake.list(f"{MANIFESTS}/{check_key_part(crawl)}")
    return [Shard(crawl, key.rsplit("/", 1)[1].removesuffix(".json")) for key in keys]


def registered_crawls(lake: Lake) -> list[str]:
    return sorted({key.split("/")[1] for key in lake.list(MANIFESTS)})


def shard_files(lake: Lake, shard: Shard) -> list[str]:
    """Landing keys of a shard's WARC files; a shard the crawl never registered is empty."""
    if not lake.exists(shard.manifest_key):
        return []
    return lake.read_json(shard.manifest_key)["files"]


def register_new_files(lake: Lake, crawl: str, files_per_shard: int) -> list[Shard]:
    """Group landed files that are in no shard yet into new shards; returns the new shards."""
    existing = registered_shards(lake, crawl)
    assigned = {key for shard in existing for key in shard_files(lake, shard)}
    new_files = [key for key in landing_files(lake, crawl) if key not in assigned]
    next_index = 1 + max((int(s.shard) for s in existing), default=-1)
    created = []
    for start in range(0, len(new_files), files_per_shard):
        shard = Shard(crawl, shard_name(next_index + len(created)))
        files = new_files[start : start + files_per_shard]
        lake.write_json(shard.manifest_key, {"crawl": crawl, "shard": shard.shard, "files": files})
        created.append(shard)
    return created


def landed_crawls(lake: Lake) -> list[str]:
    """Crawl folders of the landing zone. A folder whose name is not a plain name (hidden,
    path-like) can never be registered: it is left out rather than stop discovery of the rest."""
    return [crawl for crawl in lake.list_dirs(LANDING) if _is_plain_name(crawl)]


def _is_plain_name(name: str) -> bool:
    try:
        check_key_part(name)
    except ValueError:
        return False
    return True


def resume_position(lake: Lake, crawl: str) -> dict[str, Any]:
    """Where discovery of a crawl goes on from: after the last file of its newest shard."""
    shards = registered_shards(lake, crawl)
    if not shards:
        return {"after": "", "next": 0}
    last = shards[-1]
    return {"after": max(shard_files(lake, last), default=""), "next": int(last.shard) + 1}


def discover(
    lake: Lake, positions: dict[str, dict], files_per_shard: int, max_keys: int
) -> tuple[list[Shard], dict[str, dict]]:
    """Register shards for files landed since `positions` (per crawl: last key seen, next shard
    index), listing at most `max_keys` keys; returns the new shards and the new positions.

    Files are taken in key order (Common Crawl names sort by arrival). A trailing group smaller
    than `files_per_shard` waits for more files unless the listing reached the end. Re-running
    from older positions (a tick that crashed) rewrites the same manifests, so nothing doubles;
    a manifest that differs (shards registered meanwhile by `tokenmill register`) resumes from
    the lake instead. Files landing out of key order are left to `register_new_files`.
    """
    if max_keys < 2 * files_per_shard:
        raise ValueError(f"max_keys ({max_keys}) must be at least twice files_per_shard")
    positions = {crawl: dict(position) for crawl, position in positions.items()}
    created: list[Shard] = []
    budget = max_keys
    for crawl in landed_crawls(lake):
        if budget <= 0:
            break
        position = positions.setdefault(crawl, resume_position(lake, crawl))
        keys = lake.list_after(f"{LANDING}/{crawl}", position["after"], budget)
        budget -= len(keys)
        exhausted = budget > 0
        files = [key for key in keys if key.endswith(WARC_SUFFIXES)]
        for start in range(0, len(files), files_per_shard):
            group = files[start : start + files_per_shard]
            if len(group) < files_per_shard and not exhausted:
                break
            shard = Shard(crawl, shard_name(position["next"]))
            manifest = {"crawl": crawl, "shard": shard.shard, "files": group}
            if lake.exists(shard.manifest_key) and lake.read_json(shard.manifest_key) != manifest:
                positions[crawl] = resume_position(lake, crawl)
                break
            lake.write_json(shard.manifest_key, manifest)
            created.append(shard)
            position.update(after=group[-1], next=position["next"] + 1)
    return created, positions
