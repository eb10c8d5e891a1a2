"""Near-duplicate detection in Chinese and Japanese (English as the reference): planted edited
copies of real pages, MinHash LSH as the dedup stages compute it, recall and precision of the
duplicate pairs, with and without word segmentation.

    uv run python benchmarks/bench_cjk_dedup.py
    uv run python benchmarks/bench_cjk_dedup.py --bases 20 --seed 3

Base documents: the main text (resiliparse, main content, as the extracted stage's
``resiliparse`` extractor) of the pages of ../shared/corpora/warc's clueweb-japanese-quirk and
cc-main-2020-34 excerpts whose language ID (``tokenmill.text.language.identify``) is zh, ja or
en, at least MIN_CHARS long; where a language has fewer than ``--bases`` real pages, articles of
the demo generator (``tokenmill.demo.crawl.sample_articles``) fill up (the table says how many).

Per base document, edited copies (``EDITS``): runs of 1-4 characters replaced, inserted or
deleted at 1-10 % of the characters (line breaks kept), sentences swapped or shuffled, a
paragraph of another base appended, an exact copy. The truth is the word-5-gram Jaccard of
every pair of documents of a language (edited copies, their bases, and real pages that happen
to be near-duplicates of each other) over ``shingles`` of the SEGMENTED text (the words the
stage hashes); a pair is a duplicate when that Jaccard is at least the LSH threshold of the
default ``DedupSettings`` banding, (1/bands)^(1/rows) (0.719 for 14 x 8; the settings' own
``threshold`` is None by default).

Signatures: the dedup_signatures stage's path, ``words_text`` -> ``MinHasher.hash_documents``
-> ``band_hashes`` -> xor with ``language_salts`` -> ``unlink_short_docs``, over one batch
holding all languages. Clusters: the dedup_clusters stage's grouping of a key column
(``tokenmill.dedup.clustering.bucket_edges``, per band column and the exact hash), then the
connected components of those edges by a union-find here (the stage's star rounds over the lake
give the same components). Predicted pairs: pairs in one component ("cluster pairs"), and pairs
sharing a key ("bucket pairs": before transitivity). "Without segmentation": the same, with the
``language`` column left out of ``words_text``'s batch, so a CJK text is shingled on whitespace:
a paragraph or a page is one word.

A salt check: a Chinese page and its exact copy labelled "ja" must share no key.

Prints the tables and appends one line per (language, segmentation) to
benchmarks/results.jsonl (BENCH_RESULTS=/tmp/trial.jsonl for a trial).
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections import Counter
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pyarrow as pa

from benchmarks.measure import print_table
from benchmarks.results import record
from testkit.shared_data import html_responses
from tokenmill.dedup.clustering import bucket_edges
from tokenmill.dedup.minhash import band_hashes, shingles
from tokenmill.dedup.settings import DedupSettings, unlink_short_docs
from tokenmill.stages.dedup_signatures import language_salts, words_text
from tokenmill.storage.outputs import StageReport

WARCS = (
    "clueweb-japanese-quirk.warc.gz",
    "cc-main-2020-34-excerpt.warc.gz",
    "wget-2024-sample-0000.warc.gz",  # English pages for the reference
    "wget-2024-sample-0001.warc.gz",
)
LANGUAGES = ("zh", "ja", "en")
TARGET = 0.95  # recall and precision wanted on zh and ja with segmentation
MIN_CHARS = {"zh": 300, "ja": 300, "en": 1500}  # a base shorter than this says little
MAX_CHARS = 30_000  # longer pages are cut here (the Jaccard of every pair stays cheap)
SETTINGS = DedupSettings()
BASE_JACCARD = 0.2  # two bases at least this similar: the later one is left out


# --- base documents ----------------------------------------------------------------------------


def warc_texts() -> list[str]:
    """Main text of every HTML response of the WARCS, as the extracted stage's resiliparse
    extractor gives it (lines kept)."""
    from tokenmill.crawl.extract import decode_html, html_to_text

    texts = []
    for response in html_responses(WARCS):
        html = decode_html(response.html, response.charset)[0]
        texts.append(html_to_text(html, extractor="resiliparse")[:MAX_CHARS])
    return texts


def base_documents(per_language: int, seed: int) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Up to ``per_language`` base texts per language, real pages first (distinct texts), demo
    articles after; and per language, where they came from."""
    from tokenmill.demo.crawl import sample_articles
    from tokenmill.text.language import identify

    real: dict[str, list[str]] = {language: [] for language in LANGUAGES}
    for text in dict.fromkeys(warc_texts()):
        language = identify(text)[0]
        if language in real and len(text) >= MIN_CHARS[language]:
            real[language].append(text)
    bases, sources = {}, {}
    rng = random.Random(seed)
    for language in LANGUAGES:
        texts = distinct(real[language], language)
        similar = len(real[language]) - len(texts)
        if len(texts) > per_language:
            texts = rng.sample(texts, per_language)
        missing = per_language - len(texts)
        demo = []
        if missing > 0:
            articles = sample_articles(language, missing * 3, seed)
            demo = [a for a in articles if len(a) >= min(MIN_CHARS[language], 300)][:missing]
        bases[language] = texts + demo
        sources[language] = (
            f"{len(texts)} real pages ({similar} more left out: near another) "
            f"+ {len(demo)} demo articles"
        )
    return bases, sources


def distinct(texts: list[str], language: str) -> list[str]:
    """``texts`` without those whose word-5-gram Jaccard to an earlier kept one reaches
    BASE_JACCARD: bases must be unrelated, or the planted copies of two pages of one site
    template chain into one cluster and the pairs measure the template, not the edits."""
    batch = pa.RecordBatch.from_pydict({"text": texts, "language": [language] * len(texts)})
    norm = SETTINGS.text_norm()
    kept: list[tuple[str, set]] = []
    for text, words in zip(texts, words_text(batch) if texts else [], strict=True):
        grams = set(shingles(words, SETTINGS.ngram, norm))
        if all(len(grams & g) < BASE_JACCARD * len(grams | g) for _, g in kept):
            kept.append((text, grams))
    return [text for text, _ in kept]


# --- edits -------------------------------------------------------------------------------------

SENTENCE_END = re.compile(r"(?<=[。！？!?.])")


def _char_edit(kind: str, rate: float):
    def edit(text: str, rng: random.Random, other: str) -> str:
        chars = list(text)
        pool = [c for c in text if not c.isspace()] or ["x"]
        budget = int(round(rate * len(chars)))
        while budget > 0 and chars:
            run = min(rng.randint(1, 4), budget)
            budget -= run
            at = rng.randrange(len(chars))
            if kind == "insert":
                chars[at:at] = [rng.choice(pool) for _ in range(run)]
                continue
            stop = at
            while stop < len(chars) and stop - at < run and chars[stop] != "\n":
                stop += 1  # a run never crosses a line break: paragraphs stay
            if kind == "replace":
                chars[at:stop] = [rng.choice(pool) for _ in range(stop - at)]
            else:
                del chars[at:stop]
        return "".join(chars)

    return edit


def _sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text) if s]


def _swap_sentences(swaps: int):
    def edit(text: str, rng: random.Random, other: str) -> str:
        sentences = _sentences(text)
        for _ in range(swaps if len(sentences) > 1 else 0):
            at = rng.randrange(len(sentences) - 1)
            sentences[at], sentences[at + 1] = sentences[at + 1], sentences[at]
        return "".join(sentences)

    return edit


def _shuffle_sentences(text: str, rng: random.Random, other: str) -> str:
    sentences = _sentences(text)
    rng.shuffle(sentences)
    return "".join(sentences)


def _append_paragraph(text: str, rng: random.Random, other: str) -> str:
    """A paragraph of another base of the language: its lines up to a tenth of ``text``."""
    lines, taken = [], 0
    for line in other.split("\n"):
        if taken >= len(text) // 10:
            break
        lines.append(line)
        taken += len(line)
    return text + "\n" + "\n".join(lines)


def _exact(text: str, rng: random.Random, other: str) -> str:
    return text


EDITS = {
    "exact copy": _exact,
    **{f"replace {p}%": _char_edit("replace", p / 100) for p in (1, 2, 3, 5, 10)},
    **{f"insert {p}%": _char_edit("insert", p / 100) for p in (1, 5)},
    **{f"delete {p}%": _char_edit("delete", p / 100) for p in (1, 5)},
    "2 sentence swaps": _swap_sentences(2),
    "sentences shuffled": _shuffle_sentences,
    "paragraph appended": _append_paragraph,
}


@dataclass
class Doc:
    language: str
    base: int
    edit: str  # "base" for the base itself
    text: str


def corpus(bases: dict[str, list[str]], seed: int) -> list[Doc]:
    rng = random.Random(seed)
    docs = []
    for language, texts in bases.items():
        for index, text in enumerate(texts):
            docs.append(Doc(language, index, "base", text))
            other = texts[(index + 1) % len(texts)]
            for name, edit in EDITS.items():
                docs.append(Doc(language, index, name, edit(text, rng, other)))
    return docs


# --- truth -------------------------------------------------------------------------------------


def threshold_region(low: float = 0.01, high: float = 0.99) -> tuple[float, float]:
    """The Jaccards between which the default banding finds a pair with a probability between
    ``low`` and ``high`` (as benchmarks/bench_dedup.py): (0.405, 0.853) for 14 x 8. A pair there
    is decided by chance, whatever the language."""
    bands, rows = SETTINGS.banding()

    def jaccard(probability: float) -> float:
        return (1 - (1 - probability) ** (1 / bands)) ** (1 / rows)

    return round(jaccard(low), 3), round(jaccard(high), 3)


def lsh_threshold(settings: DedupSettings = SETTINGS) -> float:
    if settings.threshold is not None:
        return settings.threshold
    bands, rows = settings.banding()
    return (1 / bands) ** (1 / rows)


def true_jaccards(words: list[str], members: list[int]) -> dict[tuple[int, int], float]:
    """Word-5-gram Jaccard (``shingles`` of the stage's words) of every pair of ``members``
    sharing a shingle; absent pairs share none."""
    norm = SETTINGS.text_norm()
    sets = {m: set(shingles(words[m], SETTINGS.ngram, norm)) for m in members}
    postings: dict[str, list[int]] = {}
    for m in members:
        for gram in sets[m]:
            postings.setdefault(gram, []).append(m)
    shared: Counter = Counter()
    for docs in postings.values():
        for pair in combinations(docs, 2):
            shared[pair] += 1
    return {
        pair: count / (len(sets[pair[0]]) + len(sets[pair[1]]) - count)
        for pair, count in shared.items()
    }


# --- signatures and clusters -------------------------------------------------------------------


def signature_keys(docs: list[Doc], segmented: bool) -> tuple[np.ndarray, list[str]]:
    """(documents x key columns: the bands then the exact hash, as dedup_signatures writes
    them), and the texts it shingled."""
    bands, rows = SETTINGS.banding()
    hasher = SETTINGS.hasher()
    columns = {
        "doc_id": pa.array([f"{i:06d}" for i in range(len(docs))]),
        "text": pa.array([d.text for d in docs]),
    }
    languages = pa.array([d.language for d in docs])
    if segmented:
        columns["language"] = languages
    batch = pa.RecordBatch.from_pydict(columns)
    words = words_text(batch)
    hashed = hasher.hash_documents(words)
    band_values = band_hashes(hashed.signatures, bands, rows)
    exact = hashed.content_hashes
    salts = language_salts(languages)
    band_values ^= salts[:, None]
    exact ^= salts
    unlink_short_docs(batch, hashed.word_counts, band_values, exact, SETTINGS, StageReport())
    return np.column_stack([band_values, exact]), words


def key_pairs(keys: np.ndarray) -> set[tuple[int, int]]:
    """Pairs sharing a key in some column (``bucket_edges`` links a group to its first member:
    a group's pairs are all pairs of its members)."""
    pairs: set[tuple[int, int]] = set()
    docs = np.arange(len(keys), dtype=np.int64)
    for column in keys.T:
        first, other = bucket_edges(column, docs)
        groups: dict[int, list[int]] = {}
        for a, b in zip(first.tolist(), other.tolist(), strict=True):
            groups.setdefault(a, [a]).append(b)
        for members in groups.values():
            pairs.update(combinations(sorted(members), 2))
    return pairs


def components(n_docs: int, keys: np.ndarray) -> np.ndarray:
    """Connected component (its smallest document) of every document, over ``bucket_edges`` of
    every key column."""
    parent = list(range(n_docs))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    docs = np.arange(n_docs, dtype=np.int64)
    for column in keys.T:
        for a, b in zip(*(e.tolist() for e in bucket_edges(column, docs)), strict=True):
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    return np.array([root(x) for x in range(n_docs)])


def cluster_pairs(labels: np.ndarray) -> set[tuple[int, int]]:
    groups: dict[int, list[int]] = {}
    for doc, label in enumerate(labels.tolist()):
        groups.setdefault(label, []).append(doc)
    return {p for members in groups.values() for p in combinations(members, 2)}


def scores(truth: set, predicted: set) -> tuple[float, float]:
    hit = len(truth & predicted)
    recall = hit / len(truth) if truth else 1.0
    precision = hit / len(predicted) if predicted else 1.0
    return recall, precision


# --- the salt ----------------------------------------------------------------------------------


def salt_check(text: str) -> dict:
    """A Chinese page, its exact copy labelled "ja" and one labelled "zh": keys shared by the
    "ja" copy with and without the salts (its words then the zh ones, so only the salt differs),
    and by the "zh" copy (the control)."""
    bands, rows = SETTINGS.banding()
    hasher = SETTINGS.hasher()
    batch = pa.RecordBatch.from_pydict({"text": [text] * 3, "language": ["zh", "zh", "zh"]})
    hashed = hasher.hash_documents(words_text(batch))
    keys = np.column_stack([band_hashes(hashed.signatures, bands, rows), hashed.content_hashes])
    salted = keys ^ language_salts(pa.array(["zh", "ja", "zh"]))[:, None]
    as_labelled = pa.RecordBatch.from_pydict({"text": [text] * 2, "language": ["zh", "ja"]})
    own = hasher.hash_documents(words_text(as_labelled))
    own_keys = np.column_stack([band_hashes(own.signatures, bands, rows), own.content_hashes])
    own_keys ^= language_salts(pa.array(["zh", "ja"]))[:, None]
    return {
        "ja copy, same words, unsalted": int((keys[0] == keys[1]).sum()),
        "ja copy, same words, salted": int((salted[0] == salted[1]).sum()),
        "ja copy as the stage sees it (ja words, salted)": int((own_keys[0] == own_keys[1]).sum()),
        "zh copy (control), salted": int((salted[0] == salted[2]).sum()),
        "clustered with the ja copy": "yes" if components(2, own_keys)[1] == 0 else "no",
        "key columns": keys.shape[1],
    }


# --- main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bases", type=int, default=40, help="base documents per language")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    bases, sources = base_documents(args.bases, args.seed)
    docs = corpus(bases, args.seed)
    threshold = lsh_threshold()
    bands, rows = SETTINGS.banding()
    by_language = {
        lang: [i for i, d in enumerate(docs) if d.language == lang] for lang in LANGUAGES
    }

    results, edit_rows, lines = [], [], []
    truth_of: dict[str, set] = {}
    jaccards_of: dict[str, dict] = {}
    for segmented in (True, False):
        keys, words = signature_keys(docs, segmented)
        if segmented:
            for language, members in by_language.items():
                jaccards_of[language] = true_jaccards(words, members)
                truth_of[language] = {p for p, j in jaccards_of[language].items() if j >= threshold}
        labels = components(len(docs), keys)
        clustered = cluster_pairs(labels)
        bucketed = key_pairs(keys)
        cross = sum(docs[a].language != docs[b].language for a, b in clustered)
        for language, members in by_language.items():
            inside = set(members)
            truth = truth_of[language]
            clusters = {p for p in clustered if p[0] in inside}
            buckets = {p for p in bucketed if p[0] in inside and p[1] in inside}
            recall, precision = scores(truth, clusters)
            bucket_recall, bucket_precision = scores(truth, buckets)
            low, high = threshold_region()
            jaccards = jaccards_of[language]
            chance = {p for p, j in jaccards.items() if low <= j < high}
            clear_recall, clear_precision = scores(truth - chance, clusters - chance)
            # a found pair is planted when both are copies of one base document (whatever
            # their Jaccard): what a found pair costs when it is wrong, a unrelated document
            planted = {p for p in clusters if docs[p[0]].base == docs[p[1]].base}
            planted_precision = len(planted) / len(clusters) if clusters else 1.0
            # what dedup decides per document: has it a near-duplicate (true: a partner at the
            # threshold or above; found: in a cluster of two or more)
            doc_recall, doc_precision = scores(
                {i for pair in truth for i in pair}, {i for pair in clusters for i in pair}
            )
            mode = "segmented" if segmented else "raw (no segmenter)"
            figures = {
                "language": language,
                "words": mode,
                "docs": len(members),
                "true_pairs": len(truth),
                "cluster_pairs": len(clusters),
                "recall": round(recall, 3),
                "precision": round(precision, 3),
                "bucket_pairs": len(buckets),
                "bucket_recall": round(bucket_recall, 3),
                "bucket_precision": round(bucket_precision, 3),
                "pairs_in_threshold_region": len(chance),
                "recall_outside_region": round(clear_recall, 3),
                "precision_outside_region": round(clear_precision, 3),
                "precision_planted": round(planted_precision, 3),
                "document_recall": round(doc_recall, 3),
                "document_precision": round(doc_precision, 3),
                "cross_language_cluster_pairs": cross,
            }
            results.append(list(figures.values())[:-1])
            lines.append((f"bench_cjk_dedup: {language} {mode}", figures, language))
        if segmented:
            edit_rows += edit_table(docs, by_language, jaccards_of, labels, threshold)

    salt = salt_check(bases["zh"][0]) if bases["zh"] else {}
    print("bases: " + "; ".join(f"{lang}: {sources[lang]}" for lang in LANGUAGES))
    print(
        f"threshold: true word-5-gram Jaccard >= {threshold:.3f} ((1/{bands})^(1/{rows})), "
        f"{bands} bands x {rows} rows, {SETTINGS.scheme}; {len(docs)} documents "
        f"({len(EDITS)} edited copies per base), {time.perf_counter() - started:.1f} s"
    )
    low, high = threshold_region()
    print(
        f"cluster pairs: in one connected component; bucket pairs: sharing a band or the exact "
        f"hash. Outside: pairs whose true Jaccard lies in the threshold region [{low}, {high}) "
        f"(LSH finds them with a probability between 1 % and 99 %) left out of both sides. "
        f"Precision planted: found pairs that are copies of one base document. Document "
        f"recall and precision: documents with a near-duplicate (a partner at the threshold or "
        f"above) against documents in a cluster of two or more."
    )
    print_table(
        "near-duplicate pairs found by MinHash LSH, per language, with and without segmentation",
        [
            "language",
            "words",
            "docs",
            "true pairs",
            "cluster pairs",
            "recall",
            "precision",
            "bucket pairs",
            "bucket recall",
            "bucket precision",
            "pairs in region",
            "recall outside",
            "precision outside",
            "precision planted",
            "document recall",
            "document precision",
        ],  # fmt: skip
        results,
    )
    print_table(
        "edited copy vs its base (segmented): mean true Jaccard, share above the threshold, "
        "share clustered with the base",
        ["edit", *(f"{lang} {what}" for lang in LANGUAGES for what in ("J", "dup", "found"))],
        edit_rows,
    )
    if salt:
        print_table(
            "salt check: a zh page and its exact copy labelled ja (keys shared of "
            f"{salt['key columns']}: {bands} bands + the exact hash)",
            ["case", "shared keys / clustered"],
            [[k, v] for k, v in salt.items() if k != "key columns"],
        )
    for language in ("zh", "ja"):
        seg = next(f for name, f, lang in lines if lang == language and "raw" not in name)
        met = seg["recall"] >= TARGET and seg["precision_planted"] >= TARGET
        print(f"{language}: recall {seg['recall']}, precision of planted pairs "
              f"{seg['precision_planted']} ({'meet' if met else 'MISS'} the {TARGET} target); "
              f"against the Jaccard threshold: pair precision {seg['precision']}, documents "
              f"{seg['document_recall']} / {seg['document_precision']}")  # fmt: skip
    if salt and (salt["ja copy as the stage sees it (ja words, salted)"] or
                 salt["clustered with the ja copy"] == "yes"):  # fmt: skip
        print("SALT CHECK FAILED: the ja-labelled copy shares keys with the zh page")
    for name, figures, language in lines:
        data = {
            "documents": figures["docs"],
            "bases": sources[language],
            "edits": list(EDITS),
            "threshold": round(threshold, 4),
            "data": "main text of ../shared/corpora/warc clueweb-japanese-quirk and "
            "cc-main-2020-34 pages (+ demo articles)",
        }
        if language == "zh" and salt:
            figures = figures | {"salt_check": salt}
        record(name, figures, data)


def edit_table(docs, by_language, jaccards_of, labels, threshold) -> list[list]:
    rows = []
    for edit in EDITS:
        row = [edit]
        for language, members in by_language.items():
            base_of = {docs[m].base: m for m in members if docs[m].edit == "base"}
            found, dup, js = 0, 0, []
            for m in members:
                if docs[m].edit != edit:
                    continue
                b = base_of[docs[m].base]
                j = jaccards_of[language].get((min(b, m), max(b, m)), 0.0)
                js.append(j)
                dup += j >= threshold
                found += labels[m] == labels[b]
            n = max(len(js), 1)
            row += [round(float(np.mean(js)) if js else 0.0, 3), round(dup / n, 2),
                    round(found / n, 2)]  # fmt: skip
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
