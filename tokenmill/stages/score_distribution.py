"""score_distribution: each classifier label's score histogram over every unit of a crawl, from
which a recipe's `keep_top` share becomes a threshold (`tokenmill.classifiers.scoring.top_share`).

It sums the histograms the units' `scored` markers hold (no document is read) and commits
`distribution.json`: per classifier its version and per label its histogram. Every unit of the
crawl must be scored by the same version of each classifier; a unit scored by another fails the
run, naming it.
"""

from __future__ import annotations

import hashlib
import json

from tokenmill.classifiers.scoring import DISTRIBUTION_FILE, top_share
from tokenmill.crawl.units import registered_units
from tokenmill.runtime.stage import CrawlBoundary, Pod, Scope, Stage, Work
from tokenmill.storage.layout import SCORE_DISTRIBUTION, SCORED
from tokenmill.storage.outputs import (
    MissingInputError,
    StageReport,
    merge_counts,
    require_committed,
)

SHOWN_SHARES = (0.01, 0.1, 0.3, 0.5)


def run(work: Work) -> StageReport:
    units = registered_units(work.lake, work.crawl)
    report = StageReport()
    histograms: dict = {}
    versions: dict[str, dict[str, list[str]]] = {}
    for unit in units:
        counts = require_committed(work.lake, unit.prefix(SCORED), f"scored {unit}")["counts"]
        histograms = merge_counts(histograms, counts.get("score_histograms", {}))
        for name, info in counts.get("classifiers", {}).items():
            versions.setdefault(name, {}).setdefault(info["version"], []).append(unit.name)
        report.records_in += 1
    mixed = {name: found for name, found in versions.items() if len(found) > 1}
    if mixed:
        name, found = next(iter(mixed.items()))
        fewest = min(found.values(), key=len)
        raise MissingInputError(
            f"crawl {work.crawl}: classifier {name} scored units with {len(found)} model "
            f"versions (e.g. unit {fewest[0]}); rematerialize scored for the crawl first"
        )
    distribution = {
        "crawl": work.crawl,
        "units": len(units),
        "classifiers": {
            name: {"version": next(iter(found)), "histograms": histograms.get(name, {})}
            for name, found in sorted(versions.items())
        },
    }
    data = json.dumps(distribution, sort_keys=True).encode()
    version = hashlib.sha256(data).hexdigest()
    report.counts["scored"] = {
        f"{name}.{label}": sum(counts.values())
        for name, entry in distribution["classifiers"].items()
        for label, counts in entry["histograms"].items()
    }
    # where a recipe's keep_top would cut, for a few shares: what a researcher picks from
    report.counts["keep_top_thresholds"] = {
        f"{name}.{label}": {
            str(share): round(top_share(counts, share).threshold, 6) for share in SHOWN_SHARES
        }
        for name, entry in distribution["classifiers"].items()
        for label, counts in entry["histograms"].items()
    }
    # a new distribution moves every unit's thresholds
    report.counts["unit_versions"] = {unit.name: version for unit in units}
    report.records_out = report.records_in
    with work.writer(report) as out:
        out.open(DISTRIBUTION_FILE).write(data)
    return report


STAGE = Stage(
    name=SCORE_DISTRIBUTION,
    scope=Scope.CRAWL,
    run=run,
    upstream=(SCORED,),
    group="extract",
    kinds=("json",),
    pod=Pod("1", "1Gi", "1", "2Gi"),
    data_files=(DISTRIBUTION_FILE,),
    shared=True,
    boundary=CrawlBoundary(gathered="crawl_scores", reported="unit_score_cuts"),
    description="Each classifier label's score distribution over every unit of the crawl, "
    "summed from the units' scored histograms: what a recipe's keep_top share is cut from.",
)
