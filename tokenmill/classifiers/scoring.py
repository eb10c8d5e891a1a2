"""Model scores of documents: the classifiers a deployment declares, loaded offline, scoring
text in batches, and the distribution of each score on a fine logit scale, from which a crawl's
top-share threshold is read.

A classifier is a fastText supervised model (``.bin`` or ``.ftz``: a lake key, or a path or URI
under a prefix in ``TOKENMILL_CLASSIFIER_PATHS``) or a plug-in scorer: a class from the allowed
filter modules (``TOKENMILL_FILTER_MODULES``) whose instances have ``labels``, ``version`` and
``__call__(texts) -> {label: [probability or None, ...]}``. A scorer's ``version`` (a fastText
model's SHA-256) is what its stored scores depend on.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import math
import os
import shutil
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import polars as pl
import xxhash

from tokenmill.runtime.plugins import load_scorer_class
from tokenmill.runtime.stage import declared_mapping
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import check_name
from tokenmill.storage.locations import check_location, open_location

CLASSIFIER_PATHS_ENV = "TOKENMILL_CLASSIFIER_PATHS"
FASTTEXT_MAGIC = 793712314  # the int32 every fastText model file starts with
LABEL_PREFIX = "__label__"
# Score histograms count documents per 1/BINS_PER_LOGIT of log(p / (1 - p)), within
# +-LOGIT_LIMIT: fine at both ends, where fastText's probabilities crowd (0.0001, 0.9999).
BINS_PER_LOGIT = 128
LOGIT_LIMIT = 16.0
READ_CHUNK = 8 << 20
TIE_SEED = 0x70CE


class ClassifierError(ValueError):
    """A classifier that cannot score: the message names its file and the reason."""


class Scorer(Protocol):
    labels: list[str]
    version: str

    def __call__(self, texts: Sequence[str]) -> dict[str, list[float | None]]: ...


@dataclass(frozen=True)
class Classifier:
    """A declared classifier: a fastText ``model``, or a plug-in ``scorer`` with ``params``;
    ``labels`` to store (default: every label of the model)."""

    name: str
    model: str | None = None
    scorer: str | None = None
    labels: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    # The model's SHA-256, pinned: the run refuses another file, and changing the pin makes
    # the scores stale in Dagster (a model replaced under an unpinned name is seen by runs only).
    sha256: str | None = None

    KEYS = ("name", "model", "scorer", "labels", "params", "sha256")

    @classmethod
    def parse(cls, value: Any, where: str) -> Classifier:
        if isinstance(value, Classifier):
            return value
        value = declared_mapping(value, cls.KEYS, where, "with name and model")
        name = value.get("name")
        try:
            check_name(name, "classifier name")
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if bool(value.get("model")) == bool(value.get("scorer")):
            raise ValueError(f"{where} ({name}): give either model (a fastText file) or scorer")
        labels = value.get("labels") or []
        if isinstance(labels, str):
            labels = [labels]
        if not all(isinstance(label, str) and label for label in labels):
            raise ValueError(f"{where} ({name}): labels must be a list of label names")
        return cls(
            name=name,
            model=value.get("model"),
            scorer=value.get("scorer"),
            labels=tuple(full_label(label) for label in labels),
            params=dict(value.get("params") or {}),
            sha256=value.get("sha256") or None,
        )


def one_line(text: str) -> str:
    """A document as fastText reads an example: one line, whitespace runs as single spaces
    (str.split's whitespace is regex \\s's: the same text, 2.6x faster)."""
    return " ".join(text.split())


def full_label(label: str) -> str:
    return label if label.startswith(LABEL_PREFIX) else LABEL_PREFIX + label


def short_label(label: str) -> str:
    return label.removeprefix(LABEL_PREFIX)


def score_column(classifier: str, label: str) -> str:
    """The column of a label's score where documents carry it (`<classifier>.<label>`)."""
    return f"{classifier}.{short_label(label)}"


def model_location(lake: Lake, model: str) -> tuple[bool, str]:
    """(in the lake, key or checked location) of a declared model: a relative path is a lake
    key; anything else must be under the lake or an allowed prefix."""
    if "://" not in model and not model.startswith("/"):
        return True, model
    return False, check_location(lake, model, CLASSIFIER_PATHS_ENV, "classifier")


def model_file(lake: Lake, classifier: Classifier) -> tuple[str, str]:
    """A local path of a declared fastText model (the file itself, or a copy of a remote one
    kept per SHA-256 in the temporary directory) and its SHA-256, checking it is a fastText
    model and, if pinned, the pinned one."""
    in_lake, where = model_location(lake, classifier.model)
    try:
        if in_lake and lake.is_local:
            path = lake.path(where)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"no such file in the lake {lake.url}")
        elif not in_lake and "://" not in where:
            path = where
        else:
            path = _local_copy(lake, in_lake, where)
        stat = os.stat(path)
        digest = _digest(path, stat.st_size, stat.st_mtime_ns)
    except OSError as error:
        raise ClassifierError(
            f"classifier {classifier.name}: model {classifier.model!r} cannot be read: {error}"
        ) from None
    with open(path, "rb") as f:
        head = f.read(8)
    if len(head) < 8 or struct.unpack("<i", head[:4])[0] != FASTTEXT_MAGIC:
        raise ClassifierError(
            f"classifier {classifier.name}: model {classifier.model!r} is not a fastText model "
            "(it does not start with fastText's magic number)"
        )
    if classifier.sha256 and classifier.sha256 != digest:
        raise ClassifierError(
            f"classifier {classifier.name}: model {classifier.model!r} has SHA-256 {digest}, "
            f"not the pinned {classifier.sha256}"
        )
    return path, digest


@functools.lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@functools.lru_cache(maxsize=4)
def _local_copy(lake: Lake, in_lake: bool, where: str) -> str:
    """A remote model copied to local disk once per process (fastText reads a local file): a
    copy shared between processes could be one of a model replaced since."""
    opened = (
        lake.open_stream(where)
        if in_lake
        else open_location(lake, where, CLASSIFIER_PATHS_ENV, "classifier")
    )
    handle, path = tempfile.mkstemp(prefix="tokenmill-model-", suffix=".bin")
    atexit.register(_remove, path)
    with opened as source, os.fdopen(handle, "wb") as copy:
        shutil.copyfileobj(source, copy, READ_CHUNK)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


class FastTextScorer:
    """A fastText supervised model's probabilities of ``labels`` (one call per batch)."""

    def __init__(self, model, version: str, labels: Sequence[str], source: str):
        self.model = model
        self.version = version
        known = [str(label) for label in model.get_labels()]
        missing = [label for label in labels if label not in known]
        if missing:
            raise ClassifierError(
                f"model {source!r} has no label {', '.join(missing)}; its labels: {known}"
            )
        self.labels = list(labels) or known

    def __call__(self, texts: Sequence[str]) -> dict[str, list[float | None]]:
        lines = [one_line(text or "") for text in texts]
        scored = [index for index, line in enumerate(lines) if line]
        result: dict[str, list[float | None]] = {x: [None] * len(lines) for x in self.labels}
        if scored:
            names, probabilities = self.model.predict([lines[i] for i in scored], k=-1)
            for index, labels, values in zip(scored, names, probabilities, strict=True):
                found = dict(zip(labels, values, strict=True))
                for label in self.labels:
                    result[label][index] = min(float(found.get(label, 0.0)), 1.0)
        return result


def load_scorer(lake: Lake, classifier: Classifier) -> Scorer:
    """A declared classifier, ready to score; fails naming its file and the reason."""
    if classifier.scorer:
        scorer = load_scorer_class(classifier.scorer, classifier.params)
        missing = [label for label in classifier.labels if label not in scorer.labels]
        if missing:
            raise ClassifierError(
                f"scorer {classifier.scorer} has no label {', '.join(missing)}; "
                f"its labels: {list(scorer.labels)}"
            )
        return scorer
    path, digest = model_file(lake, classifier)
    model = _fasttext_model(path, digest)
    return FastTextScorer(model, digest, classifier.labels, classifier.model)


@functools.lru_cache(maxsize=4)
def _fasttext_model(path: str, digest: str):
    import fasttext

    try:
        return fasttext.load_model(path)
    except (ValueError, RuntimeError, MemoryError) as error:
        raise ClassifierError(f"model {path!r} cannot be loaded by fastText: {error}") from None


# -- distributions ---------------------------------------------------------------------------


def score_bins(probabilities) -> np.ndarray:
    """Each probability's histogram bin (float32 scores, as stored: the same bins wherever
    they are computed)."""
    p = np.clip(np.asarray(probabilities, dtype=np.float32).astype(np.float64), 1e-12, 1 - 1e-12)
    logits = np.clip(np.log(p / (1 - p)), -LOGIT_LIMIT, LOGIT_LIMIT)
    return np.floor(logits * BINS_PER_LOGIT).astype(np.int64)


def bin_floor(index: int) -> float:
    """The smallest probability in a bin."""
    return 1 / (1 + math.exp(-index / BINS_PER_LOGIT))


def histogram(scores: Sequence[float | None]) -> dict[str, int]:
    """Documents per score bin (sparse; keys are bin numbers as strings, for JSON)."""
    values = [score for score in scores if score is not None]
    bins, counts = np.unique(score_bins(values), return_counts=True)
    return {str(b): int(c) for b, c in zip(bins.tolist(), counts.tolist(), strict=True)}


@dataclass(frozen=True)
class TopShare:
    """Where a crawl's top share starts: the documents in bins above ``first_bin`` are kept,
    and of those in it (scores tied at the histogram's resolution, such as a confident model's
    1.0), the ``tie_share`` whose seeded hash of their id is smallest."""

    first_bin: int
    threshold: float  # the bin's smallest probability
    tie_share: float
    kept: int  # expected: the bins above, and the tie share of the first
    scored: int

    @property
    def kept_share(self) -> float:
        return self.kept / self.scored if self.scored else 0.0

    def keeps(self, bins: np.ndarray, doc_ids: Sequence[str]) -> np.ndarray:
        kept = bins > self.first_bin
        for index in np.flatnonzero(bins == self.first_bin):
            kept[index] = tie_rank(doc_ids[index]) < self.tie_share
        return kept


def tie_rank(doc_id: str) -> float:
    """A document's place in [0, 1) among tied scores: a hash of its id, the same wherever it
    is computed."""
    return xxhash.xxh3_64_intdigest(doc_id.encode(), seed=TIE_SEED) / 2**64


def top_share(counts: dict[str, int], share: float) -> TopShare:
    """Where the ``share`` of scored documents with the highest scores starts: deterministic,
    and exact up to one document per crawl in expectation (ties broken by a hash of the id)."""
    bins = sorted(((int(k), v) for k, v in counts.items()), reverse=True)
    scored = sum(v for _, v in bins)
    if not bins:
        return TopShare(int(score_bins([1.0])[0]) + 1, 1.0, 0.0, 0, 0)
    wanted, above = share * scored, 0
    for index, count in bins:
        if above + count >= wanted:
            tie_share = (wanted - above) / count
            return TopShare(index, bin_floor(index), tie_share, round(wanted), scored)
        above += count
    return TopShare(bins[-1][0], bin_floor(bins[-1][0]), 1.0, scored, scored)


# -- stored scores -----------------------------------------------------------------------------


def score_file(classifier: str) -> str:
    """A part's scores by one classifier, in the `scored` zone."""
    return f"{classifier}.parquet"


def part_scores(lake: Lake, unit, part: int, columns: Sequence[str]) -> pl.DataFrame:
    """``doc_id`` and the score ``columns`` (``<classifier>.<label>``) of one file of a unit,
    in the order of its extracted documents."""
    from tokenmill.storage.layout import SCORED
    from tokenmill.storage.outputs import MissingInputError, read_batches, require_committed

    prefix = unit.part_prefix(SCORED, part)
    require_committed(lake, prefix, f"scored {unit} file {part}")
    frame = None
    by_classifier: dict[str, list[str]] = {}
    for column in columns:
        classifier, _, label = column.partition(".")
        by_classifier.setdefault(classifier, []).append(label)
    for classifier, labels in sorted(by_classifier.items()):
        key = f"{prefix}/{score_file(classifier)}"
        if not lake.exists(key):
            raise MissingInputError(
                f"classifier {classifier} has no scores for {unit} file {part}: declare it in "
                "the score section and materialize scored"
            )
        batches = [pl.from_arrow(b) for b in read_batches(lake, key)]
        scores = pl.concat(batches) if batches else None
        stored = [c for c in (scores.columns if scores is not None else []) if c != "doc_id"]
        missing = [label for label in labels if scores is not None and label not in stored]
        if missing:
            raise MissingInputError(
                f"classifier {classifier} stores no label {', '.join(missing)}; stored: {stored}"
            )
        if scores is None:
            scores = pl.DataFrame(
                {"doc_id": pl.Series([], dtype=pl.String)}
                | {label: pl.Series([], dtype=pl.Float32) for label in labels}
            )
        scores = scores.select(
            "doc_id", *(pl.col(label).alias(f"{classifier}.{label}") for label in labels)
        )
        frame = scores if frame is None else frame.hstack(scores.drop("doc_id"))
    return frame


def with_scores(docs: pl.DataFrame, scores: pl.DataFrame, offset: int) -> pl.DataFrame:
    """A batch of a part's extracted documents (starting at row ``offset``) with their
    scores, which are stored in the same order."""
    rows = scores.slice(offset, docs.height)
    if rows.height != docs.height or not rows["doc_id"].equals(docs["doc_id"]):
        raise ValueError(
            "the stored scores do not match the extracted documents (rematerialize scored)"
        )
    return docs.hstack(rows.drop("doc_id"))


# The file of a crawl's score_distribution: each classifier label's summed score histogram.
DISTRIBUTION_FILE = "distribution.json"


def crawl_top_share(lake, crawl: str, classifier: str, label: str, share: float) -> TopShare:
    """Where `share` of the crawl's documents scored highest by a classifier's label start."""
    from tokenmill.storage.layout import SCORE_DISTRIBUTION, crawl_prefix
    from tokenmill.storage.outputs import MissingInputError, require_committed

    prefix = crawl_prefix(SCORE_DISTRIBUTION, crawl)
    require_committed(lake, prefix, f"score_distribution of crawl {crawl}")
    distribution = lake.read_json(f"{prefix}/{DISTRIBUTION_FILE}")
    entry = distribution["classifiers"].get(classifier)
    if entry is None or label not in entry["histograms"]:
        raise MissingInputError(
            f"the score_distribution of crawl {crawl} has no scores of {classifier}.{label}: "
            "materialize scored and score_distribution with the classifier declared"
        )
    return top_share(entry["histograms"][label], share)
