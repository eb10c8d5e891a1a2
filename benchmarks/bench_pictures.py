"""What the rule-distribution pictures cost: every crawl's materialization of the stage that
gathers the units' rule histograms (`dedup_clusters`) and every preview draw one picture a rule
(`tokenmill.reports.plots.markdown`; the UI shows them in the metadata).

    uv run python benchmarks/bench_pictures.py [--lake lake] [--recipe fineweb_en] [--rounds 5]

Input: the histograms of a lake's `cleaned` units (default: the demo lake `uv run tokenmill demo`
makes). Measured: a fresh process's first drawing (its imports included), then the
median of ``--rounds`` drawings in that process; per unit and per picture, with the metadata's
size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from tokenmill.data_assets.datasets import recipe_zones

from benchmarks.results import record
from tokenmill.crawl.units import registered_crawls, registered_units
from tokenmill.filters.histograms import gathered
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import CLEANED

DRAW = """
import json, sys, time
histograms = json.load(sys.stdin)
started = time.perf_counter()
from tokenmill.reports.plots import markdown
text = markdown(histograms)
first = time.perf_counter() - started
rounds = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    markdown(histograms)
    rounds.append(time.perf_counter() - started)
print(json.dumps({"first_s": first, "rounds_s": rounds, "bytes": len(text)}))
"""


def unit_histograms(lake: Lake, recipe: str) -> dict[str, dict]:
    """The rule histograms of the recipe's first cleaned unit, from its marker."""
    view = lake.with_zones(recipe_zones(recipe))
    for crawl in registered_crawls(lake):
        for unit in registered_units(lake, crawl):
            histograms, without, _ = gathered(view, [unit.prefix(CLEANED)])
            if not without:
                return histograms
    sys.exit(f"no cleaned unit of {recipe} in {lake.uri('')}: run `uv run tokenmill demo` first")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lake", default="lake")
    parser.add_argument("--recipe", default="fineweb_en")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    histograms = unit_histograms(Lake.from_url(str(Path(args.lake).resolve())), args.recipe)
    done = subprocess.run(
        [sys.executable, "-c", DRAW, str(args.rounds)],
        input=json.dumps(histograms),
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout)
    per_unit = statistics.median(measured["rounds_s"])
    figures = {
        "pictures_per_unit": len(histograms),
        "first_drawing_s": round(measured["first_s"], 3),
        "unit_s": round(per_unit, 3),
        "picture_s": round(per_unit / len(histograms), 4),
        "metadata_bytes": measured["bytes"],
    }
    print(json.dumps(figures))
    record("bench_pictures", figures, {"data": f"a cleaned unit of {args.recipe} in {args.lake}"})


if __name__ == "__main__":
    main()
