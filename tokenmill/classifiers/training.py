"""Quality classifiers trained from a lab's own examples: fastText on bigrams, as DCLM's.

Positives are the lab's documents (a text file with one document per line, JSONL with a
``text`` field, or Parquet with a ``text`` column); negatives are a deterministic sample of the
extracted crawl: the documents whose seeded hash of their id is smallest, so the sample depends
on the seed and the documents only, never on the order files are read, and holds at most
``negatives`` documents in memory. A seeded hash of each text puts a tenth of both aside; the
model is trained on the rest (one thread, the seed: the same inputs give the same model bytes)
and judged on them. The model and its card (inputs' hashes and sizes, settings, held-out
precision and recall) are written to ``classifiers/<name>/`` in the lake. A caller may follow
the phases (`TRAINING_PHASES`) through a callback, with the documents each has handled.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import heapq
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import xxhash

from tokenmill.classifiers.scoring import FastTextScorer, one_line
from tokenmill.classifiers.settings import SMALL_DATA, SMALL_DATA_EXAMPLES, TrainingSettings
from tokenmill.crawl.units import registered_crawls, registered_units
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import EXTRACTED, check_name
from tokenmill.storage.outputs import part_files, read_batches

CLASSIFIERS = "classifiers"
POSITIVE, NEGATIVE = "__label__hq", "__label__cc"
HELD_OUT_SHARE = 0.1
# held-out figures under this are worth a warning: the classifier would keep or drop by chance
FIGURE_FLOOR = 0.7
POSITIVES, NEGATIVES, TRAINING, JUDGING = "positives", "negatives", "training", "judging"
TRAINING_PHASES = (POSITIVES, NEGATIVES, TRAINING, JUDGING)


def chosen_settings(
    examples: int, given: Mapping[str, Any] | None = None
) -> tuple[TrainingSettings, str]:
    """The settings to train on ``examples`` documents: fastText's defaults, or the small-data
    settings below ``SMALL_DATA_EXAMPLES``, with the fields in ``given`` (set by the user) as
    given; and why, in words."""
    given = given or {}
    unknown = sorted(set(given) - {f.name for f in fields(TrainingSettings)})
    if unknown:
        raise ValueError(f"unknown training settings {unknown}")
    small = examples < SMALL_DATA_EXAMPLES
    base = SMALL_DATA if small else TrainingSettings()
    settings = TrainingSettings(**(asdict(base) | dict(given)))
    defaults = asdict(TrainingSettings())
    tuned = [f for f, v in asdict(SMALL_DATA).items() if v != defaults[f] and f not in given]
    if small and tuned:
        why = (
            f"small-data settings for {examples:,} examples (fewer than {SMALL_DATA_EXAMPLES:,}):"
            f" {_listed(settings, tuned)}; fastText's defaults learn little from so few, in a "
            f"model of {_model_mb(TrainingSettings()):,.0f} MB"
        )
    elif small:
        why = f"{examples:,} examples"
    else:
        why = f"fastText's defaults for {examples:,} examples ({SMALL_DATA_EXAMPLES:,} or more)"
    if given:
        why += f"; set: {_listed(settings, [f for f in defaults if f in given])}"
    return settings, why


def _listed(settings: TrainingSettings, names: list[str]) -> str:
    return ", ".join(f"{name} {getattr(settings, name)}" for name in names)


def _model_mb(settings: TrainingSettings) -> float:
    return settings.bucket * settings.dim * 4 / 1e6  # float32 bigram buckets dominate


def weak_figures(held: dict, floor: float = FIGURE_FLOOR) -> list[str]:
    """What is wrong with held-out ``precision`` and ``recall`` under ``floor`` (or missing),
    and what to try; empty when both reach it."""
    if not held.get("documents"):
        return ["no document was held out to judge the classifier: give more examples"]
    meaning = {
        "precision": "many documents it scores good are not",
        "recall": "it scores many good documents low",
    }
    low = [
        f"{name} {held[name] if held[name] is not None else 'none'} ({meaning[name]})"
        for name in meaning
        if held[name] is None or held[name] < floor
    ]
    if not low:
        return []
    return [
        f"held-out {' and '.join(low)}, under {floor} on {held['documents']} documents: give "
        "more positives and negatives (--negatives N, or --negatives-from a file of bad "
        "pages), or try other --epoch, --lr, --dim"
    ]


@dataclass(frozen=True)
class TrainingProgress:
    """A phase of `train_classifier` (one of `TRAINING_PHASES`) under way or finished, with the
    documents it has read, trains on or judges (the negatives sampled from the crawl: the
    crawl's documents read so far, then the sample)."""

    phase: str
    documents: int
    finished: bool = False


class ClassifierInputError(ValueError):
    """Positives or negatives that cannot train a classifier: the message names the input."""


def example_texts(path: Path, what: str = "positives") -> list[str]:
    """The documents of an examples file: .txt (one per line), .jsonl[.gz] or .parquet."""
    if not path.is_file():
        raise ClassifierInputError(f"{what} file {path} does not exist")
    name = path.name.lower()
    try:
        if name.endswith(".parquet"):
            table = pq.read_table(path)
            if "text" not in table.column_names:
                raise ClassifierInputError(f"{what} file {path} has no 'text' column")
            texts = table.column("text").to_pylist()
        elif name.endswith((".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as lines:
                texts = [json.loads(line).get("text") for line in lines if line.strip()]
        elif name.endswith((".txt", ".txt.gz")):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as lines:
                texts = lines.read().splitlines()
        else:
            raise ClassifierInputError(
                f"{what} file {path}: expected .txt, .jsonl[.gz] or .parquet"
            )
    except (OSError, ValueError, UnicodeDecodeError) as error:
        if isinstance(error, ClassifierInputError):
            raise
        raise ClassifierInputError(f"{what} file {path} is unreadable: {error}") from error
    texts = [one_line(t) for t in texts if isinstance(t, str)]
    texts = [t for t in texts if t]
    if not texts:
        raise ClassifierInputError(f"{what} file {path} holds no document with text")
    return texts


def sample_negatives(
    lake: Lake,
    crawls: list[str],
    count: int,
    seed: int,
    read: Callable[[int], None] | None = None,
) -> list[str]:
    """The ``count`` extracted documents of ``crawls`` whose seeded hash of their id is the
    smallest (a deterministic sample), as one-line texts; ``read(documents)`` after each batch
    says how many it has read so far."""
    heap: list[tuple[int, str, str]] = []  # (-hash, doc id, text): the largest on top
    documents = 0
    for crawl in crawls:
        for unit in registered_units(lake, crawl):
            for key in part_files(lake, unit, EXTRACTED):
                for batch in read_batches(lake, key, ["doc_id", "text"]):
                    documents += batch.num_rows
                    if read:
                        read(documents)
                    for doc_id, text in zip(*batch.to_pydict().values(), strict=True):
                        if not text:
                            continue
                        rank = xxhash.xxh3_64_intdigest(doc_id.encode(), seed=seed)
                        if len(heap) < count:
                            heapq.heappush(heap, (-rank, doc_id, one_line(text)))
                        elif -heap[0][0] > rank:
                            heapq.heapreplace(heap, (-rank, doc_id, one_line(text)))
    return [text for _, _, text in sorted(heap, key=lambda entry: (-entry[0], entry[1]))]


def held_out(text: str, seed: int) -> bool:
    return xxhash.xxh3_64_intdigest(text.encode(), seed=seed + 1) % 1000 < HELD_OUT_SHARE * 1000


def train_classifier(
    lake: Lake,
    name: str,
    positives: Path,
    crawls: list[str] | None = None,
    negatives: int | None = None,
    settings: TrainingSettings | Mapping[str, Any] | None = None,
    negatives_file: Path | None = None,
    progress: Callable[[TrainingProgress], None] | None = None,
    origin: Mapping[str, str] | None = None,
) -> dict:
    """Train, judge and store a classifier; returns its card. Negatives are a sample of the
    crawls' extracted documents, or the documents of ``negatives_file`` (e.g. pages labelled
    bad). ``settings`` are used as they are; as a mapping of the fields a user set (or None),
    the rest is chosen by the number of examples (`chosen_settings`); the card says which and why,
    and its ``warnings`` name held-out figures under ``FIGURE_FLOOR``. Fails before writing
    anything when an input is unusable, naming it. ``progress`` is called as each phase starts
    and finishes, and as the crawl's documents are read. ``origin`` names the example files on
    the card in place of their paths, by role (``positives``, ``negatives``): for files a caller
    made in a scratch folder, whose path says nothing and changes from run to run."""
    import fasttext

    def report(phase: str, documents: int, finished: bool = False) -> None:
        if progress:
            progress(TrainingProgress(phase, documents, finished))

    check_name(name, "classifier name")
    given = asdict(settings) if isinstance(settings, TrainingSettings) else settings or {}
    seed = given.get("seed", TrainingSettings.seed)
    report(POSITIVES, 0)
    good = example_texts(positives)
    report(POSITIVES, len(good), finished=True)
    report(NEGATIVES, 0)
    if negatives_file is not None:
        bad = example_texts(negatives_file, "negatives")
        drawn = {
            "file": (origin or {}).get(NEGATIVES, str(negatives_file)),
            "sha256": hashlib.sha256(negatives_file.read_bytes()).hexdigest(),
        }
    else:
        crawls = crawls or registered_crawls(lake)
        unknown = sorted(set(crawls) - set(registered_crawls(lake)))
        if unknown:
            raise ClassifierInputError(f"crawl(s) {unknown} are not registered in {lake.url}")
        read = functools.partial(report, NEGATIVES)
        bad = sample_negatives(lake, crawls, negatives or len(good), seed, read)
        if not bad:
            raise ClassifierInputError(f"no extracted document in crawl(s) {crawls} to sample from")
        drawn = {"crawls": crawls, "sample_sha256": _digest(bad)}
    examples = [(POSITIVE, t) for t in good] + [(NEGATIVE, t) for t in bad]
    settings, why = chosen_settings(len(examples), given)
    train = [e for e in examples if not held_out(e[1], settings.seed)]
    test = [e for e in examples if held_out(e[1], settings.seed)]
    if {label for label, _ in train} != {POSITIVE, NEGATIVE}:
        raise ClassifierInputError("too few documents: a class has none left to train on")
    report(NEGATIVES, len(bad), finished=True)
    report(TRAINING, len(train))
    with tempfile.TemporaryDirectory() as scratch:
        train_file = os.path.join(scratch, "train.txt")
        with open(train_file, "w", encoding="utf-8") as out:
            out.writelines(f"{label} {text}\n" for label, text in train)
        model = fasttext.train_supervised(
            train_file,
            wordNgrams=settings.word_ngrams,
            dim=settings.dim,
            epoch=settings.epoch,
            lr=settings.lr,
            minCount=settings.min_count,
            bucket=settings.bucket,
            seed=settings.seed,
            thread=1,  # more threads train faster, but not reproducibly
            verbose=0,
        )
        model_file = os.path.join(scratch, "model.bin")
        model.save_model(model_file)
        data = Path(model_file).read_bytes()
    report(TRAINING, len(train), finished=True)
    report(JUDGING, len(test))
    card = {
        "name": name,
        "labels": {"positive": POSITIVE, "negative": NEGATIVE},
        "settings": asdict(settings),
        "settings_chosen": why,
        "positives": {
            "file": (origin or {}).get(POSITIVES, str(positives)),
            "sha256": hashlib.sha256(positives.read_bytes()).hexdigest(),
            "documents": len(good),
        },
        "negatives": drawn | {"documents": len(bad)},
        "trained_on": len(train),
        "held_out": {"documents": len(test), **judged(model, test)},
        "model_sha256": hashlib.sha256(data).hexdigest(),
        "model_bytes": len(data),
    }
    card["warnings"] = weak_figures(card["held_out"])
    lake.write_bytes(f"{CLASSIFIERS}/{name}/model.bin", data)
    lake.write_json(f"{CLASSIFIERS}/{name}/card.json", card)
    report(JUDGING, len(test), finished=True)
    return card


def judged(model, examples: list[tuple[str, str]]) -> dict:
    """Precision and recall of the positive label on ``examples`` (a score of 0.5 or more)."""
    if not examples:
        return {"precision": None, "recall": None}
    found = [score >= 0.5 for score in positive_scores(model, [text for _, text in examples])]
    truth = [label == POSITIVE for label, _ in examples]
    hits = sum(f and t for f, t in zip(found, truth, strict=True))
    return {
        "precision": round(hits / sum(found), 4) if any(found) else None,
        "recall": round(hits / sum(truth), 4) if any(truth) else None,
    }


def positive_scores(model, texts: list[str]) -> list[float | None]:
    """The positive label's probability for each text (None for a blank one)."""
    return FastTextScorer(model, "", [POSITIVE], "the model")(texts)[POSITIVE]


def _digest(texts: list[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\n")
    return digest.hexdigest()
