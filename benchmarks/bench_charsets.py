"""How much of a page the charset detector needs to read: uchardet (resiliparse's
``detect_encoding``, its answer named as ``tokenmill.crawl.extract.detected_charset`` names it)
over the whole page and over samples of ``max_len`` bytes (half from each end), on pages whose
charset must be detected (no usable declaration, not UTF-8); and how often it misreads a page
that is valid UTF-8 (which tokenmill reads as UTF-8 before detecting anything).

    uv run python benchmarks/bench_charsets.py

Pages:
- re-encoded: the Debian Administrator's Handbook's HTML pages (Debian's ``debian-handbook``,
  fetched once into bench_languages' cache) in its 26 languages, ``--pages`` pages each, encoded
  in the legacy charsets of their language (characters a charset lacks as HTML character
  references) with their ``<meta charset>`` removed. Right: the detected charset decodes the
  page to the same text as its own charset.
- ../shared: the HTML responses of ../shared/corpora (WARC files and the extraction corpora)
  that are not valid UTF-8. Same: the sample's charset decodes the page to the same text as the
  whole page's. Those that are valid UTF-8 and not ASCII: misread, the detected charset decodes
  them to another text than UTF-8 does.

Per sample size: pages right (or the same), and the detector's CPU seconds over all pages,
the fastest of ``--rounds``. Prints a table and appends one line to benchmarks/results.jsonl
(BENCH_RESULTS=/tmp/trial.jsonl for a trial).
"""

from __future__ import annotations

import argparse
import random
import re
import time
from pathlib import Path

from resiliparse.parse.encoding import bytes_to_str

from benchmarks.bench_clean import ground_truth_pages
from benchmarks.bench_languages import HANDBOOK_PACKAGE, cache_dir, fetch_book
from benchmarks.measure import print_table
from benchmarks.results import record
from testkit.shared_data import html_responses, shared_path
from tokenmill.crawl.extract import DETECTION_SAMPLE, detected_charset

WHOLE = 0  # max_len 0: the whole page
SAMPLES = (WHOLE, 32768, 16384, DETECTION_SAMPLE, 4096)
# the handbook's languages -> charsets their pages were written in before UTF-8
LEGACY = {
    "ja": ("shift_jis", "euc_jp", "iso2022_jp"),
    "zh": ("gb18030", "gbk"),
    "zh-Hant": ("big5",),
    "ko": ("euc_kr",),
    "ru": ("cp1251", "koi8_r"),
    "el": ("iso8859_7",),
    "tr": ("cp1254",),
    "ar": ("cp1256",),
    "fa": ("cp1256",),
    "vi": ("cp1258",),
    **dict.fromkeys(("pl", "cs", "hr", "ro"), ("cp1250", "iso8859_2")),
    **dict.fromkeys(
        ("en", "ca", "da", "de", "es", "fr", "id", "it", "nb", "nl", "pt", "sv"), ("cp1252",)
    ),
}
META_CHARSET = re.compile(rb"<meta[^>]*charset[^>]*>", re.I)
SHARED_WARCS = (
    "aut-2008-heritrix.warc.gz",
    "cc-main-2020-34-excerpt.warc.gz",
    "clueweb-japanese-quirk.warc.gz",
    "wget-2024-sample-0000.warc.gz",
    "wget-2024-sample-0001.warc.gz",
    "ukwa-2014-datagovuk.warc.gz",
    "cc-2024-single-record.warc.gz",
)


def reencoded_pages(cache: Path, per_language: int) -> list[tuple[bytes, str]]:
    """(page bytes without a charset declaration, the charset they are in)."""
    book, dirs = fetch_book(cache, HANDBOOK_PACKAGE)
    rng = random.Random(1)
    pages = []
    for label, folder in dirs.items():
        files = sorted((book / folder).glob("*.html"))
        for path in rng.sample(files, min(per_language, len(files))):
            text = path.read_text("utf-8")
            for charset in LEGACY[label]:
                body = text.encode(charset, errors="xmlcharrefreplace")
                pages.append((META_CHARSET.sub(b"", body), charset))
    return pages


def shared_pages() -> tuple[list[bytes], list[bytes]]:
    """../shared's HTML pages that are not valid UTF-8, and those that are and not ASCII."""
    bodies = [response.html for response in html_responses(SHARED_WARCS)]
    for corpus in ("wcxb-dev-sample", "scrapinghub-articles"):
        if shared_path("corpora", "extraction", corpus) is not None:
            bodies += [body for _, body in ground_truth_pages(corpus)]
    undecodable, utf8 = [], []
    for body in bodies:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            undecodable.append(body)
        else:
            if not body.isascii():
                utf8.append(body)
    return undecodable, utf8


def detections(bodies: list[bytes], sample: int, rounds: int) -> tuple[list[str], float]:
    """The charset detected for every page, and the fastest round's CPU seconds."""
    best, found = float("inf"), []
    for _ in range(rounds):
        started = time.process_time()
        found = [detected_charset(body, sample) for body in bodies]
        best = min(best, time.process_time() - started)
    return found, best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=12, help="handbook pages per language")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache", help="where the handbook is fetched to (bench_languages)")
    args = parser.parse_args(argv)

    reencoded = reencoded_pages(cache_dir(args.cache), args.pages)
    truths = [bytes_to_str(body, charset, errors="replace") for body, charset in reencoded]
    shared, utf8 = shared_pages()
    whole_page = detections(shared, WHOLE, 1)[0]
    whole = [bytes_to_str(b, c, errors="replace") for b, c in zip(shared, whole_page, strict=True)]
    rows, figures = [], {}
    for sample in SAMPLES:
        found, seconds = detections([body for body, _ in reencoded], sample, args.rounds)
        right = sum(
            bytes_to_str(body, charset, errors="replace") == truth
            for (body, _), charset, truth in zip(reencoded, found, truths, strict=True)
        )
        shared_found, shared_seconds = detections(shared, sample, args.rounds)
        same = sum(
            bytes_to_str(body, charset, errors="replace") == text
            for body, charset, text in zip(shared, shared_found, whole, strict=True)
        )
        name = "whole page" if sample == WHOLE else f"{sample} bytes"
        rows.append([name, f"{right}/{len(reencoded)}", round(seconds, 3),
                     f"{same}/{len(shared)}", round(shared_seconds, 4)])  # fmt: skip
        misread = sum(
            bytes_to_str(body, charset, errors="replace") != body.decode("utf-8")
            for body, charset in zip(utf8, detections(utf8, sample, 1)[0], strict=True)
        )
        rows[-1].append(f"{misread}/{len(utf8)}")
        figures[name] = {
            "reencoded_right": right,
            "reencoded_cpu_s": round(seconds, 4),
            "shared_same": same,
            "shared_cpu_s": round(shared_seconds, 4),
            "shared_utf8_misread": misread,
        }
    print_table(
        f"Charset detection by sample size (tokenmill reads {DETECTION_SAMPLE} bytes): pages "
        f"decoded right, CPU seconds (fastest of {args.rounds})",
        ["sample", "re-encoded pages right", "CPU s", "../shared non-UTF-8 pages as whole",
         "CPU s", "../shared UTF-8 pages misread by detection"],
        rows,
    )  # fmt: skip
    record(
        "bench_charsets",
        figures,
        {
            "reencoded_pages": len(reencoded),
            "shared_pages": len(shared),
            "shared_utf8_pages": len(utf8),
            "data": f"debian-handbook HTML, {args.pages} pages per language in its legacy "
            "charsets, <meta charset> removed; ../shared HTML that is not valid UTF-8, and that is",
        },
    )


if __name__ == "__main__":
    main()
