"""Whether a recipe's latest release still matches its inputs: the version a release made now
would have (`tokenmill.release.plan.release_version`) against the latest published one, and,
when they differ, why in words.

A release is made on purpose, so tokenizing again after a recipe change leaves the latest
release as it was; this says it no longer matches. It reads the latest release's
`manifest.json` and `inputs.json` (each input unit's digest) and the markers of the units that
may have changed since (`touched`; all of them when the caller cannot say which): one marker per
changed unit, not one per unit, so a caller that knows which units were tokenized since the
release (the Dagster layer, from the instance) pays for those alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from tokenmill.crawl.units import registered_crawls, registered_units
from tokenmill.release.plan import ReleaseSettings, release_version, unit_digest
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, RELEASE, TOKENIZED_SHARDS

FRESH, STALE, NONE = "fresh", "stale", "none"
LATEST = f"{RELEASE}/latest.json"


@dataclass(frozen=True)
class ReleaseState:
    """`state`: FRESH (a release made now would be the latest one), STALE (it would not, or
    could not be made: `reason` says why) or NONE (nothing published yet)."""

    state: str
    reason: str = ""
    latest: str | None = None  # the latest published version
    planned: str | None = None  # a release made now; None when it could not be made now

    @property
    def is_stale(self) -> bool:
        return self.state == STALE


def latest_release(lake: Lake) -> str | None:
    return lake.read_json(LATEST)["version"] if lake.exists(LATEST) else None


def release_staleness(
    lake: Lake, settings: ReleaseSettings, touched: Iterable[str] | None = None
) -> ReleaseState:
    """The latest release of the recipe whose lake view is `lake` against one made now with
    `settings`. `touched`: the units (`crawl/unit`) whose tokenized shards may have changed
    since the latest release was planned; the others are taken to hold what the release's
    `inputs.json` says. None: every unit's marker is read (as planning a release does)."""
    latest = latest_release(lake)
    if latest is None:
        return ReleaseState(NONE, "no release yet")
    manifest = lake.read_json(f"{RELEASE}/{latest}/manifest.json")
    inputs_key = f"{RELEASE}/{latest}/{manifest['inputs']['per_unit']}"
    released: dict[str, str] = lake.read_json(inputs_key) if lake.exists(inputs_key) else {}
    if not released:
        touched = None  # nothing to take unread units' digests from
    reread = None if touched is None else set(touched)
    current: dict[str, str] = {}  # unit -> digest, in lake order, as planning reads them
    tokenizers: set[str] = set()
    changed = added = untokenized = 0
    seen: set[str] = set()
    for crawl in list(settings.crawls) or registered_crawls(lake):
        for unit in registered_units(lake, crawl):
            seen.add(unit.key)
            if unit.key in released and reread is not None and unit.key not in reread:
                current[unit.key] = released[unit.key]
                tokenizers.add(manifest["tokenizer_sha256"])
                continue
            marker = f"{unit.prefix(TOKENIZED_SHARDS)}/{MARKER}"
            if not lake.exists(marker):
                untokenized += 1
                continue
            found = lake.read_json(marker)
            current[unit.key] = unit_digest(found)
            tokenizers.add(found["counts"]["tokenizer_sha256"])
            if unit.key not in released:
                added += 1
            elif current[unit.key] != released[unit.key]:
                changed += 1
    planned = None
    if current and not untokenized and len(tokenizers) == 1:
        planned = release_version(settings, current, tokenizers.pop())
    if planned == latest:
        return ReleaseState(FRESH, latest=latest, planned=planned)
    reasons = [
        *_settings_changed(manifest["settings"], settings),
        *_count(changed, "tokenized shards changed in {} unit{}"),
        *_count(added, "{} unit{} added"),
        *_count(len(set(released) - seen), "{} released unit{} left out"),
        *_count(untokenized, "{} unit{} not tokenized yet"),
        *(["the units were tokenized with different tokenizers"] if len(tokenizers) > 1 else []),
    ]
    reason = ", ".join(reasons) or "its inputs changed"
    return ReleaseState(STALE, f"{reason} since release {latest}", latest, planned)


def _settings_changed(released: dict, settings: ReleaseSettings) -> list[str]:
    now = json.loads(json.dumps(settings.record()))
    names = sorted(name for name in now if released.get(name) != now[name])
    return [f"release settings changed ({', '.join(names)})"] if names else []


def _count(number: int, text: str) -> list[str]:
    return [text.format(number, "s" * (number != 1))] if number else []
