"""Benchmark decontamination: recall on planted passages, precision checked against an
independent reading of the rule, and the cost per MB of text against extraction's on the same
pages, for evaluation sets of a thousand to ten million n-grams.

    uv run python benchmarks/bench_decontamination.py              # 5 interleaved rounds
    uv run python benchmarks/bench_decontamination.py --warcs DIR  # the WARC files of DIR
    uv run python benchmarks/bench_decontamination.py --rounds 1 --largest 1000000  # quick

Pages: by default the real pages of ../shared that bench_clean's stage-vs-bare reads (the WCXB
sample and the scrapinghub articles wrapped in WARC, a Common Crawl excerpt), or the WARC files
of ``--warcs``: landed, indexed by raw_crawl and extracted by the real stages in this process.

Evaluation set: passages of 20 to 80 words from ../shared/corpora/text/cc-main-2019-30-697docs
(another crawl than the pages), plus, for the larger sizes, items of words drawn at random from
that corpus's vocabulary (by frequency) until the set holds the wanted number of 13-grams.
Indexed by the eval_index stage (its build time and the table's bytes are reported).

Recall: 200 items planted in as many pages (fewer when there are fewer), inside their text, a
quarter each exact, upper-cased, re-punctuated (commas to semicolons, a dash between words) and
re-wrapped (new lines between words); 40 of them Chinese and Japanese paragraphs of the demo
generator (full-width punctuation, a space between characters, a line break every seven
characters instead), their recall also counted apart; for ``drop`` every planted page must be
dropped, for ``cut`` no 13-gram of the planted item may remain in what is kept. Precision: on
the pages without plants, every document removed must share a 13-gram with an item, and every
document that does must be removed, by a Python reading of the rule (unicodedata, not the
compiled tables).

Cost: one warm-up, then ``--rounds`` rounds of: the extracted stage over the unit (its CPU
seconds), then decontaminate() over every extracted document in batches as the cleaned stage
reads them, once per set size. Per MB of extracted text (UTF-8); ratio to extraction's (target:
at most 10 %). POLARS_MAX_THREADS=1: one core.

Prints tables and appends one line to benchmarks/results.jsonl (BENCH_RESULTS=/tmp/trial.jsonl
for a trial).
"""

from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")  # before polars is imported

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import unicodedata  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

import polars as pl  # noqa: E402

from benchmarks.bench_clean import real_warc_lake, warc_folder_lake  # noqa: E402
from benchmarks.measure import print_table  # noqa: E402
from benchmarks.results import record  # noqa: E402
from testkit.shared_data import shared_path  # noqa: E402
from tokenmill.crawl.units import unit_files  # noqa: E402
from tokenmill.decontamination.index import declared_versions, set_table  # noqa: E402
from tokenmill.decontamination.removal import Decontamination, decontaminate  # noqa: E402
from tokenmill.runtime.parts import run_stage_work  # noqa: E402
from tokenmill.runtime.stage import Work  # noqa: E402
from tokenmill.stages import eval_index, stage_named  # noqa: E402
from tokenmill.storage.layout import EVAL_INDEX, EXTRACTED, RAW_CRAWL  # noqa: E402
from tokenmill.storage.outputs import read_batches  # noqa: E402

CORPUS = ("corpora", "text", "cc-main-2019-30-697docs.jsonl.gz")
NGRAM = 13
PLANTED = 200
CJK_PLANTED = 40
SIZES = (1_000, 100_000, 1_000_000, 10_000_000)  # n-grams of the evaluation set
TARGET = 0.10  # decontamination / extraction, CPU seconds per MB of text
UNSPACED = ("CJK UNIFIED", "CJK COMPATIBILITY IDEOGRAPH", "HIRAGANA", "KATAKANA", "THAI",
            "LAO ", "KHMER", "MYANMAR", "TIBETAN", "YI ")  # fmt: skip


# -- the rule, read again in Python -----------------------------------------------------------


def python_words(text: str) -> list[str]:
    """Normalized words by unicodedata: runs of letters, marks and digits, each character NFKC
    and lower-cased where that is one character; a character of an unspaced script (by its
    Unicode name) a word by itself with its marks."""
    words, current, single = [], [], False
    for char in text:
        category = unicodedata.category(char)
        if category[0] not in "LMN":
            if current:
                words.append("".join(current))
                current = []
            continue
        mark = category[0] == "M"
        alone = not mark and unicodedata.name(char, "").startswith(UNSPACED)
        if alone or not current or (single and not mark):
            if current:
                words.append("".join(current))
            current, single = [], alone
        folded = unicodedata.normalize("NFKC", char).lower()
        current.append(folded if len(folded) == 1 else char)
    if current:
        words.append("".join(current))
    return words


def python_ngrams(text: str, n: int = NGRAM) -> set[tuple[str, ...]]:
    words = python_words(text)
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


# -- inputs ---------------------------------------------------------------------------------------


def corpus_texts() -> list[str]:
    path = shared_path(*CORPUS)
    if path is None:
        raise SystemExit(f"../shared/{'/'.join(CORPUS)} is absent: nothing to measure")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def evaluation_items(texts: list[str], ngrams: int, rng: random.Random) -> list[str]:
    """Passages of 20 to 80 words of the corpus, then random word sequences (of its vocabulary,
    by frequency) until the items hold ``ngrams`` 13-grams."""
    items, held = [], 0
    for text in texts:
        words = text.split()
        for start in range(0, len(words) - 80, 400):
            length = rng.randint(20, 80)
            items.append(" ".join(words[start : start + length]))
            held += length - NGRAM + 1
            if held >= ngrams:
                return items
    vocabulary = Counter(word for text in texts for word in text.split())
    words, weights = list(vocabulary), list(vocabulary.values())
    while held < ngrams:
        drawn = rng.choices(words, weights, k=100 * 200)
        for start in range(0, len(drawn), 200):
            items.append(" ".join(drawn[start : start + 200]))
            held += 200 - NGRAM + 1
            if held >= ngrams:
                break
    return items


def variant(passage: str, kind: str) -> str:
    """The passage re-cased, re-punctuated or re-wrapped (text without spaces, Chinese or
    Japanese: full-width punctuation and a space between characters, a line break every seven
    characters)."""
    spaced = " " in passage
    if kind == "recased":
        return passage.upper() if spaced else passage.replace("。", "．")
    if kind == "repunctuated":
        if spaced:
            return passage.replace(",", ";").replace(" ", " - ")
        return " ".join(passage.replace("、", "，").replace("。", "！"))
    if kind == "rewrapped":
        if spaced:
            return passage.replace(" ", "\n")
        return "\n".join(passage[i : i + 7] for i in range(0, len(passage), 7))
    return passage


def cjk_items(count: int) -> list[str]:
    """The longest paragraph of Japanese and Chinese articles of the demo generator (seed 11):
    a set in scripts written without spaces."""
    from tokenmill.demo.crawl import sample_articles

    return [
        max(article.split("\n"), key=len)
        for language in ("ja", "zh")
        for article in sample_articles(language, count // 2, seed=11)
    ]


def planted(docs: pl.DataFrame, items: list[str], rng: random.Random) -> tuple:
    """``items`` planted in as many pages (each inside its text, at a line break), a quarter
    of them each exact, re-cased, re-punctuated and re-wrapped: the pages' texts, and per
    planted page the item."""
    kinds = ("exact", "recased", "repunctuated", "rewrapped")
    rows = rng.sample(range(docs.height), min(len(items), docs.height))
    texts = docs["text"].to_list()
    plants = {}
    for number, (row, item) in enumerate(zip(rows, items, strict=False)):
        text = texts[row]
        breaks = [i for i, c in enumerate(text) if c == "\n"] or [len(text) // 2]
        at = rng.choice(breaks)
        texts[row] = f"{text[:at]}\n{variant(item, kinds[number % 4])}\n{text[at:]}"
        plants[docs["doc_id"][row]] = item
    return docs.with_columns(text=pl.Series(texts)), plants


# -- measuring -------------------------------------------------------------------------------------


def extracted_docs(lake, unit) -> pl.DataFrame:
    frames = []
    for part in range(len(unit_files(lake, unit))):
        key = f"{unit.part_prefix(EXTRACTED, part)}/docs.parquet"
        for batch in read_batches(lake, key, ["doc_id", "url", "text"]):
            frames.append(pl.from_arrow(batch))
    return pl.concat(frames)


def batches(docs: pl.DataFrame, rows: int = 1024) -> list[pl.DataFrame]:
    return [docs.slice(start, rows) for start in range(0, docs.height, rows)]


def decontamination_cpu(parts: list[pl.DataFrame], table, settings) -> float:
    started = time.process_time()
    for part in parts:
        decontaminate(part, table, settings)
    return time.process_time() - started


def build_table(lake, name: str, items: list[str]) -> tuple[object, float, float]:
    """The set written to the lake, indexed by the eval_index stage, and its table: the table,
    the index's build seconds and the table's."""
    lake.write_bytes(
        f"eval/{name}.jsonl", "".join(json.dumps({"text": t}) + "\n" for t in items).encode()
    )
    started = time.perf_counter()
    settings = eval_index.EvaluationSettings(sets=[{"name": name, "path": f"eval/{name}.jsonl"}])
    eval_index.run(Work(lake=lake, stage=EVAL_INDEX, settings=settings))
    indexed = time.perf_counter() - started
    started = time.perf_counter()
    table = set_table(lake, {name: declared_versions(lake)[name]["sha256"]}, NGRAM)
    return table, indexed, time.perf_counter() - started


def check_recall(docs, plants, table) -> dict:
    found = {}
    for action in ("drop", "cut"):
        outcome = decontaminate(docs, table, Decontamination(("set",), NGRAM, action))
        kept = dict(zip(outcome.kept["doc_id"], outcome.kept["text"], strict=True))
        missed = [
            doc for doc, item in plants.items()
            if doc in kept and python_ngrams(kept[doc]) & python_ngrams(item)
        ]  # fmt: skip
        found[action] = round(1 - len(missed) / len(plants), 4)
    return found


def check_precision(docs, items, table) -> dict:
    held = set().union(*(python_ngrams(item) for item in items))
    sharing = {
        doc for doc, text in zip(docs["doc_id"], docs["text"], strict=True)
        if python_ngrams(text) & held
    }  # fmt: skip
    outcome = decontaminate(docs, table, Decontamination(("set",), NGRAM, "drop"))
    removed = set(outcome.dropped["doc_id"])
    return {
        "documents_sharing_an_ngram": len(sharing),
        "removed": len(removed),
        "removed_without_a_shared_ngram": len(removed - sharing),
        "sharing_but_kept": len(sharing - removed),
        "precision": round(len(removed & sharing) / len(removed), 4) if removed else 1.0,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warcs", type=Path, help="a folder of WARC files instead of ../shared")
    parser.add_argument("--largest", type=int, default=SIZES[-1], help="largest set (n-grams)")
    args = parser.parse_args(argv)
    sizes = [size for size in SIZES if size <= args.largest]
    rng = random.Random(13)
    texts = corpus_texts()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        lake, unit = warc_folder_lake(root, args.warcs) if args.warcs else real_warc_lake(root)
        run_stage_work(stage_named(RAW_CRAWL), lake, unit=unit, workers=1)
        run_stage_work(stage_named(EXTRACTED), lake, unit=unit, workers=1)  # warm-up
        docs = extracted_docs(lake, unit)
        mb_text = sum(len(t.encode()) for t in docs["text"]) / 1e6
        parts = batches(docs)
        tables, built = {}, {}
        for size in sizes:
            items = evaluation_items(texts, size, rng)
            table, indexed, loaded = build_table(lake, f"set{size}", items)
            tables[size] = table
            built[size] = {"items": len(items), "index_s": round(indexed, 2),
                           "table_s": round(loaded, 2), "table_mb": round(table.nbytes / 1e6, 1),
                           "ngrams": table.ngrams}  # fmt: skip
            print(f"set of {size:,} n-grams: {built[size]}", file=sys.stderr)
        # the recall set: passages of the corpus, and CJK_PLANTED paragraphs in Chinese and
        # Japanese; PLANTED of them planted, the CJK ones among them
        cjk = cjk_items(CJK_PLANTED)
        smallest = evaluation_items(texts, sizes[0] * 100, random.Random(1)) + cjk
        recall_table, _, _ = build_table(lake, "set", smallest)
        chosen = cjk + rng.sample(smallest[:1000], PLANTED - len(cjk))
        with_plants, plants = planted(docs, chosen, rng)
        recall = check_recall(with_plants, plants, recall_table)
        recall_cjk = check_recall(with_plants, {d: i for d, i in plants.items() if i in cjk},
                                  recall_table)  # fmt: skip
        recall["cjk"] = recall_cjk
        precision = check_precision(docs, smallest, recall_table)
        print(f"recall {recall}; precision {precision}", file=sys.stderr)
        settings = Decontamination(("set",), NGRAM, "drop")
        for table in tables.values():
            decontamination_cpu(parts, table, settings)  # warm-up
        extraction, checking = [], {size: [] for size in sizes}
        for round_ in range(args.rounds):
            report = run_stage_work(stage_named(EXTRACTED), lake, unit=unit, workers=1)
            extraction.append(report.cpu_s / mb_text)
            for size, table in tables.items():
                checking[size].append(decontamination_cpu(parts, table, settings) / mb_text)
            print(f"round {round_ + 1}: extraction {extraction[-1]:.3f} s/MB of text",
                  file=sys.stderr)  # fmt: skip
    extraction_s = statistics.median(extraction)
    rows, cost = [], {}
    for size in sizes:
        seconds = statistics.median(checking[size])
        ratio = statistics.median(c / e for c, e in zip(checking[size], extraction, strict=True))
        cost[size] = {"s_per_mb": round(seconds, 5), "of_extraction": round(ratio, 4)}
        rows.append([f"{size:,}", built[size]["items"], built[size]["table_mb"],
                     built[size]["index_s"], built[size]["table_s"], round(seconds, 4),
                     round(1 / seconds, 1), f"{ratio:.1%}"])  # fmt: skip
    print_table(
        f"decontamination (13-grams, drop) over {docs.height} extracted documents, "
        f"{mb_text:.1f} MB of text; extraction {extraction_s:.3f} CPU s per MB of text; "
        f"median of {args.rounds} interleaved rounds, one core",
        ["set n-grams", "items", "table MB", "index s", "table s", "CPU s per MB",
         "MB per s", "of extraction"],
        rows,
    )  # fmt: skip
    worst = max(entry["of_extraction"] for entry in cost.values())
    verdict = "within" if worst <= TARGET else "ABOVE"
    print(f"\nrecall on {len(plants)} planted passages: drop {recall['drop']}, cut "
          f"{recall['cut']}; precision {precision['precision']} "
          f"({precision['removed']} removed, {precision['removed_without_a_shared_ngram']} "
          f"without a shared n-gram, {precision['sharing_but_kept']} sharing one but kept); "
          f"cost at most {worst:.1%} of extraction ({verdict} the {TARGET:.0%} target)"
          )  # fmt: skip
    figures = {
        "recall": recall,
        "precision": precision,
        "extraction_s_per_mb_text": round(extraction_s, 4),
        "cost_by_set_ngrams": cost,
        "sets": built,
        "rounds": args.rounds,
    }
    record(
        "bench_decontamination" + (": --warcs" if args.warcs else ""),
        figures,
        {
            "data": "the WARC files " + ", ".join(sorted(p.name for p in args.warcs.iterdir()))
            if args.warcs
            else "../shared: the WCXB sample and scrapinghub articles wrapped in WARC, and a "
            "Common Crawl excerpt",
            "documents": docs.height,
            "mb_text": round(mb_text, 2),
            "evaluation_set": "passages of ../shared/corpora/text/cc-main-2019-30-697docs, "
            "then random words of its vocabulary",
            "planted": len(plants),
        },
    )


if __name__ == "__main__":
    main()
