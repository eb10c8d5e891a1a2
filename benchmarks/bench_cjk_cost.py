"""What a CJK crawl costs the extracted stage (main-content extraction, language ID, every
built-in filter's signals, word segmentation included) per MB of HTML, against an English crawl:
the real stage's ``run`` on a local lake, one worker in this process, its ``cpu_s``.

    uv run python benchmarks/bench_cjk_cost.py                # 5 interleaved rounds
    uv run python benchmarks/bench_cjk_cost.py --rounds 1 --mb 1   # a quick check

Crawls, built from ../shared/corpora/warc (nothing copied into the repository): English, the
HTML responses of wget-2024-sample-000*.warc.gz and ukwa-2014-datagovuk.warc.gz whose main text
the language ID calls "en"; CJK, those of clueweb-japanese-quirk.warc.gz and
cc-main-2020-34-excerpt.warc.gz it calls "zh" or "ja". Each crawl's pages are repeated (new
record ids) until it holds ``--mb`` MB of HTML, written as one WARC file (the pages' own HTTP
Content-Type kept), landed and indexed by raw_crawl (not timed). ``--source demo``: the demo
generator's English, Chinese and Japanese articles on one template; ``--source handbook``: the
Debian Administrator's Handbook's English pages and the same pages in Japanese and Chinese
(simplified, traditional), real UTF-8 HTML of one text (Debian's package, fetched once into
bench_languages' cache, ``--cache``).

Timing: one warm-up run of each crawl (the word scanner's table, the segmenters' dictionaries,
the language model), then ``--rounds`` rounds of en, cjk, en, cjk, ...; per crawl the median of
the stage's CPU seconds per MB of HTML, and the ratio cjk/en (target: at most TARGET). The
segmentation's share: ``segmented_text`` of the CJK crawl's extracted documents (text,
language), timed alone (median over the rounds), over the CJK stage's median.
POLARS_MAX_THREADS=1: one core.

Prints a table and appends one line to benchmarks/results.jsonl (BENCH_RESULTS=/tmp/trial.jsonl
for a trial).
"""

from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")  # before polars is imported

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import polars as pl  # noqa: E402

from benchmarks.bench_clean import bare_extraction  # noqa: E402
from benchmarks.bench_languages import (  # noqa: E402
    HANDBOOK_PACKAGE,
    cache_dir,
    fetch_book,
    pages_in_every,
)
from benchmarks.measure import print_table  # noqa: E402
from benchmarks.results import record  # noqa: E402
from testkit.shared_data import html_responses  # noqa: E402
from tokenmill.crawl.extract import DEFAULT_EXTRACTOR  # noqa: E402
from tokenmill.crawl.units import register_new_files  # noqa: E402
from tokenmill.demo.warc_writer import WarcWriter, make_record_id  # noqa: E402
from tokenmill.runtime.parts import run_stage_work  # noqa: E402
from tokenmill.stages import stage_named  # noqa: E402
from tokenmill.storage.lake import Lake  # noqa: E402
from tokenmill.storage.layout import EXTRACTED, LANDING, RAW_CRAWL  # noqa: E402
from tokenmill.storage.outputs import read_table  # noqa: E402
from tokenmill.text.segmentation import segmented_text  # noqa: E402

SOURCES = {
    "en": (
        (
            "wget-2024-sample-0000.warc.gz",
            "wget-2024-sample-0001.warc.gz",
            "ukwa-2014-datagovuk.warc.gz",
        ),  # fmt: skip
        {"en"},
    ),
    "cjk": (("clueweb-japanese-quirk.warc.gz", "cc-main-2020-34-excerpt.warc.gz"), {"zh", "ja"}),
}
TARGET = 2.0  # cjk/en seconds per MB of HTML
CRAWL = "CC-MAIN-BENCH-CJK-COST"


@dataclass
class Page:
    url: str
    html: bytes
    content_type: str
    language: str


def source_pages(files: tuple[str, ...], languages: set[str]) -> list[Page]:
    """HTML responses of ``files`` whose main text is in one of ``languages``."""
    from tokenmill.crawl.extract import decode_html, html_to_text
    from tokenmill.text.language import identify

    pages = []
    for response in html_responses(files):
        text = html_to_text(decode_html(response.html, response.charset)[0])
        language = identify(text)[0]
        if language in languages:
            url = response.url or f"http://example.com/{len(pages)}"
            pages.append(Page(url, response.html, response.content_type, language))
    return pages


def demo_pages(root: Path, pages: int = 3000) -> dict[str, list[Page]]:
    """The demo crawl generator's English articles and its Chinese and Japanese ones, on the
    same page template, all UTF-8: what the languages cost apart from the HTML and charsets."""
    from tokenmill.crawl.http_messages import parse_http_response
    from tokenmill.crawl.warc import WarcRecord, iter_records
    from tokenmill.demo.crawl import generate_demo_crawl

    generate_demo_crawl(root / "demo", root / "demo.json", files=1, pages_per_file=pages, seed=7)
    truth = json.loads((root / "demo.json").read_text())
    kinds = {page["record_id"]: page["kind"] for page in truth["pages"]}
    wanted = {"good": "en", "foreign:zh": "zh", "foreign:ja": "ja"}
    found: dict[str, list[Page]] = {"en": [], "cjk": []}
    for path in sorted((root / "demo").glob("*.warc.gz")):
        with path.open("rb") as stream:
            for rec in iter_records(stream, name=path.name):
                if not isinstance(rec, WarcRecord) or rec.headers.get("WARC-Type") != "response":
                    continue
                language = wanted.get(kinds.get(rec.headers.get("WARC-Record-ID", ""), ""))
                if language is None:
                    continue
                response = parse_http_response(rec.block)
                content_type = response.headers.get("content-type") or "text/html"
                page = Page(rec.headers["WARC-Target-URI"], response.body, content_type, language)
                found["en" if language == "en" else "cjk"].append(page)
    return found


# --source -> (the benchmark's name suffix in results.jsonl, what its pages are)
SOURCE_RECORDS = {
    "shared": (
        "",
        "HTML responses of ../shared/corpora/warc (en: wget-2024-sample, ukwa-2014-datagovuk; "
        "cjk: clueweb-japanese-quirk, cc-main-2020-34 zh/ja), repeated",
    ),
    "demo": (": demo pages", "the demo generator's articles (seed 7): en good pages; cjk zh, ja"),
    "handbook": (
        ": handbook pages",
        "Debian's debian-handbook HTML: en-US pages; the same pages in ja-JP, zh-CN, zh-TW",
    ),
}
HANDBOOK_CRAWLS = {"en": ("en",), "cjk": ("ja", "zh", "zh-Hant")}


def handbook_pages(cache: Path) -> dict[str, list[Page]]:
    """The Debian Administrator's Handbook's HTML pages (Debian's package, fetched once into
    the cache): every page of its English edition, and the same pages of its Japanese and
    Chinese (simplified, traditional) translations; real HTML, UTF-8, one template, one text."""
    book, dirs = fetch_book(cache, HANDBOOK_PACKAGE)
    names = pages_in_every(book, dirs, list(dirs))
    return {
        crawl: [
            Page(f"https://handbook.example/{label}/{name}", path.read_bytes(), "text/html", label)
            for label in labels
            for name in names
            for path in [book / dirs[label] / name]
        ]
        for crawl, labels in HANDBOOK_CRAWLS.items()
    }


def write_crawl(root: Path, name: str, pages: list[Page], mb: float) -> tuple[Lake, object, int]:
    """The pages, repeated up to ``mb`` MB of HTML, as one WARC file of a new lake, indexed by
    raw_crawl; returns the lake, the unit and the HTML bytes."""
    lake = Lake.from_url(str(root / name / "lake"))
    path = root / name / f"{CRAWL}-000.warc.gz"
    html_bytes, copy = 0, 0
    with open(path, "wb") as stream:
        writer = WarcWriter(stream, id_seed=name)
        while html_bytes < mb * 1e6:
            for index, page in enumerate(pages):
                writer.write_response(
                    f"{page.url}#{copy}" if copy else page.url,
                    page.html,
                    content_type=page.content_type,
                    date="2026-03-01T00:00:00Z",
                    record_id=make_record_id(name, str(copy), index),
                )
                html_bytes += len(page.html)
            copy += 1
    lake.put_file(f"{LANDING}/{CRAWL}/{path.name}", path)
    (unit,) = register_new_files(lake, CRAWL, files_per_unit=1).units
    run_stage_work(stage_named(RAW_CRAWL), lake, unit=unit, workers=1)
    return lake, unit, html_bytes


def extracted_cpu(lake: Lake, unit) -> float:
    """CPU seconds of the extracted stage over the unit, in this process."""
    return run_stage_work(stage_named(EXTRACTED), lake, unit=unit, workers=1).cpu_s


def bare_cpu(lake: Lake, unit) -> float:
    """CPU seconds of the bare loop over the same records: fastwarc + the stage's HTML-to-text
    extraction, nothing else (``bench_clean.bare_extraction``)."""
    started = time.process_time()
    bare_extraction(lake.url, unit, DEFAULT_EXTRACTOR)
    return time.process_time() - started


def segmentation_cpu(docs: pl.DataFrame) -> float:
    started = time.process_time()
    segmented_text(docs)
    return time.process_time() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mb", type=float, default=8.0, help="MB of HTML per crawl")
    parser.add_argument(
        "--source",
        choices=("shared", "demo", "handbook"),
        default="shared",
        help="shared: real pages of ../shared's WARC files; demo: the demo generator's "
        "English, Chinese and Japanese articles on one template; handbook: the Debian "
        "Administrator's Handbook's English pages and their Japanese and Chinese translations",
    )
    parser.add_argument("--cache", help="where --source handbook is fetched to (bench_languages)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        crawls, found = {}, {}
        generated = (
            demo_pages(root)
            if args.source == "demo"
            else handbook_pages(cache_dir(args.cache))
            if args.source == "handbook"
            else None
        )
        for name, (files, languages) in SOURCES.items():
            pages = generated[name] if generated else source_pages(files, languages)
            if not pages:
                print(f"no {name} pages found: nothing to measure", file=sys.stderr)
                return
            found[name] = dict(Counter(p.language for p in pages)) | {"pages": len(pages)}
            crawls[name] = write_crawl(root, name, pages, args.mb)
        for lake, unit, _ in crawls.values():
            extracted_cpu(lake, unit)  # warm-up
        lake, unit, _ = crawls["cjk"]
        key = f"{unit.part_prefix(EXTRACTED, 0)}/docs.parquet"
        docs = pl.from_arrow(read_table(lake, key, ["text", "language"]))
        segmentation_cpu(docs)
        seconds: dict[str, list[float]] = {name: [] for name in crawls}
        bare: dict[str, list[float]] = {name: [] for name in crawls}
        segmentation: list[float] = []
        for round_ in range(args.rounds):
            for name, (lake, unit, html_bytes) in crawls.items():
                seconds[name].append(extracted_cpu(lake, unit) / (html_bytes / 1e6))
                bare[name].append(bare_cpu(lake, unit) / (html_bytes / 1e6))
            segmentation.append(segmentation_cpu(docs) / (crawls["cjk"][2] / 1e6))
            done = ", ".join(f"{name} {s[-1]:.3f} s/MB" for name, s in seconds.items())
            print(f"round {round_ + 1}: {done}", file=sys.stderr)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    over_bare = {
        name: statistics.median(s / b for s, b in zip(seconds[name], bare[name], strict=True))
        for name in crawls
    }
    ratio = median["cjk"] / median["en"]
    share = statistics.median(segmentation) / median["cjk"]
    rows = [
        [name, f"{crawls[name][2] / 1e6:.1f}", found[name]["pages"],
         ", ".join(f"{k} {v}" for k, v in found[name].items() if k != "pages"),
         round(median[name], 3), round(1 / median[name], 2),
         round(statistics.median(bare[name]), 3), round(over_bare[name], 3)]
        for name in crawls
    ]  # fmt: skip
    print_table(
        f"extracted stage (extraction + language ID + signals), CPU seconds per MB of HTML, one "
        f"core, median of {args.rounds} interleaved rounds",
        ["crawl", "MB of HTML", "distinct pages", "languages", "s per MB", "MB per s",
         "bare s per MB", "stage / bare"],
        rows,
    )  # fmt: skip
    verdict = "within" if ratio <= TARGET else "ABOVE"
    bare_ratio = statistics.median(bare["cjk"]) / statistics.median(bare["en"])
    added = over_bare["cjk"] / over_bare["en"]
    print(f"\ncjk/en: {ratio:.2f} ({verdict} the {TARGET} target); segmentation: "
          f"{share:.1%} of the CJK stage time; the bare loop's cjk/en: {bare_ratio:.2f}; "
          f"the stage over the bare loop, cjk over en: {added:.2f}")  # fmt: skip
    figures = {
        "en_s_per_mb": round(median["en"], 4),
        "cjk_s_per_mb": round(median["cjk"], 4),
        "cjk_over_en": round(ratio, 3),
        "bare_cjk_over_en": round(bare_ratio, 3),
        "stage_over_bare": {name: round(value, 3) for name, value in over_bare.items()},
        "segmentation_share_of_cjk": round(share, 4),
        "rounds": args.rounds,
        "source": args.source,
    }
    name, data = SOURCE_RECORDS[args.source]
    record(
        "bench_cjk_cost" + name,
        figures,
        {
            "mb_html": {name: round(crawl[2] / 1e6, 2) for name, crawl in crawls.items()},
            "pages": found,
            "data": data,
        },
    )


if __name__ == "__main__":
    main()
