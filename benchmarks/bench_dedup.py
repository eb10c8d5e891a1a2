"""Deduplication: signature speed, agreement with datatrove, clustering time and memory at scale.

    uv run python benchmarks/bench_dedup.py            # everything (about 15 minutes)
    uv run python benchmarks/bench_dedup.py signatures agreement
    uv run python benchmarks/bench_dedup.py agreement --seeds 3   # fewer seed comparisons
    uv run python benchmarks/bench_dedup.py clusters --sizes 1000000 4000000

Every measurement runs in a fresh process (peak RSS is that process's own). The real documents
are ../shared/corpora/text/cc-main-2019-30-697docs.jsonl.gz; the parts that need them are
skipped with a message when ../shared is absent.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import json
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.lake_units import write_unit
from benchmarks.measure import TABLES, in_fresh_process, print_table, timed
from benchmarks.results import record
from testkit.shared_data import shared_path
from tokenmill.dedup.minhash import (
    FINEWEB_NORM,
    PLAIN_NORM,
    MinHasher,
    TextNorm,
    normalize,
    shingles,
)
from tokenmill.dedup.settings import CLUSTERS_FILE, DedupSettings
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    CLEANED,
    DEDUP_CLUSTERS,
    DEDUP_SIGNATURES,
    DOC_SCHEMA,
    Unit,
    band_column,
    crawl_prefix,
    signature_schema,
    unit_name,
)
from tokenmill.storage.outputs import read_column

CORPUS = ("corpora", "text", "cc-main-2019-30-697docs.jsonl.gz")
CRAWL = "CC-MAIN-BENCH"
DEFAULTS = DedupSettings()


def datatrove_config(seed: int = 1):
    """FineWeb's MinHash settings. datatrove's default xxhash shingle hash passes str to
    xxhash, which xxhash 4 refuses ("Strings must be encoded before hashing"): use sha1."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig

    return MinhashConfig(
        n_grams=5,
        num_buckets=14,
        hashes_per_bucket=8,
        seed=seed,
        hash_config=HashConfig(64, "sha1"),
    )


def real_texts() -> list[str]:
    with gzip.open(shared_path(*CORPUS), "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


# --- signatures: docs/s on one core ------------------------------------------------------------

REPEATS = 3  # the machine is shared: each timing is the best of REPEATS passes


def best_time(work) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds of REPEATS passes: on a loaded machine the CPU
    time of this single-threaded process is the fairer per-core figure."""
    walls, cpus = [], []
    for _ in range(REPEATS):
        cpu = time.process_time()
        walls.append(timed(work)[1])
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def tokenmill_signatures(repeat: int, scheme: str, norm: TextNorm) -> tuple[int, float, float]:
    texts = real_texts() * repeat
    hasher = MinHasher(num_perm=112, ngram=5, scheme=scheme, norm=norm)
    hasher.hash_documents(texts[:64])  # builds the code point table once, outside the timing
    return len(texts), *best_time(lambda: hasher.hash_documents(texts))


def datasketch_signatures(docs: int, use_tokenmill_hash: bool) -> tuple[int, float, float]:
    """datasketch.MinHash.update_batch per document, shingling included."""
    from datasketch import MinHash

    texts = real_texts()[:docs]
    hashfunc = {"hashfunc": MinHasher().hashfunc} if use_tokenmill_hash else {}
    template = MinHash(num_perm=112, seed=1, **hashfunc)  # permutations drawn once

    def run():
        for text in texts:
            minhash = template.copy()
            minhash.clear()
            minhash.update_batch([s.encode("utf-8") for s in shingles(text)])

    return len(texts), *best_time(run)


def datatrove_signatures(docs: int) -> tuple[int, float, float]:
    """datatrove's MinhashDedupSignature step (14 x 8, 5-grams) on local folders."""
    from datatrove.data import Document
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

    texts = real_texts()[:docs]
    with tempfile.TemporaryDirectory() as scratch:
        step = MinhashDedupSignature(output_folder=scratch, config=datatrove_config())
        step.get_shingles(texts[0])  # loads the word tokenizer outside the timing
        documents = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]
        seconds = best_time(lambda: step.run(iter(documents), rank=0, world_size=1))
    return len(texts), *seconds


def bench_signatures() -> None:
    if shared_path(*CORPUS) is None:
        print("signatures: skipped, ../shared/corpora/text is absent")
        return
    texts = real_texts()
    mean_bytes = sum(len(t.encode()) for t in texts) / len(texts)
    runs = [
        (
            "tokenmill MinHasher, 64-bit (dedup default), FineWeb norm",
            functools.partial(tokenmill_signatures, 6, "affine64", FINEWEB_NORM),
        ),
        (
            "tokenmill MinHasher, 64-bit, plain norm (before)",
            functools.partial(tokenmill_signatures, 6, "affine64", PLAIN_NORM),
        ),
        (
            "tokenmill MinHasher, 32-bit, FineWeb norm",
            functools.partial(tokenmill_signatures, 6, "affine32", FINEWEB_NORM),
        ),
        (
            "tokenmill MinHasher, scheme datatrove (SHA-1), FineWeb norm",
            functools.partial(tokenmill_signatures, 2, "datatrove", FINEWEB_NORM),
        ),
        (
            "datasketch update_batch, default sha1 hash",
            functools.partial(datasketch_signatures, 200, False),
        ),
        (
            "datasketch update_batch, tokenmill shingle hash",
            functools.partial(datasketch_signatures, 200, True),
        ),
        ("datatrove MinhashDedupSignature", functools.partial(datatrove_signatures, 200)),
    ]
    rows, baseline = [], None
    for name, work in runs:
        (docs, seconds, cpu_seconds), _, peak = in_fresh_process(work)
        rate = docs / seconds
        baseline = baseline or rate
        rows.append([name, docs, round(seconds, 2), round(rate), round(docs / cpu_seconds),
                     f"{baseline / rate:.1f}x"])  # fmt: skip
    print_table(
        f"MinHash signatures, 112 permutations, word 5-grams, shingling included, one "
        f"single-threaded process, best of {REPEATS}, real docs (mean {mean_bytes:,.0f} bytes)",
        [
            "implementation",
            "docs",
            "seconds",
            "docs/s",
            "docs per CPU second",
            "first row is faster by",
        ],
        rows,
    )


# --- agreement with datatrove ------------------------------------------------------------------


def agreement_corpus(seed: int = 5) -> list[str]:
    """The real documents, then edited copies of some of them at spread similarities, then
    a few exact copies: word substitutions every `gap` words (small gap = dissimilar).

    Gap 30 puts a copy at J ~ 0.72 and gap 60 at J ~ 0.85, inside the region where 14 x 8 LSH
    decides by chance (``THRESHOLD_REGION``): 2/7 of the copies sit there on purpose, which is
    why the agreement tables also report agreement outside that region and across seeds."""
    rng = random.Random(seed)
    texts = real_texts()
    originals = [t for t in texts if len(t.split()) >= 100]
    vocabulary = sorted({w for t in originals[:100] for w in t.split() if w.isalpha()})
    copies = []
    for index, original in enumerate(rng.sample(originals, 300)):
        gap = [400, 200, 100, 60, 30, 10, 4][index % 7]
        words = original.split(" ")
        for start in range(0, len(words), gap):
            words[rng.randrange(start, min(start + gap, len(words)))] = rng.choice(vocabulary)
        copies.append(" ".join(words))
    exact = rng.sample(originals, 50)
    return texts + copies + exact


def tokenmill_removed(texts: list[str], settings: DedupSettings = DEFAULTS) -> set[int]:
    """The documents the dedup_signatures and dedup_clusters stages remove from a unit of one
    cleaned file holding ``texts``."""
    with tempfile.TemporaryDirectory() as scratch:
        lake = Lake.from_url(scratch)
        unit = Unit(CRAWL, unit_name(0))
        rows = [
            {"doc_id": f"{i:06d}", "crawl": CRAWL, "unit": unit.name, "part": 0, "text": t}
            for i, t in enumerate(texts)
        ]

        def write(out) -> None:
            out.parquet("docs.parquet", DOC_SCHEMA).write_table(
                pa.Table.from_pylist(rows, DOC_SCHEMA)
            )

        write_unit(lake, CLEANED, unit, [write])
        run_stage_work(stage_named(DEDUP_SIGNATURES), lake, settings, unit=unit, workers=1)
        run_stage_work(stage_named(DEDUP_CLUSTERS), lake, settings, crawl=CRAWL)
        clusters = f"{crawl_prefix(DEDUP_CLUSTERS, CRAWL)}/{CLUSTERS_FILE}"
        return {int(doc_id) for doc_id in read_column(lake, clusters, "doc_id").to_pylist()}


class _Documents:
    """The texts as datatrove Documents: a pipeline's first step (datatrove's JSONL reader needs
    orjson, which is not installed). Its short repr keeps datatrove's pipeline log readable."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def __call__(self, data=None, rank: int = 0, world_size: int = 1):
        from datatrove.data import Document

        for index, text in enumerate(self.texts):
            yield Document(text=text, id=str(index))

    def __repr__(self) -> str:
        return f"{len(self.texts)} documents"


def _record_ids(path: str, data, rank: int = 0, world_size: int = 1):
    with open(path, "w") as f:
        for document in data:
            f.write(document.id + "\n")
            yield document


@contextlib.contextmanager
def _quiet_stderr():
    """datatrove logs every step to stderr; silence it (its task logs stay in logging_dir)."""
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# How datatrove's signature step turns a text into a signature:
#   "datatrove": its own (simplify_text, spaCy words, sha1, Mersenne-prime permutations)
#   "datatrove words": its word n-grams, hashed and permuted as tokenmill does
#   "tokenmill shingles": tokenmill's word n-grams, hashed and permuted as tokenmill does
SIGNERS = ("datatrove", "datatrove words", "tokenmill shingles")


def _signature_step(signer: str, output_folder: str, config, settings: DedupSettings):
    """datatrove's MinhashDedupSignature, or a subclass whose signature of an n-gram list is
    datasketch's MinHash with tokenmill's shingle hash and permutation scheme (the permutations
    of ``MinHasher(seed=settings.seed, scheme=settings.scheme)``)."""
    from datasketch import MinHash
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

    if signer == "datatrove":
        return MinhashDedupSignature(output_folder=output_folder, config=config)
    hasher = MinHasher(config.num_buckets * config.hashes_per_bucket, config.n_grams,
                       settings.seed, settings.scheme)  # fmt: skip
    template = MinHash(hasher.num_perm, seed=hasher.seed, scheme=hasher.scheme,
                       hashfunc=hasher.hashfunc)  # fmt: skip

    class TokenmillHashedSignature(MinhashDedupSignature):
        def get_shingles(self, text: str) -> np.ndarray:
            if signer == "datatrove words":
                grams = [" ".join(gram) for gram in self._datatrove_ngrams(text)]
            else:
                grams = shingles(text, config.n_grams, settings.text_norm())
            return np.array([gram.encode() for gram in grams], dtype=object)

        def _datatrove_ngrams(self, text: str):
            from datatrove.utils.text import ngrams, simplify_text

            words = self.word_tokenizer.word_tokenize(simplify_text(text, config.norm_config))
            return ngrams(words, config.n_grams)

        def get_signature(self, grams: np.ndarray) -> list[list[int]]:
            minhash = template.copy()
            minhash.clear()
            minhash.update_batch(list(grams))
            # datatrove's bucket step stops reading a sorted signature file at the first value
            # >= 2**61 - 1 (its Mersenne prime); shifting 64-bit values right by 3 keeps them
            # below it and merges only values equal in their top 61 bits (chance 2**-61).
            values = minhash.hashvalues.astype(np.uint64) >> np.uint64(3)
            return [part.tolist() for part in np.split(values, config.num_buckets)]

    return TokenmillHashedSignature(output_folder=output_folder, config=config)


def datatrove_removed(
    texts: list[str], signer: str = "datatrove", settings: DedupSettings = DEFAULTS
) -> tuple[set[int], dict[int, int]]:
    """datatrove's four MinHash steps with FineWeb's parameters (seed ``settings.seed``) on a
    local folder. Returns the removed documents and the cluster of every document in a
    cluster."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
    )

    config = datatrove_config(settings.seed)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        source = _Documents(texts)
        kept_path = str(root / "kept.txt")
        steps = [
            [source, _signature_step(signer, str(root / "sigs"), config, settings)],
            [MinhashDedupBuckets(str(root / "sigs"), str(root / "buckets"), config=config)],
            [
                MinhashDedupCluster(
                    str(root / "buckets"), str(root / "remove"), config=config, save_cluster_id=True
                )
            ],
            [
                source,
                MinhashDedupFilter(str(root / "remove")),
                functools.partial(_record_ids, kept_path),
            ],
        ]
        tasks = [1, config.num_buckets, 1, 1]
        with _quiet_stderr():
            for index, (pipeline, task_count) in enumerate(zip(steps, tasks, strict=True)):
                LocalPipelineExecutor(
                    pipeline=pipeline,
                    tasks=task_count,
                    workers=1,
                    logging_dir=str(root / f"logs{index}"),
                    skip_completed=False,
                ).run()
        kept = {int(line) for line in Path(kept_path).read_text().split()}
        clusters = root / "remove" / "000000.clusters"
        members = np.fromfile(clusters, dtype="<u4").reshape(-1, 2) if clusters.exists() else []
        return set(range(len(texts))) - kept, dict(np.asarray(members).tolist())


def first_seen_removals(cluster_of: dict[int, int]) -> set[int]:
    """The members of each cluster except its first (lowest-index) document."""
    first: dict[int, int] = {}
    for doc, cluster_id in sorted(cluster_of.items()):
        first.setdefault(cluster_id, doc)
    return set(cluster_of) - set(first.values())


def max_jaccards(shingle_sets: list[set[str]]) -> np.ndarray:
    """Per document, its highest shingle-set Jaccard to any other document (via an inverted
    index: only documents sharing a shingle are compared)."""
    postings: dict[str, list[int]] = {}
    for doc, grams in enumerate(shingle_sets):
        for gram in grams:
            postings.setdefault(gram, []).append(doc)
    best = np.zeros(len(shingle_sets))
    for doc, grams in enumerate(shingle_sets):
        shared: dict[int, int] = {}
        for gram in grams:
            for other in postings[gram]:
                shared[other] = shared.get(other, 0) + 1
        shared.pop(doc, None)
        for other, count in shared.items():
            union = len(grams) + len(shingle_sets[other]) - count
            best[doc] = max(best[doc], count / union)
    return best


def datatrove_shingle_sets(texts: list[str]) -> list[set[str]]:
    """datatrove's word 5-grams (simplify_text, then its English word tokenizer)."""
    from datatrove.utils.text import ngrams, simplify_text
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    tokenizer = load_word_tokenizer("en")
    return [
        {" ".join(gram) for gram in ngrams(tokenizer.word_tokenize(simplify_text(text)), 5)}
        for text in texts
    ]


def threshold_region(bands: int, rows: int, low: float = 0.01, high: float = 0.99):
    """The Jaccard range in which LSH with ``bands`` x ``rows`` merges a pair with probability
    between ``low`` and ``high`` (P(J) = 1 - (1 - J**rows)**bands): there, two tools (or two
    seeds of one tool) with different permutations decide a pair differently by chance."""

    def inverse(probability: float) -> float:
        return (1 - (1 - probability) ** (1 / bands)) ** (1 / rows)

    return round(inverse(low), 3), round(inverse(high), 3)


THRESHOLD_REGION = threshold_region(*DEFAULTS.banding())  # (0.405, 0.853) for 14 x 8


class _Corpus:
    """The agreement corpus with, per document, its normalized word count and its highest
    Jaccard to another document under tokenmill's and under datatrove's 5-grams."""

    def __init__(self) -> None:
        self.texts = agreement_corpus()
        self.words = [len(normalize(t).split()) for t in self.texts]
        self.jaccard = max_jaccards([set(shingles(t)) for t in self.texts])
        self.datatrove_jaccard = max_jaccards(datatrove_shingle_sets(self.texts))
        low, high = THRESHOLD_REGION
        self.near_threshold = {doc for doc, j in enumerate(self.jaccard) if low <= j < high}

    def cause(self, doc: int) -> str:
        """Why the two tools may decide this document differently."""
        low, high = THRESHOLD_REGION
        if 0 < self.words[doc] < 5:
            return "fewer than 5 words (datatrove: no signature)"
        if abs(self.jaccard[doc] - self.datatrove_jaccard[doc]) > 0.05:
            return "n-grams differ: |J tokenmill - J datatrove| > 0.05"
        if self.jaccard[doc] < low:
            return f"J < {low}"
        if self.jaccard[doc] < high:
            return f"{low} <= J < {high} (threshold region: LSH merges with P 1-99 %)"
        return f"J >= {high}"

    def row(self, ours: set[int], theirs: set[int]) -> list:
        disagree = ours ^ theirs
        away = len(self.texts) - len(self.near_threshold)
        away_disagree = len(disagree - self.near_threshold)
        return [len(ours), len(theirs), len(ours & theirs), len(disagree),
                f"{1 - len(disagree) / len(self.texts):.2%}", away_disagree,
                f"{1 - away_disagree / away:.2%}"]  # fmt: skip


ROW_HEADER = ["removed by tokenmill", "removed by datatrove", "both", "disagree", "agreement",
              "disagree, J outside threshold region", "agreement there"]  # fmt: skip
SEED_HEADER = ["removed by first", "removed by second", *ROW_HEADER[2:]]


def _ours(texts: list[str], **settings) -> set[int]:
    return in_fresh_process(functools.partial(tokenmill_removed, texts, DedupSettings(**settings)))[
        0
    ]


def _theirs(texts: list[str], signer: str = "datatrove", **settings):
    return in_fresh_process(
        functools.partial(datatrove_removed, texts, signer, DedupSettings(**settings))
    )[0]


# tokenmill's settings for datatrove's MinhashConfig(HashConfig(64, "sha1")) and behaviour.
DATATROVE_PARAMS = {"scheme": "datatrove", "short_docs": "keep"}


def bench_agreement(seeds: int) -> None:
    if shared_path(*CORPUS) is None:
        print("agreement: skipped, ../shared/corpora/text is absent")
        return
    corpus = _Corpus()
    texts = corpus.texts
    stock, stock_clusters = _theirs(texts)
    plain = {"norm_numbers": False, "norm_diacritics": False}
    ladder = [
        ("plain norm (before), short: exact", plain, "datatrove", (stock, stock_clusters)),
        ("FineWeb norm (default), short: exact", {}, "datatrove", (stock, stock_clusters)),
        ("FineWeb norm, short: keep", {"short_docs": "keep"}, "datatrove",
         (stock, stock_clusters)),
        ("scheme datatrove, short: exact", {"scheme": "datatrove"}, "datatrove",
         (stock, stock_clusters)),
        ("scheme datatrove, short: keep (datatrove's parameters)", DATATROVE_PARAMS, "datatrove",
         (stock, stock_clusters)),
        ("FineWeb norm, short: keep", {"short_docs": "keep"}, "datatrove words", None),
        ("FineWeb norm, short: exact", {}, "tokenmill shingles", None),
        ("plain norm, short: exact", plain, "tokenmill shingles", None),
    ]  # fmt: skip
    rows, explained = [], {}
    for label, settings, signer, reference in ladder:
        ours = _ours(texts, **settings)
        theirs, their_clusters = reference or _theirs(texts, signer, **settings)
        first_seen = len(ours ^ first_seen_removals(their_clusters))
        rows.append([label, signer, *corpus.row(ours, theirs), first_seen])
        if signer == "datatrove" and settings in ({}, DATATROVE_PARAMS):
            explained["defaults" if settings == {} else "scheme datatrove, short: keep"] = (
                ours ^ theirs
            )
    print_table(
        f"Removed documents: tokenmill vs datatrove MinhashDedup (5-grams, 14 x 8, seed 1), "
        f"{len(texts)} docs = 697 real + 300 edited copies + 50 exact copies. datatrove "
        "signature step: 'datatrove' = its own (simplify_text, spaCy words, sha1, its "
        "permutations); 'datatrove words' = its word 5-grams with tokenmill's shingle hash and "
        "permutations; 'tokenmill shingles' = tokenmill's 5-grams, hash and permutations (only "
        f"datatrove's buckets/clusters/filter differ). Threshold region: {THRESHOLD_REGION[0]} "
        f"<= J < {THRESHOLD_REGION[1]} (J: a doc's highest 5-gram Jaccard to another doc), "
        f"{len(corpus.near_threshold)} docs",
        ["tokenmill settings", "datatrove signature step", *ROW_HEADER,
         "disagree, datatrove clusters + first-seen survivor"],
        rows,
    )  # fmt: skip
    for settings_label, disagree in explained.items():
        explain_disagreements(corpus, settings_label, sorted(disagree))
    compare_seeds(corpus, seeds)


def compare_seeds(corpus: _Corpus, seeds: int) -> None:
    """Tool vs tool at the same seed, next to each tool against itself at another seed: if
    the former is no larger, the tools differ only by their random permutations."""
    texts = corpus.texts
    ours = {s: _ours(texts, seed=s, short_docs="keep") for s in range(1, seeds + 1)}
    compatible = {s: _ours(texts, seed=s, **DATATROVE_PARAMS) for s in range(1, seeds + 1)}
    theirs = {s: _theirs(texts, seed=s)[0] for s in range(1, seeds + 1)}
    others = range(2, seeds + 1)
    groups = {
        "tokenmill (scheme datatrove) vs datatrove, same seed": [
            (f"tokenmill (datatrove) {s} vs datatrove {s}", compatible[s], theirs[s])
            for s in compatible
        ],
        "tokenmill vs datatrove, same seed": [
            (f"tokenmill {s} vs datatrove {s}", ours[s], theirs[s]) for s in ours
        ],
        "tokenmill vs itself, other seed": [
            (f"tokenmill {s} vs tokenmill 1", ours[s], ours[1]) for s in others
        ],
        "datatrove vs itself, other seed": [
            (f"datatrove {s} vs datatrove 1", theirs[s], theirs[1]) for s in others
        ],
    }
    print_table(
        "Removed documents across permutation seeds (tokenmill: FineWeb norm, short: keep, "
        "scheme affine64 unless said; datatrove: its own signature step)",
        ["comparison", *SEED_HEADER],
        [[name, *corpus.row(a, b)] for pairs in groups.values() for name, a, b in pairs],
    )
    summary = []
    for kind, pairs in groups.items():
        agreement = [1 - len(a ^ b) / len(texts) for _, a, b in pairs]
        summary.append([kind, len(pairs), f"{np.mean(agreement):.2%}",
                        f"{min(agreement):.2%}", f"{max(agreement):.2%}"])  # fmt: skip
    print_table("Agreement across seeds, summary", ["comparison", "runs", "mean", "min", "max"],
                summary)  # fmt: skip


def explain_disagreements(corpus: _Corpus, settings_label: str, disagree: list[int]) -> None:
    """Each disagreeing document by its cause (``_Corpus.cause``)."""
    kinds: dict[str, int] = {}
    for doc in disagree:
        kinds[corpus.cause(doc)] = kinds.get(corpus.cause(doc), 0) + 1
    print_table(
        f"Disagreements of tokenmill ({settings_label}) vs datatrove (its own signature step), "
        "by the document's highest 5-gram Jaccard J to another document",
        ["cause", "documents"],
        sorted(kinds.items()),
    )


# --- clustering at scale ----------------------------------------------------------------------

UNITS, FILES_PER_UNIT = 2, 4


def synthetic_crawl(root: str, n_docs: int, seed: int = 0) -> None:
    """Signature files of a crawl of `n_docs` documents in UNITS units of FILES_PER_UNIT files:
    3 % exact copies of an earlier document and 10 % near copies sharing each band with
    probability 0.6."""
    rng = np.random.default_rng(seed)
    bands = DedupSettings().banding()[0]
    exact = rng.integers(0, 2**63, n_docs, dtype=np.uint64)
    copies = rng.random(n_docs)
    is_exact, is_near = copies < 0.03, (copies >= 0.03) & (copies < 0.13)
    source = (rng.random(n_docs) * np.arange(n_docs)).astype(np.int64)  # an earlier doc
    exact[is_exact] = exact[source[is_exact]]
    columns = {"exact_hash": exact}
    for band in range(bands):
        keys = rng.integers(0, 2**63, n_docs, dtype=np.uint64)
        shared = is_exact | (is_near & (rng.random(n_docs) < 0.6))
        keys[shared] = keys[source[shared]]  # sources precede copies, so chains resolve
        columns[band_column(band)] = keys
    lake = Lake.from_url(root)

    def write_file(docs: np.ndarray, out) -> None:
        sink = out.parquet("signatures.parquet", signature_schema(bands))
        for chunk in np.array_split(docs, max(len(docs) // 500_000, 1)):
            table = {
                "doc_id": [f"{i:016x}" for i in chunk.tolist()],
                "warc_date": pa.nulls(len(chunk), pa.string()),
                "quality_score": np.zeros(len(chunk)),
            } | {name: values[chunk] for name, values in columns.items()}
            sink.write_table(pa.table(table))
        out.report.records_in = out.report.records_out = len(docs)

    files = np.array_split(np.arange(n_docs), UNITS * FILES_PER_UNIT)
    params = {"params": DedupSettings().signature_params()}
    for index in range(UNITS):
        mine = files[index * FILES_PER_UNIT : (index + 1) * FILES_PER_UNIT]
        parts = [functools.partial(write_file, docs) for docs in mine]
        write_unit(lake, DEDUP_SIGNATURES, Unit(CRAWL, unit_name(index)), parts, params)


def cluster_crawl(root: str, survivor: str) -> dict:
    settings = DedupSettings(survivor=survivor)
    report = run_stage_work(stage_named(DEDUP_CLUSTERS), Lake.from_url(root), settings, crawl=CRAWL)
    return dict(report.dropped)


def bench_clusters(sizes: list[int]) -> None:
    rows = []
    for n_docs in sizes:
        with tempfile.TemporaryDirectory() as root:
            _, write_seconds, _ = in_fresh_process(functools.partial(synthetic_crawl, root, n_docs))
            for survivor in ("first_seen", "lowest_doc_id"):
                dropped, seconds, peak = in_fresh_process(
                    functools.partial(cluster_crawl, root, survivor)
                )
                rows.append(
                    [n_docs, survivor, round(seconds, 1), round(peak / 2**20),
                     round(peak / n_docs), dropped.get("exact_duplicate", 0),
                     dropped.get("near_duplicate", 0), round(write_seconds, 1)]
                )  # fmt: skip
                print_table(
                    f"dedup_clusters stage on synthetic signatures ({UNITS} units of "
                    f"{FILES_PER_UNIT} files, 14 bands, 3 % exact + 10 % near copies)",
                    ["docs", "survivor", "seconds", "peak RSS MiB", "bytes/doc", "exact removed",
                     "near removed", "(writing input s)"],
                    rows,
                )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "parts", nargs="*", default=["signatures", "agreement", "clusters"],
        choices=["signatures", "agreement", "clusters"],
    )  # fmt: skip
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[250_000, 1_000_000, 2_000_000, 4_000_000]
    )
    parser.add_argument("--seeds", type=int, default=5, help="permutation seeds to compare")
    args = parser.parse_args()
    real = f"../shared/{'/'.join(CORPUS)} (697 real documents)"
    inputs = {
        "signatures": real,
        "agreement": f"{real}, 300 edited and 50 exact copies of them",
        "clusters": "synthetic signatures of "
        + ", ".join(f"{size:,}" for size in args.sizes)
        + " documents",
    }
    if "signatures" in args.parts:
        bench_signatures()
    if "agreement" in args.parts:
        bench_agreement(args.seeds)
    if "clusters" in args.parts:
        bench_clusters(args.sizes)
    ran = [part for part in inputs if part in args.parts]
    name = " ".join(["bench_dedup", *([] if len(ran) == len(inputs) else ran)])
    record(name, TABLES, {part: inputs[part] for part in ran})


if __name__ == "__main__":
    main()
