"""Cleaning stage: extraction quality and speed, language ID, filter speed and agreement with
datatrove, whole-stage overhead over the bare extractor, peak memory in unit size.

    uv run python benchmarks/bench_clean.py              # everything (about 12 minutes)
    uv run python benchmarks/bench_clean.py extraction language filters stage memory
    uv run python benchmarks/bench_clean.py stage-vs-bare  # BENCH_ROUNDS=5 rounds by default

Everything runs on one core: each measurement in a fresh process with one polars thread, so
speeds are "per core". Extraction uses ../shared/corpora/extraction/, the filters
../shared/corpora/text/cc-main-2019-30-697docs.jsonl.gz and a generated demo crawl; parts whose
data is absent are skipped with a message. ``stage-vs-bare`` runs in this one process (see its
function) on the WCXB and scrapinghub pages wrapped in WARC and the Common Crawl excerpt, and
prints the cleaning cost rows and one JSON line last.
"""

from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")  # before polars is imported, here and in children

import argparse  # noqa: E402
import functools  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import polars as pl  # noqa: E402

from benchmarks.measure import TABLES, in_fresh_process, print_table, timed  # noqa: E402
from benchmarks.results import record  # noqa: E402
from benchmarks.stage_costs import COMPONENTS, attributed  # noqa: E402
from testkit.shared_data import shared_path  # noqa: E402
from tokenmill.crawl.extract import (  # noqa: E402
    DEFAULT_EXTRACTOR,
    EXTRACTORS,
    ROUTES,
    Skip,
    decode_html,
    extract_document,
    html_to_text,
    main_content_route,
)
from tokenmill.crawl.sources import file_size, open_file  # noqa: E402
from tokenmill.crawl.units import register_new_files, unit_files  # noqa: E402
from tokenmill.crawl.warc import BadRecord, iter_records  # noqa: E402
from tokenmill.demo.crawl import FOREIGN_LOCALES, generate_demo_crawl, sample_articles  # noqa: E402
from tokenmill.filters import (  # noqa: E402
    C4QualityFilter,
    FilterChain,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    default_filters,
)
from tokenmill.runtime.budget import enable_watchdog  # noqa: E402
from tokenmill.runtime.parts import run_stage_work  # noqa: E402
from tokenmill.stages import stage_named  # noqa: E402
from tokenmill.stages.cleaned import CleanSettings  # noqa: E402
from tokenmill.stages.extracted import ExtractSettings  # noqa: E402
from tokenmill.storage.lake import Lake  # noqa: E402
from tokenmill.storage.layout import CLEANED, EXTRACTED, LANDING, MARKER, RAW_CRAWL, Unit  # noqa: E402
from tokenmill.text.language import BACKENDS, identifier  # noqa: E402

EXTRACTION = ("corpora", "extraction")
CORPUS = ("corpora", "text", "cc-main-2019-30-697docs.jsonl.gz")
CRAWL = "CC-MAIN-BENCH-2026-03"
WORD = re.compile(r"\w+")

# --- extraction: word-level P/R/F1 per page type, pages/s ---------------------------------------


def load_pages(corpus: str) -> list[tuple[str, str, str]]:
    """(html, ground-truth text, page type) of every page of a ground-truth corpus."""
    folder = shared_path(*EXTRACTION, corpus)
    pages = []
    if corpus == "wcxb-dev-sample":
        for truth_path in sorted((folder / "ground-truth").glob("*.json")):
            truth = json.loads(truth_path.read_text())
            body = gzip.decompress((folder / "html" / f"{truth_path.stem}.html.gz").read_bytes())
            page_type = truth["_internal"]["page_type"]["primary"]
            pages.append((body, truth["ground_truth"]["main_content"], page_type))
    else:
        truth = json.loads((folder / "ground-truth.json").read_text())
        for key, entry in sorted(truth.items()):
            body = gzip.decompress((folder / "html" / f"{key}.html.gz").read_bytes())
            pages.append((body, entry["articleBody"], "article"))
    return [(decode_html(body, None)[0], gold, kind) for body, gold, kind in pages]


def word_prf(predicted: str, truth: str) -> tuple[float, float, float]:
    words = Counter(w.lower() for w in WORD.findall(predicted))
    gold = Counter(w.lower() for w in WORD.findall(truth))
    overlap = sum((words & gold).values())
    precision = overlap / max(sum(words.values()), 1)
    recall = overlap / max(sum(gold.values()), 1)
    f1 = 2 * precision * recall / (precision + recall) if overlap else 0.0
    return precision, recall, f1


LIBRARY_RESILIPARSE = "resiliparse library call"  # reference: extract_plain_text as it comes


def library_resiliparse(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, preserve_formatting=True, alt_texts=False)


def extract_all(corpus: str, extractors: list[str], repeats: int) -> tuple[dict, dict]:
    """Texts of every page by every extractor, and each extractor's fewest seconds over
    ``repeats`` passes. The extractors take turns page by page, so a burst of load on the shared
    machine hits them alike: their ratios hold even when the absolute speeds do not."""
    pages = load_pages(corpus)
    extract = {
        e: functools.partial(html_to_text, extractor=e) if e in EXTRACTORS else library_resiliparse
        for e in extractors
    }
    for function in extract.values():
        function("<p>warm up every library</p>")
    html_to_text("<p>warm up</p>", extractor="trafilatura")
    texts = {e: [] for e in extractors}
    best = dict.fromkeys(extractors, float("inf"))
    for attempt in range(repeats):
        spent = dict.fromkeys(extractors, 0.0)
        for html, _, _ in pages:
            for e in extractors:
                text, seconds = timed(functools.partial(extract[e], html))
                spent[e] += seconds
                if attempt == 0:
                    texts[e].append(text)
        best = {e: min(best[e], spent[e]) for e in extractors}
    return texts, best


def routes_taken(corpus: str) -> Counter:
    """How many pages the hybrid extractor took through each of ``ROUTES``."""
    return Counter(main_content_route(html, fallback=True)[1] for html, _, _ in load_pages(corpus))


def bench_extraction(repeats: int = 3) -> None:
    """All extractors in one fresh process, taking turns page by page, ``repeats`` passes; the
    fastest pass's speed and its ratio to our resiliparse extractor's, which shows what the
    trafilatura fallback costs. F1 on even and odd pages shows how much the rules chosen on the
    whole sample depend on the pages they were chosen on."""
    extractors = [*EXTRACTORS, LIBRARY_RESILIPARSE]
    for corpus in ("wcxb-dev-sample", "scrapinghub-articles"):
        if shared_path(*EXTRACTION, corpus) is None:
            print(f"\n(skipped extraction on {corpus}: ../shared is absent)")
            continue
        truth = [(gold, kind) for _, gold, kind in load_pages(corpus)]
        kinds = sorted({kind for _, kind in truth})
        texts, seconds = in_fresh_process(
            functools.partial(extract_all, corpus, extractors, repeats)
        )[0]
        speed = {e: len(truth) / seconds[e] for e in extractors}
        header = ["extractor", "pages/s", "x resiliparse", "P", "R", "F1", "F1 even", "F1 odd"]
        if len(kinds) > 1:
            header += [f"F1 {kind}" for kind in kinds]
        rows = []
        for extractor in extractors:
            scores = [
                word_prf(text, gold)
                for text, (gold, _) in zip(texts[extractor], truth, strict=True)
            ]
            f1 = [score[2] for score in scores]
            by_kind = defaultdict(list)
            for (_, kind), score in zip(truth, f1, strict=True):
                by_kind[kind].append(score)
            row = [extractor, speed[extractor], speed[extractor] / speed["resiliparse"]]
            row += [mean([s[i] for s in scores]) for i in range(3)]
            row += [mean(f1[0::2]), mean(f1[1::2])]
            if len(kinds) > 1:
                row += [mean(by_kind[k]) for k in kinds]
            rows.append(row)
        routes = routes_taken(corpus)
        print_table(
            f"Extraction on {corpus} ({len(truth)} pages; mean word-level P/R/F1, one core, "
            f"fastest of {repeats} passes; hybrid routes: "
            + ", ".join(f"{routes[r]} {r}" for r in ROUTES)
            + ")",
            header,
            rows,
        )


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


# --- language ID: accuracy and speed ---------------------------------------------------------


SNIPPETS = (None, 100, 30)  # whole text, first 100 and first 30 characters


def language_samples() -> list[tuple[str, str, int | None]]:
    """(language, text, snippet length): generated demo-crawl articles of every language, whole
    and cut to their first characters (harder)."""
    samples = []
    for language in ["en", *FOREIGN_LOCALES]:
        for text in sample_articles(language, 40, seed=5):
            samples += [(language, text[:cut], cut) for cut in SNIPPETS]
    return samples


def real_texts() -> list[str]:
    with gzip.open(shared_path(*CORPUS), "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def identify_all(backend: str) -> tuple[list, float, list, float]:
    identify = identifier(backend)
    identify("warm up")
    texts = [text for _, text, _ in language_samples()]
    found, seconds = timed(lambda: [identify(text) for text in texts])
    real = real_texts() if shared_path(*CORPUS) else []
    real_found, real_seconds = timed(lambda: [identify(text) for text in real])
    return found, seconds, real_found, real_seconds


def bench_language() -> None:
    samples = language_samples()
    results = {
        backend: in_fresh_process(functools.partial(identify_all, backend))[0]
        for backend in BACKENDS
    }
    rows = []
    for backend, (found, seconds, real, real_seconds) in results.items():
        accuracy = []
        for cut in SNIPPETS:
            part = [(s[0], f[0]) for s, f in zip(samples, found, strict=True) if s[2] == cut]
            accuracy.append(sum(a == b for a, b in part) / len(part))
        english = [f for s, f in zip(samples, found, strict=True) if s[0] == "en" and not s[2]]
        row = [backend, *accuracy, sum(map(is_kept_english, english)) / len(english)]
        row.append(len(samples) / seconds)
        if real:
            others = [results[b][2] for b in BACKENDS if b != backend]
            agreed = [
                (mine[0], a[0]) for mine, a, b in zip(real, *others, strict=True) if a[0] == b[0]
            ]
            row += [
                sum(mine == consensus for mine, consensus in agreed) / len(agreed),
                len(agreed),
                len(real) / real_seconds,
            ]
        rows.append(row)
    header = ["backend", "acc. whole", "acc. 100 chars", "acc. 30 chars", "en kept", "docs/s"]
    if len(rows[0]) > len(header):
        header += ["CC: agrees w/ other two", "CC docs they agree on", "CC docs/s"]
    print_table(
        f"Language ID: {len(samples)} generated texts in 10 languages (demo truth) and the "
        "697 multilingual CC-MAIN-2019-30 docs (no truth: agreement with the other two "
        "backends where those agree), one core",
        header,
        rows,
    )


# --- filters: MB/s per core, agreement with datatrove -----------------------------------------

DATATROVE_FILTERS = ("gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")


def our_filter(name: str):
    return {
        "gopher_repetition": GopherRepetitionFilter,
        "gopher_quality": GopherQualityFilter,
        "c4_quality": C4QualityFilter,
        "fineweb_quality": FineWebQualityFilter,
    }[name]()


def datatrove_filter(name: str):
    from datatrove.pipeline import filters

    return {
        "gopher_repetition": filters.GopherRepetitionFilter,
        "gopher_quality": filters.GopherQualityFilter,
        "c4_quality": functools.partial(filters.C4QualityFilter, filter_no_terminal_punct=False),
        "fineweb_quality": filters.FineWebQualityFilter,
    }[name]()


def fastest(work, runs: int = 5) -> tuple[float, float]:
    """Wall and CPU seconds of the fastest of ``runs`` runs of ``work`` (the machine is shared:
    the fastest run is the least disturbed; CPU time is what one core spends)."""
    walls, cpus = [], []
    for _ in range(runs):
        cpu = time.process_time()
        _, wall = timed(work)
        walls.append(wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def our_decisions(
    texts: list[str], repeat: int = 1
) -> tuple[dict[str, list[bool]], tuple[float, float], tuple[float, float]]:
    """Per-filter keep decisions (each filter on every document, as datatrove is run below),
    and the fastest (wall, CPU) seconds of the whole default chain (URL filter + the four) and
    of the four filters each on every document, over ``repeat`` copies of the documents."""
    docs = pl.DataFrame({"text": texts, "url": ["https://example.com/"] * len(texts)})
    decisions = {}
    for name in DATATROVE_FILTERS:
        output = our_filter(name)(docs)
        reasons = output.reasons if hasattr(output, "reasons") else output
        decisions[name] = reasons.is_null().to_list()
    chain = FilterChain(default_filters())
    big = pl.concat([docs] * repeat)
    chain.apply(big.head(50))
    chain_seconds = fastest(lambda: chain.apply(big))
    each = [fastest(functools.partial(our_filter(name), big)) for name in DATATROVE_FILTERS]
    return decisions, chain_seconds, tuple(map(sum, zip(*each, strict=True)))


def datatrove_decisions(texts: list[str]) -> tuple[dict[str, list[bool]], float]:
    from datatrove.data import Document

    decisions, seconds = {}, 0.0
    for name in DATATROVE_FILTERS:
        flt = datatrove_filter(name)
        flt.filter(Document(text="warm up the tokenizer", id="0"))
        docs = [Document(text=text, id=str(i)) for i, text in enumerate(texts)]

        def keep(doc, flt=flt) -> bool:
            verdict = flt.filter(doc)
            return verdict[0] if isinstance(verdict, tuple) else bool(verdict)

        decisions[name], spent = timed(lambda docs=docs, keep=keep: [keep(d) for d in docs])
        seconds += spent
    return decisions, seconds


def demo_english_texts(pages_per_file: int = 400) -> list[str]:
    """Extracted texts of the English pages of a generated crawl (as the filters see them)."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        truth = generate_demo_crawl(
            root / "warc", root / "truth.json", crawl=CRAWL, files=1, pages_per_file=pages_per_file
        )
        english = {
            p["record_id"]
            for p in json.loads((root / "truth.json").read_text())["pages"]
            if p["language"] == "en"
        }
        texts = []
        for name in truth["files"]:
            with open(root / "warc" / name, "rb") as stream:
                for record in iter_records(stream, 64 << 20, name=name):
                    if isinstance(record, BadRecord) or record.record_id not in english:
                        continue
                    try:
                        texts.append(extract_document(record.block, 8 << 20).text)
                    except Skip:
                        continue
    return texts


def is_kept_english(found: tuple[str, float]) -> bool:
    """What the stage's default language filter keeps."""
    return found[0] == "en" and found[1] >= 0.65


def bench_filters() -> None:
    corpora = []
    if shared_path(*CORPUS):
        texts = real_texts()
        identify = identifier()
        english = [t for t in texts if is_kept_english(identify(t))]
        corpora.append((f"CC-MAIN-2019-30, all {len(texts)} docs", texts))
        corpora.append((f"CC-MAIN-2019-30, {len(english)} docs ID'd en", english))
    else:
        print("\n(skipped the Common Crawl corpus: ../shared is absent)")
    english_demo = demo_english_texts()
    corpora.append((f"demo crawl, {len(english_demo)} English pages", english_demo))
    speed_rows, agreement_rows = [], []
    for label, texts in corpora:
        megabytes = sum(len(t.encode()) for t in texts) / 1e6
        repeat = 5
        ours, chain_seconds, four_seconds = in_fresh_process(
            functools.partial(our_decisions, texts, repeat)
        )[0]
        theirs, dt_seconds = in_fresh_process(functools.partial(datatrove_decisions, texts))[0]
        speed_rows.append(
            [
                label,
                megabytes,
                megabytes * repeat / chain_seconds[0],
                megabytes * repeat / chain_seconds[1],
                megabytes * repeat / four_seconds[0],
                megabytes / dt_seconds,
                len(texts) / dt_seconds,
                dt_seconds / (four_seconds[0] / repeat),
            ]
        )
        for name in DATATROVE_FILTERS:
            same = sum(a == b for a, b in zip(ours[name], theirs[name], strict=True))
            drops = (len(texts) - sum(ours[name]), len(texts) - sum(theirs[name]))
            agreement_rows.append([label, name, same / len(texts), *drops])
        ours_all = [all(d) for d in zip(*ours.values(), strict=True)]
        theirs_all = [all(d) for d in zip(*theirs.values(), strict=True)]
        same = sum(a == b for a, b in zip(ours_all, theirs_all, strict=True))
        agreement_rows.append(
            [
                label,
                "all four",
                same / len(texts),
                len(texts) - sum(ours_all),
                len(texts) - sum(theirs_all),
            ]
        )
    print_table(
        "Filter speed, one core (MB of text/s; tokenmill: fastest of 5 runs, by wall-clock and "
        "by CPU time)",
        [
            "corpus",
            "MB",
            "tokenmill chain (url+4) MB/s",
            "chain MB/s of CPU",
            "tokenmill 4 filters MB/s",
            "datatrove 4 filters MB/s",
            "datatrove docs/s",
            "speed-up (4 vs 4)",
        ],
        speed_rows,
    )
    print_table(
        "Keep/drop agreement with datatrove (each filter on every document)",
        ["corpus", "filter", "agreement", "tokenmill drops", "datatrove drops"],
        agreement_rows,
    )


# --- whole stage vs bare extractor; peak RSS in unit size --------------------------------------


def demo_lake(root: Path, files: int, pages_per_file: int) -> tuple[Lake, Unit]:
    generate_demo_crawl(
        root / "warc", root / "truth.json", crawl=CRAWL, files=files, pages_per_file=pages_per_file
    )
    return landed_lake(root, files)


def real_pages_lake(root: Path) -> tuple[Lake, Unit]:
    """The WCXB pages as the HTTP responses of one WARC file, landed as a unit."""
    from tokenmill.demo.warc_writer import WarcWriter

    folder = shared_path(*EXTRACTION, "wcxb-dev-sample")
    (root / "warc").mkdir(parents=True)
    with open(root / "warc" / f"{CRAWL}-real.warc.gz", "wb") as stream:
        writer = WarcWriter(stream, id_seed="wcxb")
        for index, path in enumerate(sorted((folder / "html").glob("*.html.gz"))):
            writer.write_response(
                f"https://wcxb.example/{path.stem}",
                gzip.decompress(path.read_bytes()),
                content_type="text/html",
                date="2026-03-01T00:00:00Z",
                record_id=f"<urn:uuid:00000000-0000-0000-0000-{index:012d}>",
            )
    return landed_lake(root, 1)


def landed_lake(root: Path, files: int) -> tuple[Lake, Unit]:
    """The WARC files landed as one unit, indexed by raw_crawl (read in place, not copied)."""
    lake = Lake.from_url(str(root / "lake"))
    for path in sorted((root / "warc").iterdir()):
        lake.put_file(f"{LANDING}/{CRAWL}/{path.name}", path)
    (unit,) = register_new_files(lake, CRAWL, files_per_unit=files).units
    run_stage_work(stage_named(RAW_CRAWL), lake, unit=unit, workers=1)
    return lake, unit


def bare_extraction(root: str, unit: Unit, extractor: str) -> int:
    """Read the unit's WARC records where raw_crawl indexed them and extract every response,
    nothing else."""
    lake = Lake.from_url(root)
    pages = 0
    for part in range(len(unit_files(lake, unit))):
        name = lake.read_json(f"{unit.part_prefix(RAW_CRAWL, part)}/{MARKER}")["counts"]["readable"]
        with open_file(lake, unit.crawl, name) as stream:
            for record in iter_records(stream, 64 << 20, name=name):
                if isinstance(record, BadRecord) or record.type != "response":
                    continue
                try:
                    extract_document(record.block, 8 << 20, extractor=extractor)
                    pages += 1
                except Skip:
                    continue
    return pages


def raw_crawl_stage(root: str, unit: Unit) -> int:
    """The raw_crawl stage (reading and indexing the unit's records) again, in this process."""
    lake = Lake.from_url(root)
    return run_stage_work(stage_named(RAW_CRAWL), lake, unit=unit, workers=1).records_in


def whole_stage(root: str, unit: Unit, extractor: str) -> int:
    """The extracted stage (the per-unit work every recipe shares) on the unit, its files one
    after another in this process."""
    lake = Lake.from_url(root)
    settings = ExtractSettings(extractor=extractor)
    return run_stage_work(stage_named(EXTRACTED), lake, settings, unit=unit, workers=1).records_in


# A threshold-only recipe change: what a researcher's next try looks like.
STRICTER = CleanSettings(
    min_language_score=0.7,
    gopher_quality={"min_doc_words": 100},
    fineweb_quality={"line_punct_thr": 0.2},
)


def filter_pass(root: str, unit: Unit, settings: CleanSettings | None = None) -> int:
    """The cleaned stage (a recipe's filter pass over the extracted documents) on the unit."""
    lake = Lake.from_url(root)
    return run_stage_work(stage_named(CLEANED), lake, settings, unit=unit, workers=1).records_out


def warm_then(work):
    """Load the models (language ID, trafilatura) before timing, as a long-running worker has."""
    identifier()("warm up")
    html_to_text("<p>warm up</p>", extractor="trafilatura")
    cpu = time.process_time()
    result, wall = timed(work)
    return result, wall, time.process_time() - cpu


def bench_stage() -> None:
    rows = []
    sources = [
        ("demo crawl, 1,000 pages", functools.partial(demo_lake, files=2, pages_per_file=500))
    ]
    if shared_path(*EXTRACTION, "wcxb-dev-sample"):
        sources.append(("WCXB real pages, 400", real_pages_lake))
    for label, make in sources:
        with tempfile.TemporaryDirectory() as scratch:
            rows += stage_rows(label, make, Path(scratch))
    print_table(
        "Whole cleaning stage vs bare extractor (WARC reading + extract_document), one core, "
        "fastest of 3 alternated runs",
        [
            "pages",
            "extractor",
            "pages extracted",
            "bare extractor s",
            "cleaned stage s",
            "ratio",
            "ratio of CPU times",
        ],
        rows,
    )


def stage_rows(label: str, make, scratch: Path, repeats: int = 3) -> list[list]:
    """Bare extractor and whole stage, alternated ``repeats`` times; the fastest run of each
    (the machine is shared: the minimum is the least disturbed run)."""
    _, unit = make(scratch)
    root = str(scratch / "lake")
    rows = []
    for extractor in ("hybrid", "resiliparse"):
        bare_runs, stage_runs = [], []
        for _ in range(repeats):
            bare_runs.append(
                in_fresh_process(
                    functools.partial(
                        warm_then, functools.partial(bare_extraction, root, unit, extractor)
                    )
                )[0]
            )
            stage_runs.append(
                in_fresh_process(
                    functools.partial(
                        warm_then, functools.partial(whole_stage, root, unit, extractor)
                    )
                )[0]
            )
        bare, stage = min(r[1] for r in bare_runs), min(r[1] for r in stage_runs)
        bare_cpu, stage_cpu = min(r[2] for r in bare_runs), min(r[2] for r in stage_runs)
        rows.append(
            [label, extractor, bare_runs[0][0], bare, stage, stage / bare, stage_cpu / bare_cpu]
        )
    return rows


def bench_memory() -> None:
    rows = []
    for files in (1, 4, 16):
        with tempfile.TemporaryDirectory() as scratch:
            lake, unit = demo_lake(Path(scratch), files=files, pages_per_file=500)
            root = str(Path(scratch) / "lake")
            records, seconds, peak = in_fresh_process(
                functools.partial(whole_stage, root, unit, "hybrid")
            )
            raw_bytes = sum(file_size(lake, CRAWL, f) for f in unit_files(lake, unit))
            rows.append([f"{files} files", records, raw_bytes / 1e6, seconds, peak / 2**20])
    print_table(
        "Peak RSS of the extracted stage in a fresh process (its files one after another), by "
        "unit size",
        ["unit of files", "records", "WARC MB", "seconds", "peak RSS MiB"],
        rows,
    )


# --- stage vs bare: the whole stage against fastwarc + resiliparse on the same WARC files ------

REAL_WARC = ("corpora", "warc", "cc-main-2020-34-excerpt.warc.gz")
WCXB_FILES = 2  # the 400 WCXB pages in this many WARC files


def ground_truth_pages(corpus: str) -> list[tuple[str, bytes]]:
    """(name, raw HTML bytes) of every page of a ground-truth corpus, as stored."""
    folder = shared_path(*EXTRACTION, corpus)
    return [
        (p.name.split(".")[0], gzip.decompress(p.read_bytes()))
        for p in sorted((folder / "html").glob("*.html.gz"))
    ]


def write_warc(path: Path, site: str, pages: list[tuple[str, bytes]]) -> None:
    """The pages as HTTP 200 ``text/html`` responses, one gzip member each."""
    from tokenmill.demo.warc_writer import WarcWriter, make_record_id

    with open(path, "wb") as stream:
        writer = WarcWriter(stream, id_seed=site)
        for name, body in pages:
            url = f"https://{site}/{name}"
            writer.write_response(
                url,
                body,
                content_type="text/html",
                date="2026-03-01T00:00:00Z",
                record_id=make_record_id(site, name),
            )


def real_warc_lake(root: Path) -> tuple[Lake, Unit]:
    """The real pages of ../shared as one unit: the WCXB sample and the scrapinghub articles
    wrapped in WARC, and the Common Crawl excerpt as it is."""
    folder = root / "warc"
    folder.mkdir(parents=True)
    real_warcs(folder)
    return landed_lake(root, len(list(folder.iterdir())))


def real_warcs(folder: Path) -> None:
    """The real pages of ../shared as WARC files in `folder` (see real_warc_lake)."""
    wcxb = ground_truth_pages("wcxb-dev-sample")
    for index in range(WCXB_FILES):
        write_warc(
            folder / f"{CRAWL}-wcxb-{index}.warc.gz", "wcxb.example", wcxb[index::WCXB_FILES]
        )
    write_warc(
        folder / f"{CRAWL}-scrapinghub.warc.gz",
        "scrapinghub.example",
        ground_truth_pages("scrapinghub-articles"),
    )
    (folder / f"{CRAWL}-cc-excerpt.warc.gz").write_bytes(shared_path(*REAL_WARC).read_bytes())


PAGE_FILES = 7  # WARC files --pages' HTML files are wrapped in, unless --files says


def html_folder_lake(
    root: Path, html: Path, pages: int, files: int = PAGE_FILES, copies: int = 1
) -> tuple[Lake, Unit]:
    """``pages`` HTML files under ``html`` (.html, .htm, or gzipped: every n-th of them in path
    order, so a sample spans the whole folder), each ``copies`` times under other URLs (real
    file sizes from a few pages), wrapped in ``files`` WARC files, as one unit."""
    found = sorted(
        Path(folder, name)
        for folder, _, names in os.walk(html, followlinks=True)
        for name in names
        if name.endswith((".html", ".htm", ".html.gz", ".htm.gz"))
    )
    if not found:
        raise SystemExit(f"no .html or .htm files under {html}")
    step = max(1, len(found) // pages)
    chosen = [
        (
            str(p.relative_to(html)),
            gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes(),
        )
        for p in found[::step][:pages]
    ]
    chosen = [
        (f"{name}?copy={n}" if n else name, body) for n in range(copies) for name, body in chosen
    ]
    folder = root / "warc"
    folder.mkdir(parents=True)
    for index in range(min(files, len(chosen))):
        write_warc(folder / f"{CRAWL}-{index}.warc.gz", "pages.example", chosen[index::files])
    return landed_lake(root, len(list(folder.iterdir())))


def input_flags(arguments) -> list[str]:
    """The input options a run was given, as its record's name shows them (one section of
    RESULTS.md per input)."""
    if arguments.warcs is not None:
        return ["--warcs"]
    if arguments.pages is None:
        return []
    files = [f"--files {arguments.files}"] if arguments.files != PAGE_FILES else []
    return ["--pages", *files, *([f"--copies {arguments.copies}"] if arguments.copies > 1 else [])]


def add_input_arguments(parser) -> None:
    """The input a benchmark of real pages reads: ../shared's, or the user's."""
    parser.add_argument("--pages", type=Path, help="HTML files of this folder, wrapped in WARC")
    parser.add_argument("--sample", type=int, default=5000, help="how many of --pages' files")
    parser.add_argument(
        "--files",
        type=int,
        default=PAGE_FILES,
        help=f"WARC files --pages are wrapped in ({PAGE_FILES})",
    )
    parser.add_argument(
        "--copies", type=int, default=1, help="each of --pages' files this many times (1)"
    )
    parser.add_argument("--warcs", type=Path, help="the WARC files of this folder, as they are")


def shared_pages_absent(arguments) -> bool:
    """Whether ../shared's real pages are needed (no --pages, no --warcs) and absent."""
    return (
        arguments.pages is None
        and arguments.warcs is None
        and (shared_path(*EXTRACTION, "wcxb-dev-sample") is None or shared_path(*REAL_WARC) is None)
    )


def input_description(pages: Path | None, sample: int, warcs: Path | None, copies: int = 1) -> str:
    """What a benchmark of real pages reads (``add_input_arguments``), in words."""
    if warcs is not None:
        return f"the WARC files of {warcs}"
    if pages is not None:
        copied = f", each {copies} times" if copies > 1 else ""
        return f"{sample} HTML files of {pages}, wrapped in WARC{copied}"
    return (
        "../shared: the WCXB sample and scrapinghub articles wrapped in WARC, and a Common "
        "Crawl excerpt"
    )


def landed_input(
    root: Path, pages: Path | None, sample: int, warcs: Path | None, copies: int = 1
) -> dict:
    """What the unit of `real_warc_lake`, `html_folder_lake` or `warc_folder_lake` under `root`
    holds, for the record."""
    paths = sorted((root / "warc").iterdir())
    return {
        "data": input_description(pages, sample, warcs, copies),
        "warc_files": len(paths),
        "warc_bytes": sum(path.stat().st_size for path in paths),
    }


def warc_folder_lake(root: Path, warcs: Path) -> tuple[Lake, Unit]:
    """The WARC files of the folder ``warcs`` (.warc.gz or .warc), as they are, as one unit."""
    found = sorted(p for p in warcs.iterdir() if p.name.endswith((".warc.gz", ".warc")))
    if not found:
        raise SystemExit(f"no .warc.gz or .warc files in {warcs}")
    folder = root / "warc"
    folder.mkdir(parents=True)
    for path in found:
        (folder / path.name).symlink_to(path.resolve())
    return landed_lake(root, len(found))


def fastwarc_resiliparse(paths: list[Path]) -> int:
    """The bare loop: fastwarc reads the responses, resiliparse decodes and extracts main
    content; nothing is written."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    pages = 0
    for path in paths:
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream, record_types=WarcRecordType.response):
                if record.http_headers is None or record.http_headers.status_code != 200:
                    continue
                if "html" not in (record.http_content_type or ""):
                    continue
                body = record.reader.read()
                html = bytes_to_str(body, detect_encoding(body))
                extract_plain_text(html, main_content=True)
                pages += 1
    return pages


def cpu_seconds(work) -> tuple[Any, float]:
    started = time.process_time()
    result = work()
    return result, time.process_time() - started


def fresh_cpu_seconds(work) -> float:
    """CPU seconds of ``work`` in a new process, as a run's worker does it: nothing warm but
    what it loads itself, the watchdog on."""
    return in_fresh_process(functools.partial(_watched_cpu_seconds, work))[0]


def _watched_cpu_seconds(work) -> float:
    enable_watchdog()
    return cpu_seconds(work)[1]


# Measured again each round in new processes: a long-lived process that has run the stages
# makes the bare loop slower than a new one does, and a run's workers are new processes.
FRESH = ("bare", "raw_crawl", "shared")


def bench_stage_vs_bare(
    rounds: int = int(os.environ.get("BENCH_ROUNDS", "5")),
    pages: Path | None = None,
    sample: int = 5000,
    warcs: Path | None = None,
    files: int = PAGE_FILES,
    extractor: str = DEFAULT_EXTRACTOR,
    copies: int = 1,
) -> dict | None:
    """The shared per-unit work (the raw_crawl stage: reading and indexing the records; the
    extracted stage: extraction, language ID, every signal, committed Parquet), the bare
    fastwarc + resiliparse loop on the same WARC files, and two
    recipes' filter passes over the extraction (the cleaned stage: the default recipe, and a
    threshold-only change of it), interleaved for ``rounds`` rounds in this one process after
    a warm-up round of each, and bare, raw_crawl and extracted again each round in new
    processes (``FRESH``); CPU seconds per round, median ratios. Then one more extracted run
    with timers on its components. The files: the real pages of ../shared, ``sample`` HTML
    files of the folder ``pages`` (wrapped in ``files`` WARC files), or the WARC files of the
    folder ``warcs``. Returns what the files are, for the record."""
    if (
        pages is None
        and warcs is None
        and (shared_path(*EXTRACTION, "wcxb-dev-sample") is None or shared_path(*REAL_WARC) is None)
    ):
        print("\n(skipped stage-vs-bare: ../shared is absent)")
        return None
    enable_watchdog()  # as in the stage's worker processes: each record is posted for police
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        if warcs is not None:
            lake, unit = warc_folder_lake(root, warcs)
        elif pages is not None:
            lake, unit = html_folder_lake(root, pages, sample, files, copies)
        else:
            lake, unit = real_warc_lake(root)
        paths = sorted((root / "warc").iterdir())
        warc_bytes = sum(p.stat().st_size for p in paths)
        landed = landed_input(root, pages, sample, warcs, copies)
        runs = {
            "bare": functools.partial(fastwarc_resiliparse, paths),
            "raw_crawl": functools.partial(raw_crawl_stage, str(root / "lake"), unit),
            "shared": functools.partial(whole_stage, str(root / "lake"), unit, extractor),
            "recipe": functools.partial(filter_pass, str(root / "lake"), unit),
            "change": functools.partial(filter_pass, str(root / "lake"), unit, STRICTER),
        }
        done = {name: work() for name, work in runs.items()}  # warm-up: models, caches
        pages, records = done["bare"], done["shared"]
        cpu = {name: [] for name in runs}
        fresh = {name: [] for name in FRESH}
        rows = []
        for number in range(1, rounds + 1):
            for name, work in runs.items():
                cpu[name].append(cpu_seconds(work)[1])
            for name in FRESH:
                fresh[name].append(fresh_cpu_seconds(runs[name]))
            shared = cpu["raw_crawl"][-1] + cpu["shared"][-1]
            rows.append(
                [number, *(cpu[name][-1] for name in runs)]
                + [shared / cpu["bare"][-1], cpu["change"][-1] / cpu["shared"][-1]]
                + [(fresh["raw_crawl"][-1] + fresh["shared"][-1]) / fresh["bare"][-1]]
            )
        kept = lake.read_json(f"{unit.prefix(CLEANED)}/{MARKER}")["records_out"]
        _, components, calls, total = attributed(runs["shared"])
    ratios = [row[-3] for row in rows]
    change_shares = [row[-2] for row in rows]
    fresh_ratios = [row[-1] for row in rows]
    median = {name: statistics.median(values) for name, values in cpu.items()}
    ratio, change_share = statistics.median(ratios), statistics.median(change_shares)
    fresh_ratio = statistics.median(fresh_ratios)
    fresh_median = {name: statistics.median(values) for name, values in fresh.items()}
    # the fastest round of each: this machine's noise only ever adds time
    fastest = {name: min(values) for name, values in cpu.items()}
    fastest_ratio = (fastest["raw_crawl"] + fastest["shared"]) / fastest["bare"]
    print_table(
        f"Shared extraction vs bare fastwarc + resiliparse, and recipes' filter passes: "
        f"{len(paths)} WARC files ({warc_bytes / 1e6:.1f} MB gzipped; {pages} HTML responses, "
        f"{records} records in, {kept} documents kept by the last pass), CPU seconds per round, "
        "one process, one polars thread; last column: bare, raw_crawl and extracted each again in "
        "a new process, as a run's workers do them",
        [
            "round",
            "bare CPU s",
            "raw_crawl CPU s",
            "extracted CPU s",
            "cleaned CPU s",
            "threshold change CPU s",
            "raw_crawl + extracted x bare",
            "change / extracted",
            "new processes: raw_crawl + extracted x bare",
        ],
        [
            *rows,
            ["median", *median.values(), ratio, change_share, fresh_ratio],
            [
                "fastest",
                *fastest.values(),
                fastest_ratio,
                fastest["change"] / fastest["shared"],
                (min(fresh["raw_crawl"]) + min(fresh["shared"])) / min(fresh["bare"]),
            ],
        ],
    )
    print_table(
        "The same, each in a new process (as a run's workers: nothing warm), CPU seconds",
        [
            "round",
            "bare CPU s",
            "raw_crawl CPU s",
            "extracted CPU s",
            "raw_crawl + extracted x bare",
        ],
        [
            [number, *(fresh[name][number - 1] for name in FRESH), fresh_ratios[number - 1]]
            for number in range(1, rounds + 1)
        ]
        + [["median", *fresh_median.values(), fresh_ratio]],
    )
    bare_cpu = median["bare"]
    order = [c for c in COMPONENTS if c in components]
    order[-1:-1] = sorted(c for c in components if c.startswith("signals: "))
    print_table(
        "Where the extracted stage's CPU time goes (one run with timers on its components; each "
        "exclusive of those it calls)",
        ["component", "calls", "CPU s", "share", "x bare loop"],
        [
            [c, calls.get(c, ""), components[c], f"{components[c] / total:.1%}"]
            + [components[c] / bare_cpu]
            for c in order
        ],
    )
    labels = {
        "bare": "fastwarc + resiliparse, bare",
        "raw_crawl": "raw_crawl: reading and indexing the records (shared)",
        "shared": "extracted: extraction, language ID, signals (shared)",
        "recipe": "cleaned: the default recipe's filter pass",
        "change": "cleaned: a threshold-only change",
    }
    print_table(
        "Cleaning cost (CPU-hours per TB of .warc.gz = 10^12 bytes / "
        "(gzipped bytes per CPU second) / 3600)",
        ["run", "CPU s", "CPU-hours per TB .warc.gz", "x bare", "share of extracted"],
        [
            [
                labels[name],
                seconds,
                1e12 / (warc_bytes / seconds) / 3600,
                seconds / bare_cpu,
                f"{seconds / median['shared']:.1%}",
            ]
            for name, seconds in median.items()
        ],
    )
    print(
        json.dumps(
            {
                "bench": "stage-vs-bare",
                "warc_bytes": warc_bytes,
                "pages": pages,
                "cpu_s": median,
                "shared_x_bare": ratio,
                "shared_x_bare_rounds": ratios,
                "shared_x_bare_fastest": fastest_ratio,
                "shared_x_bare_new_processes": fresh_ratio,
                "shared_x_bare_new_processes_rounds": fresh_ratios,
                "cpu_s_new_processes": fresh_median,
                "threshold_change_share": change_share,
                "threshold_change_share_rounds": change_shares,
                "components_cpu_s": components,
            }
        )
    )
    return landed


# What each section measures on, for the record (stage-vs-bare's files: `landed_input`).
SECTION_INPUTS = {
    "extraction": "../shared/corpora/extraction: the WCXB dev sample and the scrapinghub "
    "articles, HTML pages with their ground-truth text",
    "language": "generated demo articles in every language (40 each, whole and cut to 100 and 30 "
    f"characters) and ../shared/{'/'.join(CORPUS)}",
    "filters": f"../shared/{'/'.join(CORPUS)} and a generated demo crawl's English pages",
    "stage": "a generated demo crawl of 2 files of 500 pages, and the WCXB sample in one WARC file",
    "memory": "generated demo crawls of 1, 4 and 16 files of 500 pages",
}

SECTIONS = {
    "extraction": bench_extraction,
    "language": bench_language,
    "filters": bench_filters,
    "stage": bench_stage,
    "memory": bench_memory,
    "stage-vs-bare": bench_stage_vs_bare,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sections", nargs="*", help=f"any of {', '.join(SECTIONS)}")
    add_input_arguments(parser)  # stage-vs-bare's files, instead of ../shared's pages
    parser.add_argument(
        "--extractor",
        choices=EXTRACTORS,
        default=DEFAULT_EXTRACTOR,
        help=f"the extracted stage's extractor in stage-vs-bare ({DEFAULT_EXTRACTOR})",
    )
    arguments = parser.parse_args()
    sections = arguments.sections or list(SECTIONS)
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {list(SECTIONS)}")
    inputs = {}
    for section in sections:
        if section == "stage-vs-bare":
            inputs[section] = bench_stage_vs_bare(
                pages=arguments.pages,
                sample=arguments.sample,
                warcs=arguments.warcs,
                files=arguments.files,
                extractor=arguments.extractor,
                copies=arguments.copies,
            )
        else:
            SECTIONS[section]()
            inputs[section] = SECTION_INPUTS[section]
    ran = [] if len(inputs) == len(SECTIONS) else sorted(inputs, key=list(SECTIONS).index)
    given = input_flags(arguments)
    suffix = f": {' '.join(given)}" if given and "stage-vs-bare" in inputs else ""
    record(" ".join(["bench_clean", *ran]) + suffix, TABLES, inputs)


if __name__ == "__main__":
    main()
