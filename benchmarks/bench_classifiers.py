"""How fast a quality classifier scores extracted documents (issue "Quality classifiers": at
least 2,000 documents per second per core on real pages), by model size.

    uv run python benchmarks/bench_classifiers.py                     # ../shared's real pages
    uv run python benchmarks/bench_classifiers.py --pages DIR [--sample N]

The pages are extracted (the `extracted` stage, bare); a classifier is trained with
`tokenmill train-classifier`'s code (positives: the English half of the extracted documents,
negatives: a sample of the crawl; what it learns does not matter here), once with fastText's
default size (dim 100, 2,000,000 bigram buckets) and once small (dim 16, 100,000 buckets). Every
extracted document is then scored ``BENCH_ROUNDS`` times (3) in this process, one thread, in
batches of 1,000 (`positive_scores`); CPU seconds, medians. Then the `scored` stage itself runs
the unit with each model declared, in a child process of its own (one worker): its documents
per CPU second include reading the text and writing the scores and histograms, and its peak
RSS is what the model and one batch take, whatever the unit's size. The last line is one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_clean import (
    EXTRACTION,
    REAL_WARC,
    html_folder_lake,
    landed_input,
    real_warc_lake,
    whole_stage,
)
from benchmarks.measure import print_table
from benchmarks.results import record
from testkit.shared_data import shared_path
from tokenmill.classifiers.training import TrainingSettings, positive_scores, train_classifier
from tokenmill.stages.extracted import DEFAULT_EXTRACTOR
from tokenmill.storage.layout import EXTRACTED
from tokenmill.storage.outputs import part_files, read_batches

SIZES = {
    "fastText default (dim 100, 2M buckets)": TrainingSettings(),
    "small (dim 16, 100k buckets)": TrainingSettings(dim=16, bucket=100_000),
}
BATCH = 1000
TARGET = 2000  # documents per second per core


def extracted_docs(lake, unit) -> list[tuple[str, str]]:
    """(language, text) of every extracted document of the unit."""
    docs = []
    for key in part_files(lake, unit, EXTRACTED):
        for batch in read_batches(lake, key, ["language", "text"]):
            docs += zip(*batch.to_pydict().values(), strict=True)
    return docs


STAGE_RUN = """
import json, sys, time
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import Unit
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.stages.scored import ScoreSettings

def peak_rss_mb():  # VmHWM: ru_maxrss would include the parent's peak (kept across exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

lake_url, crawl, unit, name = sys.argv[1:]
settings = ScoreSettings(classifiers=[{"name": name, "model": f"classifiers/{name}/model.bin"}])
cpu, wall = time.process_time(), time.perf_counter()
report = run_stage_work(stage_named("scored"), Lake.from_url(lake_url), settings,
                        unit=Unit(crawl, unit), workers=1)
print(json.dumps({"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
                  "docs": report.records_in,
                  "peak_rss_mb": peak_rss_mb()}))
"""


def scored_stage(lake, unit, name: str) -> dict:
    """The scored stage over the unit with one classifier, in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", STAGE_RUN, lake.url, unit.crawl, unit.name, name],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=Path, help="HTML files of this folder, wrapped in WARC")
    parser.add_argument("--sample", type=int, default=5000, help="how many of --pages' files")
    arguments = parser.parse_args()
    if arguments.pages is None and (
        shared_path(*EXTRACTION, "wcxb-dev-sample") is None or shared_path(*REAL_WARC) is None
    ):
        print("(skipped: ../shared is absent)")
        return
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        if arguments.pages is not None:
            lake, unit = html_folder_lake(root, arguments.pages, arguments.sample)
        else:
            lake, unit = real_warc_lake(root)
        landed = landed_input(root, arguments.pages, arguments.sample, None)
        whole_stage(str(root / "lake"), unit, DEFAULT_EXTRACTOR)
        docs = extracted_docs(lake, unit)
        texts = [text for _, text in docs]
        positives = root / "positives.txt"
        positives.write_text("\n".join(t.replace("\n", " ") for lang, t in docs if lang == "en"))
        text_mb = sum(len(t.encode()) for t in texts) / 1e6
        rows, figures = [], {"bench": "classifiers", "documents": len(texts), "text_mb": text_mb}
        import fasttext

        for label, settings in SIZES.items():
            name = f"bench_{settings.dim}"
            card = train_classifier(lake, name, positives, settings=settings)
            model = fasttext.load_model(lake.path(f"classifiers/{name}/model.bin"))
            seconds = []
            for _ in range(rounds):
                started = time.process_time()
                for start in range(0, len(texts), BATCH):
                    positive_scores(model, texts[start : start + BATCH])
                seconds.append(time.process_time() - started)
            cpu = statistics.median(seconds)
            rate = len(texts) / cpu
            stage = scored_stage(lake, unit, name)
            stage_rate = stage["docs"] / stage["cpu_s"]
            rows.append(
                [label, card["model_bytes"] / 1e6, cpu, rate, text_mb / cpu]
                + [stage_rate, stage["peak_rss_mb"]]
            )
            figures[name] = {
                "model_bytes": card["model_bytes"],
                "cpu_s": seconds,
                "docs_per_cpu_s": rate,
                "scored_stage": stage,
            }
        figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print_table(
        f"Scoring {len(texts):,} extracted documents ({text_mb:.1f} MB of text), one thread, "
        f"CPU seconds per pass, median of {rounds}",
        [
            "model",
            "model MB",
            "CPU s",
            "docs per CPU s",
            "MB of text per CPU s",
            "scored stage docs per CPU s",
            "stage peak RSS MB",
        ],
        rows,
    )
    verdict = "met" if all(min(r[3], r[5]) >= TARGET for r in rows) else "NOT met"
    print(f"target: >= {TARGET:,} documents per second per core: {verdict}")
    print(json.dumps(figures))
    record("bench_classifiers", figures, landed | {"documents": len(texts)})


if __name__ == "__main__":
    main()
