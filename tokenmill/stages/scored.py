"""scored: every declared classifier's scores of every extracted document, per unit file —
shared by all recipes, read from the stored text, never from the WARC.

Each part commits one `<classifier>.parquet` per classifier (`doc_id` and a float column per
label, in the order of `extracted`'s documents; null for a document with nothing to score) and
counts, per classifier, its version (a fastText model's SHA-256), the documents scored and not,
and each label's score histogram (`tokenmill.classifiers.scoring`), which `score_distribution` sums
per crawl. A re-run scores again only the classifiers whose version or extracted input changed: the
others' committed files are carried over as they are. Recipes threshold the scores in
`cleaned`, so a recipe change never re-scores.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa

from tokenmill.classifiers.scoring import (
    Classifier,
    histogram,
    load_scorer,
    model_file,
    model_location,
    score_file,
    short_label,
)
from tokenmill.runtime.stage import (
    Pod,
    Scope,
    Stage,
    Work,
    check_unique_names,
    digest,
    parsed_items,
    setting,
)
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import EXTRACTED, MARKER, SCORED
from tokenmill.storage.outputs import StageReport, read_batches, require_committed

DOCS_FILE = "docs.parquet"


@dataclass(frozen=True)
class ScoreSettings:
    classifiers: list[dict] = setting(
        [],
        "Classifiers scoring every extracted document: {name, model: a fastText .bin/.ftz (a "
        "lake key, or a path or URI under TOKENMILL_CLASSIFIER_PATHS), labels: the labels to "
        "store (default: all), sha256: the model's, pinned (optional)}, or {name, scorer: "
        "dotted path of a plug-in scorer class in the allowed filter modules, params}",
    )

    def __post_init__(self):
        check_unique_names([c.name for c in self.declared()], "score.classifiers")

    def declared(self) -> list[Classifier]:
        return parsed_items(self.classifiers, Classifier.parse, "score.classifiers")


def models(lake: Lake, settings, _unit=None) -> str | None:
    """Each declared model (its pinned SHA-256, else where it is, its size and time) or plug-in
    scorer (its version): read from outside the lake's lineage, so a model replaced under the
    same name is scored again. None (a model outside the lake and this machine): never kept."""
    versions = {}
    for classifier in (settings or ScoreSettings()).declared():
        if not classifier.model:
            versions[classifier.name] = str(load_scorer(lake, classifier).version)
            continue
        if classifier.sha256:
            versions[classifier.name] = classifier.sha256
            continue
        in_lake, where = model_location(lake, classifier.model)
        if not in_lake and "://" in where:
            return None
        try:
            stat = None if in_lake else os.stat(where)
            stamp = lake.stamp(where) if in_lake else (stat.st_size, stat.st_mtime_ns)
        except OSError:
            return None
        versions[classifier.name] = [where, *stamp]
    return digest(versions)


def run(work: Work) -> StageReport:
    settings = work.settings or ScoreSettings()
    lake = work.lake
    extracted = require_committed(
        lake, work.input(EXTRACTED), f"extracted {work.unit} file {work.part}"
    )
    source = extracted["outputs"][DOCS_FILE]["sha256"]
    previous = _previous(work)
    report = StageReport()
    report.records_in = report.records_out = extracted["records_out"]
    report.counts["classifiers"] = {}
    todo, carried, loaded = [], {}, {}
    for classifier in settings.declared():
        if classifier.model:
            version = model_file(lake, classifier)[1]  # not loaded unless it scores
        else:
            loaded[classifier.name] = load_scorer(lake, classifier)
            version = str(loaded[classifier.name].version)
        before = previous.get("counts", {}).get("classifiers", {}).get(classifier.name, {})
        name = score_file(classifier.name)
        same_labels = before.get("declared_labels") == list(classifier.labels)
        if before.get("version") == version and before.get("extracted") == source and same_labels:
            histograms = previous["counts"].get("score_histograms", {}).get(classifier.name, {})
            carried[classifier.name] = (
                lake.read_bytes(f"{work.output}/{name}"),
                before,
                histograms,
            )
        else:
            todo.append(classifier)
    # all checked before anything is written
    scorers = [loaded.get(c.name) or load_scorer(lake, c) for c in todo]
    with work.writer(report) as out:
        for classifier_name, (data, before, histograms) in carried.items():
            out.open(score_file(classifier_name)).write(data)
            report.counts["classifiers"][classifier_name] = before | {"carried_over": 1}
            for label, counts in histograms.items():
                _add_histogram(report, classifier_name, label, counts)
        if todo:
            _score(work, todo, scorers, source, report, out)
    return report


def _score(work: Work, todo, scorers, source: str, report: StageReport, out) -> None:
    sinks = {
        c.name: out.parquet(
            score_file(c.name),
            pa.schema(
                [("doc_id", pa.string())]
                + [(short_label(label), pa.float32()) for label in scorer.labels]
            ),
        )
        for c, scorer in zip(todo, scorers, strict=True)
    }
    info = {
        c.name: {
            "version": s.version,
            "extracted": source,
            "declared_labels": list(c.labels),
            "scored": 0,
            "unscored": 0,
        }
        for c, s in zip(todo, scorers, strict=True)
    }
    docs = f"{work.input(EXTRACTED)}/{DOCS_FILE}"
    for batch in read_batches(work.lake, docs, ["doc_id", "text"]):
        texts = batch.column("text").to_pylist()
        for classifier, scorer in zip(todo, scorers, strict=True):
            scores = scorer(texts)
            columns = {"doc_id": batch.column("doc_id")}
            for label in scorer.labels:
                columns[short_label(label)] = pa.array(scores[label], pa.float32())
                _add_histogram(report, classifier.name, label, histogram(scores[label]))
            sinks[classifier.name].write_table(pa.table(columns))
            blank = sum(value is None for value in scores[scorer.labels[0]])
            info[classifier.name]["scored"] += batch.num_rows - blank
            info[classifier.name]["unscored"] += blank
    report.counts["classifiers"].update(info)


def _add_histogram(report: StageReport, classifier: str, label: str, counts: dict) -> None:
    into = report.counts.setdefault("score_histograms", {}).setdefault(classifier, {})
    into = into.setdefault(short_label(label), {})
    for key, count in counts.items():
        into[key] = into.get(key, 0) + count


def _previous(work: Work) -> dict:
    marker = f"{work.output}/{MARKER}"
    return work.lake.read_json(marker) if work.lake.exists(marker) else {}


STAGE = Stage(
    name=SCORED,
    scope=Scope.UNIT,
    run=run,
    settings=ScoreSettings,
    upstream=(EXTRACTED,),
    group="extract",
    kinds=("parquet",),
    # each worker holds the models (a fastText model at DCLM's size is ~1 GB)
    pod=Pod("2", "6Gi", "2", "8Gi"),
    shared=True,
    outside=models,
    description="Every declared classifier's scores of every extracted document (one Parquet "
    "file per classifier, by doc_id): the model-based quality signals recipes threshold.",
)
