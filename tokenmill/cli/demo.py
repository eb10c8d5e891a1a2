"""`tokenmill demo`: two small generated crawls taken through every stage, a quality classifier
trained on what was extracted, and a second recipe that keeps the pages it scores highest.

The demo's settings (its shared settings file, with the classifier declared, and its recipes
folder beside the project's) are written to the project settings file, where every later
command, the code location and the UI read them."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill.cli.context import default_lake

if TYPE_CHECKING:
    from tokenmill.storage.lake import Lake

# Two crawls of different sizes: every partition of every asset has data, whatever the other
# crawl holds.
DEMO_CRAWLS = {"CC-MAIN-DEMO-2026-01": (8, 0), "CC-MAIN-DEMO-2026-02": (4, 1)}  # files, seed
DEMO_CLASSIFIER = "demo_quality"
DEMO_DIR = Path(__file__).resolve().parents[1] / "demo"
DEMO_EXTRACTION = DEMO_DIR / "extraction.yaml"
DEMO_RECIPES = DEMO_DIR / "recipes"
DEMO_EVAL_SET = "eval/demo_qa.jsonl"  # a lake key, as the demo's shared settings declare it
EVAL_EVERY = 25  # one good page in this many has a paragraph in the evaluation set


def land_demo_crawl(lake: Lake, crawl: str, files: int, pages_per_file: int, seed: int) -> dict:
    """Generate the demo crawl and land it; a crawl landed with the same parameters is kept."""
    from tokenmill.storage.layout import LANDING

    try:
        from tokenmill.demo.crawl import generate_demo_crawl
    except ModuleNotFoundError as error:
        if error.name != "faker":
            raise
        raise SystemExit(f"tokenmill demo: {error}") from error

    truth_key = f"demo/{crawl}/truth.json"
    params = {"files": files, "pages_per_file": pages_per_file, "seed": seed}
    if lake.exists(truth_key) and lake.read_json(truth_key).get("params") == params:
        return lake.read_json(truth_key)
    with tempfile.TemporaryDirectory() as scratch:
        warc_dir, truth_path = Path(scratch, "warc"), Path(scratch, "truth.json")
        generate_demo_crawl(
            warc_dir, truth_path, crawl=crawl, files=files, pages_per_file=pages_per_file, seed=seed
        )
        for path in sorted(warc_dir.iterdir()):
            lake.put_file(f"{LANDING}/{crawl}/{path.name}", path)
        truth = json.loads(truth_path.read_text()) | {"params": params}
    lake.write_json(truth_key, truth)
    return truth


def cmd_demo(args: argparse.Namespace) -> None:
    from tokenmill.cli.pipeline import register_and_run
    from tokenmill.cli.progress import progress
    from tokenmill.recipes.project import RECIPES_ENV, SHARED_ENV, project_settings
    from tokenmill.storage.layout import LANDING

    lake = default_lake()
    started = time.perf_counter()
    with progress(len(DEMO_CRAWLS), "generating the demo crawls", unit="crawls") as bar:
        for crawl, (files, seed) in DEMO_CRAWLS.items():
            truth = land_demo_crawl(lake, crawl, files, args.pages_per_file, args.seed + seed)
            bar.advance(
                f"demo crawl {crawl}: {len(truth['pages'])} pages in {len(truth['files'])} "
                f"WARC files at {lake.uri(f'{LANDING}/{crawl}')}",
                notable=True,
            )
    crawls = list(DEMO_CRAWLS)
    overridden = [env for env in (SHARED_ENV, RECIPES_ENV) if os.environ.get(env)]
    if overridden:
        print(f"the demo's settings are not used: {', '.join(overridden)} set in the environment")
    elif not (uses_demo_settings() and classifier_trained(lake)):
        # first the project's own settings; then a classifier trained on the extracted pages
        # scores them, and the demo's second recipe keeps the best scored
        write_demo_settings(False)
        register_and_run(lake, crawls, args.files_per_unit)
        train_demo_classifier(lake, crawls)
        write_demo_eval_set(lake, crawls)
        file = write_demo_settings(True)
        print(f"\nthe demo's classifier declared and its recipe added in {file}:")
        for line in project_settings().lines()[1:]:
            print(f"  {line}")
    register_and_run(lake, crawls, args.files_per_unit)
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")


def uses_demo_settings() -> bool:
    from tokenmill.recipes.project import project_settings

    return Path(project_settings().extraction.value) == DEMO_EXTRACTION


def classifier_trained(lake: Lake) -> bool:
    from tokenmill.classifiers.training import CLASSIFIERS

    return lake.exists(f"{CLASSIFIERS}/{DEMO_CLASSIFIER}/card.json")


def write_demo_settings(on: bool) -> Path:
    """The demo's shared settings and recipes in the project settings file (or the project's
    own, without them); the lake and anything else there is kept."""
    from tokenmill.recipes.project import RECIPES_DIR, settings_file, write_project_settings

    base = settings_file().parent
    if not on:
        return write_project_settings(extraction=None, recipes=None)
    return write_project_settings(
        extraction=_relative(DEMO_EXTRACTION, base),
        recipes=[_relative(RECIPES_DIR, base), _relative(DEMO_RECIPES, base)],
    )


def _relative(path: Path, base: Path) -> str:
    """Relative to the settings file when it lies in the project (the file then holds for any
    checkout of it), absolute otherwise."""
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


def write_demo_eval_set(lake: Lake, crawls: list[str]) -> None:
    """demo_qa, a small evaluation set that leaked into the crawl: the longest paragraph of one
    good page in EVAL_EVERY of the first crawl (by its ground truth), as a question (its first
    half) and an answer."""
    from tokenmill.crawl.units import registered_units
    from tokenmill.storage.layout import EXTRACTED
    from tokenmill.storage.outputs import part_files, read_batches

    truth = lake.read_json(f"demo/{crawls[0]}/truth.json")
    good = {page["url"] for page in truth["pages"] if page["kind"] == "good"}
    texts = {}
    for unit in registered_units(lake, crawls[0]):
        for key in part_files(lake, unit, EXTRACTED):
            for batch in read_batches(lake, key, ["url", "text"]):
                texts |= {
                    u: t for u, t in zip(*batch.to_pydict().values(), strict=True) if u in good
                }
    leaked = [max(texts[url].split("\n"), key=len) for url in sorted(texts)[::EVAL_EVERY]]
    items = []
    for number, paragraph in enumerate(leaked):
        words = paragraph.split()
        half = len(words) // 2
        question, answer = " ".join(words[:half]), " ".join(words[half:])
        items.append({"id": f"demo-qa-{number:02d}", "question": question, "answer": answer})
    lake.write_bytes(DEMO_EVAL_SET, "".join(json.dumps(item) + "\n" for item in items).encode())


def train_demo_classifier(lake: Lake, crawls: list[str]) -> None:
    """demo_quality: the demo crawls' extracted good pages (by their ground truth) against a
    random sample of the crawls' extracted documents, at a size that learns from hundreds."""
    from tokenmill.classifiers.settings import SMALL_DATA
    from tokenmill.classifiers.training import train_classifier
    from tokenmill.cli.classifier import describe_card
    from tokenmill.crawl.units import registered_units
    from tokenmill.storage.layout import EXTRACTED
    from tokenmill.storage.outputs import part_files, read_batches

    kinds = {}
    for crawl in crawls:
        truth = lake.read_json(f"demo/{crawl}/truth.json")
        kinds |= {page["url"]: page["kind"].partition(":")[0] for page in truth["pages"]}
    with tempfile.TemporaryDirectory() as scratch:
        examples = {kind: Path(scratch) / f"{kind}.jsonl" for kind in ("good", "spam")}
        with examples["good"].open("w") as good, examples["spam"].open("w") as spam:
            files = {"good": good, "spam": spam, "broken": spam}
            for crawl in crawls:
                for unit in registered_units(lake, crawl):
                    for key in part_files(lake, unit, EXTRACTED):
                        for batch in read_batches(lake, key, ["url", "text"]):
                            for url, text in zip(*batch.to_pydict().values(), strict=True):
                                if out := files.get(kinds.get(url)):
                                    out.write(json.dumps({"text": text}) + "\n")
        card = train_classifier(
            lake,
            DEMO_CLASSIFIER,
            examples["good"],
            settings=SMALL_DATA,
            negatives_file=examples["spam"],
            origin={
                "positives": "the demo crawls' extracted good pages",
                "negatives": "the demo crawls' extracted spam pages",
            },
        )
    describe_card(lake, card)
