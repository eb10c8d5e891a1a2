"""Synthetic stage outputs for benchmarks: a registered unit whose parts are written directly,
committed as a stage run commits them (`tokenmill.runtime.parts.run_unit`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tokenmill.crawl.units import write_batch
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import LANDING, MARKER, Unit, part_name
from tokenmill.storage.outputs import PartitionWriter, StageReport, combine


def write_unit(
    lake: Lake,
    zone: str,
    unit: Unit,
    parts: Sequence[Callable[[PartitionWriter], None]],
    counts: dict | None = None,
) -> StageReport:
    """Register `unit` with one (never read) landing file per part, write part i of `zone` with
    ``parts[i](out)`` (each part's report starts with `counts`), then the unit's marker."""
    files = [
        f"{LANDING}/{unit.crawl}/{unit.name}-{part_name(p)}.warc.gz" for p in range(len(parts))
    ]
    if write_batch(lake, unit.crawl, int(unit.name), [files]) != [unit]:
        raise RuntimeError(f"{unit} is already registered with other files in {lake.url}")
    reports = {}
    for part, write in enumerate(parts):
        report = StageReport(counts=dict(counts or {}))
        with PartitionWriter(lake, unit.part_prefix(zone, part), report) as out:
            write(out)
        reports[part_name(part)] = report
    total = combine(reports)
    total.counts["files"] = len(parts)
    lake.write_json(f"{unit.prefix(zone)}/{MARKER}", total.summary())
    return total
