"""How fast a quality classifier scores extracted documents (issue "Quality classifiers": at
least 2,000 documents per second per core on real pages), by model size.

    uv run python benchmarks/bench_classifiers.py                     # ../shared's real pages
    uv run python benchmarks/bench_classifiers.py --pages DIR [--sample N]

The pages are extracted (the `extracted` stage, bare); a classifier is trained with
`tokenmill train-classifier`'s code (positives: the English half of the extracted documents,
negatives: a sample of the crawl; what it learns does not matter here), once with fastText's
default size (dim 100, 2,000,000 bigram buckets) and once small (dim 16, 100,000 buckets). Every
extracted document is then scored ``BENCH_ROUNDS`` times (3) in this process, one thread, in
batches of 1,000 (`positive_scores`); CPU seconds, medians. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_clean import (  # noqa: E402
    EXTRACTION,
    REAL_WARC,
    html_folder_lake,
    real_warc_lake,
    whole_stage,
)
from benchmarks.measure import print_table, shared_path  # noqa: E402
from tokenmill.classifiers import TrainingSettings, positive_scores, train_classifier  # noqa: E402
from tokenmill.layout import EXTRACTED  # noqa: E402
from tokenmill.outputs import part_files, read_batches  # noqa: E402
from tokenmill.stages.extracted import DEFAULT_EXTRACTOR  # noqa: E402

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
            rows.append([label, card["model_bytes"] / 1e6, cpu, rate, text_mb / cpu])
            figures[name] = {
                "model_bytes": card["model_bytes"],
                "cpu_s": seconds,
                "docs_per_cpu_s": rate,
            }
        figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print_table(
        f"Scoring {len(texts):,} extracted documents ({text_mb:.1f} MB of text), one thread, "
        f"CPU seconds per pass, median of {rounds}",
        ["model", "model MB", "CPU s", "docs per CPU s", "MB of text per CPU s"],
        rows,
    )
    verdict = "met" if all(r[3] >= TARGET for r in rows) else "NOT met"
    print(f"target: >= {TARGET:,} documents per second per core: {verdict}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
