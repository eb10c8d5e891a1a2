"""Crawls and their units of work: which WARC files each unit reads, registered append-only.

A crawl's files come from its source: files dropped into `landing/<crawl>/` (the default), or
a declaration `crawls/<crawl>.json` naming a Common Crawl paths file or a prefix, read in place
(see `tokenmill.crawl.sources`). Registering a crawl groups the files that are in no unit yet into
new units of `files_per_unit` files, numbered on from the last (`00000`, `00001`, ...), and
writes them as one batch `manifests/<crawl>/<first>-<last>.json`. A batch is never rewritten,
so a unit's files never change once registered, whatever arrives later; a crawl's units are
read from its few batches, however many units it has.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenmill.crawl.sources import CrawlSource, crawl_source, is_warc_name
from tokenmill.storage.lake import Lake, LakeKeyError
from tokenmill.storage.layout import LANDING, MANIFESTS, Unit, check_name, unit_name

BATCH = re.compile(r"^(\d{5,})-(\d{5,})\.json$")


@dataclass
class Registration:
    """What registering a crawl did: new units, and the paths it refused, by reason."""

    crawl: str
    units: list[Unit] = field(default_factory=list)
    refused: dict[str, list[str]] = field(default_factory=dict)

    def refuse(self, reason: str, path: str) -> None:
        self.refused.setdefault(reason, []).append(path)

    def describe_refused(self, limit: int = 5) -> list[str]:
        lines = []
        for reason, paths in sorted(self.refused.items()):
            shown = ", ".join(paths[:limit]) + (
                f" and {len(paths) - limit} more" * (len(paths) > limit)
            )
            lines.append(f"{self.crawl}: {len(paths)} {reason}: {shown}")
        return lines


def _batch_key(crawl: str, first: int, last: int) -> str:
    return f"{MANIFESTS}/{crawl}/{unit_name(first)}-{unit_name(last)}.json"


def manifest_batches(lake: Lake, crawl: str) -> list[tuple[int, int, str]]:
    batches = []
    for key in lake.list(f"{MANIFESTS}/{check_name(crawl, 'crawl name')}"):
        match = BATCH.match(key.rsplit("/", 1)[1])
        if match:
            batches.append((int(match[1]), int(match[2]), key))
    return sorted(batches)


def unit_files_by_unit(lake: Lake, crawl: str) -> dict[str, list[str]]:
    """Every registered unit of a crawl with its files, in unit order."""
    units: dict[str, list[str]] = {}
    for _, _, key in manifest_batches(lake, crawl):
        units.update(lake.read_json(key)["units"])
    return dict(sorted(units.items()))


def registered_units(lake: Lake, crawl: str) -> list[Unit]:
    return [Unit(crawl, name) for name in unit_files_by_unit(lake, crawl)]


def registered_crawls(lake: Lake) -> list[str]:
    return sorted(
        {key.split("/")[1] for key in lake.list(MANIFESTS) if BATCH.match(key.rsplit("/", 1)[1])}
    )


def unit_files(lake: Lake, unit: Unit) -> list[str]:
    """The unit's files (lake keys or source URIs); a unit that was never registered fails."""
    index = int(unit.name) if unit.name.isdigit() else -1
    for first, last, key in manifest_batches(lake, unit.crawl):
        if first <= index <= last:
            return lake.read_json(key)["units"][unit.name]
    raise LakeKeyError(f"unit {unit} is not registered: no manifest lists it")


def write_batch(
    lake: Lake, crawl: str, first: int, groups: Sequence[list[str]]
) -> list[Unit] | None:
    """Record new units `first, first+1, ...`; None if another registration took those
    numbers with other files meanwhile (the caller starts again from the lake)."""
    units = {unit_name(first + i): files for i, files in enumerate(groups)}
    key = _batch_key(crawl, first, first + len(groups) - 1)
    batch = {"crawl": crawl, "units": units}
    if lake.exists(key):
        if lake.read_json(key) != batch:
            return None
    else:
        overlapping = [
            k
            for f, last, k in manifest_batches(lake, crawl)
            if f <= first + len(groups) - 1 and last >= first
        ]
        if overlapping:
            return None
        lake.write_json(key, batch)
    return [Unit(crawl, name) for name in units]


def register_new_files(
    lake: Lake, crawl: str, files_per_unit: int, verify: bool = True
) -> Registration:
    """Group the crawl's source files that are in no unit yet into new units."""
    if files_per_unit < 1:
        raise ValueError(f"files_per_unit must be at least 1, not {files_per_unit}")
    registration = Registration(check_name(crawl, "crawl name"))
    source = crawl_source(lake, crawl)
    files = source.files(lake, registration.refuse, verify=verify)
    for _ in range(3):  # a concurrent registration took our numbers: read the lake again
        existing = unit_files_by_unit(lake, crawl)
        assigned = {f for unit_files_ in existing.values() for f in unit_files_}
        new_files = [f for f in files if f not in assigned]
        groups = [
            new_files[i : i + files_per_unit] for i in range(0, len(new_files), files_per_unit)
        ]
        if not groups:
            return registration
        first = 1 + max((int(name) for name in existing), default=-1)
        units = write_batch(lake, crawl, first, groups)
        if units is not None:
            registration.units = units
            return registration
    raise RuntimeError(f"{crawl}: registration kept colliding with another registration")


def landed_crawls(lake: Lake) -> list[str]:
    """Crawl folders of the landing zone with a valid name (others are reported by
    `invalid_landing_folders` and never stop the discovery of the rest)."""
    return [crawl for crawl in lake.list_dirs(LANDING) if _is_valid_name(crawl)]


def invalid_landing_folders(lake: Lake) -> list[str]:
    return [crawl for crawl in lake.list_dirs(LANDING) if not _is_valid_name(crawl)]


def _is_valid_name(name: str) -> bool:
    try:
        check_name(name)
    except LakeKeyError:
        return False
    return True


def resume_position(lake: Lake, crawl: str) -> dict[str, Any]:
    """Where discovery of a crawl's landing folder goes on from: after its last registered
    landing file."""
    units = unit_files_by_unit(lake, crawl)
    if not units:
        return {"after": "", "next": 0}
    last_name = max(units)
    landed = [f for files in units.values() for f in files if f.startswith(f"{LANDING}/")]
    return {"after": max(landed, default=""), "next": int(last_name) + 1}


def discover(
    lake: Lake, positions: dict[str, dict], files_per_unit: int, max_keys: int
) -> tuple[list[Unit], dict[str, dict], list[str]]:
    """Register units for files landed since `positions` (per crawl: last key seen, next unit
    number), listing at most `max_keys` keys; returns the new units, the new positions and the
    problems found (named, so an operator can act; they never stop discovery).

    Files are taken in key order (Common Crawl names sort by arrival). A trailing group smaller
    than `files_per_unit` waits for more files unless the listing reached the end. Re-running
    from older positions (a tick that crashed) finds the same batch already written, so nothing
    doubles; a batch that differs (units registered meanwhile by `tokenmill register`) resumes
    from the lake instead. Files landing out of key order are left to `register_new_files`.
    """
    if max_keys < 2 * files_per_unit:
        raise ValueError(f"max_keys ({max_keys}) must be at least twice files_per_unit")
    positions = {crawl: dict(position) for crawl, position in positions.items()}
    created: list[Unit] = []
    problems = [
        f"landing folder {name!r} is not a valid crawl name; its files are ignored"
        for name in invalid_landing_folders(lake)
    ]
    budget = max_keys
    for crawl in landed_crawls(lake):
        if budget <= 0:
            break
        if CrawlSource.declared(lake, crawl):
            continue  # declared crawls register from their paths file or prefix
        try:
            position = positions.setdefault(crawl, resume_position(lake, crawl))
            keys = lake.list_after(f"{LANDING}/{crawl}", position["after"], budget)
        except LakeKeyError as error:  # e.g. a folder linked out of the lake: never read
            problems.append(f"landing folder {crawl!r}: {error}")
            continue
        budget -= len(keys)
        exhausted = budget > 0
        files = []
        for key in keys:
            if not is_warc_name(key):
                continue
            try:
                for part in key.split("/")[2:]:
                    check_name(part, "file name")
            except LakeKeyError as error:
                problems.append(str(error))
                continue
            if problem := lake.irregular(key):
                problems.append(f"{key}: {problem}; not registered")
                continue
            files.append(key)
        groups = [files[i : i + files_per_unit] for i in range(0, len(files), files_per_unit)]
        if not files:
            if keys:  # nothing to register among them: never list them again
                position["after"] = keys[-1]
            continue
        if len(groups[-1]) < files_per_unit and not exhausted:
            groups.pop()  # waits for more files
        if not groups:
            continue
        units = write_batch(lake, crawl, position["next"], groups)
        if units is None:
            positions[crawl] = resume_position(lake, crawl)
            continue
        created += units
        position.update(after=groups[-1][-1], next=position["next"] + len(groups))
    return created, positions, problems
