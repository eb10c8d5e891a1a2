"""The word segmenters of languages written without spaces (tokenmill/text/segmenters.py): their
speed on one core and how many words the scanner then counts, against datatrove's word tokenizer
for the language where it can run here (its libraries installed).

    uv run python benchmarks/bench_segmenters.py

Texts: the main text (resiliparse, main_content) of the pages of ../shared/corpora/warc's
Japanese and CC-MAIN-2020-34 excerpts and the documents of ../shared/corpora/text, grouped by the
language tokenmill identifies; Thai has one real page there, repeated. Prints a table and appends
one line per row to benchmarks/results.jsonl.
"""

from __future__ import annotations

import gzip
import json
import time
from collections import defaultdict

import polars as pl

from benchmarks.measure import print_table
from benchmarks.results import record
from testkit.shared_data import shared_path
from tokenmill.text.language import identify
from tokenmill.text.segmenters import segmenter
from tokenmill.text.word_scan import count_words

WARCS = ("clueweb-japanese-quirk.warc.gz", "cc-main-2020-34-excerpt.warc.gz")
LIBRARIES = {
    "zh": "rjieba",
    "ja": "fugashi+ipadic",
    "th": "nlpo3 newmm",
    "my": "clusters",
    "ko": "particles split off",
}
LANGUAGES = ("zh", "ja", "th", "my", "ko", "en")
# enough text per language that a run is timed over a few hundred milliseconds at most
TARGET_CHARS = 400_000


def texts_by_language() -> dict[str, list[str]]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    texts: list[str] = []
    for name in WARCS:
        path = shared_path("corpora", "warc", name)
        if path is None:
            continue
        with path.open("rb") as stream:
            for rec in ArchiveIterator(stream, record_types=WarcRecordType.response):
                html = rec.reader.read()  # the HTTP body: fastwarc has read the headers
                texts.append(extract_plain_text(bytes_to_str(html, detect_encoding(html)), True))
    jsonl = shared_path("corpora", "text", "cc-main-2019-30-697docs.jsonl.gz")
    if jsonl is not None:
        with gzip.open(jsonl, "rt", encoding="utf-8") as lines:
            texts.extend(json.loads(line).get("text") or "" for line in lines)
    by_language: dict[str, list[str]] = defaultdict(list)
    for text in texts:
        if len(text) >= 50:
            by_language[identify(text)[0]].append(text)
    return by_language


def datatrove_count(language: str, texts: list[str]) -> int | None:
    """Words datatrove's tokenizer for `language` finds (None: it cannot run here). Chinese:
    jieba itself, the segmenter datatrove configures spaCy with (spaCy 3.8 here returns
    clause-long tokens with that configuration)."""
    try:
        if language == "zh":
            import jieba

            return sum(len([w for w in jieba.lcut(text) if w.strip()]) for text in texts)
        from datatrove.utils.word_tokenizers import load_word_tokenizer

        tokenizer = load_word_tokenizer(language)
        return sum(len(tokenizer.word_tokenize(text)) for text in texts)
    except Exception:
        return None


def main() -> None:
    by_language = texts_by_language()
    count_words(pl.Series(["warm"]))  # its first call builds the character classes
    rows, lines = [], []
    for language in LANGUAGES:
        texts = by_language.get(language)
        if not texts:
            continue
        chars = sum(map(len, texts))
        texts = texts * max(1, TARGET_CHARS // chars)
        chars = sum(map(len, texts))
        mb = sum(len(t.encode()) for t in texts) / 1e6
        segment = segmenter(language)
        library = LIBRARIES.get(language, "none (spaces)")
        if segment is not None:
            segment(texts[:1])  # loads the dictionary
        start = time.process_time()
        segmented = segment(texts) if segment is not None else texts
        seconds = time.process_time() - start
        start = time.process_time()
        words = int(count_words(pl.Series(segmented)).sum())
        scan_seconds = time.process_time() - start
        unique = by_language[language]
        theirs = datatrove_count(language, unique)
        ours = int(count_words(pl.Series(segment(unique) if segment else unique)).sum())
        ratio = None if not theirs else round(ours / theirs, 3)
        figures = {
            "language": language,
            "library": library,
            "segment_mb_per_s": round(mb / seconds, 2) if segment is not None else None,
            "scan_mb_per_s": round(mb / scan_seconds, 1),
            "words_per_1000_chars": round(1000 * words / chars, 1),
            "ratio_to_datatrove": ratio,
        }
        rows.append(list(figures.values()))
        lines.append((figures, {"documents": len(unique), "mb": round(mb, 2), "chars": chars}))
    print_table(
        "word segmenters, one core",
        ["language", "library", "segment MB/s", "scan MB/s", "words/1000 chars", "ours/datatrove"],
        rows,
    )
    for figures, data in lines:
        data["data"] = "main text of ../shared/corpora WARC pages and CC-MAIN-2019-30 documents"
        record(f"bench_segmenters: {figures['language']}", figures, data)


if __name__ == "__main__":
    main()
